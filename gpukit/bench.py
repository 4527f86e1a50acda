"""The book's benchmark suite: ``python -m gpukit bench`` measures every device of a machine and writes one file.

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
  12), where ``torch.linalg.det`` fails it uses an LU factorisation.

The record (schema in :mod:`gpukit.benchmark_files`) names the machine, its CPU, clocks where readable,
library, CUDA and driver versions, the command and the date, and gives each result's rate with its unit
and its fraction of the device's peak where the peak is known: a published figure for a known NVIDIA GPU
(for matrix products the matmul peak, which in float64 is the FP64 tensor-core figure where the GPU has
FP64 tensor cores);
for the CPU the estimate of :func:`gpukit.hardware.estimate_cpu_peak`, or the best rate measured where that
beat the estimate (:func:`gpukit.hardware.practical_ceiling`), and the measured copy bandwidth for memory.
``--quick`` runs every benchmark of the full run, the four transfers included where there is a GPU, at small
sizes and with few repeats (a few seconds), for tests, and writes its file under
``_build/cache/benchmarks-quick/`` unless ``--folder`` is given, so that it never replaces a measurement.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass

from .benchmark_files import write_benchmark_file

__all__ = ["PAGEABLE_TRANSFERS", "PINNED_TRANSFERS", "Plan", "add_bench_command", "copy_benchmarks",
           "machine_description", "plan_for", "run_bench_command", "run_suite"]


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

    def steps(self, device: str) -> int:
        copies = len(self.copy_bytes) * len(copy_benchmarks(device))
        return (len(self.matmul_sizes) * len(self.matmul_dtypes) + len(self.elementwise_lengths) + copies
                + len(self.det_sizes))


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


def plan_for(device: str, quick: bool = False) -> Plan:
    """The sizes for ``device``: small ones with ``quick``; larger on a GPU than on the CPU."""
    plan = _QUICK if quick else _FULL["cpu" if device == "cpu" else "gpu"]
    if device == "mps":
        plan = Plan(plan.matmul_sizes, ("float32",), plan.elementwise_lengths, plan.copy_bytes, plan.det_sizes,
                    plan.batch, plan.repeats)
    return plan


# ------------------------------------------------------------------------------------------ the machine
def _nvidia_smi(query: str) -> list[str] | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    return [line.strip() for line in out.splitlines() if line.strip()]


def _mhz(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value > 0 else None


def gpu_clocks(index: int) -> dict | None:
    """The maximum SM and memory clocks of CUDA GPU ``index`` in MHz, as nvidia-smi reports them, or ``None``."""
    lines = _nvidia_smi("clocks.max.sm,clocks.max.memory")
    if not lines or index >= len(lines):
        return None
    parts = [part.strip() for part in lines[index].split(",")]
    if len(parts) != 2:
        return None
    clocks = {"sm_max_mhz": _mhz(parts[0]), "memory_max_mhz": _mhz(parts[1])}
    return clocks if any(clocks.values()) else None


def host_record() -> dict:
    """The CPU model, its cores, the maximum clock where the system reports one, the platform and Python."""
    from .device import cpu_name
    from .hardware import CPUINFO, parse_cpuinfo, reported_max_mhz

    try:
        physical = parse_cpuinfo(CPUINFO.read_text(encoding="utf-8"))["cores"] or None
    except OSError:
        physical = None
    reported = reported_max_mhz()
    return {"cpu_model": cpu_name(), "physical_cores": physical, "logical_cores": os.cpu_count() or 1,
            "max_clock_mhz": reported[0] if reported else None,
            "clock_source": reported[1] if reported else "not reported by this system",
            "platform": platform.platform(), "python": platform.python_version()}


def software_record() -> dict:
    """Library versions, CUDA (``torch.version.cuda``) and the NVIDIA driver (nvidia-smi) where present."""
    import numpy
    import torch

    from .report import library_version

    driver = _nvidia_smi("driver_version")
    software = {"torch": torch.__version__, "numpy": numpy.__version__, "cuda": torch.version.cuda,
                "driver": driver[0] if driver else None}
    if torch.backends.mps.is_available():
        software["macos"] = platform.mac_ver()[0] or None
    for name in ("cupy", "jax"):
        version = library_version(name) if name in sys.modules or _importable(name) else None
        if version:
            software[name] = str(version)
    return software


def _importable(name: str) -> bool:
    from importlib.util import find_spec

    return find_spec(name) is not None


def machine_description(devices: list[str]) -> str:
    """A default description: system, architecture, CPU model and cores, and the GPUs by name."""
    from .device import cpu_name, describe_device

    gpus = [describe_device(d) for d in devices if d != "cpu"]
    parts = [f"{platform.system()} {platform.machine()}", f"{cpu_name()} ({os.cpu_count()} logical cores)"]
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

    The same code as the lessons' (chapters 7 and 12; tests/test_determinants.py compares them): from
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


# ------------------------------------------------------------------------------------------ the suite
def _result(benchmark, device, dtype, size, batch, timing, work, repeats):
    from .benchmark_files import BENCHMARKS

    unit = BENCHMARKS[benchmark][0]
    scale = 1 if unit == "matrices/s" else 1e9
    return {"benchmark": benchmark, "device": device, "dtype": dtype, "size": int(size),
            "batch": batch, "median": timing.median, "best": min(timing.best, timing.median),
            "time_unit": "s", "repeats": repeats, "rate": work / timing.median / scale, "rate_unit": unit,
            "fraction_of_peak": None}


def _measure(device, plan, bar, notes) -> list[dict]:
    from .timing import benchmark

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
            from .backends import short_error

            notes.append(f"det+fft on {device} skipped: complex64 is not supported ({short_error(error)})")
            bar.update(len(plan.det_sizes))
            break
        if used_lu and not any("LU" in note and device in note for note in notes):
            notes.append(f"det+fft on {device}: torch.linalg.det failed, determinants computed from an LU "
                         "factorisation")
        timed("det+fft", "complex64", n, plan.batch, call, work)
    if device == "mps":
        notes.append("matmul on mps: float64 skipped, MPS has no float64")
    return results


def _peaks(device: str, results: list[dict]) -> dict:
    """The device's peaks, and the fraction of them each result reached (filled in place)."""
    from .hardware import estimate_cpu_peak, gpu_peak, practical_ceiling

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
            rates = [r["rate"] * 1e9 for r in results if r["benchmark"] == "matmul" and r["dtype"] == dtype]
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
        if result["benchmark"] == "matmul":
            peak = peaks.get(f"{result['dtype']}_flop_s")
            rate = result["rate"] * 1e9
        elif result["benchmark"] == "elementwise" or (result["benchmark"] == "copy" and device != "cpu"):
            peak, rate = peaks["memory_bytes_per_s"], result["rate"] * 1e9
        else:
            continue
        result["fraction_of_peak"] = rate / peak if peak else None
    return peaks


def run_suite(devices: list[str] | None = None, *, quick: bool = False, machine: str | None = None,
              command: str | None = None, progress: bool = True, file=None) -> dict:
    """Measure every device (default: all present) and return the record, checked against the schema."""
    from .backends import _resolve_devices
    from .benchmark_files import validate_record
    from .device import describe_device
    from .progress import _NoBar, progress_bar

    devices = _resolve_devices(devices)
    plans = {d: plan_for(d, quick) for d in devices}
    total = sum(plan.steps(d) for d, plan in plans.items())
    bar = progress_bar(total, "gpukit bench", file) if progress else _NoBar()
    notes: list[str] = []
    results, device_entries = [], {}
    try:
        for device in devices:
            measured = _measure(device, plans[device], bar, notes)
            index = int(device.split(":")[1]) if device.startswith("cuda:") else 0
            device_entries[device] = {
                "name": describe_device(device), "kind": device.split(":")[0],
                "clocks": gpu_clocks(index) if device.startswith("cuda") else None,
                "peaks": _peaks(device, measured)}
            results.extend(measured)
    finally:
        bar.close()
    record = {
        "schema": "gpukit.benchmarks/1",
        "machine": machine or machine_description(devices),
        "date": _dt.date.today().isoformat(),
        "command": command or "python -m gpukit bench" + (" --quick" if quick else ""),
        "mode": "quick" if quick else "full",
        "host": host_record(),
        "software": software_record(),
        "devices": device_entries,
        "results": results,
        "notes": notes,
    }
    return validate_record(record, "the new record")


def summary(record: dict) -> str:
    """The record as a short text table: the largest size of each benchmark on each device."""
    lines = [f"{record['machine']} ({record['date']}, {record['mode']} mode)"]
    largest: dict = {}
    for r in record["results"]:
        key = (r["device"], r["benchmark"], r["dtype"])
        if key not in largest or r["size"] > largest[key]["size"]:
            largest[key] = r
    for (device, benchmark, dtype), r in largest.items():
        # On the CPU the ceiling is an estimate or, where a run beat it, the run's own best (see peaks.source).
        of = "of peak" if device != "cpu" else "of the practical ceiling"
        peak = "" if r["fraction_of_peak"] is None else f", {r['fraction_of_peak']:.0%} {of}"
        lines.append(f"  {device:7s} {benchmark:23s} {dtype:9s} size {r['size']:>11,}: "
                     f"{r['rate']:10.4g} {r['rate_unit']}{peak}")
    lines.extend(f"  note: {note}" for note in record.get("notes", []))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ command line
def add_bench_command(commands) -> None:
    """Add ``bench`` to ``python -m gpukit``'s subcommands."""
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


def run_bench_command(args, argv: list[str] | None = None) -> int:
    """Run the suite, print a summary and write the file; returns the process's exit status."""
    shown = sys.argv[1:] if argv is None else argv
    command = " ".join(["python -m gpukit", *shown])
    try:
        record = run_suite(args.devices, quick=args.quick, machine=args.machine, command=command,
                           progress=not args.no_progress)
    except (ValueError, RuntimeError) as error:
        print(f"error: {error}")
        return 2
    print(summary(record))
    if not args.no_write:
        folder = args.folder
        if folder is None and args.quick:
            # A quick run is a test of the suite, not a measurement for the book: it never replaces a file
            # in data/benchmarks/ unless --folder says so.
            from .paths import state_dir

            folder = state_dir("benchmarks-quick")
        path = write_benchmark_file(record, folder=folder, name=args.name)
        print(f"wrote {path}")
    return 0



