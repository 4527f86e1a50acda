"""Chapter 1, CPU versus GPU: what its exercises expect, and how a wrong answer is told apart."""

from __future__ import annotations

from .checking import Exercise, register

register(
    Exercise("ex-cpu-gpu-matmul-flops", lambda: 2 * 3000**3, writes="a number"),
    Exercise("ex-cpu-gpu-transfer-share", lambda: (2 + 1) * 60 / ((2 + 1) * 60 + 70), rtol=1e-3, writes="a number"),
    Exercise("ex-cpu-gpu-ew-bytes", lambda: (4 + 4) * 10_000_000, writes="a number"),
)
