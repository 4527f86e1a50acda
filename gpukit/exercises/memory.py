"""Chapter 6, VRAM and device errors: what its exercises expect, and how a wrong answer is told apart."""

from __future__ import annotations

import numpy as np

from .checking import Exercise, register


def _halving_settles_on(start=10_000, min_chunk=100, row_bytes=4 * 2**20, free_bytes=3 * 2**30):
    """The first size in start, start // 2, ... whose rows fit in ``free_bytes`` (as run_in_chunks halves)."""
    size = start
    while size * row_bytes > free_bytes:
        size //= 2
    return size if size >= min_chunk else None


register(
    Exercise("ex-mem-tensor-bytes", lambda: 2048 * 2048 * 16 * np.dtype("complex64").itemsize, writes="a number"),
    Exercise("ex-mem-largest-batch", lambda: (5 * 2**30) // (4 * 3 * 512 * 512 * np.dtype("float32").itemsize),
             rtol=0.0, writes="a number"),
    Exercise("ex-mem-halving-chunk", _halving_settles_on, rtol=0.0, writes="a number"),
)
