"""time_overlap: the four timings, and the sentence that reports them."""

import time

import pytest

from gpukit.overlap import time_overlap


def test_sleeping_threads_overlap():
    # time.sleep releases the GIL, so two sleeps in two threads take about as long as one.
    result = time_overlap(lambda: time.sleep(0.02), lambda: time.sleep(0.02), how="threads", repeats=3,
                          labels=("a", "b"))
    assert result.one_after_other.median > 0.035
    assert result.together.median < 0.035
    assert result.saved > 0.2 and "saved" in result.sentence()
    assert "together (threads)" in str(result)


def test_cpu_async_does_not_overlap():
    spin = lambda: sum(range(20000))  # noqa: E731 - holds the GIL, runs at once
    result = time_overlap(spin, spin, how="async", repeats=3)
    assert result.saved < 0.3
    assert result.best_possible == pytest.approx(
        1 - max(result.first.median, result.second.median) / result.one_after_other.median)


def test_bad_arguments():
    with pytest.raises(ValueError, match="how must be one of"):
        time_overlap(print, print, how="streams")
    with pytest.raises(TypeError, match="second must be a function"):
        time_overlap(print, 3)
    with pytest.raises(ValueError, match="labels"):
        time_overlap(print, print, labels=("one",))
