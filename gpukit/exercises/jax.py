"""Chapter 8, JAX: what its exercises expect, and how a wrong answer is told apart."""

from __future__ import annotations

from .checking import Exercise, compare, register

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
            first_line = (str(error).strip().splitlines() or [""])[0][:200]
            return (f"on points of shapes {tuple(a.shape)} and {tuple(b.shape)} your function raised "
                    f"{type(error).__name__}: {first_line}")
        verdict = compare(out, _pairwise_direct(a, b))
        if not verdict:
            return f"on points of shapes {tuple(a.shape)} and {tuple(b.shape)}: {verdict.message}"
    return None


def _called_on_the_last_trial(answer):
    return answer(*_pairwise_inputs()[-1])


def _gradient_of_x2_sin_x():
    """jax.grad of sum(x**2 sin x) at x = linspace(0, 2, 5) in float32: what the hand-made gradient must match."""
    import jax
    import jax.numpy as jnp

    x = jnp.linspace(0.0, 2.0, 5, dtype=jnp.float32)
    return jax.grad(lambda v: jnp.sum(v**2 * jnp.sin(v)))(x)


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
    Exercise("ex-jax-grad-by-hand", _gradient_of_x2_sin_x, rtol=1e-5, atol=1e-6, writes="device code"),
    Exercise("ex-jax-at-add", _counts_after_the_hits, writes="device code"),
)
