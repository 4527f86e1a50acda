"""Chapter 8, JAX: what its exercises expect, and how a wrong answer is told apart."""

from __future__ import annotations

from gpukit.base.errors import error_line

from ._predicting import Work, function_exercise
from .checking import Exercise, compare, keep_output, kept_output, register

# JAX is optional: it is imported inside these functions only, so that gpukit imports without it. The
# lesson's exercise cells run only where JAX is installed. Every expected value is float32 or int32 whatever
# the state of jax_enable_x64, as the exercises' inputs are.
_PAIRWISE_TRIALS = (((0.0, 0.0), (3.0, 4.0), (1.0, -1.0)), ((1.0, 0.0), (0.0, 2.0), (-1.0, 3.0), (2.0, 2.0))), (
    ((1.0, 2.0, 2.0), (0.0, 0.0, 0.0), (2.0, -1.0, 0.5), (4.0, 0.0, 3.0), (-2.0, 1.0, 1.0)),
    ((0.0, 0.0, 1.0), (3.0, 0.0, 4.0)))


def _pairwise_inputs() -> list:
    """Pairs of point sets (m x d and n x d, m != n so that a mix-up of the axes shows) for a pairwise answer."""
    import jax.numpy as jnp

    return [(jnp.asarray(a, dtype=jnp.float32), jnp.asarray(b, dtype=jnp.float32)) for a, b in _PAIRWISE_TRIALS]


def _pairwise_direct(a, b):
    """Every distance between a row of ``a`` and a row of ``b``, by broadcasting: shape (m, n)."""
    import jax.numpy as jnp

    return jnp.sqrt(jnp.sum((a[:, None, :] - b[None, :, :]) ** 2, axis=-1))


def _pairwise_on_the_last_trial():
    return _pairwise_direct(*_pairwise_inputs()[-1])


def _is_a_working_pairwise_function(answer) -> str | None:
    if not callable(answer):
        return (f"expected a function of two point sets (pairwise = jax.vmap(...)), got {type(answer).__name__}: "
                "pass the vmapped function itself, not its result.")
    for a, b in _pairwise_inputs():
        try:
            out = answer(a, b)
        except Exception as error:  # the reader's code: any error is the answer to report
            return (f"on points of shapes {tuple(a.shape)} and {tuple(b.shape)} your function raised "
                    f"{error_line(error)}")
        verdict = compare(out, _pairwise_direct(a, b))
        if not verdict:
            return f"on points of shapes {tuple(a.shape)} and {tuple(b.shape)}: {verdict.message}"
    return None


def _called_on_the_last_trial(answer):
    return answer(*_pairwise_inputs()[-1])


# ------------------------------------------------------------------------------------- timing by hand
# The learner writes timed(f, *args): the seconds of one call of f, after an untimed first call, stopped when the
# result is ready. The check hands it jitted functions of its own, on JAX's default device, through a wrapper
# that records how long each call took to return (tracing and compiling happen inside the first call):
#
# - a function that does a controlled amount of work (a loop of matrix products, lengthened until one call
#   takes at least RUN_SECONDS), whose first call does FIRST_CALL_WORK times the work. JAX returns from a call as
#   soon as the work is queued (on a GPU, and on the CPU too), so a clock stopped without block_until_ready
#   measures almost nothing; a timing that includes the first call, or a first call not waited for, measures far
#   too much. The check's own timing of warm, waited-for calls is the reference;
# - a function that takes long to compile (hundreds of unrolled operations) and little to run: a time close to
#   its first call's includes the compilation.
RUN_SECONDS = 0.05
FIRST_CALL_WORK = 6  # the first call of the work function does this many times the work of the others
COMPILE_STEPS = 150
CALLS_AFTER = 3  # the check's own calls of the work function right after the learner's timing
_TIMING_CHECKS = iter(range(1, 10**9))  # makes each check's functions new to JAX's compilation caches

class _Recorded:
    """A function of the check's, wrapped: it records how long each call took to return."""

    def __init__(self, function, first_call=None):
        self.function, self.first_call, self.returned_after = function, first_call, []
        self.__name__ = getattr(function, "__name__", "f")

    def __call__(self, *args):
        import time

        start = time.perf_counter()
        if not self.returned_after and self.first_call is not None:
            result = self.first_call(*args)
        else:
            result = self.function(*args)
        self.returned_after.append(time.perf_counter() - start)
        return result


def _work_function(nonce):
    """A jitted loop of ``steps`` products of an n x n matrix (steps is an argument: one compilation)."""
    import jax
    import jax.numpy as jnp

    n = 512 if jax.default_backend() == "cpu" else 2048
    w = jnp.eye(n, dtype=jnp.float32) * (0.999 - 1e-9 * nonce) + 1e-4

    @jax.jit
    def products(a, steps):
        return jax.lax.fori_loop(0, steps, lambda i, m: m @ w, a)

    return products, jnp.ones((n, n), dtype=jnp.float32)


def _ready_seconds(function, *args) -> float:
    import time

    start = time.perf_counter()
    function(*args).block_until_ready()
    return time.perf_counter() - start


def _calibrated(products, a):
    """The number of steps for which one call takes at least RUN_SECONDS (compiling first), as a JAX scalar, and
    the seconds of the last call, made with that number."""
    import jax.numpy as jnp

    steps = 1
    products(a, jnp.int32(steps)).block_until_ready()  # compile
    while (seconds := _ready_seconds(products, a, jnp.int32(steps))) < RUN_SECONDS and steps < 2**20:
        steps *= 2
    return jnp.int32(steps), seconds


def _compile_heavy_function(nonce):
    import jax
    import jax.numpy as jnp

    def many_steps(x):
        for i in range(COMPILE_STEPS):
            x = jnp.sin(x) * (1.0001 + 1e-9 * nonce) + 1e-3 * i
        return x

    return jax.jit(many_steps), jnp.ones(1000, dtype=jnp.float32)


def _reported_seconds(answer, f, args) -> float | str:
    import math
    from numbers import Real

    try:
        seconds = answer(f, *args)
    except Exception as error:  # the learner's code: report whatever it raised
        return f"your function raised {error_line(error)}"
    if not isinstance(seconds, Real) or isinstance(seconds, bool) or not math.isfinite(seconds):
        return (f"your function returned {type(seconds).__name__} {seconds!r}: return the seconds of one call, a "
                "number (a difference of two time.perf_counter() readings).")
    if not f.returned_after:
        return "your function never called f: call f(*args) between the two readings of the clock."
    return float(seconds)


def _one_run_on_the_work(answer, nonce) -> tuple[float, float] | str:
    """The learner's time for a new work function (its first call compiles and does more work), and the check's
    own time for one warm call of it; or what went wrong.

    The check's time is the shortest of its calls just before the learner's and CALLS_AFTER after: another
    process can slow a call (on two cores, JAX's matrix products lose half their threads) but never speed one
    up, so the shortest is the closest to what the call takes. A median of the calls after alone had been
    doubled on CI by a neighbour that started work during them, and a time that included the first call
    (7 times a call) looked less than 3 times one."""
    products, a = _work_function(nonce)
    steps, seconds_before = _calibrated(products, a)
    fresh, _ = _work_function(nonce)  # the same work, new to JAX: the learner's first call compiles it
    f = _Recorded(fresh, first_call=lambda m, s: fresh(m, s * FIRST_CALL_WORK))
    seconds = _reported_seconds(answer, f, (a, steps))
    if isinstance(seconds, str):
        return seconds
    return seconds, min([seconds_before] + [_ready_seconds(fresh, a, steps) for _ in range(CALLS_AFTER)])


def _times_jax_correctly(answer) -> str | None:
    if not callable(answer):
        return (f"expected your function itself (timed), got {type(answer).__name__}: pass the function, not a "
                "time it returned.")
    # Two runs, each compared with the check's own time for the same work, taken around it. A busy machine only
    # ever makes a reading longer (a pause of the process can land inside the learner's timing or inside the
    # check's), so the shorter of the two ratios is the one to judge: too short is too short; too long must be so
    # in both runs.
    runs = []
    for _ in range(2):
        run = _one_run_on_the_work(answer, next(_TIMING_CHECKS))
        if isinstance(run, str):
            return run
        runs.append(run)
    ratios = [seconds / reference for seconds, reference in runs]
    if min(ratios) < 0.3:
        return ("your time is a fraction of what one call takes: JAX returns from a call as soon as the work is "
                "queued, so the clock stopped before the work was done. Call .block_until_ready() on the result "
                "(or jax.block_until_ready) before reading the clock again.")
    # A time in milliseconds is 1000 times the check's, more where a neighbour lengthened the learner's reading
    # (with no bound above: the stress run of tests/exercises read 3000 and more); a time that includes the first
    # call is about 7 times.
    if min(ratios) >= 300:
        return f"your function returned {runs[0][0]:g}: that looks like milliseconds; return seconds."
    if min(ratios) > 3:
        return ("your time is several times what one call takes: it includes work queued before the clock "
                "started, from the first call (which compiles, and here does more work) or from a first call "
                "whose result you did not wait for. Call f once, wait for its result with block_until_ready(), "
                "then start the clock.")

    compiling, x = _compile_heavy_function(next(_TIMING_CHECKS))
    g = _Recorded(compiling)
    compile_seconds = _reported_seconds(answer, g, (x,))
    if isinstance(compile_seconds, str):
        return compile_seconds
    if compile_seconds > 0.25 * g.returned_after[0]:
        return ("on a function that takes long to compile, your time includes the compilation: time a call made "
                "after a first, untimed call of f (the first call of a jitted function traces and compiles it).")
    seconds, reference = min(runs, key=lambda run: abs(run[0] / run[1] - 1))
    keep_output(answer, (seconds, reference))  # the learner's time on the work function, and the check's own
    return None


def _seconds_on_the_work_function(answer) -> float:
    """What the learner's function reported for the work function, once the method check has passed."""
    return kept_output(answer)[0]


def _the_checks_own_timing() -> float:
    """The check's own time for one warm, waited-for call of the same work function (outside a check, the time the
    work is made to take)."""
    return (kept_output() or (RUN_SECONDS, RUN_SECONDS))[1]


def _counts_after_the_hits():
    """Five int32 counters after the hits 0, 2, 2 and 4: a repeated index counts twice."""
    import jax.numpy as jnp

    counts = jnp.zeros(5, dtype=jnp.int32)
    for hit in (0, 2, 2, 4):
        counts = counts.at[hit].add(1)
    return counts


register(
    Exercise("ex-jax-vmap-pairwise", _pairwise_on_the_last_trial, method=_is_a_working_pairwise_function,
             result=_called_on_the_last_trial, writes="device code"),
    Exercise("ex-jax-timed", _the_checks_own_timing, method=_times_jax_correctly,
             result=_seconds_on_the_work_function, rtol=2.0, writes="device code"),
    Exercise("ex-jax-at-add", _counts_after_the_hits, writes="device code"),
)


# ------------------------------------------------------------------ ex-jax-predict-fused
def _fused_expression(m: int, **_) -> Work:
    """exp(x) + 3 sin(x), jitted, on m float32 values: four operations per value, counted as one FLOP each; fused,
    it reads x once and writes the result once."""
    return Work(4 * m, 2 * 4 * m)


def _fused_mistakes(m: int, **_) -> list[tuple[str, Work]]:
    return [("counting every operation's arrays, as op by op (jit fuses the four into one read of x and one write)",
             Work(4 * m, 9 * 4 * m)),
            ("counting x's bytes only (the result is written too)", Work(4 * m, 4 * m)),
            ("counting 8 bytes per value (float32 has 4)", Work(4 * m, 2 * 8 * m)),
            ("counting one FLOP per value (there are four operations)", Work(m, 2 * 4 * m))]


register(function_exercise("ex-jax-predict-fused", _fused_expression, _fused_mistakes, operation="elementwise",
                           needs=("device", "m")))
