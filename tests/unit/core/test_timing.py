import sys
import time
import types

import numpy as np
import pytest
import torch

from gpukit.core import arrays, timing
from gpukit.core.timing import Timing, benchmark, format_seconds, synchronize


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
     ({"flops": -5}, "flops"), ({"peak_flops": "fast"}, "peak_flops"),
     ({"timer": "gpu"}, "timer must be one of 'wall', 'events', not 'gpu'")],
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


# -- a speed above the device's peak fails (the first H100 run printed 344 TFLOP/s for a "float32" JAX product) --
H100 = "NVIDIA H100 80GB HBM3"  # the name torch, CuPy and JAX report for the H100 SXM


class FakeJaxDevice:
    platform, device_kind, id = "gpu", H100, 0


class FakeJaxGpuArray:
    """What gpukit reads of a JAX array on a GPU: its library (by module), dtype, shape and devices."""

    __module__ = "jaxlib.xla_extension"
    shape = (8192, 8192)
    device = FakeJaxDevice()

    def __init__(self, dtype="float32"):
        self.dtype = np.dtype(dtype)

    def devices(self):
        return {FakeJaxDevice()}


class FakeTorchCudaTensor:
    __module__ = "torch"
    shape = (8192, 8192)
    device = torch.device("cuda", 0)

    def __init__(self, dtype=torch.float32):
        self.dtype = dtype


def timed(tflops: float, label="8192 x 8192 matmul") -> Timing:
    flops = 2 * 8192**3
    return Timing(label=label, samples=(flops / (tflops * 1e12),), flops=flops)


def test_a_float32_jax_product_above_the_h100s_float32_peak_is_refused():
    with pytest.raises(timing.ImpossibleSpeed) as refused:
        timing.check_below_peak(timed(343.7), (FakeJaxGpuArray(), FakeJaxGpuArray()))
    message = str(refused.value)
    assert "343.7 TFLOP/s" in message and "float32 peak of 67 TFLOP/s" in message
    assert "TF32" in message and "NVIDIA H100 SXM" in message


def test_rates_at_or_below_the_peak_pass_and_so_do_precisions_the_table_has_no_figure_for():
    timing.check_below_peak(timed(50.7), (FakeJaxGpuArray(),))  # what the H100 did in float32
    timing.check_below_peak(timed(69.0), (FakeJaxGpuArray("float64"),))  # within the tolerance of 67
    timing.check_below_peak(timed(767.0), (FakeJaxGpuArray("bfloat16"),))  # the H100's bfloat16, under 989.5
    timing.check_below_peak(timed(402.0), (FakeJaxGpuArray(),), computed_in="tf32")  # declared, under 494.5


def test_a_declared_precision_is_checked_instead_of_the_dtype():
    with pytest.raises(timing.ImpossibleSpeed):
        timing.check_below_peak(timed(80.0), (FakeJaxGpuArray("bfloat16"),), computed_in="float64")


def test_the_tensor_cores_precisions_are_held_to_their_dense_peaks():
    with pytest.raises(timing.ImpossibleSpeed, match="bfloat16 peak of 990 TFLOP/s"):
        timing.check_below_peak(timed(1500.0), (FakeJaxGpuArray("bfloat16"),))  # the sparse figure is no excuse
    with pytest.raises(timing.ImpossibleSpeed, match="tf32 peak"):
        timing.check_below_peak(timed(600.0), (FakeJaxGpuArray(),), computed_in="tf32")


def test_torch_switched_to_tf32_makes_its_float32_products_tf32(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: H100)
    with pytest.raises(timing.ImpossibleSpeed):
        timing.check_below_peak(timed(402.0), (FakeTorchCudaTensor(),))
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        timing.check_below_peak(timed(402.0), (FakeTorchCudaTensor(),))
    finally:
        torch.set_float32_matmul_precision(previous)


def test_cupy_told_to_use_tf32_is_not_held_to_the_float32_peak(monkeypatch):
    fake_cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(
        getDeviceProperties=lambda index: {"name": H100.encode()})))
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)

    class FakeCupyArray:
        __module__ = "cupy._core.core"
        shape, dtype = (8192, 8192), np.dtype("float32")
        device = types.SimpleNamespace(id=0)

    with pytest.raises(timing.ImpossibleSpeed):
        timing.check_below_peak(timed(402.0), (FakeCupyArray(),))
    monkeypatch.setenv("CUPY_TF32", "1")
    timing.check_below_peak(timed(402.0), (FakeCupyArray(),))


def test_no_check_where_no_published_peak_applies(monkeypatch):
    host = np.ones((4, 4), dtype=np.float32)
    timing.check_below_peak(timed(1e6), (host,))  # the CPU's peaks are estimates: never refused
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A10G")  # no published figure
    timing.check_below_peak(timed(1e6), (FakeTorchCudaTensor(),))
    timing.check_below_peak(timed(1e6), ())  # nothing to read the GPU or the dtype from


def test_benchmark_refuses_a_rate_above_the_gpus_peak(monkeypatch):
    # benchmark reads the GPU from its arguments: here host arrays standing for H100 arrays.
    monkeypatch.setattr(timing, "gpu_name_of", lambda array=None, device=None: H100)
    a = np.ones((8, 8), dtype=np.float32)
    with pytest.raises(timing.ImpossibleSpeed, match="above the NVIDIA H100 SXM's float32 peak"):
        benchmark(lambda x, y: None, a, a, flops=1e15, repeats=1, warmup=0, label="too fast")
    # An unsynchronised timing is a demonstration of a wrong figure, and is left alone.
    benchmark(lambda x, y: None, a, a, flops=1e15, repeats=1, warmup=0, synchronize_device=False)
    # precision= is the timed function's (JAX's products take it), never benchmark's own.
    seen = []
    benchmark(lambda x, y, precision: seen.append(precision), a, a, precision="highest", repeats=1, warmup=0)
    assert seen == ["highest"]
    assert benchmark(np.matmul, a, a, flops=2 * 8**3, repeats=1, warmup=0).flops_per_s < 67e12
