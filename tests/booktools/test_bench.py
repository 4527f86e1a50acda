"""The bench's ``matmul-shapes`` rows: n x n products at sizes around multiples of 8, 64 and 128 (the shapes the
hardware likes), in bfloat16, float16 and float32 with TF32 off on a GPU and in float32 on the CPU. The GPU path runs
here on tests/support/fake_cuda.py's stand-in H100, as tests/booktools/test_bench_achievable.py runs the search's:
every timed product writes one output allocated before its timing, between two CUDA events, and each row is held to
its own dtype's datasheet peak."""

from dataclasses import replace

import pytest
import torch

from booktools import bench
from gpukit.core import machine
from gpukit.core.peaks import gpu_peak
from gpukit.measuring.benchmark_records import BENCHMARKS, MATMUL_BENCHMARKS, validate_record
from tests.support.matmul_stand_ins import no_bfloat16_products, recorded_matmuls, steady_clock

H100 = "NVIDIA H100 80GB HBM3"  # tests/support/fake_cuda.py's GPU
QUICK_GPU = bench.plan_for("cuda:0", quick=True)


# ------------------------------------------------------------------------------------------ the sizes
def test_the_sizes_lie_around_multiples_of_8_64_and_128():
    gpu, cpu = bench.plan_for("cuda:0"), bench.plan_for("cpu")
    assert 4096 in gpu.shape_sizes and {4095, 4097} <= set(gpu.shape_sizes)  # a tile's multiple and its neighbours
    for sizes in (gpu.shape_sizes, cpu.shape_sizes):
        assert any(n % 2 for n in sizes), "an odd size: no multiple of 8"
        assert any(n % 8 == 0 and n % 16 for n in sizes), "a multiple of 8 and not of 16"
        assert any(n % 64 == 0 and n % 128 for n in sizes), "a multiple of 64 and not of 128"
        assert any(n % 128 == 0 for n in sizes)
    # One more 128-wide tile per side than 4,096: 1,089 tiles against 1,024 (8.25 waves on 132 SMs against 7.76).
    assert {-(-n // 128) for n in gpu.shape_sizes} == {32, 33}
    assert gpu.shape_dtypes == ("bfloat16", "float16", "float32") and cpu.shape_dtypes == ("float32",)
    mps = bench.plan_for("mps")
    assert mps.shape_dtypes == gpu.shape_dtypes and mps.matmul_dtypes == ("float32",)
    quick = bench.plan_for("cpu", quick=True)
    assert len(quick.shape_sizes) == 2 and max(quick.shape_sizes) <= 64 and quick.shape_repeats <= 2
    assert QUICK_GPU.shape_sizes == quick.shape_sizes and QUICK_GPU.shape_dtypes == gpu.shape_dtypes
    assert gpu.steps("cuda:0") - replace(gpu, shape_sizes=()).steps("cuda:0") == 8 * 3  # the progress bar counts them


def test_the_gpu_part_adds_seconds_not_minutes_to_the_bench():
    """make gpu-check gives the whole bench 150 s (booktools/gpu_check.py's LIMITS_S); the shapes may add about
    20 s. Even at a quarter of the H100's datasheet peak in each dtype (its float32 products reached 77% in the first
    GPU run) the products take a few seconds."""
    plan = bench.plan_for("cuda:0")
    seconds = 0.0
    for dtype in plan.shape_dtypes:
        rate = 0.25 * gpu_peak(H100, dtype, operation="matmul").flops_per_s
        seconds += sum((1 + plan.shape_repeats) * 2 * n**3 / rate for n in plan.shape_sizes)
    assert seconds < 5, f"{seconds:.1f} s of products"
    # and the inputs fit any GPU: three n x n float32 matrices of the largest size
    assert 3 * 4 * max(plan.shape_sizes) ** 2 < 2**30


# ------------------------------------------------------------------------------------------ the GPU path
def test_each_product_is_timed_between_events_into_one_output_made_before(fake_cuda, monkeypatch):
    torch.set_float32_matmul_precision("high")  # TF32 asked for before the bench: float32 rows must not use it
    try:
        calls = recorded_matmuls(monkeypatch, fake_cuda)
        notes = []
        rows = bench.measure_shapes("cuda:0", QUICK_GPU, notes)
        assert torch.get_float32_matmul_precision() == "high"  # the setting comes back afterwards
    finally:
        torch.set_float32_matmul_precision("highest")
    assert notes == []
    sizes, dtypes, repeats = QUICK_GPU.shape_sizes, QUICK_GPU.shape_dtypes, QUICK_GPU.shape_repeats
    assert [(r["dtype"], r["size"]) for r in rows] == [(d, n) for d in dtypes for n in sizes]
    timed = [c for c in calls if c["n"] in sizes]
    for dtype in dtypes:
        for n in sizes:
            these = [c for c in timed if c["n"] == n and c["dtype"] == dtype]
            assert len(these) == 1 + repeats, (dtype, n)  # a warm-up, then the timed products
            out = these[0]["out"]
            assert out is not None and all(c["out"] is out for c in these), "one output, allocated before"
            assert tuple(out.shape) == (n, n) and str(out.dtype) == f"torch.{dtype}"
            assert {fake_cuda.kind(t) for c in these for t in (c["a"], c["b"], c["out"])} == {"device"}
            between = fake_cuda.log[these[0]["at"]:these[-1]["at"]]
            assert not [e for e in between if e[0] == "alloc"], f"{dtype} {n}: allocated while timing"
            # CUDA events on the stream the product is queued on, one pair per timed product
            assert between.count(("event.record", "default stream")) == 2 * (repeats - 1) + 1
            # float32 products in IEEE float32 (TF32 off); the others in their own dtype on the tensor cores
            assert {c["precision"] for c in these} == {"highest"}
    for r in rows:
        assert r["benchmark"] == "matmul-shapes" and r["batch"] is None and r["repeats"] == repeats
        assert r["rate"] == pytest.approx(2 * r["size"] ** 3 / r["median"] / 1e9)


def test_each_row_is_held_to_the_peak_of_its_own_dtype(fake_cuda, monkeypatch):
    """Every product takes 2.62 ns here: 191-200 TFLOP/s at n = 63 and 64. That is above the H100's float32 peak
    (67 TFLOP/s, TF32 off), so those rows are impossible and left out with a note, even with TF32 asked for before
    the bench (which would hold them to TF32's 494.5); it is below its bfloat16 and float16 tensor-core peaks
    (989.5), so those rows are kept, each a fraction of its own dtype's peak."""
    steady_clock(monkeypatch, 2 * 64**3 / 200e12)
    torch.set_float32_matmul_precision("high")
    try:
        notes = []
        rows = bench.measure_shapes("cuda:0", QUICK_GPU, notes)
    finally:
        torch.set_float32_matmul_precision("highest")
    assert {(r["dtype"], r["size"]) for r in rows} == {(d, n) for d in ("bfloat16", "float16") for n in (63, 64)}
    assert [n.split(" (")[0] for n in notes] == [f"matmul-shapes on cuda:0 in float32: n = {n} left out, faster than "
                                                 "the datasheet allows" for n in (63, 64)]
    assert all("float32 peak of 67 TFLOP/s" in n for n in notes)
    peaks = bench._peaks("cuda:0", rows)
    for r in rows:
        assert r["rate"] == pytest.approx(2 * r["size"] ** 3 / (2 * 64**3 / 200e12) / 1e9)
        assert r["fraction_of_peak"] == pytest.approx(r["rate"] * 1e9 / 989.5e12)
    assert peaks["float32_flop_s"] == pytest.approx(67e12)


def test_a_float32_row_is_a_fraction_of_the_float32_peak_without_tf32(fake_cuda, monkeypatch):
    steady_clock(monkeypatch, 2 * 64**3 / 30e12)  # 30 TFLOP/s: possible in float32
    rows = bench.measure_shapes("cuda:0", replace(QUICK_GPU, shape_dtypes=("float32",)), [])
    bench._peaks("cuda:0", rows)
    assert [r["size"] for r in rows] == [63, 64]
    assert rows[1]["fraction_of_peak"] == pytest.approx(30e12 / 67e12)


def test_a_quick_run_on_a_stand_in_h100_records_the_shapes(fake_cuda, monkeypatch):
    monkeypatch.setattr(machine, "_nvidia_smi", lambda arguments: None)
    record = bench.run_suite(["cuda:0"], quick=True, progress=False, machine="a stand-in H100")
    validate_record(record)
    rows = [r for r in record["results"] if r["benchmark"] == "matmul-shapes"]
    assert {(r["dtype"], r["size"]) for r in rows} == {(d, n) for d in QUICK_GPU.shape_dtypes
                                                       for n in QUICK_GPU.shape_sizes}
    achievable = record["devices"]["cuda:0"]["achievable"]["matmul"]
    for r in rows:
        assert r["rate_unit"] == "GFLOP/s" and r["device"] == "cuda:0"
        peak = {"float32": 67e12, "bfloat16": 989.5e12, "float16": 989.5e12}[r["dtype"]]
        assert r["fraction_of_peak"] == pytest.approx(r["rate"] * 1e9 / peak)
        assert achievable[r["dtype"]]["flop_s"] >= r["rate"] * 1e9 * (1 - 1e-9)  # never below a row
    text = bench.summary(record)
    for dtype in QUICK_GPU.shape_dtypes:
        assert f"cuda:0  matmul-shapes           {dtype:9s} fastest n = " in text


# ------------------------------------------------------------------------------------------ the CPU path
def test_the_cpu_times_float32_with_the_hosts_clock_and_its_ceiling_covers_the_rows(monkeypatch):
    calls = recorded_matmuls(monkeypatch)
    plan = bench.plan_for("cpu", quick=True)
    rows = bench.measure_shapes("cpu", plan, [])
    assert [(r["dtype"], r["size"]) for r in rows] == [("float32", n) for n in plan.shape_sizes]
    assert {c["precision"] for c in calls} == {"highest"}
    # A row faster than the CPU's estimated peak raises its practical ceiling, as a matmul row does.
    fast = {**rows[-1], "rate": 1e9}  # a petaFLOP/s: above any estimate
    peaks = bench._peaks("cpu", [*rows[:-1], fast])
    assert peaks["float32_flop_s"] == pytest.approx(1e18) and fast["fraction_of_peak"] == pytest.approx(1.0)


def test_a_dtype_the_device_cannot_multiply_in_is_skipped_with_the_reason(monkeypatch):
    no_bfloat16_products(monkeypatch, '"addmm" not implemented for \'BFloat16\'')
    steps = []
    notes = []
    plan = replace(bench.plan_for("cpu", quick=True), shape_dtypes=("bfloat16", "float32"))
    rows = bench.measure_shapes("cpu", plan, notes, progress=lambda: steps.append(1))
    assert {r["dtype"] for r in rows} == {"float32"} and len(steps) == 4  # the skipped sizes still move the bar
    assert notes == ["matmul-shapes on cpu in bfloat16 skipped: bfloat16 products fail on cpu: RuntimeError: "
                     "\"addmm\" not implemented for 'BFloat16'"]


# ------------------------------------------------------------------------------------------ record and summary
def test_a_shapes_row_faster_than_the_search_is_the_achievable(monkeypatch):
    monkeypatch.setattr(bench, "search_matmul", lambda device, precision, search, notes, progress=None: {
        "flop_s": 10e9, "m": 16, "n": 16, "k": 16, "median": 1.0, "shapes_timed": 1})
    row = {"benchmark": "matmul-shapes", "device": "cpu", "dtype": "float32", "size": 256, "rate": 50.0,
           "median": 6.7e-4}
    section = bench.achievable("cpu", [row], bench.search_for("cpu", quick=True), notes=[])
    best = section["matmul"]["float32"]
    assert best["found_by"] == "size sweep" and (best["m"], best["n"], best["k"]) == (256, 256, 256)
    assert best["flop_s"] == pytest.approx(50e9)
    assert section["matmul"]["float64"]["flop_s"] == pytest.approx(10e9)  # no float64 row: the search's


def test_the_schema_names_the_benchmark():
    assert BENCHMARKS["matmul-shapes"][0] == "GFLOP/s" and "matmul-shapes" in MATMUL_BENCHMARKS


def test_the_summary_gives_each_dtypes_fastest_and_slowest_size():
    def row(dtype, n, rate, fraction):
        return {"device": "cuda:0", "benchmark": "matmul-shapes", "dtype": dtype, "size": n, "rate": rate,
                "rate_unit": "GFLOP/s", "fraction_of_peak": fraction}

    record = {"machine": "m", "date": "2026-01-01", "mode": "full", "notes": [], "results": [
        row("bfloat16", 4095, 3.0e5, 0.30), row("bfloat16", 4096, 6.0e5, 0.61), row("bfloat16", 4097, 4.5e5, 0.45),
        row("float32", 4096, 5.0e4, 0.75), row("float32", 4095, 4.0e4, 0.60)]}
    lines = bench.summary(record).splitlines()[1:]
    assert lines == [
        "  cuda:0  matmul-shapes           bfloat16  fastest n = 4,096: 6e+05 GFLOP/s, 61% of peak; slowest n = 4,095: "
        "3e+05 GFLOP/s (50% of the fastest)",
        "  cuda:0  matmul-shapes           float32   fastest n = 4,096: 5e+04 GFLOP/s, 75% of peak; slowest n = 4,095: "
        "4e+04 GFLOP/s (80% of the fastest)"]
