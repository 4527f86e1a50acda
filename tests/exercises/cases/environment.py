"""Chapter 0 (environment check): each exercise's solution, and wrong answers with a word the check's message must
contain."""

import numpy as np
import torch

from gpukit.core.device import pick_device
from tests.exercises.cases import named


def bytes_of(tensor):
    return tensor.numel() * tensor.element_size()


def bytes_through_numpy(tensor):  # right on the CPU; on a GPU .numpy() raises (and .cpu() would copy the batch)
    return tensor.numpy().nbytes


SOLUTIONS = {
    "ex-env-batch-bytes": lambda: (bytes_of, {}),
    "ex-env-zeros-on-device": lambda: (torch.zeros(2, 3, dtype=torch.float32, device=pick_device()), {}),
}


def _zeros_wrong_answers():
    device = pick_device()
    return [(torch.zeros(3, 2, device=device), "shape is (3, 2)"),
            (torch.zeros(2, 3, dtype=torch.float64, device=device), "dtype is torch.float64"),
            (named("zeros_on_another_device", torch.zeros(2, 3, device="meta")), "on meta"),
            (np.zeros((2, 3), np.float32), "expected a torch array")]


WRONG_ANSWERS = {
    "ex-env-batch-bytes": lambda: [
        (lambda t: t.numel(), "not its size"),  # forgot the bytes per element
        (lambda t: t.numel() * 4, "not its size"),  # every element taken as 4 bytes (float32)
        (lambda t: len(t) * t.element_size(), "not its size"),  # len() counts the first dimension only
        (lambda t: t.numel() * t.element_size() / 1, "not a whole number"),
        (64 * 3 * 224 * 224 * 2, "pass the function itself"),
        (lambda t: None, "replace the placeholder"),  # the learner's cell as given
        (bytes_through_numpy, "reads the tensor's values on the host"),
    ],
    "ex-env-zeros-on-device": _zeros_wrong_answers,
}


# The planted device mistakes (tests/exercises/test_planted_device_mistakes.py).
DEVICE_MISTAKES = {
    "ex-env-batch-bytes": {
        "bytes_through_numpy": "counted the bytes of tensor.numpy(), which works on the CPU but fails for a batch on "
                               "a GPU (and .cpu().numpy() would copy the whole batch to the host to measure it)",
    },
    "ex-env-zeros-on-device": {
        "zeros_on_another_device": "made the zeros on a device other than the one the lesson chose (as torch.zeros "
                                   "without device= does on a GPU machine: they land on the CPU)",
    },
}
