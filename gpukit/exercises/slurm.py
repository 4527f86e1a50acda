"""Chapter 11, running on a SLURM cluster: what its exercises expect, and how a wrong answer is told apart."""

from __future__ import annotations

import numpy as np

from .checking import Exercise, register

SLURM_SWEEP = {"learning_rates": 5, "seeds": 4, "at_once": 6}  # the grid and queue limit of ex-slurm-array


def _an_array_spec_for_the_sweep(answer) -> str | None:
    """What is wrong with an --array value for SLURM_SWEEP's grid, counted from 0 as sweep_task.py counts."""
    from ..slurm import array_indices

    if not isinstance(answer, str):
        return f"expected the --array value as a string such as '0-9%2', got {type(answer).__name__}."
    try:
        indices, limit = array_indices(answer)
    except ValueError as error:
        return f"sbatch would refuse {answer!r}: {error}."
    points = SLURM_SWEEP["learning_rates"] * SLURM_SWEEP["seeds"]
    if indices and indices[0] != 0:
        return (f"the first task id is {indices[0]}: the task script uses SLURM_ARRAY_TASK_ID as an index into "
                "the grid, which starts at 0.")
    if indices != list(range(len(indices))):
        return "the task ids have gaps: every point of the grid needs its own task."
    if len(indices) != points:
        return f"{answer!r} makes {len(indices)} tasks, but the grid has {points} points."
    if limit is None:
        return "every task may run at once: add a limit after a % sign."
    if limit != SLURM_SWEEP["at_once"]:
        return f"{answer!r} lets {limit} tasks run at once, not the number the exercise allows."
    return None


def _array_task_ids(answer):
    from ..slurm import array_indices

    return np.array(array_indices(answer)[0])


register(
    Exercise("ex-slurm-cpus-per-task", lambda: 4 * (1 + 5), rtol=0.0, writes="a number"),
    Exercise("ex-slurm-array", lambda: np.arange(SLURM_SWEEP["learning_rates"] * SLURM_SWEEP["seeds"]),
             method=_an_array_spec_for_the_sweep, result=_array_task_ids, writes="a script"),
)
