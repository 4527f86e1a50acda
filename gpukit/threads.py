"""Threads on the CPU: how many cores a process may use, and how many threads each library starts.

NumPy's BLAS reads ``OMP_NUM_THREADS`` (and friends) once, when it is loaded; threadpoolctl changes it in
a running process; PyTorch carries its own BLAS and OpenMP and has its own switch,
``torch.set_num_threads``. Everything here that changes a thread setting restores it afterwards.
threadpoolctl is optional: without it the NumPy side says so (:func:`require_threadpoolctl`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from .arguments import is_whole_number, require_whole_number
from .timing import Timing, benchmark

# The variables through which the common BLAS and OpenMP runtimes read their thread count at start-up.
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def require_threadpoolctl():
    """The threadpoolctl module, or an ``ImportError`` that says how to install it."""
    try:
        import threadpoolctl
    except ImportError as error:
        from .optional import install_hint

        hint = install_hint("threadpoolctl")
        raise ImportError(f"threadpoolctl is needed to see and limit NumPy's BLAS threads; {hint}") from error
    return threadpoolctl


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
    threadpool_info = require_threadpoolctl().threadpool_info

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
    threadpool_limits = require_threadpoolctl().threadpool_limits

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


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Limit PyTorch's own thread pool (its BLAS and OpenMP) to ``count`` threads inside a ``with`` block.

    The previous setting is restored on leaving the block, even after an error.
    """
    count = require_whole_number("a thread count", count, 1)
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def cpu_threads(count: int) -> Iterator[None]:
    """Limit PyTorch and the BLAS libraries NumPy uses to ``count`` threads inside a ``with`` block.

    The previous settings are restored on leaving the block, even after an error. Without threadpoolctl
    only PyTorch is limited, and the first such block says so.
    """
    count = require_whole_number("a thread count", count, 1)
    try:
        threadpool_limits = require_threadpoolctl().threadpool_limits
    except ImportError as missing:
        _say_once(f"Only PyTorch's threads are limited: {missing}")
        with torch_threads(count):
            yield
        return
    with torch_threads(count), threadpool_limits(limits=count):
        yield


_said: set[str] = set()


def _say_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        print(message)


def load_average() -> float | None:
    """The machine's one-minute load average (runnable processes), or None where the system has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
