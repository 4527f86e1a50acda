"""Chapter 12 (case study): each exercise's solution, and wrong answers with a word the check's message must
contain."""

import torch

from gpukit.bench import lu_determinant

# The lesson's solution: the book's one determinant from LU (tests/test_determinants.py: the same code).
lu_det = lu_determinant


def unsigned_det(a):
    """Forgets the row swaps: right magnitudes, wrong signs."""
    lu, _, _ = torch.linalg.lu_factor_ex(a)
    return torch.diagonal(lu, dim1=-2, dim2=-1).prod(dim=-1)



SOLUTIONS = {
    "ex-case-batch-bytes": lambda: (2 * 4096 * 64 * 64 * 8, {}),
    "ex-case-lu-det": lambda: (lu_det, {}),
    "ex-case-chunk-calls": lambda: (5, {}),
}

WRONG_ANSWERS = {
    "ex-case-batch-bytes": lambda: [
        (4096 * 64 * 64 * 8, "too small"),  # the matrices without their FFTs
        (2 * 4096 * 64 * 64 * 16, "too large"),  # complex128
        ("256 MiB", "expected a number"),
    ],
    "ex-case-lu-det": lambda: [
        (torch.linalg.det, "torch.linalg.det itself"),
        (lambda a: torch.linalg.det(a), "calls torch.linalg.det"),
        (unsigned_det, "values differ"),
        (lambda a: lu_det(a).to(torch.complex64), "dtype is torch.complex64"),
        (lambda a: lu_det(a).numpy(), "expected a torch array"),
        (lambda a: None, "returned None"),
        (lu_det(torch.eye(3, dtype=torch.complex128)[None]), "expected your function itself"),
    ],
    "ex-case-chunk-calls": lambda: [
        (3, "too small"),  # 10 000 / 4096, rounded up: as if nothing failed
        (6, "too large"),  # counting the failed call too
        ([2048] * 5, "expected a number"),
    ],
}
