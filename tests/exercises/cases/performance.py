"""Chapter 16 (Performance engineering on one GPU): the solutions and wrong answers of the exercises in
gpukit/exercises/performance.py, for tests/exercises/test_every_exercise.py.

ex-perf-predict-softmax is a prediction, ``predicted_ms(peak_flops, bandwidth)``: its wrong answers are the classic
miscounts. ex-perf-no-recompile returns a compiled function: its wrong answers recompile for new sizes (the default
compiles twice, ``dynamic=False`` once per size), compile nothing, or compute something else; the wasteful ones are
right and recompile, and two copy to the host inside (right on a CPU, rejected on the meta device).

The kernel exercises (ex-perf-transpose-tiled, ex-perf-transpose-padded, ex-perf-block-sum): wrong: no bounds guard,
swapped indices, a missing cuda.syncthreads(), a sum stored one block early. Wasteful (right values, graded down on
the simulator's counts): the naive transpose (strided stores), reading the input twice, the unpadded tile (32-way
bank conflicts), thread 0 summing its block alone (serial requests), an atomic per element, every thread storing the
block's sum. The kernels live in tests/support/numba_kernels_for_performance.py and are imported after the simulator
is switched on (where there is no CUDA GPU); where numba is not installed, the exercises' tests skip.
"""

from functools import cache

import numpy as np
import pytest
import torch

from gpukit.core.device import pick_device
from gpukit.topics.simulators import use_cuda_simulator


@cache
def kernels():
    use_cuda_simulator()  # before numba is first imported, or it takes no effect
    pytest.importorskip("numba")
    from tests.support import numba_kernels_for_performance

    return numba_kernels_for_performance


_KERNEL_SOLUTIONS = {
    "ex-perf-transpose-tiled": lambda: (kernels().transpose_tiled, {}),
    "ex-perf-transpose-padded": lambda: (kernels().transpose_padded, {}),
    "ex-perf-block-sum": lambda: (kernels().block_sums, {}),
}

_KERNEL_WRONG_ANSWERS = {
    "ex-perf-transpose-tiled": lambda: [
        (kernels().transpose_naive, "stores of out touch"),  # right values, strided stores: wasteful
        (kernels().transpose_padded_without_guard, "bounds"),
        (kernels().transpose_padded_swapped, "values differ"),
        (kernels().transpose_padded_reading_twice, "reads each element of inp 2 times"),
        (kernels().transpose_padded_without_barrier, "cuda.syncthreads()"),
        (kernels().placeholder, "wrote nothing into out"),
        (lambda inp, out: out.__setitem__(..., inp.T), "expected a Numba CUDA kernel"),
        (np.zeros((3, 2), np.float32), "expected a Numba CUDA kernel"),
    ],
    "ex-perf-transpose-padded": lambda: [
        (kernels().transpose_tiled, "bank conflicts"),  # right values and coalesced, but the unpadded tile
        (kernels().transpose_naive, "stores of out touch"),
        (kernels().transpose_padded_without_guard, "bounds"),
        (kernels().transpose_padded_swapped, "values differ"),
        (kernels().transpose_padded_reading_twice, "reads each element of inp 2 times"),
        (kernels().transpose_padded_without_barrier, "cuda.syncthreads()"),
    ],
    "ex-perf-block-sum": lambda: [
        (kernels().block_sums_by_thread_zero, "warp requests"),  # right sums, one thread's serial loads
        (kernels().block_sums_by_atomics, "atomic additions"),
        (kernels().block_sums_stored_by_every_thread, "writes to out"),
        (kernels().block_sums_without_barrier, "cuda.syncthreads()"),
        # The hint warns against it; on a GPU it is undefined and can hang; the simulator ran it to the right sums.
        (kernels().block_sums_barrier_in_the_branch, "did not all pass the same barriers"),
        (kernels().block_sums_without_guard, "bounds"),
        (kernels().block_sums_float_index, "raised IndexError"),  # not taken for a missing guard
        (kernels().block_sums_off_by_one_block, "values differ"),
        (kernels().placeholder, "wrote nothing into out"),
        (lambda x, out: None, "expected a Numba CUDA kernel"),
    ],
}


SOFTMAX = {"rows": 512, "cols": 1024}


def predicted_ms(peak_flops, bandwidth, rows=512, cols=1024, flops_per_value=5, bytes_per_value=8):
    """The lesson's solution of ex-perf-predict-softmax, and (other arguments) its classic mistakes."""
    values = rows * cols
    return 1e3 * max(flops_per_value * values / peak_flops, bytes_per_value * values / bandwidth)


def softmax_prediction(**mistake):
    return lambda peak_flops, bandwidth: predicted_ms(peak_flops, bandwidth, **mistake)


def compile_for_any_batch(fn, backend):
    return torch.compile(fn, backend=backend, dynamic=True)


def default_compile(fn, backend):  # compiles for the first size, then once more, dynamic
    return torch.compile(fn, backend=backend)


def static_compile(fn, backend):  # compiles for every size
    return torch.compile(fn, backend=backend, dynamic=False)


def not_compiled(fn, backend):
    return fn


def compiled_doubled(fn, backend):  # compiles once, computes something else
    compiled = torch.compile(fn, backend=backend, dynamic=True)
    return lambda x, *args: 2 * compiled(x, *args)


def raising(fn, backend):
    raise RuntimeError("not written yet")


def result_copied_to_host(fn, backend):  # compiles once, right values, but the result comes back to the host
    compiled = torch.compile(fn, backend=backend, dynamic=True)
    return lambda x, *args: compiled(x, *args).cpu()


def input_copied_to_host(fn, backend):  # the input goes to the host before the compiled call: a copy a call
    compiled = torch.compile(fn, backend=backend, dynamic=True)
    return lambda x, *args: compiled(x.cpu(), *args)


_OTHER_SOLUTIONS = {
    "ex-perf-predict-softmax": lambda: (predicted_ms, {"device": pick_device(), **SOFTMAX}),
    "ex-perf-no-recompile": lambda: (compile_for_any_batch, {"device": pick_device()}),
}

_OTHER_WRONG_ANSWERS = {
    "ex-perf-predict-softmax": lambda: [
        (softmax_prediction(bytes_per_value=4), "values read only"),
        (softmax_prediction(bytes_per_value=16), "unfused softmax"),
        (softmax_prediction(flops_per_value=1), "one FLOP per value"),
        (lambda peak_flops, bandwidth: None, "replace the placeholder"),
        ("predicted_ms", "expected your function itself"),
    ],
    "ex-perf-no-recompile": lambda: [
        (default_compile, "compiled 2 times"),
        (static_compile, "compiled 6 times"),
        (not_compiled, "compiled nothing"),
        (compiled_doubled, "values differ"),
        (raising, "not written yet"),
        ("compile_for_any_batch", "expected your function itself"),
        # right on a CPU; on the meta device (a device without values) the copy to the host raises
        (result_copied_to_host, "copies to the host"),
        (input_copied_to_host, "copies to the host"),
    ],
}


SOLUTIONS = {**_KERNEL_SOLUTIONS, **_OTHER_SOLUTIONS}
WRONG_ANSWERS = {**_KERNEL_WRONG_ANSWERS, **_OTHER_WRONG_ANSWERS}

# The mistakes of the device that a CPU alone would not show, which the checks reject on any machine: a barrier
# missing or skipped (the counter orders the simulator's shared-memory accesses by the barriers each thread passed),
# and a copy to the host inside compiled code (the check runs the answer on PyTorch's meta device too).
DEVICE_MISTAKES = {
    "ex-perf-transpose-tiled": {
        "transpose_padded_without_barrier": "left out cuda.syncthreads() between filling the tile and reading it, "
                                            "so a thread can read a value another has not yet written",
    },
    "ex-perf-transpose-padded": {
        "transpose_padded_without_barrier": "left out cuda.syncthreads() between filling the padded tile and "
                                            "reading it back down its columns",
    },
    "ex-perf-block-sum": {
        "block_sums_barrier_in_the_branch": "put cuda.syncthreads() inside `if t < step:`, so half the block "
                                            "never reaches the barrier the other half waits at",
        "block_sums_without_barrier": "added pairs without a cuda.syncthreads() between the steps of the tree",
    },
    "ex-perf-no-recompile": {
        "result_copied_to_host": "called .cpu() on the compiled function's result, a copy to the host and a "
                                 "wait at every call on a GPU",
        "input_copied_to_host": "moved the input to the host (.cpu()) before calling the compiled function, "
                                "so the work leaves the GPU",
    },
}
