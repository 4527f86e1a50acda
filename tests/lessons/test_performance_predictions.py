"""Lesson 16's predictions beside its measurements, run on the CPU as on a GPU node: the roofline's two ceilings
(datasheet and achievable) where a benchmark file has the achievable section, and the sentence saying so where it
has none; the copies, transposes and reductions predicted (the strided copy allowing for the H100's L2) and then
timed by ``kernel_ms``, whose CUDA events bracket the timed launch alone, after a warm-up, on one stream; the matrix
shapes' tile-and-wave prediction with the GPU's SM count; max-autotune's prediction and measured story.

The GPU branches run with ``torch.cuda.is_available`` forced and a stand-in for Numba's CUDA API (device arrays that
are NumPy arrays, kernels that compute their result with NumPy and log their launches, events that log what they
record on which stream): the lesson's own cells, at a reduced size.
"""

from __future__ import annotations

import math
import types

import numpy as np
import pytest
import torch

from gpukit import skip_unless
from gpukit.topics import performance
from tests.support.achievable_records import with_achievable
from tests.support.lesson_code import Glued, code_cell, run_cell

LESSON = "16-performance-engineering.ipynb"
TILE, ROWS, THREADS = 32, 8, 128


def cell(contains):
    return code_cell(LESSON, contains)


# ------------------------------------------------------------------------------------------ stand-ins for Numba
class DeviceArray(np.ndarray):
    """A NumPy array with the one method of a Numba device array the lesson calls."""

    def copy_to_host(self):
        return np.array(self)


class StandInCuda:
    """Numba's ``cuda`` as the lesson's timing cells use it, logging streams, events and launches in order."""

    def __init__(self, elapsed_ms=0.25):
        self.log, self.elapsed_ms = [], elapsed_ms

    def to_device(self, host):
        return np.array(host).view(DeviceArray)

    def device_array_like(self, like):
        return np.zeros_like(like).view(DeviceArray)

    def device_array(self, shape, dtype):
        return np.zeros(shape, dtype).view(DeviceArray)

    def stream(self):
        stream = types.SimpleNamespace(name=f"stream {len(self.log)}")
        self.log.append(("stream", stream))
        return stream

    def event(self):
        log = self.log

        class Event:
            def record(self, stream=0):
                log.append(("record", self, stream))

            def synchronize(self):
                log.append(("synchronize", self))

        return Event()

    def event_elapsed_time(self, start, end):
        self.log.append(("elapsed", start, end))
        return self.elapsed_ms


class Kernel:
    """A kernel stand-in: ``kernel[grid, block, stream](*args)`` logs the launch and computes with NumPy."""

    def __init__(self, name, compute, log):
        self.__name__, self.compute, self.log = name, compute, log

    def __getitem__(self, configuration):
        stream = configuration[2] if len(configuration) > 2 else None
        self.log.append(("launch", self.__name__, stream))
        return self.compute


def copy_into(inp, out):
    out[...] = inp


def transpose_into(inp, out):
    out[...] = inp.T


def block_sums_into(x, out):
    out[...] = x.reshape(-1, THREADS).sum(axis=1)


def nothing(*arrays):  # a kernel still holding its placeholder
    pass


@pytest.fixture
def gpu_numba(monkeypatch):
    """The namespace of the lesson's cells before the timing, with a GPU reported and Numba stood in for."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    cuda = StandInCuda()
    kernels = {name: Kernel(name, compute, cuda.log) for name, compute in (
        ("copy_coalesced", copy_into), ("copy_strided", copy_into), ("transpose_naive", transpose_into),
        ("transpose_padded", transpose_into), ("block_sums", block_sums_into),
        ("block_sums_shuffled", block_sums_into))}
    from gpukit.topics.performance import device_roofline

    namespace = {"cuda": cuda, "np": np, "torch": torch, "math": math, "skip_unless": skip_unless,
                 "numba_ready": True, "rng": np.random.default_rng(0), "glue": Glued(), "F32": 4,
                 "on_gpu": True, "h100": device_roofline("cuda", gpu="H100"), "TILE": TILE, "ROWS": ROWS,
                 "THREADS": THREADS, **kernels,
                 "copies": {name: types.SimpleNamespace(sectors_per_request={"inp": counted})  # the simulator's
                            for name, counted in (("copy_coalesced", 4.0), ("copy_strided", 32.0))}}
    namespace["roof"] = namespace["h100"]
    run_cell(cell("def transpose_grid(a):").split("if skip_unless")[0], namespace)  # TILE, ROWS, transpose_grid
    run_cell(cell("def kernel_ms(kernel, grid, block"), namespace)
    return namespace


def small(source, side=256):
    assert "side = 8192" in source
    return source.replace("side = 8192", f"side = {side}")


# ------------------------------------------------------------------------------------------ kernel_ms
def test_the_events_bracket_only_the_timed_launch_on_its_stream_after_a_warm_up(gpu_numba):
    cuda = gpu_numba["cuda"]
    no_clock = types.SimpleNamespace(perf_counter=lambda: pytest.fail("the host's clock timed a kernel"))
    gpu_numba["time"] = no_clock
    out = cuda.device_array_like(np.ones(4, np.float32))
    ms = gpu_numba["kernel_ms"](gpu_numba["copy_coalesced"], 1, 4, cuda.to_device(np.ones(4, np.float32)), out,
                                repeats=3)
    assert ms == 0.25 and out.tolist() == [1, 1, 1, 1]
    (kind, stream), *rest = cuda.log
    assert kind == "stream"
    assert rest[0] == ("launch", "copy_coalesced", stream)  # compiles and loads it: not timed
    steps = rest[1:]
    assert len(steps) == 3 * 6
    for k in range(3):
        busy, start, timed, end, wait, elapsed = steps[6 * k:6 * k + 6]
        assert busy == ("launch", "copy_coalesced", stream)  # keeps the GPU busy while the host records start
        assert start[0] == "record" and start[2] is stream  # on the kernel's stream, not the default one
        assert timed == ("launch", "copy_coalesced", stream)
        assert end[0] == "record" and end[2] is stream and end[1] is not start[1]
        assert wait == ("synchronize", end[1])  # the host waits for the end event before reading the time
        assert elapsed == ("elapsed", start[1], end[1])


# ------------------------------------------------------------------------------------------ the copies
def test_the_strided_copy_is_predicted_with_the_l2_then_both_are_timed(gpu_numba):
    printed = run_cell(small(cell("l2_bytes = 50e6")), gpu_numba)
    predicted = gpu_numba["copy_predicted"]
    # 256 x 256 floats: 256 KiB read and written at the H100's 3.35 TB/s; its sectors reused within the L2
    assert predicted["copy_coalesced"] == pytest.approx(1e3 * 2 * 256 * 256 * 4 / 3.35e12)
    assert predicted["copy_strided"] == predicted["copy_coalesced"]
    assert gpu_numba["from_dram"] == pytest.approx(8 * predicted["copy_coalesced"])  # 32 sectors for 4
    assert "inside a 50 MB L2" in printed
    gpu_numba["l2_bytes"] = 1e3  # an L2 too small for the working set: every sector from DRAM
    run_cell("copy_predicted['copy_strided'] = (copy_predicted['copy_coalesced'] if reuse_bytes < l2_bytes "
             "else from_dram)", gpu_numba)
    assert gpu_numba["copy_predicted"]["copy_strided"] == gpu_numba["from_dram"]
    run_cell(small(cell("l2_bytes = 50e6")), gpu_numba)
    printed = run_cell(cell("copy_ms[kernel.__name__] = kernel_ms("), gpu_numba)
    assert set(gpu_numba["copy_ms"]) == {"copy_coalesced", "copy_strided"}
    assert "copy_coalesced  predicted" in printed and "measured   0.250 ms" in printed
    launches = [entry for entry in gpu_numba["cuda"].log if entry[0] == "launch"]
    assert len(launches) == 2 * (1 + 2 * 5)  # each kernel: a warm-up, then a busy and a timed launch a repeat
    run_cell(cell('glue("copy_story", copy_story'), gpu_numba)
    glued = gpu_numba["glue"]
    assert glued["copy_coalesced_ms"] == "0.25 ms" and glued["copy_strided_ms"] == "0.25 ms"
    assert glued["copy_story"].startswith("The strided copy took 1 times as long")
    assert "the L2 serves" in glued["copy_story"]


def test_without_a_gpu_the_copies_are_predicted_and_the_prose_says_nothing_was_timed(gpu_numba, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    run_cell(small(cell("l2_bytes = 50e6")), gpu_numba)
    printed = run_cell(cell("copy_ms[kernel.__name__] = kernel_ms("), gpu_numba)
    assert printed.startswith("Skipped: timing a kernel needs a CUDA GPU") and gpu_numba["copy_ms"] == {}
    run_cell(cell('glue("copy_story", copy_story'), gpu_numba)
    assert gpu_numba["glue"]["copy_strided_ms"] == "not measured in this run (no CUDA GPU)"
    assert gpu_numba["glue"]["copy_story"] == "Run on a GPU, this sentence compares the two."


# ------------------------------------------------------------------------------------------ transposes, reductions
def test_the_transposes_and_sums_are_predicted_then_timed_if_right(gpu_numba):
    run_cell(small(cell("l2_bytes = 50e6")), gpu_numba)
    printed = run_cell(cell("kernel_predicted = {"), gpu_numba)
    predicted = gpu_numba["kernel_predicted"]
    assert predicted["transpose_naive"] == predicted["transpose_padded"] == pytest.approx(
        2 * predicted["block_sums"])
    assert "block_sums_shuffled  predicted" in printed
    printed = run_cell(cell("kernel_times = {}"), gpu_numba)
    assert set(gpu_numba["kernel_times"]) == set(predicted)
    run_cell(cell('glue("kernel_story"'), gpu_numba)
    assert gpu_numba["glue"]["kernel_story"] == ("In this run the padded transpose gained nothing over "
                                                 "transpose_naive; the reduction ending in shuffles gained "
                                                 "nothing over block_sums.")
    # the learner's kernels still hold their placeholders: they write nothing, and are not timed
    log = gpu_numba["cuda"].log
    gpu_numba["transpose_padded"] = Kernel("transpose_padded", nothing, log)
    gpu_numba["block_sums"] = Kernel("block_sums", nothing, log)
    printed = run_cell(cell("kernel_times = {}"), gpu_numba)
    assert "transpose_padded gave a wrong transpose: not timed" in printed
    assert "block_sums gave wrong sums: not timed" in printed
    assert set(gpu_numba["kernel_times"]) == {"transpose_naive", "block_sums_shuffled"}
    run_cell(cell('glue("kernel_story"'), gpu_numba)
    assert gpu_numba["glue"]["block_sums_ms"] == "not measured in this run"
    assert gpu_numba["glue"]["kernel_story"].startswith("Without a CUDA GPU")


def test_a_faster_kernel_is_said_to_be_faster_with_its_factor(gpu_numba):
    predicted = dict.fromkeys(("transpose_naive", "transpose_padded", "block_sums", "block_sums_shuffled"), 1.0)
    namespace = {**gpu_numba, "kernel_predicted": predicted,
                 "kernel_times": {"transpose_naive": 0.9, "transpose_padded": 0.3}}
    run_cell(cell('glue("kernel_story"'), namespace)
    assert namespace["glue"]["kernel_story"] == ("In this run the padded transpose ran 3 times as fast as "
                                                 "transpose_naive.")


# ------------------------------------------------------------------------------------------ achievable ceilings
def roofline_namespace(device, monkeypatch, records=None):
    if records is not None:
        monkeypatch.setattr(performance, "read_benchmark_folder", lambda: records)
    namespace = {"device": device, "glue": Glued(), "skip_unless": skip_unless}
    run_cell(cell("dev = torch.device(device)"), namespace)
    run_cell(cell("roof = device_roofline(device) or h100"), namespace)
    return namespace


def measured_table(namespace, seconds=1e-3):
    namespace["measured"] = {name: seconds for name in namespace["work"]}
    return run_cell(cell("for ceiling, (peak, bandwidth) in ceilings.items():"), namespace)


def test_a_gpu_whose_file_has_achievable_rates_is_predicted_against_both(fake_cuda, monkeypatch):
    records, _ = with_achievable()
    namespace = roofline_namespace("cuda", monkeypatch, records)
    printed = run_cell(cell("ceilings = {roof.ceiling:"), namespace)
    assert printed == "The ratios below are against: datasheet and achievable\n"
    table = measured_table(namespace)
    assert "predicted (datasheet)" in table and "predicted (achievable)" in table
    ratios = namespace["ratios"]
    axpy = "axpy: y = a x + y"
    n = namespace["n"]
    assert ratios[axpy, "datasheet"] == pytest.approx(1e-3 / (12 * n / 3.35e12))
    assert ratios[axpy, "achievable"] == pytest.approx(1e-3 / (12 * n / (0.85 * 3.35e12)))
    run_cell(cell('glue("achievable_story"'), namespace)
    glued = namespace["glue"]
    assert glued["ceiling_words"] == "the datasheet's ceilings"
    assert glued["achievable_story"].startswith("Against the achievable ceilings, the best the bench found")
    assert f"{ratios[axpy, 'achievable']:.3g} times" in glued["achievable_story"]


def test_without_an_achievable_section_the_chapter_says_so_and_uses_the_datasheet(fake_cuda):
    namespace = roofline_namespace("cuda", None)  # the book's H100 file, from before the search
    printed = run_cell(cell("ceilings = {roof.ceiling:"), namespace)
    assert printed.startswith("No achievable ceilings for NVIDIA H100 80GB HBM3:")
    assert "has no achievable section" in printed and printed.endswith("against: datasheet\n")
    table = measured_table(namespace)
    assert "predicted (datasheet)" in table and "achievable" not in table
    run_cell(cell('glue("achievable_story"'), namespace)
    assert namespace["glue"]["achievable_story"] == (
        "This device's benchmark file has no achievable ceilings (it was written before the bench searched "
        "for them), so every ratio here is against the datasheet's ceilings alone.")


def test_on_the_cpu_the_ratios_are_against_its_estimate():
    namespace = roofline_namespace("cpu", None)
    run_cell(cell("ceilings = {roof.ceiling:"), namespace)
    assert list(namespace["ceilings"]) == ["estimate"]
    run_cell(cell('glue("achievable_story"'), {**namespace, "measured": {}, "ratios": {
        (name, "estimate"): 2.0 for name in namespace["work"]}})


# ------------------------------------------------------------------------------------------ shapes, max-autotune
def test_on_a_gpu_the_shapes_are_predicted_from_tiles_and_waves_over_its_sms(fake_cuda):
    namespace = {"on_gpu": True, "dev": torch.device("cuda"), "torch": torch}
    printed = run_cell(cell("def useful_share(size, tile=128, sms=132):"), namespace)
    share = namespace["shape_predicted"]
    assert namespace["sms"] == 132  # the stand-in H100's
    # 4096: 32 x 32 = 1,024 tiles in 8 waves of 132, the last 100 of 132 full
    assert share[4096] == pytest.approx(1024 / (8 * 132))
    # 4097 pads to 33 x 33 tiles: 4097^2 / 4224^2 of the work is useful, 1,089 tiles in 9 waves
    assert share[4097] == pytest.approx(4097**2 / 4224**2 * 1089 / (9 * 132))
    assert min(share, key=share.get) == 4097 and "4097: predicted" in printed
    cpu = {"on_gpu": False, "dev": torch.device("cpu"), "torch": torch}
    run_cell(cell("def useful_share(size, tile=128, sms=132):"), cpu)
    assert set(cpu["shape_predicted"].values()) == {1.0}


def test_the_shapes_prediction_is_set_beside_the_measurement():
    sizes = (4032, 4096, 4097)
    namespace = {"glue": Glued(), "sizes": sizes, "rates": {4032: 600.0, 4096: 640.0, 4097: 420.0},
                 "shape_predicted": {4032: 0.95, 4096: 0.97, 4097: 0.8}}
    run_cell(cell('glue("shape_prediction"'), namespace)
    assert namespace["glue"]["shape_prediction"] == ("The tile-and-wave model predicted 4097 the slowest, at 82% "
                                                     "of the best rate; it measured 66%.")
