"""Chapter 2 (parallel Python on the CPU): each exercise's solution, and wrong answers with a word the check's
message must contain."""

import numpy as np
import pytest
import torch

from gpukit.random_streams import first_draws, jumped_generators, spawned_generators

# The run's values some exercises are computed from: a stand-in for the lesson's cross-validation errors.
SERIAL_ERRORS = np.random.default_rng(0).random((8, 5))


def dask_mean_graph(errors):
    dask = pytest.importorskip("dask")
    per_fold = [dask.delayed(lambda row: row)(row) for row in errors]
    return dask.delayed(np.mean)(per_fold, axis=0)


def _jumped_solution():
    base = np.random.PCG64(2026)
    return first_draws([np.random.Generator(base.jumped(i)) for i in range(4)]), {}


def _dask_wrong_answers():
    dask = pytest.importorskip("dask")
    return [(SERIAL_ERRORS.mean(axis=0), "expected a Dask delayed task"),
            (dask.delayed(SERIAL_ERRORS.mean(axis=0)), "task graph has 1 task"),
            (dask.delayed(np.mean)([dask.delayed(r) for r in SERIAL_ERRORS], axis=1), "shape is (8,)"),
            (dask.delayed(np.median)([dask.delayed(r) for r in SERIAL_ERRORS], axis=0), "values differ")]


SOLUTIONS = {
    "ex-par-torch-threads": lambda: (torch.get_num_threads(), {}),
    "ex-par-dask-mean": lambda: (dask_mean_graph(SERIAL_ERRORS), {"serial_errors": SERIAL_ERRORS}),
    "ex-par-jumped": _jumped_solution,
}

WRONG_ANSWERS = {
    "ex-par-torch-threads": lambda: [(torch.get_num_threads() + 1, "too large"), ("two", "expected a number")],
    "ex-par-dask-mean": _dask_wrong_answers,
    "ex-par-jumped": lambda: [(first_draws(spawned_generators(2026, 4)), "values differ"),
                              (first_draws(jumped_generators(2026, 3)), "shape is (3, 4)"),
                              (first_draws(jumped_generators(2026, 4)).astype(np.float64), "dtype is float64")],
}
