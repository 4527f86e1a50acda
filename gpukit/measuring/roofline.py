"""Predict, then measure: the least time a piece of work can take on a device, from the device's own figures.

A piece of work does ``flops`` floating-point operations and must move at least ``bytes_moved`` bytes between
the processor and its memory. Neither can go faster than the hardware allows, and the two overlap, so the work
takes at least

    time = max(flops / peak FLOP/s for its precision, bytes_moved / memory bandwidth)

(the roofline model). Its **arithmetic intensity**, ``flops / bytes_moved`` in FLOP per byte, says which term
wins: below the device's *ridge point* (peak FLOP/s over bandwidth) the work is memory-bound, above it
compute-bound. A copy between the host and a GPU does no arithmetic and is bound by the link between them.

:func:`device_limits` gives the figures for a device: a known NVIDIA GPU's datasheet (gpukit/data/
hardware-peaks.csv, through :func:`gpukit.core.peaks.device_peak`); for the CPU, the estimated arithmetic peak
(:func:`gpukit.core.peaks.estimate_cpu_peak`) and a measured copy bandwidth (the lesson's own copy, or
:func:`gpukit.measuring.ceilings.copy_bandwidth`), since a CPU has no datasheet figure for either that gpukit can read.
:func:`link_limits` gives the host-to-GPU link's rate from the PCIe generation and width that nvidia-smi reports.
:func:`predict` combines work and limits into a :class:`Prediction`, whose :meth:`Prediction.clause` is the
sentence a lesson's prose shows beside the measurement: what was predicted, the intensity and the bound, what was
measured and how many times the prediction that is.

A datasheet's figure is a ceiling no program reaches. :func:`achievable_ceilings` reads, from a benchmark file of
``data/benchmarks/``, the best the device achieved (the bench's MAMF-style search over matrix shapes for a
product's FLOP/s, its fastest copy for the bandwidth): the file's ``devices.<d>.achievable`` section, through
:func:`gpukit.measuring.benchmark_records.achievable_table`. A file written before that search has no such section,
and :class:`Achievable` then says so and holds no rate: the page uses the datasheet alone, saying which it used.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from gpukit.base.arguments import require_positive_or_none
from gpukit.core import machine, peaks
from gpukit.core.device import validate_device
from gpukit.core.peaks import OPERATIONS
from gpukit.core.timing import format_seconds
from gpukit.measuring.benchmark_records import achievable_table
from gpukit.measuring.ceilings import copy_bandwidth, format_flops_per_s

__all__ = ["PCIE_LANE_GB_S", "Achievable", "Limits", "Prediction", "achievable_ceilings", "device_limits",
           "gpu_limits", "link_limits", "predict", "predicted_against"]

# Bytes per second one PCIe lane carries in each direction, by generation, after the line code (8b/10b up to
# generation 2, 128b/130b from generation 3): the transfer rate in GT/s x the code's payload share / 8 bits.
# PCI-SIG's base specifications give the rates: 2.5, 5, 8, 16 and 32 GT/s for generations 1 to 5. Packet headers
# and flow control take a further share, so a real copy reaches some 80-90 % of it.
PCIE_LANE_GB_S = {1: 2.5 * 8 / 10 / 8, 2: 5 * 8 / 10 / 8, 3: 8 * 128 / 130 / 8, 4: 16 * 128 / 130 / 8,
                  5: 32 * 128 / 130 / 8}
# Within this factor of the prediction a measurement is "at the prediction"; below it, faster than the limits
# allow, which needs a sentence of its own.
AT_PREDICTION = 0.95
# What a device's figures are: a vendor's datasheet, the CPU's estimate (with a measured bandwidth), copies measured
# here only, a host-to-GPU link's rate from its PCIe generation and width, or nothing known.
KINDS = ("datasheet", "estimate", "measured", "link", "none")


@dataclass(frozen=True)
class Limits:
    """What a device can do at best: FLOP/s in ``dtype`` for ``operation``, and bytes/s, with where each came from.

    ``basis`` names the figures in a sentence ("the datasheet", "the CPU's estimated peak and measured copy
    bandwidth"), ``kind`` says what they are (one of :data:`KINDS`), and ``missing`` says why a figure is ``None``
    ("" when both are known).
    """

    device: str
    dtype: str
    operation: str
    flops_per_s: float | None
    bytes_per_s: float | None
    basis: str
    kind: str
    missing: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}, not {self.kind!r}")

    def __str__(self) -> str:
        flops = ("no FLOP/s figure" if self.flops_per_s is None
                 else f"{format_flops_per_s(self.flops_per_s)} {self.dtype}")
        memory = "no bandwidth figure" if self.bytes_per_s is None else f"{self.bytes_per_s / 1e9:.4g} GB/s"
        text = f"{self.device}: {flops} ({self.operation}), {memory}; from {self.basis}"
        return text + (f" ({self.missing})" if self.missing else "")

    @property
    def ridge(self) -> float | None:
        """FLOP per byte at which the two limits meet: work of higher intensity is compute-bound."""
        if self.flops_per_s is None or self.bytes_per_s is None:
            return None
        return self.flops_per_s / self.bytes_per_s


@functools.cache
def _measured_copy_bandwidth(device: str) -> float:
    """Bytes/s of a 64 MiB copy on ``device`` (read and write counted), measured once per process."""
    return copy_bandwidth(device, nbytes=64 * 2**20, repeats=5).bytes_per_s


def _check_operation(operation: str) -> str:
    if operation not in OPERATIONS:
        raise ValueError(f"operation must be one of {', '.join(map(repr, OPERATIONS))} (a product and elementwise "
                         f"work can have different peaks), not {operation!r}")
    return operation


def gpu_limits(name: str, dtype: str = "float32", *, operation: str, bandwidth: float | None = None) -> Limits:
    """The datasheet limits of the NVIDIA GPU called ``name`` (as its library reports it), for ``dtype`` and
    ``operation``. A GPU gpukit's table does not know has none, unless ``bandwidth`` (a measured copy) is given;
    a precision the table holds no figure for (TF32, bfloat16 and float16 in elementwise work, which the tensor
    cores do not do) or the datasheet prints none for (bfloat16 on a V100) leaves the FLOP/s figure empty, and says
    so."""
    operation = _check_operation(operation)
    require_positive_or_none("bandwidth", bandwidth)
    dtype = str(dtype).replace("torch.", "")
    if not isinstance(name, str) or not name.strip():
        return Limits("the GPU", dtype, operation, None, bandwidth, "a measured copy" if bandwidth else "nothing",
                      "measured" if bandwidth else "none", "its library reported no name to look it up by")
    try:
        peak = peaks.gpu_peak(name, dtype, operation=operation)
        missing_flops = ""
    except ValueError:  # the tensor-core precisions have figures for matrix products only
        peak = peaks.gpu_peak(name, "float32", operation=operation)
        missing_flops = f"gpukit's datasheet table has no {dtype} figure"
    if peak is None:
        return Limits(name, dtype, operation, None, bandwidth, "a measured copy" if bandwidth else "nothing",
                      "measured" if bandwidth else "none", f"gpukit's datasheet table does not know the {name}")
    flops = None if missing_flops else peak.flops_per_s
    memory = peak.bytes_per_s or bandwidth
    missing = "; ".join(text for text in (
        missing_flops or ("" if flops else f"its datasheet gives no {dtype} figure"),
        "" if memory else "its datasheet gives no memory bandwidth") if text)
    basis = "the datasheet" if peak.bytes_per_s or not memory else "the datasheet and a measured copy"
    return Limits(peak.device, dtype, operation, flops, memory, basis, "datasheet", missing)


def device_limits(device: str, dtype: str = "float32", *, operation: str, bandwidth: float | None = None,
                  cores: int | None = None) -> Limits:
    """The limits of ``device`` for work in ``dtype``: ``operation`` is ``"matmul"`` or ``"elementwise"``.

    A CUDA GPU gets its datasheet figures (:func:`gpu_limits`). The CPU gets its estimated peak and a measured
    bandwidth: ``bandwidth`` (bytes/s of a copy the lesson measured, reads and writes counted) or else a 64 MiB
    copy measured here once. ``cores`` (CPU only) estimates the peak of that many cores, e.g. 1 for a process
    held to one thread.
    """
    device = validate_device(device)
    operation = _check_operation(operation)
    require_positive_or_none("bandwidth", bandwidth)
    dtype = str(dtype).replace("torch.", "")
    if device.startswith("cuda"):
        import torch

        return gpu_limits(torch.cuda.get_device_name(device), dtype, operation=operation, bandwidth=bandwidth)
    if device == "cpu":
        try:
            estimate = peaks.estimate_cpu_peak(dtype, cores=cores)
            missing = "" if estimate else "no peak could be estimated from /proc/cpuinfo"
        except ValueError:
            estimate, missing = None, f"no {dtype} peak is estimated for a CPU"
        memory = bandwidth or _measured_copy_bandwidth("cpu")
        basis = ("the CPU's estimated peak and measured bandwidth" if estimate
                 else "the CPU's measured bandwidth")
        name = "this CPU" if cores is None else f"{cores} core{'s' * (cores > 1)} of this CPU"
        return Limits(name, dtype, operation, estimate.flops_per_s if estimate else None, memory, basis,
                      "estimate" if estimate else "measured", missing)
    # MPS: Apple publishes no figures gpukit can match; a copy measured on the device gives the bandwidth.
    memory = bandwidth or _measured_copy_bandwidth(device)
    return Limits(device, dtype, operation, None, memory, "a measured copy on the device", "measured",
                  "Apple publishes no FLOP/s figure per chip that gpukit can read")


def link_limits(device: str, *, generation: int | None = None, lanes: int | None = None,
                bandwidth: float | None = None) -> Limits:
    """The limits of copies between the host and ``device``.

    For a CUDA GPU: the PCIe link's rate in each direction, from ``generation`` and ``lanes`` (read from
    nvidia-smi's ``pcie.link.gen.max`` and ``pcie.link.width.max`` when not given: the most the GPU and this
    system allow; the current values drop while the GPU idles). For the CPU, a "copy to the device" is a copy
    within RAM: its bandwidth is ``bandwidth`` (a copy the lesson measured, reads and writes counted) or one
    measured here, and :func:`predict` counts such a copy's bytes twice (read and write).
    """
    device = validate_device(device)
    if device.startswith("cuda"):
        if generation is None or lanes is None:
            found = machine.gpu_link(machine.cuda_uuid(int(device.split(":")[1]) if ":" in device else 0))
            if found is not None:
                generation, lanes = found
        if generation in PCIE_LANE_GB_S and lanes:
            rate = PCIE_LANE_GB_S[generation] * lanes * 1e9
            return Limits(f"PCIe {generation}.0 x{lanes}", "bytes", "copy", None, rate,
                          f"the PCIe {generation}.0 x{lanes} link", "link")
        return Limits("the link to the GPU", "bytes", "copy", None, None, "nothing", "none",
                      "nvidia-smi reported no PCIe generation and width gpukit knows the rate of")
    memory = bandwidth or _measured_copy_bandwidth(device)
    basis = "the CPU's measured bandwidth" if device == "cpu" else f"the {device}'s measured copy bandwidth"
    return Limits(device, "bytes", "copy", None, memory, basis, "measured")


def _times(ratio: float) -> str:
    return f"{ratio:,.0f}" if ratio >= 100 else f"{ratio:.3g}"


@dataclass(frozen=True)
class Prediction:
    """The least time ``flops`` and ``bytes_moved`` can take within ``limits``, and how to compare a measurement."""

    flops: float
    bytes_moved: float
    limits: Limits

    @property
    def compute_seconds(self) -> float | None:
        if self.limits.flops_per_s is None:
            return 0.0 if self.flops == 0 else None
        return self.flops / self.limits.flops_per_s

    @property
    def memory_seconds(self) -> float | None:
        if self.limits.bytes_per_s is None:
            return 0.0 if self.bytes_moved == 0 else None
        return self.bytes_moved / self.limits.bytes_per_s

    @property
    def complete(self) -> bool:
        """Both terms are known, so ``seconds`` is the roofline's time, not a bound on one side only."""
        return self.compute_seconds is not None and self.memory_seconds is not None

    @property
    def seconds(self) -> float | None:
        """The predicted time: the larger term; where one term is unknown, the known one (a lower bound)."""
        known = [t for t in (self.compute_seconds, self.memory_seconds) if t is not None]
        return max(known) if known and max(known) > 0 else None

    @property
    def intensity(self) -> float | None:
        """FLOP per byte moved (``None`` for work that moves no bytes)."""
        return None if self.bytes_moved == 0 else self.flops / self.bytes_moved

    @property
    def bound(self) -> str:
        """``"compute"`` or ``"memory"`` (``"link"`` for a copy between host and device): the larger term."""
        if self.limits.operation == "copy":
            return "link" if self.limits.kind in ("link", "none") else "memory"
        if not self.complete:
            return "unknown"
        return "compute" if self.compute_seconds > self.memory_seconds else "memory"

    def ratio(self, measured_seconds: float) -> float | None:
        """Measured over predicted: 1 at the limit, 5 for five times slower than the device allows."""
        if self.seconds is None:
            return None
        return measured_seconds / self.seconds

    def _predicts(self) -> str:
        """The figures as a sentence's subject, with its verb: "the datasheet predicts", "... and ... predict"."""
        basis = self.limits.basis
        return f"{basis} {'predict' if ' and ' in basis else 'predicts'}"

    def _predicted_words(self) -> str:
        limits, seconds = self.limits, self.seconds
        if seconds is None:
            return f"nothing predicts its time here ({limits.missing or 'no figures are known for ' + limits.device})"
        if limits.operation == "copy":
            what = "no arithmetic, so bound by the link" if self.bound == "link" else "a copy within memory"
            return f"{self._predicts()} {format_seconds(seconds)} ({what})"
        intensity = f"intensity {_times(self.intensity)} FLOP/B" if self.intensity is not None else "no memory traffic"
        if not self.complete:
            side = "bandwidth" if self.memory_seconds else "FLOP/s"
            return (f"{self._predicts()} at least {format_seconds(seconds)} from the {side} alone "
                    f"({intensity}; {limits.missing})")
        return f"{self._predicts()} {format_seconds(seconds)} ({intensity}, so {self.bound}-bound)"

    def _measured_words(self, measured_seconds: float, what: str = "", first: bool = True,
                        explain: bool = True) -> str:
        ratio = self.ratio(measured_seconds)
        said = f"{'measured ' if first else ''}{format_seconds(measured_seconds)}{f' {what}' if what else ''}"
        if ratio is None:
            return said
        if ratio >= AT_PREDICTION or not explain:
            return f"{said}, {_times(ratio)} times that"
        return f"{said}, {_times(ratio)} times that: faster than {self._why_faster()}"

    def _why_faster(self) -> str:
        """Why a measurement beat the prediction, by what the figures were and which term bound it: a limit cannot
        be beaten, so the figure or the count of work was wrong."""
        kind = self.limits.kind
        if kind == "link":
            return "the link allows, so fewer bytes crossed it than were counted"
        if self.bound == "compute":
            if kind == "estimate":
                return "the estimated peak allows, so the estimate is low: the cores ran above the clock it assumed"
            return "the datasheet allows, so less work was done than was counted, or in a lower precision"
        if kind == "datasheet":
            return "the datasheet's bandwidth allows, so the data stayed in the GPU's caches"
        return ("the bandwidth measured allows, so the data stayed in the caches, which are faster than memory, or "
                "the copy that measured the bandwidth was slowed, by another program for instance")

    def clause(self, measured_seconds: float | None = None, what: str = "") -> str:
        """The prediction and, given a measured time, the measurement and measured / predicted, for the prose:
        ``'the datasheet predicts 2.05 ms (intensity 683 FLOP/B, so compute-bound); measured 2.71 ms, 1.32 times
        that'``. ``what`` names the measurement (``'eagerly'``)."""
        words = self._predicted_words()
        if measured_seconds is None:
            return words
        return f"{words}; {self._measured_words(measured_seconds, what)}"

    def clauses(self, measured: dict[str, float]) -> str:
        """One prediction for several measurements of the same work (``{"eagerly": 0.004, "compiled": 0.001}``):
        ``'... predicts 160 µs (...); measured 832 µs eagerly, 5.2 times that, and 240 µs compiled, 1.5 times
        that'``."""
        parts = [self._measured_words(seconds, what, first=index == 0, explain=False)
                 for index, (what, seconds) in enumerate(measured.items())]
        if not parts:
            return self._predicted_words()
        joined = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + ", and " + parts[-1]
        ratios = [self.ratio(seconds) for seconds in measured.values()]
        if any(ratio is not None and ratio < AT_PREDICTION for ratio in ratios):
            joined += f" (below 1: faster than {self._why_faster()})"
        return f"{self._predicted_words()}; {joined}"


def predict(flops: float, bytes_moved: float, limits: Limits) -> Prediction:
    """The roofline's prediction for work of ``flops`` FLOPs moving ``bytes_moved`` bytes, within ``limits``.

    For a copy within RAM (``limits`` of :func:`link_limits` for the CPU), pass the bytes copied: a copy reads
    and writes each of them, so twice ``bytes_moved`` goes through memory.
    """
    for name, value in (("flops", flops), ("bytes_moved", bytes_moved)):
        if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a count of at least 0, not {value!r}")
    if not isinstance(limits, Limits):
        raise TypeError(f"limits must come from device_limits or link_limits, not {type(limits).__name__}")
    if limits.operation == "copy" and limits.kind == "measured":
        bytes_moved = 2 * bytes_moved  # a copy within memory reads and writes every byte
    return Prediction(float(flops), float(bytes_moved), limits)


def predicted_against(device: str, flops: float, bytes_moved: float, measured_seconds: float | None = None, *,
                      dtype: str = "float32", operation: str = "matmul", bandwidth: float | None = None,
                      cores: int | None = None) -> str:
    """:meth:`Prediction.clause` for work on ``device`` in one call: the limits of :func:`device_limits`
    (``dtype``, ``operation``, ``bandwidth``, ``cores``), the prediction, and the measured time beside it."""
    limits = device_limits(device, dtype, operation=operation, bandwidth=bandwidth, cores=cores)
    return predict(flops, bytes_moved, limits).clause(measured_seconds)


# ------------------------------------------------------------------------------------------ achievable ceilings
@dataclass(frozen=True)
class Achievable:
    """The best a device achieved, from its benchmark file's ``achievable`` section: the FLOP/s of a product in
    ``dtype`` and the bytes/s of a copy within its memory (reads and writes counted, as the datasheet's bandwidth
    is), where each was found, or, where the file has no such section, ``note`` saying so and no rates."""

    device: str
    dtype: str
    flops_per_s: float | None = None
    bytes_per_s: float | None = None
    found: str = ""  # where the rates come from: the file, the shape or size, how it was found
    note: str = ""  # why there is no rate ("" where there is one)

    @property
    def known(self) -> bool:
        """Whether the file held an achievable rate for both ceilings."""
        return self.flops_per_s is not None and self.bytes_per_s is not None

    def __str__(self) -> str:
        if not self.known:
            return f"achievable: {self.note}"
        return (f"achievable: {format_flops_per_s(self.flops_per_s)} ({self.dtype} products), "
                f"{self.bytes_per_s / 1e9:.4g} GB/s (copies); {self.found}")


def achievable_ceilings(records: dict[str, dict], file: str, device: str, dtype: str = "float32") -> Achievable:
    """The achievable ceilings of ``device`` (``"cuda:0"``, ``"cpu"``) in benchmark file ``file`` of ``records``
    (as :func:`gpukit.measuring.benchmark_records.read_benchmark_folder` returns them): the FLOP/s of a ``dtype``
    product and the bandwidth of a copy, from the file's ``devices.<device>.achievable`` section. Where the file
    has none (written before the bench searched for them), or the section lacks either, the result holds no rates
    and its ``note`` says why: a page then says so and uses the datasheet."""
    record = records[file]
    entry = record["devices"].get(device)
    if entry is None:
        raise ValueError(f"{file} has no device {device!r}; it has {', '.join(record['devices'])}")
    if entry.get("achievable") is None:
        return Achievable(device, dtype, note=f"{file} has no achievable section (it was written before the bench "
                                              "searched for the achievable rates): its peaks only (a GPU's "
                                              "datasheet, a CPU's estimate)")
    table = achievable_table({file: record})
    rows = table[table["device"] == device]
    product = rows[(rows["work"] == "matmul") & (rows["what"] == dtype)]
    copy = rows[(rows["work"] == "copy") & (rows["what"] == "copy")]
    flops = float(product["rate"].iloc[0]) * 1e9 if len(product) and product["rate"].notna().iloc[0] else None
    moved = float(copy["rate"].iloc[0]) * 1e9 if len(copy) and copy["rate"].notna().iloc[0] else None
    if flops is None or moved is None:
        lacking = " and ".join(what for what, rate in ((f"{dtype} product", flops), ("copy", moved)) if rate is None)
        why = product["note"].iloc[0] if flops is None and len(product) and product["note"].iloc[0] else ""
        return Achievable(device, dtype, flops, moved, note=f"{file}'s achievable section has no {lacking} rate"
                                                            + (f" ({why})" if why else ""))
    found = (f"{file}: a {dtype} product of {product['at'].iloc[0]} ({product['found_by'].iloc[0]}), "
             f"a copy of {copy['at'].iloc[0]}")
    return Achievable(device, dtype, flops, moved, found)
