"""Numba CUDA kernels with warp shuffles for lesson 16: a block's sum whose last step adds the values of one warp
with ``cuda.shfl_down_sync`` (the lesson's own kernel), and one whose shuffle only half of the warp's lanes reach.

Imported only after the simulator is switched on (where there is no CUDA GPU); the kernels reach ``cuda`` as a
global, which the simulator swaps for its own (gpukit.topics.memory_access adds the shuffle to it). The block sum's
loads and tree are numba_kernels_for_performance's device functions.
"""

from numba import cuda, float32

from tests.support.numba_kernels_for_performance import THREADS, add_down_to, fill_partial

WARP = 32
ALL_LANES = 0xFFFFFFFF


@cuda.jit
def block_sums_shuffled(x, out):
    partial = cuda.shared.array(THREADS, float32)
    fill_partial(x, partial)
    add_down_to(partial, WARP)  # the tree in shared memory, down to one warp's values
    t = cuda.threadIdx.x
    if t < WARP:  # the last step: one warp, register to register
        value = partial[t]
        offset = WARP // 2
        while offset > 0:
            value += cuda.shfl_down_sync(ALL_LANES, value, offset)
            offset //= 2
        if t == 0:
            out[cuda.blockIdx.x] = value


@cuda.jit
def shuffle_on_half_a_warp(x, out):
    t = cuda.threadIdx.x
    value = x[t]
    if t < WARP // 2:  # the other lanes never reach the shuffle the mask names them in
        value += cuda.shfl_down_sync(ALL_LANES, value, 1)
    out[t] = value


@cuda.jit
def lanes_read_down(x, out):
    t = cuda.threadIdx.x
    out[t] = cuda.shfl_down_sync(ALL_LANES, x[t], 3)  # lanes 29 to 31 keep their own value
