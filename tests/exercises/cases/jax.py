"""Chapter 8 (JAX): each exercise's solution, and wrong answers with a word the check's message must contain.

JAX is optional: without it these cases skip (the lesson's exercise cells skip too)."""

import time

import numpy as np
import pytest

from tests.exercises.cases import named
from tests.support.exercise_cases import prediction_slips, roofline_mistakes


def _jax():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    return jax, jnp


def distance_function():
    _, jnp = _jax()

    def distance(a, b):
        return jnp.sqrt(jnp.sum((a - b) ** 2))

    return distance


def pairwise_solution():
    jax, _ = _jax()
    distance = distance_function()
    return jax.vmap(jax.vmap(distance, in_axes=(None, 0)), in_axes=(0, None))


def pairwise_wrong_answers():
    jax, jnp = _jax()
    distance = distance_function()
    good = pairwise_solution()
    return [
        # One vmap maps both arguments together: the point sets have different lengths, so vmap refuses.
        (jax.vmap(distance), "raised ValueError"),
        # The axes swapped: one row per point of the second set.
        (jax.vmap(jax.vmap(distance, in_axes=(0, None)), in_axes=(None, 0)), "shape is (4, 3)"),
        # Squared distances: the right shape, the wrong values.
        (lambda a, b: good(a, b) ** 2, "values differ"),
        # A NumPy result.
        (named("pairwise_copied_to_the_host", lambda a, b: np.asarray(good(a, b))), "expected a jax array"),
        # The result instead of the function.
        (good(jnp.zeros((3, 2)), jnp.ones((4, 2))), "expected a function"),
    ]


def timed(f, *args):
    """The lesson's solution: a first call waited for, then one call timed until its result is ready."""
    jax, _ = _jax()
    jax.block_until_ready(f(*args))  # the first call compiles: not timed
    start = time.perf_counter()
    jax.block_until_ready(f(*args))
    return time.perf_counter() - start


def _timing(first_call="waited for", wait_on="the result"):
    """The solution with its first call ``first_call`` ("waited for", "not waited for" or None: not made), and the
    timed call's wait ``wait_on`` ("the result", "the inputs" or None: none)."""

    def timing(f, *args):
        jax, _ = _jax()
        if first_call is not None:
            first = f(*args)
            if first_call == "waited for":
                jax.block_until_ready(first)
        start = time.perf_counter()
        result = f(*args)
        if wait_on is not None:
            jax.block_until_ready(result if wait_on == "the result" else args)
        return time.perf_counter() - start

    return timing


timed_without_waiting = named("timed_without_waiting", _timing(wait_on=None))
timed_first_call = named("timed_first_call", _timing(first_call=None))
timed_after_an_unwaited_first_call = named("timed_after_an_unwaited_first_call", _timing(first_call="not waited for"))
# The inputs were ready long ago.
timed_waiting_on_the_inputs = named("timed_waiting_on_the_inputs", _timing(wait_on="the inputs"))


def timed_in_milliseconds(f, *args):
    return 1000 * timed(f, *args)


def timed_wrong_answers():
    return [
        (timed_without_waiting, "block_until_ready"),
        (timed_waiting_on_the_inputs, "block_until_ready"),
        (timed_first_call, "includes work queued before"),
        (timed_after_an_unwaited_first_call, "whose result you did not wait for"),
        (timed_in_milliseconds, "milliseconds"),
        (lambda f, *args: f(*args), "return the seconds"),
        (lambda f, *args: 0.05, "never called f"),
        (0.05, "expected your function itself"),
    ]


def counts_solution():
    _, jnp = _jax()
    counts = jnp.zeros(5, dtype=jnp.int32)
    hits = jnp.array([0, 2, 2, 4])
    return counts.at[hits].add(1)


def counts_wrong_answers():
    _, jnp = _jax()
    counts = jnp.zeros(5, dtype=jnp.int32)
    hits = jnp.array([0, 2, 2, 4])
    numpy_counts = np.zeros(5, dtype=np.int32)
    numpy_counts[np.asarray(hits)] += 1  # NumPy's fancy-index += counts a repeated index once
    return [
        (counts.at[hits].set(1), "values differ"),  # set, not add: the double hit counts once
        (jnp.asarray(numpy_counts), "values differ"),
        (named("counted_with_numpy_on_the_host", np.bincount(np.asarray(hits), minlength=5).astype(np.int32)),
         "expected a jax array"),
        (counts.astype(jnp.float32).at[hits].add(1.0), "dtype is float32"),
    ]


M = 2**22


def predicted_ms(peak_flops, bandwidth, m=M):
    """The lesson's solution of ex-jax-predict-fused."""
    return 1e3 * max(4 * m / peak_flops, 2 * 4 * m / bandwidth)


SOLUTIONS = {
    "ex-jax-predict-fused": lambda: (predicted_ms, {"device": "cpu", "m": M}),
    "ex-jax-vmap-pairwise": lambda: (pairwise_solution(), {}),
    "ex-jax-timed": lambda: (timed, {}),
    "ex-jax-at-add": lambda: (counts_solution(), {}),
}

WRONG_ANSWERS = {
    "ex-jax-predict-fused": lambda: [
        *roofline_mistakes({"every operation's arrays": (4, 36), "x's bytes only": (4, 4), "8 bytes per value": (4, 16),
                            "one FLOP per value": (1, 8)}, per=M),
        *prediction_slips(predicted_ms, times=1e3),
    ],
    "ex-jax-vmap-pairwise": pairwise_wrong_answers,
    "ex-jax-timed": timed_wrong_answers,
    "ex-jax-at-add": counts_wrong_answers,
}


# The planted device mistakes (tests/exercises/test_planted_device_mistakes.py).
DEVICE_MISTAKES = {
    "ex-jax-vmap-pairwise": {
        "pairwise_copied_to_the_host": "turned the result into a NumPy array, which copies it from the device to "
                                       "the host",
    },
    "ex-jax-timed": {
        "timed_without_waiting": "stopped the clock without block_until_ready: it timed the dispatch, not the work",
        "timed_waiting_on_the_inputs": "waited on the inputs, long ready, rather than on the result",
        "timed_after_an_unwaited_first_call": "started the clock while the first (compiling) call could still be "
                                              "running on the device",
    },
    "ex-jax-at-add": {
        "counted_with_numpy_on_the_host": "copied the hits to the host and counted them with NumPy's bincount: a "
                                          "host array instead of one on the device",
    },
}
