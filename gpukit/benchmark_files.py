"""The files that record benchmark results, one per machine and date, in ``data/benchmarks/``.

``python -m gpukit bench`` (:mod:`gpukit.bench`) measures a machine and writes one such file; the appendix
"Benchmarks across hardware" and the plots of chapters 1 and 12 read every file in the folder. A file that
is malformed or partial stops the reading with a :class:`BenchmarkFileError` naming the file and the field:
no file is ever silently left out.

The schema (:data:`SCHEMA`, version 1). Times are in seconds; every rate carries its unit::

    {
      "schema": "gpukit.benchmarks/1",
      "machine": "free text: which computer, which GPU",
      "date": "2026-05-01",                          # ISO date of the run
      "command": "python -m gpukit bench",           # the command line that made the file
      "mode": "full",                                # "full" or "quick" (small sizes, few repeats)
      "host": {"cpu_model": "AMD EPYC", "physical_cores": 1, "logical_cores": 2,
               "max_clock_mhz": 3500.0 or null, "clock_source": "where the clock was read",
               "platform": "Linux-6.8-x86_64", "python": "3.11.7"},
      "software": {"torch": "2.13.0", "numpy": "2.3.1", "cuda": "12.8" or null,
                   "driver": "570.86" or null, ...},  # further "name": "version" pairs allowed
      "devices": {"cpu": {"name": "cpu (AMD EPYC, 2 logical cores)", "kind": "cpu",
                          "clocks": {"sm_max_mhz": 1980.0, ...} or null,
                          "peaks": {"float32_flop_s": 1.1e11 or null, "float64_flop_s": ... or null,
                                    "memory_bytes_per_s": ... or null, "source": "where they come from"}}},
      "results": [{"benchmark": "matmul", "device": "cpu", "dtype": "float32", "size": 1024,
                   "batch": null, "median": 0.012, "best": 0.011, "time_unit": "s", "repeats": 5,
                   "rate": 178.9, "rate_unit": "GFLOP/s", "fraction_of_peak": 0.41 or null}, ...],
      "notes": ["what was skipped and why", ...]
    }

``benchmark`` is one of :data:`BENCHMARKS`, each with its rate unit and the meaning of ``size``; ``batch``
is the number of matrices for ``det+fft`` and ``null`` otherwise. ``fraction_of_peak`` is the rate over the
device's peak for that kind of work (FLOP/s for ``matmul``, bytes/s for ``elementwise``), ``null`` where no
peak is known. The FLOP/s peaks (``float32_flop_s``, ``float64_flop_s``) are those of matrix products: on a
GPU with FP64 tensor cores (the peaks table's A100, H100, H200, GH200) ``float64_flop_s`` is the FP64
tensor-core figure, twice the vector FP64 one, and ``source`` says which figure each is. Every result's device
must be listed in ``devices``.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from pathlib import Path

from .machine_files import file_name, json_files, read_checked

__all__ = [
    "BENCHMARKS",
    "SCHEMA",
    "BenchmarkFileError",
    "benchmark_folder",
    "read_benchmark_file",
    "read_benchmark_folder",
    "reference_curves",
    "results_table",
    "speedups",
    "validate_record",
    "write_benchmark_file",
]

SCHEMA = "gpukit.benchmarks/1"

# benchmark -> (rate unit, what ``size`` counts)
BENCHMARKS = {
    "matmul": ("GFLOP/s", "n, for an n x n matrix product"),
    "elementwise": ("GB/s", "vector length, for exp(x) + 3 sin(x)"),
    "copy": ("GB/s", "bytes copied within the device's memory"),
    # The transfers name the kind of host memory they used: pinned (page-locked) memory moves at the bus's rate,
    # pageable memory is staged through a pinned buffer by the driver. Every buffer is allocated before the timing
    # (gpukit.bench).
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
}
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


class BenchmarkFileError(ValueError):
    """A benchmark file that cannot be used: the message names the file and the field."""


def benchmark_folder() -> Path:
    """``<repo>/data/benchmarks``, where each machine's results are kept."""
    from .paths import project_root

    return project_root() / "data" / "benchmarks"


# ------------------------------------------------------------------------------------------ validation
def _fail(where: str, field: str, problem: str):
    raise BenchmarkFileError(f"{where}: field {field!r} {problem}")


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check_value(where: str, field: str, value, kind: str) -> None:
    optional = kind.endswith("?")
    kind = kind.rstrip("?")
    if value is None:
        if not optional:
            _fail(where, field, "must not be null")
        return
    if kind == "text":
        if not isinstance(value, str) or not value.strip():
            _fail(where, field, f"must be a non-empty string, not {value!r}")
    elif kind == "count":
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            _fail(where, field, f"must be a whole number >= 1, not {value!r}")
    elif kind == "positive":
        if not (_is_number(value) and value > 0):
            _fail(where, field, f"must be a positive number, not {value!r}")
    elif kind == "fraction":
        if not (_is_number(value) and value >= 0):
            _fail(where, field, f"must be a number >= 0 (or null where no peak is known), not {value!r}")


def _check_object(where: str, field: str, value, spec: dict, extra_allowed: bool = False) -> None:
    if not isinstance(value, dict):
        _fail(where, field, f"must be a JSON object, not {type(value).__name__}")
    for key, kind in spec.items():
        if key not in value:
            _fail(where, f"{field}.{key}", "is missing (a partial file)")
        _check_value(where, f"{field}.{key}", value[key], kind)
    if not extra_allowed:
        extra = sorted(set(value) - set(spec))
        if extra:
            _fail(where, f"{field}.{extra[0]}", f"is not part of the schema {SCHEMA}")


def validate_record(record, where: str = "the record") -> dict:
    """Check a record against the schema and return it; :class:`BenchmarkFileError` names the bad field."""
    if not isinstance(record, dict):
        raise BenchmarkFileError(f"{where}: expected a JSON object at the top level, got {type(record).__name__}")
    for field in _TOP:
        if field not in record:
            _fail(where, field, "is missing (a partial file)")
    extra = sorted(set(record) - set(_TOP) - set(_OPTIONAL_TOP))
    if extra:
        _fail(where, extra[0], f"is not part of the schema {SCHEMA}")
    if record["schema"] != SCHEMA:
        _fail(where, "schema", f"is {record['schema']!r}; this gpukit reads {SCHEMA!r}")
    for field in ("machine", "command"):
        _check_value(where, field, record[field], "text")
    try:
        _dt.date.fromisoformat(record["date"])
    except (TypeError, ValueError):
        _fail(where, "date", f"must be an ISO date such as 2026-05-01, not {record['date']!r}")
    if record["mode"] not in ("full", "quick"):
        _fail(where, "mode", f"must be 'full' or 'quick', not {record['mode']!r}")
    _check_object(where, "host", record["host"], _HOST)
    software = record["software"]
    _check_object(where, "software", software, {"torch": "text", "numpy": "text", "cuda": "text?",
                                                 "driver": "text?"}, extra_allowed=True)
    for name, version in software.items():
        _check_value(where, f"software.{name}", version, "text?")
    devices = record["devices"]
    if not isinstance(devices, dict) or not devices:
        _fail(where, "devices", "must map at least one device (cpu, cuda:0, mps) to its description")
    for device, entry in devices.items():
        field = f"devices.{device}"
        if not isinstance(entry, dict):
            _fail(where, field, "must be a JSON object with name, kind, clocks and peaks")
        _check_object(where, field, entry, {"name": "text", "kind": "text"}, extra_allowed=True)
        if entry["kind"] not in _KINDS or not str(device).startswith(entry["kind"]):
            _fail(where, f"{field}.kind", f"must be the kind of {device!r} (one of {', '.join(_KINDS)}), "
                                          f"not {entry['kind']!r}")
        for key in ("clocks", "peaks"):
            if key not in entry:
                _fail(where, f"{field}.{key}", "is missing (a partial file)")
        extra = sorted(set(entry) - {"name", "kind", "clocks", "peaks"})
        if extra:
            _fail(where, f"{field}.{extra[0]}", f"is not part of the schema {SCHEMA}")
        clocks = entry["clocks"]
        if clocks is not None:
            if not isinstance(clocks, dict):
                _fail(where, f"{field}.clocks", "must be a JSON object of name -> MHz, or null")
            for name, mhz in clocks.items():
                _check_value(where, f"{field}.clocks.{name}", mhz, "positive?")
        _check_object(where, f"{field}.peaks", entry["peaks"], _PEAKS)
    results = record["results"]
    if not isinstance(results, list) or not results:
        _fail(where, "results", "must be a non-empty list of measurements")
    seen = set()
    for i, result in enumerate(results):
        field = f"results[{i}]"
        _check_object(where, field, result, _RESULT)
        if result["benchmark"] not in BENCHMARKS:
            _fail(where, f"{field}.benchmark", f"is {result['benchmark']!r}, not one of {', '.join(BENCHMARKS)}")
        if result["device"] not in devices:
            _fail(where, f"{field}.device", f"is {result['device']!r}, which 'devices' does not list")
        unit = BENCHMARKS[result["benchmark"]][0]
        if result["rate_unit"] != unit:
            _fail(where, f"{field}.rate_unit", f"is {result['rate_unit']!r}; {result['benchmark']} is in {unit}")
        if result["time_unit"] != "s":
            _fail(where, f"{field}.time_unit", f"is {result['time_unit']!r}; times are recorded in 's'")
        if result["best"] > result["median"] * (1 + 1e-9):
            _fail(where, f"{field}.best", "is larger than the median, which cannot be")
        if (result["batch"] is None) != (result["benchmark"] != "det+fft"):
            _fail(where, f"{field}.batch", "must be the number of matrices for det+fft, and null otherwise")
        key = (result["benchmark"], result["device"], result["dtype"], result["size"], result["batch"])
        if key in seen:
            _fail(where, field, f"repeats the measurement {key} listed before it")
        seen.add(key)
    notes = record.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        _fail(where, "notes", "must be a list of strings")
    return record


# ------------------------------------------------------------------------------------------ files
def default_file_name(record: dict) -> str:
    """``<system>-<arch>-<device kinds>[-<first GPU>]-<date>``, e.g. ``linux-x86_64-cuda-h100-2026-05-01``."""
    import platform

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


def read_benchmark_file(path: str | Path) -> dict:
    """Read and check one machine's file; a malformed or partial file raises :class:`BenchmarkFileError`."""
    return read_checked(path, validate_record, BenchmarkFileError)


def read_benchmark_folder(folder: str | Path | None = None) -> dict[str, dict]:
    """Every file in ``folder`` (default ``data/benchmarks/``), by file name, in name order.

    A missing or empty folder, or any file that fails the schema, is an error naming it: a file is never
    silently left out.
    """
    folder = Path(folder) if folder is not None else benchmark_folder()
    return {path.name: read_benchmark_file(path) for path in json_files(folder, "python -m gpukit bench")}


# ------------------------------------------------------------------------------------------ tables
def results_table(records: dict[str, dict]):
    """One row per measurement of every file: the file, its machine and date, the device and its name, and
    the result's fields (``median_s`` and ``best_s`` in seconds)."""
    import pandas as pd

    rows = []
    for file, record in records.items():
        for result in record["results"]:
            device = record["devices"][result["device"]]
            rows.append({"file": file, "machine": record["machine"], "date": record["date"],
                         "mode": record["mode"], "device": result["device"], "device_name": device["name"],
                         "kind": device["kind"], "benchmark": result["benchmark"], "dtype": result["dtype"],
                         "size": result["size"], "batch": result["batch"], "median_s": result["median"],
                         "best_s": result["best"], "rate": result["rate"], "rate_unit": result["rate_unit"],
                         "fraction_of_peak": result["fraction_of_peak"]})
    columns = ["file", "machine", "date", "mode", "device", "device_name", "kind", "benchmark", "dtype", "size",
               "batch", "median_s", "best_s", "rate", "rate_unit", "fraction_of_peak"]
    return pd.DataFrame(rows, columns=columns)


def speedups(table):
    """Each GPU measurement's speed-up over the same file's CPU (all its cores) at the same benchmark, dtype,
    size and batch: the CPU's median time over the device's. Rows without a CPU twin are left out."""
    keys = ["file", "benchmark", "dtype", "size", "batch"]
    cpu = table[table["kind"] == "cpu"][keys + ["median_s"]].rename(columns={"median_s": "cpu_median_s"})
    gpu = table[table["kind"] != "cpu"]
    # batch is None for most benchmarks: compare it as text so that None matches None.
    merged = gpu.assign(_b=gpu["batch"].astype(str)).merge(
        cpu.assign(_b=cpu["batch"].astype(str)).drop(columns="batch"),
        on=["file", "benchmark", "dtype", "size", "_b"]).drop(columns="_b")
    merged["speedup"] = merged["cpu_median_s"] / merged["median_s"]
    return merged.reset_index(drop=True)


def reference_curves(benchmark: str, dtype: str, *, batch: int | None = None, folder: str | Path | None = None,
                     records: dict[str, dict] | None = None):
    """The measurements of ``benchmark`` in ``dtype`` (and, for det+fft, ``batch``) from every file, with a
    ``curve`` label naming the device and the file, ready for :func:`gpukit.plots.overlay_reference_curves`."""
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
