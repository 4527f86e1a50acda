"""Chapter 0 (environment check): each exercise's solution, and wrong answers with a word the check's message must
contain."""

import numpy as np
import torch

from gpukit.device import pick_device

SOLUTIONS = {
    "ex-env-batch-bytes": lambda: (64 * 3 * 224 * 224 * 2, {}),
    "ex-env-zeros-on-device": lambda: (torch.zeros(2, 3, dtype=torch.float32, device=pick_device()), {}),
}


def _zeros_wrong_answers():
    device = pick_device()
    return [(torch.zeros(3, 2, device=device), "shape is (3, 2)"),
            (torch.zeros(2, 3, dtype=torch.float64, device=device), "dtype is torch.float64"),
            (torch.zeros(2, 3, device="meta"), "on meta"),
            (np.zeros((2, 3), np.float32), "expected a torch array")]


WRONG_ANSWERS = {
    "ex-env-batch-bytes": lambda: [(64 * 3 * 224 * 224 * 4, "too large"), ("a lot", "expected a number")],
    "ex-env-zeros-on-device": _zeros_wrong_answers,
}
