"""Chapter 7, Apple MPS: what its exercises expect, and how a wrong answer is told apart."""

from __future__ import annotations

import numpy as np

from .checking import Exercise, register

MPS_PIVOTS = (3, 3, 4, 4)  # the 1-indexed pivots of ex-mps-pivot-sign, as torch.linalg.lu_factor returns them
MPS_LU_MATRIX = ((4.0, 1.0, 3.0), (2.0, -1.0, 0.0), (-2.0, 5.0, 1.0))  # the matrix of ex-mps-lu-det


def _sign_of_the_pivots():
    """(-1) to the number of steps i whose pivot is not row i itself."""
    swaps = sum(pivot != step for step, pivot in enumerate(MPS_PIVOTS, start=1))
    return (-1) ** swaps


def _complex64_operations_that_work(support):
    """How many ``(complex64)`` rows of the live probe table are ``"ok"`` on its first (best) device."""
    best = support.columns[0]
    return sum(support.loc[op, best] == "ok" for op in support.index if str(op).endswith("(complex64)"))


register(
    Exercise("ex-mps-pivot-sign", _sign_of_the_pivots, writes="a number"),
    Exercise("ex-mps-lu-det", lambda: float(np.linalg.det(np.array(MPS_LU_MATRIX))), rtol=1e-9, writes="a number"),
    Exercise("ex-mps-complex-ops", _complex64_operations_that_work, needs=("support",), writes="a number"),
)
