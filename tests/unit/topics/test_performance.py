"""gpukit.topics.performance: the roofline read from benchmark files, and Nsight Compute's CSV read into the numbers
lesson 16 prints.

The CSV fixtures follow ``ncu --csv --page details``: a header of quoted column names, then one row per metric and
kernel launch. Two layouts are tested, as Nsight Compute's versions print them: the newer one (columns ``Block
Size``, ``Grid Size``, ``Device``, ``CC``, and the rule columns ``Rule Name`` ... ``Estimated Speedup``, with rows
that carry a rule's message and no metric) and the older one (``Kernel Time`` after the kernel's name). The
section metrics carry their labels ("Achieved Occupancy", "Duration"); metrics asked for with ``--metrics``
carry their names (``dram__bytes.sum.per_second``, the stall reasons). The values are made up, in the ranges an
H100 gives for a copy.
"""

from __future__ import annotations

import copy
import json
import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from gpukit.measuring.benchmark_records import benchmark_folder, read_benchmark_folder  # noqa: E402
from gpukit.topics.performance import NCU_COLUMNS, Roofline, device_roofline, ncu_metrics, ncu_summary  # noqa: E402

NEW_HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
              '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name",'
              '"Rule Type","Rule Description","Estimated Speedup Type","Estimated Speedup"')
OLD_HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context","Stream",'
              '"Section Name","Metric Name","Metric Unit","Metric Value"')
KERNEL = "copy_rows(const float *, float *, int)"
METRICS = [  # (section, name, unit, value), --print-units base
    ("GPU Speed Of Light Throughput", "DRAM Frequency", "hz", "2,619,000,000"),
    ("GPU Speed Of Light Throughput", "Duration", "nsecond", "193,248"),
    ("GPU Speed Of Light Throughput", "Memory Throughput", "%", "88.41"),
    ("GPU Speed Of Light Throughput", "DRAM Throughput", "%", "88.41"),
    ("Occupancy", "Theoretical Occupancy", "%", "100"),
    ("Occupancy", "Achieved Occupancy", "%", "83.27"),
    ("Warp State Statistics", "Warp Cycles Per Issued Instruction", "cycle", "61.20"),
    ("Command line profiler metrics", "dram__bytes.sum.per_second", "byte/second", "2,778,914,207,650.21"),
    ("Command line profiler metrics", "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
     "", "48.91"),
    ("Command line profiler metrics", "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", "", "0"),
    ("Command line profiler metrics", "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio", "", "3.10"),
]


def new_layout(metrics=METRICS, launch="0", kernel=KERNEL, preamble=True) -> str:
    lines = ["==PROF== Connected to process 4242 (/tmp/lesson16/kernels)",
             "==PROF== Profiling \"copy_rows\" - 0: 0%....50%....100% - 9 passes", "no error",
             "==PROF== Disconnected from process 4242"] if preamble else []
    lines.append(NEW_HEADER)
    head = f'"{launch}","4242","kernels","127.0.0.1","{kernel}","1","7","(256, 1, 1)","(262144, 1, 1)","0","9.0"'
    for section, name, unit, value in metrics:
        lines.append(f'{head},"{section}","{name}","{unit}","{value}","","","","",""')
    lines.append(f'{head},"Occupancy","","","","AchievedOccupancy","OPT","The difference between calculated '
                 'theoretical (100.0%) and measured achieved occupancy (83.3%) can be the result of warp '
                 'scheduling overheads.","local","16.73"')
    return "\n".join(lines) + "\n"


def old_layout(metrics=METRICS) -> str:
    head = f'"1","4242","kernels","127.0.0.1","{KERNEL}","2026-Nov-27 00:10:11","1","7"'
    rows = [f'{head},"{section}","{name}","{unit}","{value}"' for section, name, unit, value in metrics]
    return "\n".join([OLD_HEADER, *rows]) + "\n"


# ------------------------------------------------------------------------------------------ ncu's CSV
@pytest.mark.parametrize("text", [new_layout(), old_layout()], ids=["with rule columns", "with Kernel Time"])
def test_a_copys_bandwidth_occupancy_and_main_stall_are_read(text):
    [summary] = ncu_summary(text)
    assert summary["kernel"] == KERNEL
    assert summary["bandwidth"] == pytest.approx(2.77891420765021e12)
    assert summary["occupancy"] == pytest.approx(0.8327)
    assert summary["stall"] == ("long_scoreboard", pytest.approx(48.91))
    assert set(summary["stalls"]) == {"long_scoreboard", "barrier", "wait"}
    assert summary["duration"] == pytest.approx(193_248e-9)  # nanoseconds, ncu's unit for durations


def test_the_documented_columns_are_the_ones_read():
    header = [c.strip('"') for c in NEW_HEADER.split(",")]
    assert set(NCU_COLUMNS) <= set(header)
    assert set(NCU_COLUMNS) <= {c.strip('"') for c in OLD_HEADER.split(",")}


def test_prefixed_units_are_scaled_to_base_units():
    # Without --print-units base, ncu scales each value: "Tbyte/second", "usecond".
    scaled = [("Command line profiler metrics", "dram__bytes.sum.per_second", "Tbyte/second", "2.78"),
              ("GPU Speed Of Light Throughput", "Duration", "usecond", "193.25"),
              ("Occupancy", "Achieved Occupancy", "%", "83.27")]
    [summary] = ncu_summary(new_layout(scaled))
    assert summary["bandwidth"] == pytest.approx(2.78e12)
    assert summary["duration"] == pytest.approx(193.25e-6)
    assert summary["occupancy"] == pytest.approx(0.8327)


def test_each_launch_is_its_own_summary_and_missing_numbers_are_none():
    text = new_layout() + "\n".join(new_layout(METRICS[:2], launch="1", kernel="fill(float *, int)",
                                               preamble=False).splitlines()[1:]) + "\n"
    first, second = ncu_summary(text)
    assert first["kernel"] == KERNEL and second["kernel"] == "fill(float *, int)"
    assert second["bandwidth"] is None and second["occupancy"] is None and second["stall"] is None
    assert second["duration"] == pytest.approx(193_248e-9)
    assert first["load_requests"] is None and first["load_sectors"] is None  # not asked for


def test_the_global_load_counters_are_read_where_ncu_was_asked_for_them():
    from gpukit.topics.performance import LOAD_REQUESTS, LOAD_SECTORS

    metrics = [*METRICS, ("Command line profiler metrics", LOAD_REQUESTS, "", "524,288"),
               ("Command line profiler metrics", LOAD_SECTORS, "sector", "8,388,608")]
    [summary] = ncu_summary(new_layout(metrics))
    assert summary["load_requests"] == 524_288 and summary["load_sectors"] == 8_388_608


def test_a_gpus_roofline_knows_its_datasheets_product_peaks_by_precision():
    h100 = device_roofline("cuda", gpu="H100")
    assert h100.matmul_peak("bfloat16") == pytest.approx(989.5e12)
    assert h100.matmul_peak("float32") == pytest.approx(67e12)
    assert device_roofline("cpu").matmul_peak("bfloat16") is None  # no datasheet for a CPU


def test_a_rule_row_is_not_a_metric_and_text_values_stay_text():
    metrics = [*METRICS, ("Launch Statistics", "Function Cache Configuration", "", "CachePreferNone")]
    launch = ncu_metrics(new_layout(metrics))["0"]
    assert "" not in launch["metrics"]
    assert launch["metrics"]["Function Cache Configuration"] == ("CachePreferNone", "")


def test_output_without_csv_says_how_ncu_was_run():
    with pytest.raises(ValueError, match="--csv"):
        ncu_summary("==PROF== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
                    "Performance Counters on the target device 0.\n")


def test_a_header_without_the_metric_columns_names_what_is_missing():
    with pytest.raises(ValueError, match="Metric Value"):
        ncu_summary('"ID","Kernel Name","Section Name","Metric Name","Metric Unit"\n"0","k","S","m","%"\n')


# ------------------------------------------------------------------------------------------ the roofline
def test_the_cpu_roofline_comes_from_the_build_machines_file():
    roof = device_roofline("cpu")
    cpu_files = [name for name, record in read_benchmark_folder().items()
                 if all(entry["kind"] == "cpu" for entry in record["devices"].values())]
    assert cpu_files and roof.source.startswith(sorted(cpu_files)[-1])
    record = json.loads((benchmark_folder() / sorted(cpu_files)[-1]).read_text())
    assert roof.flops_per_s == record["devices"]["cpu"]["peaks"]["float32_flop_s"]
    matmuls = [p for p in roof.points if p[0].startswith("matmul")]
    assert matmuls and all(math.isclose(intensity, int(label.split()[1]) / 6) for label, intensity, _ in matmuls)


def test_a_gpu_roofline_is_its_files_with_the_files_points(monkeypatch):
    roof = device_roofline("cuda", gpu="NVIDIA H100 80GB HBM3")
    assert roof.name == "NVIDIA H100 80GB HBM3" and "h100" in roof.source
    assert roof.flops_per_s == 67e12 and roof.bytes_per_s == 3.35e12
    assert roof.ridge == pytest.approx(20)
    assert roof.date == read_benchmark_folder()[roof.source.split()[0]]["date"]
    assert {p[0] for p in roof.points} >= {"matmul 8192", "elementwise 67,108,864"}
    # By default the name is the one torch reports for the device.
    import torch

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    assert device_roofline("cuda:0").source == roof.source


def test_a_gpu_no_file_has_gets_its_datasheet_and_an_unknown_device_none():
    roof = device_roofline("cuda", gpu="NVIDIA A100-SXM4-80GB")
    assert roof.points == [] and "datasheet" in roof.source and roof.date == ""
    assert roof.flops_per_s == pytest.approx(19.5e12)
    assert device_roofline("cuda", gpu="a GPU nobody knows") is None
    assert device_roofline("mps") is None


def test_matmul_shapes_rows_come_with_their_files_roofline():
    records = copy.deepcopy(read_benchmark_folder())
    name = next(n for n, r in records.items() if "cuda:0" in r["devices"])
    records[name]["results"].append({"benchmark": "matmul-shapes", "device": "cuda:0", "dtype": "bfloat16",
                                     "size": 4097, "batch": None, "median": 0.001, "best": 0.001, "rate": 137.5e3,
                                     "rate_unit": "GFLOP/s", "time_unit": "s", "repeats": 5,
                                     "fraction_of_peak": 0.14})
    assert device_roofline("cuda", records, gpu="H100").shapes == [("bfloat16", 4097, 137.5e3)]
    assert device_roofline("cuda", gpu="H100").shapes == []


def test_attainable_is_the_lower_of_the_two_ceilings_and_the_plot_draws_them():
    roof = Roofline("a device", 100e12, 2e12, "a test")
    assert roof.attainable(1) == 2e12 and roof.attainable(1000) == 100e12
    fig = roof.plot({"measured": [("copy", 0.25, 0.4e12)], "empty": []})
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    ceiling = ax.get_lines()[0]
    assert max(ceiling.get_ydata()) == pytest.approx(100e12)
    plt.close(fig)
    with pytest.raises(ValueError, match="bytes_per_s"):
        Roofline("a device", 1e12, 0, "a test")


def test_a_file_with_achievable_rates_draws_both_roofs_and_times_against_each():
    from tests.support.achievable_records import ACHIEVED_COPY, with_achievable

    records, _ = with_achievable()
    roof = device_roofline("cuda", records, gpu="H100")
    assert roof.ceiling == "datasheet" and roof.achievable.known
    memory_bound = roof.least_seconds(1e6, 1e9)  # 0.001 FLOP/B: the bandwidths decide
    assert memory_bound == pytest.approx({"datasheet": 1e9 / 3.35e12, "achievable": 1e9 / ACHIEVED_COPY})
    fig = roof.plot({"here": [("x", 1.0, 1e12)]})
    lines = fig.axes[0].get_lines()
    dashed = [line for line in lines if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and max(dashed[0].get_ydata()) == pytest.approx(0.9 * 67e12)
    labels = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert labels[:2] == ["NVIDIA H100 80GB HBM3: ceilings (datasheet)",
                          "NVIDIA H100 80GB HBM3: achievable (the bench's search)"]
    plt.close(fig)


def test_without_an_achievable_section_one_roof_and_the_reason_is_printed():
    roof = device_roofline("cuda", gpu="H100")  # the book's file, from before the search
    assert not roof.achievable.known and list(roof.least_seconds(1e6, 1e9)) == ["datasheet"]
    assert "has no achievable section" in str(roof)
    fig = roof.plot({})
    assert not [line for line in fig.axes[0].get_lines() if line.get_linestyle() == "--"]
    plt.close(fig)
    cpu = device_roofline("cpu")
    assert cpu.ceiling == "estimate" and not cpu.achievable.known
    datasheet_only = device_roofline("cuda", gpu="NVIDIA A100-SXM4-80GB")
    assert "no benchmark file has this GPU" in datasheet_only.achievable.note
