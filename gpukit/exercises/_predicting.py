"""The checks of the "predict, then measure" exercises: a time worked out from a device's limits before it is measured.

Each speed lesson has one. The learner counts the FLOPs and the bytes of a piece of work and applies the roofline,
``time = max(FLOPs / peak FLOP/s, bytes / bandwidth)`` (:mod:`gpukit.measuring.roofline`). Two forms:

- **a number** (:func:`judge_number`): the predicted time in milliseconds on this run's device, from the limits the
  lesson printed. It is compared with gpukit's own prediction for the device, within :data:`RTOL`.
- **a function of the limits** (:func:`judge_function`): ``predicted_ms(peak_flops, bandwidth)``, for lessons whose
  page shows no limits of its own. The check calls it with the limits of a compute-bound and of a memory-bound
  device (so both of its terms are checked, whatever this run's device is), and with this device's own where they
  are known, and compares each answer with gpukit's prediction.

Either way, a wrong answer is matched against the classic mistakes first (:class:`Mistake`: the bytes of one operand
only, a multiply-add counted as one FLOP, the peak or the element size of the wrong precision), and the message
says which one it looks like, never the expected value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Real

from gpukit.base.errors import error_line
from gpukit.measuring.roofline import device_limits

from .checking import Exercise, keep_output, kept_output, not_a_function

# The learner reads figures printed to three or four significant digits: 5 % is room for that rounding, and far
# less than the factor of 2 or more that each classic mistake makes.
RTOL = 0.05
# Limits that put any work of intensity between 1e-3 and 1e3 FLOP/B firmly on one side of the ridge: a device whose
# bandwidth is effectively unlimited (every prediction is FLOPs / peak) and one whose arithmetic is.
COMPUTE_BOUND_DEVICE = (1e12, 1e18)  # (peak FLOP/s, bandwidth in bytes/s)
MEMORY_BOUND_DEVICE = (1e18, 1e11)


@dataclass(frozen=True)
class Mistake:
    """A classic wrong way to predict: ``seconds(peak_flops, bandwidth)`` is what it gives, ``why`` what it is."""

    why: str
    seconds: Callable[[float, float], float]


def _close(value: float, target: float) -> bool:
    return target > 0 and math.isclose(value, target, rel_tol=RTOL)


def _as_number(answer, what: str) -> tuple[float | None, str | None]:
    if isinstance(answer, bool) or not isinstance(answer, Real) or not math.isfinite(answer):
        return None, f"{what} is {type(answer).__name__} {answer!r}: give the predicted time in milliseconds, a number."
    if answer <= 0:
        return None, f"{what} is {float(answer):g}: a time is positive."  # a number, never np.float64(...)
    return float(answer), None


def which_mistake(answer_ms: float, right_ms: float, mistakes: list[tuple[str, float]]) -> str | None:
    """The message for ``answer_ms`` where it matches a mistake's prediction and not the right one, else ``None``."""
    if _close(answer_ms, right_ms):
        return None
    matched = list(dict.fromkeys(why for why, wrong_ms in mistakes if _close(answer_ms, wrong_ms)))
    if matched:
        return f"{answer_ms:.4g} ms is what {' or '.join(matched)} gives."
    if math.isclose(answer_ms, right_ms * 1e3, rel_tol=RTOL) or math.isclose(answer_ms, right_ms * 1e-3,
                                                                               rel_tol=RTOL):
        return (f"{answer_ms:.4g} ms is a thousand times off: a time in seconds times 1e3 is milliseconds (and FLOP/s "
                "and bytes/s are per second).")
    return None


def judge_number(answer, right_ms: float | None, mistakes: list[tuple[str, float]]) -> str | None:
    """What is wrong with a predicted time ``answer`` (ms), given the right one and the mistakes' (why, ms)."""
    value, wrong = _as_number(answer, "your prediction")
    if wrong:
        return wrong
    if right_ms is None:
        return None  # nothing to compare with on this device: compare() then says what it can
    return which_mistake(value, right_ms, mistakes)


def judge_function(answer, right: Callable[[float, float], float], mistakes: list[Mistake],
                   own: tuple[float, float] | None) -> str | None:
    """What is wrong with ``predicted_ms(peak_flops, bandwidth)``, tried on a compute-bound device, a memory-bound
    one, and ``own`` (this run's device's limits, where known). Keeps the answer for this run's device (else for the
    compute-bound one) for the comparison that follows."""
    wrong = not_a_function(answer, "predicted_ms", "the peak FLOP/s and the bandwidth in bytes/s")
    if wrong:
        return wrong
    devices = [("a device with unlimited bandwidth", COMPUTE_BOUND_DEVICE),
               ("a device with unlimited arithmetic", MEMORY_BOUND_DEVICE)]
    if own is not None:
        devices.append(("this run's device", own))
    answers = []
    for where, (peak_flops, bandwidth) in devices:
        try:
            got = answer(peak_flops, bandwidth)
        except Exception as error:  # noqa: BLE001 - the learner's code can raise anything; say what
            return f"predicted_ms raised {error_line(error)}"
        if got is None:
            return ("predicted_ms returned None: replace the placeholder (None) with the time in milliseconds, "
                    "from the FLOPs over peak_flops and the bytes over bandwidth.")
        value, wrong = _as_number(got, f"predicted_ms({peak_flops:.3g}, {bandwidth:.3g})")
        if wrong:
            return wrong
        right_ms = 1e3 * right(peak_flops, bandwidth)
        mistaken = which_mistake(value, right_ms, [(m.why, 1e3 * m.seconds(peak_flops, bandwidth)) for m in mistakes])
        if mistaken:
            return f"on {where}, {mistaken}"
        if not _close(value, right_ms):
            direction = "too long" if value > right_ms else "too short"
            return (f"on {where} (peak {peak_flops:.3g} FLOP/s, {bandwidth:.3g} B/s) your prediction, {value:.4g} ms, "
                    f"is {direction}: count the work's FLOPs and the bytes it must move, and take the larger time.")
        answers.append(value)
    keep_output(answer, answers[-1] if own is not None else answers[0])
    return None


def expected_ms(right: Callable[[float, float], float], own: tuple[float, float] | None) -> float:
    """The right prediction in ms where :func:`judge_function` kept the learner's: this device, else the first."""
    return 1e3 * right(*(own if own is not None else COMPUTE_BOUND_DEVICE))


@dataclass(frozen=True)
class Work:
    """A piece of work as the roofline sees it: its FLOPs and the bytes it must move."""

    flops: float
    bytes_moved: float

    def seconds(self, peak_flops: float, bandwidth: float) -> float:
        return max(self.flops / peak_flops, self.bytes_moved / bandwidth)


def own_limits(device: str | None, dtype: str, operation: str) -> tuple[float, float] | None:
    """(peak FLOP/s, bandwidth) of ``device`` as gpukit knows them, or ``None`` where either is unknown."""
    if device is None:
        return None

    limits = device_limits(device, dtype, operation=operation)
    if limits.flops_per_s is None or limits.bytes_per_s is None:
        return None
    return limits.flops_per_s, limits.bytes_per_s


def function_exercise(label: str, work: Callable[..., Work], mistakes: Callable[..., list[tuple[str, Work]]], *,
                      dtype: str = "float32", operation: str = "matmul", needs: tuple[str, ...] = ("device",)
                      ) -> Exercise:
    """The exercise ``label`` whose answer is ``predicted_ms(peak_flops, bandwidth)`` for the work that
    ``work(**context)`` describes; ``mistakes(**context)`` gives the classic wrong counts, each with what it is.
    The run's ``device`` (in ``needs``) adds its own limits to the devices the check tries."""

    def method(answer, **context):
        right = work(**context)
        wrong = [Mistake(why, mistaken.seconds) for why, mistaken in mistakes(**context)]
        return judge_function(answer, right.seconds, wrong, own_limits(context.get("device"), dtype, operation))

    def expected(**context):
        return expected_ms(work(**context).seconds, own_limits(context.get("device"), dtype, operation))

    return Exercise(label, expected, needs=needs, method=method, result=kept_output, rtol=RTOL, writes="a number")
