"""Timing that stays honest on asynchronous devices.

A GPU call returns as soon as the work is queued. Stopping the clock then measures the launch, not the
work. :func:`benchmark` therefore warms up first (compilation, caches, allocator), waits for the device
after every repeat, and reports the median and spread of several repeats rather than one lucky run.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .arguments import require_positive_or_none, require_whole_number


def _module_of(obj) -> str:
    return type(obj).__module__.split(".", 1)[0]


def synchronize(result=None, device: str | None = None) -> None:
    """Wait until the work behind ``result`` (or everything queued on ``device``) has finished.

    Understands torch tensors (CUDA and MPS), CuPy arrays and JAX arrays, and containers of them. NumPy
    arrays and plain Python values are already complete, so nothing is done for them.
    """
    if device is not None:
        _synchronize_torch_device(device)
    if result is None:
        return
    if isinstance(result, (list, tuple)):
        for item in result:
            synchronize(item)
        return
    if isinstance(result, Mapping):
        for item in result.values():
            synchronize(item)
        return
    module = _module_of(result)
    if module == "torch" and hasattr(result, "device"):
        _synchronize_torch_device(str(result.device))
    elif module == "cupy":
        import cupy

        cupy.cuda.get_current_stream().synchronize()
    elif module in ("jax", "jaxlib") and hasattr(result, "block_until_ready"):
        result.block_until_ready()


def _synchronize_torch_device(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)
    elif device.startswith("mps"):
        import torch

        torch.mps.synchronize()


@dataclass(frozen=True)
class Timing:
    """Repeated wall-clock measurements of one piece of work, in seconds, with optional work counts."""

    label: str
    samples: tuple[float, ...]
    flops: float | None = None
    bytes_moved: float | None = None
    peak_flops: float | None = None
    peak_bytes_per_s: float | None = None
    synchronized: bool = True

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def best(self) -> float:
        return min(self.samples)

    @property
    def spread(self) -> float:
        """Interquartile range of the samples (0 for fewer than two samples)."""
        if len(self.samples) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.samples, n=4, method="inclusive")
        return q3 - q1

    @property
    def later_calls_median(self) -> float:
        """The median of every sample but the first: the steady state, next to a cold first call."""
        if len(self.samples) < 2:
            raise ValueError(f"{self.label}: the first call can only be compared with later ones given 2+ samples")
        return statistics.median(self.samples[1:])

    @property
    def first_call_ratio(self) -> float:
        """The first sample over the median of the others: what a cold first call costs (needs warmup=0)."""
        return self.samples[0] / self.later_calls_median

    @property
    def flops_per_s(self) -> float | None:
        return None if self.flops is None else self.flops / self.median

    @property
    def bytes_per_s(self) -> float | None:
        return None if self.bytes_moved is None else self.bytes_moved / self.median

    @property
    def fraction_of_peak_flops(self) -> float | None:
        if self.flops_per_s is None or self.peak_flops is None:
            return None
        return self.flops_per_s / self.peak_flops

    @property
    def fraction_of_peak_bandwidth(self) -> float | None:
        if self.bytes_per_s is None or self.peak_bytes_per_s is None:
            return None
        return self.bytes_per_s / self.peak_bytes_per_s

    def __str__(self) -> str:
        parts = [
            f"{self.label}: median {format_seconds(self.median)} "
            f"(IQR {format_seconds(self.spread)}, {len(self.samples)} runs"
            f"{'' if self.synchronized else ', NOT synchronized'})"
        ]
        if self.flops_per_s is not None:
            rate = f"{self.flops_per_s / 1e9:.1f} GFLOP/s"
            if self.fraction_of_peak_flops is not None:
                rate += f" = {self.fraction_of_peak_flops:.0%} of peak"
            parts.append(rate)
        if self.bytes_per_s is not None:
            rate = f"{self.bytes_per_s / 1e9:.1f} GB/s"
            if self.fraction_of_peak_bandwidth is not None:
                rate += f" = {self.fraction_of_peak_bandwidth:.0%} of peak"
            parts.append(rate)
        return " | ".join(parts)


def format_seconds(seconds: float) -> str:
    """Seconds in the unit a person would pick: ``0.00042`` -> ``'420 µs'``."""
    if not isinstance(seconds, (int, float)) or math.isnan(seconds) or seconds < 0:
        raise ValueError(f"a duration must be a non-negative number of seconds, not {seconds!r}")
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def benchmark(
    fn: Callable,
    *args,
    repeats: int = 7,
    warmup: int = 1,
    synchronize_device: bool = True,
    device: str | None = None,
    label: str | None = None,
    flops: float | None = None,
    bytes_moved: float | None = None,
    peak_flops: float | None = None,
    peak_bytes_per_s: float | None = None,
    **kwargs,
) -> Timing:
    """Time ``fn(*args, **kwargs)``: ``warmup`` untimed calls, then ``repeats`` timed ones.

    After each call the clock stops only once the device has finished (see :func:`synchronize`), unless
    ``synchronize_device=False``, which exists to show what goes wrong without it. Pass ``device`` when
    ``fn`` returns nothing but queues work on a torch device. ``flops`` and ``bytes_moved`` are the work
    of one call; with the peaks of the hardware they give the fraction of peak achieved.
    """
    if not callable(fn):
        raise TypeError(f"benchmark needs a function to call, not {type(fn).__name__} {fn!r}")
    require_whole_number("repeats", repeats, 1)
    require_whole_number("warmup", warmup, 0)
    for name, value in (("flops", flops), ("bytes_moved", bytes_moved), ("peak_flops", peak_flops),
                        ("peak_bytes_per_s", peak_bytes_per_s)):
        require_positive_or_none(name, value)

    def wait(result):
        if synchronize_device:
            synchronize(result, device)

    for _ in range(warmup):
        wait(fn(*args, **kwargs))
    synchronize(None, device)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        wait(result)
        samples.append(time.perf_counter() - start)
    # Whatever is still queued must not leak into the next measurement.
    synchronize(result, device)
    return Timing(
        label=label or getattr(fn, "__name__", "work"),
        samples=tuple(samples),
        flops=flops,
        bytes_moved=bytes_moved,
        peak_flops=peak_flops,
        peak_bytes_per_s=peak_bytes_per_s,
        synchronized=synchronize_device,
    )
