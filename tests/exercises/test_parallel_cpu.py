"""Chapter 2's checks accept every right way of writing an answer, not only the lesson's solution."""

import numpy as np
import torch

from gpukit.exercises import check
from tests.support.exercise_cases import on_the_cpu  # noqa: F401 - the autouse fixture


def test_other_right_ways_to_make_worker_generators_pass():
    def from_entropy_pool(seed, n_workers, device):
        states = np.random.SeedSequence(seed).generate_state(n_workers, dtype=np.uint64)
        return [torch.Generator(device=device).manual_seed(int(s)) for s in states]

    def from_a_numpy_generator(seed, n_workers, device):
        children = np.random.default_rng(seed).spawn(n_workers)
        return tuple(torch.Generator(device=device).manual_seed(int(c.integers(2**62))) for c in children)

    assert check("ex-par-streams", from_entropy_pool)
    assert check("ex-par-streams", from_a_numpy_generator)


def test_other_right_ways_to_estimate_pi_pass():
    def columns(generators, n_points):
        estimates = torch.empty(len(generators), device=generators[0].device)
        for k, g in enumerate(generators):
            xy = torch.rand(n_points, 2, generator=g, device=g.device)
            estimates[k] = 4 * (xy[:, 0] ** 2 + xy[:, 1] ** 2 <= 1).sum() / n_points
        return estimates

    assert check("ex-par-pi", columns)
