"""Numba CUDA kernels for lesson 16 (performance engineering on one GPU): the known kernels that prove the access
counter (gpukit.topics.memory_access) and the solutions and wrong or wasteful answers of the lesson's kernel
exercises (tests/exercises/cases/performance.py).

Imported only after the simulator is switched on (where there is no CUDA GPU). The kernels are module-level
functions that reach ``cuda`` as a global on purpose: Numba's simulator swaps the ``cuda`` of a kernel's globals for
its own. The steps that the solutions and most wrong answers share (filling a transpose's tile and storing it, a
block sum's loads and its tree) are module-level device functions, which count_accesses runs on the simulator with
the kernel where numba's target is a real GPU; each wrong answer writes out in full only the step it gets wrong.
The sizes are the lesson's: a transpose block is (TILE, ROWS) threads, each thread moving TILE / ROWS elements; the
block sums use blocks of THREADS threads.
"""

import numpy as np
from numba import cuda, float32

TILE, ROWS, THREADS = 32, 8, 128


# --------------------------------------------------------------------------------- known patterns for the counter
@cuda.jit
def copy(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i]


@cuda.jit
def copy_stride_32(x, out):
    j = 32 * cuda.grid(1)  # thread i copies element 32 i: consecutive threads 128 bytes apart
    if j < x.size:
        out[j] = x[j]


@cuda.jit
def broadcast(x, out):
    i = cuda.grid(1)  # every thread reads the same element: one sector per request
    if i < out.size:
        out[i] = x[0]


@cuda.jit
def count_with_atomics(x, total):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(total, 0, x[i])


@cuda.jit
def increment(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1.0  # one load and one store


@cuda.jit
def read_unwritten_shared(out):
    scratch = cuda.shared.array(32, float32)  # never written: a GPU's shared memory holds what was there
    i = cuda.grid(1)
    if i < out.size:
        out[i] = scratch[i % 32]


# A result a check drew before, for a kernel that replays it (tests/exercises/test_performance.py sets it).
REMEMBERED = np.zeros((1, 1), dtype=np.float32)


@cuda.jit
def transpose_remembered(inp, out):
    x = cuda.blockIdx.x * TILE + cuda.threadIdx.x  # writes what an earlier check's output held, whatever the input
    y = cuda.blockIdx.y * TILE + cuda.threadIdx.y
    for j in range(0, TILE, ROWS):
        if x < out.shape[0] and y + j < out.shape[1] and x < REMEMBERED.shape[0] and y + j < REMEMBERED.shape[1]:
            out[x, y + j] = REMEMBERED[x, y + j]


@cuda.jit(device=True)
def twice(value):
    return 2 * value


@cuda.jit
def double_through_a_device_function(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = twice(x[i])


# ------------------------------------------------------------------------------------------------- the transposes
# The two halves of a tiled transpose, as device functions the kernels below share (where numba's CUDA target is
# the real one, count_accesses runs them on the simulator with the kernel: gpukit.topics.memory_access).
@cuda.jit(device=True)
def fill_tile(inp, tile):
    """The block's tile of inp, read along its rows (coalesced loads), past the edges left out."""
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * TILE + tx
    y = cuda.blockIdx.y * TILE + ty
    for j in range(0, TILE, ROWS):
        if x < inp.shape[1] and y + j < inp.shape[0]:
            tile[ty + j, tx] = inp[y + j, x]


@cuda.jit(device=True)
def store_tile(tile, out):
    """The tile read down its columns into the transposed block of out (coalesced stores), past the edges left out."""
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.y * TILE + tx
    y = cuda.blockIdx.x * TILE + ty
    for j in range(0, TILE, ROWS):
        if x < out.shape[1] and y + j < out.shape[0]:
            out[y + j, x] = tile[tx, ty + j]


@cuda.jit
def transpose_naive(inp, out):
    x = cuda.blockIdx.x * TILE + cuda.threadIdx.x  # along a row of inp: coalesced loads, strided stores
    y = cuda.blockIdx.y * TILE + cuda.threadIdx.y
    for j in range(0, TILE, ROWS):
        if x < inp.shape[1] and y + j < inp.shape[0]:
            out[x, y + j] = inp[y + j, x]


@cuda.jit
def transpose_tiled(inp, out):
    tile = cuda.shared.array((TILE, TILE), float32)
    fill_tile(inp, tile)
    cuda.syncthreads()
    store_tile(tile, out)


@cuda.jit
def transpose_padded(inp, out):
    tile = cuda.shared.array((TILE, TILE + 1), float32)
    fill_tile(inp, tile)
    cuda.syncthreads()
    store_tile(tile, out)


@cuda.jit
def transpose_padded_without_guard(inp, out):
    tile = cuda.shared.array((TILE, TILE + 1), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * TILE + tx
    y = cuda.blockIdx.y * TILE + ty
    for j in range(0, TILE, ROWS):
        tile[ty + j, tx] = inp[y + j, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TILE + tx
    y = cuda.blockIdx.x * TILE + ty
    for j in range(0, TILE, ROWS):
        out[y + j, x] = tile[tx, ty + j]


@cuda.jit
def transpose_padded_swapped(inp, out):
    tile = cuda.shared.array((TILE, TILE + 1), float32)
    fill_tile(inp, tile)
    cuda.syncthreads()
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.y * TILE + tx
    y = cuda.blockIdx.x * TILE + ty
    for j in range(0, TILE, ROWS):
        if x < out.shape[1] and y + j < out.shape[0]:
            out[y + j, x] = tile[ty + j, tx]  # the tile read along its row: the block's tile is not transposed


@cuda.jit
def transpose_padded_reading_twice(inp, out):
    tile = cuda.shared.array((TILE, TILE + 1), float32)
    fill_tile(inp, tile)
    cuda.syncthreads()
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.y * TILE + tx
    y = cuda.blockIdx.x * TILE + ty
    for j in range(0, TILE, ROWS):
        if x < out.shape[1] and y + j < out.shape[0]:
            if inp[x, y + j] == tile[tx, ty + j]:  # checks the tile against the input: a second read of it
                out[y + j, x] = tile[tx, ty + j]


@cuda.jit
def transpose_padded_without_barrier(inp, out):
    tile = cuda.shared.array((TILE, TILE + 1), float32)
    fill_tile(inp, tile)
    store_tile(tile, out)  # no cuda.syncthreads(): other threads' tile elements may not be there yet


# ---------------------------------------------------------------------------------------------------- block sums
# The two steps of the lesson's block sum that most of its wrong answers keep, as device functions.
@cuda.jit(device=True)
def fill_partial(x, partial):
    """Each thread's element of x into the block's partial sums (0 past the end of x), then a barrier."""
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()


@cuda.jit(device=True)
def add_down_to(partial, lowest):
    """The tree in shared memory: pairs added, half as many at each step, a barrier after each, until ``lowest``
    values are left (1: the block's sum in partial[0])."""
    t = cuda.threadIdx.x
    step = THREADS // 2
    while step >= lowest:
        if t < step:
            partial[t] += partial[t + step]
        cuda.syncthreads()
        step //= 2


@cuda.jit
def block_sums(x, out):
    partial = cuda.shared.array(THREADS, float32)
    fill_partial(x, partial)
    add_down_to(partial, 1)
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.x] = partial[0]


@cuda.jit
def block_sums_one_atomic(x, out):
    partial = cuda.shared.array(THREADS, float32)
    fill_partial(x, partial)
    add_down_to(partial, 1)
    if cuda.threadIdx.x == 0:
        cuda.atomic.add(out, cuda.blockIdx.x, partial[0])  # one atomic per block: tolerated


@cuda.jit
def block_sums_by_thread_zero(x, out):
    t = cuda.threadIdx.x
    if t == 0:  # one thread reads the block's elements one after the other
        start = cuda.blockIdx.x * cuda.blockDim.x
        total = 0.0
        for k in range(cuda.blockDim.x):
            if start + k < x.size:
                total += x[start + k]
        out[cuda.blockIdx.x] = total


@cuda.jit
def block_sums_by_atomics(x, out):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(out, cuda.blockIdx.x, x[i])


@cuda.jit
def block_sums_without_barrier(x, out):
    partial = cuda.shared.array(THREADS, float32)
    fill_partial(x, partial)
    t = cuda.threadIdx.x
    step = THREADS // 2
    while step > 0:
        if t < step:
            partial[t] += partial[t + step]
        step //= 2  # no cuda.syncthreads() between the steps
    if t == 0:
        out[cuda.blockIdx.x] = partial[0]


@cuda.jit
def block_sums_barrier_in_the_branch(x, out):
    partial = cuda.shared.array(THREADS, float32)
    fill_partial(x, partial)
    t = cuda.threadIdx.x
    step = THREADS // 2
    while step > 0:
        if t < step:
            partial[t] += partial[t + step]
            cuda.syncthreads()  # only the threads with t < step get here: the others never wait
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = partial[0]


@cuda.jit
def barriers_on_two_lines(out):
    t = cuda.threadIdx.x
    if t < 16:
        cuda.syncthreads()  # half the warp waits here ...
    else:
        cuda.syncthreads()  # ... the other half at another barrier
    out[t] = t


@cuda.jit
def return_before_a_barrier(x, out):
    i = cuda.grid(1)
    if i >= x.size:
        return  # the threads past the end leave before the barrier the others wait at
    cuda.syncthreads()
    out[i] = x[i]


@cuda.jit
def block_sums_without_guard(x, out):
    partial = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = x[i]
    cuda.syncthreads()
    add_down_to(partial, 1)
    if t == 0:
        out[cuda.blockIdx.x] = partial[0]


@cuda.jit
def block_sums_stored_by_every_thread(x, out):
    partial = cuda.shared.array(THREADS, float32)
    fill_partial(x, partial)
    add_down_to(partial, 1)
    out[cuda.blockIdx.x] = partial[0]  # every thread stores the block's sum


@cuda.jit
def block_sums_off_by_one_block(x, out):
    partial = cuda.shared.array(THREADS, float32)
    fill_partial(x, partial)
    add_down_to(partial, 1)
    if cuda.threadIdx.x == 0 and cuda.blockIdx.x > 0:
        out[cuda.blockIdx.x - 1] = partial[0]  # each sum stored one block too early


@cuda.jit
def placeholder(x, out):
    pass  # the lesson's stub: replace with the kernel


@cuda.jit
def block_sums_float_index(x, out):
    partial = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1) / 1  # true division: a float index (numba on a GPU refuses it when compiling)
    partial[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    if t == 0:
        out[cuda.blockIdx.x] = partial[0]
