"""Timing the same work over a range of problem sizes, with a text progress bar, into a pandas DataFrame.

A *case* is one way of doing the work (CPU with all threads, CPU with one thread, NumPy, the GPU); its
``make(n)`` prepares the inputs for size ``n`` and returns the call to time. :func:`size_sweep` times every
case at every size with :func:`gpukit.core.timing.benchmark`; :func:`add_speedup` and :func:`crossover` say
where one case starts to beat another.

A sweep is checked before it is returned. A point whose median is far above the trend of its neighbours
(the work grows with ``n``, so a smaller problem that takes several times longer than the line through the
sizes either side of it was disturbed: another program, a clock change, a page fault), or whose repeats
spread widely, is measured again, a bounded number of times (:func:`suspect_points` says which and why).
The measurement kept is the one with a narrow spread and, among those, the lowest median, since
disturbances only add time. Whatever is still off after that is flagged in the table (``flagged``,
``flag``) rather than silently kept: :func:`noise_report` puts it in words for the page,
:func:`gpukit.measuring.plots.plot_sweep` draws it apart and leaves it out of the speed-up panel, and
:func:`crossover` does not use it.

:func:`sweep_and_plot` is the lot in one call, for a lesson: the sweep, its plot with the reference curves of the
files in ``data/benchmarks/``, and the noise report.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpukit.base.arguments import is_whole_number
from gpukit.core.timing import benchmark
from gpukit.measuring.benchmark_records import reference_curves
from gpukit.measuring.plots import overlay_reference_curves, plot_sweep
from gpukit.measuring.progress import progress_bar
from gpukit.measuring.threads import cpu_threads


@dataclass(frozen=True)
class Case:
    """One way of doing the work: ``make(n)`` returns a call with no arguments that does it at size ``n``.

    ``threads`` limits the CPU threads while this case is prepared and timed (``None``: leave as is).
    ``device`` is passed to the benchmark so that queued GPU work is waited for.
    """

    name: str
    make: Callable[[int], Callable[[], object]]
    threads: int | None = None
    device: str | None = None


def _check_sizes(sizes: Iterable) -> list[int]:
    sizes = list(sizes)
    if not sizes:
        raise ValueError("sizes is empty; give at least one problem size")
    for n in sizes:
        if not is_whole_number(n) or n < 1:
            raise ValueError(f"every size must be a whole number >= 1, got {n!r} in {sizes!r}")
    return [int(n) for n in sizes]


# A point is suspect when its median is more than OFF_TREND times what its neighbours' trend predicts,
# or when its interquartile range is more than WIDE_SPREAD of its median. Each suspect point is measured
# again at most REMEASURE times.
OFF_TREND = 3.0
WIDE_SPREAD = 0.5
REMEASURE = 2


def _trend_ratios(n: np.ndarray, t: np.ndarray, off_trend: float) -> np.ndarray:
    """For each point of one case (sorted by ``n``), its time over what its neighbours predict.

    Inside the range, the prediction is the straight line through the two neighbours on log-log axes,
    evaluated at the point's ``n``. At the smallest size, it is the time of the next size: a smaller problem
    should not take longer than a bigger one. At the largest size, it is the line through the two sizes
    before it, extended, but never below the time of the size before it. An end point is not judged (ratio
    1) while a neighbour it is judged by is itself more than ``off_trend`` off: that neighbour is measured
    again first. With one size there is no trend.
    """
    ratios = np.ones(len(t))
    if len(t) < 2:
        return ratios
    x, y = np.log(n.astype(float)), np.log(t.astype(float))
    for i in range(1, len(t) - 1):
        w = (x[i] - x[i - 1]) / (x[i + 1] - x[i - 1])
        ratios[i] = float(np.exp(y[i] - (y[i - 1] + w * (y[i + 1] - y[i - 1]))))
    inner_suspect = ratios > off_trend
    if not (len(t) > 2 and inner_suspect[1]):
        ratios[0] = float(np.exp(y[0] - y[1]))
    last = len(t) - 1
    if last >= 2 and not inner_suspect[last - 1] and not inner_suspect[last - 2]:
        slope = (y[last - 1] - y[last - 2]) / (x[last - 1] - x[last - 2])
        predicted = max(y[last - 1] + slope * (x[last] - x[last - 1]), y[last - 1])
        ratios[last] = float(np.exp(y[last] - predicted))
    return ratios


def _relative_spread(row) -> float:
    return float(row["iqr_s"] / row["median_s"]) if "iqr_s" in row else 0.0


def suspect_points(results: pd.DataFrame, *, off_trend: float = OFF_TREND,
                   wide_spread: float = WIDE_SPREAD) -> pd.DataFrame:
    """The rows of a sweep table that should be measured again, with ``why`` (a reason in words).

    A row is suspect when its median is more than ``off_trend`` times what the neighbouring sizes of the
    same case predict (see :func:`_trend_ratios`), or when its interquartile range (``iqr_s``) is more than
    ``wide_spread`` of its median. Points *faster* than the trend are not suspect: noise only adds time.
    """
    rows = []
    for _, group in results.groupby("case", sort=False):
        group = group.sort_values("n")
        ratios = _trend_ratios(group["n"].to_numpy(), group["median_s"].to_numpy(), off_trend)
        for (index, row), ratio in zip(group.iterrows(), ratios, strict=True):
            reasons = []
            if ratio > off_trend:
                reasons.append(f"{ratio:.1f}x slower than its neighbours' trend")
            spread = _relative_spread(row)
            if spread > wide_spread:
                reasons.append(f"repeats spread over {spread:.0%} of the median")
            if reasons:
                rows.append({"index": index, "case": row["case"], "n": int(row["n"]), "why": "; ".join(reasons)})
    return pd.DataFrame(rows, columns=["index", "case", "n", "why"]).set_index("index")


def _measure(case: Case, n: int, repeats: int, warmup: int):
    with cpu_threads(case.threads) if case.threads else nullcontext():
        call = case.make(n)
        return benchmark(call, repeats=repeats, warmup=warmup, device=case.device, label=case.name)


def _preference(row) -> tuple[bool, float]:
    """Which of two measurements of one point to keep: the smaller wins. A narrow spread before a wide one,
    then the lower median (disturbances only add time)."""
    return _relative_spread(row) > WIDE_SPREAD, float(row["median_s"])


def _row(case: Case, n: int, timing, flops, bytes_moved) -> dict:
    row = {"case": case.name, "n": n, "median_s": timing.median, "best_s": timing.best, "iqr_s": timing.spread}
    if flops is not None:
        row["gflop_s"] = flops(n) / timing.median / 1e9
    if bytes_moved is not None:
        row["gb_s"] = bytes_moved(n) / timing.median / 1e9
    return row


def size_sweep(
    sizes: Iterable[int],
    cases: Sequence[Case],
    *,
    flops: Callable[[int], float] | None = None,
    bytes_moved: Callable[[int], float] | None = None,
    repeats: int = 5,
    warmup: int = 1,
    remeasure: int = REMEASURE,
    progress: bool = True,
    desc: str = "sweep",
    file=None,
) -> pd.DataFrame:
    """Time every case at every size; one row per (case, size).

    Columns: ``case``, ``n``, ``median_s``, ``best_s``, ``iqr_s`` and, when ``flops``/``bytes_moved`` (the
    work of one call as a function of ``n``) are given, ``gflop_s``/``gb_s`` from the median time; then
    ``remeasured`` (how many times the point was measured again), ``flagged`` and ``flag`` (why it is still
    suspect after that, or ``""``). Suspect points (:func:`suspect_points`) are measured again up to
    ``remeasure`` times each (0: never), keeping a measurement with a narrow spread before one with a wide
    spread and, among those, the one with the lowest median.
    """
    sizes = _check_sizes(sizes)
    cases = list(cases)
    if not cases or not all(isinstance(c, Case) for c in cases):
        raise ValueError(f"cases must be a non-empty list of Case, not {cases!r}")
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        raise ValueError(f"case names must differ: {names}")
    if not is_whole_number(remeasure) or remeasure < 0:
        raise ValueError(f"remeasure must be a whole number >= 0, not {remeasure!r}")

    rows = []
    bar = progress_bar(len(sizes) * len(cases), desc, file, enabled=progress)
    try:
        for n in sizes:
            for case in cases:
                rows.append(_row(case, n, _measure(case, n, repeats, warmup), flops, bytes_moved))
                bar.update(1)
        table = pd.DataFrame(rows)
        table["remeasured"] = 0
        by_name = {case.name: case for case in cases}
        for _ in range(remeasure):
            suspects = suspect_points(table)
            if suspects.empty:
                break
            if hasattr(bar, "total"):
                bar.total += len(suspects)  # the bar stays one line; it grows by the points measured again
                bar.refresh()
            for index, suspect in suspects.iterrows():
                case = by_name[suspect["case"]]
                again = _row(case, int(suspect["n"]), _measure(case, int(suspect["n"]), repeats, warmup), flops,
                             bytes_moved)
                if _preference(again) < _preference(table.loc[index]):
                    for column, value in again.items():
                        table.at[index, column] = value
                table.at[index, "remeasured"] += 1
                bar.update(1)
    finally:
        bar.close()
    suspects = suspect_points(table)
    table["flagged"] = table.index.isin(suspects.index)
    table["flag"] = [suspects.at[i, "why"] if i in suspects.index else "" for i in table.index]
    return table


def noise_report(results: pd.DataFrame) -> list[str]:
    """Sentences for the page: each point still flagged after re-measuring, or that none was.

    One line per flagged point, ``"n = 128 (CPU, all threads) stayed noisy: 4.2x slower than its neighbours'
    trend, after 2 re-measurements"``; or one line saying how many points were measured again and that
    none stayed noisy. Tables without the ``flagged`` column (not from :func:`size_sweep`) give none.
    """
    if "flagged" not in results:
        return []
    lines = []
    for _, row in results[results["flagged"]].sort_values(["n", "case"]).iterrows():
        times = int(row.get("remeasured", 0))
        after = f", after {times} re-measurement{'s' if times != 1 else ''}" if times else ""
        lines.append(f"n = {row['n']} ({row['case']}) stayed noisy: {row['flag']}{after}")
    if not lines:
        again = int((results.get("remeasured", pd.Series(dtype=int)) > 0).sum())
        lines.append(f"No point stayed noisy ({again} point{'s were' if again != 1 else ' was'} measured again).")
    return lines


def add_speedup(results: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """A copy of ``results`` with ``speedup``: the baseline's median time over each case's, at the same ``n``."""
    known = list(dict.fromkeys(results["case"]))
    if baseline not in known:
        raise ValueError(f"baseline {baseline!r} is not one of the cases {known}")
    base = results[results["case"] == baseline].set_index("n")["median_s"]
    out = results.copy()
    out["speedup"] = out["n"].map(base) / out["median_s"]
    return out


def unreliable_sizes(results: pd.DataFrame, *cases: str) -> set[int]:
    """The sizes ``n`` at which any of ``cases`` is flagged as noisy (none for a table without flags)."""
    if "flagged" not in results:
        return set()
    chosen = results[results["case"].isin(cases) & results["flagged"]]
    return {int(n) for n in chosen["n"]}


def crossover(results: pd.DataFrame, case: str, baseline: str) -> int | None:
    """The smallest size from which ``case`` beats ``baseline`` at every larger size measured, or ``None``.

    Sizes at which either case stayed noisy after re-measuring (``flagged``) are left out: a disturbed
    timing says nothing about which option is faster.
    """
    table = add_speedup(results, baseline)
    if case not in set(table["case"]):
        raise ValueError(f"case {case!r} is not one of the cases {list(dict.fromkeys(table['case']))}")
    noisy = unreliable_sizes(table, case, baseline)
    mine = table[(table["case"] == case) & ~table["n"].isin(noisy)]
    speedups = mine.sort_values("n")[["n", "speedup"]].to_numpy()
    winner = None
    for n, speedup in reversed(speedups):
        if speedup <= 1:
            break
        winner = int(n)
    return winner


def sweep_and_plot(
    sizes: Iterable[int],
    cases: Mapping[str, Callable[[int], Callable[[], object]]],
    *,
    baseline: str,
    threads: Mapping[str, int] | None = None,
    flops: Callable[[int], float] | None = None,
    bytes_moved: Callable[[int], float] | None = None,
    reference: tuple[str, str] | None = None,
    xlabel: str = "problem size n",
    title: str | None = None,
    desc: str = "sweep",
    repeats: int = 5,
    file=None,
) -> pd.DataFrame:
    """The long machinery of a size sweep in one call: time, plot, compare with files, report noise.

    ``cases`` maps a name to ``make(n)``, which prepares size ``n`` and returns the call to time (as for
    :class:`Case`); ``threads`` maps some of those names to a CPU thread count to hold while they are timed.
    Runs :func:`size_sweep`, adds the speed-up over ``baseline`` (:func:`add_speedup`, once), draws the table with
    :func:`gpukit.measuring.plots.plot_sweep` and,
    given ``reference=(benchmark, dtype)``, the curves of the files in ``data/benchmarks/``
    (:func:`gpukit.measuring.plots.overlay_reference_curves`), and prints :func:`noise_report` to ``file`` (stdout when
    omitted). Returns the sweep's table with its ``speedup`` column (:func:`add_speedup`).
    """
    if not isinstance(cases, Mapping) or not cases:
        raise ValueError(f"cases must be a non-empty dict of name -> make(n), not {cases!r}")
    if baseline not in cases:
        raise ValueError(f"baseline {baseline!r} is not one of the cases {list(cases)}")
    threads = dict(threads or {})
    unknown = sorted(set(threads) - set(cases))
    if unknown:
        raise ValueError(f"threads names cases that do not exist: {unknown}; the cases are {list(cases)}")
    sweep = size_sweep(sizes, [Case(name, make, threads=threads.get(name)) for name, make in cases.items()],
                       flops=flops, bytes_moved=bytes_moved, repeats=repeats, desc=desc, file=file)
    table = add_speedup(sweep, baseline)
    fig = plot_sweep(table, baseline=baseline, xlabel=xlabel, title=title)
    if reference is not None:
        benchmark_name, dtype = reference
        overlay_reference_curves(fig, reference_curves(benchmark_name, dtype))
    print("\n".join(noise_report(table)), file=file or sys.stdout)
    return table
