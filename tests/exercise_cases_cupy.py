"""Chapter 3 (CuPy): each exercise's solution and wrong answers, for tests/test_exercises.py."""

import numpy as np
import pytest


def _namespace():
    return pytest.importorskip("array_api_compat").array_namespace


def softmax_any(x):
    """The lesson's solution: array-API code that runs on NumPy, torch, CuPy and JAX arrays."""
    xp = _namespace()(x)
    e = xp.exp(x - xp.max(x, axis=-1, keepdims=True))
    return e / xp.sum(e, axis=-1, keepdims=True)


def softmax_numpy_only(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def softmax_wrong_axis(x):
    xp = _namespace()(x)
    e = xp.exp(x)
    return e / xp.sum(e, axis=0, keepdims=True)


def softmax_in_float64(x):
    xp = _namespace()(x)
    return softmax_any(xp.astype(x, xp.float64))


def softmax_that_fails(x):
    raise RuntimeError("not written yet")


SOLUTIONS = {
    "ex-cupy-softmax": lambda: (softmax_any, {}),
    "ex-cupy-transfer-bytes": lambda: (3 * 7000 * 7000 * 4, {}),
}

WRONG_ANSWERS = {
    "ex-cupy-softmax": lambda: [
        (softmax_numpy_only, "on a torch tensor"),
        (softmax_wrong_axis, "values differ"),
        (softmax_in_float64, "dtype is torch.float64"),
        (softmax_that_fails, "raised RuntimeError"),
        (np.array([0.1, 0.2]), "expected a function"),
    ],
    "ex-cupy-transfer-bytes": lambda: [
        (2 * 7000 * 7000 * 4, "too small"),
        (3 * 7000 * 7000 * 8, "too large"),
        ("588 MB", "expected a number"),
    ],
}
