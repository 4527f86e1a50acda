"""The files that record benchmark results, one per machine and date, in ``data/benchmarks/``.

``python -m booktools bench`` (:mod:`booktools.bench`) measures a machine and writes one such file; the appendix
"Benchmarks across hardware" and the plots of chapters 1 and 12 read every file in the folder. A file that
is malformed or partial stops the reading with a :class:`BenchmarkFileError` naming the file and the field:
no file is ever silently left out.

The schema (:data:`SCHEMA`, version 1). Times are in seconds; every rate carries its unit::

    {
      "schema": "gpukit.benchmarks/1",
      "machine": "free text: which computer, which GPU",
      "date": "2026-05-01",                          # ISO date of the run
      "command": "python -m booktools bench",           # the command line that made the file
      "mode": "full",                                # "full" or "quick" (small sizes, few repeats)
      "host": {"cpu_model": "AMD EPYC", "physical_cores": 1, "logical_cores": 2,
               "max_clock_mhz": 3500.0 or null, "clock_source": "where the clock was read",
               "platform": "Linux-6.8-x86_64", "python": "3.11.7"},
      "software": {"torch": "2.13.0", "numpy": "2.3.1", "cuda": "12.8" or null,
                   "driver": "570.86" or null,
                   "cuda_stack": "cuda12" or null,            # optional: which of the book's CUDA stacks
                   ...},                                     # further "name": "version" pairs allowed
      "devices": {"cpu": {"name": "cpu (AMD EPYC, 2 logical cores)", "kind": "cpu",
                          "clocks": {"sm_max_mhz": 1980.0, ...} or null,
                          "peaks": {"float32_flop_s": 1.1e11 or null, "float64_flop_s": ... or null,
                                    "memory_bytes_per_s": ... or null, "source": "where they come from"},
                          "achievable": {...}}},             # optional: the best this device achieved, below
      "results": [{"benchmark": "matmul", "device": "cpu", "dtype": "float32", "size": 1024,
                   "batch": null, "median": 0.012, "best": 0.011, "time_unit": "s", "repeats": 5,
                   "rate": 178.9, "rate_unit": "GFLOP/s", "fraction_of_peak": 0.41 or null}, ...],
      "notes": ["what was skipped and why", ...]
    }

``benchmark`` is one of :data:`BENCHMARKS`, each with its rate unit and the meaning of ``size``; ``batch``
is the number of matrices for ``det+fft`` and ``null`` otherwise. ``fraction_of_peak`` is the rate over the
device's peak for that kind of work (FLOP/s for ``matmul`` and ``matmul-shapes``, bytes/s for ``elementwise``),
``null`` where no peak is known. ``matmul-shapes`` rows (files written before it have none) are n x n products at
sizes around multiples of 8, 64 and 128, in ``bfloat16``, ``float16`` and ``float32`` (TF32 off) on a GPU and in
``float32`` on the CPU: a ``bfloat16`` or ``float16`` row's peak is the datasheet's dense tensor-core figure of its
dtype (``devices.<device>.achievable.matmul.<dtype>.peak_flop_s``; ``null`` where gpukit's table has none). The
FLOP/s peaks (``float32_flop_s``, ``float64_flop_s``) are those of matrix products: on a GPU with FP64 tensor cores
(the peaks table's A100, H100, H200, GH200) ``float64_flop_s`` is the FP64 tensor-core figure, twice the vector
FP64 one, and ``source`` says which figure each is. Every result's device must be listed in ``devices``.

``software.cuda_stack`` (optional; files written before it have none) names the book's CUDA stack the run's torch
belongs to, ``"cuda13"`` or ``"cuda12"`` (:mod:`gpukit.base.cuda_stacks`: gpukit's extra of that name), from the CUDA
major torch was built for; ``null`` for a torch built without CUDA or for another CUDA major. Where present it
must agree with ``software.cuda``.

``devices.<device>.achievable`` (optional; files written before the search have none, and the tables below then
take the best of the file's own size sweep in its place, saying so) is the best the device achieved, beside
its datasheet (or, for a CPU, estimated) peak::

    "achievable": {
      "method": "how the shapes were searched and timed",
      "matmul": {"float32": {"flop_s": 5.2e13, "m": 8192, "n": 8192, "k": 8192, "median": 0.021,
                             "found_by": "search" or "size sweep", "shapes_timed": 48,
                             "peak_flop_s": 6.7e13 or null, "peak": "where the peak comes from, or why none"},
                 "tf32": {...}, "bfloat16": {...}, "float16": {...}, "float64": {...}},
      "not_measured": {"tf32": "why not (no TF32 on this device)", ...},
      "bandwidth": {"copy": {"bytes_per_s": 2.7e12, "size": 268435456, "peak_bytes_per_s": 3.35e12 or null,
                             "peak": "..."},
                    "host-to-device pinned": {...}, ...}
    }

Each precision of :data:`gpukit.core.peaks.MATMUL_PRECISIONS` is either in ``matmul`` or in ``not_measured``. An
achievable rate is the best of a search over matrix shapes and of the file's own ``matmul`` and ``matmul-shapes``
rows in that precision (``found_by`` ``"size sweep"`` where a row was faster), so it is never below such a row of
``results`` (checked); ``bandwidth`` holds, for each copy benchmark the device ran, its
fastest size (the rows already copy into preallocated buffers).
"""

from __future__ import annotations

import re
from pathlib import Path

from gpukit.base import paths
from gpukit.base.cuda_stacks import STACKS, stack_for_cuda
from gpukit.base.machine_files import RecordChecker, json_files, read_checked
from gpukit.core.peaks import MATMUL_PRECISIONS

__all__ = [
    "BENCHMARKS",
    "MATMUL_BENCHMARKS",
    "ROW_NOTES",
    "SCHEMA",
    "BenchmarkFileError",
    "benchmark_folder",
    "read_benchmark_file",
    "read_benchmark_folder",
    "achievable_table",
    "cuda_stack_of",
    "reference_curves",
    "results_table",
    "validate_record",
]

SCHEMA = "gpukit.benchmarks/1"

# benchmark -> (rate unit, what ``size`` counts)
BENCHMARKS = {
    "matmul": ("GFLOP/s", "n, for an n x n matrix product"),
    "elementwise": ("GB/s", "vector length, for exp(x) + 3 sin(x)"),
    "copy": ("GB/s", "bytes copied within the device's memory"),
    # The transfers name the kind of host memory they used: pinned (page-locked) memory moves at the bus's rate,
    # pageable memory is staged through a pinned buffer by the driver. Every buffer is allocated before the timing
    # (booktools.bench).
    "host-to-device pageable": ("GB/s", "bytes copied from pageable host memory into a buffer on the device"),
    "device-to-host pageable": ("GB/s", "bytes copied from the device into a pageable host buffer"),
    "host-to-device pinned": ("GB/s", "bytes copied from pinned host memory into a buffer on the device"),
    "device-to-host pinned": ("GB/s", "bytes copied from the device into a pinned host buffer"),
    # The two rows of files written before the bench named its host memory (the first H100 run's among them): their
    # device-to-host copies allocated a new pageable host buffer per call, so they timed page faults as well as the
    # bus. Still read, so that such a file stays usable until a new run replaces it; a page that shows one says so.
    "host-to-device": ("GB/s", "bytes copied from pageable host memory to the device (a file from before the "
                               "pageable and pinned rows)"),
    "device-to-host": ("GB/s", "bytes copied from the device into a new pageable host buffer per copy (a file from "
                               "before the pageable and pinned rows)"),
    "det+fft": ("matrices/s", "n, for a batch of n x n complex matrices, each a determinant and a 2-D FFT"),
    # The shapes the hardware likes: n x n products at sizes around multiples of 8, 64 and 128 (on a GPU 4,032 to
    # 4,224 in bfloat16, float16 and float32 with TF32 off; on the CPU 255 to 320 in float32: booktools.bench's
    # SHAPE_SIZES), each into a preallocated output; files written before it have no such rows.
    "matmul-shapes": ("GFLOP/s", "n, for an n x n matrix product, at sizes around multiples of 8, 64 and 128"),
}
# The benchmarks whose rows are matrix products, in GFLOP/s of their dtype: the achievable rate of a precision is
# never below one of their rows.
MATMUL_BENCHMARKS = ("matmul", "matmul-shapes")
# What a page must say beside rows of these benchmarks (the unnamed transfer rows of files written before the bench
# named its host memory), until a new run replaces the file.
ROW_NOTES = {
    "device-to-host": ("timed into a new host buffer per copy: its allocation and page faults are in the time, "
                       "so the bus alone is faster"),
    "host-to-device": "from pageable host memory (a row from before the bench named the host memory)",
}
# The copy benchmarks: those with a bandwidth the achievable section may record.
COPY_BENCHMARKS = tuple(name for name, (unit, _) in BENCHMARKS.items() if unit == "GB/s" and name != "elementwise")
_TOP = ("schema", "machine", "date", "command", "mode", "host", "software", "devices", "results")
_OPTIONAL_TOP = ("notes",)
_HOST = {"cpu_model": "text", "physical_cores": "count?", "logical_cores": "count", "max_clock_mhz": "positive?",
         "clock_source": "text", "platform": "text", "python": "text"}
_PEAKS = {"float32_flop_s": "positive?", "float64_flop_s": "positive?", "memory_bytes_per_s": "positive?",
          "source": "text"}
_RESULT = {"benchmark": "text", "device": "text", "dtype": "text", "size": "count", "batch": "count?",
           "median": "positive", "best": "positive", "time_unit": "text", "repeats": "count", "rate": "positive",
           "rate_unit": "text", "fraction_of_peak": "fraction?"}
_KINDS = ("cpu", "cuda", "mps")
_ACHIEVED_MATMUL = {"flop_s": "positive", "m": "count", "n": "count", "k": "count", "median": "positive",
                    "found_by": "text", "shapes_timed": "count", "peak_flop_s": "positive?", "peak": "text"}
_ACHIEVED_BANDWIDTH = {"bytes_per_s": "positive", "size": "count", "peak_bytes_per_s": "positive?", "peak": "text"}
FOUND_BY = ("search", "size sweep")
# A rate written as GFLOP/s and one written as FLOP/s of the same measurement differ by rounding alone.
_SAME = 1 + 1e-9


class BenchmarkFileError(ValueError):
    """A benchmark file that cannot be used: the message names the file and the field."""


def benchmark_folder() -> Path:
    """``<repo>/data/benchmarks``, where each machine's results are kept."""
    return paths.project_root() / "data" / "benchmarks"


# ------------------------------------------------------------------------------------------ validation
def validate_record(record, where: str = "the record") -> dict:
    """Check a record against the schema and return it; :class:`BenchmarkFileError` names the bad field."""
    check = RecordChecker(where, BenchmarkFileError, SCHEMA)
    check.top(record, _TOP, _OPTIONAL_TOP)
    for field in ("machine", "command"):
        check.value(field, record[field], "text")
    check.date("date", record["date"])
    if record["mode"] not in ("full", "quick"):
        check.fail("mode", f"must be 'full' or 'quick', not {record['mode']!r}")
    check.fields("host", record["host"], _HOST)
    software = record["software"]
    check.fields("software", software, {"torch": "text", "numpy": "text", "cuda": "text?",
                                                 "driver": "text?"}, extra_allowed=True)
    for name, version in software.items():
        check.value(f"software.{name}", version, "text?")
    devices = record["devices"]
    for device, entry in check.entries("devices", devices, "at least one device (cpu, cuda:0, mps) to its description"):
        field = f"devices.{device}"
        if not isinstance(entry, dict):
            check.fail(field, "must be a JSON object with name, kind, clocks and peaks")
        check.fields(field, entry, {"name": "text", "kind": "text"}, extra_allowed=True)
        if entry["kind"] not in _KINDS or not str(device).startswith(entry["kind"]):
            check.fail(f"{field}.kind", f"must be the kind of {device!r} (one of {', '.join(_KINDS)}), "
                                          f"not {entry['kind']!r}")
        for key in ("clocks", "peaks"):
            if key not in entry:
                check.fail(f"{field}.{key}", "is missing (a partial file)")
        extra = sorted(set(entry) - {"name", "kind", "clocks", "peaks", "achievable"})
        if extra:
            check.fail(f"{field}.{extra[0]}", f"is not part of the schema {SCHEMA}")
        clocks = entry["clocks"]
        if clocks is not None:
            if not isinstance(clocks, dict):
                check.fail(f"{field}.clocks", "must be a JSON object of name -> MHz, or null")
            for name, mhz in clocks.items():
                check.value(f"{field}.clocks.{name}", mhz, "positive?")
        check.fields(f"{field}.peaks", entry["peaks"], _PEAKS)
    _check_cuda_stack(check, software)
    results = record["results"]
    if not isinstance(results, list) or not results:
        check.fail("results", "must be a non-empty list of measurements")
    seen = set()
    for i, result in enumerate(results):
        field = f"results[{i}]"
        check.fields(field, result, _RESULT)
        if result["benchmark"] not in BENCHMARKS:
            check.fail(f"{field}.benchmark", f"is {result['benchmark']!r}, not one of {', '.join(BENCHMARKS)}")
        if result["device"] not in devices:
            check.fail(f"{field}.device", f"is {result['device']!r}, which 'devices' does not list")
        unit = BENCHMARKS[result["benchmark"]][0]
        if result["rate_unit"] != unit:
            check.fail(f"{field}.rate_unit", f"is {result['rate_unit']!r}; {result['benchmark']} is in {unit}")
        if result["time_unit"] != "s":
            check.fail(f"{field}.time_unit", f"is {result['time_unit']!r}; times are recorded in 's'")
        if result["best"] > result["median"] * (1 + 1e-9):
            check.fail(f"{field}.best", "is larger than the median, which cannot be")
        if (result["batch"] is None) != (result["benchmark"] != "det+fft"):
            check.fail(f"{field}.batch", "must be the number of matrices for det+fft, and null otherwise")
        key = (result["benchmark"], result["device"], result["dtype"], result["size"], result["batch"])
        if key in seen:
            check.fail(field, f"repeats the measurement {key} listed before it")
        seen.add(key)
    for device, entry in devices.items():
        if "achievable" in entry:
            _check_achievable(check, f"devices.{device}.achievable", entry["achievable"],
                              [r for r in results if r["device"] == device])
    notes = record.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        check.fail("notes", "must be a list of strings")
    return record


def cuda_stack_of(cuda_version: str | None) -> str | None:
    """The book's CUDA stack (``"cuda13"``, ``"cuda12"``: gpukit's extra) that a torch built for ``cuda_version``
    (``torch.version.cuda``, e.g. ``"13.0"``) belongs to; ``None`` for no CUDA or a major the book installs none of."""
    if cuda_version is None:
        return None
    try:
        major = int(str(cuda_version).split(".")[0])
    except ValueError:
        return None
    stack = stack_for_cuda(major)
    return stack.extra if stack else None


def _check_cuda_stack(check: RecordChecker, software: dict) -> None:
    if "cuda_stack" not in software:
        return  # written before the field existed

    stack, cuda = software["cuda_stack"], software["cuda"]
    extras = [s.extra for s in STACKS]
    if stack is not None and stack not in extras:
        check.fail("software.cuda_stack", f"must be one of {', '.join(extras)} or null, not {stack!r}")
    if stack != cuda_stack_of(cuda):
        check.fail("software.cuda_stack", f"is {stack!r}, but a torch built for CUDA {cuda} belongs to "
                                            f"{cuda_stack_of(cuda)!r}")


def _check_achievable(check: RecordChecker, field: str, achievable, results: list[dict]) -> None:
    check.fields(field, achievable, {"method": "text", "matmul": "object", "not_measured": "object",
                                             "bandwidth": "object"})
    matmul, missing, bandwidth = achievable["matmul"], achievable["not_measured"], achievable["bandwidth"]
    for precision in sorted(set(matmul) | set(missing)):
        if precision not in MATMUL_PRECISIONS:
            check.fail(f"{field}.matmul.{precision}", f"is not one of {', '.join(MATMUL_PRECISIONS)}")
    for precision in MATMUL_PRECISIONS:
        if (precision in matmul) == (precision in missing):
            check.fail(f"{field}.matmul.{precision}", "must be either measured (matmul) or said why not "
                                                       "(not_measured), once")
    for precision, why in missing.items():
        check.value(f"{field}.not_measured.{precision}", why, "text")
    for precision, best in matmul.items():
        at = f"{field}.matmul.{precision}"
        check.fields(at, best, _ACHIEVED_MATMUL)
        if best["found_by"] not in FOUND_BY:
            check.fail(f"{at}.found_by", f"must be one of {', '.join(FOUND_BY)}, not {best['found_by']!r}")
        beaten = [r for r in results if r["benchmark"] in MATMUL_BENCHMARKS and r["dtype"] == precision
                  and r["rate"] * 1e9 > best["flop_s"] * _SAME]
        if beaten:
            check.fail(f"{at}.flop_s", f"is below the row of size {beaten[0]['size']} ({beaten[0]['benchmark']}, "
                                         f"{beaten[0]['rate']:.4g} GFLOP/s): the achievable rate is the best of the "
                                         "search and the rows")
    for name, best in bandwidth.items():
        at = f"{field}.bandwidth.{name}"
        if name not in COPY_BENCHMARKS:
            check.fail(at, f"is not a copy benchmark ({', '.join(COPY_BENCHMARKS)})")
        check.fields(at, best, _ACHIEVED_BANDWIDTH)
        rows = [r for r in results if r["benchmark"] == name]
        if rows and max(r["rate"] for r in rows) * 1e9 > best["bytes_per_s"] * _SAME:
            check.fail(f"{at}.bytes_per_s", "is below a row of the same benchmark: it is the fastest of them")


# ------------------------------------------------------------------------------------------ files
def read_benchmark_file(path: str | Path) -> dict:
    """Read and check one machine's file; a malformed or partial file raises :class:`BenchmarkFileError`."""
    return read_checked(path, validate_record, BenchmarkFileError)


def read_benchmark_folder(folder: str | Path | None = None) -> dict[str, dict]:
    """Every file in ``folder`` (default ``data/benchmarks/``), by file name, in name order.

    A missing or empty folder, or any file that fails the schema, is an error naming it: a file is never
    silently left out.
    """
    folder = Path(folder) if folder is not None else benchmark_folder()
    return {path.name: read_benchmark_file(path) for path in json_files(folder, "python -m booktools bench")}


# ------------------------------------------------------------------------------------------ tables
NO_SEARCH = "size sweep (no search in this file)"
NOT_MEASURED = "not measured"


def _achieved(record: dict, device: str) -> dict:
    """What ``device`` of ``record`` achieved, by (work, what): ``("matmul", precision)`` and ``("copy", benchmark)``,
    each a dict of ``rate`` (GFLOP/s or GB/s, or None), ``at``, ``found_by``, ``peak_rate``, ``peak`` and ``note``.

    From the file's ``achievable`` section where it has one; else from the best of its own rows, which is what the
    device achieved in that run, though no search looked for better (``found_by`` says so)."""
    entry = record["devices"][device]
    rows = [r for r in record["results"] if r["device"] == device]
    achieved = {}
    section = entry.get("achievable")
    if section is not None:
        for precision in MATMUL_PRECISIONS:
            best = section["matmul"].get(precision)
            if best is None:
                achieved["matmul", precision] = {"rate": None, "at": "", "found_by": NOT_MEASURED, "peak_rate": None,
                                                 "peak": "", "note": section["not_measured"][precision]}
                continue
            peak = best["peak_flop_s"]
            achieved["matmul", precision] = {
                "rate": best["flop_s"] / 1e9, "at": f"{best['m']} x {best['n']} x {best['k']}",
                "found_by": best["found_by"], "peak_rate": None if peak is None else peak / 1e9, "peak": best["peak"],
                "note": ""}
        for name, best in section["bandwidth"].items():
            peak = best["peak_bytes_per_s"]
            achieved["copy", name] = {"rate": best["bytes_per_s"] / 1e9, "at": f"{best['size']:,} bytes",
                                      "found_by": "size sweep", "peak_rate": None if peak is None else peak / 1e9,
                                      "peak": best["peak"], "note": ROW_NOTES.get(name, "")}
        return achieved
    peaks = entry["peaks"]
    for precision in MATMUL_PRECISIONS:
        matmul = [r for r in rows if r["benchmark"] in MATMUL_BENCHMARKS and r["dtype"] == precision]
        if not matmul:
            achieved["matmul", precision] = {"rate": None, "at": "", "found_by": NOT_MEASURED, "peak_rate": None,
                                             "peak": "", "note": "this file was written before the bench searched "
                                                                 "for the achievable rate of each precision"}
            continue
        best = max(matmul, key=lambda r: r["rate"])
        peak = peaks.get(f"{precision}_flop_s")
        n = best["size"]
        achieved["matmul", precision] = {"rate": best["rate"], "at": f"{n} x {n} x {n}", "found_by": NO_SEARCH,
                                         "peak_rate": None if peak is None else peak / 1e9,
                                         "peak": peaks["source"], "note": ""}
    for name in COPY_BENCHMARKS:
        copies = [r for r in rows if r["benchmark"] == name]
        if not copies:
            continue
        best = max(copies, key=lambda r: r["rate"])
        if name == "copy" and entry["kind"] != "cpu" and peaks["memory_bytes_per_s"] is not None:
            peak, source = peaks["memory_bytes_per_s"] / 1e9, peaks["source"]
        elif name == "copy":
            peak, source = None, "no published memory bandwidth for this device"
        else:
            peak, source = None, "no datasheet figure for copies between host and device in gpukit's table"
        achieved["copy", name] = {"rate": best["rate"], "at": f"{best['size']:,} bytes", "found_by": NO_SEARCH,
                                  "peak_rate": peak, "peak": source, "note": ROW_NOTES.get(name, "")}
    return achieved


def _achieved_key(benchmark: str, dtype: str) -> tuple[str, str] | None:
    """Which achievable rate a row is a fraction of: its precision's product (for matmul and matmul-shapes rows), the
    device's own copy for elementwise work (both move bytes through memory), or the fastest size of the same copy;
    none for det+fft."""
    if benchmark in MATMUL_BENCHMARKS:
        return "matmul", dtype
    if benchmark == "elementwise":
        return "copy", "copy"
    if benchmark in COPY_BENCHMARKS:
        return "copy", benchmark
    return None


def results_table(records: dict[str, dict]):
    """One row per measurement of every file: the file, its machine and date, the device and its name, and
    the result's fields (``median_s`` and ``best_s`` in seconds).

    Beside ``fraction_of_peak`` (of the datasheet's peak, or a CPU's estimate), ``achievable_rate`` is the best
    the same device achieved at that kind of work (:func:`achievable_table`), ``fraction_of_achievable`` the row's
    rate over it, and ``achievable_from`` where that best came from. ``note`` says what a row's figure includes
    where a page must say so beside it (:data:`ROW_NOTES`), else it is empty."""
    import pandas as pd

    rows = []
    for file, record in records.items():
        achieved = {device: _achieved(record, device) for device in record["devices"]}
        for result in record["results"]:
            device = record["devices"][result["device"]]
            key = _achieved_key(result["benchmark"], result["dtype"])
            best = achieved[result["device"]].get(key) if key else None
            rate = best["rate"] if best else None
            rows.append({"file": file, "machine": record["machine"], "date": record["date"],
                         "mode": record["mode"], "device": result["device"], "device_name": device["name"],
                         "kind": device["kind"], "benchmark": result["benchmark"], "dtype": result["dtype"],
                         "size": result["size"], "batch": result["batch"], "median_s": result["median"],
                         "best_s": result["best"], "rate": result["rate"], "rate_unit": result["rate_unit"],
                         "fraction_of_peak": result["fraction_of_peak"], "achievable_rate": rate,
                         "fraction_of_achievable": result["rate"] / rate if rate else None,
                         "achievable_from": best["found_by"] if rate else None,
                         "note": ROW_NOTES.get(result["benchmark"], "")})
    columns = ["file", "machine", "date", "mode", "device", "device_name", "kind", "benchmark", "dtype", "size",
               "batch", "median_s", "best_s", "rate", "rate_unit", "fraction_of_peak", "achievable_rate",
               "fraction_of_achievable", "achievable_from", "note"]
    return pd.DataFrame(rows, columns=columns)


def achievable_table(records: dict[str, dict]):
    """The best each device of each file achieved, beside its peak: one row per matrix-product precision
    (:data:`gpukit.core.peaks.MATMUL_PRECISIONS`) and per copy benchmark the device ran.

    Columns: ``file``, ``device``, ``device_name``, ``kind``, ``work`` (``"matmul"`` or ``"copy"``), ``what`` (the
    precision or the copy benchmark), ``rate`` and ``rate_unit`` (GFLOP/s or GB/s; empty where not measured),
    ``at`` (the shape or size it was reached at), ``found_by`` (``"search"``, ``"size sweep"``, the file's sweep
    where it has no search, or ``"not measured"``), ``peak_rate`` (the datasheet's, or a CPU's estimate, in the same
    unit; empty where there is none), ``fraction_of_peak``, ``peak`` (where the peak comes from, or why none) and
    ``note`` (why not measured, or what a row includes)."""
    import pandas as pd

    rows = []
    for file, record in records.items():
        for device, entry in record["devices"].items():
            for (work, what), best in _achieved(record, device).items():
                rate, peak = best["rate"], best["peak_rate"]
                rows.append({"file": file, "device": device, "device_name": entry["name"], "kind": entry["kind"],
                             "work": work, "what": what, "rate": rate,
                             "rate_unit": "GFLOP/s" if work == "matmul" else "GB/s", "at": best["at"],
                             "found_by": best["found_by"], "peak_rate": peak,
                             "fraction_of_peak": rate / peak if rate and peak else None, "peak": best["peak"],
                             "note": best["note"]})
    columns = ["file", "device", "device_name", "kind", "work", "what", "rate", "rate_unit", "at", "found_by",
               "peak_rate", "fraction_of_peak", "peak", "note"]
    return pd.DataFrame(rows, columns=columns)


def reference_curves(benchmark: str, dtype: str, *, batch: int | None = None, folder: str | Path | None = None,
                     records: dict[str, dict] | None = None):
    """The measurements of ``benchmark`` in ``dtype`` (and, for det+fft, ``batch``) from every file, with a
    ``curve`` label naming the device and the file, ready for
    :func:`gpukit.measuring.plots.overlay_reference_curves`."""
    if benchmark not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {benchmark!r}; the files record {', '.join(BENCHMARKS)}")
    table = results_table(records if records is not None else read_benchmark_folder(folder))
    chosen = table[(table["benchmark"] == benchmark) & (table["dtype"] == dtype)]
    if batch is not None:
        chosen = chosen[chosen["batch"] == batch]
    chosen = chosen.copy()
    chosen["curve"] = [f"{name}, {file} ({date})" for name, file, date
                       in zip(chosen["device_name"], chosen["file"], chosen["date"], strict=True)]
    return chosen.sort_values(["file", "device", "size"]).reset_index(drop=True)


# ------------------------------------------------------------------------------------------ the headline
# The work the headline compares, GPU against its own machine's CPU: (benchmark, dtype, what it is called).
HEADLINE_WORK = (("matmul", "float32", "a float32 matrix product"),
                 ("elementwise", "float32", "an elementwise expression"))


def gpu_headline(records: dict[str, dict] | None = None) -> dict | None:
    """The newest GPU file's figures for a reader in a hurry: its GPU's name, its date and file, the CPU it was
    set against (the same machine's), and for each work of :data:`HEADLINE_WORK` the largest size both ran, the
    speed-up there (the CPU's median time over the GPU's), and the sizes at which the CPU was faster. None where
    no file holds a GPU. ``records``: :func:`read_benchmark_folder`'s answer (default: the book's files)."""
    records = read_benchmark_folder() if records is None else records
    with_gpu = [(record["date"], name) for name, record in records.items()
                if any(device["kind"] != "cpu" for device in record["devices"].values())]
    if not with_gpu:
        return None
    _, file = max(with_gpu)
    record = records[file]
    gpu = next(key for key, device in record["devices"].items() if device["kind"] != "cpu")
    cpu = next((key for key, device in record["devices"].items() if device["kind"] == "cpu"), None)
    headline = {"file": file, "date": record["date"], "gpu": record["devices"][gpu]["name"],
                "cpu": record["devices"][cpu]["name"] if cpu else None, "work": []}
    for benchmark, dtype, words in HEADLINE_WORK:
        times = {}
        for result in record["results"]:
            if (result["benchmark"], result["dtype"], result["batch"]) == (benchmark, dtype, None):
                times.setdefault(result["size"], {})[result["device"]] = result["median"]
        both = sorted(size for size, by in times.items() if gpu in by and cpu in by)
        if not both:
            continue
        largest = both[-1]
        headline["work"].append({"benchmark": benchmark, "what": words, "size": largest,
                                 "speedup": times[largest][cpu] / times[largest][gpu],
                                 "cpu_faster_at": [size for size in both if times[size][cpu] < times[size][gpu]]})
    return headline


def _device_words(name: str) -> str:
    """"cuda:0 (NVIDIA H100 80GB HBM3, 79.18 GiB)" -> "NVIDIA H100 80GB HBM3"; "cpu (AMD EPYC, 16 logical
    cores)" -> "AMD EPYC, 16 logical cores"."""
    inside = re.search(r"\((.*)\)\s*$", name)
    if not inside:
        return name
    words = inside[1]
    return words.split(",")[0] if not name.startswith("cpu") else words


def _size_words(benchmark: str, size: int) -> str:
    return f"over {size:,} values" if benchmark == "elementwise" else f"of {size} x {size}"


def headline_sentence(headline: dict | None) -> str:
    """:func:`gpu_headline` in two sentences, every number from the file."""
    if headline is None:
        return "No GPU has been measured for this book yet: `python -m booktools bench` on a GPU node adds one."
    gpu, cpu = _device_words(headline["gpu"]), _device_words(headline["cpu"] or "its CPU")
    if not headline["work"]:
        return f"On an {gpu} ({headline['date']}) nothing was measured on both the GPU and its CPU."
    parts = [f"{work['what']} {_size_words(work['benchmark'], work['size'])} ran {work['speedup']:.0f} times as "
             f"fast" for work in headline["work"]]
    sentence = (f"Measured on an {gpu} on {headline['date']}, against the same machine's CPU ({cpu}): "
                + ", and ".join(parts) + ".")
    wins = [f"{work['what']} {_size_words(work['benchmark'], size)}" for work in headline["work"]
            for size in work["cpu_faster_at"]]
    if wins:
        sentence += f" The CPU was faster for the smallest work: {', '.join(wins)}."
    return sentence
