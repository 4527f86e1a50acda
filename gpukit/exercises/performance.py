"""Chapter 16, performance engineering on one GPU: what its exercises expect, and how a wrong or wasteful
answer is told apart.

The kernel exercises, on memory access patterns, are graded on efficiency as well as correctness. Each check takes
the reader's ``@cuda.jit`` kernel itself and launches it on inputs drawn afresh on every call
(``numpy.random.default_rng()`` without a seed: sizes that are not multiples of the tile or block, random values),
so an answer that remembers a result cannot pass. The launch runs on Numba's CUDA simulator through
:func:`gpukit.topics.memory_access.count_accesses`, whatever the machine (a kernel compiled for a GPU runs its
Python function there), which counts every load and store: the check judges, in this order, that the kernel ran (an
index past an array's end is a missing bounds guard), that no thread read shared memory another wrote with no
``cuda.syncthreads()`` between, that the values are right, and then the efficiency the exercise teaches (each input
element read once, coalesced requests, no bank conflicts, one store per block). Where numba's CUDA target is the
real one and reports a GPU, the kernel also runs there and its result must match.

- ``ex-perf-transpose-tiled``: ``transpose_tiled(inp, out)``, ``out = inp.T`` through a shared-memory tile, on a
  grid of (cols / TILE, rows / TILE) blocks (rounded up) of (TILE, ROWS) threads: coalesced loads *and* stores.
- ``ex-perf-transpose-padded``: the same with the tile padded to (TILE, TILE + 1): also no bank conflicts.
- ``ex-perf-block-sum``: ``block_sums(x, out)``, each block of THREADS threads sums its THREADS elements (0 past the
  end) into ``out[blockIdx.x]`` with a tree reduction in shared memory.

The others:

- ``ex-perf-predict-softmax``: ``predicted_ms(peak_flops, bandwidth)``, the least time of a fused float32 softmax
  over each row of a ``rows`` x ``cols`` matrix (5 FLOPs per value: the maximum, the subtraction, the exponential,
  the sum and the division; each value read once and each result written once, 8 bytes a value), tried on a
  compute-bound and a memory-bound device and on the run's own (:mod:`._predicting`). The classic mistakes: the
  bytes read only, an unfused softmax's three passes, 8 bytes a value, one FLOP a value.
- ``ex-perf-no-recompile``: ``compile_for_any_batch(fn, backend)``, returning ``fn`` compiled so that calls with any
  batch size compile it once. The check compiles a function of its own through a backend that counts the graphs it
  receives and runs them as they are (no code is generated, so the check is quick on a CPU), calls it on the
  lesson's ``device`` with batch sizes drawn at random from 2 to 64 (six different ones, a fresh draw on each check:
  an answer cannot be tuned to the sizes), and fails it unless it compiled exactly once and gave the uncompiled
  function's results. It then runs the answer once more on PyTorch's meta device (shapes without values), so
  that a copy to the host inside it (``.cpu()``, ``.item()``), a transfer and a wait per call on a GPU that a CPU
  alone would not show, is found on any machine. ``torch._dynamo.reset()`` first forgets earlier compilations of
  the check's function, which would otherwise count against the limit of recompilations of its code.
"""

from __future__ import annotations

import math
import random

import numpy as np

from gpukit.base.errors import error_line, first_line
from gpukit.core.device import gpu_required
from gpukit.topics.memory_access import count_accesses
from gpukit.topics.simulators import (
    NumbaCudaUnavailable,
    is_numba_cuda_kernel,
    node_lacks_toolkit,
    numba_cuda_advice,
    numba_cuda_cause,
    numba_simulating,
)

from ._predicting import Work, function_exercise
from .checking import Exercise, compare, keep_output, kept_output, register
from .checking import not_a_function as _a_function

# ---------------------------------------- the kernel exercises: memory access patterns
TILE, ROWS, THREADS = 32, 8, 128  # the lesson's sizes (its visible cell defines the same)
# One side of a transpose's matrix in part of one tile, the other over two (which is which drawn): neither a
# multiple of TILE, never square, two blocks (each costs the simulator).
TRANSPOSE_SIZES = ((TILE // 2 + 1, TILE - 1), (TILE + 1, 2 * TILE - 1))
BLOCK_SUM_SIZES = (THREADS + 1, 2 * THREADS - 1)  # two blocks, the last partly past the end (each costs the simulator)
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
    asks for the GPU, where NumbaCudaUnavailable says why; not for a library of the CUDA toolkit that numba-cuda
    cannot find (libNVVM, NVRTC), the node's limitation, where lesson 16 skips its kernel cells (the check is run
    only where its test kernel ran) and the simulator's verdict stands."""
    try:
        return run_on_the_gpu(answer, blocks, threads, *arrays)[-1], None
    except Exception as error:  # noqa: BLE001 - the reader's kernel: any error is the answer to report
        if numba_cuda_cause(error_line(error)) is None:
            return None, f"launching your kernel on the GPU raised {error_line(error)}"
        if gpu_required() and not node_lacks_toolkit(error):
            raise NumbaCudaUnavailable(numba_cuda_advice(error)) from error
        return None, None


def _counted(answer, blocks, threads, arrays, guard: str):
    """(the counts, None) of a launch on the simulator, or (None, what is wrong)."""
    try:
        return count_accesses(answer, blocks, threads, *arrays), None
    except Exception as error:  # noqa: BLE001 - the reader's kernel: any error is the answer to report
        # "out of bounds": NumPy's words for an index past the end; other IndexErrors are not that
        if isinstance(error, IndexError) and "out of bounds" in str(error):
            return None, f"a thread indexed past the end of an array ({first_line(error)}): {guard}"
        return None, f"launching your kernel on Numba's CUDA simulator raised {error_line(error)}"


def _race(counts) -> str | None:
    if not counts.race_count:
        return None
    return (f"threads use shared memory that other threads write with no barrier between: {counts.races[0]}. The "
            "threads of a block run in no fixed order; make them all wait at cuda.syncthreads() before any reads "
            "what another wrote (and before any overwrites what another still has to read).")


def _divergent(counts) -> str | None:
    if counts.divergent_barrier is None:
        return None
    return (f"the threads of a block did not all pass the same barriers: {counts.divergent_barrier}. On a GPU "
            "every thread of a block must reach each cuda.syncthreads(); a barrier inside a branch that only some "
            "threads take (or after a return that some take) is undefined there and can hang the block. Put each "
            "barrier where all the threads of the block reach it.")


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
    short, long = (int(rng.integers(low, high + 1)) for low, high in TRANSPOSE_SIZES)
    rows, cols = (short, long) if rng.integers(2) else (long, short)  # never square: swapped sides would show
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
    wrong = (_race(counts) or _divergent(counts) or _nothing_written(counts, out_name)
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
    wrong = (_race(counts) or _divergent(counts) or _nothing_written(counts, out_name)
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


# ---------------------------------------- the prediction and torch.compile exercises
_VALUE_BYTES = 4  # float32
_FLOPS_PER_VALUE = 5


# ------------------------------------------------------------------------------------- ex-perf-predict-softmax
def _softmax(rows: int, cols: int, **_) -> Work:
    values = rows * cols
    return Work(_FLOPS_PER_VALUE * values, 2 * _VALUE_BYTES * values)


def _softmax_mistakes(rows: int, cols: int, **_) -> list[tuple[str, Work]]:
    values = rows * cols
    return [
        ("counting the values read only (each result is written too)",
         Work(_FLOPS_PER_VALUE * values, _VALUE_BYTES * values)),
        ("an unfused softmax's passes (read for the maximum, read for the sum, read and write to divide)",
         Work(_FLOPS_PER_VALUE * values, 4 * _VALUE_BYTES * values)),
        ("counting 8 bytes per value (float32 has 4)", Work(_FLOPS_PER_VALUE * values, 2 * 8 * values)),
        ("counting one FLOP per value (softmax does five)", Work(values, 2 * _VALUE_BYTES * values)),
    ]


# ------------------------------------------------------------------------------------- ex-perf-no-recompile
_BATCHES = 6  # different batch sizes per check
_FEATURES = 8


def _scaled_tanh(x, weight):
    """The check's function: a small layer, its batch in dimension 0 of ``x``."""
    import torch

    return torch.tanh(x @ weight) * 2.0 + x.sum(dim=1, keepdim=True)


def _compilations(answer, sizes, device):
    """Compile the check's function with ``answer`` through a counting backend; call it once per batch size.
    Returns (graphs compiled, results, expected results)."""
    import torch

    graphs = []

    def counting_backend(graph, example_inputs):
        graphs.append(graph)
        return graph.forward

    generator = torch.Generator().manual_seed(sum(sizes))
    weight = torch.randn(_FEATURES, _FEATURES, generator=generator).to(device)
    torch._dynamo.reset()  # earlier checks' compilations of _scaled_tanh would count against its limit
    compiled = answer(_scaled_tanh, counting_backend)
    if not callable(compiled):
        raise TypeError(f"compile_for_any_batch returned {type(compiled).__name__}, not a function to call")
    got, want = [], []
    for size in sizes:
        x = torch.randn(size, _FEATURES, generator=generator).to(device)
        got.append(compiled(x, weight))
        want.append(_scaled_tanh(x, weight))
    return graphs, got, want


def batch_sizes() -> list[int]:
    """The check's batch sizes: _BATCHES different ones from 2 to 64 (0 and 1 are specialised by the compiler, as
    PyTorch's dynamic shapes do), never _FEATURES. With ``dynamic=True`` every dimension is symbolic, and dimensions
    of equal size at the first call share one symbol ("duck sizing"): a first batch of _FEATURES rows would tie the
    batch to the features, and the next size would recompile a right answer (a fresh clone's test drew 8 first)."""
    return random.sample([n for n in range(2, 65) if n != _FEATURES], _BATCHES)


def _compiles_once(answer, device) -> str | None:
    wrong = _a_function(answer, "compile_for_any_batch", "fn and backend")
    if wrong:
        return wrong
    import torch

    sizes = batch_sizes()
    try:
        graphs, got, want = _compilations(answer, sizes, device)
    except Exception as error:  # noqa: BLE001 - the learner's code can raise anything; say what
        return f"compile_for_any_batch, or the function it returned, raised {error_line(error)}"
    finally:
        torch._dynamo.reset()
    listed = ", ".join(map(str, sizes))
    if not graphs:
        return (f"called with batch sizes {listed}, your function compiled nothing: return fn compiled with "
                "torch.compile(..., backend=backend), so that its graphs go to the backend.")
    if len(graphs) > 1:
        return (f"called with batch sizes {listed}, your function was compiled {len(graphs)} times: it recompiled "
                "for new sizes. Make the batch dimension dynamic from the first call.")
    for size, mine, theirs in zip(sizes, got, want, strict=True):
        if not (isinstance(mine, torch.Tensor) and mine.shape == theirs.shape
                and torch.allclose(mine, theirs, rtol=1e-5, atol=1e-6)):
            return f"at batch size {size} the compiled function's values differ from the function's own."
    wrong = _stays_on_the_device(answer)
    if wrong:
        return wrong
    keep_output(answer, 1)
    return None


def _stays_on_the_device(answer) -> str | None:
    """The answer once more, on PyTorch's meta device: tensors that have a device and a shape but no values. A
    copy to the host inside the answer (``.cpu()``, ``.item()``, ``.numpy()``, ``.tolist()``), which on a GPU is a
    transfer and a wait at every call, raises there, and a result moved to another device shows, even on a machine
    whose only device is the CPU, where such a copy does nothing."""
    import torch

    try:
        _, got, _ = _compilations(answer, batch_sizes()[:1], "meta")
    except Exception as error:  # noqa: BLE001 - the learner's code can raise anything; say what
        return ("your function is right on the CPU, but given tensors on another device it raised "
                f"{error_line(error)}. Something in it copies to the host (.cpu(), .item(), .numpy(), .tolist()), "
                "which on a GPU is a copy and a wait at every call. Keep the work on the input's device.")
    finally:
        torch._dynamo.reset()
    for mine in got:
        if not (isinstance(mine, torch.Tensor) and mine.device.type == "meta"):
            where = f"on {mine.device}" if isinstance(mine, torch.Tensor) else f"as {type(mine).__name__}"
            return (f"given tensors on another device, your function returned its result {where}: leave the result "
                    "on the input's device (no .cpu() or .to(...) inside).")
    return None


register(
    function_exercise("ex-perf-predict-softmax", _softmax, _softmax_mistakes, dtype="float32",
                      operation="elementwise", needs=("device", "rows", "cols")),
    Exercise("ex-perf-no-recompile", lambda device: 1, needs=("device",), method=_compiles_once, result=kept_output,
             rtol=0.0, writes="device code"),
)
