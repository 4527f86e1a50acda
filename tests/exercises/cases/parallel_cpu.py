"""Chapter 2 (parallel Python on the CPU): each exercise's solution, and wrong answers with a word the check's
message must contain. The wrong answers are the classic mistakes: the same seed for every worker, seed + worker,
an unseeded generator, results taken off the device one worker at a time (``.item()``), float64, one generator
for every worker, a graph computed before it is checked."""

import numpy as np
import pytest
import torch

from gpukit.core.device import pick_device

# The run's values some exercises are computed from: a stand-in for the lesson's cross-validation errors.
SERIAL_ERRORS = np.random.default_rng(0).random((8, 5))


def dask_mean_graph(errors):
    dask = pytest.importorskip("dask")
    per_fold = [dask.delayed(lambda row: row)(row) for row in errors]
    return dask.delayed(np.mean)(per_fold, axis=0)


def _dask_wrong_answers():
    dask = pytest.importorskip("dask")
    return [(SERIAL_ERRORS.mean(axis=0), "expected a Dask delayed task"),
            (dask.delayed(SERIAL_ERRORS.mean(axis=0)), "task graph has 1 task"),
            (dask.delayed(np.mean)([dask.delayed(r) for r in SERIAL_ERRORS], axis=1), "shape is (8,)"),
            (dask.delayed(np.median)([dask.delayed(r) for r in SERIAL_ERRORS], axis=0), "values differ")]


# ------------------------------------------------------------------ ex-par-streams
def worker_generators(seed, n_workers, device):
    """The lesson's solution: one child seed per worker from SeedSequence, a generator on the device for each."""
    generators = []
    for child in np.random.SeedSequence(seed).spawn(n_workers):
        child_seed = int(child.generate_state(1, dtype=np.uint64)[0])
        generators.append(torch.Generator(device=device).manual_seed(child_seed))
    return generators


def same_seed_for_all(seed, n_workers, device):
    return [torch.Generator(device=device).manual_seed(seed) for _ in range(n_workers)]


def seed_plus_worker(seed, n_workers, device):
    return [torch.Generator(device=device).manual_seed(seed + worker) for worker in range(n_workers)]


def never_seeded(seed, n_workers, device):
    return [torch.Generator(device=device) for _ in range(n_workers)]


def seeded_from_the_clock(seed, n_workers, device):
    generators = [torch.Generator(device=device) for _ in range(n_workers)]
    for g in generators:
        g.seed()  # a fresh, non-deterministic seed: independent, but no run can be repeated
    return generators


def one_shared_generator(seed, n_workers, device):
    shared = torch.Generator(device=device).manual_seed(seed)
    return [shared] * n_workers


def on_the_cpu(seed, n_workers, device):
    return worker_generators(seed, n_workers, "cpu")


def numpy_generators(seed, n_workers, device):
    return [np.random.default_rng(child) for child in np.random.SeedSequence(seed).spawn(n_workers)]


# ------------------------------------------------------------------ ex-par-pi
def pi_estimates(generators, n_points):
    """The lesson's solution: every worker draws on its generator's device; the estimates stay there."""
    estimates = []
    for g in generators:
        points = torch.rand(n_points, 2, generator=g, device=g.device)
        inside = (points**2).sum(dim=1) <= 1
        estimates.append(4 * inside.float().mean())
    return torch.stack(estimates)


def pi_global_generator(generators, n_points):
    return torch.stack([4 * ((torch.rand(n_points, 2, device=g.device) ** 2).sum(dim=1) <= 1).float().mean()
                        for g in generators])


def pi_first_generator_only(generators, n_points):
    return pi_estimates([generators[0]] * len(generators), n_points)


def pi_as_python_floats(generators, n_points):
    return [float(e.item()) for e in pi_estimates(generators, n_points)]


def pi_in_float64(generators, n_points):
    return pi_estimates(generators, n_points).double()


def pi_in_numpy(generators, n_points):
    return pi_estimates(generators, n_points).cpu().numpy()


def pi_wrong_radius(generators, n_points):
    return torch.stack([4 * ((torch.rand(n_points, 2, generator=g, device=g.device) ** 2).sum(dim=1) <= 0.5)
                        .float().mean() for g in generators])


def pi_that_fails(generators, n_points):
    raise NotImplementedError("to do")


N = 1024


def predicted_ms(peak_flops, bandwidth):
    """The lesson's solution of ex-par-predict-matmul."""
    return 1e3 * max(2 * N**3 / peak_flops, 3 * 8 * N * N / bandwidth)


def prediction_with(flops, nbytes):
    return lambda peak_flops, bandwidth: 1e3 * max(flops / peak_flops, nbytes / bandwidth)


SOLUTIONS = {
    "ex-par-predict-matmul": lambda: (predicted_ms, {"device": "cpu", "n": N}),
    "ex-par-dask-mean": lambda: (dask_mean_graph(SERIAL_ERRORS), {"serial_errors": SERIAL_ERRORS}),
    "ex-par-streams": lambda: (worker_generators, {}),
    "ex-par-pi": lambda: (pi_estimates, {}),
}


def _streams_wrong_answers():
    wrong = [(same_seed_for_all, "draw the same numbers"), (seed_plus_worker, "SeedSequence"),
             (never_seeded, "draw the same numbers"), (seeded_from_the_clock, "same seed, your function gave"),
             (one_shared_generator, "the same generator object"), (numpy_generators, "torch.Generator"),
             (lambda seed, n, device: worker_generators(seed, n - 1, device), "list of 4"),
             ("SeedSequence", "expected a function")]
    if pick_device() != "cpu":  # the wrong device can be told apart only where the lesson's device is not the CPU
        wrong.append((on_the_cpu, "the lesson's device is"))
    return wrong


WRONG_ANSWERS = {
    "ex-par-predict-matmul": lambda: [
        (prediction_with(N**3, 24 * N * N), "multiply-add as one FLOP"),
        (prediction_with(2 * N**3, 8 * N * N), "one matrix only"),
        (prediction_with(2 * N**3, 16 * N * N), "without the product"),
        (prediction_with(2 * N**3, 12 * N * N), "4 bytes per value"),
        (prediction_with(2 * N**3, 48 * N * N), "too long"),
        (lambda peak_flops, bandwidth: predicted_ms(peak_flops, bandwidth) * 1e3, "a thousand times off"),
        (lambda peak_flops, bandwidth: None, "replace the placeholder"),
        (predicted_ms(1e12, 1e11), "expected your function itself"),
    ],
    "ex-par-dask-mean": _dask_wrong_answers,
    "ex-par-streams": _streams_wrong_answers,
    "ex-par-pi": lambda: [(pi_global_generator, "drew nothing from generator 0"),
                          (pi_first_generator_only, "drew nothing from generator 1"),
                          (pi_as_python_floats, "expected an array"),
                          (pi_in_float64, "dtype is torch.float64"),
                          (pi_in_numpy, "expected a torch array"),
                          (pi_wrong_radius, "values differ"),
                          (pi_that_fails, "raised NotImplementedError"),
                          (3.14, "expected a function")],
}


# The planted device mistakes (tests/exercises/test_planted_device_mistakes.py).
DEVICE_MISTAKES = {
    "ex-par-streams": {
        "numpy_generators": "made NumPy generators, which draw on the host only: every worker's numbers would be "
                            "copied to the device",
    },
    "ex-par-pi": {
        "pi_in_numpy": "copied the estimates to the host (.cpu().numpy()) instead of leaving them on the device",
    },
}
