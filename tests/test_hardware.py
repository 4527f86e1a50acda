import pytest
import torch

from gpukit import hardware
from gpukit.hardware import (
    Peak,
    against_peak,
    copy_bandwidth,
    device_peak,
    estimate_cpu_peak,
    gpu_peak,
    parse_cpuinfo,
    published_peaks,
)
from gpukit.timing import Timing


def cpuinfo(cores=2, flags="fpu sse sse2 avx avx2 fma avx512f", mhz=2000.0, threads_per_core=1):
    blocks = []
    for i in range(cores * threads_per_core):
        blocks.append(
            f"processor\t: {i}\nmodel name\t: Test CPU\ncpu MHz\t\t: {mhz}\nphysical id\t: 0\n"
            f"core id\t\t: {i // threads_per_core}\nflags\t\t: {flags}\n"
        )
    return "\n".join(blocks)


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
    peak = gpu_peak(name)
    assert peak.flops_per_s == pytest.approx(tflops * 1e12)
    assert peak.bytes_per_s == pytest.approx(gbs * 1e9)
    assert "datasheet" in peak.source


def test_gpu_peak_float64_and_unknown_device():
    assert gpu_peak("NVIDIA A100-SXM4-40GB", "float64").flops_per_s == pytest.approx(9.7e12)
    assert gpu_peak("NVIDIA GeForce GTX 1050") is None


@pytest.mark.parametrize("bad", ["", "   ", None, 3])
def test_gpu_peak_rejects_bad_names(bad):
    with pytest.raises(ValueError, match="GPU name"):
        gpu_peak(bad)


def test_unknown_dtype_is_named():
    with pytest.raises(ValueError, match="float16"):
        gpu_peak("A100", "float16")
    with pytest.raises(ValueError, match="int8"):
        estimate_cpu_peak("int8", cpuinfo=cpuinfo(), max_mhz=1000)


def test_table_without_the_columns_is_an_error(tmp_path):
    path = tmp_path / "peaks.csv"
    path.write_text("device,source\nX,Y\n")
    with pytest.raises(ValueError, match="lacks the columns"):
        published_peaks(path)


def test_parse_cpuinfo_counts_physical_cores_and_reads_flags():
    info = parse_cpuinfo(cpuinfo(cores=4, threads_per_core=2, mhz=2500.5))
    assert info["cores"] == 4 and info["logical"] == 8
    assert info["mhz"] == 2500.5
    assert {"avx2", "fma"} <= info["flags"]


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


def test_cpu_peak_uses_cpuinfo_clock_without_a_max_frequency(monkeypatch):
    monkeypatch.setattr(hardware, "_read_max_mhz", lambda: None)
    estimate = estimate_cpu_peak(cpuinfo=cpuinfo(mhz=1500.0))
    assert estimate.ghz == pytest.approx(1.5)


def test_cpu_peak_is_none_when_it_cannot_be_estimated(monkeypatch, tmp_path):
    assert estimate_cpu_peak(cpuinfo=cpuinfo(flags="fpu"), max_mhz=2000) is None  # no known SIMD
    monkeypatch.setattr(hardware, "CPUINFO", tmp_path / "missing")
    assert estimate_cpu_peak() is None  # no /proc/cpuinfo (macOS, Windows)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_cpu_peak_rejects_bad_core_counts(bad):
    with pytest.raises(ValueError, match="cores"):
        estimate_cpu_peak(cpuinfo=cpuinfo(), max_mhz=2000, cores=bad)


def test_this_machine_gets_an_estimate_or_none():
    estimate = estimate_cpu_peak()
    assert estimate is None or estimate.flops_per_s > 1e9


def test_device_peak_for_cpu_and_bad_device():
    peak = device_peak("cpu")
    assert peak is None or (isinstance(peak, Peak) and peak.source.startswith("estimate"))
    with pytest.raises(ValueError, match="gpu0"):
        device_peak("gpu0")


def test_peak_str_says_unknown():
    text = str(Peak("x", None, None, "nowhere"))
    assert "unknown" in text and "nowhere" in text


def test_copy_bandwidth_counts_read_and_write():
    timing = copy_bandwidth("cpu", nbytes=1 << 20, repeats=2)
    assert timing.bytes_moved == 2 << 20
    assert timing.bytes_per_s > 0
    with pytest.raises(ValueError, match="nbytes"):
        copy_bandwidth("cpu", nbytes=0)


def test_against_peak_gives_fractions():
    timing = Timing("t", (2.0, 2.0), flops=4e9, bytes_moved=1e9)
    rated = against_peak(timing, peak_flops=4e9, peak_bytes_per_s=1e9)
    assert rated.fraction_of_peak_flops == pytest.approx(0.5)
    assert rated.fraction_of_peak_bandwidth == pytest.approx(0.5)
    assert against_peak(timing).fraction_of_peak_flops is None
    with pytest.raises(ValueError, match="peak_flops"):
        against_peak(timing, peak_flops=-1)
    with pytest.raises(TypeError, match="Timing"):
        against_peak(torch.zeros(1))
