"""The bench's search for the best achievable matmul rate per precision and the best copy bandwidth, the schema's
``achievable`` section and ``software.cuda_stack``, and the tables that quote a row as a fraction of the datasheet
and of the achievable: all on the CPU, the GPU path on tests/support/fake_cuda.py's stand-in H100."""

import copy
from types import SimpleNamespace

import pytest
import torch

from booktools import bench
from gpukit.core import machine, timing
from gpukit.core.peaks import MATMUL_PRECISIONS
from gpukit.measuring.benchmark_records import (
    NO_SEARCH,
    ROW_NOTES,
    BenchmarkFileError,
    achievable_table,
    cuda_stack_of,
    read_benchmark_folder,
    results_table,
    validate_record,
)
from tests.support.matmul_stand_ins import no_bfloat16_products, recorded_matmuls, steady_clock

TINY = bench.Search(m=(16, 32), n=(16,), k=(16, 32), repeats=2, budget_s=60.0)
TINY_SHAPES = {(m, n, k) for m in (16, 32) for n in (16,) for k in (16, 32)}
H100_FILE = "linux-x86_64-cuda-cpu-h100-80gb-hbm3-2026-11-26.json"


def searched(calls):
    return [c for c in calls if c["shape"] in TINY_SHAPES]


@pytest.fixture(scope="module")
def cpu_record():
    """A quick run of the whole suite on this CPU, search included (a few seconds)."""
    return bench.run_suite(["cpu"], quick=True, progress=False, machine="this CPU, quick")


# ------------------------------------------------------------------------------------------ the search
def test_each_shape_is_timed_into_one_output_allocated_before_its_timing(monkeypatch):
    calls = recorded_matmuls(monkeypatch)
    found = bench.search_matmul("cpu", "float32", TINY)
    assert found["shapes_timed"] == len(TINY_SHAPES)
    by_shape: dict = {}
    for call in searched(calls):
        by_shape.setdefault(call["shape"], []).append(call)
    assert set(by_shape) == TINY_SHAPES
    for shape, shape_calls in by_shape.items():
        assert len(shape_calls) == 1 + TINY.repeats, shape  # a warm-up, then the timed products
        assert shape_calls[0]["out"] is not None and all(c["out"] is shape_calls[0]["out"] for c in shape_calls)
        assert tuple(shape_calls[0]["out"].shape) == shape[:2]
    assert (found["m"], found["n"], found["k"]) in TINY_SHAPES
    assert found["flop_s"] == pytest.approx(2 * found["m"] * found["n"] * found["k"] / found["median"])


def fixed_times(monkeypatch, seconds_per_shape):
    """gpukit.benchmark stood in: each product of shape (m, n, k) takes the given time."""
    def benchmark(fn, a, b, *, out, repeats, flops, **kwargs):
        shape = (a.shape[0], b.shape[1], a.shape[1])
        return timing.Timing(str(shape), (seconds_per_shape[shape],) * repeats, flops=flops)

    monkeypatch.setattr(bench, "benchmark", benchmark)


def test_the_search_keeps_the_fastest_rate_not_the_shortest_time(monkeypatch):
    # 32 x 16 x 32 does four times the work of 16 x 16 x 16 in twice the time: the best rate, not the best time.
    fixed_times(monkeypatch, {(16, 16, 16): 1e-3, (32, 16, 16): 3e-3, (16, 16, 32): 3e-3, (32, 16, 32): 2e-3})
    found = bench.search_matmul("cpu", "float32", TINY)
    assert (found["m"], found["n"], found["k"]) == (32, 16, 32)
    assert found["flop_s"] == pytest.approx(2 * 32 * 16 * 32 / 2e-3)


def test_a_row_of_the_size_sweep_faster_than_the_search_is_the_achievable(monkeypatch):
    fixed_times(monkeypatch, dict.fromkeys(TINY_SHAPES, 1.0))  # a slow search
    row = {"benchmark": "matmul", "device": "cpu", "dtype": "float64", "size": 512, "rate": 50.0, "median": 5.4e-3}
    section = bench.achievable("cpu", [row], TINY, notes=[])
    assert section["matmul"]["float64"]["found_by"] == "size sweep"
    assert section["matmul"]["float64"]["flop_s"] == pytest.approx(50e9)
    assert section["matmul"]["float32"]["found_by"] == "search"


def test_the_search_stops_at_its_time_budget_and_says_so():
    notes = []
    found = bench.search_matmul("cpu", "float32", bench.Search(m=(16, 32), n=(16,), k=(16, 32), repeats=1,
                                                               budget_s=0.0), notes)
    assert found["shapes_timed"] == 1
    assert notes == ["matmul search on cpu in float32: stopped after 1 of 4 shapes, at the time budget of 0 s"]


def test_the_command_lines_search_seconds_replace_each_precisions_budget(monkeypatch):
    import argparse

    assert bench.search_for("cuda:0", seconds=6).budget_s == 6.0
    assert bench.search_for("cpu", seconds=6).shapes() == bench.search_for("cpu").shapes()
    with pytest.raises(ValueError, match="positive number, not 0"):
        bench.search_for("cpu", seconds=0)
    parser = argparse.ArgumentParser()
    bench.add_bench_command(parser.add_subparsers())
    seen = {}

    def suite(devices, **kwargs):
        seen.update(kwargs)
        raise RuntimeError("stopped by the test")

    monkeypatch.setattr(bench, "run_suite", suite)
    assert bench.run_bench_command(parser.parse_args(["bench", "--search-seconds", "6"]), argv=[]) == 2
    assert seen["search_seconds"] == 6.0


def test_tf32_products_run_at_high_precision_and_every_other_at_highest(fake_cuda, monkeypatch):
    torch.set_float32_matmul_precision("medium")  # a setting made before the bench: it must come back
    try:
        calls = recorded_matmuls(monkeypatch)
        section = bench.achievable("cuda:0", [], TINY, notes=[])
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision("highest")
    assert set(section["matmul"]) == set(MATMUL_PRECISIONS) and section["not_measured"] == {}
    timed = searched(calls)
    per_shape = len(TINY_SHAPES) * (1 + TINY.repeats)
    float32 = [c["precision"] for c in timed if c["dtype"] == "float32"]
    assert sorted(float32) == ["high"] * per_shape + ["highest"] * per_shape  # TF32, then float32 as it is
    for dtype in ("bfloat16", "float16", "float64"):
        assert [c["precision"] for c in timed if c["dtype"] == dtype] == ["highest"] * per_shape


def test_precisions_a_device_lacks_are_recorded_with_the_reason(monkeypatch):
    assert "cpu has none" in bench._why_not("cpu", "tf32")
    assert bench._why_not("mps", "float64") == "MPS has no float64"
    assert bench._why_not("cpu", "float64") is None
    no_bfloat16_products(monkeypatch, '"addmm" not implemented for \'BFloat16\'. More text.')
    section = bench.achievable("cpu", [], TINY, notes=[])
    assert section["not_measured"]["bfloat16"] == ("bfloat16 products fail on cpu: RuntimeError: \"addmm\" not "
                                                   "implemented for 'BFloat16'. More text.")  # the first line
    assert "bfloat16" not in section["matmul"] and "tf32" in section["not_measured"]


def test_no_tf32_before_compute_capability_8(fake_cuda, monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: SimpleNamespace(
        name="Tesla V100-SXM2-16GB", total_memory=16 * 2**30, major=7, minor=0, multi_processor_count=80))
    why = bench._why_not("cuda:0", "tf32")
    assert "compute capability 8.0" in why and "7.0" in why
    assert bench._why_not("cuda:0", "float16") is None


def test_a_rate_above_the_datasheet_is_left_out_with_a_note(fake_cuda, monkeypatch):
    """On the stand-in H100 a clock that advances 1 ns per reading makes every 64^3 product take 1 ns: 524 TFLOP/s,
    above the H100's float32 and float64 peaks (67 TFLOP/s), which gpukit.benchmark refuses (ImpossibleSpeed).
    Such a shape is left out and noted; bfloat16 has no check there and is kept."""
    steady_clock(monkeypatch, 1e-9)
    notes = []
    section = bench.achievable("cuda:0", [], bench.Search(m=(64,), n=(64,), k=(64,), repeats=2, budget_s=60.0),
                               notes)
    for precision in ("float32", "float64"):
        assert precision not in section["matmul"]
        assert "no shape of the search could be timed" in section["not_measured"][precision]
        assert any(f"in {precision}: 64 x 64 x 64 left out, faster than the datasheet allows" in n for n in notes)
    assert section["matmul"]["bfloat16"]["flop_s"] > 67e12


# ------------------------------------------------------------------------------------------ the record
def test_a_quick_run_on_a_stand_in_h100_records_what_it_achieved(fake_cuda, monkeypatch):
    monkeypatch.setattr(machine, "_nvidia_smi", lambda arguments: None)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    record = bench.run_suite(["cuda:0"], quick=True, progress=False, machine="a stand-in H100")
    validate_record(record)
    assert record["software"]["cuda_stack"] == "cuda13"
    section = record["devices"]["cuda:0"]["achievable"]
    assert set(section["matmul"]) == set(MATMUL_PRECISIONS)
    tf32 = section["matmul"]["tf32"]
    assert tf32["peak_flop_s"] == pytest.approx(494.5e12) and tf32["peak"].startswith("published: NVIDIA H100")
    assert section["matmul"]["float64"]["peak_flop_s"] == pytest.approx(67e12)  # the FP64 tensor cores
    assert set(section["bandwidth"]) == set(bench.copy_benchmarks("cuda:0"))
    assert section["bandwidth"]["copy"]["peak_bytes_per_s"] == pytest.approx(3350e9)
    assert section["bandwidth"]["host-to-device pinned"]["peak_bytes_per_s"] is None
    for name, best in section["bandwidth"].items():
        assert best["bytes_per_s"] == max(r["rate"] for r in record["results"] if r["benchmark"] == name) * 1e9
    text = bench.summary(record)
    assert "achievable matmul tf32" in text and "achievable device-to-host pinned" in text


def test_a_quick_run_on_the_cpu_records_what_it_achieved(cpu_record):
    section = cpu_record["devices"]["cpu"]["achievable"]
    assert "tf32" in section["not_measured"] and {"float32", "float64"} <= set(section["matmul"])
    assert set(section["bandwidth"]) == {"copy"}
    assert "m in {32, 64}" in section["method"]
    # The CPU's peak is an estimate, or the best measured where that beat it: never below what was achieved.
    peaks = cpu_record["devices"]["cpu"]["peaks"]
    for precision in ("float32", "float64"):
        assert section["matmul"][precision]["flop_s"] <= peaks[f"{precision}_flop_s"] * (1 + 1e-9)
    assert cpu_record["software"]["cuda_stack"] == cuda_stack_of(torch.version.cuda)


def test_cuda_stack_of_a_torch_build():
    assert cuda_stack_of("13.0") == "cuda13" and cuda_stack_of("12.8") == "cuda12"
    assert cuda_stack_of("11.8") is None and cuda_stack_of(None) is None


def _broken(record, change):
    bad = copy.deepcopy(record)
    change(bad)
    return bad


def _section(r):
    return r["devices"]["cpu"]["achievable"]


@pytest.mark.parametrize("change, field", [
    (lambda r: _section(r)["matmul"].pop("float32"), "'devices.cpu.achievable.matmul.float32' must be either"),
    (lambda r: _section(r)["not_measured"].update(float64="why"), "'devices.cpu.achievable.matmul.float64' must be"),
    (lambda r: _section(r)["matmul"]["float32"].update(found_by="guess"), "'devices.cpu.achievable.matmul.float32"
                                                                          ".found_by'"),
    (lambda r: _section(r)["matmul"]["float32"].update(flop_s=1.0), "'devices.cpu.achievable.matmul.float32.flop_s'"
                                                                    " is below the row"),
    (lambda r: _section(r)["matmul"]["float64"].pop("m"), "'devices.cpu.achievable.matmul.float64.m' is missing"),
    (lambda r: _section(r)["matmul"].update(int8=_section(r)["matmul"]["float32"]), "is not one of float32, tf32"),
    (lambda r: _section(r)["bandwidth"]["copy"].update(bytes_per_s=1.0), "'devices.cpu.achievable.bandwidth.copy"
                                                                         ".bytes_per_s' is below"),
    (lambda r: _section(r)["bandwidth"].update(elementwise=_section(r)["bandwidth"]["copy"]),
     "'devices.cpu.achievable.bandwidth.elementwise' is not a copy benchmark"),
    (lambda r: _section(r).pop("method"), "'devices.cpu.achievable.method' is missing"),
    (lambda r: r["devices"]["cpu"].update(fastest={}), "'devices.cpu.fastest' is not part of the schema"),
    (lambda r: r["software"].update(cuda_stack="cuda11"), "'software.cuda_stack' must be one of cuda13, cuda12"),
    (lambda r: r["software"].update(cuda="13.0", cuda_stack="cuda12"), "'software.cuda_stack' is 'cuda12', but a "
                                                                       "torch built for CUDA 13.0 belongs to 'cuda13'"),
    (lambda r: r["software"].update(cuda=None, cuda_stack="cuda13"), "'software.cuda_stack' is 'cuda13'"),
])
def test_a_bad_achievable_section_or_cuda_stack_names_the_field(cpu_record, change, field):
    with pytest.raises(BenchmarkFileError, match="bad-box.json") as raised:
        validate_record(_broken(cpu_record, change), "bad-box.json")
    assert field in str(raised.value)


def test_files_written_before_the_search_and_the_stack_stay_valid(cpu_record):
    records = read_benchmark_folder()
    assert H100_FILE in records and not any("achievable" in device for r in records.values()
                                            for device in r["devices"].values())
    assert not any("cuda_stack" in r["software"] for r in records.values())
    older = _broken(cpu_record, lambda r: (r["devices"]["cpu"].pop("achievable"), r["software"].pop("cuda_stack")))
    assert validate_record(older) is older


# ------------------------------------------------------------------------------------------ the tables
def test_a_searched_file_gives_both_fractions(cpu_record):
    records = {"quick.json": cpu_record}
    table = results_table(records)
    section = _section(cpu_record)
    for precision in ("float32", "float64"):
        rows = table[(table["benchmark"] == "matmul") & (table["dtype"] == precision)]
        best = section["matmul"][precision]["flop_s"] / 1e9
        assert rows["achievable_rate"].eq(best).all()
        assert rows["fraction_of_achievable"].tolist() == pytest.approx((rows["rate"] / best).tolist())
        assert rows["fraction_of_achievable"].max() <= 1 + 1e-9
        assert set(rows["achievable_from"]) == {section["matmul"][precision]["found_by"]}
    elementwise = table[table["benchmark"] == "elementwise"]
    assert elementwise["achievable_rate"].eq(section["bandwidth"]["copy"]["bytes_per_s"] / 1e9).all()
    assert table.loc[table["benchmark"] == "det+fft", "fraction_of_achievable"].isna().all()
    achieved = achievable_table(records).set_index("what")
    assert set(achieved.index) == {*MATMUL_PRECISIONS, "copy"}
    assert achieved.loc["tf32", "found_by"] == "not measured" and "none" in achieved.loc["tf32", "note"]
    assert achieved.loc["float32", "fraction_of_peak"] == pytest.approx(
        section["matmul"]["float32"]["flop_s"] / section["matmul"]["float32"]["peak_flop_s"])


def test_the_h100_file_without_a_search_takes_its_own_best_and_says_so():
    records = read_benchmark_folder()
    table = results_table({H100_FILE: records[H100_FILE]})
    gpu = table[table["device"] == "cuda:0"]
    matmul = gpu[(gpu["benchmark"] == "matmul") & (gpu["dtype"] == "float32")].set_index("size")
    assert matmul.loc[8192, "fraction_of_achievable"] == 1.0  # its fastest size
    assert matmul.loc[4096, "fraction_of_achievable"] == pytest.approx(50960.83 / 51512.93, rel=1e-5)
    assert matmul.loc[4096, "fraction_of_peak"] == pytest.approx(50960.83e9 / 67e12, rel=1e-5)
    assert set(gpu["achievable_from"].dropna()) == {NO_SEARCH}
    # Its device-to-host rows timed a copy into a new host buffer per call: every one says so beside it.
    back = gpu[gpu["benchmark"] == "device-to-host"]
    assert len(back) == 3 and (back["note"] == ROW_NOTES["device-to-host"]).all()
    assert "new host buffer per copy" in ROW_NOTES["device-to-host"]
    assert (gpu.loc[~gpu["benchmark"].isin(ROW_NOTES), "note"] == "").all()
    achieved = achievable_table({H100_FILE: records[H100_FILE]})
    rows = achieved[achieved["device"] == "cuda:0"].set_index("what")
    assert rows.loc["float64", "fraction_of_peak"] == pytest.approx(55956.26 / 67000, rel=1e-5)
    assert rows.loc["device-to-host", "note"] == ROW_NOTES["device-to-host"]
    assert rows.loc["bfloat16", "found_by"] == "not measured" and "before the bench searched" in rows.loc[
        "bfloat16", "note"]
