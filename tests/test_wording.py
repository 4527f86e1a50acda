import pytest

from gpukit.timing import Timing
from gpukit.wording import device_versus_cpu, speed_phrase


def test_speed_phrase():
    assert speed_phrase(2.0, 1.0) == "2.00 times faster than"
    assert speed_phrase(1.0, 2.0) == "2.00 times slower than"
    assert speed_phrase(1.0, 1.05) == "about as fast as"
    with pytest.raises(ValueError, match="baseline_seconds must be a positive number"):
        speed_phrase(0, 1.0)
    with pytest.raises(ValueError, match="seconds must be a positive number"):
        speed_phrase(1.0, float("nan"))


def test_on_the_cpu_the_ratio_is_called_noise_not_a_speedup():
    text = device_versus_cpu(Timing("cpu", (2.0,)), Timing("again", (1.0,)), "cpu")
    assert "both lines ran on the CPU" in text and "2.00" in text and "faster" not in text


def test_on_a_gpu_the_ratio_is_a_comparison():
    cpu, gpu = Timing("cpu", (1.0, 1.0, 1.0)), Timing("gpu", (0.1, 0.1, 0.1))
    assert device_versus_cpu(cpu, gpu, "cuda") == "the cuda device was 10.00 times faster than all the CPU's cores"
    assert "slower" in device_versus_cpu(gpu, cpu, "mps")


def test_device_versus_cpu_needs_timings():
    with pytest.raises(TypeError, match="cpu must be a Timing"):
        device_versus_cpu(1.0, Timing("x", (1.0,)), "cuda")
