"""The benchmark suite's copies between host and device, run on the CPU with a stand-in CUDA GPU.

The first H100 run read 1.1-1.4 GB/s device-to-host from ``python -m booktools bench``: each timed call made a new
256 MiB host tensor (``x.to("cpu", copy=True)``), so the timing held the allocation and its page faults, not the
bus. These tests run the suite's CUDA path here (``fake_cuda``: torch reports an H100, "cuda" tensors live on
the CPU, pinned memory is a plain tensor that says it is pinned) and check that every timed copy writes into a
buffer allocated before the timing, from or into pageable and pinned host memory, each way, also in ``--quick``.
"""

import pytest

from booktools import bench
from gpukit.core import machine
from gpukit.measuring.benchmark_records import BENCHMARKS, validate_record

TRANSFERS = {
    # benchmark: (destination, source, non_blocking), as the stand-in names where each lives
    "host-to-device pageable": ("device", "host", False),
    "device-to-host pageable": ("host", "device", False),
    "host-to-device pinned": ("device", "pinned", True),
    "device-to-host pinned": ("pinned", "device", True),
}


@pytest.mark.parametrize("name", TRANSFERS)
def test_each_timed_copy_writes_the_same_buffer_allocated_before_the_timing(fake_cuda, name):
    nbytes = 4096
    call, moved = bench._copy("cuda:0", nbytes, name)
    assert moved == nbytes
    mark = len(fake_cuda.log)
    results = [call() for _ in range(3)]  # what gpukit.benchmark times, call by call
    assert fake_cuda.allocations(since=mark) == [], f"{name}: a timed call allocated a buffer"
    copies = fake_cuda.copies(since=mark)
    assert len(copies) == 3
    assert {copy[1:4] for copy in copies} == {TRANSFERS[name]}
    assert len({copy[4] for copy in copies}) == 1  # one destination, reused
    assert all(r is results[0] for r in results)


def test_the_copy_benchmarks_of_each_kind_of_device():
    assert bench.copy_benchmarks("cpu") == ("copy",)
    assert set(bench.copy_benchmarks("cuda:0")) == {"copy", *TRANSFERS}
    # MPS has no pinned memory of CUDA's kind: the pageable rows only.
    assert set(bench.copy_benchmarks("mps")) == {"copy", "host-to-device pageable", "device-to-host pageable"}
    plan = bench.plan_for("cuda:0", quick=True)
    assert plan.steps("cuda:0") - plan.steps("cpu") == 4 * len(plan.copy_bytes)


def test_the_schema_knows_each_transfer_row():
    """The rows name their direction and kind of host memory (gpukit/measuring/benchmark_records.py's BENCHMARKS)."""
    missing = sorted(set(TRANSFERS) - set(BENCHMARKS))
    assert not missing, (f"gpukit.measuring.benchmark_records.BENCHMARKS lacks {missing}: the suite could not write "
                         "its file")
    # The unnamed rows of older files (a new host buffer per device-to-host copy) are still read, never written.
    assert {"host-to-device", "device-to-host"} <= set(BENCHMARKS)
    assert not {"host-to-device", "device-to-host"} & {*bench.copy_benchmarks("cuda:0"), *bench.copy_benchmarks("mps")}
    assert "a new pageable host buffer per copy" in BENCHMARKS["device-to-host"][1]


def test_a_quick_run_on_a_gpu_measures_both_directions_pageable_and_pinned(fake_cuda, monkeypatch):
    monkeypatch.setattr(machine, "_nvidia_smi", lambda arguments: None)  # whatever nvidia-smi this machine has
    record = bench.run_suite(["cuda:0"], quick=True, progress=False, machine="a stand-in H100")
    validate_record(record)
    rows = {r["benchmark"]: r for r in record["results"]}
    assert set(TRANSFERS) <= set(rows)
    assert all(rows[name]["rate_unit"] == "GB/s" and rows[name]["rate"] > 0 for name in TRANSFERS)
    assert record["devices"]["cuda:0"]["name"].startswith("cuda:0 (NVIDIA H100")
    text = bench.summary(record)
    for name in TRANSFERS:
        assert f"cuda:0  {name}" in text
    # The rows' pinned buffers were pinned, and every pinned copy was queued without blocking.
    pinned = [c for c in fake_cuda.copies() if "pinned" in c[1:3]]
    assert pinned and all(c[3] for c in pinned)


def test_the_summary_names_the_memory_of_each_transfer():
    record = {"machine": "m", "date": "2026-01-01", "mode": "quick", "notes": [], "results": [
        {"device": "cuda:0", "benchmark": name, "dtype": "uint8", "size": 2**16, "rate": 12.5, "rate_unit": "GB/s",
         "fraction_of_peak": None} for name in TRANSFERS]}
    lines = bench.summary(record).splitlines()[1:]
    assert [line.split()[1:3] for line in lines] == [name.split() for name in TRANSFERS]

