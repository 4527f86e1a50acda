"""Chapter 4 (PyTorch on the GPU): each exercise's solution and wrong answers, for tests/test_exercises.py."""

import numpy as np
import torch

from gpukit.device import pick_device


def _device():
    return pick_device()


def _mismatch_inputs():
    """As in the lesson: readings made on the device, a scale made on the host."""
    readings = torch.tensor([1.0, 2.0, 3.0, 4.0], device=_device())
    scale = torch.tensor([0.5, 0.5, 2.0, 2.0])
    return {"readings": readings, "scale": scale}


def _fixed(readings, scale):
    return readings * scale.to(readings.device)


SOLUTIONS = {
    "ex-torch-on-device": lambda: (torch.linspace(0, 1, 5, dtype=torch.float16, device=_device()),
                                   {"device": _device()}),
    "ex-torch-bmm-flops": lambda: (2 * 1000 * 64 * 32 * 16, {}),
    "ex-torch-fix-mismatch": lambda: (_fixed(**_mismatch_inputs()), _mismatch_inputs()),
}


def _on_device_wrong_answers():
    device = _device()
    cases = [
        (torch.linspace(0, 1, 5, device=device), "dtype is torch.float32"),
        (torch.linspace(0, 1, 5, dtype=torch.float16, device="meta"), "on meta"),
        (torch.linspace(0, 1, 4, dtype=torch.float16, device=device), "shape is (4,)"),
        (torch.arange(5, dtype=torch.float16, device=device), "values differ"),
        (np.linspace(0, 1, 5).astype(np.float16), "expected a torch array"),
    ]
    if device != "cpu":
        cases.append((torch.linspace(0, 1, 5, dtype=torch.float16), "on cpu"))
    return cases


def _mismatch_wrong_answers():
    inputs = _mismatch_inputs()
    readings, scale = inputs["readings"], inputs["scale"]
    right = _fixed(readings, scale)
    cases = [
        (readings + scale.to(readings.device), "values differ"),
        (right.to("meta"), "on meta"),
        (right.double(), "dtype is torch.float64"),
        (right.tolist(), "expected an array"),
    ]
    if readings.device.type != "cpu":
        cases.append((readings.cpu() * scale, "on cpu"))
    return cases


WRONG_ANSWERS = {
    "ex-torch-on-device": _on_device_wrong_answers,
    "ex-torch-bmm-flops": lambda: [
        (1000 * 64 * 32 * 16, "too small"),
        (2 * 64 * 32 * 16, "too small"),
        ([1000, 64, 32, 16], "expected a number"),
    ],
    "ex-torch-fix-mismatch": _mismatch_wrong_answers,
}
