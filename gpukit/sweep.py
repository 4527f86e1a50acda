"""Timing the same work over a range of problem sizes, with a text progress bar, into a pandas DataFrame.

A *case* is one way of doing the work (CPU with all threads, CPU with one thread, NumPy, the GPU); its
``make(n)`` prepares the inputs for size ``n`` and returns the call to time. :func:`size_sweep` times every
case at every size with :func:`gpukit.timing.benchmark`; :func:`add_speedup` and :func:`crossover` say
where one case starts to beat another.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import pandas as pd

from .timing import benchmark
from .arguments import is_whole_number, require_whole_number


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Limit PyTorch's own thread pool (its BLAS and OpenMP) to ``count`` threads inside a ``with`` block.

    The previous setting is restored on leaving the block, even after an error.
    """
    count = require_whole_number("a thread count", count, 1)
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def cpu_threads(count: int) -> Iterator[None]:
    """Limit PyTorch and the BLAS libraries NumPy uses to ``count`` threads inside a ``with`` block.

    The previous settings are restored on leaving the block, even after an error.
    """
    count = require_whole_number("a thread count", count, 1)
    from threadpoolctl import threadpool_limits

    with torch_threads(count), threadpool_limits(limits=count):
        yield


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


def _in_jupyter_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _clear_cell_output() -> None:
    from IPython.display import clear_output

    clear_output(wait=True)


def progress_bar(total: int, desc: str, file=None):
    """A plain-text progress bar (no widget, no JavaScript) on ``file`` (standard output by default).

    Each update of a text bar is a separate piece of a notebook cell's output, and a saved or rendered
    notebook shows them one per line. So, in a Jupyter kernel and on standard output, closing the bar
    clears the cell's output (``clear_output``) and leaves the final line only: start the bar before the
    cell prints anything else.
    """
    from tqdm.std import tqdm

    class TextBar(tqdm):
        def close(self) -> None:
            if not self.disable and self.replace_at_close:
                _clear_cell_output()
            super().close()

    stream = file or sys.stdout
    bar = TextBar(total=total, desc=desc, file=stream, ncols=80, ascii=True, mininterval=0.5, leave=True)
    bar.replace_at_close = stream is sys.stdout and _in_jupyter_kernel()
    return bar


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
