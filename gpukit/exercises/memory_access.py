"""Chapter 16, performance engineering on one GPU: the kernel exercises on memory access patterns, graded on
efficiency as well as correctness.

Each check takes the reader's ``@cuda.jit`` kernel itself and launches it on inputs drawn afresh on every call
(``numpy.random.default_rng()`` without a seed: sizes that are not multiples of the tile or block, random values),
so an answer that remembers a result cannot pass. The launch runs on Numba's CUDA simulator through
:func:`gpukit.topics.memory_access.count_accesses`, whatever the machine (a kernel compiled for a GPU runs its
Python function there), which counts every load and store: the check judges, in this order, that the kernel ran
(an index past an array's end is a missing bounds guard), that no thread read shared memory another wrote with no
``cuda.syncthreads()`` between, that the values are right, and then the efficiency the exercise teaches (each
input element read once, coalesced requests, no bank conflicts, one store per block). Where numba's CUDA target is
the real one and reports a GPU, the kernel also runs there and its result must match.

- ``ex-perf-transpose-tiled``: ``transpose_tiled(inp, out)``, ``out = inp.T`` through a shared-memory tile, on a
  grid of (cols / TILE, rows / TILE) blocks (rounded up) of (TILE, ROWS) threads: coalesced loads *and* stores.
- ``ex-perf-transpose-padded``: the same with the tile padded to (TILE, TILE + 1): also no bank conflicts.
- ``ex-perf-block-sum``: ``block_sums(x, out)``, each block of THREADS threads sums its THREADS elements (0 past the
  end) into ``out[blockIdx.x]`` with a tree reduction in shared memory.
"""

from __future__ import annotations

import math

import numpy as np

from gpukit.base.errors import error_line, first_line
from gpukit.core.device import gpu_required
from gpukit.topics.memory_access import count_accesses
from gpukit.topics.simulators import (
    NumbaCudaUnavailable,
    is_numba_cuda_kernel,
    numba_cuda_advice,
    numba_cuda_cause,
    numba_simulating,
)

from .checking import Exercise, compare, keep_output, kept_output, register

TILE, ROWS, THREADS = 32, 8, 128  # the lesson's sizes (its visible cell defines the same)
TRANSPOSE_SIZES = (TILE + 1, 2 * TILE - 1)  # rows and columns drawn from this range: two tiles each way, partial
BLOCK_SUM_SIZES = (2 * THREADS + 1, 3 * THREADS - 1)  # three blocks, the last partly past the end
WASTE = 2.0  # requests touching more than twice the sectors (or twice the requests) coalesced ones need
SUM_RTOL = SUM_ATOL = 1e-4  # a float32 tree of 128 values against their float64 sum

# What the last check of each label drew and expects, for the comparison that follows its method step.
_EXPECTED: dict[str, np.ndarray] = {}


def _not_a_kernel(answer, name: str) -> str | None:
    if is_numba_cuda_kernel(answer):
        return None
    return (f"expected a Numba CUDA kernel ({name}, a function decorated with @cuda.jit), got "
            f"{type(answer).__name__}: pass the kernel itself, not its result.")


def launches_on_the_gpu(kernel) -> bool:
    """Whether ``kernel`` was compiled for a GPU that numba can launch on (not the simulator's kernel)."""
    if type(kernel).__name__ != "CUDADispatcher" or numba_simulating() is not False:
        return False
    from numba import cuda

    return bool(cuda.is_available())


def run_on_the_gpu(kernel, blocks, threads, *arrays: np.ndarray) -> list[np.ndarray]:
    """Launch ``kernel`` with copies of ``arrays`` on the device; return them copied back."""
    from numba import cuda

    on_device = [cuda.to_device(a) for a in arrays]
    kernel[blocks, threads](*on_device)
    cuda.synchronize()
    return [d.copy_to_host() for d in on_device]


def _on_the_gpu(answer, blocks, threads, arrays):
    """(the output, the last of ``arrays``, after a launch on the GPU, None), or (None, what went wrong), or
    (None, None) where numba-cuda itself cannot run a kernel on this node (an error gpukit.topics.simulators knows,
    such as numba-cuda 0.30.4 beside NumPy 2.5): then the simulator's verdict stands, unless GPUKIT_REQUIRE_GPU
    asks for the GPU, where NumbaCudaUnavailable says why."""
    try:
        return run_on_the_gpu(answer, blocks, threads, *arrays)[-1], None
    except Exception as error:  # noqa: BLE001 - the reader's kernel: any error is the answer to report
        if numba_cuda_cause(error_line(error)) is None:
            return None, f"launching your kernel on the GPU raised {error_line(error)}"
        if gpu_required():
            raise NumbaCudaUnavailable(numba_cuda_advice(error)) from error
        return None, None


def _counted(answer, blocks, threads, arrays, guard: str):
    """(the counts, None) of a launch on the simulator, or (None, what is wrong)."""
    try:
        return count_accesses(answer, blocks, threads, *arrays), None
    except IndexError as error:
        if "out of bounds" not in str(error):  # NumPy's words for an index past the end; others are not that
            return None, f"launching your kernel on Numba's CUDA simulator raised {error_line(error)}"
        return None, f"a thread indexed past the end of an array ({first_line(error)}): {guard}"
    except Exception as error:  # noqa: BLE001 - the reader's kernel: any error is the answer to report
        return None, f"launching your kernel on Numba's CUDA simulator raised {error_line(error)}"


def _race(counts) -> str | None:
    if not counts.race_count:
        return None
    return (f"threads use shared memory that other threads write with no barrier between: {counts.races[0]}. The "
            "threads of a block run in no fixed order; make them all wait at cuda.syncthreads() before any reads "
            "what another wrote (and before any overwrites what another still has to read).")


def _nothing_written(counts, name: str) -> str | None:
    if counts.stores[name] or counts.atomics[name]:
        return None
    return (f"your kernel wrote nothing into {name} (no thread stored to it): replace the placeholder (pass) with "
            "the kernel's body.")


def _values(got: np.ndarray, want: np.ndarray, where: str, **tolerance) -> str | None:
    verdict = compare(got, want, **tolerance)
    return None if verdict else f"{where}: {verdict.message}"


def _rereads(counts, name: str) -> str | None:
    reads = counts.reads_per_element[name]
    if reads <= 1.0:
        return None
    return (f"your kernel reads each element of {name} {reads:.3g} times ({counts.loads[name]:,} loads of "
            f"{counts.sizes[name]:,} elements): wasteful, as every read goes to global memory. Read each element "
            "once and work from that copy.")


def _uncoalesced(counts, name: str, what: str, how: str) -> str | None:
    sectors, ideal = counts.sectors_per_request[name], counts.ideal_sectors_per_request[name]
    if not ideal or sectors <= WASTE * ideal:
        return None
    return (f"your {what} of {name} touch {sectors:.1f} sectors of 32 bytes per warp request on average; coalesced "
            f"{what} of the same elements touch {ideal:.1f}: the values are right but the memory traffic is "
            f"wasteful. {how}")


# ---------------------------------------------------------------------------------------- the transposes
def transpose_grid(rows: int, cols: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(blocks, threads) of the lesson's transpose launch: one block of (TILE, ROWS) threads per TILE × TILE tile."""
    return (math.ceil(cols / TILE), math.ceil(rows / TILE)), (TILE, ROWS)


def _transpose_input(rng) -> np.ndarray:
    rows = cols = 0
    while rows == cols:  # a square matrix would hide swapped dimensions
        rows, cols = (int(v) for v in rng.integers(TRANSPOSE_SIZES[0], TRANSPOSE_SIZES[1] + 1, size=2))
    return rng.standard_normal((rows, cols)).astype(np.float32)


def _judge_transpose(label: str, answer, *, padded: bool) -> str | None:
    wrong = _not_a_kernel(answer, "transpose_padded" if padded else "transpose_tiled")
    if wrong:
        return wrong
    inp = _transpose_input(np.random.default_rng())
    rows, cols = inp.shape
    want = _EXPECTED[label] = inp.T.copy()
    out = np.full((cols, rows), np.nan, dtype=np.float32)
    blocks, threads = transpose_grid(rows, cols)
    counts, wrong = _counted(answer, blocks, threads, (inp, out),
                             f"with {rows} × {cols}, not a multiple of TILE, the last tiles have threads outside the "
                             "matrix; guard each load with the bounds of inp and each store with those of out.")
    if wrong:
        return wrong
    in_name, out_name = (counts.names + ("inp", "out"))[:2]
    wrong = (_race(counts) or _nothing_written(counts, out_name)
             or _values(out, want, f"for a {rows} × {cols} input") or _rereads(counts, in_name)
             or _uncoalesced(counts, in_name, "loads", "Let consecutive threads (threadIdx.x) read consecutive "
                             "elements of a row.")
             or _uncoalesced(counts, out_name, "stores", "Write out through the shared tile too, so that "
                             "consecutive threads write consecutive elements of a row of out."))
    if wrong:
        return wrong
    if padded and counts.bank_conflict_ways > 1.0:
        return (f"your shared-memory requests have {counts.bank_conflict_ways:.1f}-way bank conflicts on average "
                f"(the worst {counts.worst_bank_conflict_ways}-way): a column of a tile 32 float32 wide lies in one "
                "of the 32 banks, so its 32 words are served one after another. Correct but wasteful: the padded "
                "tile of this exercise spreads a column over all the banks.")
    if launches_on_the_gpu(answer):
        on_gpu, wrong = _on_the_gpu(answer, blocks, threads, (inp, np.full_like(out, np.nan)))
        wrong = wrong or (on_gpu is not None and _values(on_gpu, want, f"on the GPU, for a {rows} × {cols} input"))
        if wrong:
            return wrong
        out = out if on_gpu is None else on_gpu
    keep_output(answer, out)
    return None


def _expected(label: str):
    def expected():
        if label in _EXPECTED:
            return _EXPECTED.pop(label)
        return _transpose_input(np.random.default_rng()).T  # what a check of the label draws, before any has run
    return expected


# ---------------------------------------------------------------------------------------------- block sums
def block_sum_expected(x: np.ndarray) -> np.ndarray:
    """Each block's THREADS consecutive elements summed (in float64, then float32), 0 past the end."""
    blocks = math.ceil(x.size / THREADS)
    padded = np.zeros(blocks * THREADS)
    padded[:x.size] = x
    return padded.reshape(blocks, THREADS).sum(axis=1).astype(np.float32)


def _judge_block_sums(answer) -> str | None:
    wrong = _not_a_kernel(answer, "block_sums")
    if wrong:
        return wrong
    rng = np.random.default_rng()
    n = int(rng.integers(BLOCK_SUM_SIZES[0], BLOCK_SUM_SIZES[1] + 1))
    x = rng.standard_normal(n).astype(np.float32)
    blocks = math.ceil(n / THREADS)
    want = _EXPECTED["ex-perf-block-sum"] = block_sum_expected(x)
    out = np.zeros(blocks, dtype=np.float32)
    counts, wrong = _counted(answer, blocks, THREADS, (x, out),
                             f"with {n} values, the last block's threads past the end must add 0, not read x.")
    if wrong:
        return wrong
    x_name, out_name = (counts.names + ("x", "out"))[:2]
    where = f"for {n} values in {blocks} blocks of {THREADS}"
    wrong = (_race(counts) or _nothing_written(counts, out_name)
             or _values(out, want, where, rtol=SUM_RTOL, atol=SUM_ATOL) or _rereads(counts, x_name))
    if wrong:
        return wrong
    atomics, stores = counts.atomics[out_name], counts.stores[out_name]
    if atomics > blocks:
        return (f"your kernel makes {atomics:,} atomic additions into {out_name}, {atomics / blocks:.3g} per block: "
                "the right sums, but atomics to one address are done one after another. Wasteful: add the block's "
                "values in shared memory, in a tree, and write each block's sum once.")
    if stores + atomics > blocks:
        return (f"your kernel writes to {out_name} {stores + atomics:,} times for {blocks} blocks: wasteful, one "
                "thread per block writing its sum once is enough.")
    requests = counts.requests[x_name]
    ideal = sum(math.ceil(min(THREADS, n - b * THREADS) / 32) for b in range(blocks))
    if requests > WASTE * ideal:
        return (f"your loads of {x_name} take {requests:,} warp requests for {n} elements; with each thread of a "
                f"block loading one element, side by side, they take {ideal}. The sums are right, but one thread "
                "reading the block's elements one after another is wasteful: let every thread load one and add "
                "them in shared memory.")
    wrong = _uncoalesced(counts, x_name, "loads", "Let consecutive threads read consecutive elements.")
    if wrong:
        return wrong
    if launches_on_the_gpu(answer):
        on_gpu, wrong = _on_the_gpu(answer, blocks, THREADS, (x, np.zeros_like(out)))
        wrong = wrong or (on_gpu is not None and _values(on_gpu, want, f"on the GPU, {where}", rtol=SUM_RTOL,
                                                         atol=SUM_ATOL))
        if wrong:
            return wrong
        out = out if on_gpu is None else on_gpu
    keep_output(answer, out)
    return None


def _block_sum_expected():
    if "ex-perf-block-sum" in _EXPECTED:
        return _EXPECTED.pop("ex-perf-block-sum")
    rng = np.random.default_rng()
    return block_sum_expected(rng.standard_normal(int(rng.integers(*BLOCK_SUM_SIZES))).astype(np.float32))


register(
    Exercise("ex-perf-transpose-tiled", _expected("ex-perf-transpose-tiled"), rtol=0.0,
             method=lambda answer: _judge_transpose("ex-perf-transpose-tiled", answer, padded=False),
             result=kept_output, writes="device code"),
    Exercise("ex-perf-transpose-padded", _expected("ex-perf-transpose-padded"), rtol=0.0,
             method=lambda answer: _judge_transpose("ex-perf-transpose-padded", answer, padded=True),
             result=kept_output, writes="device code"),
    Exercise("ex-perf-block-sum", _block_sum_expected, rtol=SUM_RTOL, atol=SUM_ATOL, method=_judge_block_sums,
             result=kept_output, writes="device code"),
)
