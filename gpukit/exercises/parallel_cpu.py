"""Chapter 2, parallel Python on the CPU: what its exercises expect, and how a wrong answer is told apart."""

from __future__ import annotations

import numpy as np

from ..arrays import library_of
from .checking import Exercise, register


def _torch_threads_now():
    import torch

    return torch.get_num_threads()


def _first_draws_of_jumped_generators():
    from ..random_streams import first_draws, jumped_generators

    return first_draws(jumped_generators(2026, 4))


def _mean_of_folds(serial_errors):
    return np.asarray(serial_errors).mean(axis=0)


def _is_a_dask_graph_over_folds(answer, serial_errors) -> str | None:
    if library_of(answer) != "dask" or not hasattr(answer, "dask") or not hasattr(answer, "compute"):
        return (f"expected a Dask delayed task (not yet computed), got {type(answer).__name__}: build the "
                "graph with dask.delayed and pass its last task, without calling .compute().")
    n_tasks, n_folds = len(answer.dask), len(serial_errors)
    if n_tasks < n_folds + 1:
        return (f"the task graph has {n_tasks} task(s); it needs one task per fold ({n_folds}) and one more "
                "that averages them.")
    return None


def _computed(answer):
    return answer.compute()


register(
    Exercise("ex-par-torch-threads", _torch_threads_now, writes="CPU code"),
    Exercise("ex-par-dask-mean", _mean_of_folds, needs=("serial_errors",), rtol=1e-9,
             method=_is_a_dask_graph_over_folds, result=_computed, writes="CPU code"),
    Exercise("ex-par-jumped", _first_draws_of_jumped_generators, writes="CPU code"),
)
