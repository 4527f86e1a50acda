"""Running work in chunks, and halving the chunk when memory runs out.

:func:`run_in_chunks` calls ``work(start, stop)`` on consecutive slices ``[start, stop)`` of ``total`` items
and joins the pieces. When a call runs out of memory, on a GPU or on the host, it releases what it can,
halves the chunk and tries the same slice again; the smaller chunk is kept for the rest of the run. Below
``min_chunk`` it gives up with :class:`StillOutOfMemory`. Any other error passes through unchanged.

:func:`is_out_of_memory` says which errors count as running out of memory:

- ``torch.OutOfMemoryError`` (the same class as ``torch.cuda.OutOfMemoryError``), raised by PyTorch's CUDA
  caching allocator; it is a ``RuntimeError``;
- ``MemoryError``, raised by NumPy when the host cannot give it an array (NumPy's own subclass), and by
  CuPy's memory pool (``cupy.cuda.memory.OutOfMemoryError``);
- a ``RuntimeError`` whose message is the out-of-memory report of PyTorch's CPU allocator
  (``DefaultCPUAllocator: can't allocate memory``), of older PyTorch on CUDA (``CUDA out of memory``), of
  PyTorch on Apple's GPUs (``MPS backend out of memory``) or of JAX (``RESOURCE_EXHAUSTED``).
"""

from __future__ import annotations

import gc
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

from gpukit.base.arguments import require_whole_number
from gpukit.base.units import human_bytes
from gpukit.core.device import mps_available

_OUT_OF_MEMORY_MESSAGES = (
    "DefaultCPUAllocator: can't allocate memory",  # PyTorch, host memory
    "CUDA out of memory",  # PyTorch on CUDA before torch.OutOfMemoryError existed
    "MPS backend out of memory",  # PyTorch on Apple GPUs: a plain RuntimeError
    "RESOURCE_EXHAUSTED",  # JAX and XLA
)


class StillOutOfMemory(RuntimeError):
    """Out of memory even with the smallest chunk :func:`run_in_chunks` was allowed to try."""


def is_out_of_memory(error: BaseException) -> bool:
    """True when ``error`` reports that an allocation failed for want of memory (see the module's notes)."""
    if isinstance(error, MemoryError):
        return True
    torch = sys.modules.get("torch")
    out_of_memory = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    if out_of_memory is not None and isinstance(error, out_of_memory):
        return True
    if isinstance(error, RuntimeError):
        text = str(error)
        return any(message in text for message in _OUT_OF_MEMORY_MESSAGES)
    return False


_ASKED_BYTES = re.compile(r"allocat(?:e|ing) (\d+) bytes")
_ASKED_SIZE = re.compile(r"[Tt]ried to allocate ([\d.]+ ?[KMGTP]?i?B)|Unable to allocate ([\d.]+ ?[KMGTP]?i?B)")


def describe_out_of_memory(error: BaseException) -> str:
    """A short name for an out-of-memory error: its class and, where the message says it, the size asked for.

    ``RuntimeError asking for 96.00 MiB``, ``OutOfMemoryError asking for 1.50 GiB``, ``MemoryError``.
    """
    text = str(error)
    found = _ASKED_BYTES.search(text)
    if found:
        return f"{type(error).__name__} asking for {human_bytes(int(found.group(1)))}"
    found = _ASKED_SIZE.search(text)
    if found:
        size = (found.group(1) or found.group(2)).replace(". ", " ")
        return f"{type(error).__name__} asking for {size}"
    return type(error).__name__


def release_cached_memory() -> None:
    """Give memory back after an out-of-memory error, before trying again.

    Collects Python's garbage (tensors held only in reference cycles), then, where PyTorch has started CUDA,
    returns the caching allocator's unused blocks to the driver with ``torch.cuda.empty_cache()``; on Apple
    GPUs ``torch.mps.empty_cache()`` does the same. Nothing else is touched: tensors still referenced stay.
    """
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is None:
        return
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    if mps_available():
        torch.mps.empty_cache()


@dataclass(frozen=True)
class ChunkedRun:
    """What :func:`run_in_chunks` returns: the joined ``result``, the ``chunk`` size it settled on, how many
    calls of ``work`` succeeded (``calls``), and one line per halving (``halvings``)."""

    result: object
    chunk: int
    calls: int
    halvings: tuple[str, ...]

    def __str__(self) -> str:
        halved = f"halved {len(self.halvings)} time(s)" if self.halvings else "never halved"
        return f"{self.calls} call(s) of at most {self.chunk:,} items; the chunk was {halved}"


def join_pieces(pieces: list):
    """Join the results of the chunks: tensors with ``torch.cat``, NumPy arrays with ``numpy.concatenate``,
    lists one after the other; anything else comes back as the list of pieces."""
    if not pieces:
        return pieces
    first = pieces[0]
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(first, torch.Tensor):
        return torch.cat(pieces)
    import numpy as np

    if isinstance(first, np.ndarray):
        return np.concatenate(pieces)
    if isinstance(first, list):
        return [item for piece in pieces for item in piece]
    return pieces


def run_in_chunks(work: Callable[[int, int], object], total: int, *, chunk: int | None = None,
                  min_chunk: int = 1, combine: Callable[[list], object] | None = None,
                  report: Callable[[str], object] | None = print) -> ChunkedRun:
    """Compute ``work(start, stop)`` over ``[0, total)`` in chunks, halving the chunk on out-of-memory errors.

    ``chunk`` is the first chunk size to try (default: everything at once). After an out-of-memory error
    (:func:`is_out_of_memory`) the failed slice is tried again with half the chunk, after
    :func:`release_cached_memory`; a halving that would go below ``min_chunk`` raises
    :class:`StillOutOfMemory` instead, chained to the last error. Other errors pass through unchanged.
    ``combine`` joins the pieces (default :func:`join_pieces`); ``report`` receives a line per halving
    (``None`` for silence). The results of ``work`` must not depend on how the items are split.
    """
    if not callable(work):
        raise TypeError(f"work must be a function work(start, stop), not {type(work).__name__} {work!r}")
    total = require_whole_number("total", total, minimum=0)
    if chunk is not None:
        chunk = require_whole_number("chunk", chunk, minimum=1)
    min_chunk = require_whole_number("min_chunk", min_chunk, minimum=1)
    if chunk is not None and min_chunk > chunk:
        raise ValueError(f"min_chunk ({min_chunk:,}) must not exceed the first chunk ({chunk:,})")
    if combine is not None and not callable(combine):
        raise TypeError(f"combine must be a function of the list of pieces, not {type(combine).__name__}")
    if report is not None and not callable(report):
        raise TypeError(f"report must be a function such as print, or None, not {type(report).__name__}")
    combine = combine or join_pieces
    if total == 0:
        return ChunkedRun(combine([work(0, 0)]), 0, 1, ())

    size = chunk if chunk is not None else total
    pieces, halvings, start = [], [], 0
    while start < total:
        stop = min(start + size, total)
        failure = None
        try:
            pieces.append(work(start, stop))
        except Exception as error:
            if not is_out_of_memory(error):
                raise
            failure = describe_out_of_memory(error)
            if size // 2 < min_chunk:
                raise StillOutOfMemory(
                    f"out of memory even with chunks of {size:,} items ({failure}); halving again would go "
                    f"below min_chunk={min_chunk:,}. Free memory first (delete large arrays you no longer "
                    "need), allow a smaller min_chunk, or run on a device with more memory."
                ) from error
        if failure is None:
            start = stop
            continue
        # Out of the except block: the error and its traceback, which kept the failed call's temporaries
        # alive, are gone, so the memory they held can be released before the next try.
        release_cached_memory()
        line = f"out of memory with chunks of {size:,} ({failure}); trying {size // 2:,}"
        halvings.append(line)
        if report is not None:
            report(line)
        size //= 2
    return ChunkedRun(combine(pieces), size, len(pieces), tuple(halvings))


__all__ = ["ChunkedRun", "StillOutOfMemory", "describe_out_of_memory", "is_out_of_memory", "join_pieces",
           "release_cached_memory", "run_in_chunks"]
