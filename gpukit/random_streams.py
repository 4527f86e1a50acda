"""Random numbers for parallel workers: one independent, reproducible stream per worker.

NumPy's :class:`~numpy.random.SeedSequence` turns one seed into any number of child seeds whose streams
do not overlap in practice; :func:`spawned_generators` and :func:`jumped_generators` give a worker its
own :class:`numpy.random.Generator`; :func:`torch_generators` seeds torch generators on any device from
the same seed sequence. :func:`first_draws` shows what each stream starts with.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .arguments import require_whole_number


def spawned_generators(seed: int, n_workers: int) -> list[np.random.Generator]:
    """One generator per worker from ``SeedSequence(seed).spawn(n_workers)``."""
    require_whole_number("a seed", seed)
    require_whole_number("n_workers", n_workers, 1)
    return [np.random.default_rng(child) for child in np.random.SeedSequence(seed).spawn(n_workers)]


def jumped_generators(seed: int, n_workers: int) -> list[np.random.Generator]:
    """One generator per worker: PCG64 seeded with ``seed``, advanced by ``i`` x 2**127 steps for worker ``i``."""
    require_whole_number("a seed", seed)
    require_whole_number("n_workers", n_workers, 1)
    base = np.random.PCG64(seed)
    return [np.random.Generator(base.jumped(i)) for i in range(n_workers)]


def first_draws(generators: Sequence[np.random.Generator], size: int = 4, high: int = 1000) -> np.ndarray:
    """The first ``size`` integers in ``[0, high)`` of each generator: one row per worker.

    Integers from NumPy's PCG64 are the same on every platform, so these rows can be compared anywhere.
    """
    require_whole_number("size", size, 1)
    require_whole_number("high", high, 1)
    if not generators or not all(isinstance(g, np.random.Generator) for g in generators):
        raise TypeError(f"expected a non-empty list of numpy.random.Generator, not {generators!r}")
    return np.stack([g.integers(0, high, size=size) for g in generators])


def shared_rows(a: np.ndarray, b: np.ndarray) -> list[tuple[int, int]]:
    """Pairs ``(i, j)`` where row ``i`` of ``a`` equals row ``j`` of ``b``: streams that are not independent."""
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"expected two 2-d arrays with the same number of columns, got shapes {a.shape} and {b.shape}")
    return [(i, j) for i in range(len(a)) for j in range(len(b)) if np.array_equal(a[i], b[j])]


def torch_generators(seed: int, n_workers: int, device: str = "cpu") -> list:
    """One ``torch.Generator`` per worker on ``device``, each seeded from a child of ``SeedSequence(seed)``.

    The generator must live on the device that draws the numbers (a CUDA generator for CUDA tensors).
    """
    import torch

    require_whole_number("a seed", seed)
    require_whole_number("n_workers", n_workers, 1)
    generators = []
    for child in np.random.SeedSequence(seed).spawn(n_workers):
        child_seed = int(child.generate_state(1, dtype=np.uint64)[0])
        generators.append(torch.Generator(device=device).manual_seed(child_seed))
    return generators
