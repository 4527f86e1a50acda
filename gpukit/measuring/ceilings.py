"""Ceilings measured rather than published: the bandwidth of a large copy, and the FLOP/s to measure fractions
against where an estimated peak (:func:`gpukit.core.peaks.estimate_cpu_peak`) is beaten by a measurement.

:mod:`gpukit.core.peaks` holds the published and estimated figures; what needs a timing lives here, above
:mod:`gpukit.core.timing` (whose impossible-speed check reads the published peaks).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpukit.base.arguments import require_positive, require_positive_or_none, require_whole_number
from gpukit.core.timing import Timing, benchmark

__all__ = ["PracticalCeiling", "copy_bandwidth", "format_flops_per_s", "practical_ceiling"]


def copy_bandwidth(device: str = "cpu", nbytes: int = 256 * 2**20, repeats: int = 5) -> Timing:
    """Measure memory bandwidth with a large copy on ``device``: a practical ceiling for streaming work.

    A copy reads ``nbytes`` and writes ``nbytes``, so it moves ``2 * nbytes``. Returns the
    :class:`~gpukit.core.timing.Timing`, whose ``bytes_per_s`` is the measured bandwidth.
    """
    import torch  # lazy: gpukit.measuring imports without torch

    require_whole_number("nbytes", nbytes, 1)
    source = torch.ones(nbytes, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    return benchmark(target.copy_, source, repeats=repeats, device=device, label=f"copy on {device}",
                     bytes_moved=2 * nbytes)


def format_flops_per_s(flops_per_s: float) -> str:
    """A rate in FLOP/s as text, in TFLOP/s from 10^12 up and in GFLOP/s below: ``'67 TFLOP/s'``."""
    return f"{flops_per_s / 1e12:.3g} TFLOP/s" if flops_per_s >= 1e12 else f"{flops_per_s / 1e9:.3g} GFLOP/s"


@dataclass(frozen=True)
class PracticalCeiling:
    """The FLOP/s to measure fractions against: the estimated peak, or the measured best where that beat it.

    An estimate that a measurement exceeds is wrong, and fractions of it above 1 would say the impossible;
    the measured best is then the best evidence of what the hardware can do.
    """

    flops_per_s: float
    exceeded: bool
    estimate_flops_per_s: float | None
    measured_best_flops_per_s: float

    @property
    def fraction_of_estimate(self) -> float | None:
        """The measured best over the estimate (above 1 when ``exceeded``); ``None`` without an estimate."""
        if self.estimate_flops_per_s is None:
            return None
        return self.measured_best_flops_per_s / self.estimate_flops_per_s

    def sentence(self) -> str:
        """What the ceiling is and why, as a sentence for glued prose."""
        best, estimate = format_flops_per_s(self.measured_best_flops_per_s), self.estimate_flops_per_s
        if estimate is None:
            return (f"No arithmetic peak could be estimated for this processor, so the best measured rate, {best}, "
                    "is used as the practical ceiling.")
        if self.exceeded:
            return (f"On this run the best measured rate, {best}, exceeded the estimated peak of "
                    f"{format_flops_per_s(estimate)} ({self.fraction_of_estimate:.0%} of it), so the estimate is too "
                    "low, most likely because the cores ran above the clock the system reports; the measured best is "
                    "used as the practical ceiling instead.")
        return (f"The best measured rate, {best}, is {self.fraction_of_estimate:.0%} of the estimated peak of "
                f"{format_flops_per_s(estimate)}, which is used as the ceiling.")


def practical_ceiling(estimate_flops_per_s: float | None, measured_best_flops_per_s: float) -> PracticalCeiling:
    """The ceiling to plot fractions against: the larger of the estimated peak and the best measured rate.

    ``estimate_flops_per_s`` may be ``None`` where no estimate could be made (then the measured best is the
    ceiling). Its :meth:`~PracticalCeiling.sentence` says which was used, so no fraction above 1 goes unexplained.
    """
    require_positive_or_none("estimate_flops_per_s", estimate_flops_per_s)
    require_positive("measured_best_flops_per_s", measured_best_flops_per_s)
    exceeded = estimate_flops_per_s is not None and measured_best_flops_per_s > estimate_flops_per_s
    ceiling = measured_best_flops_per_s if estimate_flops_per_s is None or exceeded else estimate_flops_per_s
    return PracticalCeiling(flops_per_s=float(ceiling), exceeded=exceeded,
                            estimate_flops_per_s=None if estimate_flops_per_s is None else float(estimate_flops_per_s),
                            measured_best_flops_per_s=float(measured_best_flops_per_s))
