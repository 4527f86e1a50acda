"""Lesson 15's predictions: the products in float32, bfloat16, float16 and TF32, and the launch-bound small
operations against two large ones, each set beside what the device's limits predict for its arithmetic.

The hidden cells run with made-up timings as on an H100 (``fake_cuda``: the datasheet has the tensor cores' dense
bfloat16, float16 and TF32 peaks) and as on a CPU-only machine (a made-up 4-core AVX2 CPU at 2 GHz, a bandwidth of
20 GB/s; gpukit estimates no bfloat16 or float16 peak for a CPU, so the bandwidth bounds those alone), and the
exercise's solution runs as the lesson writes it.
"""

from __future__ import annotations

import pytest
from lesson_code import Glued, gluing, lesson, run

from gpukit import check, hardware, roofline
from gpukit.timing import Timing

CELLS = lesson("15-precision-and-data")
CPUINFO = "".join(f"processor\t: {i}\nphysical id\t: 0\ncore id\t: {i}\ncpu MHz\t\t: 2000.000\n"
                  "flags\t\t: fpu sse2 avx avx2 fma\n\n" for i in range(4))


@pytest.fixture
def made_up_cpu(monkeypatch):
    real = hardware.estimate_cpu_peak
    monkeypatch.setattr(hardware, "estimate_cpu_peak", lambda dtype="float32", cpuinfo=None, max_mhz=None,
                        cores=None: real(dtype, cpuinfo=CPUINFO, max_mhz=2000, cores=cores))
    monkeypatch.setattr(roofline, "_measured_copy_bandwidth", lambda device: 20e9)


def timed(seconds):
    return Timing("t", (seconds,) * 5)


def predicted(device):
    on_gpu = device != "cpu"
    speed = {"float32": timed(0.02 if on_gpu else 2e-3), "bfloat16": timed(2e-3), "float16": timed(2e-3)}
    if on_gpu:
        speed["TF32"] = timed(4e-3)
    ns = {"glue": Glued(), "device": device, "size": 8192 if on_gpu else 256, "speed": speed,
          "many": timed(0.02), "two": timed(2e-5)}
    run(gluing(CELLS, "precision_predicted"), ns)
    run(gluing(CELLS, "many_predicted"), ns)
    return ns["glue"]


def test_on_an_h100_each_format_has_its_peak(fake_cuda, made_up_cpu):
    glued = predicted("cuda")
    text = glued["precision_predicted"]
    # 2 x 8192³ FLOPs: 16.4 ms at 67 TFLOP/s (float32), 1.11 ms at 989.5 (bfloat16, float16), 2.22 ms at 494.5.
    assert text.startswith("For float32, the datasheet predicts 16.4 ms (intensity 1,365 FLOP/B, so compute-bound); "
                           "measured 20 ms, 1.22 times that. For bfloat16, the datasheet predicts 1.11 ms (intensity "
                           "2,731 FLOP/B, so compute-bound); measured 2 ms, 1.8 times that.")
    assert "For TF32, the datasheet predicts 2.22 ms (intensity 1,365 FLOP/B, so compute-bound); measured 4 ms" in text
    # 64,000 FLOPs and 512 kB of either's arithmetic: 153 ns at 3.35 TB/s.
    assert glued["many_predicted"] == ("For their arithmetic alone, the datasheet predicts 153 ns (intensity 0.125 "
                                       "FLOP/B, so memory-bound); measured 20 ms for the 2,000 small operations, "
                                       "130,859 times that, and 20 µs for the two large ones, 131 times that.")


def test_on_a_cpu_the_16_bit_formats_are_bounded_by_the_bandwidth(made_up_cpu):
    glued = predicted("cpu")
    text = glued["precision_predicted"]
    # 2 x 256³ FLOPs at 256 GFLOP/s: 131 µs; the 16-bit products' 393 kB at 20 GB/s: at least 19.7 µs.
    assert text.startswith("For float32, the CPU's estimated peak and measured bandwidth predict 131 µs")
    assert "For bfloat16, the CPU's measured bandwidth predicts at least 19.7 µs from the bandwidth alone" in text
    assert "TF32" not in text
    assert glued["many_predicted"].startswith("For their arithmetic alone, the CPU's estimated peak and measured "
                                              "bandwidth predict 25.6 µs (intensity 0.125 FLOP/B, so memory-bound)")


def test_the_exercises_solution_passes():
    solution = next(c for c in CELLS if "{solution} ex-prec-predict-bf16" in "".join(c["source"]))
    code = "".join(solution["source"]).split("```python\n", 1)[1].split("```", 1)[0]
    ns = run(code, {"check": check, "device": "cpu", "size": 256})
    assert check("ex-prec-predict-bf16", ns["predicted_ms"], device="cpu", size=256)
