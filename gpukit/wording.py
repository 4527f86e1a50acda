"""Sentences for glued prose that stay true whatever hardware built the page.

A lesson's prose cannot say "the GPU was 40 times faster" when the page was built on a CPU. These helpers
turn measured times into the words the prose needs, for the device the run actually used.
"""

from __future__ import annotations

from .arguments import require_positive
from .timing import Timing


def speed_phrase(baseline_seconds: float, seconds: float, tolerance: float = 0.1) -> str:
    """Compare a time with a baseline in words, for glued prose: ``'1.62 times faster than'``,
    ``'about as fast as'`` (within ``tolerance``) or ``'1.30 times slower than'``."""
    ratio = require_positive("baseline_seconds", baseline_seconds) / require_positive("seconds", seconds)
    if ratio >= 1 + tolerance:
        return f"{ratio:.2f} times faster than"
    if ratio <= 1 / (1 + tolerance):
        return f"{1 / ratio:.2f} times slower than"
    return "about as fast as"


def device_versus_cpu(cpu: Timing, on_device: Timing, device: str) -> str:
    """How the device compared with the CPU on the same work, as a clause for the prose.

    When the device *is* the CPU, the two timings measure the same thing, and the clause says so instead
    of presenting their ratio as a speed-up.
    """
    for name, timing in (("cpu", cpu), ("on_device", on_device)):
        if not isinstance(timing, Timing):
            raise TypeError(f"{name} must be a Timing from gpukit.benchmark, not {type(timing).__name__}")
    ratio = cpu.median / on_device.median
    if device == "cpu":
        return (f"both lines ran on the CPU (the device here is the CPU), so their ratio, {ratio:.2f}, only "
                "shows how much repeated timings of the same work vary")
    return f"the {device} device was {speed_phrase(cpu.median, on_device.median, tolerance=0.05)} all the CPU's cores"
