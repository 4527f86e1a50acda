"""Lesson 16, performance engineering on one GPU: a device's roofline from the benchmark files, its plot, and
Nsight Compute's CSV read into the three numbers the lesson looks at.

:func:`device_roofline` takes a device's ceilings (the FLOP/s of a float32 matrix product and the memory bandwidth)
from the ``peaks`` a file of ``data/benchmarks/`` records for it (:mod:`gpukit.measuring.benchmark_records`), and the
points that file measured: each matrix product as ``2 n^3`` FLOPs over ``3 * 4 n^2`` bytes, each elementwise
``exp(x) + 3 sin(x)`` as :data:`ELEMENTWISE_FLOPS` FLOPs over 8 bytes per value. Beside those (a GPU's datasheet, a
CPU's estimate), where the file holds the bench's search for the achievable rates, the achievable ceilings
(:func:`gpukit.measuring.roofline.achievable_ceilings`); where it does not, :attr:`Roofline.achievable` says so.
:func:`plot_roofline` draws both roofs (the achievable one dashed, where known) and any points on log axes.

:func:`ncu_metrics` reads the CSV that ``ncu --csv --page details`` prints (one row per metric and kernel launch;
the columns ``"ID"``, ``"Kernel Name"``, ``"Section Name"``, ``"Metric Name"``, ``"Metric Unit"`` and
``"Metric Value"`` among others, as Nsight Compute's CLI documents its ``--csv`` output; ``==PROF==`` lines before
the header are skipped) and :func:`ncu_summary` picks from one launch the achieved DRAM bandwidth
(``dram__bytes.sum.per_second``), the achieved occupancy (the Occupancy section's "Achieved Occupancy") and the
largest stall reason (the ``smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio`` metrics, cycles per
issued instruction). The lesson's ``NCU_ARGS`` (with ``-k copy_rows -c 1``: one launch of one kernel) is the
command line that asks for all of them.
"""

from __future__ import annotations

import csv
import io
import math
import re

from gpukit.measuring.benchmark_records import read_benchmark_folder, results_table
from gpukit.measuring.plots import PlainLogFormatter, style_axes
from gpukit.measuring.roofline import Achievable, achievable_ceilings, gpu_limits

__all__ = ["ELEMENTWISE_FLOPS", "LOAD_REQUESTS", "LOAD_SECTORS", "NCU_COLUMNS", "Roofline", "device_roofline",
           "ncu_metrics", "ncu_summary", "plot_roofline"]

# exp(x) + 3 sin(x), counted as the bench's elementwise work: exp, sin, a product and a sum, each one FLOP (a
# transcendental costs the hardware many instructions; the roofline counts the operations the program asks for).
ELEMENTWISE_FLOPS = 4
# The columns every version of ``ncu --csv --page details`` prints, whatever others it adds (Kernel Time, Block
# Size, Grid Size, Device, CC; the rule columns of newer versions).
NCU_COLUMNS = ("ID", "Kernel Name", "Section Name", "Metric Name", "Metric Unit", "Metric Value")
# ncu's counters of global loads: warp-wide requests, and the 32-byte sectors they touched.
LOAD_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
LOAD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
# Factors to base units for the prefixed units ncu prints where it is not run with --print-units base
# ("Gbyte/second", "usecond", "Mhz"); with it, "byte/second" and "nsecond" (the native unit of durations).
_SCALE = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3, "u": 1e-6, "n": 1e-9}
_PREFIXED = re.compile(r"^([kKMGTmun]?)(byte|second|hz|cycle)")


class Roofline:
    """A device's two ceilings (FLOP/s of a float32 product, bytes/s of memory), where they come from, the points
    its file measured, ``(label, intensity in FLOP/B, FLOP/s)``, and its file's ``matmul-shapes`` rows,
    ``(dtype, n, GFLOP/s)`` (the bench's sweep of sizes around multiples of 8, 64 and 128), and the date of its
    file ("" for a datasheet's). ``ceiling`` names the kind of the two ceilings (``"datasheet"`` for a GPU,
    ``"estimate"`` for a CPU's estimated peak and fastest copy); ``achievable`` (an
    :class:`~gpukit.measuring.roofline.Achievable`) holds the best the device achieved where its file has it, else
    says why not."""

    def __init__(self, name: str, flops_per_s: float, bytes_per_s: float, source: str, points=(), shapes=(),
                 date: str = "", *, ceiling: str = "datasheet", achievable: Achievable | None = None):
        for what, value in (("flops_per_s", flops_per_s), ("bytes_per_s", bytes_per_s)):
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"{what} must be a positive rate, not {value!r}")
        self.name, self.source = name, source
        self.flops_per_s, self.bytes_per_s = float(flops_per_s), float(bytes_per_s)
        self.points, self.shapes, self.date = list(points), list(shapes), date
        self.ceiling = ceiling
        self.achievable = achievable or Achievable(name, "float32", note="no benchmark file: the datasheet only")

    def matmul_peak(self, dtype: str) -> float | None:
        """The datasheet's FLOP/s of a matrix product in ``dtype`` on this GPU (gpukit's table of published peaks,
        tensor-core figures for ``"bfloat16"``, ``"float16"``, ``"tf32"``); None where the table has none (a CPU,
        a GPU it does not know, a precision it lacks)."""
        return gpu_limits(self.name, dtype, operation="matmul").flops_per_s

    def least_seconds(self, flops: float, bytes_moved: float) -> dict[str, float]:
        """The roofline's least time of the work, ``max(flops / peak, bytes / bandwidth)``, against each ceiling
        known: ``{self.ceiling: seconds}``, and ``"achievable"`` where the file has the achievable rates."""
        times = {self.ceiling: max(flops / self.flops_per_s, bytes_moved / self.bytes_per_s)}
        if self.achievable.known:
            times["achievable"] = max(flops / self.achievable.flops_per_s, bytes_moved / self.achievable.bytes_per_s)
        return times

    @property
    def ridge(self) -> float:
        """The intensity (FLOP/B) above which work is compute-bound on this device."""
        return self.flops_per_s / self.bytes_per_s

    def attainable(self, intensity: float) -> float:
        """The most FLOP/s work of ``intensity`` FLOP/B can reach: ``min(peak, intensity x bandwidth)``."""
        return min(self.flops_per_s, intensity * self.bytes_per_s)

    def plot(self, points: dict[str, list[tuple[str, float, float]]], *, title: str = ""):
        """:func:`plot_roofline` of this roofline with ``points``."""
        return plot_roofline(self, points, title=title)

    def __str__(self) -> str:
        return (f"{self.name}: {self.flops_per_s / 1e12:.3g} TFLOP/s (float32 products), "
                f"{self.bytes_per_s / 1e9:.4g} GB/s, ridge at {self.ridge:.3g} FLOP/B ({self.ceiling}); "
                f"from {self.source}\n  {self.achievable}")


def _chosen_file(records: dict, kind: str, gpu: str | None):
    """The newest (file, record, device, entry) with a device of ``kind`` (for "cuda", whose name holds ``gpu``)."""
    chosen = None
    for file, record in records.items():
        for device, entry in record["devices"].items():
            if entry["kind"] != kind or (kind == "cuda" and gpu.lower() not in entry["name"].lower()):
                continue
            if kind == "cpu" and any(e["kind"] == "cuda" for e in record["devices"].values()):
                continue  # a GPU node's host CPU is not the CPU this book is built on
            if chosen is None or record["date"] >= chosen[1]["date"]:
                chosen = (file, record, device, entry)
    return chosen


def device_roofline(device: str, records: dict | None = None, *, gpu: str | None = None) -> Roofline | None:
    """The roofline of ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...) from the benchmark files (``records``
    as :func:`read_benchmark_folder` returns them; ``data/benchmarks/`` when None), with the points its file
    measured and its ``matmul-shapes`` rows. For a GPU, the newest file whose GPU's name holds ``gpu`` (by default
    the name torch reports for ``device``); where no file has it, the datasheet's figures, without points. None
    where neither is known (Apple's GPUs, a GPU gpukit's table does not know). For the CPU, the newest file of a
    machine without a GPU: a GPU node's host CPU is not the CPU the book is built on."""
    records = read_benchmark_folder() if records is None else records
    kind = "cuda" if str(device).startswith("cuda") else str(device)
    if kind == "cuda" and gpu is None:
        import torch

        gpu = torch.cuda.get_device_name(device)
    chosen = _chosen_file(records, kind, gpu) if kind in ("cpu", "cuda") else None
    if chosen is None:
        if kind != "cuda":
            return None
        limits = gpu_limits(gpu, "float32", operation="matmul")
        if limits.flops_per_s is None or limits.bytes_per_s is None:
            return None
        return Roofline(limits.device, limits.flops_per_s, limits.bytes_per_s, "the datasheet (no file has it)",
                        achievable=Achievable(device, "float32", note="no benchmark file has this GPU: the "
                                                                      "datasheet's ceilings only"))
    file, record, device, entry = chosen
    peaks = entry["peaks"]
    if not peaks.get("float32_flop_s") or not peaks.get("memory_bytes_per_s"):
        return None
    shapes = [(r["dtype"], r["size"], r["rate"]) for r in record["results"]
              if r["benchmark"] == "matmul-shapes" and r["device"] == device]
    table = results_table({file: record})
    rows = table[(table["device"] == device) & (table["dtype"] == "float32")]
    points = []
    for row in rows.itertuples():
        if row.benchmark == "matmul":
            n = row.size
            points.append((f"matmul {n}", 2 * n**3 / (3 * 4 * n * n), 2 * n**3 / row.median_s))
        elif row.benchmark == "elementwise":
            flops = ELEMENTWISE_FLOPS * row.size
            points.append((f"elementwise {row.size:,}", ELEMENTWISE_FLOPS / 8, flops / row.median_s))
    name = entry["name"].split(" (")[1].split(",")[0] if " (" in entry["name"] else entry["name"]
    return Roofline(name, peaks["float32_flop_s"], peaks["memory_bytes_per_s"],
                    f"{file} (measured {record['date']})", points, sorted(shapes), record["date"],
                    ceiling="datasheet" if kind == "cuda" else "estimate",
                    achievable=achievable_ceilings(records, file, device))


def plot_roofline(roofline: Roofline, points: dict[str, list[tuple[str, float, float]]], *, title: str = ""):
    """The roofline (the bandwidth's slope, then the peak's flat line) on log axes, with each group of ``points``
    (``{"measured here": [(label, intensity, FLOP/s), ...], ...}``) in a marker of its own, labelled (of the points
    of a group at one intensity, the fastest only)."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(10, 5))
    every = [p for group in points.values() for p in group]
    low = min([roofline.ridge / 100, *(p[1] / 2 for p in every)])
    high = max([roofline.ridge * 100, *(p[1] * 2 for p in every)])
    x = np.logspace(math.log10(low), math.log10(high), 200)
    ax.plot(x, [roofline.attainable(i) for i in x], color="black", linewidth=2,
            label=f"{roofline.name}: ceilings" + (f" ({roofline.ceiling})" if roofline.achievable.known else ""))
    ax.axvline(roofline.ridge, color="grey", linestyle=":", linewidth=1)
    best = roofline.achievable
    if best.known:  # the best the bench achieved: a second, lower roof
        ax.plot(x, [min(best.flops_per_s, i * best.bytes_per_s) for i in x], color="black", linewidth=1.5,
                linestyle="--", label=f"{roofline.name}: achievable (the bench's search)")
    for marker, (group, drawn) in zip("osD^v", points.items(), strict=False):
        if not drawn:
            continue
        ax.plot([p[1] for p in drawn], [p[2] for p in drawn], marker, linestyle="none", markersize=7, label=group)
        fastest = {}  # one label per intensity: the bench's sizes of elementwise work share one
        for point in drawn:
            if point[1] not in fastest or point[2] > fastest[point[1]][2]:
                fastest[point[1]] = point
        for label, intensity, rate in fastest.values():
            ax.annotate(label, (intensity, rate), textcoords="offset points", xytext=(5, 4), fontsize="small")
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP per byte)", ylabel="FLOP/s",
           title=title or f"roofline of {roofline.name}")
    ax.xaxis.set_major_formatter(PlainLogFormatter())
    style_axes(ax)
    ax.legend(frameon=False, fontsize="small", loc="upper left")  # above the roof, where no work can be
    return fig


# ------------------------------------------------------------------------------------------ Nsight Compute
def _number(text: str, unit: str) -> float | None:
    """A metric's value in base units: ``"1,234.5"`` with unit ``"Gbyte/second"`` is 1.2345e12; None for text."""
    try:
        value = float(text.strip().replace(",", ""))
    except ValueError:
        return None
    prefixed = _PREFIXED.match(unit)
    return value * _SCALE[prefixed.group(1)] if prefixed else value


def ncu_metrics(text: str) -> dict[str, dict]:
    """Each kernel launch of ``ncu --csv --page details`` output: ``{ID: {"kernel": name, "metrics": {metric name:
    (value, unit)}}}``, values as numbers in base units where they are numbers (else the text). Lines before the
    CSV header (the ``==PROF==`` messages, the program's own output) are skipped; a header without the columns
    :data:`NCU_COLUMNS` is an error that names what is missing."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise ValueError("no CSV header (a line starting with \"ID\") in the output: was ncu run with --csv?")
    reader = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    missing = [c for c in NCU_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"ncu's CSV lacks the columns {missing}; it has {reader.fieldnames}")
    launches: dict[str, dict] = {}
    for row in reader:
        if not row["Metric Name"]:
            continue  # a rule's row (newer versions) carries a message, not a metric
        launch = launches.setdefault(row["ID"], {"kernel": row["Kernel Name"], "metrics": {}})
        unit = row["Metric Unit"] or ""
        value = _number(row["Metric Value"] or "", unit)
        launch["metrics"][row["Metric Name"]] = (row["Metric Value"] if value is None else value, unit)
    return launches


def ncu_summary(text: str) -> list[dict]:
    """The numbers the lesson reads, for each kernel launch in ``ncu --csv --page details`` output (see
    :func:`ncu_metrics`): ``kernel``; ``bandwidth`` (DRAM bytes/s, ``dram__bytes.sum.per_second``); ``occupancy``
    (achieved, as a fraction of the warps an SM can hold); ``stall`` (the reason warps waited longest, and its
    cycles per issued instruction), with every reason in ``stalls``; ``duration`` (seconds); ``load_requests`` and
    ``load_sectors`` (the warp-wide global load requests and the 32-byte sectors they touched,
    ``l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum`` and ``l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum``,
    where ncu was asked for them). None for a number the output lacks."""
    summaries = []
    for launch in ncu_metrics(text).values():
        metrics = launch["metrics"]

        def number(name, metrics=metrics):
            value = metrics.get(name, (None, ""))[0]
            return value if isinstance(value, float) else None

        occupancy = number("Achieved Occupancy")
        stalls = {m.group(1): value for name, (value, _) in metrics.items()
                  if (m := _STALL.match(name)) and isinstance(value, float)}
        summaries.append({"kernel": launch["kernel"], "bandwidth": number("dram__bytes.sum.per_second"),
                          "occupancy": None if occupancy is None else occupancy / 100,
                          "stall": max(stalls.items(), key=lambda item: item[1]) if stalls else None,
                          "stalls": stalls, "duration": number("Duration"),
                          "load_requests": number(LOAD_REQUESTS), "load_sectors": number(LOAD_SECTORS)})
    return summaries
