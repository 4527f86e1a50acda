"""gpukit.measuring.roofline: the least time a piece of work can take, from a device's limits, and the sentence a
lesson shows.

The GPU's limits are read as on an H100 (``fake_cuda`` names the device "NVIDIA H100 80GB HBM3"), the CPU's from a
given estimate and bandwidth, the link's from a PCIe generation and width, or from nvidia-smi's answer made up here;
nothing depends on the machine the tests run on.
"""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest
import torch

from gpukit.core import machine, peaks
from gpukit.measuring import roofline
from gpukit.measuring.roofline import AT_PREDICTION, Limits, device_limits, link_limits, predict

H100 = Limits("NVIDIA H100 SXM", "float32", "matmul", 67e12, 3350e9, "the datasheet", "datasheet")


def test_a_product_is_compute_bound_and_an_expression_memory_bound_on_the_h100():
    n, m = 4096, 2**26
    product, expression = predict(2 * n**3, 3 * 4 * n * n, H100), predict(4 * m, 8 * m, H100)
    assert product.bound == "compute" and product.intensity == pytest.approx(n / 6)
    assert expression.bound == "memory" and expression.intensity == pytest.approx(0.5)
    assert H100.ridge == pytest.approx(67e12 / 3350e9)
    assert product.ratio(2 * product.seconds) == pytest.approx(2)
    # What the first H100 run measured (2.71 ms for the product), set against the datasheet's 2.05 ms.
    assert product.clause(2.71e-3) == ("the datasheet predicts 2.05 ms (intensity 683 FLOP/B, so compute-bound); "
                                       "measured 2.71 ms, 1.32 times that")
    # An intensity of a thousand or more reads as a whole number, not '1.37e+03'.
    assert "(intensity 1,365 FLOP/B, so compute-bound)" in predict(2 * 8192**3, 3 * 4 * 8192**2, H100).clause()


def test_a_measurement_below_the_prediction_gets_a_reason_for_each_kind_of_limits():
    cases = [("datasheet", 1e12, "lower precision"), ("datasheet", 1e9, "GPU's caches"),
             ("estimate", 1e12, "estimate is low"), ("estimate", 1e9, "stayed in the caches"),
             ("measured", 1e9, "the copy that measured the bandwidth"), ("link", 0, "fewer bytes crossed it")]
    for kind, flops, said in cases:  # 1e12 FLOPs: compute-bound on these limits; 1e9: memory-bound
        limits = Limits("x", "float32", "copy" if kind == "link" else "matmul", 1e12, 1e11, "the figures", kind)
        prediction = predict(flops, 1e9, limits)
        assert "faster than" not in prediction.clause(AT_PREDICTION * prediction.seconds)
        assert said in prediction.clause(0.5 * prediction.seconds), (kind, flops)


def test_several_measurements_share_one_prediction_and_one_reason():
    m = 2**26
    text = predict(4 * m, 8 * m, H100).clauses({"eagerly": 832e-6, "compiled": 100e-6, "fused": 120e-6})
    assert text.startswith("the datasheet predicts 160 µs (intensity 0.5 FLOP/B, so memory-bound); measured 832 µs "
                           "eagerly, 5.19 times that, 100 µs compiled")
    assert text.count("measured") == 1 and text.count("faster than") == 1 and "(below 1: faster than" in text


def test_an_unknown_figure_makes_a_bound_on_one_side_or_no_prediction():
    memory_only = Limits("NVIDIA H100 SXM", "bfloat16", "matmul", None, 3350e9, "the datasheet", "datasheet",
                         "gpukit's datasheet table has no bfloat16 figure")
    prediction = predict(2 * 4096**3, 3 * 2 * 4096**2, memory_only)
    assert not prediction.complete and prediction.bound == "unknown"
    assert "predicts at least" in prediction.clause(1e-3) and "no bfloat16 figure" in prediction.clause(1e-3)
    nothing = Limits("mps", "float32", "matmul", None, None, "nothing", "none", "Apple publishes no figure")
    text = predict(1, 1, nothing).clause(0.01)
    assert text == "nothing predicts its time here (Apple publishes no figure); measured 10 ms"
    with pytest.raises(ValueError, match="kind must be one of"):
        Limits("x", "float32", "matmul", 1, 1, "the figures", "a guess")


def test_the_gpu_limits_are_the_datasheets_for_the_precision_and_the_work(fake_cuda):
    product = device_limits("cuda", "float32", operation="matmul")
    assert (product.flops_per_s, product.bytes_per_s, product.kind) == (67e12, 3350e9, "datasheet")
    # FP64 tensor cores for products, the vector units for elementwise work.
    assert device_limits("cuda", "float64", operation="matmul").flops_per_s == 67e12
    assert device_limits("cuda", "float64", operation="elementwise").flops_per_s == 34e12
    # A measured bandwidth does not replace the datasheet's.
    assert device_limits("cuda:0", operation="elementwise", bandwidth=1e9).bytes_per_s == 3350e9


def test_the_tensor_core_precisions_take_the_dense_datasheet_figure(fake_cuda):
    # The H100 SXM's datasheet prints 1,979 TFLOP/s bfloat16 with sparsity; the dense rate is half.
    assert device_limits("cuda", "bfloat16", operation="matmul").flops_per_s == 989.5e12
    assert device_limits("cuda", "tf32", operation="matmul").flops_per_s == 494.5e12


def test_a_precision_the_table_lacks_keeps_the_bandwidth_and_says_why(fake_cuda, monkeypatch):
    # A V100's tensor cores do no bfloat16: its row has no figure for it.
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100-SXM2-16GB")
    limits = device_limits("cuda", "bfloat16", operation="matmul")
    assert limits.flops_per_s is None and limits.bytes_per_s == 900e9
    assert limits.missing == "its datasheet gives no bfloat16 figure"
    assert device_limits("cuda", "torch.float32", operation="matmul").flops_per_s == 15.7e12


def test_a_gpu_the_table_does_not_know_has_no_limits(fake_cuda, monkeypatch):
    monkeypatch.setattr(peaks, "gpu_peak", lambda *args, **kwargs: None)
    limits = device_limits("cuda", operation="matmul")
    assert limits.kind == "none" and "does not know the NVIDIA H100 80GB HBM3" in limits.missing
    assert predict(1e9, 1e6, limits).seconds is None


def test_the_cpu_limits_are_its_estimate_and_a_measured_bandwidth(monkeypatch):
    calls = []

    def estimate(dtype="float32", cpuinfo=None, max_mhz=None, cores=None):
        calls.append(cores)
        return peaks.CpuPeakEstimate(cores=cores or 8, ghz=2.0, simd="AVX2 with FMA",
                                        flops_per_cycle=32 // (2 if dtype == "float64" else 1), dtype=dtype,
                                        clock_source="given")

    monkeypatch.setattr(peaks, "estimate_cpu_peak", estimate)
    limits = device_limits("cpu", "float32", operation="matmul", bandwidth=20e9)
    assert (limits.flops_per_s, limits.bytes_per_s, limits.kind) == (8 * 2e9 * 32, 20e9, "estimate")
    assert limits.basis == "the CPU's estimated peak and measured bandwidth"
    one = device_limits("cpu", "float64", operation="matmul", bandwidth=20e9, cores=1)
    assert one.flops_per_s == 2e9 * 16 and one.device == "1 core of this CPU" and calls[-1] == 1
    text = predict(2 * 1024**3, 3 * 4 * 1024**2, limits).clause(0.02)
    assert text.startswith("the CPU's estimated peak and measured bandwidth predict 4.19 ms")

    monkeypatch.setattr(peaks, "estimate_cpu_peak", lambda *args, **kwargs: None)
    monkeypatch.setattr(roofline, "_measured_copy_bandwidth", lambda device: 10e9)
    unknown = device_limits("cpu", operation="elementwise")
    assert unknown.flops_per_s is None and unknown.bytes_per_s == 10e9 and unknown.kind == "measured"


def test_the_link_is_the_pcie_rate_per_direction():
    limits = link_limits("cuda", generation=5, lanes=16)
    assert limits.bytes_per_s == pytest.approx(16 * 32e9 * 128 / 130 / 8) and limits.kind == "link"
    # The first H100 run: 256 MiB through pinned memory in 4.94 ms, pageable in 37.5 ms.
    prediction = predict(0, 2**28, limits)
    assert prediction.clause(4.94e-3) == ("the PCIe 5.0 x16 link predicts 4.26 ms (no arithmetic, so bound by the "
                                          "link); measured 4.94 ms, 1.16 times that")
    assert prediction.ratio(37.5e-3) == pytest.approx(8.8, rel=0.01)
    assert link_limits("cuda", generation=3, lanes=8).bytes_per_s == pytest.approx(8 * 8e9 * 128 / 130 / 8)


def test_the_link_is_read_from_nvidia_smi_and_unknown_without_it(monkeypatch, fake_cuda):
    from tests.support.fake_cuda import CUDA_UUID

    answers = {f"GPU-{CUDA_UUID}, 5, 16\n": 5, f"GPU-{CUDA_UUID}, [N/A], [N/A]\n": None}
    for out, generation in answers.items():
        monkeypatch.setattr(machine.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
        monkeypatch.setattr(machine.subprocess, "run", lambda *args, out=out, **kwargs: SimpleNamespace(stdout=out))
        limits = link_limits("cuda:0")
        assert (limits.kind == "link") == (generation is not None), out
    monkeypatch.setattr(machine.shutil, "which", lambda name: None)
    assert link_limits("cuda").kind == "none"

    def fails(*args, **kwargs):
        raise subprocess.CalledProcessError(9, "nvidia-smi")

    monkeypatch.setattr(machine.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(machine.subprocess, "run", fails)
    assert "nvidia-smi reported no PCIe" in link_limits("cuda").missing


def test_a_copy_within_memory_moves_each_byte_twice():
    limits = link_limits("cpu", bandwidth=10e9)
    prediction = predict(0, 1e9, limits)
    assert prediction.bytes_moved == 2e9 and prediction.seconds == pytest.approx(0.2) and prediction.bound == "memory"
    assert prediction.clause(0.2).startswith("the CPU's measured bandwidth predicts 200 ms (a copy within memory)")


def test_a_gpu_is_known_by_its_name_too():
    assert roofline.gpu_limits("NVIDIA H100 80GB HBM3", operation="matmul") == H100
    stand_in = roofline.gpu_limits("CuPy stand-in on NumPy (no GPU)", operation="matmul")
    assert stand_in.kind == "none" and "does not know the CuPy stand-in" in stand_in.missing
    assert "reported no name" in roofline.gpu_limits(None, operation="matmul").missing


def test_predicted_against_is_the_clause_of_the_devices_limits(fake_cuda):
    n = 4096
    assert roofline.predicted_against("cuda", 2 * n**3, 3 * 4 * n * n, 2.71e-3) == predict(
        2 * n**3, 3 * 4 * n * n, H100).clause(2.71e-3)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="operation must be one of"):
        device_limits("cpu", operation="reduction", bandwidth=1e9)
    with pytest.raises(TypeError, match="limits must come from"):
        predict(1, 1, (1e12, 1e9))
    with pytest.raises(ValueError, match="at least 0"):
        predict(float("nan"), 1, H100)


def test_the_link_is_read_for_torchs_gpu_by_its_uuid_not_its_number(monkeypatch, fake_cuda):
    """nvidia-smi numbers GPUs in PCI order and ignores CUDA_VISIBLE_DEVICES: on a node whose first GPU sits on a
    PCIe 4.0 link, a job given the second (torch's cuda:0) must get the second's PCIe 5.0 link."""
    from gpukit.core import machine
    from tests.support.fake_cuda import CUDA_UUID

    lines = ["GPU-11111111-2222-3333-4444-555555555555, 4, 16", f"GPU-{CUDA_UUID}, 5, 16"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setattr(machine, "nvidia_smi_query", lambda fields, index=None: (
        [f"{line.split(', ', 1)[1]}" for line in lines][index:index + 1] if index is not None else lines))
    assert link_limits("cuda:0").device == "PCIe 5.0 x16"
    monkeypatch.setattr(machine, "nvidia_smi_query", lambda fields, index=None: lines[:1])
    assert link_limits("cuda:0").kind == "none"  # no line for this GPU: no rate, never another GPU's


def test_without_torchs_uuid_only_a_single_gpu_node_gives_its_link(monkeypatch):
    """A CuPy-only kernel has no torch to ask for the UUID: one GPU listed is unambiguous, two are not."""
    from gpukit.core import machine

    monkeypatch.setattr(machine, "cuda_uuid", lambda index: None)
    one = ["GPU-11111111-2222-3333-4444-555555555555, 5, 16"]
    monkeypatch.setattr(machine, "nvidia_smi_query", lambda fields, index=None: one)
    assert link_limits("cuda:0").device == "PCIe 5.0 x16"
    two = [*one, "GPU-66666666-2222-3333-4444-555555555555, 4, 16"]
    monkeypatch.setattr(machine, "nvidia_smi_query", lambda fields, index=None: two)
    assert link_limits("cuda:0").kind == "none"


# ------------------------------------------------------------------------------------------ achievable ceilings
def test_a_file_with_an_achievable_section_gives_both_rates_and_where_they_were_found():
    from tests.support.achievable_records import ACHIEVED_COPY, ACHIEVED_FLOPS, with_achievable

    records, name = with_achievable()
    best = roofline.achievable_ceilings(records, name, "cuda:0")
    assert best.known and best.flops_per_s == pytest.approx(ACHIEVED_FLOPS)
    assert best.bytes_per_s == pytest.approx(ACHIEVED_COPY)
    assert name in best.found and "8192 x 8192 x 8192 (search)" in best.found and best.note == ""
    assert "60.3 TFLOP/s" in str(best) and "2848 GB/s" in str(best)


def test_a_file_written_before_the_search_says_so_and_holds_no_rate():
    from gpukit.measuring.benchmark_records import read_benchmark_folder
    from tests.support.achievable_records import h100_file

    records = read_benchmark_folder()
    name = h100_file(records)
    assert "achievable" not in records[name]["devices"]["cuda:0"]  # the book's first H100 run
    best = roofline.achievable_ceilings(records, name, "cuda:0")
    assert not best.known and best.flops_per_s is None and best.bytes_per_s is None
    assert "has no achievable section" in best.note and "its peaks only" in str(best)
    with pytest.raises(ValueError, match="has no device 'cuda:7'"):
        roofline.achievable_ceilings(records, name, "cuda:7")


def test_a_section_without_the_precision_says_which_rate_it_lacks():
    from tests.support.achievable_records import with_achievable

    records, name = with_achievable()
    section = records[name]["devices"]["cuda:0"]["achievable"]
    section["not_measured"]["float32"] = "the search ran out of time"
    del section["matmul"]["float32"]
    best = roofline.achievable_ceilings(records, name, "cuda:0")
    assert not best.known and best.bytes_per_s is not None
    assert "no float32 product rate (the search ran out of time)" in best.note
