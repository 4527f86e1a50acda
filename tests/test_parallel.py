import os
from pathlib import Path

import numpy as np
import pytest

from gpukit import parallel
from gpukit.parallel import (
    LOOPBACK,
    blas_threads,
    cross_validate,
    fresh_python_blas_threads,
    listening_addresses,
    make_regression,
    numpy_matmul_scaling,
    one_thread_env,
    project_root,
    ray_init_options,
    ridge_fold_errors,
    state_dir,
    thread_counts,
    torch_matmul_scaling,
    usable_cores,
    worker_count,
    workload_size,
)

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------- folders
def test_project_root_is_the_repository(monkeypatch):
    monkeypatch.delenv(parallel.ROOT_ENV, raising=False)
    assert project_root() == REPO


def test_project_root_found_from_notebooks_folder(monkeypatch):
    monkeypatch.delenv(parallel.ROOT_ENV, raising=False)
    monkeypatch.chdir(REPO / "notebooks")
    assert project_root() == REPO


def test_project_root_override(monkeypatch, tmp_path):
    monkeypatch.setenv(parallel.ROOT_ENV, str(tmp_path))
    assert project_root() == tmp_path.resolve()
    assert state_dir("dask") == tmp_path.resolve() / "_build" / "cache" / "dask"
    assert (tmp_path / "_build" / "cache" / "dask").is_dir()


def test_project_root_override_must_exist(monkeypatch, tmp_path):
    monkeypatch.setenv(parallel.ROOT_ENV, str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="missing"):
        project_root()


def test_state_dir_is_inside_build_folder(monkeypatch):
    monkeypatch.delenv(parallel.ROOT_ENV, raising=False)
    path = state_dir("ipython")
    assert path == REPO / "_build" / "cache" / "ipython"
    assert path.is_dir()


@pytest.mark.parametrize("bad", ["", "..", "a/b", "a\\b", None, 3])
def test_state_dir_rejects_bad_names(bad):
    with pytest.raises(ValueError, match="state folder name"):
        state_dir(bad)


# ------------------------------------------------------------------------------------------- threads
def test_thread_counts():
    assert thread_counts(1) == [1, 2]
    assert thread_counts(2) == [1, 2]
    assert thread_counts(6) == [1, 2, 4, 6]
    assert thread_counts(16) == [1, 2, 4, 8, 16]
    assert thread_counts() == thread_counts(usable_cores())


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_thread_counts_rejects_bad_cores(bad):
    with pytest.raises(ValueError, match="cores"):
        thread_counts(bad)


def test_numpy_scaling_restores_the_blas_limit():
    before = blas_threads()
    timings = numpy_matmul_scaling(64, (1, 2), repeats=2)
    assert sorted(timings) == [1, 2]
    assert all(t.median > 0 and len(t.samples) == 2 for t in timings.values())
    assert timings[1].flops == 2.0 * 64**3
    assert blas_threads() == before


def test_torch_scaling_restores_the_thread_count():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    timings = torch_matmul_scaling(64, [1, 2], repeats=2)
    assert sorted(timings) == [1, 2]
    assert torch.get_num_threads() == before


def test_torch_scaling_restores_even_after_an_error():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    with pytest.raises(ValueError, match="matrix size"):
        torch_matmul_scaling(0)
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("bad", [[], [0], [1, -2], (1.0,), [True]])
def test_scaling_rejects_bad_thread_lists(bad):
    with pytest.raises(ValueError, match="threads"):
        numpy_matmul_scaling(8, bad)


def test_omp_num_threads_counts_only_before_import():
    if blas_threads() is None:
        pytest.skip("threadpoolctl sees no BLAS for NumPy here")
    assert fresh_python_blas_threads(before_import={"OMP_NUM_THREADS": "1"}) == 1
    assert fresh_python_blas_threads(after_import={"OMP_NUM_THREADS": "1"}) == fresh_python_blas_threads()


def test_fresh_python_rejects_bad_env():
    with pytest.raises(TypeError, match="OMP_NUM_THREADS"):
        fresh_python_blas_threads(before_import={"OMP_NUM_THREADS": 1})


def test_one_thread_env():
    assert one_thread_env() == {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    assert one_thread_env(3)["OMP_NUM_THREADS"] == "3"
    with pytest.raises(ValueError, match="threads"):
        one_thread_env(0)


# ------------------------------------------------------------------------------------------ clusters
def test_worker_count():
    assert worker_count(1) == 2
    assert worker_count(4) == 4
    assert worker_count(64) == 8
    assert worker_count(64, cap=16) == 16
    with pytest.raises(ValueError, match="cores"):
        worker_count(0)


def test_ray_may_not_start_where_other_interfaces_exist(monkeypatch):
    monkeypatch.delenv(parallel.ALLOW_RAY_ENV, raising=False)
    monkeypatch.setattr(parallel, "network_interfaces", lambda: ["eth0", "lo"])
    allowed, reason = parallel.ray_may_start()
    assert not allowed and "eth0" in reason and parallel.ALLOW_RAY_ENV in reason


def test_ray_may_start_inside_a_loopback_only_namespace_or_when_allowed(monkeypatch):
    monkeypatch.delenv(parallel.ALLOW_RAY_ENV, raising=False)
    monkeypatch.setattr(parallel, "network_interfaces", lambda: ["lo"])
    assert parallel.ray_may_start()[0]
    monkeypatch.setattr(parallel, "network_interfaces", lambda: ["eth0", "lo"])
    monkeypatch.setenv(parallel.ALLOW_RAY_ENV, "1")
    assert parallel.ray_may_start() == (True, f"{parallel.ALLOW_RAY_ENV} is set")
    monkeypatch.setenv(parallel.ALLOW_RAY_ENV, "0")
    assert not parallel.ray_may_start()[0]


def test_ray_init_options_keep_ray_local_and_inside_the_project(monkeypatch):
    monkeypatch.delenv(parallel.ROOT_ENV, raising=False)
    for name in ("RAY_USAGE_STATS_ENABLED", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN"):
        monkeypatch.setenv(name, "placeholder")  # registers the variable so the test's changes are undone
        monkeypatch.delenv(name)
    options = ray_init_options(2)
    assert options["num_cpus"] == 2
    assert options["include_dashboard"] is False
    assert options["_node_ip_address"] == LOOPBACK
    assert Path(options["_temp_dir"]) == REPO / "_build" / "cache" / "ray"
    assert os.environ["RAY_USAGE_STATS_ENABLED"] == "0"
    assert os.environ["RAY_AUTH_MODE"] == "token" and len(os.environ["RAY_AUTH_TOKEN"]) == 64
    with pytest.raises(ValueError, match="CPUs"):
        ray_init_options(0)


def test_ipyparallel_cluster_is_configured_for_loopback_and_the_build_folder(monkeypatch):
    pytest.importorskip("ipyparallel")
    monkeypatch.delenv(parallel.ROOT_ENV, raising=False)
    cluster = parallel.ipyparallel_cluster(2)  # configured only; not started
    assert cluster.n == 2
    assert cluster.controller_ip == LOOPBACK
    assert Path(cluster.profile_dir).parent == REPO / "_build" / "cache" / "ipython"
    assert cluster.config.EngineLauncher.environment["OMP_NUM_THREADS"] == "1"
    with pytest.raises(ValueError, match="engines"):
        parallel.ipyparallel_cluster(0)


def test_dask_cluster_listens_on_loopback_only(monkeypatch):
    pytest.importorskip("distributed")
    from distributed import Client

    monkeypatch.delenv(parallel.ROOT_ENV, raising=False)
    cluster = parallel.dask_cluster(1)
    try:
        with Client(cluster) as client:
            assert client.submit(sum, [1, 2]).result() == 3
            assert client.scheduler.address.startswith(f"tcp://{LOOPBACK}:")
            assert all(w.startswith(f"tcp://{LOOPBACK}:") for w in client.scheduler_info()["workers"])
            assert listening_addresses() <= {LOOPBACK}
    finally:
        cluster.close()
    with pytest.raises(ValueError, match="workers"):
        parallel.dask_cluster(0)


def test_listening_addresses_sees_a_loopback_server():
    import socket

    with socket.socket() as server:
        server.bind((LOOPBACK, 0))
        server.listen()
        assert LOOPBACK in listening_addresses(os.getpid())


# ------------------------------------------------------------------------------------------ workload
def test_make_regression_is_reproducible_and_shaped():
    X, y = make_regression(50, 4, seed=3)
    X2, y2 = make_regression(50, 4, seed=3)
    assert X.shape == (50, 4) and y.shape == (50,)
    assert np.array_equal(X, X2) and np.array_equal(y, y2)
    with pytest.raises(ValueError, match="samples"):
        make_regression(0, 4)
    with pytest.raises(ValueError, match="noise"):
        make_regression(10, 2, noise=-1)


def test_ridge_fold_errors_match_a_direct_solve():
    X, y = make_regression(60, 3, noise=0.5, seed=1)
    errors = ridge_fold_errors(X, y, 1, 3, [0.0, 5.0])
    held = np.zeros(60, dtype=bool)
    held[20:40] = True
    for alpha, error in zip([0.0, 5.0], errors, strict=True):
        Xt, yt = X[~held], y[~held]
        coef = np.linalg.solve(Xt.T @ Xt + alpha * np.eye(3), Xt.T @ yt)
        assert error == pytest.approx(np.mean((y[held] - X[held] @ coef) ** 2), rel=1e-9)


def test_noise_free_data_without_penalty_gives_zero_error():
    X, y = make_regression(40, 3, noise=0.0)
    assert ridge_fold_errors(X, y, 0, 4, [0.0])[0] == pytest.approx(0.0, abs=1e-20)


def test_cross_validate_stacks_folds():
    X, y = make_regression(40, 3)
    errors = cross_validate(X, y, 4, [1.0, 2.0, 3.0])
    assert errors.shape == (4, 3)
    assert np.array_equal(errors[2], ridge_fold_errors(X, y, 2, 4, [1.0, 2.0, 3.0]))


@pytest.mark.parametrize(
    ("fold", "n_folds", "alphas", "message"),
    [(3, 3, [1.0], "fold must"), (-1, 3, [1.0], "fold must"), (0, 1, [1.0], "n_folds"), (0, 3, [], "alphas"),
     (0, 3, [-1.0], "alphas")],
)
def test_ridge_fold_errors_rejects_bad_input(fold, n_folds, alphas, message):
    X, y = make_regression(30, 2)
    with pytest.raises(ValueError, match=message):
        ridge_fold_errors(X, y, fold, n_folds, alphas)


def test_ridge_fold_errors_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="shapes"):
        ridge_fold_errors(np.ones((10, 2)), np.ones(9), 0, 2, [1.0])


def test_workload_grows_with_workers():
    assert workload_size(2)["n_folds"] == 8
    assert workload_size(8)["n_folds"] == 32
    with pytest.raises(ValueError, match="workers"):
        workload_size(0)
