"""Chapter 3 (CuPy): each exercise's solution and wrong answers, for tests/exercises/test_every_exercise.py.

The kernel exercises run on the CPU here (gpukit.topics.host_kernels) and through CuPy on a GPU; the wrong answers
are the classic mistakes: no bounds check, an off-by-one bounds check, an index without the block, float64
pointers, a kernel that C++ renames, too few blocks, a Python float for a float parameter.
"""

import numpy as np
import pytest

from gpukit.core.device import pick_device
from gpukit.topics.host_kernels import HostKernel
from tests.exercises.cases import named


def _namespace():
    return pytest.importorskip("array_api_compat").array_namespace


def softmax_any(x):
    """The lesson's solution: array-API code that runs on NumPy, torch, CuPy and JAX arrays."""
    xp = _namespace()(x)
    e = xp.exp(x - xp.max(x, axis=-1, keepdims=True))
    return e / xp.sum(e, axis=-1, keepdims=True)


def softmax_numpy_only(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def softmax_wrong_axis(x):
    xp = _namespace()(x)
    e = xp.exp(x)
    return e / xp.sum(e, axis=0, keepdims=True)


def softmax_in_float64(x):
    xp = _namespace()(x)
    return softmax_any(xp.astype(x, xp.float64))


def softmax_that_fails(x):
    raise RuntimeError("not written yet")


SQUARED_DIFF = r"""
extern "C" __global__
void squared_diff(const float* x, const float* y, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float d = x[i] - y[i];
        out[i] = d * d;
    }
}
"""

SQUARED_DIFF_GRID_STRIDE = r"""
extern "C" __global__
void squared_diff(const float* __restrict__ x, const float* __restrict__ y, float* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        out[i] = (x[i] - y[i]) * (x[i] - y[i]);
    }
}
"""


def kernel_wrong(old, new):
    assert old in SQUARED_DIFF
    return SQUARED_DIFF.replace(old, new)


def run_saxpy(kernel, alpha, x, y, out):
    """The lesson's solution of ex-cupy-launch."""
    threads = 128
    blocks = (x.size + threads - 1) // threads
    kernel((blocks,), (threads,), (np.float32(alpha), x, y, out, np.int32(x.size)))


def run_saxpy_too_few_blocks(kernel, alpha, x, y, out):
    threads = 128
    kernel((x.size // threads,), (threads,), (np.float32(alpha), x, y, out, np.int32(x.size)))


def run_saxpy_python_float(kernel, alpha, x, y, out):
    threads = 128
    kernel(((x.size + threads - 1) // threads,), (threads,), (alpha, x, y, out, np.int32(x.size)))


def run_saxpy_python_int_n(kernel, alpha, x, y, out):
    """A Python int for ``int n`` reaches the kernel right (its first 4 bytes, little-endian): accepted."""
    threads = 128
    kernel(((x.size + threads - 1) // threads,), (threads,), (np.float32(alpha), x, y, out, x.size))


def run_saxpy_ints_for_grid(kernel, alpha, x, y, out):
    kernel((x.size + 127) // 128, 128, (np.float32(alpha), x, y, out, np.int32(x.size)))


def run_saxpy_forgot_alpha(kernel, alpha, x, y, out):
    kernel(((x.size + 127) // 128,), (128,), (x, y, out, np.int32(x.size)))


def run_saxpy_float64_input(kernel, alpha, x, y, out):
    kernel(((x.size + 127) // 128,), (128,), (np.float32(alpha), x.astype(np.float64), y, out, np.int32(x.size)))


def run_saxpy_never(kernel, alpha, x, y, out):
    out[...] = alpha * x + y


def run_saxpy_huge_block(kernel, alpha, x, y, out):
    kernel((1,), (2 * x.size,), (np.float32(alpha), x, y, out, np.int32(x.size)))


def run_saxpy_256_threads(kernel, alpha, x, y, out):
    """Right values, but the exercise asks for 128 threads per block."""
    kernel(((x.size + 255) // 256,), (256,), (np.float32(alpha), x, y, out, np.int32(x.size)))


def run_saxpy_into_its_own_array(kernel, alpha, x, y, out):
    """Launches over every element, into an array of its own that it returns: out stays unwritten."""
    mine = out.copy()
    kernel(((x.size + 127) // 128,), (128,), (np.float32(alpha), x, y, mine, np.int32(x.size)))
    return mine


def run_saxpy_one_block_more(kernel, alpha, x, y, out):
    """Right for 1000 elements; for a multiple of 128 it launches a block with no element (chapter 9's rule)."""
    kernel((x.size // 128 + 1,), (128,), (np.float32(alpha), x, y, out, np.int32(x.size)))


def _needs_a_cpp_compiler():
    if not HostKernel.can_compile():
        pytest.skip("no C++ compiler here to run kernels on the CPU")


def _rawkernel_solution():
    _needs_a_cpp_compiler()
    return SQUARED_DIFF, {}


def _launch_solution():
    _needs_a_cpp_compiler()
    return run_saxpy, {}


def _rawkernel_wrong_answers():
    _needs_a_cpp_compiler()
    return [
        (kernel_wrong("if (i < n) {", "{"), "past the end of out"),  # no bounds check
        (kernel_wrong("i < n", "i <= n"), "1 element(s) past the end of out"),  # off by one
        (kernel_wrong("int i = blockIdx.x * blockDim.x + threadIdx.x;", "int i = threadIdx.x;"),
         "never written (the first at index 128)"),
        (kernel_wrong("const float* x, const float* y, float* out", "const double* x, const double* y, double* out"),
         "float32 arrays"),
        (kernel_wrong('extern "C" ', ""), 'extern "C"'),
        (kernel_wrong("out[i] = d * d;", "out[i] = d * d * d;"), "values differ"),
        (kernel_wrong("float d", "flaot d"), "rejected"),
        (kernel_wrong("squared_diff(", "squared_difference("), "squared_diff"),
        (named("kernel_without_global", SQUARED_DIFF.replace("__global__", "")), "no __global__"),
        (np.zeros(3), "expected the kernel's source"),
    ]


def _launch_wrong_answers():
    _needs_a_cpp_compiler()
    return [
        (run_saxpy_too_few_blocks, "round the number of blocks up"),
        (run_saxpy_python_float, "a Python float"),
        (run_saxpy_ints_for_grid, "grid must be a tuple"),
        (run_saxpy_forgot_alpha, "takes 5 arguments"),
        (run_saxpy_float64_input, "float64 array"),
        (run_saxpy_never, "never launched"),
        (run_saxpy_huge_block, "more than CUDA's 1024"),
        (run_saxpy_256_threads, "asks for 128"),
        (run_saxpy_into_its_own_array, "an array of your own"),
        (run_saxpy_one_block_more, "no element at all"),
        ("run_saxpy", "expected your function itself"),
    ]


PREDICT_N = 512


def predicted_ms(peak_flops, bandwidth, n=PREDICT_N):
    """The lesson's solution of ex-cupy-predict-matmul."""
    return 1e3 * max(2 * n**3 / peak_flops, 3 * 4 * n * n / bandwidth)


def prediction_with(flops, nbytes):
    return lambda peak_flops, bandwidth: 1e3 * max(flops / peak_flops, nbytes / bandwidth)


def prediction_that_raises(peak_flops, bandwidth):
    return 1e3 * 2 * n**3 / peak_flops  # noqa: F821 - the classic slip: n is the lesson's, not defined here


SOLUTIONS = {
    "ex-cupy-softmax": lambda: (softmax_any, {}),
    "ex-cupy-rawkernel": _rawkernel_solution,
    "ex-cupy-launch": _launch_solution,
    "ex-cupy-predict-matmul": lambda: (predicted_ms, {"device": pick_device(), "n": PREDICT_N}),
}

WRONG_ANSWERS = {
    "ex-cupy-softmax": lambda: [
        (softmax_numpy_only, "on a torch tensor"),
        (softmax_wrong_axis, "values differ"),
        (softmax_in_float64, "dtype is torch.float64"),
        (softmax_that_fails, "raised RuntimeError"),
        (np.array([0.1, 0.2]), "expected a function"),
    ],
    "ex-cupy-rawkernel": _rawkernel_wrong_answers,
    "ex-cupy-launch": _launch_wrong_answers,
    "ex-cupy-predict-matmul": lambda: [
        (prediction_with(PREDICT_N**3, 12 * PREDICT_N**2), "multiply-add"),
        (prediction_with(2 * PREDICT_N**3, 4 * PREDICT_N**2), "one matrix only"),
        (prediction_with(2 * PREDICT_N**3, 24 * PREDICT_N**2), "8 bytes per element"),
        (lambda peak_flops, bandwidth: predicted_ms(peak_flops, bandwidth) / 1e3, "a thousand times off"),
        (lambda peak_flops, bandwidth: None, "replace the placeholder"),
        (prediction_that_raises, "raised NameError"),
        (predicted_ms(1e12, 1e11), "expected your function itself"),
        (lambda peak_flops, bandwidth: 1.0, "too"),
    ],
}


# The planted device mistakes (tests/exercises/test_planted_device_mistakes.py).
DEVICE_MISTAKES = {
    "ex-cupy-softmax": {
        "softmax_numpy_only": "wrote it with NumPy's functions, which work on host arrays only: a CuPy array or a "
                              "torch tensor on a GPU is refused (or, through __array__, copied to the host)",
    },
    "ex-cupy-rawkernel": {
        "kernel_without_global": "left out __global__, so squared_diff is compiled as host code and there is no "
                                 "kernel to launch on the device",
    },
    "ex-cupy-launch": {
        "run_saxpy_python_float": "passed alpha as a Python float: the host sends the kernel's float parameter the "
                                  "8 bytes of a double, which the device reads as a wrong value",
    },
}
