"""Checking a reader's answer to an exercise, and saying exactly what is wrong with it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Number

import numpy as np


@dataclass(frozen=True)
class CheckResult:
    """The verdict on one answer. It is truthy when correct, so ``assert check(...)`` works in tests."""

    correct: bool
    message: str

    def __bool__(self) -> bool:
        return self.correct

    def __repr__(self) -> str:
        return ("Correct: " if self.correct else "Not yet: ") + self.message

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))


def _number(value) -> str:
    """Whole numbers in full with thousands separators, others to six significant digits."""
    if isinstance(value, Integral) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return f"{int(value):,}"
    return f"{value:.6g}"


def _library(value) -> str:
    module = type(value).__module__.split(".", 1)[0]
    return {"jaxlib": "jax"}.get(module, module)


def _is_array(value) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _device_of(value) -> str:
    """``cuda``, ``mps``, ``meta`` or ``cpu``, whichever library the array comes from (NumPy's is the CPU)."""
    text = str(getattr(value, "device", "cpu")).lower()
    for kind in ("cuda", "mps", "meta"):
        if kind in text:
            return kind
    return "cuda" if "gpu" in text else "cpu"  # JAX names NVIDIA devices "gpu"


def _to_numpy(value) -> np.ndarray:
    if _library(value) == "torch":
        return value.detach().cpu().numpy()
    if _library(value) == "cupy":
        return value.get()
    return np.asarray(value)


def check(answer, expected, *, rtol: float = 1e-5, atol: float = 0.0, check_device: bool = True) -> CheckResult:
    """Compare ``answer`` with ``expected`` and explain the first difference found.

    The checks go from coarse to fine: missing answer, kind (array or number), array library, shape,
    dtype, device, then values within ``rtol``/``atol``.
    """
    if answer is None or answer is Ellipsis:
        return CheckResult(False, "replace the placeholder (None) with your answer and run the cell again.")
    if not _is_array(expected):
        if _is_array(answer) and math.prod(answer.shape) == 1:
            answer = answer.item()
        if not isinstance(answer, Number) or isinstance(answer, bool):
            return CheckResult(False, f"expected a number, got {type(answer).__name__} {answer!r}.")
        if not np.isclose(answer, expected, rtol=rtol, atol=atol):
            direction = "too large" if answer > expected else "too small"
            return CheckResult(False, f"{_number(answer)} is {direction} (allowed relative error {rtol:g}).")
        return CheckResult(True, f"{_number(answer)} matches.")

    if not _is_array(answer):
        return CheckResult(False, f"expected an array, got {type(answer).__name__}.")
    if _library(answer) != _library(expected):
        return CheckResult(False, f"expected a {_library(expected)} array, got a {_library(answer)} one.")
    if tuple(answer.shape) != tuple(expected.shape):
        return CheckResult(False, f"shape is {tuple(answer.shape)}, expected {tuple(expected.shape)}.")
    if str(answer.dtype) != str(expected.dtype):
        return CheckResult(False, f"dtype is {answer.dtype}, expected {expected.dtype}.")
    if check_device and _device_of(answer) != _device_of(expected):
        return CheckResult(False, f"the array is on {_device_of(answer)}, expected it on {_device_of(expected)}.")
    got, want = _to_numpy(answer), _to_numpy(expected)
    close = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    if not close.all():
        bad = np.argwhere(~close)
        first = tuple(int(i) for i in bad[0])
        return CheckResult(
            False,
            f"{len(bad)} of {close.size} values differ; first at index {first}: "
            f"got {got[first]!r}, expected {want[first]!r}.",
        )
    return CheckResult(True, f"shape {tuple(answer.shape)}, dtype {answer.dtype} and all values match.")
