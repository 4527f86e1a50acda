"""The book's exercises and their checks: ``check("<exercise label>", answer)``.

:mod:`gpukit.exercises.checking` is the mechanism: the registry, ``check`` and the comparison that says what
is wrong without giving the answer away. Each chapter's expected answers live in a module of their own,
named as the chapter's cases in ``tests/exercises/cases/<module>.py``; importing this package registers them.
"""

from . import (  # noqa: F401 - each module registers its chapter's exercises
    autograd,
    benchmarks,
    case_study,
    cpu_vs_gpu,
    cupy,
    distributed,
    environment,
    jax,
    kernels,
    memory,
    mps,
    parallel_cpu,
    performance,
    precision,
    profiling,
    pytorch,
    slurm,
    training_at_scale,
)
from .checking import EXERCISES, CheckResult, Exercise, check, compare, register

__all__ = ["EXERCISES", "CheckResult", "Exercise", "check", "compare", "register"]
