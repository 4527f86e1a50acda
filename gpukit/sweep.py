"""Timing the same work over a range of problem sizes, with a text progress bar, into a pandas DataFrame.

A *case* is one way of doing the work (CPU with all threads, CPU with one thread, NumPy, the GPU); its
``make(n)`` prepares the inputs for size ``n`` and returns the call to time. :func:`size_sweep` times every
case at every size with :func:`gpukit.timing.benchmark`; :func:`add_speedup` and :func:`crossover` say
where one case starts to beat another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import pandas as pd

from .arguments import is_whole_number
from .progress import progress_bar
from .threads import cpu_threads
from .timing import benchmark


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


def size_sweep(
    sizes: Iterable[int],
    cases: Sequence[Case],
    *,
    flops: Callable[[int], float] | None = None,
    bytes_moved: Callable[[int], float] | None = None,
    repeats: int = 5,
    warmup: int = 1,
    progress: bool = True,
    desc: str = "sweep",
    file=None,
) -> pd.DataFrame:
    """Time every case at every size; one row per (case, size).

    Columns: ``case``, ``n``, ``median_s``, ``best_s``, ``iqr_s`` and, when ``flops``/``bytes_moved`` (the
    work of one call as a function of ``n``) are given, ``gflop_s``/``gb_s`` from the median time.
    """
    sizes = _check_sizes(sizes)
    cases = list(cases)
    if not cases or not all(isinstance(c, Case) for c in cases):
        raise ValueError(f"cases must be a non-empty list of Case, not {cases!r}")
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        raise ValueError(f"case names must differ: {names}")

    rows = []
    bar = progress_bar(len(sizes) * len(cases), desc, file) if progress else None
    try:
        for n in sizes:
            for case in cases:
                with cpu_threads(case.threads) if case.threads else nullcontext():
                    call = case.make(n)
                    timing = benchmark(call, repeats=repeats, warmup=warmup, device=case.device, label=case.name)
                row = {"case": case.name, "n": n, "median_s": timing.median, "best_s": timing.best,
                       "iqr_s": timing.spread}
                if flops is not None:
                    row["gflop_s"] = flops(n) / timing.median / 1e9
                if bytes_moved is not None:
                    row["gb_s"] = bytes_moved(n) / timing.median / 1e9
                rows.append(row)
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return pd.DataFrame(rows)


def add_speedup(results: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """A copy of ``results`` with ``speedup``: the baseline's median time over each case's, at the same ``n``."""
    known = list(dict.fromkeys(results["case"]))
    if baseline not in known:
        raise ValueError(f"baseline {baseline!r} is not one of the cases {known}")
    base = results[results["case"] == baseline].set_index("n")["median_s"]
    out = results.copy()
    out["speedup"] = out["n"].map(base) / out["median_s"]
    return out


def crossover(results: pd.DataFrame, case: str, baseline: str) -> int | None:
    """The smallest size from which ``case`` beats ``baseline`` at every larger size measured, or ``None``."""
    table = add_speedup(results, baseline)
    if case not in set(table["case"]):
        raise ValueError(f"case {case!r} is not one of the cases {list(dict.fromkeys(table['case']))}")
    speedups = table[table["case"] == case].sort_values("n")[["n", "speedup"]].to_numpy()
    winner = None
    for n, speedup in reversed(speedups):
        if speedup <= 1:
            break
        winner = int(n)
    return winner
