import dataclasses
import re
import subprocess
import sys
import textwrap

import pytest
import torch

from gpukit.core import machine
from gpukit.core.peaks import (
    Peak,
    data_file,
    device_peak,
    estimate_cpu_peak,
    gpu_peak,
    published_peaks,
)
from gpukit.core.timing import Timing
from tests.support.booktoc import ROOT
from tests.support.installed_copy import install_a_copy
from tests.support.made_up_machines import cpuinfo

REPO = ROOT

# The names torch.cuda.get_device_name() reports, and the row of the peaks table each must match.
DEVICE_NAMES = {
    "Tesla T4": "NVIDIA T4",
    "NVIDIA L4": "NVIDIA L4",
    "NVIDIA A10": "NVIDIA A10",
    "NVIDIA A10G": "NVIDIA A10G",
    "NVIDIA L40S": "NVIDIA L40S",
    "NVIDIA L40": "NVIDIA L40",
    "NVIDIA A40": "NVIDIA A40",
    "NVIDIA A100-SXM4-40GB": "NVIDIA A100 40GB",
    "NVIDIA A100-PCIE-40GB": "NVIDIA A100 40GB",
    "NVIDIA A100-SXM4-80GB": "NVIDIA A100 80GB SXM",
    "NVIDIA A100 80GB PCIe": "NVIDIA A100 80GB PCIe",
    "Tesla V100-SXM2-16GB": "NVIDIA V100 SXM2",
    "Tesla V100-SXM2-32GB": "NVIDIA V100 SXM2",
    "Tesla V100-PCIE-16GB": "NVIDIA V100 PCIe",
    "NVIDIA H100 PCIe": "NVIDIA H100 PCIe",
    "NVIDIA H100 NVL": "NVIDIA H100 NVL",
    "NVIDIA H100 80GB HBM3": "NVIDIA H100 SXM",
    "NVIDIA H200": "NVIDIA H200 SXM",
    "NVIDIA H200 NVL": "NVIDIA H200 NVL",
    "NVIDIA GH200 480GB": "NVIDIA GH200 96GB HBM3",
    # A GH200 whose name does not say it is the 96GB HBM3 variant gets no memory figure.
    "NVIDIA GH200 144G HBM3e": "NVIDIA GH200",
}


def test_published_table_has_the_vendor_figures_with_sources():
    rows = published_peaks()
    assert rows and all(row["source"].strip() for row in rows)
    assert {"V100", "A100", "H100"} <= {word for row in rows for word in row["device"].split()}


@pytest.mark.parametrize(
    ("name", "tflops", "gbs"),
    [
        ("Tesla V100-SXM2-16GB", 15.7, 900),
        ("NVIDIA A100-SXM4-40GB", 19.5, 1555),
        ("NVIDIA A100-SXM4-80GB", 19.5, 2039),
        ("NVIDIA H100 80GB HBM3", 67, 3350),
    ],
)
def test_gpu_peak_matches_device_names(name, tflops, gbs):
    peak = gpu_peak(name, operation="elementwise")
    assert peak.flops_per_s == pytest.approx(tflops * 1e12)
    assert peak.bytes_per_s == pytest.approx(gbs * 1e9)
    assert "datasheet" in peak.source


def test_gpu_peak_float64_and_unknown_device():
    assert gpu_peak("NVIDIA A100-SXM4-40GB", "float64", operation="elementwise").flops_per_s == pytest.approx(9.7e12)
    assert gpu_peak("NVIDIA A100-SXM4-40GB", "float64", operation="matmul").flops_per_s == pytest.approx(19.5e12)
    assert gpu_peak("NVIDIA GeForce GTX 1050", operation="matmul") is None


@pytest.mark.parametrize("bad", ["", "   ", None, 3])
def test_gpu_peak_rejects_bad_names(bad):
    with pytest.raises(ValueError, match="GPU name"):
        gpu_peak(bad, operation="matmul")


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: gpu_peak("A100", "int8", operation="matmul"), ValueError, "int8"),
    # The tensor-core precisions have a peak for matrix products only.
    (lambda: gpu_peak("A100", "float16", operation="elementwise"), ValueError,
     "float16 has a peak for matrix products"),
    (lambda: estimate_cpu_peak("int8", cpuinfo=cpuinfo(), max_mhz=1000), ValueError, "int8"),
    # The operation must be named and known.
    (lambda: gpu_peak("NVIDIA H100 80GB HBM3", "float64"), TypeError, "operation"),
    (lambda: gpu_peak("NVIDIA H100 80GB HBM3", "float64", operation="gemm"), ValueError,
     "'matmul', 'elementwise'.*'gemm'"),
    (lambda: device_peak("cpu", operation="reduction"), ValueError, "operation"),
], ids=["gpu-int8", "gpu-float16-elementwise", "cpu-int8", "no-operation", "gpu-gemm", "cpu-reduction"])
def test_an_unknown_dtype_or_operation_is_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


HEADER = ("device,match,fp32_tflop_s,fp64_tflop_s,fp64_tensor_tflop_s,tf32_tensor_tflop_s,bf16_tensor_tflop_s,"
          "fp16_tensor_tflop_s,memory_gb_s,source\n")


def test_table_without_the_columns_is_an_error(tmp_path):
    path = tmp_path / "peaks.csv"
    path.write_text("device,source\nX,Y\n")
    with pytest.raises(ValueError, match=r"lacks the columns match, fp32_tflop_s, fp64_tflop_s, fp64_tensor_tflop_s, "
                                         r"tf32_tensor_tflop_s, bf16_tensor_tflop_s, fp16_tensor_tflop_s, memory_gb_s"):
        published_peaks(path)
    path.write_text(HEADER.replace(",memory_gb_s", "") + "X,X,1,1,1,1,1,1,Y\n")
    with pytest.raises(ValueError, match=r"peaks\.csv lacks the column memory_gb_s;"):
        published_peaks(path)
    # A table written before the FP64 tensor-core column existed is refused, not read as "no tensor cores".
    path.write_text("device,match,fp32_tflop_s,fp64_tflop_s,memory_gb_s,source\nX,X,1,1,1,Y\n")
    with pytest.raises(ValueError, match=r"lacks the columns fp64_tensor_tflop_s, tf32_tensor_tflop_s"):
        published_peaks(path)
    # So is one written before the TF32, BF16 and FP16 tensor-core columns: read as "no datasheet figure" it would
    # hide the figures a GPU has.
    path.write_text("device,match,fp32_tflop_s,fp64_tflop_s,fp64_tensor_tflop_s,memory_gb_s,source\nX,X,1,1,1,1,Y\n")
    with pytest.raises(ValueError, match=r"lacks the columns tf32_tensor_tflop_s, bf16_tensor_tflop_s, "
                                         r"fp16_tensor_tflop_s;"):
        published_peaks(path)


@pytest.mark.parametrize("bad", ["fast", "0", "-3", "nan", "inf"])
def test_bad_number_names_file_row_and_column(tmp_path, bad):
    path = tmp_path / "peaks.csv"
    path.write_text(HEADER + "Good GPU,Good,1,1,1,1,1,1,1,sheet\n" + f"Bad GPU,Bad,1,1,1,1,1,1,{bad},sheet\n")
    with pytest.raises(ValueError, match=rf"peaks\.csv, row 2 \('Bad GPU'\), column memory_gb_s holds '{bad}'"):
        published_peaks(path)


def test_bad_or_empty_pattern_names_the_row(tmp_path):
    path = tmp_path / "peaks.csv"
    path.write_text(HEADER + "Bad GPU,A100(,1,1,1,1,1,1,1,sheet\n")
    with pytest.raises(ValueError, match=r"row 1 \('Bad GPU'\), column match: 'A100\(' is not a regular expression"):
        published_peaks(path)
    path.write_text(HEADER + "Any GPU,,1,1,1,1,1,1,1,sheet\n")
    with pytest.raises(ValueError, match="match is empty"):
        published_peaks(path)


@pytest.mark.parametrize(
    ("flags", "per_cycle32", "simd"),
    [
        ("sse2 avx avx2 fma avx512f", 64, "AVX-512"),
        ("sse2 avx avx2 fma", 32, "AVX2"),
        ("sse2 avx", 16, "AVX"),
        ("sse2", 8, "SSE2"),
    ],
)
def test_cpu_peak_follows_the_simd_flags(flags, per_cycle32, simd):
    estimate = estimate_cpu_peak("float32", cpuinfo=cpuinfo(cores=2, flags=flags), max_mhz=3000)
    assert estimate.flops_per_cycle == per_cycle32
    assert estimate.flops_per_s == pytest.approx(2 * 3e9 * per_cycle32)
    assert simd in estimate.how() and "assumed" in estimate.how()
    double = estimate_cpu_peak("float64", cpuinfo=cpuinfo(cores=2, flags=flags), max_mhz=3000)
    assert double.flops_per_s == pytest.approx(estimate.flops_per_s / 2)


@pytest.fixture
def this_machine(monkeypatch, tmp_path):
    """This machine's /proc/cpuinfo and /sys, replaced by files the test writes, and no lscpu."""
    path = tmp_path / "cpuinfo"
    path.write_text(cpuinfo(cores=2, flags="sse2 avx avx2 fma", mhz=2450.0))
    monkeypatch.setattr(machine, "CPUINFO", path)
    monkeypatch.setattr(machine, "SYS_CPU", tmp_path / "sys")
    monkeypatch.setattr(machine, "_lscpu_text", lambda: None)
    return tmp_path


def test_cpu_peak_says_it_used_the_current_clock_when_no_maximum_is_reported(this_machine):
    estimate = estimate_cpu_peak()
    assert estimate.ghz == pytest.approx(2.45)
    assert "2.45 GHz (current clock from" in estimate.how()
    assert "cpuinfo; the maximum was not reported)" in estimate.how()


def test_cpu_peak_prefers_the_cpufreq_maximum(this_machine, monkeypatch):
    for cpu, khz in (("cpu0", 3_500_000), ("cpu1", 3_700_000)):
        folder = this_machine / "sys" / cpu / "cpufreq"
        folder.mkdir(parents=True)
        (folder / "cpuinfo_max_freq").write_text(f"{khz}\n")
    monkeypatch.setattr(machine, "_lscpu_text", lambda: "CPU max MHz: 9999.0000\n")
    estimate = estimate_cpu_peak()
    assert estimate.ghz == pytest.approx(3.7)
    assert "maximum clock from" in estimate.clock_source and "cpuinfo_max_freq" in estimate.clock_source


def test_cpu_peak_falls_back_to_lscpu_max_mhz(this_machine, monkeypatch):
    monkeypatch.setattr(machine, "_lscpu_text", lambda: "Model name: X\nCPU max MHz:  3200.0000\nCPU min MHz: 800\n")
    estimate = estimate_cpu_peak()
    assert estimate.ghz == pytest.approx(3.2)
    assert estimate.clock_source == "maximum clock from lscpu's CPU max MHz"


def test_given_cpuinfo_is_not_paired_with_this_machines_clock(monkeypatch):
    monkeypatch.setattr(machine, "reported_max_mhz", lambda: (9000.0, "this machine"))
    estimate = estimate_cpu_peak(cpuinfo=cpuinfo(mhz=1500.0))
    assert estimate.ghz == pytest.approx(1.5) and "current clock" in estimate.clock_source
    given = estimate_cpu_peak(cpuinfo=cpuinfo(mhz=1500.0), max_mhz=2000)
    assert given.ghz == pytest.approx(2.0) and "max_mhz" in given.how()
    with pytest.raises(ValueError, match="max_mhz"):
        estimate_cpu_peak(cpuinfo=cpuinfo(), max_mhz=-1)


def test_cpu_peak_is_none_when_it_cannot_be_estimated(monkeypatch, tmp_path):
    assert estimate_cpu_peak(cpuinfo=cpuinfo(flags="fpu"), max_mhz=2000) is None  # no known SIMD
    monkeypatch.setattr(machine, "CPUINFO", tmp_path / "missing")
    assert estimate_cpu_peak() is None  # no /proc/cpuinfo (macOS, Windows)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_cpu_peak_rejects_bad_core_counts(bad):
    with pytest.raises(ValueError, match="cores"):
        estimate_cpu_peak(cpuinfo=cpuinfo(), max_mhz=2000, cores=bad)


def test_this_machine_gets_an_estimate_or_none():
    estimate = estimate_cpu_peak()
    assert estimate is None or estimate.flops_per_s > 1e9


def test_device_peak_for_cpu_and_bad_device():
    peak = device_peak("cpu", operation="matmul")
    assert peak is None or (isinstance(peak, Peak) and peak.source.startswith("estimate"))
    with pytest.raises(ValueError, match="gpu0"):
        device_peak("gpu0", operation="matmul")


def test_peak_str_says_unknown():
    text = str(Peak("x", None, None, "nowhere"))
    assert "unknown" in text and "nowhere" in text


@pytest.mark.parametrize(("name", "device"), DEVICE_NAMES.items())
def test_each_reported_name_matches_its_row(name, device):
    assert gpu_peak(name, operation="matmul").device == device
    assert gpu_peak(name, "float64", operation="elementwise").device == device


def test_every_row_compiles_and_is_some_listed_name_first_match():
    rows = published_peaks()
    for row in rows:
        re.compile(row["match"])
    assert {row["device"] for row in rows} == set(DEVICE_NAMES.values())
    assert len({row["device"] for row in rows}) == len(rows), "two rows share a device name"


@pytest.mark.parametrize(
    ("name", "fp32", "fp64", "gbs"),
    [
        ("Tesla T4", 8.1, None, 320),
        ("NVIDIA L4", 30.3, None, 300),
        ("NVIDIA A10", 31.2, None, 600),
        ("NVIDIA L40S", 91.6, None, 864),
        ("NVIDIA L40", 90.5, None, 864),
        ("NVIDIA A40", 37.4, None, 696),
        ("NVIDIA H100 PCIe", 51, 26, 2000),
        ("NVIDIA H100 NVL", 60, 30, 3900),
        ("NVIDIA H100 80GB HBM3", 67, 34, 3350),
        ("NVIDIA H200", 67, 34, 4800),
        ("NVIDIA H200 NVL", 60, 30, 4800),
        ("NVIDIA GH200 480GB", 67, 34, 4000),
        ("NVIDIA GH200 144G HBM3e", 67, 34, None),
    ],
)
def test_published_figures_and_missing_ones(name, fp32, fp64, gbs):
    single, double = gpu_peak(name, operation="elementwise"), gpu_peak(name, "float64", operation="elementwise")
    assert single.flops_per_s == pytest.approx(fp32 * 1e12)
    if fp64 is None:
        assert double.flops_per_s is None and "no FP64 figure" in double.source
    else:
        assert double.flops_per_s == pytest.approx(fp64 * 1e12)
    assert double.bytes_per_s == (None if gbs is None else pytest.approx(gbs * 1e9))
    assert "datasheet" in single.source


# A float64 product on an H100 SXM reaching 55 TFLOP/s (HPL on H100s reaches about that per GPU): a plausible
# measurement, above the vector FP64 figure (34) and below the FP64 tensor-core one (67).
H100_FLOAT64_MATMUL = 55e12


def test_float64_matmul_on_an_h100_is_held_to_the_tensor_core_peak():
    n = 8192
    timing = Timing("float64 matmul", (2 * n**3 / H100_FLOAT64_MATMUL,) * 3, flops=2 * n**3)
    matmul = gpu_peak("NVIDIA H100 80GB HBM3", "float64", operation="matmul")
    assert matmul.flops_per_s == pytest.approx(67e12) and matmul.units == "FP64 tensor cores"
    fraction = dataclasses.replace(timing, peak_flops=matmul.flops_per_s).fraction_of_peak_flops
    assert fraction == pytest.approx(55 / 67) and fraction <= 1
    # Against the vector figure the same measurement would claim more than the hardware can do.
    vector = gpu_peak("NVIDIA H100 80GB HBM3", "float64", operation="elementwise")
    assert dataclasses.replace(timing, peak_flops=vector.flops_per_s).fraction_of_peak_flops > 1


def test_float64_elementwise_work_is_held_to_the_vector_peak():
    for name, vector in (("NVIDIA H100 80GB HBM3", 34e12), ("NVIDIA A100-SXM4-80GB", 9.7e12),
                         ("NVIDIA H100 PCIe", 26e12), ("NVIDIA H200", 34e12)):
        peak = gpu_peak(name, "float64", operation="elementwise")
        assert peak.flops_per_s == pytest.approx(vector) and peak.units == "FP64 vector units"
        assert gpu_peak(name, "float64", operation="matmul").flops_per_s == pytest.approx(2 * vector, rel=0.02)


@pytest.mark.parametrize("operation", ["matmul", "elementwise"])
def test_float32_and_gpus_without_fp64_tensor_cores_have_one_peak(operation):
    assert gpu_peak("NVIDIA H100 80GB HBM3", operation=operation).flops_per_s == pytest.approx(67e12)
    assert gpu_peak("NVIDIA H100 80GB HBM3", operation=operation).units == "FP32 vector units"
    v100 = gpu_peak("Tesla V100-SXM2-16GB", "float64", operation=operation)
    assert v100.flops_per_s == pytest.approx(7.8e12) and v100.units == "FP64 vector units"
    assert gpu_peak("Tesla T4", "float64", operation=operation).flops_per_s is None


def test_peak_text_names_the_units():
    text = str(gpu_peak("NVIDIA A100-SXM4-40GB", "float64", operation="matmul"))
    assert "19.5 TFLOP/s (float64 matmul on FP64 tensor cores)" in text and "datasheet" in text


def test_only_gpus_with_fp64_tensor_cores_have_the_tensor_figure():
    tensor = {row["device"] for row in published_peaks() if row["fp64_tensor_tflop_s"] is not None}
    assert tensor == {"NVIDIA A100 40GB", "NVIDIA A100 80GB PCIe", "NVIDIA A100 80GB SXM", "NVIDIA H100 PCIe",
                      "NVIDIA H100 NVL", "NVIDIA H100 SXM", "NVIDIA H200 NVL", "NVIDIA H200 SXM",
                      "NVIDIA GH200 96GB HBM3", "NVIDIA GH200"}
    for row in published_peaks():
        if row["fp64_tensor_tflop_s"] is not None:
            assert row["fp64_tensor_tflop_s"] >= row["fp64_tflop_s"], row["device"]


def test_h100_nvl_row_names_its_datasheet_edition():
    source = gpu_peak("NVIDIA H100 NVL", operation="matmul").source
    assert "edition" in source and "per GPU" in source


def test_cpu_estimate_is_the_same_peak_for_both_operations():
    estimate = estimate_cpu_peak("float64", cpuinfo=cpuinfo(), max_mhz=2000)
    assert estimate.as_peak("matmul").flops_per_s == estimate.as_peak("elementwise").flops_per_s
    assert estimate.as_peak("matmul").operation == "matmul"


def test_a10g_has_no_invented_figures():
    peak = gpu_peak("NVIDIA A10G", operation="matmul")
    assert gpu_peak("NVIDIA A10G", "float64", operation="matmul").flops_per_s is None
    assert peak.flops_per_s is None and peak.bytes_per_s is None
    assert "no NVIDIA datasheet" in peak.source and "unknown" in str(peak)


def test_reference_tables_ship_inside_the_package():
    for name in ("hardware-peaks.csv", "published-gpu-figures.csv", "README.md"):
        assert data_file(name).is_file()
    assert not (REPO / "data" / "hardware-peaks.csv").exists()
    assert not (REPO / "data" / "published-gpu-figures.csv").exists()


@pytest.fixture
def fake_cuda(monkeypatch):
    asked = []

    def name(device=None):
        asked.append(device)
        return "NVIDIA H100 80GB HBM3"

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", name)
    return asked


@pytest.mark.parametrize("device", ["cuda", "cuda:1", "CUDA:1"])
def test_device_peak_on_a_fake_h100(fake_cuda, device):
    peak = device_peak(device, operation="matmul")
    assert peak.device == "NVIDIA H100 SXM" and peak.flops_per_s == pytest.approx(67e12)
    assert device_peak(device, "float64", operation="elementwise").flops_per_s == pytest.approx(34e12)
    assert device_peak(device, "float64", operation="matmul").flops_per_s == pytest.approx(67e12)
    assert fake_cuda[0] == device.lower()


def test_device_peak_on_an_unknown_fake_gpu(fake_cuda, monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA GeForce GTX 1050")
    assert device_peak("cuda", operation="matmul") is None


def test_device_peak_on_mps_is_none():
    assert device_peak("mps", operation="matmul") is None


def test_a_non_editable_install_finds_its_tables(tmp_path):
    """pip install --target of a copy of the project, imported with the source tree out of reach."""
    target, elsewhere = install_a_copy(tmp_path)
    check = textwrap.dedent(f"""
        import gpukit, gpukit.core.peaks as peaks
        assert gpukit.__file__.startswith({str(target)!r}), gpukit.__file__
        assert peaks.gpu_peak("NVIDIA H100 80GB HBM3", operation="matmul").device == "NVIDIA H100 SXM"
        assert peaks.data_file("published-gpu-figures.csv").is_file()
        print("ok")
    """)
    run = subprocess.run([sys.executable, "-c", check], cwd=elsewhere, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}, check=False)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


# The tensor-core figures: dense, from the A100 datasheet (which prints each with and without sparsity) and from the
# H100's (which prints them with sparsity, "1/2 lower without sparsity").
@pytest.mark.parametrize(("name", "tf32", "bf16", "fp16"), [
    ("NVIDIA A100-SXM4-40GB", 156, 312, 312),
    ("NVIDIA A100-SXM4-80GB", 156, 312, 312),
    ("NVIDIA A100 80GB PCIe", 156, 312, 312),
    ("NVIDIA H100 PCIe", 378, 756.5, 756.5),
    ("NVIDIA H100 80GB HBM3", 494.5, 989.5, 989.5),
])
def test_tensor_core_peaks_of_matrix_products(name, tf32, bf16, fp16):
    for precision, tflops in (("tf32", tf32), ("bfloat16", bf16), ("float16", fp16)):
        peak = gpu_peak(name, precision, operation="matmul")
        assert peak.flops_per_s == pytest.approx(tflops * 1e12), (name, precision)
        assert peak.units.endswith("tensor cores, dense") and "sparsity" in peak.source
        # Every tensor-core precision is faster than the FP32 vector units it stands in for.
        assert peak.flops_per_s > gpu_peak(name, operation="matmul").flops_per_s
    # bfloat16 and float16 run at twice TF32's rate on both generations.
    assert bf16 == fp16 == pytest.approx(2 * tf32, rel=0.01)


@pytest.mark.parametrize("name", ["NVIDIA H200", "NVIDIA H100 NVL", "Tesla V100-SXM2-16GB", "Tesla T4"])
def test_no_tensor_core_figure_is_said_so(name):
    peak = gpu_peak(name, "bfloat16", operation="matmul")
    assert peak.flops_per_s is None and peak.source.startswith("no datasheet figure for bfloat16")
    assert peak.bytes_per_s == gpu_peak(name, operation="matmul").bytes_per_s


def test_device_peak_of_a_tensor_core_precision():
    assert device_peak("cpu", "bfloat16", operation="matmul") is None  # the CPU estimate knows float32 and float64
    with pytest.raises(ValueError, match="matrix products"):
        device_peak("cpu", "tf32", operation="elementwise")


def test_the_published_timings_table_has_what_the_lessons_read():
    """Lessons 1 and 13 read published-gpu-figures.csv with pandas: its columns, and a source on every row."""
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(data_file("published-gpu-figures.csv").read_text(encoding="utf-8"))))
    assert len(rows) > 5
    assert {"source", "hardware", "work", "cpu", "gpu", "speed-up as published"} <= set(rows[0])
    assert all(row["source"].strip() and row["hardware"].strip() for row in rows)
