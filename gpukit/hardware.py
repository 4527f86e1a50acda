"""What the hardware could do at best: peak FLOP/s and memory bandwidth, to compare measurements against.

For NVIDIA GPUs the peaks are the vendor's published figures (``data/hardware-peaks.csv``, with the
datasheet named in its ``source`` column), matched by device name. For the CPU there is no such table, so
:func:`estimate_cpu_peak` estimates the arithmetic peak from ``/proc/cpuinfo`` (cores x clock x FLOPs per
cycle implied by the SIMD flags) and :func:`copy_bandwidth` measures a bandwidth ceiling with a large copy.
Both are estimates, and say how they were made.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .arguments import require_positive_or_none, require_whole_number

DATA = Path(__file__).resolve().parents[1] / "data"
PEAKS_CSV = DATA / "hardware-peaks.csv"
CPUINFO = Path("/proc/cpuinfo")
MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")

# Single-precision lanes per vector instruction and FLOPs per lane per instruction, by the best SIMD
# extension the flags show. Two vector units per core is assumed (true of recent server cores; some
# desktop and older parts have one, which halves the peak).
_SIMD = (  # (flag, name, float32 lanes, flops per lane per instruction)
    ("avx512f", "AVX-512 with FMA", 16, 2),
    ("avx2", "AVX2 with FMA", 8, 2),
    ("avx", "AVX", 8, 1),
    ("sse2", "SSE2", 4, 1),
)
VECTOR_UNITS = 2
_DTYPES = {"float32": 1, "float64": 2}  # divisor of the float32 lane count


@dataclass(frozen=True)
class Peak:
    """The best a device can do: FLOP/s (in ``dtype``) and memory bytes/s, and where the figures come from."""

    device: str
    flops_per_s: float | None
    bytes_per_s: float | None
    source: str
    dtype: str = "float32"

    def __str__(self) -> str:
        flops = "unknown" if self.flops_per_s is None else f"{self.flops_per_s / 1e12:.3g} TFLOP/s"
        memory = "unknown" if self.bytes_per_s is None else f"{self.bytes_per_s / 1e9:.4g} GB/s"
        return f"{self.device}: {flops} ({self.dtype}), {memory} ({self.source})"


def _check_dtype(dtype: str) -> str:
    name = str(dtype).replace("torch.", "")
    if name not in _DTYPES:
        raise ValueError(f"peaks are known for float32 and float64, not {dtype!r}")
    return name


def published_peaks(path: str | os.PathLike = PEAKS_CSV) -> list[dict]:
    """The rows of the vendor-peaks table, in file order (the first matching row wins)."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    needed = {"device", "match", "fp32_tflop_s", "fp64_tflop_s", "memory_gb_s", "source"}
    if rows and not needed <= rows[0].keys():
        raise ValueError(f"{path} lacks the columns {sorted(needed - rows[0].keys())}")
    return rows


def gpu_peak(name: str, dtype: str = "float32", path: str | os.PathLike = PEAKS_CSV) -> Peak | None:
    """The published peak of the GPU called ``name`` (as ``torch.cuda.get_device_name`` says), or ``None``."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a GPU name is needed, such as 'NVIDIA A100-SXM4-40GB', not {name!r}")
    dtype = _check_dtype(dtype)
    column = "fp32_tflop_s" if dtype == "float32" else "fp64_tflop_s"
    for row in published_peaks(path):
        if re.search(row["match"], name, flags=re.IGNORECASE):
            return Peak(
                device=row["device"],
                flops_per_s=float(row[column]) * 1e12,
                bytes_per_s=float(row["memory_gb_s"]) * 1e9,
                source=row["source"],
                dtype=dtype,
            )
    return None


@dataclass(frozen=True)
class CpuPeakEstimate:
    """An estimate of a CPU's arithmetic peak, with the ingredients, so a reader can redo it by hand."""

    cores: int
    ghz: float
    simd: str
    flops_per_cycle: int
    dtype: str

    @property
    def flops_per_s(self) -> float:
        return self.cores * self.ghz * 1e9 * self.flops_per_cycle

    def how(self) -> str:
        return (
            f"{self.cores} cores x {self.ghz:.2f} GHz x {self.flops_per_cycle} {self.dtype} FLOPs per cycle "
            f"({self.simd}, {VECTOR_UNITS} vector units per core assumed) = {self.flops_per_s / 1e9:.0f} GFLOP/s"
        )

    def as_peak(self) -> Peak:
        return Peak("cpu", self.flops_per_s, None, "estimate: " + self.how(), self.dtype)


def parse_cpuinfo(text: str) -> dict:
    """Physical cores, clock in MHz (largest reported) and SIMD flags from the text of ``/proc/cpuinfo``."""
    cores, mhz, flags, logical = set(), [], set(), 0
    block: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if "processor" in block:
                logical += 1
                cores.add((block.get("physical id", "0"), block.get("core id", block["processor"])))
                if "cpu MHz" in block:
                    mhz.append(float(block["cpu MHz"]))
                flags.update(block.get("flags", "").split())
            block = {}
            continue
        key, _, value = line.partition(":")
        block[key.strip()] = value.strip()
    return {"cores": len(cores), "logical": logical, "mhz": max(mhz) if mhz else None, "flags": flags}


def estimate_cpu_peak(dtype: str = "float32", cpuinfo: str | None = None, max_mhz: float | None = None,
                      cores: int | None = None) -> CpuPeakEstimate | None:
    """Estimate the CPU's peak FLOP/s from ``/proc/cpuinfo``; ``None`` where it cannot be read (macOS, Windows).

    ``cpuinfo`` is the file's text (read from the machine when omitted). The clock is the maximum frequency
    the kernel reports if it does, else the largest ``cpu MHz`` line (a current clock, so the estimate may
    be low on a machine that turbo-boosts). ``cores`` overrides the count of physical cores.
    """
    dtype = _check_dtype(dtype)
    if cpuinfo is None:
        try:
            cpuinfo = CPUINFO.read_text(encoding="utf-8")
        except OSError:
            return None
    info = parse_cpuinfo(cpuinfo)
    if max_mhz is None:
        max_mhz = _read_max_mhz() or info["mhz"]
    if cores is not None:
        require_whole_number("cores", cores, 1)
    cores = cores or info["cores"]
    usable = [entry for entry in _SIMD
              if entry[0] in info["flags"] and (entry[3] == 1 or "fma" in info["flags"])]
    if not usable or not max_mhz or not cores:
        return None
    _, name, lanes, per_lane = usable[0]
    per_cycle = lanes * per_lane * VECTOR_UNITS // _DTYPES[dtype]
    return CpuPeakEstimate(cores=cores, ghz=max_mhz / 1000, simd=name, flops_per_cycle=per_cycle, dtype=dtype)


def _read_max_mhz() -> float | None:
    try:
        return int(MAX_FREQ.read_text().strip()) / 1000  # the file is in kHz
    except (OSError, ValueError):
        return None


def device_peak(device: str, dtype: str = "float32") -> Peak | None:
    """The peak of ``device``: published for a known NVIDIA GPU, estimated for the CPU, else ``None``."""
    from .device import validate_device

    device = validate_device(device)
    if device.startswith("cuda"):
        import torch

        return gpu_peak(torch.cuda.get_device_name(device), dtype)
    if device == "cpu":
        estimate = estimate_cpu_peak(dtype)
        return None if estimate is None else estimate.as_peak()
    return None  # Apple does not publish FLOP/s per chip in a form we can match


def copy_bandwidth(device: str = "cpu", nbytes: int = 256 * 2**20, repeats: int = 5):
    """Measure memory bandwidth with a large copy on ``device``: a practical ceiling for streaming work.

    A copy reads ``nbytes`` and writes ``nbytes``, so it moves ``2 * nbytes``. Returns the
    :class:`~gpukit.timing.Timing`, whose ``bytes_per_s`` is the measured bandwidth.
    """
    import torch

    from .timing import benchmark

    require_whole_number("nbytes", nbytes, 1)
    source = torch.ones(nbytes, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    return benchmark(target.copy_, source, repeats=repeats, device=device, label=f"copy on {device}",
                     bytes_moved=2 * nbytes)


def against_peak(timing, peak_flops: float | None = None, peak_bytes_per_s: float | None = None):
    """A copy of a :class:`~gpukit.timing.Timing` that also knows the peaks, so it reports fractions of them."""
    from dataclasses import replace

    from .timing import Timing

    if not isinstance(timing, Timing):
        raise TypeError(f"expected a Timing from gpukit.benchmark, not {type(timing).__name__}")
    for name, value in (("peak_flops", peak_flops), ("peak_bytes_per_s", peak_bytes_per_s)):
        require_positive_or_none(name, value)
    return replace(timing, peak_flops=peak_flops, peak_bytes_per_s=peak_bytes_per_s)
