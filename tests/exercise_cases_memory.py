"""Chapter 6 (VRAM and device errors): each exercise's solution, and wrong answers with a word the check's
message must contain."""

import numpy as np
import torch

from gpukit.chunking import run_in_chunks
from gpukit.memory import nbytes


def _settled_chunk_by_running():
    """As the lesson's solution: a pretend work that runs out of memory above 3 GiB of 4 MiB rows."""
    row_bytes, free_bytes = 4 * 2**20, 3 * 2**30

    def pretend_work(start, stop):
        if (stop - start) * row_bytes > free_bytes:
            raise MemoryError("pretend")
        return list(range(start, stop))

    return run_in_chunks(pretend_work, 10_000, min_chunk=100, report=None).chunk


SOLUTIONS = {
    "ex-mem-tensor-bytes": lambda: (nbytes((2048, 2048, 16), torch.complex64), {}),
    "ex-mem-largest-batch": lambda: ((5 * 2**30) // (4 * nbytes((3, 512, 512), "float32")), {}),
    "ex-mem-halving-chunk": lambda: (_settled_chunk_by_running(), {}),
}

WRONG_ANSWERS = {
    "ex-mem-tensor-bytes": lambda: [
        (2048 * 2048 * 16 * 4, "too small"),  # four bytes, as if float32
        (2048 * 2048 * 16 * 16, "too large"),  # complex128
        ("512 MiB", "expected a number"),
        (torch.zeros(2048, 16, dtype=torch.complex64), "expected a number"),
    ],
    "ex-mem-largest-batch": lambda: [
        ((5 * 2**30) // (4 * 3 * 512 * 512 * 4) + 1, "too large"),  # rounded up
        ((5 * 2**30) // (3 * 512 * 512 * 4), "too large"),  # forgot the four arrays per sample
        ((5 * 10**9) // (4 * 3 * 512 * 512 * 4), "too small"),  # GB taken for GiB
        (np.arange(3), "expected a number"),
    ],
    "ex-mem-halving-chunk": lambda: [
        (768, "too large"),  # the largest that fits, which halving never tries
        (1250, "too large"),
        (312, "too small"),
        ([10_000, 5000, 2500, 1250], "expected a number"),
    ],
}
