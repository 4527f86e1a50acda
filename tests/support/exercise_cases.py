"""What the exercise case modules (tests/exercises/cases/<chapter>.py) and the chapters' further tests
(tests/exercises/test_<chapter>.py) share, written once.

- :func:`on_the_lessons_device`, :func:`solved_on_the_lessons_device`: the context of a check whose answer runs on
  the lesson's device, and the SOLUTIONS entries of such checks.
- :func:`roofline_prediction`, :func:`roofline_mistakes`, :func:`scaled_prediction`, :func:`prediction_slips`: the
  wrong answers of the "predict, then measure" exercises (gpukit/exercises/_predicting.py), whose solution is a
  function ``predicted_ms(peak_flops, bandwidth)`` written in each chapter's cases as the lesson writes it.
- :func:`on_the_cpu`: the autouse fixture of the tests that check the checks' logic rather than this machine's
  device (a test module imports it to use it).
"""

from __future__ import annotations

import pytest

from gpukit.core.device import pick_device
from tests.support.device_probe import force_the_cpu


def on_the_lessons_device(**inputs) -> dict:
    """The context of a check that runs the answer on the lesson's device (a GPU where the tests have one), with
    the run's other ``inputs``."""
    return {"device": pick_device(), **inputs}


def solved_on_the_lessons_device(answers: dict) -> dict:
    """SOLUTIONS entries for ``answers`` ({label: the solution}) whose checks run them on the lesson's device and
    need no other input."""
    return {label: (lambda answer=answer: (answer, on_the_lessons_device())) for label, answer in answers.items()}


def roofline_prediction(flops: float, nbytes: float):
    """A prediction function for work of ``flops`` FLOPs that moves ``nbytes`` bytes (the roofline, in ms): a
    wrong answer, where either count is a classic mistake's."""
    return lambda peak_flops, bandwidth: 1e3 * max(flops / peak_flops, nbytes / bandwidth)


def roofline_mistakes(counts: dict[str, tuple[float, float]], per: float = 1) -> list[tuple]:
    """The wrong answers ``counts`` describes, {the word the message must contain: (FLOPs, bytes)}, each count
    multiplied by ``per`` (the values of the work, where the counts are per value)."""
    return [(roofline_prediction(flops * per, nbytes * per), word) for word, (flops, nbytes) in counts.items()]


def scaled_prediction(predicted_ms, flops_share: float = 1.0, bytes_share: float = 1.0, **sizes):
    """``predicted_ms`` as if the work held ``flops_share`` times its FLOPs and ``bytes_share`` times its bytes (or
    other ``sizes``): a wrong answer, where a count is a classic mistake's."""
    return lambda peak_flops, bandwidth: predicted_ms(peak_flops / flops_share, bandwidth / bytes_share, **sizes)


def prediction_slips(predicted_ms, *, times: float | None = None, itself: bool = False) -> list[tuple]:
    """The slips a prediction exercise's wrong answers hold besides its counting mistakes: the placeholder left in,
    where ``times`` is given the time multiplied by it (a thousand times off), and where ``itself`` the number
    returned instead of the function."""
    slips = [(lambda peak_flops, bandwidth: None, "replace the placeholder")]
    if times is not None:
        slips.append((lambda peak_flops, bandwidth: times * predicted_ms(peak_flops, bandwidth),
                      "a thousand times off"))
    if itself:
        slips.append((predicted_ms(1e12, 1e11), "expected your function itself"))
    return slips


@pytest.fixture(autouse=True)
def on_the_cpu(monkeypatch):
    """These tests check the checks' logic, not this machine's device: they run on the CPU wherever they run."""
    force_the_cpu(monkeypatch)
