import os
from pathlib import Path

import pytest

from gpukit.base import paths
from gpukit.base.paths import LOOPBACK, socket_dir
from gpukit.topics import clusters
from gpukit.topics.clusters import local_ray_options, ray_init_options
from tests.support.booktoc import ROOT
from tests.support.netns import listening_addresses

REPO = ROOT


def test_ray_may_not_start_where_other_interfaces_exist(monkeypatch):
    monkeypatch.delenv(clusters.ALLOW_RAY_ENV, raising=False)
    monkeypatch.setattr(clusters, "network_interfaces", lambda: ["eth0", "lo"])
    allowed, reason = clusters.ray_may_start()
    assert not allowed and "eth0" in reason and clusters.ALLOW_RAY_ENV in reason


def test_ray_may_start_inside_a_loopback_only_namespace_or_when_allowed(monkeypatch):
    monkeypatch.delenv(clusters.ALLOW_RAY_ENV, raising=False)
    monkeypatch.setattr(clusters, "network_interfaces", lambda: ["lo"])
    assert clusters.ray_may_start()[0]
    monkeypatch.setattr(clusters, "network_interfaces", lambda: ["eth0", "lo"])
    monkeypatch.setenv(clusters.ALLOW_RAY_ENV, "1")
    assert clusters.ray_may_start() == (True, f"{clusters.ALLOW_RAY_ENV} is set")
    monkeypatch.setenv(clusters.ALLOW_RAY_ENV, "0")
    assert not clusters.ray_may_start()[0]


def test_ray_init_options_keep_ray_local_and_inside_the_project(monkeypatch):
    monkeypatch.delenv(paths.ROOT_ENV, raising=False)
    for name in ("RAY_USAGE_STATS_ENABLED", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN"):
        monkeypatch.setenv(name, "placeholder")  # registers the variable so the test's changes are undone
        monkeypatch.delenv(name)
    options = ray_init_options(2)
    assert options["num_cpus"] == 2
    assert options["include_dashboard"] is False
    assert options["_node_ip_address"] == LOOPBACK
    temp_dir = Path(options["_temp_dir"])
    assert temp_dir == socket_dir("ray") and temp_dir.is_dir()
    assert os.environ["RAY_USAGE_STATS_ENABLED"] == "0"
    assert os.environ["RAY_AUTH_MODE"] == "token" and len(os.environ["RAY_AUTH_TOKEN"]) == 64
    with pytest.raises(ValueError, match="CPUs"):
        ray_init_options(0)


def test_local_ray_options_skip_with_the_reason_where_ray_may_not_start(monkeypatch, capsys):
    monkeypatch.delenv(clusters.ALLOW_RAY_ENV, raising=False)
    monkeypatch.setattr(clusters, "network_interfaces", lambda: ["eth0", "lo"])
    monkeypatch.setattr(clusters, "ray_init_options", lambda num_cpus: pytest.fail("must not touch Ray's settings"))
    assert local_ray_options(2) is None
    printed = capsys.readouterr().out
    assert printed.startswith("Skipped: Ray is not started") and "eth0" in printed
    with pytest.raises(ValueError, match="CPUs"):
        local_ray_options(0)


def test_local_ray_options_are_ray_init_options_where_ray_may_start(monkeypatch):
    monkeypatch.setattr(clusters, "network_interfaces", lambda: ["lo"])
    monkeypatch.setattr(clusters, "ray_init_options", lambda num_cpus: {"num_cpus": num_cpus})
    assert local_ray_options(3) == {"num_cpus": 3}


def test_ipyparallel_cluster_is_configured_for_loopback_and_the_build_folder(monkeypatch):
    pytest.importorskip("ipyparallel")
    monkeypatch.delenv(paths.ROOT_ENV, raising=False)
    cluster = clusters.ipyparallel_cluster(2)  # configured only; not started
    assert cluster.n == 2
    assert cluster.controller_ip == LOOPBACK
    assert Path(cluster.profile_dir).parent == REPO / "_build" / "cache" / "ipython"
    assert cluster.config.EngineLauncher.environment["OMP_NUM_THREADS"] == "1"
    with pytest.raises(ValueError, match="engines"):
        clusters.ipyparallel_cluster(0)


def test_dask_cluster_listens_on_loopback_only(monkeypatch):
    pytest.importorskip("distributed")
    from distributed import Client

    monkeypatch.delenv(paths.ROOT_ENV, raising=False)
    cluster = clusters.dask_cluster(1)
    try:
        with Client(cluster) as client:
            assert client.submit(sum, [1, 2]).result() == 3
            assert client.scheduler.address.startswith(f"tcp://{LOOPBACK}:")
            assert all(w.startswith(f"tcp://{LOOPBACK}:") for w in client.scheduler_info()["workers"])
            assert listening_addresses() <= {LOOPBACK}
    finally:
        cluster.close()
    with pytest.raises(ValueError, match="workers"):
        clusters.dask_cluster(0)


def test_dask_workers_drop_only_the_heartbeat_that_a_closing_worker_loses():
    """The preload's filter, on a stand-in worker: the failed heartbeat of a closing worker is dropped, the same
    message from a running worker and any other message from a closing one are kept."""
    import logging
    from types import SimpleNamespace

    module = {}
    exec(clusters.QUIET_HEARTBEAT_AT_CLOSE, module)
    worker = SimpleNamespace(status=SimpleNamespace(name="running"))
    logger = logging.getLogger("distributed.worker")
    filters = list(logger.filters)
    module["dask_setup"](worker)
    (added,) = [f for f in logger.filters if f not in filters]
    try:
        def kept(message):
            return bool(added(logging.LogRecord("distributed.worker", logging.ERROR, __file__, 1, message, (),
                                                None)))

        heartbeat = "Failed to communicate with scheduler during heartbeat."
        assert kept(heartbeat)
        for status in ("closing", "closed", "closing_gracefully"):
            worker.status.name = status
            assert not kept(heartbeat)
            assert kept("Compute Failed")
    finally:
        logger.removeFilter(added)


def test_listening_addresses_sees_a_loopback_server():
    import socket

    with socket.socket() as server:
        server.bind((LOOPBACK, 0))
        server.listen()
        assert LOOPBACK in listening_addresses(os.getpid())
