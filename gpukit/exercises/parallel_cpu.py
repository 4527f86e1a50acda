"""Chapter 2, parallel Python on the CPU: what its exercises expect, and how a wrong answer is told apart.

- ``ex-par-dask-mean``: a Dask graph (one task per fold and one that averages them), checked as a graph and
  then computed;
- ``ex-par-streams``: a function that makes one torch generator per worker on the lesson's device, checked
  for what makes streams fit for parallel work (its own device, distinct, reproducible, no overlap with the
  next seed's streams: :func:`gpukit.topics.random_streams.torch_stream_problems`);
- ``ex-par-pi``: a Monte Carlo estimate of pi per worker, drawn on the device from each worker's generator;
- ``ex-par-predict-matmul``: ``predicted_ms(peak_flops, bandwidth)``, the least time of the lesson's n x n float64
  product before it is timed with 1 and 2 threads (:mod:`._predicting`: tried on two made-up processors and on
  this CPU's estimated peak and measured bandwidth; the classic mistakes are named).
"""

from __future__ import annotations

import numpy as np

from gpukit.base.errors import error_line
from gpukit.core.arrays import library_of
from gpukit.topics.random_streams import torch_generators, torch_stream_problems

from ._predicting import Work, function_exercise
from .checking import Exercise, answer_device, keep_output, kept_output, register

# ------------------------------------------------------------------ ex-par-dask-mean


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


# ------------------------------------------------------------------ ex-par-streams
MANY_WORKERS = 16


# The learner's maker of generators is a function, which carries no device: it is given the lesson's
# (answer_device's default), and the generators it makes there are judged.
def _stream_problems(answer) -> str | None:
    return torch_stream_problems(answer, answer_device())


def _distinct_streams(answer) -> int:
    """How many of ``MANY_WORKERS`` workers draw numbers no other worker draws (seed 7)."""
    import torch

    rows = [tuple(torch.rand(4, generator=g, device=g.device).tolist())
            for g in answer(7, MANY_WORKERS, answer_device())]
    return sum(rows.count(row) == 1 for row in rows)


# ------------------------------------------------------------------ ex-par-pi
PI_SEED, PI_WORKERS, PI_POINTS = 2026, 4, 10_000


def _pi_generators() -> list:
    """The workers' generators, on the lesson's device: the learner's function is given them, so it carries no
    device of its own (answer_device's default)."""
    return torch_generators(PI_SEED, PI_WORKERS, device=answer_device())


def pi_per_worker(generators, n_points: int):
    """The reference: each worker draws its points on its generator's device and keeps the estimate there."""
    import torch

    estimates = []
    for g in generators:
        points = torch.rand(n_points, 2, generator=g, device=g.device)
        inside = (points * points).sum(dim=1) <= 1.0
        estimates.append(4 * inside.float().mean())
    return torch.stack(estimates)


def _pi_expected():
    return pi_per_worker(_pi_generators(), PI_POINTS)


def _pi_problems(answer) -> str | None:
    if not callable(answer):
        return f"expected a function (def pi_estimates(generators, n_points): ...), got {type(answer).__name__}."
    generators = _pi_generators()
    untouched = [g.get_state() for g in _pi_generators()]
    try:
        keep_output(answer, answer(generators, PI_POINTS))
    except Exception as error:  # the learner's code: any error is the answer to report
        return f"your function raised {error_line(error)}"
    import torch

    idle = [k for k, g in enumerate(generators) if torch.equal(g.get_state(), untouched[k])]
    if idle:
        return (f"your function drew nothing from generator {idle[0]}: pass each worker's own generator to "
                "torch.rand (generator=g), or the workers share one stream.")
    return None


register(
    Exercise("ex-par-dask-mean", _mean_of_folds, needs=("serial_errors",), rtol=1e-9,
             method=_is_a_dask_graph_over_folds, result=_computed, writes="CPU code"),
    Exercise("ex-par-streams", lambda: MANY_WORKERS, method=_stream_problems, result=_distinct_streams,
             writes="device code"),
    # 5e-4: a point on the circle's edge may fall either side with another order of float32 operations.
    Exercise("ex-par-pi", _pi_expected, method=_pi_problems, result=kept_output, rtol=5e-4, writes="device code"),
)


# ------------------------------------------------------------------ ex-par-predict-matmul
def _float64_product(n: int, **_) -> Work:
    # n * n results of n multiply-adds (2 FLOPs each); a and b read and the product written, 8 bytes a value
    return Work(2 * n**3, 3 * 8 * n * n)


def _float64_product_mistakes(n: int, **_) -> list[tuple[str, Work]]:
    return [("counting a multiply-add as one FLOP", Work(n**3, 24 * n * n)),
            ("counting the bytes of one matrix only (a and b are read, the product written)",
             Work(2 * n**3, 8 * n * n)),
            ("counting a and b without the product that is written", Work(2 * n**3, 16 * n * n)),
            ("counting 4 bytes per value (float64 has 8)", Work(2 * n**3, 12 * n * n))]


register(function_exercise("ex-par-predict-matmul", _float64_product, _float64_product_mistakes, dtype="float64",
                           needs=("device", "n")))
