"""A CUDA kernel run on the CPU, thread after thread, called as cupy.RawKernel is: results, the writes that fall
outside an array, the bytes scalar arguments arrive as, and the launches CuPy or a GPU would refuse."""

from __future__ import annotations

import numpy as np
import pytest

from gpukit.topics import host_kernels
from gpukit.topics.host_kernels import HostCompileError, HostKernel, HostLaunchError, Param, check_kernel_arguments

pytestmark = pytest.mark.skipif(not HostKernel.can_compile(), reason="no C++ compiler here")

SAXPY = r"""
extern "C" __global__
void saxpy(float alpha, const float* x, const float* y, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = alpha * x[i] + y[i];
    }
}
"""
N = 1000


def arrays():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    return x, y, np.full(N, np.nan, dtype=np.float32)


@pytest.fixture(scope="module")
def saxpy():
    return HostKernel(SAXPY, "saxpy")


def test_a_guarded_kernel_computes_every_element_and_stays_inside(saxpy):
    x, y, out = arrays()
    x_before = x.copy()
    saxpy((8,), (128,), (np.float32(2.0), x, y, out, np.int32(N)))
    np.testing.assert_allclose(out, 2 * x + y, rtol=1e-6)
    assert np.array_equal(x, x_before)
    assert saxpy.outside_writes == [] and saxpy.notes == []
    assert [p.ctype for p in saxpy.params] == ["float", "const float*", "const float*", "float*", "int"]
    assert repr(saxpy) == "HostKernel(saxpy(float, const float*, const float*, float*, int))"


@pytest.mark.parametrize(("old", "new", "before", "after"), [
    ("if (i < n) {", "{", 0, 24),  # no bounds check: 1024 threads for 1000 elements
    ("i < n", "i <= n", 0, 1),  # off by one
    ("out[i] =", "out[i - 1] =", 1, 0),  # before the start
])
def test_writes_outside_an_array_are_reported_not_made(old, new, before, after):
    kernel = HostKernel(SAXPY.replace(old, new), "saxpy")
    x, y, out = arrays()
    kernel((8,), (128,), (np.float32(2.0), x, y, out, np.int32(N)))
    assert [(w.argument, w.before, w.after) for w in kernel.outside_writes] == [(3, before, after)]
    assert "float* out" not in str(kernel.outside_writes[0]) and "argument 3 (float*)" in str(kernel.outside_writes[0])


def test_a_python_float_arrives_as_cupy_sends_it(saxpy):
    """CuPy passes a Python float as an 8-byte double; a float parameter reads its first 4 bytes (0 for 2.0)."""
    x, y, out = arrays()
    saxpy((8,), (128,), (2.0, x, y, out, N))
    np.testing.assert_array_equal(out, y)  # alpha arrived as 0.0: the low half of the double 2.0
    assert "Python float" in saxpy.notes[0] and "dtype float32" in saxpy.notes[0]
    assert "np.float32(" not in saxpy.notes[0]  # the note names the type, not the line that fixes it
    assert "Python int" in saxpy.notes[1]  # n arrived right, on a little-endian machine, but is noted


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda k, x, y, o: k((8,), (128,), (x, y, o, np.int32(N))), TypeError, "takes 5 arguments"),
    (lambda k, x, y, o: k((8,), (128,), (np.float32(2), x.astype(np.float64), y, o, np.int32(N))), TypeError,
     "float64 array"),
    (lambda k, x, y, o: k((8,), (128,), (x, x, y, o, np.int32(N))), TypeError, "reaches the kernel as a pointer"),
    (lambda k, x, y, o: k((8,), (128,), (np.float32(2), 1.0, y, o, np.int32(N))), TypeError, "pass a NumPy array"),
    (lambda k, x, y, o: k((8,), (128,), (np.float32(2), x[::2], y[::2], o[::2], np.int32(N // 2))), TypeError,
     "not contiguous"),
    (lambda k, x, y, o: k(8, 128, (np.float32(2), x, y, o, np.int32(N))), TypeError, "grid must be a tuple"),
    (lambda k, x, y, o: k([8], [128], (np.float32(2), x, y, o, np.int32(N))), TypeError, "grid must be a tuple"),
    (lambda k, x, y, o: k((1,), (2048,), (np.float32(2), x, y, o, np.int32(N))), ValueError, "CUDA's 1024"),
    (lambda k, x, y, o: k((1 << 20,), (1024,), (np.float32(2), x, y, o, np.int32(N))), ValueError,
     "more than the CPU stand-in runs"),
    (lambda k, x, y, o: k((8,), (128,), [np.float32(2), x, y, o, np.int32(N)], shared_mem=64), ValueError,
     "shared memory"),
    (lambda k, x, y, o: k((8,), (128,), np.float32(2)), TypeError, "args must be a tuple"),
])
def test_launches_that_would_crash_or_fail_are_refused_with_a_reason(saxpy, call, error, message):
    x, y, out = arrays()
    with pytest.raises(error, match=message):
        call(saxpy, x, y, out)


def test_a_grid_of_zero_blocks_runs_one_as_cupy_does(saxpy):
    x, y, out = arrays()
    saxpy((0,), (128,), (np.float32(1.0), x, y, out, np.int32(N)))
    assert np.isfinite(out[:128]).all() and np.isnan(out[128:]).all()


def test_two_dimensional_grids_and_blocks():
    source = r"""
    extern "C" __global__ void index_of(int* out, int width, int height) {
        int col = blockIdx.x * blockDim.x + threadIdx.x;
        int row = blockIdx.y * blockDim.y + threadIdx.y;
        if (col < width && row < height) out[row * width + col] = row * 1000 + col;
    }
    """
    kernel = HostKernel(source, "index_of")
    out = np.zeros((5, 7), dtype=np.int32)
    kernel((2, 3), (4, 2), (out, np.int32(7), np.int32(5)))
    rows, cols = np.indices((5, 7))
    assert np.array_equal(out, rows * 1000 + cols) and kernel.outside_writes == []


def test_parameter_types_are_named_as_the_compiler_sees_them():
    source = ('extern "C" __global__ void k(const double* __restrict__ a, unsigned long long* b, size_t n, '
              "const int m, bool flag) { }")
    kernel = HostKernel(source, "k")
    assert [p.ctype for p in kernel.params] == ["const double*", "unsigned long long*", "unsigned long", "int",
                                                 "bool"]
    assert [str(p.dtype) for p in kernel.params] == ["float64", "uint64", "uint64", "int32", "bool"]


def test_a_kernel_cupy_could_not_find_is_refused():
    with pytest.raises(LookupError, match='extern "C"'):
        HostKernel(SAXPY.replace('extern "C"', ""), "saxpy")


@pytest.mark.parametrize(("source", "message"), [
    (SAXPY.replace("y[i];", "z[i];"), r"kernel\.cu:6:.*'z' was not declared|kernel\.cu:6:.*z"),
    (SAXPY.replace("int i =", "__syncthreads(); int i ="), "cannot run __syncthreads"),
    (SAXPY.replace("int i =", "__shared__ float tile[128]; int i ="), "__shared__ memory"),
    (SAXPY, "saxpy_other"),
])
def test_compile_errors_carry_the_compilers_message(source, message):
    with pytest.raises(HostCompileError, match=message):
        HostKernel(source, "saxpy_other" if message == "saxpy_other" else "saxpy")


def test_a_kernel_that_crashes_its_process_raises_instead_of_killing_python():
    kernel = HostKernel(SAXPY.replace("out[i] =", "out[i * 100000000] =").replace("if (i < n)", ""), "saxpy")
    x, y, out = arrays()
    with pytest.raises(HostLaunchError, match="crashed"):
        kernel((8,), (128,), (np.float32(2), x, y, out, np.int32(N)))


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="__global__"):
        HostKernel("int main() {}", "main")
    with pytest.raises(ValueError, match="name"):
        HostKernel(SAXPY, "sax py")


def test_without_a_compiler_the_error_says_so(monkeypatch):
    monkeypatch.setattr(host_kernels, "cxx_compiler", lambda: None)
    assert not HostKernel.can_compile()
    with pytest.raises(FileNotFoundError, match="no C\\+\\+ compiler"):
        HostKernel(SAXPY.replace("alpha *", "alpha * 1.0f *"), "saxpy")  # a source not compiled before


def test_argument_checks_work_for_any_array_type():
    """The same checks guard a real cupy.RawKernel on a GPU; here with a stand-in array type."""

    class DeviceArray(np.ndarray):
        pass

    params = [Param("float"), Param("const float*"), Param("int")]
    device_x = np.zeros(4, dtype=np.float32).view(DeviceArray)
    assert check_kernel_arguments(params, (np.float32(1), device_x, np.int32(4)), array_type=DeviceArray,
                                  library="CuPy") == []
    with pytest.raises(TypeError, match="pass a CuPy array"):
        check_kernel_arguments(params, (np.float32(1), [0.0], np.int32(4)), array_type=DeviceArray, library="CuPy")
    notes = check_kernel_arguments(params, (np.float64(1), device_x, np.int32(4)), array_type=DeviceArray,
                                   library="CuPy")
    assert "a NumPy float64" in notes[0] and "4-byte float" in notes[0]
    assert check_kernel_arguments(params, (np.array([1.0], dtype=np.float32), device_x, np.int32(4)),
                                  array_type=DeviceArray, library="CuPy") == []  # a NumPy array of size one
