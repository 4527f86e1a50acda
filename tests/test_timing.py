import sys
import time
import types

import numpy as np
import pytest
import torch

from gpukit import arrays, timing
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
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    monkeypatch.setattr(torch.mps, "synchronize", lambda: calls.append("mps"))
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    synchronize(None, device="cuda:1")
    synchronize(None, device="mps")
    assert calls == ["cuda:1", "mps"]


def test_timing_synchronize_is_the_arrays_one():
    assert timing.synchronize is arrays.synchronize


def test_first_call_ratio():
    cold = Timing("cold", (9.0, 1.0, 3.0, 2.0))
    assert cold.later_calls_median == 2.0
    assert cold.first_call_ratio == pytest.approx(4.5)
    with pytest.raises(ValueError, match="2\\+ samples"):
        _ = Timing("one", (1.0,)).first_call_ratio


# --- event timing, with torch's CUDA and MPS events faked -----------------------------------------------


class FakeEvent:
    """Records where it was recorded; elapsed_time plays back milliseconds, and only after synchronize."""

    log: list
    durations_ms: list

    def __init__(self, enable_timing=False):
        assert enable_timing, "a timing event must be created with enable_timing=True"
        self.synchronized = False

    def record(self, stream=None):
        self.log.append(("record", stream))

    def synchronize(self):
        self.log.append(("synchronize",))
        self.synchronized = True

    def elapsed_time(self, end_event):
        assert end_event.synchronized, "elapsed_time read before the end event finished"
        return self.durations_ms.pop(0)


@pytest.fixture
def fake_events(monkeypatch):
    log = []
    event = type("Event", (FakeEvent,), {"log": log, "durations_ms": [2.0, 4.0, 1.0]})
    stream = object()
    streams = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)  # nothing of torch's to drain
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: streams.append(device) or stream)
    monkeypatch.setattr(torch.cuda, "Event", event)
    monkeypatch.setattr(torch.mps, "Event", event)
    monkeypatch.setattr(torch.mps, "synchronize", lambda: log.append(("mps sync",)))
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.mps, "driver_allocated_memory", lambda: 0)
    return types.SimpleNamespace(log=log, stream=stream, streams=streams)


def test_cuda_event_timing_reads_milliseconds_as_seconds(fake_events):
    result = benchmark(lambda: None, repeats=3, warmup=0, device="cuda:1", timer="events", label="mm")
    assert result.samples == pytest.approx((0.002, 0.004, 0.001))
    assert result.timer == "events"
    assert "GPU events" in str(result)
    assert fake_events.streams == [torch.device("cuda:1")]
    # Both events of a repeat go on the device's stream, and the end event is waited for.
    assert fake_events.log[:3] == [("record", fake_events.stream), ("record", fake_events.stream), ("synchronize",)]


def test_mps_event_timing_records_on_the_default_stream(fake_events):
    result = benchmark(lambda: None, repeats=2, warmup=1, device="mps", timer="events")
    assert result.samples == pytest.approx((0.002, 0.004))
    assert ("record", None) in fake_events.log and fake_events.streams == []


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [({"device": "cpu"}, ValueError, "event timing needs a CUDA or MPS device; this run has cpu"),
     ({}, ValueError, "needs a CUDA or MPS device; this run has no device"),
     ({"device": "cuda:5"}, RuntimeError, "'cuda:5'.*not available"),
     ({"device": "cuda", "synchronize_device": False}, ValueError, "always waits")],
)
def test_event_timing_needs_a_gpu(fake_events, kwargs, error, message):
    with pytest.raises(error, match=message):
        benchmark(lambda: None, timer="events", **kwargs)


def test_unknown_timer_is_rejected():
    with pytest.raises(ValueError, match="timer must be one of 'wall', 'events', not 'gpu'"):
        benchmark(lambda: None, timer="gpu")


def test_wall_timing_is_the_default_and_says_nothing_of_events():
    result = benchmark(lambda: None, repeats=2)
    assert result.timer == "wall" and Timing("x", (1.0,)).timer == "wall"
    assert "events" not in str(result)


def test_wall_timing_on_a_cuda_device_waits_after_every_call(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    benchmark(lambda: None, repeats=3, warmup=1, device="cuda:0")
    assert calls == ["cuda:0"] * 6  # warm-up, drain, three repeats, final drain
