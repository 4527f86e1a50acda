"""The book's benchmark suite: ``python -m booktools bench`` measures every device of a machine and writes one file.

On each device present (:func:`gpukit.available_devices`) it times, with :func:`gpukit.benchmark`:

- ``matmul``: n x n matrix products in float32 and float64 (float64 is skipped on MPS, which has none);
- ``elementwise``: exp(x) + 3 sin(x) on float32 vectors of several lengths;
- ``copy``: a copy within the device's memory; on a GPU also copies between host and device, each way, with the
  host's side in ordinary (pageable) memory and, on CUDA, in pinned (page-locked) memory:
  ``host-to-device pageable``, ``device-to-host pageable``, ``host-to-device pinned``, ``device-to-host pinned``.
  Every buffer is allocated (and touched) before the timing, and each timed call copies into the same
  destination: a new host buffer per copy would time the allocation and its page faults, not the bus (the
  device-to-host rows of the first H100 run, made that way, came out several times below host-to-device);
- ``det+fft``: a batch of complex64 matrices, each a determinant and a 2-D FFT (the workload of chapter
  12), where ``torch.linalg.det`` fails it uses an LU factorisation;
- ``matmul-shapes``: n x n products at sizes around multiples of 8, 64 and 128 (:data:`SHAPE_SIZES`: on a GPU 4,032
  to 4,224, 4,096 and its neighbours, in bfloat16 and float16 on the tensor cores and in float32 with TF32 off; on
  the CPU 255 to 320 in float32), each into an output allocated before its timing, timed with CUDA events on an
  NVIDIA GPU: the shapes the hardware likes (:func:`measure_shapes`).

Then it looks for the best each device can achieve, beside its datasheet (a maximum-achievable-matmul search, as
Stas Bekman's mamf-finder does, in ml-engineering's compute/accelerator/benchmarks): for matrix products in each
precision of :data:`gpukit.core.peaks.MATMUL_PRECISIONS` the device has (float32, TF32, bfloat16, float16, float64),
it times products over a grid of shapes m x n x k near the sizes the lessons use (:func:`search_for`), each into a
preallocated output after a warm-up, and keeps the fastest, or the fastest row of the size sweep where that was
faster; for copies, the fastest size of each copy row (they already copy into preallocated buffers). TF32 is
float32 data with PyTorch's float32 matmul precision set to ``"high"`` (``torch.set_float32_matmul_precision``:
TF32 on an NVIDIA GPU from compute capability 8.0, the A100); every other product runs at ``"highest"``. A
precision the device lacks is recorded with the reason. The record's ``achievable`` section per device holds both
(schema in :mod:`gpukit.measuring.benchmark_records`), with the datasheet figure of each precision where gpukit's
table has
one, so that pages quote a measurement as a fraction of the datasheet and of the achievable.

The record (schema in :mod:`gpukit.measuring.benchmark_records`) names the machine, its CPU, each GPU's clocks where
nvidia-smi lists the GPU of the UUID torch gives (:func:`device_clocks`; else a note says why there are none),
library, CUDA and driver versions, the command and the date, and gives each result's rate with its unit
and its fraction of the device's peak where the peak is known: a published figure for a known NVIDIA GPU
(for matrix products the matmul peak, which in float64 is the FP64 tensor-core figure where the GPU has
FP64 tensor cores);
for the CPU the estimate of :func:`gpukit.core.peaks.estimate_cpu_peak`, or the best rate measured where that
beat the estimate (:func:`gpukit.measuring.ceilings.practical_ceiling`), and the measured copy bandwidth for memory.
The software record names the book's CUDA stack the run's torch belongs to (``cuda13`` or ``cuda12``, from the
CUDA major of ``torch.version.cuda``; :func:`gpukit.measuring.benchmark_records.cuda_stack_of`).
``--quick`` runs every benchmark of the full run, the four transfers and the search included where there is a
GPU, at small sizes and with few repeats (a few seconds), for tests, and writes its file under
``_build/cache/benchmarks-quick/`` unless ``--folder`` is given, so that it never replaces a measurement.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import itertools
import json
import os
import platform
import re
import sys
import time
from dataclasses import dataclass, replace
from importlib.util import find_spec
from pathlib import Path

from gpukit.base.errors import error_line
from gpukit.base.machine_files import file_name
from gpukit.base.paths import state_dir
from gpukit.commands.doctor import library_version
from gpukit.core import machine
from gpukit.core.device import describe_device, devices_to_run
from gpukit.core.peaks import MATMUL_PRECISIONS, estimate_cpu_peak, gpu_peak
from gpukit.core.timing import ImpossibleSpeed, benchmark
from gpukit.measuring.benchmark_records import (
    BENCHMARKS,
    MATMUL_BENCHMARKS,
    benchmark_folder,
    cuda_stack_of,
    validate_record,
)
from gpukit.measuring.ceilings import practical_ceiling
from gpukit.measuring.progress import progress_bar

__all__ = ["PAGEABLE_TRANSFERS", "PINNED_TRANSFERS", "SHAPE_DTYPES", "SHAPE_SIZES", "Plan", "Search", "achievable",
           "add_bench_command", "add_peaks", "copy_benchmarks", "device_clocks", "machine_description",
           "measure_shapes", "plan_for", "run_bench_command", "run_suite", "search_for", "search_matmul"]


@dataclass(frozen=True)
class Plan:
    """The sizes to measure on one device."""

    matmul_sizes: tuple[int, ...]
    matmul_dtypes: tuple[str, ...]
    elementwise_lengths: tuple[int, ...]
    copy_bytes: tuple[int, ...]
    det_sizes: tuple[int, ...]
    batch: int
    repeats: int
    # matmul-shapes: n x n products at these sizes, in these dtypes, each the median of shape_repeats
    shape_sizes: tuple[int, ...] = ()
    shape_dtypes: tuple[str, ...] = ()
    shape_repeats: int = 1

    def steps(self, device: str) -> int:
        copies = len(self.copy_bytes) * len(copy_benchmarks(device))
        return (len(self.matmul_sizes) * len(self.matmul_dtypes) + len(self.elementwise_lengths) + copies
                + len(self.det_sizes) + len(self.shape_sizes) * len(self.shape_dtypes))


# The copies between host and device, named by direction and by the kind of host memory: every figure says
# which it measured. Pinned (page-locked) host memory is CUDA's (torch.empty(..., pin_memory=True)).
PAGEABLE_TRANSFERS = ("host-to-device pageable", "device-to-host pageable")
PINNED_TRANSFERS = ("host-to-device pinned", "device-to-host pinned")


def copy_benchmarks(device: str) -> tuple[str, ...]:
    """The copy benchmarks run on ``device``: a copy within its memory, and on a GPU the transfers between host
    and device, each way, from and into pageable host memory, and on CUDA pinned host memory too."""
    if device == "cpu":
        return ("copy",)
    if device.startswith("cuda"):
        return ("copy", *PAGEABLE_TRANSFERS, *PINNED_TRANSFERS)
    return ("copy", *PAGEABLE_TRANSFERS)


# The CPU sizes are a subset of the GPU sizes, so that a file's GPU and CPU results can be compared at the
# same sizes. The det+fft batch is the one chapter 12 uses, so that its plots can show these files.
DET_BATCH = 2048
_FULL = {
    "cpu": Plan((128, 256, 512, 1024, 2048, 4096), ("float32", "float64"), (2**12, 2**16, 2**20, 2**24, 2**26),
                (2**20, 2**24, 2**28), (8, 16, 32, 64), DET_BATCH, 5),
    "gpu": Plan((128, 256, 512, 1024, 2048, 4096, 8192), ("float32", "float64"),
                (2**12, 2**16, 2**20, 2**24, 2**26), (2**20, 2**24, 2**28), (8, 16, 32, 64), DET_BATCH, 10),
}
_QUICK = Plan((32, 64), ("float32", "float64"), (2**10, 2**14), (2**16,), (8, 16), 64, 2)

# matmul-shapes: the shapes the hardware likes. A GPU multiplies matrices in tiles: NVIDIA's tensor cores want each
# dimension of a bfloat16 or float16 product a multiple of 8 elements (16 bytes), cuBLAS computes the output in
# tiles such as 128 x 128 (a size one past a multiple of the tile adds a row of mostly idle tiles: tile
# quantization), and the tiles run in waves of one per SM (1,024 tiles of 128 x 128 at n = 4,096 are 7.76 waves on an
# H100 SXM's 132 SMs, 1,089 at n = 4,097 to 4,224 are 8.25: wave quantization). NVIDIA's "Matrix Multiplication
# Background User's Guide" (DU-09799-001, sections 2.2 "Tensor Core Requirements", 3.1 "Tile Quantization" and 3.2
# "Wave Quantization") explains all three. So the sizes are 4,096 (32 x 128) and its odd neighbours 4,095 and
# 4,097 (no multiple of 8), 4,104 (8 x 513: a multiple of 8 only), 4,064 (32 x 127: of 32, not 64), 4,032 and 4,160
# (64 x 63, 64 x 65: of 64, not 128) and 4,224 (33 x 128: one more tile per side than 4,096). float32 runs with TF32
# off (PyTorch's "highest" precision: no tensor cores), as the same sizes on the ordinary cores. On the CPU, whose
# BLAS blocks for its caches and vector registers, the same pattern at sizes it times in a blink: 256 and its
# neighbours, a multiple of 8 (264) and of 64 (320). --quick times two tiny sizes. The whole GPU part is 24 products
# of about 0.14 TFLOP each, 21 times (a warm-up and 20 timed): about a second on an H100.
SHAPE_SIZES = {"gpu": (4032, 4064, 4095, 4096, 4097, 4104, 4160, 4224), "cpu": (255, 256, 257, 264, 320),
               "quick": (63, 64)}
SHAPE_DTYPES = {"gpu": ("bfloat16", "float16", "float32"), "cpu": ("float32",)}
SHAPE_REPEATS = {"full": 20, "quick": 2}


def plan_for(device: str, quick: bool = False) -> Plan:
    """The sizes for ``device``: small ones with ``quick``; larger on a GPU than on the CPU."""
    kind = "cpu" if device == "cpu" else "gpu"
    plan = _QUICK if quick else _FULL[kind]
    plan = replace(plan, shape_sizes=SHAPE_SIZES["quick" if quick else kind], shape_dtypes=SHAPE_DTYPES[kind],
                   shape_repeats=SHAPE_REPEATS["quick" if quick else "full"])
    if device == "mps":
        plan = replace(plan, matmul_dtypes=("float32",))
    return plan


# ------------------------------------------------------------------------------------------ the machine
def device_clocks(device: str) -> tuple[dict | None, str | None]:
    """The maximum SM and memory clocks of CUDA ``device`` in MHz (nvidia-smi's, for the GPU with the UUID torch
    gives that device: nvidia-smi numbers GPUs in PCI order and ignores ``CUDA_VISIBLE_DEVICES``), and ``None``; or
    ``None`` and why there are none. Never another GPU's clocks."""
    if not device.startswith("cuda"):
        return None, None
    import torch  # lazy: torch is imported by the suite's work, not to describe a command

    index = int(device.split(":")[1]) if ":" in device else torch.cuda.current_device()
    clocks, how = machine.gpu_clocks(machine.cuda_uuid(index))
    return (clocks, None) if clocks else (None, f"{device}: {how}")


def host_record() -> dict:
    """The CPU model, its cores, the maximum clock where the system reports one, the platform and Python."""
    reported = machine.reported_max_mhz()
    return {"cpu_model": machine.cpu_name(), "physical_cores": machine.physical_cores(),
            "logical_cores": os.cpu_count() or 1,
            "max_clock_mhz": reported[0] if reported else None,
            "clock_source": reported[1] if reported else "not reported by this system",
            "platform": platform.platform(), "python": platform.python_version()}


def software_record() -> dict:
    """Library versions, CUDA (``torch.version.cuda``) and the NVIDIA driver (nvidia-smi) where present."""
    import numpy
    import torch

    software = {"torch": torch.__version__, "numpy": numpy.__version__, "cuda": torch.version.cuda,
                "driver": machine.driver_version(), "cuda_stack": cuda_stack_of(torch.version.cuda)}
    if torch.backends.mps.is_available():
        software["macos"] = platform.mac_ver()[0] or None
    for name in ("cupy", "jax"):
        version = library_version(name) if name in sys.modules or _importable(name) else None
        if version:
            software[name] = str(version)
    return software


def _importable(name: str) -> bool:
    return find_spec(name) is not None


def machine_description(devices: list[str]) -> str:
    """A default description: system, architecture, CPU model and cores, and the GPUs by name."""
    gpus = [describe_device(d) for d in devices if d != "cpu"]
    parts = [f"{platform.system()} {platform.machine()}", f"{machine.cpu_name()} ({os.cpu_count()} logical cores)"]
    return ", ".join(parts + gpus) if gpus else ", ".join(parts + ["no GPU"])


# ------------------------------------------------------------------------------------------ the work
def _matmul(device, dtype, n):
    import torch

    a = torch.randn(n, n, dtype=getattr(torch, dtype), device=device)
    b = torch.randn(n, n, dtype=getattr(torch, dtype), device=device)
    return (lambda: a @ b), 2 * n**3


def _elementwise(device, n):
    import torch

    x = torch.rand(n, dtype=torch.float32, device=device)
    return (lambda: torch.exp(x) + 3 * torch.sin(x)), 2 * 4 * n  # one read and one write of 4 bytes


def _copy(device, nbytes, benchmark):
    """The call to time for one copy benchmark, and the bytes it moves.

    Both buffers are allocated and filled here, before any timing, and every call copies into the same
    destination with ``Tensor.copy_``: ``x.to("cpu")`` would allocate a new host buffer per call, and the
    timing would then count the allocation and the page faults of its first touch, not the bus. From and into
    pinned memory the copy is queued with ``non_blocking=True``, as a program that overlaps copies does; the
    benchmark waits for the device before each clock stops.
    """
    import torch

    if benchmark == "copy":
        source = torch.ones(nbytes, dtype=torch.uint8, device=device)
        target = torch.empty_like(source)
        return (lambda: target.copy_(source)), 2 * nbytes  # read and write
    if benchmark not in PAGEABLE_TRANSFERS + PINNED_TRANSFERS:
        raise ValueError(f"unknown copy benchmark {benchmark!r}")
    pinned = benchmark in PINNED_TRANSFERS
    # torch.empty(pin_memory=True) page-locks the buffer as it allocates it; fill_ touches every page of the
    # pageable one, so that no timed copy pays for mapping it.
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned).fill_(1)
    on_device = torch.ones(nbytes, dtype=torch.uint8, device=device)
    if benchmark.startswith("host-to-device"):
        return (lambda: on_device.copy_(host, non_blocking=pinned)), nbytes
    return (lambda: host.copy_(on_device, non_blocking=pinned)), nbytes


def lu_determinant(a):
    """Determinants of a batch from an LU factorisation: (-1)^(row swaps) times the product of U's diagonal.

    The same code as the lessons' (chapters 7 and 12; tests/lessons/test_determinants.py compares them): from
    ``lu_factor_ex``, which gives 0 for a singular matrix where ``lu_factor`` raises."""
    import torch

    lu, pivots, _ = torch.linalg.lu_factor_ex(a)
    steps = torch.arange(1, a.shape[-1] + 1, dtype=pivots.dtype, device=a.device)
    swaps = (pivots != steps).sum(dim=-1)
    sign = 1 - 2 * (swaps % 2)  # +1 for an even number of swaps, -1 for odd
    return sign.to(a.dtype) * torch.diagonal(lu, dim1=-2, dim2=-1).prod(dim=-1)


def _det_fft(device, n, batch):
    import torch

    g = torch.Generator().manual_seed(n)
    shape = (batch, n, n)
    a = torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g)) / (2 * n) ** 0.5
    a = a.to(device)
    det = torch.linalg.det
    try:
        det(a[:2])
        torch.fft.fft2(a[:2])
    except (RuntimeError, NotImplementedError, TypeError):
        det = lu_determinant
        lu_determinant(a[:2])  # raises on a backend with no complex LU either: the caller notes it
    return (lambda: (det(a), torch.fft.fft2(a))), batch, det is lu_determinant


# ------------------------------------------------------------------------------------------ achievable peaks
@dataclass(frozen=True)
class Search:
    """The shapes the search for the achievable matmul rate times on one device, and how long it may take.

    Every m x n x k of the three tuples is timed (smallest first) in each precision, each the median of
    ``repeats`` products after a warm-up; a precision stops taking new shapes once ``budget_s`` seconds have gone
    (after its first shape), and the notes say how many it timed."""

    m: tuple[int, ...]
    n: tuple[int, ...]
    k: tuple[int, ...]
    repeats: int
    budget_s: float

    def shapes(self) -> list[tuple[int, int, int]]:
        return sorted(itertools.product(self.m, self.n, self.k), key=lambda s: (s[0] * s[1] * s[2], s))

    def describe(self) -> str:
        def sizes(values):
            return "{" + ", ".join(map(str, values)) + "}"

        return (f"the fastest of the size sweep's products and of a search over m in {sizes(self.m)}, n in "
                f"{sizes(self.n)}, k in {sizes(self.k)} ({len(self.shapes())} shapes, at most {self.budget_s:g} s "
                f"per precision), each shape the median of {self.repeats} products into a preallocated output "
                f"after a warm-up")


# Shapes near the sizes the lessons use: chapter 1 sweeps square products up to 4,096 on a GPU (1,024 on the CPU),
# the suite up to 8,192 (4,096); non-square and non-power-of-two shapes can fill a GPU's SMs better (mamf-finder's
# observation), hence 6,144 and the rectangles.
# The budgets bound the search where a precision is slow (float64 on most inference GPUs, float16 on many CPUs):
# on an H100 all 48 shapes of a precision take a few seconds.
_SEARCH = {
    "gpu": Search(m=(2048, 4096, 6144, 8192), n=(2048, 4096, 6144, 8192), k=(2048, 4096, 8192), repeats=5,
                  budget_s=20.0),
    "cpu": Search(m=(512, 1024, 2048), n=(512, 1024, 2048), k=(512, 1024, 2048), repeats=3, budget_s=30.0),
}
_QUICK_SEARCH = Search(m=(32, 64), n=(32, 64), k=(32, 64), repeats=2, budget_s=5.0)


def search_for(device: str, quick: bool = False, seconds: float | None = None) -> Search:
    """The shapes to search on ``device``: small ones with ``quick``; larger on a GPU than on the CPU. ``seconds``
    replaces the time budget of each precision (``make gpu-check`` gives the search less time than a run of its
    own, as its bench step has a time limit)."""
    search = _QUICK_SEARCH if quick else _SEARCH["cpu" if device == "cpu" else "gpu"]
    if seconds is None:
        return search
    if not (isinstance(seconds, int | float) and seconds > 0):
        raise ValueError(f"the search's seconds per precision must be a positive number, not {seconds!r}")
    return replace(search, budget_s=float(seconds))


# torch's dtype for each precision; TF32 multiplies float32 data.
_TORCH_DTYPES = {"float32": "float32", "tf32": "float32", "bfloat16": "bfloat16", "float16": "float16",
                 "float64": "float64"}


@contextlib.contextmanager
def _matmul_precision(precision: str):
    """PyTorch's float32 matmul precision for ``precision``'s products: ``"high"`` (TF32 where the GPU has it) for
    TF32, ``"highest"`` for everything else; the setting in force before comes back afterwards."""
    import torch

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def _why_not(device: str, precision: str) -> str | None:
    """Why ``device`` cannot compute a matrix product in ``precision``, or None where it can."""
    import torch

    kind = device.split(":")[0]
    if precision == "tf32":
        if kind != "cuda":
            return f"TF32 is a format of NVIDIA GPUs' tensor cores; {kind} has none"
        props = torch.cuda.get_device_properties(device)
        if (props.major, props.minor) < (8, 0):
            return (f"TF32 needs compute capability 8.0 (the A100) or later; {props.name} is "
                    f"{props.major}.{props.minor}, where PyTorch's 'high' precision still computes in float32")
    if precision == "float64" and kind == "mps":
        return "MPS has no float64"
    try:
        with _matmul_precision(precision):
            a = torch.ones(8, 8, dtype=getattr(torch, _TORCH_DTYPES[precision]), device=device)
            torch.matmul(a, a)
    except (RuntimeError, TypeError, NotImplementedError) as error:
        return f"{precision} products fail on {device}: {error_line(error, 110)}"
    return None


def _timed_product(device: str, dtype, m: int, n: int, k: int, *, repeats: int, label: str, computed_in: str | None,
                   timer: str = "wall"):
    """The timing of an ``m`` x ``k`` by ``k`` x ``n`` product in ``dtype`` on ``device``: its inputs and output are
    allocated before the timing and every timed product writes the same output (``torch.matmul(a, b, out=c)``), so
    that the time is the product's alone; :func:`gpukit.benchmark` refuses a rate above the datasheet's peak for
    ``computed_in`` (:class:`gpukit.core.timing.ImpossibleSpeed`). The tensors are freed when it returns or raises."""
    import torch

    a = torch.randn(m, k, dtype=dtype, device=device)
    b = torch.randn(k, n, dtype=dtype, device=device)
    c = torch.empty(m, n, dtype=dtype, device=device)
    return benchmark(torch.matmul, a, b, out=c, repeats=repeats, device=device, timer=timer, label=label,
                     flops=2 * m * n * k, computed_in=computed_in)


def search_matmul(device: str, precision: str, search: Search, notes: list[str] | None = None,
                  progress=None) -> dict | None:
    """The fastest matrix product in ``precision`` over ``search``'s shapes on ``device``: a dict with ``flop_s``,
    the shape (``m``, ``n``, ``k``), its ``median`` time and ``shapes_timed``; None if no shape could be timed.

    Each shape's inputs and output are allocated before the timing, and every timed product writes the same output
    (``torch.matmul(a, b, out=c)``), so that the time is the product's alone. The products are timed with
    :func:`gpukit.benchmark`, which waits for the device before each clock stops and, given the FLOPs, refuses a
    float32 or float64 rate above the GPU's datasheet peak (:class:`gpukit.core.timing.ImpossibleSpeed`): such a shape
    is left out, with a note. A shape that does not fit in memory is left out too."""
    import torch

    notes = notes if notes is not None else []
    dtype = getattr(torch, _TORCH_DTYPES[precision])
    shapes = search.shapes()
    best, timed, started = None, 0, time.perf_counter()
    with _matmul_precision(precision):
        for m, n, k in shapes:
            if timed and time.perf_counter() - started > search.budget_s:
                notes.append(f"matmul search on {device} in {precision}: stopped after {timed} of {len(shapes)} "
                             f"shapes, at the time budget of {search.budget_s:g} s")
                break
            try:
                timing = _timed_product(device, dtype, m, n, k, repeats=search.repeats,
                                        label=f"{precision} matmul {m}x{n}x{k}",
                                        computed_in=None if precision in ("float32", "float64") else precision)
            except ImpossibleSpeed as error:
                notes.append(f"matmul search on {device} in {precision}: {m} x {n} x {k} left out, faster than the "
                             f"datasheet allows ({error_line(error, 160)})")
                continue
            except (RuntimeError, MemoryError) as error:  # torch.OutOfMemoryError is a RuntimeError
                notes.append(f"matmul search on {device} in {precision}: {m} x {n} x {k} left out "
                             f"({error_line(error, 110)})")
                continue
            finally:
                if progress is not None:
                    progress()
            timed += 1
            rate = 2 * m * n * k / timing.median
            if best is None or rate > best["flop_s"]:
                best = {"flop_s": rate, "m": m, "n": n, "k": k, "median": timing.median}
    if best is None:
        return None
    return {**best, "shapes_timed": timed}


def _matmul_peak(device: str, precision: str, peaks: dict) -> tuple[float | None, str]:
    """The peak a ``precision`` product on ``device`` is a fraction of, and where it comes from (or why none)."""
    if precision in ("float32", "float64"):
        value = peaks.get(f"{precision}_flop_s")
        return value, peaks["source"] if value else f"no {precision} peak: {peaks['source']}"
    if device.startswith("cuda"):
        import torch

        name = torch.cuda.get_device_name(device)
        peak = gpu_peak(name, precision, operation="matmul")
        if peak is None:
            return None, f"no datasheet figure: no row of gpukit/data/hardware-peaks.csv matches {name!r}"
        if peak.flops_per_s is None:
            return None, peak.source
        return peak.flops_per_s, f"published: {peak.source} ({precision} matmul on {peak.units})"
    if device == "cpu":
        return None, f"no estimate of the CPU's {precision} peak (gpukit estimates float32 and float64 only)"
    return None, "unknown: Apple publishes no per-chip peaks that gpukit can match"


def achievable(device: str, results: list[dict], search: Search, notes: list[str], progress=None) -> dict:
    """The device's ``achievable`` section (schema in :mod:`gpukit.measuring.benchmark_records`), without its peaks (see
    :func:`add_peaks`): the search's best product in each precision, or the size sweep's where that was faster, and
    the fastest size of each copy row."""
    matmul, not_measured = {}, {}
    for precision in MATMUL_PRECISIONS:
        why = _why_not(device, precision)
        if why is not None:
            not_measured[precision] = why
            if progress is not None:
                for _ in search.shapes():
                    progress()
            continue
        found = search_matmul(device, precision, search, notes, progress)
        # A row of either size sweep (matmul, matmul-shapes) faster than the search is what the device achieved.
        rows = [r for r in results if r["benchmark"] in MATMUL_BENCHMARKS and r["dtype"] == precision]
        sweep = max(rows, key=lambda r: r["rate"], default=None)
        if sweep is not None and (found is None or sweep["rate"] * 1e9 > found["flop_s"]):
            n = sweep["size"]
            found = {"flop_s": sweep["rate"] * 1e9, "m": n, "n": n, "k": n, "median": sweep["median"],
                     "found_by": "size sweep", "shapes_timed": (found or {}).get("shapes_timed", 1)}
        elif found is not None:
            found["found_by"] = "search"
        if found is None:
            not_measured[precision] = f"no shape of the search could be timed on {device} (see the notes)"
            continue
        matmul[precision] = found
    bandwidth = {}
    for name in copy_benchmarks(device):
        rows = [r for r in results if r["benchmark"] == name]
        if rows:
            best = max(rows, key=lambda r: r["rate"])
            bandwidth[name] = {"bytes_per_s": best["rate"] * 1e9, "size": best["size"]}
    return {"method": search.describe(), "matmul": matmul, "not_measured": not_measured, "bandwidth": bandwidth}


def add_peaks(section: dict, device: str, peaks: dict) -> dict:
    """Add to an ``achievable`` section the peak each of its rates is a fraction of, and where it comes from."""
    for precision, best in section["matmul"].items():
        best["peak_flop_s"], best["peak"] = _matmul_peak(device, precision, peaks)
    for name, best in section["bandwidth"].items():
        if name == "copy" and device != "cpu" and peaks["memory_bytes_per_s"]:
            best["peak_bytes_per_s"], best["peak"] = peaks["memory_bytes_per_s"], peaks["source"]
        elif name == "copy":
            best["peak_bytes_per_s"] = None
            best["peak"] = ("no published figure: the CPU's memory peak in this file is its fastest copy"
                            if device == "cpu" else peaks["source"])
        else:
            best["peak_bytes_per_s"] = None
            best["peak"] = "no datasheet figure for copies between host and device in gpukit's table"
    return section


# ------------------------------------------------------------------------------------------ the suite
def _result(benchmark, device, dtype, size, batch, timing, work, repeats):
    unit = BENCHMARKS[benchmark][0]
    scale = 1 if unit == "matrices/s" else 1e9
    return {"benchmark": benchmark, "device": device, "dtype": dtype, "size": int(size),
            "batch": batch, "median": timing.median, "best": min(timing.best, timing.median),
            "time_unit": "s", "repeats": repeats, "rate": work / timing.median / scale, "rate_unit": unit,
            "fraction_of_peak": None}


def _measure(device, plan, bar, notes) -> list[dict]:
    results = []

    def timed(benchmark_name, dtype, size, batch, call, work):
        timing = benchmark(call, repeats=plan.repeats, device=device, label=f"{benchmark_name} {size}")
        results.append(_result(benchmark_name, device, dtype, size, batch, timing, work, plan.repeats))
        bar.update(1)

    for dtype in plan.matmul_dtypes:
        for n in plan.matmul_sizes:
            timed("matmul", dtype, n, None, *_matmul(device, dtype, n))
    for n in plan.elementwise_lengths:
        timed("elementwise", "float32", n, None, *_elementwise(device, n))
    for name in copy_benchmarks(device):
        for nbytes in plan.copy_bytes:
            timed(name, "uint8", nbytes, None, *_copy(device, nbytes, name))
    if device == "mps":
        notes.append("host-to-device and device-to-host on mps: pageable host memory only (pinned memory is "
                     "CUDA's)")
    for n in plan.det_sizes:
        try:
            call, work, used_lu = _det_fft(device, n, plan.batch)
        except (RuntimeError, NotImplementedError, TypeError) as error:
            notes.append(f"det+fft on {device} skipped: complex64 is not supported ({error_line(error, 110)})")
            bar.update(len(plan.det_sizes))
            break
        if used_lu and not any("LU" in note and device in note for note in notes):
            notes.append(f"det+fft on {device}: torch.linalg.det failed, determinants computed from an LU "
                         "factorisation")
        timed("det+fft", "complex64", n, plan.batch, call, work)
    if device == "mps":
        notes.append("matmul on mps: float64 skipped, MPS has no float64")
    return results + measure_shapes(device, plan, notes, progress=lambda: bar.update(1))


def measure_shapes(device: str, plan: Plan, notes: list[str], progress=None) -> list[dict]:
    """The ``matmul-shapes`` rows of ``device``: an n x n product for each of ``plan.shape_sizes`` in each of
    ``plan.shape_dtypes`` (see :data:`SHAPE_SIZES`).

    Each size's inputs and output are allocated before its timing and every timed product writes the same output
    (``torch.matmul(a, b, out=c)``), after a warm-up (:func:`gpukit.benchmark`), so that the time is the product's
    alone. On an NVIDIA GPU each product is timed with CUDA events on the current stream, which the product is
    queued on (a bfloat16 product of 4,096 takes about 0.2 ms on an H100, where the host's clock would add the wait
    to the time); elsewhere with the host's clock after waiting for the device. float32 runs at PyTorch's
    ``"highest"`` float32 matmul precision (TF32 off: ``torch.set_float32_matmul_precision`` sets cuBLAS's float32
    products to IEEE float32), so each row is held to the datasheet's peak of its own dtype (``computed_in``): a
    rate above it raises :class:`gpukit.core.timing.ImpossibleSpeed`, and the row is left out with a note, as the
    search does. A dtype the device cannot multiply in is skipped with the reason."""
    import torch

    results = []
    timer = "events" if device.startswith("cuda") else "wall"
    for dtype in plan.shape_dtypes:
        why = _why_not(device, dtype)
        if why is not None:
            notes.append(f"matmul-shapes on {device} in {dtype} skipped: {why}")
            for _ in plan.shape_sizes:
                if progress is not None:
                    progress()
            continue
        with _matmul_precision(dtype):
            for n in plan.shape_sizes:
                try:
                    timing = _timed_product(device, getattr(torch, dtype), n, n, n, repeats=plan.shape_repeats,
                                            label=f"matmul-shapes {dtype} {n}", computed_in=dtype, timer=timer)
                except ImpossibleSpeed as error:
                    notes.append(f"matmul-shapes on {device} in {dtype}: n = {n} left out, faster than the datasheet "
                                 f"allows ({error_line(error, 160)})")
                    continue
                finally:
                    if progress is not None:
                        progress()
                results.append(_result("matmul-shapes", device, dtype, n, None, timing, 2 * n**3,
                                       plan.shape_repeats))
    return results


def _peaks(device: str, results: list[dict], searched: dict[str, float] | None = None) -> dict:
    """The device's peaks, and the fraction of them each result reached (filled in place).

    ``searched`` holds the achievable search's best FLOP/s per precision: on the CPU, whose peak is an estimate,
    a search that beat it (and the rows) raises the practical ceiling as a row would."""
    peaks = {"float32_flop_s": None, "float64_flop_s": None, "memory_bytes_per_s": None, "source": ""}
    if device.startswith("cuda"):
        import torch

        name = torch.cuda.get_device_name(device)
        units = []
        for dtype in ("float32", "float64"):
            # The FLOP/s peaks of a record are those of matrix products, the only FLOP-counted benchmark:
            # for float64 on a GPU with FP64 tensor cores that is the tensor-core figure, not the vector one.
            peak = gpu_peak(name, dtype, operation="matmul")
            if peak is not None:
                peaks[f"{dtype}_flop_s"] = peak.flops_per_s
                peaks["memory_bytes_per_s"] = peak.bytes_per_s
                peaks["source"] = f"published: {peak.source}"
                units.append(f"{dtype} matmul on {peak.units}")
        if peaks["source"]:
            peaks["source"] += f" (FLOP/s peaks: {', '.join(units)})"
        peaks["source"] = peaks["source"] or f"unknown: no row of gpukit/data/hardware-peaks.csv matches {name!r}"
    elif device == "cpu":
        sources = []
        for dtype in ("float32", "float64"):
            rates = [r["rate"] * 1e9 for r in results if r["benchmark"] in MATMUL_BENCHMARKS and r["dtype"] == dtype]
            if dtype in (searched or {}):
                rates.append(searched[dtype])
            if not rates:
                continue
            estimate = estimate_cpu_peak(dtype)
            ceiling = practical_ceiling(estimate and estimate.flops_per_s, max(rates))
            peaks[f"{dtype}_flop_s"] = ceiling.flops_per_s
            sources.append(f"{dtype}: {ceiling.sentence()}")
        copies = [r["rate"] * 1e9 for r in results if r["benchmark"] == "copy"]
        if copies:
            peaks["memory_bytes_per_s"] = max(copies)
            sources.append("memory: the fastest copy measured in this run")
        peaks["source"] = " ".join(sources) or "unknown"
    else:
        peaks["source"] = "unknown: Apple publishes no per-chip peaks that gpukit can match"
    for result in results:
        if result["benchmark"] in MATMUL_BENCHMARKS and result["dtype"] in ("float32", "float64"):
            peak = peaks.get(f"{result['dtype']}_flop_s")
            rate = result["rate"] * 1e9
        elif result["benchmark"] in MATMUL_BENCHMARKS:
            # bfloat16 and float16 (matmul-shapes): the datasheet's tensor-core figure, where gpukit's table has one.
            peak, rate = _matmul_peak(device, result["dtype"], peaks)[0], result["rate"] * 1e9
        elif result["benchmark"] == "elementwise" or (result["benchmark"] == "copy" and device != "cpu"):
            peak, rate = peaks["memory_bytes_per_s"], result["rate"] * 1e9
        else:
            continue
        result["fraction_of_peak"] = rate / peak if peak else None
    return peaks


def run_suite(devices: list[str] | None = None, *, quick: bool = False, machine: str | None = None,
              command: str | None = None, progress: bool = True, file=None,
              search_seconds: float | None = None) -> dict:
    """Measure every device (default: all present) and return the record, checked against the schema.
    ``search_seconds``: each precision's time budget in the achievable search (default: :data:`_SEARCH`'s)."""
    devices = devices_to_run(devices, what="measure")
    plans = {d: plan_for(d, quick) for d in devices}
    searches = {d: search_for(d, quick, search_seconds) for d in devices}
    total = sum(plan.steps(d) + len(MATMUL_PRECISIONS) * len(searches[d].shapes()) for d, plan in plans.items())
    bar = progress_bar(total, "booktools bench", file, enabled=progress)
    notes: list[str] = []
    results, device_entries = [], {}
    try:
        for device in devices:
            measured = _measure(device, plans[device], bar, notes)
            clocks, no_clocks = device_clocks(device)
            if no_clocks:
                notes.append(no_clocks)
            section = achievable(device, measured, searches[device], notes, progress=lambda: bar.update(1))
            peaks = _peaks(device, measured, {p: best["flop_s"] for p, best in section["matmul"].items()})
            device_entries[device] = {
                "name": describe_device(device), "kind": device.split(":")[0],
                "clocks": clocks,
                "peaks": peaks, "achievable": add_peaks(section, device, peaks)}
            results.extend(measured)
    finally:
        bar.close()
    record = {
        "schema": "gpukit.benchmarks/1",
        "machine": machine or machine_description(devices),
        "date": _dt.date.today().isoformat(),
        "command": command or "python -m booktools bench" + (" --quick" if quick else ""),
        "mode": "quick" if quick else "full",
        "host": host_record(),
        "software": software_record(),
        "devices": device_entries,
        "results": results,
        "notes": notes,
    }
    return validate_record(record, "the new record")


# ------------------------------------------------------------------------------------------ the file
def default_file_name(record: dict) -> str:
    """``<system>-<arch>-<device kinds>[-<first GPU>]-<date>``, e.g. ``linux-x86_64-cuda-h100-2026-05-01``."""
    kinds = dict.fromkeys(entry["kind"] for entry in record["devices"].values())
    gpu = next((entry["name"] for entry in record["devices"].values() if entry["kind"] == "cuda"), "")
    gpu_model = re.sub(r"^cuda:\d+ \(|,.*$|\)$", "", gpu).replace("NVIDIA", "").strip()
    parts = [platform.system(), platform.machine(), *kinds, gpu_model, record["date"]]
    return file_name("-".join(part for part in parts if part))


def write_benchmark_file(record: dict, folder: str | Path | None = None, name: str | None = None) -> Path:
    """Check ``record`` and save it as ``<folder>/<name>.json`` (default: ``data/benchmarks/``, a name made of
    the system, the device kinds, the first GPU's model and the date)."""
    validate_record(record, "the new record")
    folder = Path(folder) if folder is not None else benchmark_folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{file_name(name) if name else default_file_name(record)}.json"
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def summary(record: dict) -> str:
    """The record as a short text table: the largest size of each benchmark on each device; for ``matmul-shapes``,
    in each dtype, the fastest and the slowest size (the shapes the hardware likes, and one it does not)."""
    lines = [f"{record['machine']} ({record['date']}, {record['mode']} mode)"]
    largest: dict = {}
    shapes: dict = {}
    for r in record["results"]:
        key = (r["device"], r["benchmark"], r["dtype"])
        if r["benchmark"] == "matmul-shapes":
            shapes.setdefault(key, []).append(r)
            continue
        if key not in largest or r["size"] > largest[key]["size"]:
            largest[key] = r
    for (device, name, dtype), r in largest.items():
        # On the CPU the ceiling is an estimate or, where a run beat it, the run's own best (see peaks.source).
        of = "of peak" if device != "cpu" else "of the practical ceiling"
        peak = "" if r["fraction_of_peak"] is None else f", {r['fraction_of_peak']:.0%} {of}"
        lines.append(f"  {device:7s} {name:23s} {dtype:9s} size {r['size']:>11,}: "
                     f"{r['rate']:10.4g} {r['rate_unit']}{peak}")
    for (device, name, dtype), rows in shapes.items():
        fastest, slowest = max(rows, key=lambda r: r["rate"]), min(rows, key=lambda r: r["rate"])
        of = "of peak" if device != "cpu" else "of the practical ceiling"
        peak = "" if fastest["fraction_of_peak"] is None else f", {fastest['fraction_of_peak']:.0%} {of}"
        lines.append(f"  {device:7s} {name:23s} {dtype:9s} fastest n = {fastest['size']:,}: "
                     f"{fastest['rate']:.4g} {fastest['rate_unit']}{peak}; slowest n = {slowest['size']:,}: "
                     f"{slowest['rate']:.4g} {slowest['rate_unit']} ({slowest['rate'] / fastest['rate']:.0%} of the "
                     "fastest)")
    for device, entry in record.get("devices", {}).items():
        section = entry.get("achievable")
        if not section:
            continue
        for precision, best in section["matmul"].items():
            of = "" if best["peak_flop_s"] is None else f", {best['flop_s'] / best['peak_flop_s']:.0%} of peak"
            lines.append(f"  {device:7s} achievable matmul {precision:9s} {best['m']} x {best['n']} x {best['k']} "
                         f"({best['found_by']}): {best['flop_s'] / 1e9:10.4g} GFLOP/s{of}")
        for precision, why in section["not_measured"].items():
            lines.append(f"  {device:7s} achievable matmul {precision:9s} not measured: {why}")
        for name, best in section["bandwidth"].items():
            peak = best["peak_bytes_per_s"]
            of = "" if peak is None else f", {best['bytes_per_s'] / peak:.0%} of peak"
            lines.append(f"  {device:7s} achievable {name:23s} size {best['size']:>11,}: "
                         f"{best['bytes_per_s'] / 1e9:10.4g} GB/s{of}")
    lines.extend(f"  note: {note}" for note in record.get("notes", []))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ command line
def add_bench_command(commands) -> None:
    """Add ``bench`` to ``python -m booktools``'s subcommands."""
    parser = commands.add_parser(
        "bench", help="measure every device here and write data/benchmarks/<machine>-<date>.json")
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats (a few seconds)")
    parser.add_argument("--devices", nargs="+", help="devices to measure (default: every device present)")
    parser.add_argument("--machine", help="the machine in words (default: system, CPU and GPU names)")
    parser.add_argument("--name", help="the file's name without .json (default: system-devices-GPU-date)")
    parser.add_argument("--folder", help="where to write (default: the book's data/benchmarks; with --quick, "
                                         "_build/cache/benchmarks-quick)")
    parser.add_argument("--no-write", action="store_true", help="print the summary only")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--search-seconds", type=float, metavar="S",
                        help="each precision's time budget in the search for the achievable matmul rate "
                             "(default: 20 on a GPU, 30 on the CPU)")


def run_bench_command(args, argv: list[str] | None = None) -> int:
    """Run the suite, print a summary and write the file; returns the process's exit status."""
    shown = sys.argv[1:] if argv is None else argv
    command = " ".join(["python -m booktools", *shown])
    try:
        record = run_suite(args.devices, quick=args.quick, machine=args.machine, command=command,
                           progress=not args.no_progress, search_seconds=args.search_seconds)
    except (ValueError, RuntimeError) as error:
        print(f"error: {error}")
        return 2
    print(summary(record))
    if not args.no_write:
        folder = args.folder
        if folder is None and args.quick:
            # A quick run is a test of the suite, not a measurement for the book: it never replaces a file
            # in data/benchmarks/ unless --folder says so.
            folder = state_dir("benchmarks-quick")
        path = write_benchmark_file(record, folder=folder, name=args.name)
        print(f"wrote {path}")
    return 0



