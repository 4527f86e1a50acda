"""Chapter 10, multi-GPU and distributed: what its exercises expect, and how a wrong answer is told apart."""

from __future__ import annotations

from .checking import Exercise, register


def _after_the_all_reduce():
    """What every rank holds after all_reduce (a sum) of [1, 2] * (r + 1) over ranks r = 0..3: float32."""
    import torch

    return sum(torch.tensor([1.0, 2.0]) * (r + 1) for r in range(4))


register(
    Exercise("ex-dist-ring-bytes", lambda: 2 * (8 - 1) / 8 * (4 * 25_000_000), writes="a number"),
    Exercise("ex-dist-allreduce-sum", _after_the_all_reduce, writes="a number"),
    Exercise("ex-dist-ring-time", lambda: 2 * (8 - 1) / 8 * 2e9 / 50e9, rtol=1e-3, writes="a number"),
)
