import pytest
import torch

from gpukit.threads import (
    blas_threads,
    cpu_threads,
    fresh_python_blas_threads,
    numpy_matmul_scaling,
    one_thread_env,
    thread_counts,
    torch_matmul_scaling,
    torch_threads,
    usable_cores,
)


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


def test_cpu_threads_limits_and_restores():
    before = torch.get_num_threads()
    with cpu_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_cpu_threads_restores_after_an_error():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError), cpu_threads(1):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_cpu_threads_rejects_bad_counts(bad):
    with pytest.raises(ValueError, match="thread count"), cpu_threads(bad):
        pass


def test_torch_threads_limits_only_torch_and_restores_after_an_error():
    import torch
    from threadpoolctl import threadpool_info

    before = torch.get_num_threads()
    def blas():  # NumPy's BLAS; torch's own OpenMP runtime shows up in threadpool_info too
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    blas_before = blas()
    with pytest.raises(RuntimeError):
        with torch_threads(1):
            assert torch.get_num_threads() == 1
            assert blas() == blas_before
            raise RuntimeError("boom")
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="thread count"):
        with torch_threads(0):
            pass


def test_cpu_threads_without_threadpoolctl_limits_torch_and_says_so(monkeypatch, capsys):
    import sys

    from gpukit import threads

    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # makes `import threadpoolctl` fail
    monkeypatch.setattr(threads, "_said", set())
    before = torch.get_num_threads()
    with cpu_threads(1):
        assert torch.get_num_threads() == 1
    with cpu_threads(1):
        pass
    assert torch.get_num_threads() == before
    out = capsys.readouterr().out
    assert out.count("Only PyTorch's threads are limited") == 1 and "pip install" in out
    with pytest.raises(ImportError, match="threadpoolctl"):
        blas_threads()
