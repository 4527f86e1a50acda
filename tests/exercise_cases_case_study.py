"""Chapter 12 (case study) and the appendix on benchmarks across hardware: each exercise's solution, and
wrong answers with a word the check's message must contain."""

import numpy as np
import torch

from gpukit.bench import lu_determinant
from gpukit.benchmark_files import read_benchmark_folder, results_table

# The lesson's solution: the book's one determinant from LU (tests/test_determinants.py: the same code).
lu_det = lu_determinant


def unsigned_det(a):
    """Forgets the row swaps: right magnitudes, wrong signs."""
    lu, _, _ = torch.linalg.lu_factor_ex(a)
    return torch.diagonal(lu, dim1=-2, dim2=-1).prod(dim=-1)


def results():
    return results_table(read_benchmark_folder())


def best_cpu_rate():
    table = results()
    chosen = table.query("kind == 'cpu' and benchmark == 'matmul' and dtype == 'float32'")
    return float(chosen["rate"].max()), {"results": table}


def _wrong_cpu_rates():
    table = results()
    float64 = table.query("kind == 'cpu' and benchmark == 'matmul' and dtype == 'float64'")
    return [(float(float64["rate"].max()) / 10, "too small"), (table["rate"].to_numpy(), "expected a number")]


SOLUTIONS = {
    "ex-case-batch-bytes": lambda: (2 * 4096 * 64 * 64 * 8, {}),
    "ex-case-lu-det": lambda: (lu_det, {}),
    "ex-case-chunk-calls": lambda: (5, {}),
    "ex-bench-v100-fraction": lambda: ((2 * 10_000**3 / 0.144) / 15.7e12, {}),
    "ex-bench-best-cpu-rate": best_cpu_rate,
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
    "ex-bench-v100-fraction": lambda: [
        (10_000**3 / 0.144 / 15.7e12, "too small"),  # n^3, forgetting the factor of 2
        (np.float32(12.37 / 0.144), "too large"),  # the speed-up, not a fraction
        ("most of it", "expected a number"),
    ],
    "ex-bench-best-cpu-rate": _wrong_cpu_rates,
}
