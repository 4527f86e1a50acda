"""Chapter 3, CuPy: what its exercises expect, and how a wrong answer is told apart."""

from __future__ import annotations

import numpy as np

from ..arrays import library_of
from .checking import Exercise, compare, register

_SOFTMAX_VALUES = ((1.0, 2.0, 3.0), (-1.0, 0.5, 4.0))


def _softmax_inputs() -> dict[str, object]:
    """The arrays a reader's array-API softmax is tried on: NumPy float64 and torch float32."""
    import torch

    return {"a NumPy array": np.array(_SOFTMAX_VALUES),
            "a torch tensor": torch.tensor(_SOFTMAX_VALUES, dtype=torch.float32)}


def _softmax_expected(x):
    """softmax over the last axis, in the library and dtype of ``x``."""
    if library_of(x) == "torch":
        import torch

        return torch.softmax(x, dim=-1)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_on_torch():
    return _softmax_expected(_softmax_inputs()["a torch tensor"])


def _runs_on_numpy_and_torch(answer) -> str | None:
    if not callable(answer):
        return f"expected a function (def softmax(x): ...), got {type(answer).__name__}."
    for what, x in _softmax_inputs().items():
        try:
            out = answer(x)
        except Exception as error:  # the reader's code: any error is the answer to report
            first_line = (str(error).strip().splitlines() or [""])[0][:200]
            return f"on {what} your function raised {type(error).__name__}: {first_line}"
        verdict = compare(out, _softmax_expected(x))
        if not verdict:
            return f"on {what}: {verdict.message}"
    return None


def _called_on_a_torch_tensor(answer):
    return answer(_softmax_inputs()["a torch tensor"])


register(
    Exercise("ex-cupy-softmax", _softmax_on_torch, method=_runs_on_numpy_and_torch,
             result=_called_on_a_torch_tensor, writes="device code"),
    Exercise("ex-cupy-transfer-bytes", lambda: 3 * 7000 * 7000 * np.dtype("float32").itemsize, writes="a number"),
)
