"""The timing check of chapter 8 (ex-jax-timed) beyond its cases (tests/exercises/cases/jax.py): a neighbour that
slows the check's own calls made after the learner's timing, or the learner's timing itself, does not change what
the check says.

On CI a time that included the first call (about 7 calls' worth) was judged by its compilation instead, because
another process started work just after the learner's timing and doubled the median of the check's own calls:
here that neighbour is made exact by tripling what those calls read."""

import pytest

from gpukit.exercises import check
from gpukit.exercises import jax as jax_exercises
from tests.exercises.cases.jax import timed, timed_first_call, timed_in_milliseconds

pytest.importorskip("jax")

SLOWED_BY_THE_NEIGHBOUR = 3


@pytest.fixture
def a_neighbour_after_each_timing(monkeypatch):
    """Wraps an answer so that the check's own calls just after the learner's timing of the work function (its
    CALLS_AFTER) read SLOWED_BY_THE_NEIGHBOUR times what they took."""
    calls_left_to_slow = [0]
    ready_seconds = jax_exercises._ready_seconds

    def slowed(function, *args):
        seconds = ready_seconds(function, *args)
        if calls_left_to_slow[0]:
            calls_left_to_slow[0] -= 1
            return SLOWED_BY_THE_NEIGHBOUR * seconds
        return seconds

    monkeypatch.setattr(jax_exercises, "_ready_seconds", slowed)

    def followed_by_a_neighbour(answer):
        def answer_then_neighbour(f, *args):
            seconds = answer(f, *args)
            calls_left_to_slow[0] = jax_exercises.CALLS_AFTER
            return seconds

        return answer_then_neighbour

    return followed_by_a_neighbour


def test_a_time_with_the_first_call_is_still_named_so(a_neighbour_after_each_timing):
    result = check("ex-jax-timed", a_neighbour_after_each_timing(timed_first_call))
    assert not result and "includes work queued before" in result.message, result.message


def test_the_right_timing_still_passes(a_neighbour_after_each_timing):
    result = check("ex-jax-timed", a_neighbour_after_each_timing(timed))
    assert result, result.message


def test_milliseconds_read_during_a_neighbours_work_are_still_named_so():
    """A neighbour that ran during the learner's timing lengthened it: 4 times, here, on top of the unit."""
    def lengthened(f, *args):
        return 4 * timed_in_milliseconds(f, *args)

    result = check("ex-jax-timed", lengthened)
    assert not result and "milliseconds" in result.message, result.message
