"""The book's exercises and their checks: ``check("<exercise label>", answer)``.

:mod:`gpukit.exercises.checking` is the mechanism: the registry, ``check`` and the comparison that says what
is wrong without giving the answer away. Each chapter's expected answers live in a module of their own,
named as the chapter's cases in ``tests/exercises/cases/<module>.py``, which registers them when imported. The
first ``check`` imports every chapter's module (:func:`~gpukit.exercises.checking.all_exercises`), and so does
asking this package for ``EXERCISES``; ``import gpukit`` imports none of them.
"""

from .checking import CheckResult, Exercise, all_exercises, check, compare, register

__all__ = ["EXERCISES", "CheckResult", "Exercise", "all_exercises", "check", "compare", "register"]


def __getattr__(name: str):
    """``EXERCISES``: the registry with every chapter's exercises in it."""
    if name == "EXERCISES":
        return all_exercises()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
