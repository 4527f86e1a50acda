"""Timing that stays honest on asynchronous devices.

A GPU call returns as soon as the work is queued. Stopping the clock then measures the launch, not the
work. :func:`benchmark` therefore warms up first (compilation, caches, allocator), waits for the device
after every repeat, and reports the median and spread of several repeats rather than one lucky run.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from gpukit.base.arguments import require_positive_or_none, require_whole_number
from gpukit.core.arrays import device_index, device_kind, is_array, library_of, synchronize
from gpukit.core.device import device_available, validate_device
from gpukit.core.peaks import gpu_peak

__all__ = ["PEAK_TOLERANCE", "TIMERS", "ImpossibleSpeed", "Timing", "benchmark", "format_seconds", "gpu_name_of",
           "synchronize"]

# "wall": the host's clock around each call, stopped once the device has finished. "events": timestamps
# the GPU writes into the device's stream before and after each call; the host's own costs after the last
# launch (returning, waiting) drop out, though the GPU idling while the host launches still counts.
TIMERS = ("wall", "events")
# A rate may come out a little above a datasheet's peak (a boost clock above the one the datasheet assumed, the
# datasheet's rounding), never far above it: past this factor the figure is wrong, not fast.
PEAK_TOLERANCE = 1.05


# The precisions whose peaks gpukit's table can hold: the vector units' float32 and float64, and the tensor cores'
# dense TF32, bfloat16 and float16 (for the GPUs whose datasheet the table quotes for them).
CHECKED_PRECISIONS = ("float32", "float64", "tf32", "bfloat16", "float16")


class ImpossibleSpeed(ValueError):
    """A measured rate above the device's published peak for the precision it claims: the label or the timing is
    wrong (TF32 counted as float32, work that was never waited for), so the figure must not reach a page."""


@dataclass(frozen=True)
class Timing:
    """Repeated measurements of one piece of work, in seconds, with optional work counts.

    ``timer`` says which clock took the samples: ``"wall"`` (the host's) or ``"events"`` (the GPU's).
    """

    label: str
    samples: tuple[float, ...]
    flops: float | None = None
    bytes_moved: float | None = None
    peak_flops: float | None = None
    peak_bytes_per_s: float | None = None
    synchronized: bool = True
    timer: str = "wall"

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
            f"{'' if self.synchronized else ', NOT synchronized'}"
            f"{', timed by GPU events' if self.timer == 'events' else ''})"
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
    timer: str = "wall",
    label: str | None = None,
    flops: float | None = None,
    bytes_moved: float | None = None,
    peak_flops: float | None = None,
    peak_bytes_per_s: float | None = None,
    computed_in: str | None = None,
    **kwargs,
) -> Timing:
    """Time ``fn(*args, **kwargs)``: ``warmup`` untimed calls, then ``repeats`` timed ones.

    After each call the clock stops only once the device has finished (see :func:`synchronize`), unless
    ``synchronize_device=False``, which exists to show what goes wrong without it. Pass ``device`` when
    ``fn`` returns nothing but queues work on a GPU. ``flops`` and ``bytes_moved`` are the work of one
    call; with the peaks of the hardware they give the fraction of peak achieved.

    ``timer="events"`` times each call with torch's CUDA or MPS events on ``device`` (which must then be a
    CUDA or MPS device) instead of the host's clock. Events see only work queued on that device's current
    stream by torch; work on other streams or from other libraries is waited for but not timed.

    On an NVIDIA GPU whose datasheet gpukit knows, a FLOP/s rate above the peak of its precision raises
    :class:`ImpossibleSpeed` (see :func:`check_below_peak`). The precision is the inputs' dtype unless
    ``computed_in`` names another (``"tf32"``, ``"bfloat16"``: held to the tensor cores' peak where the table has it) or
    the library was switched to TF32 (PyTorch's float32 matmul precision, ``CUPY_TF32``). (Not ``precision=``:
    that one goes to ``fn``, as JAX's products take it.)
    """
    if not callable(fn):
        raise TypeError(f"benchmark needs a function to call, not {type(fn).__name__} {fn!r}")
    require_whole_number("repeats", repeats, 1)
    require_whole_number("warmup", warmup, 0)
    for name, value in (("flops", flops), ("bytes_moved", bytes_moved), ("peak_flops", peak_flops),
                        ("peak_bytes_per_s", peak_bytes_per_s)):
        require_positive_or_none(name, value)
    if timer not in TIMERS:
        raise ValueError(f"timer must be one of {', '.join(map(repr, TIMERS))}, not {timer!r}")
    make_event = stream = None
    if timer == "events":
        if not synchronize_device:
            raise ValueError("event timing always waits for its end event; synchronize_device=False needs "
                             "timer='wall'")
        make_event, stream = _event_timer(device)

    def wait(result):
        if synchronize_device:
            synchronize(result, device)

    for _ in range(warmup):
        wait(fn(*args, **kwargs))
    synchronize(None, device)
    samples = []
    for _ in range(repeats):
        if make_event is None:
            start = time.perf_counter()
            result = fn(*args, **kwargs)
            wait(result)
            samples.append(time.perf_counter() - start)
        else:
            start_event, end_event = make_event(), make_event()
            _record(start_event, stream)
            result = fn(*args, **kwargs)
            _record(end_event, stream)
            # elapsed_time needs both events to have happened on the device.
            end_event.synchronize()
            wait(result)
            samples.append(start_event.elapsed_time(end_event) / 1000.0)  # milliseconds -> seconds
    # Whatever is still queued must not leak into the next measurement.
    synchronize(result, device)
    timing = Timing(
        label=label or getattr(fn, "__name__", "work"),
        samples=tuple(samples),
        flops=flops,
        bytes_moved=bytes_moved,
        peak_flops=peak_flops,
        peak_bytes_per_s=peak_bytes_per_s,
        synchronized=synchronize_device,
        timer=timer,
    )
    if flops is not None and synchronize_device:
        check_below_peak(timing, args, device, computed_in)
    return timing


def gpu_name_of(array=None, device: str | None = None) -> str | None:
    """The name of the NVIDIA GPU that ``array`` lives on (or ``device``, a torch device name), as its library
    reports it (``"NVIDIA H100 80GB HBM3"``); ``None`` for anything else."""
    if array is not None and device_kind(array) == "cuda":
        library, index = library_of(array), device_index(array)
        if library == "torch":
            import torch

            return torch.cuda.get_device_name(array.device)
        if library == "cupy":
            import cupy

            name = cupy.cuda.runtime.getDeviceProperties(index)["name"]
            return name.decode() if isinstance(name, bytes) else str(name)
        if library == "jax":
            return next(iter(array.devices())).device_kind
    if device is not None and str(device).startswith("cuda"):
        import torch

        return torch.cuda.get_device_name(str(device))
    return None


def _library_precision(array, dtype: str) -> str:
    """The precision a float32 product runs in where the library was told to use TF32 (its switch, not ours)."""
    if dtype != "float32":
        return dtype
    library = library_of(array)
    if library == "torch":
        import torch

        if torch.get_float32_matmul_precision() != "highest":
            return "tf32"
    if library == "cupy" and os.environ.get("CUPY_TF32") == "1":
        return "tf32"
    return dtype


def check_below_peak(timing: Timing, args=(), device: str | None = None, computed_in: str | None = None) -> None:
    """Raise :class:`ImpossibleSpeed` where ``timing``'s FLOP/s lie above the published peak of the GPU it ran on,
    for its precision (the highest figure the datasheet gives for it: FP64 tensor cores where there are some).

    The GPU and the dtype come from the first array among ``args`` (else ``device``); ``computed_in`` overrides
    the dtype. Nothing is checked for the CPU or MPS (their peaks are estimates or unpublished), for an unknown
    GPU, or for a precision the table has no figure for on that GPU (its TF32, bfloat16 and float16 figures are
    the dense tensor-core ones of the GPUs whose datasheets the table quotes for them).
    """
    if timing.flops_per_s is None:
        return
    array = next((arg for arg in args if is_array(arg)), None)
    precision = computed_in
    if precision is None:
        if array is None:
            return
        precision = _library_precision(array, str(array.dtype).removeprefix("torch."))  # torch.float32 -> float32
    name = gpu_name_of(array, device)
    if name is None or precision not in CHECKED_PRECISIONS:
        return
    peak = gpu_peak(name, precision, operation="matmul")
    if peak is None or peak.flops_per_s is None:
        return
    if timing.flops_per_s > PEAK_TOLERANCE * peak.flops_per_s:
        figure = (f"{timing.label}: {timing.flops_per_s / 1e12:.1f} TFLOP/s is above the {peak.device}'s {precision} "
                  f"peak of {peak.flops_per_s / 1e12:.3g} TFLOP/s ({peak.units}; {peak.source})")
        if precision in ("float32", "float64"):
            raise ImpossibleSpeed(
                f"{figure}, so the work did not run in {precision} as timed: the library computed in a lower "
                f"precision (JAX's default matmul precision and CuPy's CUPY_TF32 use TF32 on NVIDIA GPUs), or the "
                f"timing missed work. Ask for {precision} (e.g. precision='highest' for a JAX product), or pass "
                f"computed_in='tf32' to benchmark and say so where the figure is shown.")
        raise ImpossibleSpeed(f"{figure}: no {precision} product runs faster than that, so the timing missed work "
                              "(a launch timed without waiting for it) or the FLOP count is wrong.")


def _event_timer(device):
    """A maker of timing events for ``device``, and the stream to record them on (``None`` for MPS)."""
    name = None if device is None else validate_device(str(device))
    if name is None or name == "cpu":
        raise ValueError(f"event timing needs a CUDA or MPS device; this run has {name or 'no device= given'}")
    if not device_available(name):
        raise RuntimeError(f"event timing on {name!r}: that device is not available here")
    import torch

    if name == "mps":
        # torch.mps.Event.record() takes no stream: it always records on MPS's one default stream.
        return (lambda: torch.mps.Event(enable_timing=True)), None
    # The stream that torch queues work on for this device; "cuda" alone means the current device.
    return (lambda: torch.cuda.Event(enable_timing=True)), torch.cuda.current_stream(torch.device(name))


def _record(event, stream) -> None:
    if stream is None:
        event.record()
    else:
        event.record(stream)
