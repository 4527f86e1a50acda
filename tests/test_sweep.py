import io

import pandas as pd
import pytest
import torch

from gpukit.sweep import Case, add_speedup, crossover, size_sweep


def table(rows):
    return pd.DataFrame(rows, columns=["case", "n", "median_s"])


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
