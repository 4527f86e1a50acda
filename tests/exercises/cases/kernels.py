"""Chapter 9 (writing GPU kernels): each exercise's solution, and wrong kernels and launches (no bounds guard, no
mask, a wrong index, a grid rounded down or one block too many, the result left on the device, the wrong dtype)
that the checks must reject with a message naming what is wrong.

The kernels are made inside functions, after the simulator or interpreter is switched on (where there is no
CUDA GPU), so that importing this module imports neither numba nor triton. Where one is not installed, the
exercise's tests skip.
"""

import os
from functools import cache

import numpy as np
import pytest

from gpukit.core.device import cuda_available
from gpukit.topics.simulators import use_cuda_simulator
from tests.support.exercise_cases import on_the_lessons_device, prediction_slips, roofline_mistakes


@cache
def numba_kernels():
    use_cuda_simulator()  # before numba is first imported, or it takes no effect
    pytest.importorskip("numba")
    from numba import cuda

    from tests.support import numba_kernels_for_exercises as k

    @cuda.jit
    def saxpy_as_array_code(a, x, y, out):  # NumPy's way: every thread does every item; no GPU compiles it
        out[:] = a * x + y

    return {"array code": saxpy_as_array_code, "right": k.saxpy, "no guard": k.saxpy_without_guard,
            "thread index": k.saxpy_thread_index_only,
            "formula": k.axpy_wrong_formula, "plain": k.plain_saxpy, "launch": k.apply_kernel,
            "rounded down": k.apply_kernel_rounding_down, "one block more": k.apply_kernel_one_block_more,
            "swapped": k.apply_kernel_swapped, "on the device": k.apply_kernel_left_on_the_device,
            "float64": k.apply_kernel_in_float64, "fixed grid": k.apply_kernel_fixed_grid}


@cache
def triton_kernels():
    if not cuda_available():  # Triton's interpreter, switched on before the kernels below are decorated
        os.environ["TRITON_INTERPRET"] = "1"
    pytest.importorskip("triton")
    import triton
    import triton.language as tl

    @triton.jit
    def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)

    @triton.jit
    def relu_without_mask(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets), 0.0))

    @triton.jit
    def relu_first_block_only(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)  # forgot the program's start: every program does items 0..BLOCK-1
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)

    @triton.jit
    def abs_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.abs(tl.load(x_ptr + offsets, mask=mask)), mask=mask)

    @triton.jit
    def relu_with_numpy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # a host function: no GPU compiles it
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, np.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)

    @triton.jit
    def relu_two_pointers(x_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offsets, 0.0, mask=offsets < n)

    return {"right": relu_kernel, "no mask": relu_without_mask, "no program id": relu_first_block_only,
            "abs": abs_kernel, "signature": relu_two_pointers, "numpy": relu_with_numpy}


ADD_SIZE = 2**26


def predicted_ms(peak_flops, bandwidth, k=ADD_SIZE):
    """The lesson's solution of ex-kernels-predict-add."""
    return 1e3 * max(k / peak_flops, 3 * 4 * k / bandwidth)


def kernels_and_words(kernels: dict, words: dict[str, str]) -> list[tuple]:
    """(the kernel ``kernels`` holds under each name of ``words``, its word) for each."""
    return [(kernels[name], word) for name, word in words.items()]


SOLUTIONS = {
    "ex-kernels-predict-add": lambda: (predicted_ms, on_the_lessons_device(k=ADD_SIZE)),
    "ex-kernels-launch": lambda: (numba_kernels()["launch"], {}),
    "ex-kernels-numba-saxpy": lambda: (numba_kernels()["right"], {}),
    "ex-kernels-triton-relu": lambda: (triton_kernels()["right"], {}),
}

WRONG_ANSWERS = {
    "ex-kernels-predict-add": lambda: [
        *roofline_mistakes({"one vector's bytes": (1, 4), "the inputs' bytes only": (1, 8),
                            "8 bytes per value": (1, 24), "2 FLOPs per value": (2, 12)}, per=ADD_SIZE),
        *prediction_slips(predicted_ms, times=1e-3),
    ],
    "ex-kernels-launch": lambda: [
        *kernels_and_words(numba_kernels(), {
            "rounded down": "Round n / threads up",  # the off-by-one launch
            "one block more": "no item at all", "swapped": "blocks first",
            "on the device": "copy it back",  # data left on the wrong device
            "float64": "dtype is float64",  # the wrong dtype
            "fixed grid": "no item at all", "right": "that is a kernel"}),
        (256, "expected a function"),
    ],
    "ex-kernels-numba-saxpy": lambda: [
        *kernels_and_words(numba_kernels(), {"no guard": "bounds guard", "thread index": "values differ",
                                             "formula": "values differ", "plain": "expected a Numba CUDA kernel",
                                             "array code": "works on whole arrays"}),
        (np.zeros(100, np.float32), "expected a Numba CUDA kernel"),
    ],
    "ex-kernels-triton-relu": lambda: [
        *kernels_and_words(triton_kernels(), {"no program id": "never written (the first at index 256)",
                                              "no mask": "mask", "abs": "values differ", "signature": "raised",
                                              "numpy": "a function that runs on the host"}),
        (lambda x: x.clamp(min=0), "expected a Triton kernel"),
    ],
}


# The planted device mistakes (tests/exercises/test_planted_device_mistakes.py).
DEVICE_MISTAKES = {
    "ex-kernels-triton-relu": {
        "relu_with_numpy": "called NumPy's maximum inside the kernel: host code, which the interpreter runs (giving "
                           "wrong values) and no GPU compiles",
    },
    "ex-kernels-numba-saxpy": {
        "saxpy_as_array_code": "wrote the kernel as NumPy code for the host (out[:] = a * x + y): the simulator runs "
                               "it, but every thread would do every item, and on a GPU Numba cannot compile it",
    },
    "ex-kernels-launch": {
        "apply_kernel_left_on_the_device": "returned the device array the kernel wrote, never copied back to the "
                                           "host (copy_to_host)",
    },
}
