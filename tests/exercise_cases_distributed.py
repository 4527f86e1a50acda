"""Chapter 10 (multi-GPU and distributed): each exercise's solution and wrong answers, for
tests/test_exercises.py."""

import numpy as np
import torch


def _after():
    return sum(torch.tensor([1.0, 2.0]) * (r + 1) for r in range(4))


SOLUTIONS = {
    "ex-dist-ring-bytes": lambda: (2 * (8 - 1) / 8 * (4 * 25_000_000), {}),
    "ex-dist-allreduce-sum": lambda: (_after(), {}),
    "ex-dist-ring-time": lambda: (2 * 7 / 8 * 2e9 / 50e9, {}),
}

WRONG_ANSWERS = {
    "ex-dist-ring-bytes": lambda: [
        (4 * 25_000_000, "too small"),  # the tensor once: forgets the all-gather
        (2 * 4 * 25_000_000, "too large"),  # 2x the data: the limit, not N = 8
        (2 * (8 - 1) / 8 * 25_000_000, "too small"),  # counted values, not bytes
        ("175 MB", "expected a number"),
    ],
    "ex-dist-allreduce-sum": lambda: [
        (_after() / 4, "values differ"),  # the mean, not the sum
        (torch.tensor([3.0, 6.0]), "values differ"),  # rank 2's own tensor
        (_after().double(), "dtype is torch.float64"),
        (_after().numpy(), "expected a torch array"),
        (torch.tensor([10.0, 20.0, 0.0]), "shape is (3,)"),
        (_after().tolist(), "expected an array"),
    ],
    "ex-dist-ring-time": lambda: [
        (2e9 / 50e9, "too small"),  # the data once
        (2 * 7 * 2e9 / 50e9, "too large"),  # every step sends the whole tensor
        (np.array([0.5, 0.5]), "expected a number"),
    ],
}
