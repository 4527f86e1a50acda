"""Clusters on one machine, kept tidy: servers on 127.0.0.1 only, state inside the project, and a way to
see both.

- :func:`ipyparallel_cluster` and :func:`dask_cluster` configure the lesson's clusters to bind and talk on
  the loopback address only, with their files in ``_build/cache`` (:func:`gpukit.base.paths.state_dir`);
- :func:`local_ray_options` is Ray's loopback-only guard: :func:`ray_may_start` decides whether Ray may start
  here, and :func:`ray_init_options` keeps it local, with its sockets on a short path
  (:func:`gpukit.base.paths.socket_dir`) whatever the clone's path.
"""

from __future__ import annotations

import logging
import os
import secrets

from gpukit.base.arguments import require_whole_number
from gpukit.base.paths import LOOPBACK, socket_dir, state_dir
from gpukit.core.device import skip_unless
from gpukit.measuring.threads import one_thread_env

ALLOW_RAY_ENV = "GPUKIT_ALLOW_RAY"


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


# The text of a Dask preload (distributed.preloading: text with a space in it is run as a module, and its
# dask_setup(worker) called as the worker starts). A worker that closes while its heartbeat to the scheduler is
# in flight closes that connection under it, and logs "Failed to communicate with scheduler during heartbeat"
# with a traceback: Worker.close stops the heartbeat's periodic callback but does not wait for a heartbeat
# already sent, then closes its connections (distributed 2026.8.0, worker.py; dask/distributed issue #7105).
# No order of closing the client and the cluster avoids it, and the traceback reached the page of chapter 2 on
# the H100. The filter drops that one message, and only while its worker is closing; every other log passes.
QUIET_HEARTBEAT_AT_CLOSE = """
import logging

HEARTBEAT_FAILED = "Failed to communicate with scheduler during heartbeat"


def dask_setup(worker):
    def not_a_heartbeat_at_close(record):
        closing = worker.status.name in ("closing", "closed", "closing_gracefully")
        return not (closing and record.getMessage().startswith(HEARTBEAT_FAILED))

    logging.getLogger("distributed.worker").addFilter(not_a_heartbeat_at_close)
"""


def dask_cluster(n_workers: int, threads_per_worker: int = 1):
    """A started ``distributed.LocalCluster`` of worker processes on 127.0.0.1 only.

    Scratch files go to ``_build/cache/dask``; the dashboard listens on 127.0.0.1 at a free port. Dask's
    nannies already start workers with one BLAS thread each (config ``distributed.nanny.pre-spawn-environ``).
    Close it with ``cluster.close()`` (after closing its clients). Neither its workers nor its scheduler log
    the heartbeats that cross the closing (:data:`QUIET_HEARTBEAT_AT_CLOSE`, :func:`_quiet_scheduler_at_close`),
    which are no error.
    """
    from distributed import LocalCluster

    _check_workers(n_workers, "workers")
    _check_workers(threads_per_worker, "threads per worker")
    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
                           host=LOOPBACK, dashboard_address=f"{LOOPBACK}:0", local_directory=str(state_dir("dask")),
                           preload=[QUIET_HEARTBEAT_AT_CLOSE])
    _quiet_scheduler_at_close(cluster)
    return cluster


def _quiet_scheduler_at_close(cluster) -> None:
    """Drop the scheduler's "Received heartbeat from unregistered worker" while ``cluster`` closes.

    The scheduler runs in this process. Closing, the cluster removes its workers before it stops the scheduler
    (SpecCluster._close, distributed 2026.8.0), and a heartbeat a worker sent just before it was removed then
    reaches a scheduler that no longer knows it: a warning on stderr, under chapter 2's closing cell on a loaded
    machine. Every other message passes, and all of them once the cluster is gone."""
    import weakref

    closing = weakref.ref(cluster)

    def not_a_heartbeat_at_close(record: logging.LogRecord) -> bool:
        alive = closing()
        return not (alive is not None and alive.status.name in ("closing", "closed")
                    and record.getMessage().startswith("Received heartbeat from unregistered worker"))

    logging.getLogger("distributed.scheduler").addFilter(not_a_heartbeat_at_close)


def network_interfaces() -> list[str]:
    """Names of this machine's (or this network namespace's) network interfaces."""
    import psutil

    return sorted(psutil.net_if_addrs())


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
    node address 127.0.0.1 and a temp dir on a short path, since Ray puts its Unix sockets there. Call it
    before ``import ray``, and call ``ray.init`` only where :func:`ray_may_start` allows it.
    """
    _check_workers(num_cpus, "CPUs")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
    return {"num_cpus": num_cpus, "include_dashboard": False, "_node_ip_address": LOOPBACK,
            "_temp_dir": str(socket_dir("ray"))}


def local_ray_options(num_cpus: int) -> dict | None:
    """Ray's loopback-only guard: where :func:`ray_may_start` allows Ray here, the options of
    :func:`ray_init_options` (which also sets Ray's environment, so call it before ``import ray``); elsewhere
    ``None``, after printing why Ray is not started, as :func:`gpukit.skip_unless` prints a skip."""
    _check_workers(num_cpus, "CPUs")
    allowed, reason = ray_may_start()
    if not skip_unless(allowed, reason):
        return None
    return ray_init_options(num_cpus)
