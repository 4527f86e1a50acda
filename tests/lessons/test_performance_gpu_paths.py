"""Lesson 16's GPU branches, run on the CPU with the stand-in CUDA device of ``fake_cuda`` (an H100): the timing
function takes CUDA events and never the host's clock, the roofline is the H100's file, and max-autotune is asked
for (at a reduced size: the GPU's 4096 x 4096 bfloat16 layer would take minutes on a CPU)."""

from __future__ import annotations

import time
import types

import pytest
import torch

from gpukit import skip_unless
from tests.support.lesson_code import Glued, code_cell, run_cell

LESSON = "16-performance-engineering.ipynb"


def cell(contains):
    return code_cell(LESSON, contains)


@pytest.fixture
def on_gpu(fake_cuda):
    namespace = {"device": "cuda", "glue": Glued(), "skip_unless": skip_unless}
    run_cell(cell("dev = torch.device(device)"), namespace)
    assert namespace["on_gpu"] and namespace["n"] == 1 << 26
    return namespace


def test_gpu_timing_is_cuda_events_only(on_gpu, fake_cuda):
    no_clock = types.SimpleNamespace(perf_counter=lambda: pytest.fail("the host's clock timed GPU work"))
    run_cell(cell("def median_seconds(fn, repeats=5)"), on_gpu)
    on_gpu["time"] = no_clock
    calls = []
    seconds = on_gpu["median_seconds"](lambda: calls.append(1), repeats=3)
    assert len(calls) == 4  # a warm-up, then the repeats
    assert seconds >= 0
    events = [entry[0] for entry in fake_cuda.log if entry[0].startswith("event")]
    assert events == ["event.record", "event.record", "event.synchronize"] * 3  # start, end, wait for the end


def test_the_gpus_roofline_is_its_benchmark_file(on_gpu):
    printed = run_cell(cell("roof = device_roofline(device)"), on_gpu)
    roof = on_gpu["roof"]
    assert roof.name == "NVIDIA H100 80GB HBM3" and roof is not on_gpu["h100"]
    assert roof.source == on_gpu["h100"].source and "h100" in roof.source
    assert printed.count("NVIDIA H100 80GB HBM3") == 2


def test_max_autotune_is_asked_for_on_a_gpu(on_gpu, monkeypatch):
    from gpukit.topics.performance import device_roofline

    run_cell(cell("def median_seconds(fn, repeats=5)"), on_gpu)
    on_gpu.update(time=time, os=__import__("os"), roof=device_roofline("cuda", gpu="H100"))
    modes = []

    def compile_(fn, mode=None, **kwargs):
        modes.append(mode)
        return fn

    monkeypatch.setattr(torch, "compile", compile_)
    source = cell('tuned = torch.compile(layer, mode="max-autotune")')
    assert source.count("side_l = 4096") == 1
    printed = run_cell(source.replace("side_l = 4096", "side_l = 64"), on_gpu)
    assert modes == ["max-autotune"]
    assert "compiling with max-autotune" in printed and "max-autotune " in printed and "eager " in printed
    # predicted before it is timed: the layer's least time on the H100 (bfloat16 peak, HBM3), 64 x 64 here
    assert printed.index("predicted: at least") < printed.index("eager ")
    least = max(2 * 64**3 / 989.5e12, 3 * 2 * 64**2 / 3.35e12)
    assert on_gpu["least_ms"] == pytest.approx(1e3 * least)
    assert set(on_gpu["autotune_ms"]) == {"eager", "max-autotune"}
    run_cell(cell('glue("autotune_story"'), on_gpu)
    story = on_gpu["glue"]["autotune_story"]
    assert story.startswith("In this run the tuned layer took") and "against a predicted least time of" in story


def test_without_a_gpu_max_autotune_is_neither_tuned_nor_timed_and_the_prose_says_so():
    namespace = {"device": "cpu", "glue": Glued(), "skip_unless": skip_unless}
    run_cell(cell("dev = torch.device(device)"), namespace)
    namespace.update(time=time, os=__import__("os"))
    printed = run_cell(cell('tuned = torch.compile(layer, mode="max-autotune")'), namespace)
    assert "Skipped: max-autotune tunes GPU kernels" in printed and namespace["autotune_ms"] == {}
    run_cell(cell('glue("autotune_story"'), namespace)
    assert namespace["glue"]["autotune_story"].startswith("This run has no CUDA GPU")


def test_on_the_cpu_the_h100s_points_are_labelled_as_measured_there():
    import matplotlib.pyplot as plt

    from gpukit.topics.performance import device_roofline

    namespace = {"on_gpu": False, "h100": device_roofline("cuda", gpu="H100")}
    run_cell(cell("if not on_gpu:  # the GPU run's own points"), namespace)
    labels = [text.get_text() for text in namespace["fig"].axes[0].get_legend().get_texts()]
    date = namespace["h100"].date  # 2026-11-26, the book's first GPU run, until a newer H100 file
    assert date and labels == ["NVIDIA H100 80GB HBM3: ceilings",
                               f"measured on an NVIDIA H100 80GB HBM3 on {date} by the bench"]
    plt.close(namespace["fig"])
