"""Does doing two pieces of work at the same time take less than doing them one after the other?

:func:`time_overlap` times a ``first`` and a ``second`` piece of work alone, one after the other, and
together, with :func:`gpukit.benchmark` (warm-up, synchronisation, median), in one of two ways:

- ``how="async"``: ``first`` queues work on a GPU and returns at once (PyTorch, CuPy and JAX launch
  asynchronously); ``second`` then runs on the host while the GPU computes, and the clock stops once the
  device has finished. On the CPU nothing is queued: ``first`` has finished when it returns, so nothing
  overlaps.
- ``how="threads"``: ``second`` runs in a worker thread while ``first`` runs in the calling thread. They
  overlap only where both release Python's global interpreter lock (the GIL): NumPy's BLAS, LAPACK and FFT
  calls and PyTorch's operations do; a loop of Python statements does not. And on the CPU they then share
  the same cores.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .timing import Timing, benchmark, synchronize

__all__ = ["Overlap", "time_overlap"]

HOWS = ("async", "threads")


@dataclass(frozen=True)
class Overlap:
    """The four timings of :func:`time_overlap`, and what overlapping saved."""

    first: Timing
    second: Timing
    one_after_other: Timing
    together: Timing
    how: str

    @property
    def saved(self) -> float:
        """The fraction of the one-after-the-other time that doing both together saved (negative: it cost)."""
        return 1 - self.together.median / self.one_after_other.median

    @property
    def best_possible(self) -> float:
        """The saving if the shorter piece were hidden entirely behind the longer one."""
        return 1 - max(self.first.median, self.second.median) / self.one_after_other.median

    def __str__(self) -> str:
        return "\n".join(str(t) for t in (self.first, self.second, self.one_after_other, self.together))

    def sentence(self) -> str:
        """What overlapping did, as a sentence for glued prose."""
        if self.saved > 0.05:
            verdict = (f"saved {self.saved:.0%} of the time (hiding the shorter piece completely would have "
                       f"saved {self.best_possible:.0%})")
        elif self.saved < -0.05:
            verdict = f"cost {-self.saved:.0%} more time than one after the other: the two competed"
        elif self.how == "threads":
            verdict = ("made no real difference: either they did not run at the same time, or they shared "
                       "the same cores")
        else:
            verdict = "made no real difference: the two pieces did not overlap"
        return f"Running {self.first.label} and {self.second.label} together ({self.how}) {verdict}."


def time_overlap(first: Callable[[], object], second: Callable[[], object], *, how: str = "async",
                 device: str | None = None, repeats: int = 5, labels: tuple[str, str] = ("the first piece",
                                                                                           "the second piece")):
    """Time ``first`` and ``second`` alone, one after the other, and together (see the module's notes).

    ``device`` is where ``first`` queues its work, waited for before each clock stops. Returns an
    :class:`Overlap`.
    """
    if how not in HOWS:
        raise ValueError(f"how must be one of {', '.join(map(repr, HOWS))}, not {how!r}")
    for name, fn in (("first", first), ("second", second)):
        if not callable(fn):
            raise TypeError(f"{name} must be a function with no arguments, not {type(fn).__name__}")
    if not (isinstance(labels, tuple) and len(labels) == 2):
        raise ValueError(f"labels must be a pair of names, not {labels!r}")

    def one_after_other():
        synchronize(first(), device)
        return second()

    if how == "async":
        def together():
            queued = first()  # returns once the work is queued on a GPU
            second()
            synchronize(queued, device)
    else:
        pool = ThreadPoolExecutor(max_workers=1)

        def together():
            other = pool.submit(second)
            synchronize(first(), device)
            other.result()

    try:
        a = benchmark(first, repeats=repeats, device=device, label=labels[0])
        b = benchmark(second, repeats=repeats, device=device, label=labels[1])
        sequential = benchmark(one_after_other, repeats=repeats, device=device, label="one after the other")
        both = benchmark(together, repeats=repeats, device=device, label=f"together ({how})")
    finally:
        if how == "threads":
            pool.shutdown()
    return Overlap(a, b, sequential, both, how)
