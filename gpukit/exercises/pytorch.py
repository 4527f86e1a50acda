"""Chapter 4, PyTorch on the GPU: what its exercises expect, and how a wrong answer is told apart."""

from __future__ import annotations

from .checking import Exercise, register


def _ramp_in_half_precision(device):
    """Five evenly spaced values from 0 to 1, float16, made on the run's device."""
    import torch

    return torch.linspace(0, 1, 5, dtype=torch.float16, device=device)


def _scaled_on_the_readings_device(readings, scale):
    """``readings * scale`` with the host tensor ``scale`` moved to where ``readings`` live."""
    return readings * scale.to(readings.device)


register(
    Exercise("ex-torch-on-device", _ramp_in_half_precision, needs=("device",), rtol=1e-3, writes="device code"),
    Exercise("ex-torch-bmm-flops", lambda: 2 * 1000 * 64 * 16 * 32, writes="a number"),
    Exercise("ex-torch-fix-mismatch", _scaled_on_the_readings_device, needs=("readings", "scale"),
             writes="device code"),
)
