"""Chapter 3's checks accept every right way of writing an answer, not only the lesson's solution, and run a
kernel where the machine allows (nvcc, then the GPU or the CPU)."""

import numpy as np
import pytest

from gpukit.exercises import check, cupy
from gpukit.topics.host_kernels import HostKernel
from tests.exercises.cases.cupy import SQUARED_DIFF, SQUARED_DIFF_GRID_STRIDE, run_saxpy_python_int_n

needs_a_compiler = pytest.mark.skipif(not HostKernel.can_compile(), reason="no C++ compiler here")


@needs_a_compiler
def test_a_grid_stride_kernel_passes():
    assert check("ex-cupy-rawkernel", SQUARED_DIFF_GRID_STRIDE)


@needs_a_compiler
def test_other_right_launches_pass():
    def rounded_up_by_negation(kernel, alpha, x, y, out):
        threads = 128
        kernel((-(-x.size // threads),), (threads,), (np.float32(alpha), x, y, out, np.int32(len(x))))

    assert check("ex-cupy-launch", rounded_up_by_negation)
    assert check("ex-cupy-launch", run_saxpy_python_int_n)  # a Python int reaches an int parameter right


def test_without_a_gpu_or_a_compiler_the_kernel_check_says_it_cannot_run(monkeypatch):
    monkeypatch.setattr(cupy, "cupy_gpu", lambda: None)
    monkeypatch.setattr(HostKernel, "can_compile", staticmethod(lambda: False))
    monkeypatch.setattr(cupy, "_SOURCE_RUNS", {})
    monkeypatch.setattr(cupy, "find_nvcc", lambda: None)
    result = check("ex-cupy-rawkernel", SQUARED_DIFF)
    assert not result and "cannot run it" in result.message


# ------------------------------------------------------------------ the GPU branch, with a stand-in for CuPy
class FakeRawKernel:
    """Runs the exercise's kernels with NumPy on the memory around the arrays it is given, as a GPU would: a
    thread past the end writes into whatever follows (here the checker's guard zones)."""

    def __init__(self, source, name):
        self.source, self.name = source, name

    @staticmethod
    def _whole(view):
        base = view.base if view.base is not None else view
        offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // view.itemsize
        return base, offset

    def __call__(self, grid, block, args):
        threads = grid[0] * block[0]
        guarded = "i < n" in self.source
        if self.name == "squared_diff":
            x, y, out, n = args
            (xs, xo), (ys, yo), (outs, oo) = self._whole(x), self._whole(y), self._whole(out)
            for i in range(threads):
                if not guarded or i < n:
                    outs[oo + i] = (xs[xo + i] - ys[yo + i]) ** 2
        else:  # saxpy: a scalar arrives as the first 4 bytes of what CuPy sends
            alpha, x, y, out, n = args
            sent = np.float64(alpha) if isinstance(alpha, float) else alpha
            alpha32 = np.frombuffer(np.asarray(sent).tobytes()[:4], dtype=np.float32)[0]
            count = min(threads, int(n))
            out[:count] = alpha32 * x[:count] + y[:count]


class FakeCupy:
    ndarray = np.ndarray
    RawKernel = FakeRawKernel
    asarray = staticmethod(np.asarray)
    asnumpy = staticmethod(np.asarray)

    @staticmethod
    def full(size, value, dtype):
        return np.full(size, value, dtype=dtype)

    class cuda:
        class Device:
            def synchronize(self):
                pass


@pytest.fixture
def fake_gpu(monkeypatch):
    monkeypatch.setattr(cupy, "cupy_gpu", lambda: FakeCupy)
    monkeypatch.setattr(HostKernel, "can_compile", staticmethod(lambda: False))  # the GPU branch alone
    monkeypatch.setattr(cupy, "find_nvcc", lambda: None)
    monkeypatch.setattr(cupy, "_SOURCE_RUNS", {})


def test_on_a_gpu_a_right_kernel_passes_and_one_past_the_end_is_caught(fake_gpu):
    assert check("ex-cupy-rawkernel", SQUARED_DIFF)
    unguarded = SQUARED_DIFF.replace("if (i < n) {", "{")
    result = check("ex-cupy-rawkernel", unguarded)
    assert not result and "wrote 24 element(s) past the end of out" in result.message


def test_on_a_gpu_the_launch_is_checked_with_the_real_kernel_and_cupy_arrays(fake_gpu):
    from tests.exercises.cases.cupy import run_saxpy, run_saxpy_python_float, run_saxpy_too_few_blocks

    assert check("ex-cupy-launch", run_saxpy)
    few = check("ex-cupy-launch", run_saxpy_too_few_blocks)
    assert not few and "round the number of blocks up" in few.message
    python_float = check("ex-cupy-launch", run_saxpy_python_float)
    assert not python_float and "a Python float" in python_float.message
