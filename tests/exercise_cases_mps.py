"""Chapter 7 (Apple MPS): each exercise's solution, and wrong answers with a word the check's message must
contain."""

import functools

import numpy as np
import torch

from gpukit.bench import lu_determinant  # the lesson's code (tests/test_determinants.py compares them)
from gpukit.exercises.mps import MPS_LU_MATRIX, MPS_PIVOTS


@functools.cache
def support_table():
    """A probe of this machine, on a few operations (two of them complex64), as the lesson's table."""
    from gpukit.backends import probe

    return probe(operations=["matmul (float32)", "matmul (complex64)", "fft.fft (complex64)",
                             "linalg.det (float32)"])


def _complex_ok(table):
    best = table.columns[0]
    return sum(table.loc[op, best] == "ok" for op in table.index if op.endswith("(complex64)"))


SOLUTIONS = {
    "ex-mps-pivot-sign": lambda: (
        (-1) ** sum(p != i for i, p in enumerate(MPS_PIVOTS, start=1)), {}),
    "ex-mps-lu-det": lambda: (
        lu_determinant(torch.tensor(MPS_LU_MATRIX, dtype=torch.float64)).item(), {}),
    "ex-mps-complex-ops": lambda: (_complex_ok(support_table()), {"support": support_table()}),
}


def _complex_wrong_answers():
    table = support_table()
    every_ok = int((table == "ok").all(axis=1).sum())  # all operations, not only complex64 ones
    return [(every_ok, "too large"), ("two", "expected a number"), (0, "too small")]


WRONG_ANSWERS = {
    "ex-mps-pivot-sign": lambda: [
        (1, "too large"),  # an even count of swaps: counting pivots equal to their step instead
        ("minus one", "expected a number"),
        (torch.tensor(MPS_PIVOTS), "expected a number"),  # the pivots themselves
    ],
    "ex-mps-lu-det": lambda: [
        # the product of the matrix's own diagonal, not U's (the sign-less product of U's diagonal cannot be
        # a wrong case here: the message would show its size, which is the answer's)
        (float(np.prod(np.diag(MPS_LU_MATRIX))), "too small"),
        (np.array(MPS_LU_MATRIX), "expected a number"),
        (None, "replace the placeholder"),
    ],
    "ex-mps-complex-ops": _complex_wrong_answers,
}
