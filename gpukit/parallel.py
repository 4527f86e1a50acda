"""Parallel work on one machine, kept tidy: state inside the project, servers on 127.0.0.1 only.

The lesson on parallel Python starts thread pools, an ipyparallel cluster, a Dask cluster and (in a test)
Ray. This module holds what a reader need not see:

- where their state goes (:func:`project_root`, :func:`state_dir`: ``<repo>/_build/cache/<name>``, never
  the home folder; ``GPUKIT_PROJECT_ROOT`` overrides the repository's location);
- clusters configured to bind and talk on the loopback address only (:func:`ipyparallel_cluster`,
  :func:`dask_cluster`, :func:`ray_init_options` with :func:`ray_may_start`), and :func:`listening_addresses`
  to see that they do;
- BLAS thread measurements (:func:`numpy_matmul_scaling`, :func:`torch_matmul_scaling`,
  :func:`fresh_python_blas_threads`), which always restore the thread settings they change;
- a small cross-validation workload (:func:`make_regression`, :func:`ridge_fold_errors`,
  :func:`cross_validate`) whose tasks are independent, so any tool can map it.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from .sweep import torch_threads
from .timing import Timing, benchmark
from .arguments import is_whole_number, require_whole_number

ROOT_ENV = "GPUKIT_PROJECT_ROOT"
LOOPBACK = "127.0.0.1"
_ROOT_MARKERS = ("_toc.yml", "_config.yml")
# The variables through which the common BLAS and OpenMP runtimes read their thread count at start-up.
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


# --------------------------------------------------------------------------------------------- folders
def project_root() -> Path:
    """The book's repository: ``GPUKIT_PROJECT_ROOT`` if set, else the folder holding ``_toc.yml`` and
    ``_config.yml`` above this package (an editable install) or above the current folder."""
    override = os.environ.get(ROOT_ENV, "").strip()
    if override:
        path = Path(override).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"{ROOT_ENV}={override!r} is not an existing folder")
        return path.resolve()
    for start in (Path(__file__).resolve().parent, Path.cwd().resolve()):
        for folder in (start, *start.parents):
            if all((folder / marker).is_file() for marker in _ROOT_MARKERS):
                return folder
    raise FileNotFoundError(
        "cannot find the book's repository (a folder with _toc.yml and _config.yml) above the gpukit package "
        f"or the current folder {Path.cwd()}; set {ROOT_ENV} to it"
    )


def state_dir(name: str) -> Path:
    """``<repo>/_build/cache/<name>``, created if needed: where a tool keeps its state and scratch files."""
    if not isinstance(name, str) or not name.strip() or name in (".", "..") or any(c in name for c in "/\\"):
        raise ValueError(f"a state folder name must be one plain folder name such as 'dask', not {name!r}")
    path = project_root() / "_build" / "cache" / name
    path.mkdir(parents=True, exist_ok=True)
    return path


# --------------------------------------------------------------------------------------------- threads
def usable_cores() -> int:
    """Logical cores this process may run on (its CPU affinity where the system tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def thread_counts(cores: int | None = None) -> list[int]:
    """Thread counts worth measuring: 1, 2, then doubling up to ``cores`` (and ``cores`` itself)."""
    cores = require_whole_number("cores", usable_cores() if cores is None else cores, 1)
    counts = {1, 2, cores}
    step = 4
    while step < cores:
        counts.add(step)
        step *= 2
    return sorted(counts)


def blas_threads() -> int | None:
    """How many threads NumPy's BLAS uses right now (None when threadpoolctl cannot see a BLAS)."""
    from threadpoolctl import threadpool_info

    found = [lib["num_threads"] for lib in threadpool_info() if lib.get("user_api") == "blas"]
    return max(found) if found else None


def _random_square(n: int, seed: int = 0) -> np.ndarray:
    require_whole_number("the matrix size n", n, 1)
    return np.random.default_rng(seed).standard_normal((n, n))


def _check_threads(threads: Sequence[int]) -> list[int]:
    threads = list(threads)
    if not threads or any(not is_whole_number(t) or t < 1 for t in threads):
        raise ValueError(f"threads must be a non-empty list of whole numbers >= 1, not {threads!r}")
    return threads


def numpy_matmul_scaling(n: int, threads: Sequence[int] = (1, 2), repeats: int = 5) -> dict[int, Timing]:
    """Time an ``n`` x ``n`` float64 matmul in NumPy with each BLAS thread count in ``threads``.

    The limit is set with threadpoolctl inside a ``with`` block, so NumPy's setting is restored afterwards.
    """
    from threadpoolctl import threadpool_limits

    threads = _check_threads(threads)
    a, b = _random_square(n, 1), _random_square(n, 2)
    timings = {}
    for count in threads:
        with threadpool_limits(limits=count, user_api="blas"):
            timings[count] = benchmark(np.matmul, a, b, repeats=repeats, warmup=1, flops=2.0 * n**3,
                                       label=f"NumPy {n}x{n} matmul, {count} thread{'s' * (count > 1)}")
    return timings


def torch_matmul_scaling(n: int, threads: Sequence[int] = (1, 2), repeats: int = 5) -> dict[int, Timing]:
    """The same with a float64 torch matmul on the CPU, set with ``torch.set_num_threads`` and restored.

    PyTorch carries its own BLAS and OpenMP inside its libraries, so threadpoolctl's NumPy limit does not
    reach it; ``torch.set_num_threads`` does.
    """
    import torch

    threads = _check_threads(threads)
    a = torch.from_numpy(_random_square(n, 1))
    b = torch.from_numpy(_random_square(n, 2))
    timings = {}
    for count in threads:
        with torch_threads(count):
            timings[count] = benchmark(torch.matmul, a, b, repeats=repeats, warmup=1, flops=2.0 * n**3,
                                       label=f"torch {n}x{n} matmul, {count} thread{'s' * (count > 1)}")
    return timings


_FRESH_PYTHON = """
import json, os, sys
set_after = json.loads(sys.argv[1])
import numpy
os.environ.update(set_after)  # too late: the BLAS library has already read its settings
from threadpoolctl import threadpool_info
found = [lib["num_threads"] for lib in threadpool_info() if lib.get("user_api") == "blas"]
print(json.dumps(max(found) if found else None))
"""


def fresh_python_blas_threads(before_import: dict[str, str] | None = None,
                              after_import: dict[str, str] | None = None) -> int | None:
    """Start a new Python, import NumPy, and return how many threads its BLAS uses.

    ``before_import`` goes into the new process's environment (so it is there when NumPy loads);
    ``after_import`` is written into ``os.environ`` only after ``import numpy``. Thread variables inherited
    from this process are removed first, so the answer shows only the effect of the two arguments.
    """
    for name, given in (("before_import", before_import), ("after_import", after_import)):
        if given is not None and not (isinstance(given, dict)
                                      and all(isinstance(k, str) and isinstance(v, str) for k, v in given.items())):
            raise TypeError(f"{name} must be a dict of str to str, such as {{'OMP_NUM_THREADS': '1'}}, not {given!r}")
    env = {k: v for k, v in os.environ.items() if k not in THREAD_ENV_VARS}
    env.update(before_import or {})
    result = subprocess.run([sys.executable, "-c", _FRESH_PYTHON, json.dumps(after_import or {})], env=env,
                            capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"the fresh Python failed: {result.stderr.strip()[-500:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def one_thread_env(threads: int = 1) -> dict[str, str]:
    """The environment that makes BLAS and OpenMP in a new worker process use ``threads`` threads."""
    require_whole_number("threads", threads, 1)
    return {name: str(threads) for name in THREAD_ENV_VARS}


# -------------------------------------------------------------------------------------------- clusters
def _check_workers(n, what: str) -> None:
    require_whole_number(f"the number of {what}", n, 1)


def ipyparallel_cluster(n_engines: int, blas_threads_per_engine: int = 1):
    """An ``ipyparallel.Cluster`` of local engines, not yet started, on 127.0.0.1 only.

    Its profile (connection files, logs) lives in ``_build/cache/ipython``; each engine's BLAS uses
    ``blas_threads_per_engine`` threads, so that the engines do not fight over the cores.
    Start it with ``cluster.start_and_connect_sync()`` and stop it with ``cluster.stop_cluster_sync()``.
    """
    import ipyparallel
    from traitlets.config import Config

    _check_workers(n_engines, "engines")
    ipython_dir = state_dir("ipython")
    profile_dir = ipython_dir / "profile_gpukit"
    profile_dir.mkdir(exist_ok=True)
    config = Config()
    config.EngineLauncher.environment = {**one_thread_env(blas_threads_per_engine), "IPYTHONDIR": str(ipython_dir)}
    config.ControllerLauncher.environment = {"IPYTHONDIR": str(ipython_dir)}
    return ipyparallel.Cluster(n=n_engines, controller_ip=LOOPBACK, profile_dir=str(profile_dir), config=config,
                               log_level=logging.ERROR)  # engines stopped by SIGTERM would log warnings


def dask_cluster(n_workers: int, threads_per_worker: int = 1):
    """A started ``distributed.LocalCluster`` of worker processes on 127.0.0.1 only.

    Scratch files go to ``_build/cache/dask``; the dashboard listens on 127.0.0.1 at a free port. Dask's
    nannies already start workers with one BLAS thread each (config ``distributed.nanny.pre-spawn-environ``).
    Close it with ``cluster.close()`` (after closing its clients).
    """
    from distributed import LocalCluster

    _check_workers(n_workers, "workers")
    _check_workers(threads_per_worker, "threads per worker")
    return LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
                        host=LOOPBACK, dashboard_address=f"{LOOPBACK}:0", local_directory=str(state_dir("dask")))


def network_interfaces() -> list[str]:
    """Names of this machine's (or this network namespace's) network interfaces."""
    import psutil

    return sorted(psutil.net_if_addrs())


ALLOW_RAY_ENV = "GPUKIT_ALLOW_RAY"


def ray_may_start() -> tuple[bool, str]:
    """Whether this process may start Ray here, and the reason either way.

    Ray contacts outside addresses (a cloud metadata service, public DNS) when it starts, even with its
    dashboard and usage statistics switched off, and some sites (the machines that build this book among
    them) forbid that. So Ray may start where the only network interface is loopback (inside
    ``unshare -n``), or where ``GPUKIT_ALLOW_RAY=1`` says the network may be used.
    """
    others = [name for name in network_interfaces() if name != "lo"]
    if not others:
        return True, "the only network interface is loopback"
    if os.environ.get(ALLOW_RAY_ENV, "").strip().lower() in {"1", "true", "yes"}:
        return True, f"{ALLOW_RAY_ENV} is set"
    return False, (
        f"Ray is not started: it contacts outside addresses when it starts, and this machine has network "
        f"interfaces ({', '.join(others)}). Set {ALLOW_RAY_ENV}=1 where that is allowed (a laptop, most "
        "clusters) and run these cells again, or run them inside a loopback-only network namespace."
    )


def ray_init_options(num_cpus: int) -> dict:
    """Keyword arguments for ``ray.init`` that keep Ray local, quiet and inside the project.

    Sets, for this process and the Ray processes it starts: no usage statistics, token authentication with
    a fresh token kept in the environment (not in ``~/.ray``); returns ``num_cpus``, no dashboard, the
    node address 127.0.0.1 and a temp dir in ``_build/cache/ray``. Call it before ``import ray``, and call
    ``ray.init`` only where :func:`ray_may_start` allows it.
    """
    _check_workers(num_cpus, "CPUs")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
    return {"num_cpus": num_cpus, "include_dashboard": False, "_node_ip_address": LOOPBACK,
            "_temp_dir": str(state_dir("ray"))}


def listening_addresses(pid: int | None = None) -> set[str]:
    """The IP addresses on which process ``pid`` (default: this one) and all its descendants listen (TCP)."""
    import psutil

    root = psutil.Process(pid)
    addresses = set()
    for process in (root, *root.children(recursive=True)):
        try:
            connections = (process.net_connections(kind="tcp") if hasattr(process, "net_connections")
                           else process.connections(kind="tcp"))
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        addresses.update(c.laddr.ip for c in connections if c.status == psutil.CONN_LISTEN)
    return addresses


def load_average() -> float | None:
    """The machine's one-minute load average (runnable processes), or None where the system has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


# -------------------------------------------------------------------------------------------- workload
def make_regression(n_samples: int, n_features: int, noise: float = 1.0, seed: int = 0):
    """A linear-regression data set ``(X, y)`` with decaying true coefficients and Gaussian noise."""
    _check_workers(n_samples, "samples")
    _check_workers(n_features, "features")
    if not isinstance(noise, (int, float)) or noise < 0:
        raise ValueError(f"noise must be a number >= 0, not {noise!r}")
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_samples, n_features))
    coef = 1.0 / np.arange(1, n_features + 1)
    y = X @ coef + noise * rng.standard_normal(n_samples)
    return X, y


def ridge_fold_errors(X, y, fold: int, n_folds: int, alphas: Iterable[float]) -> np.ndarray:
    """Validation mean squared error of ridge regression on one fold, for every penalty in ``alphas``.

    Fold ``fold`` of ``n_folds`` contiguous blocks is held out; one SVD of the training rows serves every
    penalty. One call is one independent task of a cross-validation.
    """
    X, y = np.asarray(X), np.asarray(y)
    alphas = np.asarray(list(alphas), dtype=float)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"X must be 2-d and y 1-d with one value per row of X; got shapes {X.shape} and {y.shape}")
    if not is_whole_number(n_folds) or not 2 <= n_folds <= X.shape[0]:
        raise ValueError(f"n_folds must be a whole number from 2 to the number of rows {X.shape[0]}, not {n_folds!r}")
    if not is_whole_number(fold) or not 0 <= fold < n_folds:
        raise ValueError(f"fold must be a whole number from 0 to {n_folds - 1}, not {fold!r}")
    if alphas.size == 0 or (alphas < 0).any():
        raise ValueError(f"alphas must be one or more penalties >= 0, not {alphas.tolist()!r}")
    edges = np.linspace(0, X.shape[0], n_folds + 1).astype(int)
    held_out = np.zeros(X.shape[0], dtype=bool)
    held_out[edges[fold]:edges[fold + 1]] = True
    U, s, Vt = np.linalg.svd(X[~held_out], full_matrices=False)
    Uty = U.T @ y[~held_out]
    shrink = s / (s**2 + alphas[:, None])  # one row per penalty
    coefs = (shrink * Uty) @ Vt  # (n_alphas, n_features)
    residuals = y[held_out][None, :] - coefs @ X[held_out].T
    return (residuals**2).mean(axis=1)


def cross_validate(X, y, n_folds: int, alphas: Iterable[float]) -> np.ndarray:
    """All folds one after another: an array of shape (n_folds, n_alphas). The serial reference."""
    alphas = list(alphas)
    return np.stack([ridge_fold_errors(X, y, fold, n_folds, alphas) for fold in range(n_folds)])


def worker_count(cores: int | None = None, cap: int = 8) -> int:
    """How many worker processes the lesson starts: one per core, at least 2 and at most ``cap``."""
    cores = usable_cores() if cores is None else cores
    _check_workers(cores, "cores")
    _check_workers(cap, "workers allowed (cap)")
    return max(2, min(cores, cap))


def workload_size(n_workers: int) -> dict:
    """Sizes for the lesson's cross-validation: every task has the same size; there are 4 tasks per worker."""
    _check_workers(n_workers, "workers")
    return {"n_samples": 6_000, "n_features": 120, "noise": 3.0, "n_folds": 4 * n_workers}
