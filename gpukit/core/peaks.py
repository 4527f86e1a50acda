"""What the hardware could do at best: peak FLOP/s and memory bandwidth, to compare measurements against.

For NVIDIA GPUs the peaks are the vendor's published figures (``gpukit/data/hardware-peaks.csv``, shipped
inside the package, with the datasheet named in its ``source`` column), matched by device name. A GPU can
have two arithmetic peaks for one dtype: the table's A100, H100, H200 and GH200 have FP64 tensor cores, which do
float64 matrix products at twice their vector FP64 rate, while elementwise work runs on the vector units. So
every peak is asked for an ``operation``, ``"matmul"`` or ``"elementwise"`` (:data:`OPERATIONS`), and a
fraction of peak is only computed against the peak of the same kind of work. Matrix products also have the
tensor-core precisions of :data:`MATMUL_PRECISIONS` (TF32, bfloat16, float16), whose dense figures the table holds
where a datasheet was checked for them (A100, H100 SXM and PCIe) and leaves empty elsewhere. For the
CPU there is no such table, so :func:`estimate_cpu_peak` estimates the arithmetic peak (cores x clock x
FLOPs per cycle implied by the SIMD flags, read by :mod:`gpukit.core.machine`), and says how it was made.

What is measured rather than published lives a layer up, in :mod:`gpukit.measuring.ceilings`: the bandwidth of a
large copy, and the practical ceiling to use when a measurement beats the estimate.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from gpukit.base.arguments import require_positive_or_none, require_whole_number
from gpukit.core import machine
from gpukit.core.device import validate_device
from gpukit.core.machine import parse_cpuinfo

PEAKS_TABLE = "hardware-peaks.csv"

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
# "matmul": matrix products (cuBLAS and the CPU's BLAS); "elementwise": everything else, on the vector units.
OPERATIONS = ("matmul", "elementwise")
# The precisions a matrix product can be computed in on an NVIDIA GPU: TF32 is float32 data multiplied on the
# tensor cores (PyTorch's float32 matmul precision "high"); bfloat16 and float16 are the inputs' dtypes.
MATMUL_PRECISIONS = ("float32", "tf32", "bfloat16", "float16", "float64")
# The tensor-core precisions' columns (dense figures: a datasheet's "with sparsity" figure is twice the dense one).
_TENSOR_COLUMNS = {"tf32": ("tf32_tensor_tflop_s", "TF32 tensor cores, dense"),
                   "bfloat16": ("bf16_tensor_tflop_s", "BF16 tensor cores, dense"),
                   "float16": ("fp16_tensor_tflop_s", "FP16 tensor cores, dense")}
_PEAK_COLUMNS = ("device", "match", "fp32_tflop_s", "fp64_tflop_s", "fp64_tensor_tflop_s", "tf32_tensor_tflop_s",
                 "bf16_tensor_tflop_s", "fp16_tensor_tflop_s", "memory_gb_s", "source")
_NUMBER_COLUMNS = ("fp32_tflop_s", "fp64_tflop_s", "fp64_tensor_tflop_s", "tf32_tensor_tflop_s", "bf16_tensor_tflop_s",
                   "fp16_tensor_tflop_s", "memory_gb_s")


def data_file(name: str) -> Traversable:
    """A reference table shipped inside gpukit (``gpukit/data/NAME``), found however gpukit was installed."""
    return files("gpukit") / "data" / name


@dataclass(frozen=True)
class Peak:
    """The best a device can do: FLOP/s (in ``dtype``, for ``operation``) and memory bytes/s, and their source.

    ``units`` names the hardware the FLOP/s figure is for (``"FP64 tensor cores"``, ``"FP32 vector units"``).
    A figure the source does not publish is ``None``, never 0 or a guess.
    """

    device: str
    flops_per_s: float | None
    bytes_per_s: float | None
    source: str
    dtype: str = "float32"
    operation: str = "elementwise"
    units: str = ""

    def __str__(self) -> str:
        flops = "unknown" if self.flops_per_s is None else f"{self.flops_per_s / 1e12:.3g} TFLOP/s"
        memory = "unknown" if self.bytes_per_s is None else f"{self.bytes_per_s / 1e9:.4g} GB/s"
        what = f"{self.dtype} {self.operation}" + (f" on {self.units}" if self.units else "")
        return f"{self.device}: {flops} ({what}), {memory} ({self.source})"


def _check_dtype(dtype: str) -> str:
    name = str(dtype).replace("torch.", "")
    if name not in _DTYPES:
        raise ValueError(f"peaks are known for float32 and float64, not {dtype!r}")
    return name


def _check_precision(dtype: str, operation: str) -> str:
    """``dtype`` for a GPU peak: float32 or float64 for any operation, a tensor-core precision for matmul only."""
    name = str(dtype).replace("torch.", "")
    if name in _TENSOR_COLUMNS:
        if operation != "matmul":
            raise ValueError(f"{name} has a peak for matrix products (on the tensor cores) only, not for {operation}")
        return name
    if name not in _DTYPES:
        raise ValueError(f"peaks are known for float32 and float64, and for matrix products also "
                         f"{', '.join(_TENSOR_COLUMNS)}, not {dtype!r}")
    return name


def _check_operation(operation: str) -> str:
    if operation not in OPERATIONS:
        raise ValueError(f"operation must be one of {', '.join(map(repr, OPERATIONS))} (the peak differs between "
                         f"matrix products and elementwise work), not {operation!r}")
    return operation


def _number(cell: str, where: str) -> float | None:
    if not cell.strip():
        return None  # the source publishes no figure
    try:
        value = float(cell)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{where} holds {cell!r}, not a positive number (leave the cell empty if unknown)")
    return value


def published_peaks(path: str | os.PathLike | None = None) -> list[dict]:
    """The rows of the vendor-peaks table, in file order (the first matching row wins).

    ``path`` defaults to the table shipped in gpukit. The figure columns come back as floats, or ``None``
    where the cell is empty because the vendor publishes no such figure.
    """
    # name: what the error messages call the table
    if path is None:
        text, name = data_file(PEAKS_TABLE).read_text(encoding="utf-8"), f"gpukit/data/{PEAKS_TABLE}"
    else:
        text, name = Path(path).read_text(encoding="utf-8"), str(path)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    missing = [column for column in _PEAK_COLUMNS if column not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"{name} lacks the column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
                         f"its header must name {', '.join(_PEAK_COLUMNS)}")
    rows = []
    for number, row in enumerate(reader, start=1):
        where = f"{name}, row {number} ({row['device']!r})"
        for column in _NUMBER_COLUMNS:
            row[column] = _number(row[column] or "", f"{where}, column {column}")
        try:
            re.compile(row["match"] or "")
        except re.error as error:
            raise ValueError(f"{where}, column match: {row['match']!r} is not a regular expression ({error})") from None
        if not (row["match"] or "").strip():
            raise ValueError(f"{where}, column match is empty, so it would match every device")
        rows.append(row)
    return rows


def _flops_column(row: dict, dtype: str, operation: str) -> tuple[str, str]:
    """The column of ``row`` that holds the FLOP/s peak for ``dtype`` and ``operation``, and what it counts.

    float32 products are compared with the FP32 vector figure: PyTorch's default float32 matmul precision
    (``"highest"``) uses no TF32 tensor cores. float64 products use the FP64 tensor-core figure where the
    GPU has FP64 tensor cores (a non-empty ``fp64_tensor_tflop_s``), else the vector FP64 figure. TF32, bfloat16
    and float16 products use their tensor-core columns (empty where no datasheet figure was entered).
    """
    if dtype in _TENSOR_COLUMNS:
        return _TENSOR_COLUMNS[dtype]
    if dtype == "float32":
        return "fp32_tflop_s", "FP32 vector units"
    if operation == "matmul" and row["fp64_tensor_tflop_s"] is not None:
        return "fp64_tensor_tflop_s", "FP64 tensor cores"
    return "fp64_tflop_s", "FP64 vector units"


def gpu_peak(name: str, dtype: str = "float32", path: str | os.PathLike | None = None, *,
             operation: str) -> Peak | None:
    """The published peak of the GPU called ``name`` (as ``torch.cuda.get_device_name`` says), or ``None``.

    ``operation`` is ``"matmul"`` for matrix products or ``"elementwise"`` for other work: on GPUs with FP64
    tensor cores a float64 product's peak is the tensor-core figure, twice the vector one that elementwise
    float64 work is held to. ``dtype`` may also be ``"tf32"``, ``"bfloat16"`` or ``"float16"`` for a matrix
    product (:data:`MATMUL_PRECISIONS`): the dense tensor-core figure. A figure the vendor does not publish (FP64
    on most inference GPUs, anything for the A10G), or a tensor-core figure not entered in the table, is ``None``
    in the returned :class:`Peak`, whose ``source`` says so.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a GPU name is needed, such as 'NVIDIA A100-SXM4-40GB', not {name!r}")
    operation = _check_operation(operation)
    dtype = _check_precision(dtype, operation)
    for row in published_peaks(path):
        if re.search(row["match"], name, flags=re.IGNORECASE):
            column, units = _flops_column(row, dtype, operation)
            tflops, gbs = row[column], row["memory_gb_s"]
            source = row["source"]
            if tflops is None and dtype in _TENSOR_COLUMNS:
                source = f"no datasheet figure for {dtype} matrix products in gpukit's table ({source})"
            return Peak(
                device=row["device"],
                flops_per_s=None if tflops is None else tflops * 1e12,
                bytes_per_s=None if gbs is None else gbs * 1e9,
                source=source,
                dtype=dtype,
                operation=operation,
                units=units,
            )
    return None


@dataclass(frozen=True)
class CpuPeakEstimate:
    """An estimate of a CPU's arithmetic peak, with the ingredients, so a reader can redo it by hand.

    ``clock_source`` says where ``ghz`` came from: a maximum the system reports, or, failing that, a
    current clock, which is lower than the cores reach when they boost.
    """

    cores: int
    ghz: float
    simd: str
    flops_per_cycle: int
    dtype: str
    clock_source: str

    @property
    def flops_per_s(self) -> float:
        return self.cores * self.ghz * 1e9 * self.flops_per_cycle

    def how(self) -> str:
        return (
            f"{self.cores} cores x {self.ghz:.2f} GHz ({self.clock_source}) x {self.flops_per_cycle} {self.dtype} "
            f"FLOPs per cycle ({self.simd}, {VECTOR_UNITS} vector units per core assumed) "
            f"= {self.flops_per_s / 1e9:.0f} GFLOP/s"
        )

    def as_peak(self, operation: str = "matmul") -> Peak:
        """The estimate as a :class:`Peak`: a CPU's FMA units serve matrix products and elementwise work alike."""
        return Peak("cpu", self.flops_per_s, None, "estimate: " + self.how(), self.dtype,
                    _check_operation(operation), f"{self.simd} vector units")


def estimate_cpu_peak(dtype: str = "float32", cpuinfo: str | None = None, max_mhz: float | None = None,
                      cores: int | None = None) -> CpuPeakEstimate | None:
    """Estimate the CPU's peak FLOP/s from ``/proc/cpuinfo``; ``None`` where it cannot be read (macOS, Windows).

    ``cpuinfo`` is the file's text (read from this machine when omitted). The clock is ``max_mhz`` if given;
    else, for this machine, the maximum the system reports (cpufreq in ``/sys``, then ``lscpu``); else the
    largest ``cpu MHz`` line of ``cpuinfo``, a current clock, so the estimate may be low on a machine that
    boosts. ``cores`` overrides the count of physical cores.
    """
    dtype = _check_dtype(dtype)
    require_positive_or_none("max_mhz", max_mhz)
    if cores is not None:
        require_whole_number("cores", cores, 1)
    this_machine = cpuinfo is None
    if this_machine:
        try:
            cpuinfo = machine.CPUINFO.read_text(encoding="utf-8")
        except OSError:
            return None
    info = parse_cpuinfo(cpuinfo)
    if max_mhz is not None:
        clock_source = "clock given as max_mhz"
    else:
        # Another machine's cpuinfo must not be paired with this machine's maximum clock.
        reported = machine.reported_max_mhz() if this_machine else None
        if reported:
            max_mhz, clock_source = reported
        else:
            max_mhz = info["mhz"]
            clock_source = f"current clock from {machine.CPUINFO}; the maximum was not reported"
    cores = cores or info["cores"]
    usable = [entry for entry in _SIMD
              if entry[0] in info["flags"] and (entry[3] == 1 or "fma" in info["flags"])]
    if not usable or not max_mhz or not cores:
        return None
    _, name, lanes, per_lane = usable[0]
    per_cycle = lanes * per_lane * VECTOR_UNITS // _DTYPES[dtype]
    return CpuPeakEstimate(cores=cores, ghz=max_mhz / 1000, simd=name, flops_per_cycle=per_cycle, dtype=dtype,
                           clock_source=clock_source)


def device_peak(device: str, dtype: str = "float32", *, operation: str) -> Peak | None:
    """The peak of ``device`` for ``operation`` (``"matmul"`` or ``"elementwise"``) in ``dtype``: published for
    a known NVIDIA GPU, estimated for the CPU (float32 and float64 only: the estimate knows no other), else
    ``None``."""
    device = validate_device(device)
    operation = _check_operation(operation)
    dtype = _check_precision(dtype, operation)
    if device.startswith("cuda"):
        import torch  # lazy: a CPU-only reader's peaks need no torch

        return gpu_peak(torch.cuda.get_device_name(device), dtype, operation=operation)
    if device == "cpu":
        estimate = estimate_cpu_peak(dtype) if dtype in _DTYPES else None
        return None if estimate is None else estimate.as_peak(operation)
    return None  # Apple does not publish FLOP/s per chip in a form we can match
