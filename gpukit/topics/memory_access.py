"""Counting a Numba CUDA kernel's memory accesses on Numba's CUDA simulator: how many loads and stores, how many
warp-wide requests they make, how many 32-byte sectors each request touches, and the bank conflicts of its
shared-memory requests (lesson 16).

:func:`count_accesses` launches a ``@cuda.jit`` kernel on Numba's simulator whatever the machine, on NumPy arrays,
which it updates in place as a launch would, and returns :class:`AccessCounts`. How it works:

* The simulator (``numba/cuda/simulator/kernel.py`` in numba-cuda) runs one block at a time, each CUDA thread a
  Python ``threading.Thread`` (``BlockThread``, which knows its ``blockIdx``, ``threadIdx`` and linear
  ``thread_id``), on the kernel's Python function, with ``cuda`` in the function's globals swapped for a
  ``FakeCUDAModule`` made for the launch (``swapped_cuda_module`` replaces every global that *is* ``numba.cuda``).
  ``cuda.threadIdx`` works because that module's property returns ``threading.current_thread().threadIdx``. So
  the kernel's Python function (``py_func``) runs there whether numba compiled it for the simulator
  (``FakeCUDAKernel``) or for a GPU (``CUDADispatcher``, where ``numba.cuda`` is the real target): the counted
  launch makes a ``FakeCUDAKernel`` of ``py_func``. On a GPU node that is the same Python code on the CPU.
* The kernel receives, for each NumPy array, a counting stand-in (:class:`CountedArray`) that records every
  element load and store with the accessing thread's block, its linear thread index, the instruction (the
  calling frame's code and bytecode offset) and how many times this thread has run that instruction, then does
  the access on the array itself. For this launch only, the fake module's ``shared.array`` hands out counting
  shared arrays (one per call site and block, filled with NaN, or the dtype's largest value, as a GPU's shared
  memory holds whatever was there), ``atomic.*`` counts atomics and ``syncthreads`` counts barriers.
  :func:`counting_launches` patches the simulator's ``FakeCUDAModule`` for that, and restores it after, also on
  an error.
* A **request** is one instruction executed by the threads of a warp (32 consecutive linear thread indices of
  a block): the accesses with the same block, warp, array, instruction and occurrence. A global request touches
  the distinct 32-byte **sectors** of its bytes (an array taken to start at a 256-byte boundary, as
  ``cudaMalloc`` gives; CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory"); a shared request
  is served in as many passes as the most distinct 4-byte words that fall into one of the 32 **banks** (bank =
  word mod 32; threads reading the same word share it: "Shared Memory and Memory Banks" there).
* A **race** is a shared-memory element written by one thread and read or written by another with no
  ``cuda.syncthreads()`` between them (each thread counts the barriers it passed; all threads of a block pass
  barrier k together). That is judged from the order of barriers, not from how the Python threads happened to
  interleave, so a missing barrier is found on every run.

* A **warp shuffle**, ``cuda.shfl_down_sync(mask, value, delta)``: Numba's simulator does not implement the warp
  operations (numba-cuda's own ``tests/cudapy/test_warp_ops.py`` is skipped there, "Warp Operations are not yet
  implemented on cudasim"), so the counting module adds it: each lane of the warp posts its value, waits for the
  others (a barrier of the warp's lanes, not the block's), and takes lane ``lane + delta``'s value, or keeps its own
  where that lane is past the warp's end, as CUDA's ``__shfl_down_sync`` does. Every lane of the warp must call it
  (the mask is taken as all of them): a lane that does not is an error after :data:`SHUFFLE_WAIT_S`, not a hang.
  :attr:`AccessCounts.shuffles` counts the warp-wide shuffle instructions. Registers are not memory: a shuffle is
  no load or store.

Limits: it counts element accesses of arrays passed to the kernel and shared arrays, not local arrays or
registers; a device function compiled for the GPU cannot be called from the simulated kernel; warps of a 2-D or
3-D block follow the linear thread index x + y·Dx + z·Dx·Dy, as on a GPU.
"""

from __future__ import annotations

import inspect
import math
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

WARP = 32  # threads of a warp
SECTOR = 32  # bytes of a global-memory sector
BANKS = 32  # shared-memory banks
BANK_WORD = 4  # bytes of a bank's word
KINDS = ("load", "store", "atomic")
NO_NUMBA = "Numba is not installed: pip install numba-cuda"
SHUFFLE_WAIT_S = 10.0  # how long a lane waits at a warp shuffle for the others before it is an error


# ----------------------------------------------------------------------------------------------------- the results
@dataclass(frozen=True)
class AccessRow:
    """One array's accesses of one kind (``load``, ``store`` or ``atomic``) in ``memory`` (``global``, for an array
    passed to the kernel, or ``shared``)."""

    array: str
    memory: str
    kind: str
    accesses: int  # element accesses by all threads
    requests: int  # warp-wide instructions
    sectors_per_request: float  # global: mean distinct 32-byte sectors per request
    ideal_sectors_per_request: float  # global: the least sectors the same elements could occupy, per request
    bank_conflict_ways: float  # shared: mean over requests of the most distinct words in one bank
    worst_bank_conflict_ways: int  # shared: the most in any request


@dataclass(frozen=True)
class Race:
    """A shared-memory element that two threads of a block touched with no ``cuda.syncthreads()`` between."""

    array: str
    index: tuple[int, ...]
    block: tuple[int, int, int]
    first: tuple[int, str, int]  # (linear thread index, "wrote" or "read", source line) of the earlier access
    second: tuple[int, str, int]  # the same for the later one

    def __str__(self) -> str:
        index = ", ".join(str(i) for i in self.index)
        (t1, did1, line1), (t2, did2, line2) = self.first, self.second
        return (f"in block {self.block}, thread {t2} {did2} {self.array}[{index}] (line {line2}), which thread {t1} "
                f"{did1} (line {line1}) with no cuda.syncthreads() between them")


@dataclass(frozen=True)
class DivergentBarrier:
    """Two threads of a block that did not pass the same barriers: a ``cuda.syncthreads()`` some threads of the
    block skipped (inside an ``if`` that not all take, or after a ``return``), or reached at different lines."""

    block: tuple[int, int, int]
    ahead: tuple[int, int, int]  # (linear thread index, barriers it passed, source line of the barrier in question)
    behind: tuple[int, int, int | None]  # the same for the other thread; its line is None where it never got there

    def __str__(self) -> str:
        (t1, passed1, line1), (t2, passed2, line2) = self.ahead, self.behind
        if line2 is None:
            return (f"in block {self.block}, thread {t1} passed cuda.syncthreads() {passed1} times, but thread {t2} "
                    f"only {passed2}: thread {t1}'s barrier number {passed2 + 1} (line {line1}) is one thread {t2} "
                    "never reached")
        return (f"in block {self.block}, thread {t1} met a barrier at line {line1} where thread {t2} met the one "
                f"at line {line2}")


@dataclass(frozen=True)
class AccessCounts:
    """What :func:`count_accesses` counted in one launch. The per-array dictionaries are keyed by the kernel's
    parameter names (global arrays); shared arrays are named by the variable their ``cuda.shared.array`` line
    assigns."""

    names: tuple[str, ...]  # the kernel's array parameters, in order
    sizes: dict[str, int]  # elements of each of them
    rows: tuple[AccessRow, ...]
    races: tuple[Race, ...] = ()
    race_count: int = 0
    blocks: tuple[int, int, int] = (1, 1, 1)
    threads: tuple[int, int, int] = (1, 1, 1)
    shared_names: tuple[str, ...] = field(default=())
    divergent_barrier: DivergentBarrier | None = None  # the first block whose threads passed different barriers
    shuffles: int = 0  # warp-wide cuda.shfl_down_sync instructions

    def row(self, array: str, kind: str, memory: str | None = None) -> AccessRow | None:
        """The row of ``array``'s accesses of ``kind`` (in ``memory`` if given), or None where it had none."""
        return next((r for r in self.rows if r.array == array and r.kind == kind and memory in (None, r.memory)),
                    None)

    def _global(self, kind: str) -> dict[str, int]:
        rows = {name: self.row(name, kind, "global") for name in self.names}
        return {name: row.accesses if row else 0 for name, row in rows.items()}

    @property
    def loads(self) -> dict[str, int]:
        return self._global("load")

    @property
    def stores(self) -> dict[str, int]:
        return self._global("store")

    @property
    def atomics(self) -> dict[str, int]:
        return self._global("atomic")

    @property
    def reads_per_element(self) -> dict[str, float]:
        """Loads divided by the array's size: 1.0 means each element was read once."""
        return {name: self.loads[name] / self.sizes[name] if self.sizes[name] else 0.0 for name in self.names}

    def _global_rows(self, name: str) -> list[AccessRow]:
        return [r for r in self.rows if r.array == name and r.memory == "global" and r.kind != "atomic"]

    @property
    def requests(self) -> dict[str, int]:
        """Warp-wide load and store requests of each array."""
        return {name: sum(r.requests for r in self._global_rows(name)) for name in self.names}

    def _mean_over_requests(self, name: str, attribute: str) -> float:
        rows = self._global_rows(name)
        total = sum(r.requests for r in rows)
        return sum(getattr(r, attribute) * r.requests for r in rows) / total if total else 0.0

    @property
    def sectors_per_request(self) -> dict[str, float]:
        """Mean distinct 32-byte sectors per load or store request: 4 for a coalesced float32 warp, 32 for a
        fully strided one."""
        return {name: self._mean_over_requests(name, "sectors_per_request") for name in self.names}

    @property
    def ideal_sectors_per_request(self) -> dict[str, float]:
        """The least that each request's elements could occupy, on average: what coalesced requests reach."""
        return {name: self._mean_over_requests(name, "ideal_sectors_per_request") for name in self.names}

    def _shared_rows(self) -> list[AccessRow]:
        return [r for r in self.rows if r.memory == "shared" and r.kind != "atomic"]

    @property
    def shared_requests(self) -> int:
        return sum(r.requests for r in self._shared_rows())

    @property
    def bank_conflict_ways(self) -> float:
        """Mean over shared-memory requests of the most distinct words one bank must serve: 1 is no conflict."""
        rows = self._shared_rows()
        total = sum(r.requests for r in rows)
        return sum(r.bank_conflict_ways * r.requests for r in rows) / total if total else 0.0

    @property
    def worst_bank_conflict_ways(self) -> int:
        return max((r.worst_bank_conflict_ways for r in self._shared_rows()), default=0)

    def table(self) -> str:
        """One row per array and kind of access: counts, requests, sectors (global) and bank conflicts (shared)."""
        head = ("array", "memory", "access", "count", "per element", "warp requests", "sectors/request",
                "bank ways")
        lines = [head]
        for r in self.rows:
            per_element = (f"{r.accesses / self.sizes[r.array]:.2f}" if r.memory == "global" and self.sizes[r.array]
                           else "")
            sectors = (f"{r.sectors_per_request:.1f} (best {r.ideal_sectors_per_request:.1f})"
                       if r.memory == "global" and r.kind != "atomic" else "")
            ways = f"{r.bank_conflict_ways:.1f}" if r.memory == "shared" and r.kind != "atomic" else ""
            lines.append((r.array, r.memory, r.kind, f"{r.accesses:,}", per_element, f"{r.requests:,}", sectors,
                          ways))
        widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
        text = []
        for line in lines:
            cells = zip(line, widths, strict=True)
            text.append("  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(cells)).rstrip())
        if self.race_count:
            text.append(f"{self.race_count:,} shared-memory race(s), the first: {self.races[0]}")
        if self.divergent_barrier:
            text.append(f"threads of a block passed different barriers: {self.divergent_barrier}")
        if self.shuffles:
            text.append(f"{self.shuffles:,} warp shuffles (register to register: no memory access)")
        return "\n".join(text)

    def __str__(self) -> str:
        return self.table()


# ---------------------------------------------------------------------------------------------------- the counting
class _Recorder:
    """Every access of one launch, grouped into requests as it happens."""

    def __init__(self):
        self.local = threading.local()
        # (array slot, kind, code, source position, occurrence, block, warp) -> byte offsets of the request's elements
        self.requests: dict[tuple, list[int]] = {}
        self.arrays: list[CountedArray] = []  # slot -> the array's first stand-in
        self.grid = (1, 1, 1)
        # race detection on shared memory: (slot, block, byte offset) -> [writer, write epoch, write line,
        # read epoch, readers {thread: line}]
        self.shared_state: dict[tuple, list] = {}
        self.races: list[Race] = []
        self.race_count = 0
        # (block index, linear thread index) -> the source line of each barrier the thread passed, in order
        self.barrier_lines: dict[tuple[int, int], list[int]] = {}
        self.lock = threading.Lock()
        # (block index, warp) -> (a barrier of the warp's lanes, the value each lane posted)
        self.warps: dict[tuple[int, int], tuple[threading.Barrier, list]] = {}
        self.shuffles = 0  # warp-wide shuffle instructions
        self.threads_per_block = 1

    def shuffle_down(self, value, delta: int):
        """``__shfl_down_sync`` over the calling thread's warp: lane ``lane + delta``'s value, or its own past the
        warp's end. Every lane of the warp must call it."""
        local = self.thread()
        warp, lane = divmod(local.tid, WARP)
        with self.lock:
            if (local.block_index, warp) not in self.warps:
                lanes = min(WARP, self.threads_per_block - warp * WARP)
                self.warps[local.block_index, warp] = (threading.Barrier(lanes, timeout=SHUFFLE_WAIT_S),
                                                       [None] * lanes)
            barrier, values = self.warps[local.block_index, warp]
        values[lane] = value
        try:
            barrier.wait()  # every lane has posted its value
            source = lane + int(delta)
            result = values[source] if 0 <= source < len(values) else value
            barrier.wait()  # every lane has read before any posts again
        except threading.BrokenBarrierError:
            raise RuntimeError(f"cuda.shfl_down_sync: lane {lane} of warp {warp} waited {SHUFFLE_WAIT_S:g} s for the "
                               "other lanes of its warp; every lane named in the mask must call it (a shuffle "
                               "inside an `if` that only some lanes take, or after a `return`)") from None
        if lane == 0:
            with self.lock:
                self.shuffles += 1
        return result

    def thread(self):
        """The calling simulated thread's own record: its block (``block``, and ``block_index`` in the grid), its
        linear index in the block (``tid``), how often it ran each access (``occurrences``) and how many barriers
        it passed (``epoch``)."""
        local = self.local
        if not hasattr(local, "occurrences"):
            current = threading.current_thread()
            b = tuple(current.blockIdx)
            gx, gy, _ = self.grid
            local.block = b
            local.block_index = b[0] + gx * (b[1] + gy * b[2])
            local.tid = current.thread_id
            local.occurrences = {}
            local.epoch = 0
        return local

    def record(self, array: CountedArray, kind: str, offset: int, frame) -> None:
        local = self.thread()
        site = (array.slot, kind, frame.f_code, _instruction(frame))
        occurrence = local.occurrences.get(site, 0)
        local.occurrences[site] = occurrence + 1
        key = (*site, occurrence, local.block_index, local.tid // WARP)
        self.requests.setdefault(key, []).append(offset)
        if array.memory == "shared" and kind != "atomic":
            self.check_race(array, kind, offset, local, frame.f_lineno)

    def check_race(self, array: CountedArray, kind: str, offset: int, local, line: int) -> None:
        key = (array.slot, local.block_index, offset)
        tid, epoch = local.tid, local.epoch
        with self.lock:
            state = self.shared_state.get(key)
            if state is None:
                state = self.shared_state[key] = [None, -1, 0, -1, {}]
            writer, write_epoch, write_line, read_epoch, readers = state
            earlier = None
            if writer is not None and writer != tid and write_epoch == epoch:
                earlier = (writer, "wrote", write_line)
            elif kind == "store" and read_epoch == epoch:
                other = next((t for t in readers if t != tid), None)
                if other is not None:
                    earlier = (other, "read", readers[other])
            if earlier is not None:
                self.race_count += 1
                if len(self.races) < 5:
                    self.races.append(Race(array.name, array.index_of(offset), local.block, earlier,
                                           (tid, "wrote" if kind == "store" else "read", line)))
            if kind == "store":
                state[0], state[1], state[2] = tid, epoch, line
            else:
                if read_epoch != epoch:
                    state[3], state[4] = epoch, {}
                state[4].setdefault(tid, line)

    def barrier(self, line: int, passes: int = 1) -> None:
        local = self.thread()
        local.epoch += passes
        with self.lock:
            self.barrier_lines.setdefault((local.block_index, local.tid), []).extend([line] * passes)

    def divergent_barrier(self, block_dims: tuple[int, int, int]) -> DivergentBarrier | None:
        """The first block whose threads did not pass the same barriers at the same lines, as a pair of them.

        On a GPU every thread of a block must reach each ``__syncthreads()``; the simulator instead lets the
        threads that wait go on once all the others have finished or wait too, so a skipped barrier shows only
        here. A thread that recorded no barrier passed none."""
        size = block_dims[0] * block_dims[1] * block_dims[2]
        gx, gy, _ = self.grid
        for block_index in sorted({b for b, _ in self.barrier_lines}):
            lines = [self.barrier_lines.get((block_index, tid), []) for tid in range(size)]
            longest = max(range(size), key=lambda tid: len(lines[tid]))
            for tid in range(size):
                if lines[tid] == lines[longest]:
                    continue
                # The first barrier where they part; a shorter list that agrees so far parts where it ends.
                pairs = zip(lines[longest], lines[tid], strict=False)
                k = next((i for i, (a, b) in enumerate(pairs) if a != b), len(lines[tid]))
                block = (block_index % gx, block_index // gx % gy, block_index // (gx * gy))
                theirs = lines[tid][k] if k < len(lines[tid]) else None
                return DivergentBarrier(block, (longest, len(lines[longest]), lines[longest][k]),
                                        (tid, len(lines[tid]), theirs))
        return None

    def rows(self) -> tuple[AccessRow, ...]:
        grouped: dict[tuple[int, str], list[list[int]]] = {}
        for (slot, kind, *_), offsets in self.requests.items():
            grouped.setdefault((slot, kind), []).append(offsets)
        order = {kind: i for i, kind in enumerate(KINDS)}
        rows = []
        for (slot, kind), requests in sorted(grouped.items(), key=lambda item: (item[0][0], order[item[0][1]])):
            array = self.arrays[slot]
            itemsize = array.itemsize
            sectors, ideal, ways = [], [], []
            for offsets in requests:
                if array.memory == "global":
                    touched = {byte // SECTOR for start in set(offsets) for byte in (start, start + itemsize - 1)}
                    sectors.append(len(touched))
                    ideal.append(math.ceil(len(set(offsets)) * itemsize / SECTOR))
                else:
                    words = {word for start in offsets
                             for word in range(start // BANK_WORD, (start + itemsize - 1) // BANK_WORD + 1)}
                    ways.append(max(Counter(word % BANKS for word in words).values()))
            count = len(requests)
            rows.append(AccessRow(
                array=array.name, memory=array.memory, kind=kind, accesses=sum(len(o) for o in requests),
                requests=count, sectors_per_request=sum(sectors) / count if sectors else 0.0,
                ideal_sectors_per_request=sum(ideal) / count if ideal else 0.0,
                bank_conflict_ways=sum(ways) / count if ways else 0.0, worst_bank_conflict_ways=max(ways, default=0)))
        return tuple(rows)


_POSITIONS: dict = {}


def _instruction(frame):
    """Where in its source the instruction that ``frame`` is running stands (line and columns): the same for every
    run of that instruction. Not ``f_lasti`` alone: once Python 3.11 specialises a subscript into a call of
    ``__getitem__`` (BINARY_SUBSCR_GETITEM), it points at the instruction's last inline cache entry, before that at
    the instruction itself (one warp's load was split in two requests by it); the cache entries share the
    instruction's position (``code.co_positions()``)."""
    code = frame.f_code
    positions = _POSITIONS.get(code)
    if positions is None:
        positions = _POSITIONS[code] = list(code.co_positions())
    return positions[frame.f_lasti // 2]


class CountedArray:
    """What a counted kernel receives for an array: it records each element access with the calling thread, then
    does it on the NumPy array. Slicing gives a counted view of the same array (no access by itself)."""

    __slots__ = ("_ary", "recorder", "slot", "name", "memory", "origin", "shape", "size", "ndim", "dtype",
                 "strides", "itemsize", "_start")

    def __init__(self, ary: np.ndarray, recorder: _Recorder, name: str, memory: str, *, slot: int | None = None,
                 origin: np.ndarray | None = None):
        self._ary = ary
        self.recorder = recorder
        self.name, self.memory = name, memory
        self.origin = ary if origin is None else origin
        if slot is None:
            slot = len(recorder.arrays)
            recorder.arrays.append(self)
        self.slot = slot
        self.shape, self.size, self.ndim, self.dtype = tuple(ary.shape), ary.size, ary.ndim, ary.dtype
        self.strides, self.itemsize = ary.strides, ary.itemsize
        self._start = _address(ary) - _address(self.origin)

    def _offset(self, index) -> int | None:
        """The byte offset from the array's start of the element ``index`` names, or None where it names more."""
        if not isinstance(index, tuple):
            index = (index,)
        if len(index) != self.ndim:
            return None
        offset = self._start
        for i, n, stride in zip(index, self.shape, self.strides, strict=True):
            if not isinstance(i, (int, np.integer)) or isinstance(i, (bool, np.bool_)):
                return None
            i = int(i)
            if i < 0:
                i += n
            offset += i * stride
        return offset

    def _view(self, ary: np.ndarray) -> CountedArray:
        return CountedArray(ary, self.recorder, self.name, self.memory, slot=self.slot, origin=self.origin)

    def _offsets_of(self, index) -> np.ndarray:
        grid = np.full(self.shape, self._start, dtype=np.int64)
        for axis, (n, stride) in enumerate(zip(self.shape, self.strides, strict=True)):
            grid += (np.arange(n, dtype=np.int64) * stride).reshape([n if a == axis else 1 for a in range(self.ndim)])
        return np.atleast_1d(grid[index]).ravel()

    def index_of(self, offset: int) -> tuple[int, ...]:
        """The index into the whole array of the element at byte ``offset``."""
        origin = self.origin
        flat = offset // origin.itemsize
        if origin.flags.c_contiguous:
            return tuple(int(i) for i in np.unravel_index(flat, origin.shape))
        return (flat,)

    def __getitem__(self, index):
        value = self._ary[index]
        if isinstance(value, np.ndarray):
            return self._view(value)
        offset = self._offset(index)
        if offset is not None:
            self.recorder.record(self, "load", offset, sys._getframe(1))
        return value

    def __setitem__(self, index, value) -> None:
        self._ary[index] = value
        offset = self._offset(index)
        frame = sys._getframe(1)
        for at in [offset] if offset is not None else self._offsets_of(index).tolist():
            self.recorder.record(self, "store", at, frame)

    def atomic(self, index, frame) -> None:
        offset = self._offset(index)
        for at in [offset] if offset is not None else self._offsets_of(index).tolist():
            self.recorder.record(self, "atomic", at, frame)

    def __len__(self) -> int:
        return len(self._ary)

    def __getattr__(self, name):
        return getattr(self._ary, name)

    def __repr__(self) -> str:
        return f"<counted {self.memory} array {self.name} {self.shape} {self.dtype}>"


def _address(ary: np.ndarray) -> int:
    return ary.__array_interface__["data"][0]


def _garbage(shape, dtype) -> np.ndarray:
    """A new shared array as a GPU hands it out, holding what was there: NaN for floats, else the largest value."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return np.full(shape, np.nan, dtype=dtype)
    if dtype.kind in "iu":
        return np.full(shape, np.iinfo(dtype).max, dtype=dtype)
    return np.ones(shape, dtype=dtype)


def _shared_name(frame) -> str:
    """The variable a ``name = cuda.shared.array(...)`` line assigns, else ``shared (line N)``."""
    import linecache
    import re

    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno, frame.f_globals)
    found = re.match(r"\s*([A-Za-z_]\w*)\s*=", line)
    return found.group(1) if found else f"shared (line {frame.f_lineno})"


def _numba_simulator():
    """numba-cuda's simulator: (its kernel module, its kernelapi module, numba.cuda.types, numpy_support)."""
    try:
        import numba  # noqa: F401 - the message below names the missing package
    except ImportError as error:
        raise ModuleNotFoundError(NO_NUMBA) from error
    try:
        from numba.cuda import types
        from numba.cuda.np import numpy_support
        from numba.cuda.simulator import kernel, kernelapi
    except Exception as error:  # noqa: BLE001 - whatever stops the simulator from importing is the reason to give
        raise RuntimeError(f"count_accesses runs kernels on Numba's CUDA simulator, which cannot be imported here "
                           f"({type(error).__name__}: {error}); numba-cuda 0.30 has it in numba/cuda/simulator"
                           ) from error
    return kernel, kernelapi, types, numpy_support


def _counting_module_class(kernelapi, types, numpy_support):
    """A subclass of the simulator's ``FakeCUDAModule`` whose shared arrays, atomics and barriers are counted."""

    class CountingShared:
        def __init__(self, module):
            self._module = module
            self._allocations: dict[tuple, CountedArray] = {}

        def array(self, shape, dtype, alignment=None):
            module = self._module
            if alignment is not None:
                raise RuntimeError("Array alignment is not supported in cudasim")
            if isinstance(dtype, types.Type):
                dtype = numpy_support.as_dtype(dtype)
            frame = sys._getframe(1)
            local = module.recorder.thread()
            if shape == 0:  # dynamic shared memory: one buffer for the whole launch, as the simulator has it
                key = ("dynamic", local.block_index)
                make = lambda: np.frombuffer(module.dynamic.data, dtype=dtype,  # noqa: E731
                                             count=module.dynamic.size // np.dtype(dtype).itemsize)
            else:
                key = (frame.f_code.co_filename, frame.f_lineno, local.block_index)
                make = lambda: _garbage(shape, dtype)  # noqa: E731
            with module.recorder.lock:
                counted = self._allocations.get(key)
                if counted is None:
                    slot = module.shared_slots.get(key[:-1])
                    name = "dynamic shared" if shape == 0 else _shared_name(frame)
                    counted = CountedArray(make(), module.recorder, name, "shared", slot=slot)
                    module.shared_slots.setdefault(key[:-1], counted.slot)
                    self._allocations[key] = counted
            return counted

    class CountingAtomic:
        def __init__(self, atomic, recorder):
            self._atomic, self._recorder = atomic, recorder

        def __getattr__(self, name):
            operation = getattr(self._atomic, name)

            def counted(array, *rest):
                if isinstance(array, CountedArray):
                    index = (0,) * array.ndim if name == "compare_and_swap" else rest[0]
                    array.atomic(index, sys._getframe(1))
                    array = array._ary
                return operation(array, *rest)

            return counted

    class CountingCUDAModule(kernelapi.FakeCUDAModule):
        recorder: _Recorder

        def __init__(self, grid_dim, block_dim, dynshared_size):
            super().__init__(grid_dim, block_dim, dynshared_size)
            self.recorder = CountingCUDAModule.recorder
            self.recorder.grid = tuple(grid_dim)
            self.recorder.threads_per_block = math.prod(block_dim)
            self.dynamic = np.zeros(dynshared_size, dtype=np.byte)
            self.shared_slots: dict[tuple, int] = {}
            self._counting_shared = CountingShared(self)
            self._counting_atomic = CountingAtomic(self._atomic, self.recorder)

        @property
        def shared(self):
            return self._counting_shared

        @property
        def atomic(self):
            return self._counting_atomic

        def syncthreads(self):
            self.recorder.barrier(sys._getframe(1).f_lineno)
            super().syncthreads()

        def shfl_down_sync(self, mask, value, delta):  # the simulator has no warp operations: the counter's own
            return self.recorder.shuffle_down(value, delta)

        # Each of these passes two barriers (BlockThread.syncthreads_count and its kin).
        def syncthreads_count(self, val):
            self.recorder.barrier(sys._getframe(1).f_lineno, 2)
            return super().syncthreads_count(val)

        def syncthreads_and(self, val):
            self.recorder.barrier(sys._getframe(1).f_lineno, 2)
            return super().syncthreads_and(val)

        def syncthreads_or(self, val):
            self.recorder.barrier(sys._getframe(1).f_lineno, 2)
            return super().syncthreads_or(val)

    return CountingCUDAModule


_LAUNCH_LOCK = threading.Lock()
# Python's thread switch interval during a counted launch, in seconds (Python's default is 0.005). The simulator's
# main thread polls its block's threads in a loop while they run; with the GIL handed on ten times as often, the
# threads that have work get it sooner: about a third less CPU time per launch, measured on 2 cores.
SWITCH_INTERVAL = 0.0005


@contextmanager
def counting_launches(recorder: _Recorder) -> Iterator[object]:
    """While inside, kernels the simulator launches get a fake ``cuda`` module whose shared arrays, atomics and
    barriers report to ``recorder``; yields the simulator's ``FakeCUDAKernel`` class. Restores the simulator's
    own module class, and Python's thread switch interval (SWITCH_INTERVAL while inside), after, also on an
    error."""
    kernel, kernelapi, types, numpy_support = _numba_simulator()
    counting = _counting_module_class(kernelapi, types, numpy_support)
    counting.recorder = recorder
    with _LAUNCH_LOCK:
        original, interval = kernel.FakeCUDAModule, sys.getswitchinterval()
        kernel.FakeCUDAModule = counting
        sys.setswitchinterval(SWITCH_INTERVAL)
        try:
            yield kernel.FakeCUDAKernel
        finally:
            kernel.FakeCUDAModule = original
            sys.setswitchinterval(interval)


def python_function(kernel):
    """The Python function of a ``@cuda.jit`` kernel, made for the simulator (``FakeCUDAKernel``) or for a GPU
    (``CUDADispatcher``); TypeError for anything else."""
    function = getattr(kernel, "py_func", None)
    if type(kernel).__name__ not in ("FakeCUDAKernel", "CUDADispatcher") or not callable(function):
        raise TypeError(f"expected a Numba CUDA kernel (a function decorated with @cuda.jit), got "
                        f"{type(kernel).__name__}")
    if getattr(kernel, "_device", False) or getattr(kernel, "targetoptions", {}).get("device"):
        raise TypeError(f"{function.__name__} is a device function (@cuda.jit(device=True)): count the kernel "
                        "that calls it")
    return function


@contextmanager
def _simulated_device_functions(function, simulated_kernel) -> Iterator[None]:
    """While inside, the device functions compiled for a GPU (``@cuda.jit(device=True)`` where numba's CUDA target
    is the real one) that ``function``'s module holds are the simulator's, made of their Python functions, so
    that the simulated kernel can call them; put back after."""
    namespace = function.__globals__
    swapped = {name: value for name, value in list(namespace.items())
               if type(value).__name__ == "CUDADispatcher" and getattr(value, "targetoptions", {}).get("device")}
    for name, value in swapped.items():
        namespace[name] = simulated_kernel(value.py_func, device=True)
    try:
        yield
    finally:
        for name, value in swapped.items():
            namespace[name] = value


def _host_array(value, name: str):
    """A NumPy array for an argument: NumPy arrays as they are, the simulator's device arrays unwrapped."""
    if isinstance(value, np.ndarray):
        return value
    if type(value).__name__ in ("FakeCUDAArray", "FakeWithinKernelCUDAArray"):
        inner = getattr(value, "_ary", None)
        inner = getattr(inner, "_ary", inner)
        if isinstance(inner, np.ndarray):
            return inner
    if hasattr(value, "copy_to_host"):
        raise TypeError(f"{name} is a device array ({type(value).__name__}): count_accesses runs the kernel on the "
                        "simulator, on the CPU; pass NumPy arrays (d.copy_to_host()) and read them after")
    return None


def _dims(value, what: str) -> tuple[int, int, int]:
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(values) <= 3 or not all(isinstance(v, (int, np.integer)) and v >= 1 for v in values):
        raise ValueError(f"{what} must be a positive whole number or a tuple of 1 to 3 of them, got {value!r}")
    return tuple(int(v) for v in values) + (1,) * (3 - len(values))


def count_accesses(kernel, blocks, threads, *arrays_and_scalars) -> AccessCounts:
    """Launch ``kernel[blocks, threads](*arrays_and_scalars)`` on Numba's CUDA simulator, whatever the machine,
    counting every load, store and atomic of its arrays and shared arrays.

    NumPy arrays in, updated in place as a launch would; ``blocks`` and ``threads`` as Numba's launch takes them.
    A kernel compiled for a GPU runs its Python function on the simulator. Errors of the kernel (an
    ``IndexError`` for an index past the end of an array) come out as the simulator raises them. Keep the grid
    small: each CUDA thread is a Python thread."""
    function = python_function(kernel)
    grid, block = _dims(blocks, "blocks"), _dims(threads, "threads")
    parameters = list(inspect.signature(function).parameters)
    recorder = _Recorder()
    launch_args, names, sizes = [], [], {}
    for position, value in enumerate(arrays_and_scalars):
        name = parameters[position] if position < len(parameters) else f"argument {position}"
        host = _host_array(value, name)
        if host is None or host.ndim == 0:
            launch_args.append(value)
            continue
        launch_args.append(CountedArray(host, recorder, name, "global"))
        names.append(name)
        sizes[name] = host.size
    with counting_launches(recorder) as simulated_kernel, _simulated_device_functions(function, simulated_kernel):
        simulated_kernel(function, device=False)[blocks, threads](*launch_args)
    shared = tuple(dict.fromkeys(a.name for a in recorder.arrays if a.memory == "shared"))
    return AccessCounts(names=tuple(names), sizes=sizes, rows=recorder.rows(), races=tuple(recorder.races),
                        race_count=recorder.race_count, blocks=grid, threads=block, shared_names=shared,
                        divergent_barrier=recorder.divergent_barrier(block), shuffles=recorder.shuffles)
