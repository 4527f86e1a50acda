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

The verdict (:meth:`Overlap.verdict`, :meth:`Overlap.sentence`) measures the seconds saved against the best
possible saving, the shorter piece's time (hidden completely behind the longer one), not against the total:
a few ms of GPU work hidden behind 0.5 s of host work saved all it could, though only 1 % of the total. Where
the shorter piece is within the timing noise of the comparison, no verdict is given ("unresolved"): make the
pieces similar in size (on a GPU, the host piece smaller) and measure again.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from gpukit.core.timing import Timing, benchmark, synchronize

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
    def saved_seconds(self) -> float:
        """Seconds that doing both together saved against one after the other (negative: it cost)."""
        return self.one_after_other.median - self.together.median

    @property
    def shorter(self) -> Timing:
        """The shorter of the two pieces: the most that overlapping can hide."""
        return min(self.first, self.second, key=lambda t: t.median)

    @property
    def share_of_best(self) -> float:
        """The seconds saved as a share of the best possible saving, the shorter piece's time: 1 when the
        shorter piece was hidden completely, 0 when nothing was, negative when running together cost time.

        Unlike :attr:`saved`, this does not shrink when one piece is much longer than the other: a few ms
        of GPU work hidden completely behind 0.5 s of host work is a share of 1, not a saving of 1 %.
        """
        best = self.shorter.median
        return self.saved_seconds / best if best > 0 else 0.0

    @property
    def balance(self) -> float:
        """The shorter piece's time over the longer one's (1: equal pieces)."""
        longer = max(self.first.median, self.second.median)
        return self.shorter.median / longer if longer > 0 else 1.0

    @property
    def noise(self) -> float:
        """The timing noise of the comparison, in seconds: the larger spread (interquartile range) of the
        one-after-the-other and together timings."""
        return max(self.one_after_other.spread, self.together.spread)

    @property
    def resolved(self) -> bool:
        """Whether the shorter piece took longer than the timing noise, so that hiding it could be seen."""
        return self.shorter.median > self.noise

    def __str__(self) -> str:
        return "\n".join(str(t) for t in (self.first, self.second, self.one_after_other, self.together))

    def verdict(self) -> str:
        """``"overlapped"``, ``"partly overlapped"``, ``"did not overlap"``, ``"competed"`` (together took
        longer than one after the other) or ``"unresolved"`` (the shorter piece is within the timing noise)."""
        if self.saved_seconds < -max(0.05 * self.one_after_other.median, self.noise):
            return "competed"
        if not self.resolved:
            return "unresolved"
        if self.share_of_best >= 0.5:
            return "overlapped"
        if self.share_of_best >= 0.15:
            return "partly overlapped"
        return "did not overlap"

    def sentence(self) -> str:
        """What overlapping did, as a sentence for glued prose: the saving as a share of the best possible
        one (hiding the shorter piece completely)."""
        verdict = self.verdict()
        hidden = (f"hid {self.share_of_best:.0%} of the shorter piece ({self.shorter.label}, "
                  f"{_ms(self.shorter.median)}), saving {_ms(self.saved_seconds)}")
        if verdict == "overlapped" and self.share_of_best > 1.1:
            # More saved than the shorter piece's whole time: "hid 284%" would be no sentence a reader can use.
            said = (f"saved {_ms(self.saved_seconds)}, more than hiding the shorter piece ({self.shorter.label}, "
                    f"{_ms(self.shorter.median)}) completely could save: the pieces also ran faster together than "
                    "their separate timings say (caches, clock speeds, or noise in those timings)")
        elif verdict == "overlapped":
            said = f"overlapped: it {hidden}"
        elif verdict == "partly overlapped":
            said = f"overlapped in part: it {hidden}"
        elif verdict == "competed":
            said = (f"cost {_ms(-self.saved_seconds)} more than one after the other "
                    f"({-self.saved:.0%}): the two competed")
        elif verdict == "unresolved":
            said = (f"cannot be judged: the shorter piece ({self.shorter.label}, {_ms(self.shorter.median)}) "
                    f"is within the timing noise ({_ms(self.noise)}); give the two pieces similar sizes")
        elif self.how == "threads":
            said = ("did not overlap: either the two did not run at the same time, or they shared the "
                    "same cores")
        else:
            said = "did not overlap"
        if verdict != "unresolved" and self.balance < 0.1:
            said += (f" (the shorter piece took {self.balance:.0%} of the longer one's time, so little "
                     "could be saved either way)")
        return f"Running {self.first.label} and {self.second.label} together ({self.how}) {said}."


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if abs(seconds) < 10 else f"{seconds:.1f} s"


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
