"""Chapter 16 (performance engineering on one GPU): the kernel exercises' solutions, and wrong and wasteful kernels
with a word the check's message must contain.

Wrong: no bounds guard, swapped indices, a missing cuda.syncthreads(), a sum stored one block early. Wasteful
(right values, graded down on the simulator's counts): the naive transpose (strided stores), reading the input
twice, the unpadded tile (32-way bank conflicts), thread 0 summing its block alone (serial requests), an atomic
per element, every thread storing the block's sum. The kernels live in tests/support/numba_kernels_for_performance.py
and are imported after the simulator is switched on (where there is no CUDA GPU); where numba is not installed, the
exercises' tests skip.
"""

from functools import cache

import numpy as np
import pytest

from gpukit.topics.simulators import use_cuda_simulator


@cache
def kernels():
    use_cuda_simulator()  # before numba is first imported, or it takes no effect
    pytest.importorskip("numba")
    from tests.support import numba_kernels_for_performance

    return numba_kernels_for_performance


SOLUTIONS = {
    "ex-perf-transpose-tiled": lambda: (kernels().transpose_tiled, {}),
    "ex-perf-transpose-padded": lambda: (kernels().transpose_padded, {}),
    "ex-perf-block-sum": lambda: (kernels().block_sums, {}),
}

WRONG_ANSWERS = {
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
        (kernels().block_sums_without_guard, "bounds"),
        (kernels().block_sums_float_index, "raised IndexError"),  # not taken for a missing guard
        (kernels().block_sums_off_by_one_block, "values differ"),
        (kernels().placeholder, "wrote nothing into out"),
        (lambda x, out: None, "expected a Numba CUDA kernel"),
    ],
}
