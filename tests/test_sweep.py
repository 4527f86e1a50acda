import io

import pandas as pd
import pytest
import torch

from gpukit.sweep import Case, add_speedup, cpu_threads, crossover, progress_bar, size_sweep


def table(rows):
    return pd.DataFrame(rows, columns=["case", "n", "median_s"])


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


def test_size_sweep_times_every_case_at_every_size():
    made = []

    def make(n):
        made.append(n)
        return lambda: sum(range(n))

    out = io.StringIO()
    result = size_sweep([10, 100], [Case("a", make), Case("b", make, threads=1)], flops=lambda n: n,
                        bytes_moved=lambda n: 8 * n, repeats=2, warmup=0, file=out, desc="test")
    assert list(result["case"]) == ["a", "b", "a", "b"]
    assert list(result["n"]) == [10, 10, 100, 100]
    assert made == [10, 10, 100, 100]
    assert (result["median_s"] > 0).all()
    assert result["gflop_s"].iloc[0] == pytest.approx(10 / result["median_s"].iloc[0] / 1e9)
    assert "gb_s" in result
    text = out.getvalue()
    assert "test" in text and "4/4" in text  # a plain-text bar that ends complete


def test_size_sweep_sets_threads_only_inside_the_case():
    seen = []
    cases = [Case("one", lambda n: lambda: seen.append(torch.get_num_threads()), threads=1)]
    before = torch.get_num_threads()
    size_sweep([1], cases, repeats=1, warmup=0, progress=False)
    assert set(seen) == {1}
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("sizes", [[], [0], [3, -1], [2.5], [True]])
def test_size_sweep_rejects_bad_sizes(sizes):
    with pytest.raises(ValueError, match="size"):
        size_sweep(sizes, [Case("a", lambda n: lambda: None)], progress=False)


def test_size_sweep_rejects_bad_cases():
    with pytest.raises(ValueError, match="Case"):
        size_sweep([1], [], progress=False)
    with pytest.raises(ValueError, match="Case"):
        size_sweep([1], [lambda n: None], progress=False)
    with pytest.raises(ValueError, match="differ"):
        size_sweep([1], [Case("a", lambda n: lambda: None)] * 2, progress=False)


def test_progress_bar_writes_text_without_widgets():
    out = io.StringIO()
    bar = progress_bar(2, "bar", file=out)
    bar.update(2)
    bar.close()
    text = out.getvalue()
    assert "2/2" in text and text.endswith("\n")
    assert "<div" not in text and "<script" not in text  # no HTML widget


def test_add_speedup_divides_the_baseline_time():
    rows = table([("cpu", 1, 2.0), ("gpu", 1, 4.0), ("cpu", 2, 8.0), ("gpu", 2, 2.0)])
    result = add_speedup(rows, "cpu")
    assert list(result["speedup"]) == [1.0, 0.5, 1.0, 4.0]
    assert "speedup" not in rows  # the input is not changed
    with pytest.raises(ValueError, match="'tpu'"):
        add_speedup(rows, "tpu")


def test_crossover_is_the_size_from_which_a_case_keeps_winning():
    rows = table([
        ("cpu", 1, 1.0), ("gpu", 1, 2.0),
        ("cpu", 2, 1.0), ("gpu", 2, 0.5),   # wins here,
        ("cpu", 4, 1.0), ("gpu", 4, 1.5),   # loses again,
        ("cpu", 8, 1.0), ("gpu", 8, 0.5),   # then wins from here on
        ("cpu", 16, 1.0), ("gpu", 16, 0.1),
    ])
    assert crossover(rows, "gpu", "cpu") == 8
    assert crossover(rows, "cpu", "gpu") is None
    with pytest.raises(ValueError, match="'tpu'"):
        crossover(rows, "tpu", "cpu")


def test_progress_bar_in_a_kernel_keeps_only_its_final_line(monkeypatch, capsys):
    from gpukit import sweep

    cleared = []
    monkeypatch.setattr(sweep, "_in_jupyter_kernel", lambda: True)
    monkeypatch.setattr(sweep, "_clear_cell_output", lambda: cleared.append(True))
    bar = progress_bar(3, "kernel")  # on standard output
    bar.update(3)
    bar.close()
    assert cleared == [True]
    assert "3/3" in capsys.readouterr().out


def test_progress_bar_outside_a_kernel_clears_nothing(monkeypatch):
    from gpukit import sweep

    cleared = []
    monkeypatch.setattr(sweep, "_clear_cell_output", lambda: cleared.append(True))
    bar = progress_bar(1, "plain", file=io.StringIO())
    bar.close()
    assert cleared == [] and sweep._in_jupyter_kernel() is False


def test_torch_threads_limits_only_torch_and_restores_after_an_error():
    import torch
    from threadpoolctl import threadpool_info

    from gpukit.sweep import torch_threads

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
