"""Chapter 0, the environment check: what its exercises expect, and how a wrong answer is told apart."""

from __future__ import annotations

import numpy as np

from .checking import Exercise, register


def _zeros_on_the_chosen_device():
    import torch

    from ..device import pick_device

    return torch.zeros(2, 3, dtype=torch.float32, device=pick_device())


register(
    Exercise("ex-env-batch-bytes", lambda: 64 * 3 * 224 * 224 * np.dtype("float16").itemsize, writes="a number"),
    Exercise("ex-env-zeros-on-device", _zeros_on_the_chosen_device, writes="device code"),
)
