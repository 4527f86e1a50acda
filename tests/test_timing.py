import time

import numpy as np
import pytest
import torch

from gpukit import timing
from gpukit.timing import Timing, benchmark, format_seconds, synchronize


def test_warmup_and_repeats_are_counted():
    calls = []
    result = benchmark(lambda: calls.append(1), repeats=5, warmup=2)
    assert len(calls) == 7
    assert len(result.samples) == 5


def test_measures_real_elapsed_time():
    result = benchmark(time.sleep, 0.02, repeats=3, warmup=0)
    assert 0.018 <= result.median < 0.5
    assert result.label == "sleep"


def test_arguments_are_passed_through():
    seen = []
    benchmark(lambda a, b=0: seen.append((a, b)), 1, b=2, repeats=1, warmup=0)
    assert seen == [(1, 2)]


def test_every_result_is_synchronized(monkeypatch):
    synced = []
    monkeypatch.setattr(timing, "synchronize", lambda result=None, device=None: synced.append(result))
    benchmark(lambda: "work", repeats=3, warmup=1)
    assert synced.count("work") >= 4  # one per warm-up and per repeat


def test_unsynchronized_mode_skips_waiting_inside_the_loop(monkeypatch):
    synced = []
    monkeypatch.setattr(timing, "synchronize", lambda result=None, device=None: synced.append(result))
    result = benchmark(lambda: "work", repeats=3, warmup=1, synchronize_device=False)
    assert synced.count("work") == 1  # only the final drain, outside the timed region
    assert "NOT synchronized" in str(result)


def test_median_spread_and_rates():
    t = Timing("x", (1.0, 2.0, 3.0, 4.0, 100.0), flops=8e9, bytes_moved=3e9, peak_flops=16e9, peak_bytes_per_s=6e9)
    assert t.median == 3.0
    assert t.best == 1.0
    assert t.spread == pytest.approx(2.0)
    assert t.flops_per_s == pytest.approx(8e9 / 3)
    assert t.fraction_of_peak_flops == pytest.approx(8e9 / 3 / 16e9)
    assert t.fraction_of_peak_bandwidth == pytest.approx(1e9 / 6e9)
    text = str(t)
    assert "GFLOP/s" in text and "GB/s" in text and "of peak" in text


def test_rates_are_none_without_work_counts():
    t = Timing("x", (0.5,))
    assert t.flops_per_s is None and t.fraction_of_peak_flops is None and t.spread == 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"repeats": 0}, "repeats"), ({"repeats": 2.5}, "repeats"), ({"warmup": -1}, "warmup"),
     ({"flops": -5}, "flops"), ({"peak_flops": "fast"}, "peak_flops")],
)
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        benchmark(lambda: None, **kwargs)


def test_non_callable_is_rejected():
    with pytest.raises(TypeError, match="needs a function"):
        benchmark(np.zeros(3))


@pytest.mark.parametrize(
    ("seconds", "text"), [(2.5, "2.5 s"), (0.00042, "420 µs"), (0.0123, "12.3 ms"), (3e-9, "3 ns"), (0, "0 ns")]
)
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text


@pytest.mark.parametrize("bad", [-1, float("nan"), "1s"])
def test_format_seconds_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="duration"):
        format_seconds(bad)


def test_synchronize_reaches_arrays_inside_containers():
    waited = []

    class FakeJaxArray:
        __module__ = "jax._src.array"

        def block_until_ready(self):
            waited.append(self)

    inner = FakeJaxArray()
    # CPU tensors, NumPy arrays and plain values need no waiting and must not raise.
    synchronize([torch.ones(2), {"a": np.ones(2), "b": (1, None, inner)}], device="cpu")
    assert waited == [inner]


def test_synchronize_waits_for_jax():
    jnp = pytest.importorskip("jax.numpy")

    class Recorder:
        __module__ = "jaxlib.xla_extension"
        waited = False

        def block_until_ready(self):
            Recorder.waited = True

    synchronize(Recorder())
    assert Recorder.waited
    synchronize(jnp.ones(3) * 2)  # a real array: must not raise


def test_synchronize_calls_torch_cuda_for_cuda_tensors(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    monkeypatch.setattr(torch.mps, "synchronize", lambda: calls.append("mps"))
    synchronize(None, device="cuda:1")
    synchronize(None, device="mps")
    assert calls == ["cuda:1", "mps"]


def test_first_call_ratio():
    cold = Timing("cold", (9.0, 1.0, 3.0, 2.0))
    assert cold.later_calls_median == 2.0
    assert cold.first_call_ratio == pytest.approx(4.5)
    with pytest.raises(ValueError, match="2\\+ samples"):
        _ = Timing("one", (1.0,)).first_call_ratio
