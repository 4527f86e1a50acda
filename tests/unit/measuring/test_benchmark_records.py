"""The benchmark files: the suite writes a valid record, bad or partial files are named with their field,
the folder fails loudly, and the tables and overlays handle any number of files, GPU files included."""

import copy
import json

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from booktools import bench  # noqa: E402 - its file writer
from gpukit.measuring.benchmark_records import (  # noqa: E402
    SCHEMA,
    BenchmarkFileError,
    read_benchmark_file,
    read_benchmark_folder,
    reference_curves,
    results_table,
    validate_record,
)
from gpukit.measuring.plots import overlay_reference_curves, plot_sweep  # noqa: E402
from tests.support.booktoc import ROOT


def result(benchmark, device, size, median, *, dtype="float32", batch=None, rate_unit=None, fraction=None):
    unit = rate_unit or {"matmul": "GFLOP/s", "det+fft": "matrices/s"}.get(benchmark, "GB/s")
    return {"benchmark": benchmark, "device": device, "dtype": dtype, "size": size, "batch": batch,
            "median": median, "best": median * 0.9, "time_unit": "s", "repeats": 5, "rate": 2 * size**3 / median / 1e9,
            "rate_unit": unit, "fraction_of_peak": fraction}


def record(gpu=False):
    """A synthetic record: a CPU, and with ``gpu`` an invented CUDA GPU (test data, never committed)."""
    devices = {"cpu": {"name": "cpu (Test CPU, 8 logical cores)", "kind": "cpu", "clocks": None,
                       "peaks": {"float32_flop_s": 1e12, "float64_flop_s": 5e11, "memory_bytes_per_s": 5e10,
                                 "source": "test"}}}
    results = [result("matmul", "cpu", n, 1e-9 * n**3, fraction=0.5) for n in (128, 256, 512)]
    results.append(result("det+fft", "cpu", 16, 0.01, dtype="complex64", batch=2048))
    if gpu:
        devices["cuda:0"] = {"name": "cuda:0 (Test GPU 80GB, 80.0 GiB)", "kind": "cuda",
                             "clocks": {"sm_max_mhz": 1980.0, "memory_max_mhz": 2619.0},
                             "peaks": {"float32_flop_s": 6.7e13, "float64_flop_s": 3.4e13,
                                       "memory_bytes_per_s": 3.35e12, "source": "test"}}
        results += [result("matmul", "cuda:0", n, 1e-11 * n**3 + 1e-5, fraction=0.3) for n in (128, 256, 512, 1024)]
        results.append(result("det+fft", "cuda:0", 16, 0.001, dtype="complex64", batch=2048))
    return {"schema": SCHEMA, "machine": "test machine", "date": "2026-01-02", "command": "python -m booktools bench",
            "mode": "full",
            "host": {"cpu_model": "Test CPU", "physical_cores": 4, "logical_cores": 8, "max_clock_mhz": None,
                     "clock_source": "not reported", "platform": "Linux", "python": "3.11.7"},
            "software": {"torch": "2.13.0", "numpy": "2.4.6", "cuda": "12.8" if gpu else None,
                         "driver": "570.86" if gpu else None},
            "devices": devices, "results": results, "notes": []}


@pytest.fixture
def folder(tmp_path):
    bench.write_benchmark_file(record(), tmp_path, name="cpu-box")
    bench.write_benchmark_file(record(gpu=True), tmp_path, name="gpu-box")
    return tmp_path


@pytest.fixture(scope="module")
def quick_run():
    """A quick run of the suite on this CPU (a few seconds); tests copy it before changing it."""
    return bench.run_suite(["cpu"], quick=True, progress=False, machine="test run")


def test_a_quick_run_writes_a_valid_file(tmp_path, quick_run):
    made = copy.deepcopy(quick_run)
    assert made["mode"] == "quick" and made["machine"] == "test run"
    benchmarks = {r["benchmark"] for r in made["results"]}
    assert benchmarks == {"matmul", "elementwise", "copy", "det+fft", "matmul-shapes"}
    assert all(r["rate"] > 0 and r["time_unit"] == "s" for r in made["results"])
    assert made["software"]["torch"] and made["host"]["logical_cores"] >= 1
    path = bench.write_benchmark_file(made, tmp_path)
    assert path.name.endswith(f"{made['date']}.json") and "cpu" in path.name
    assert read_benchmark_file(path) == made


def test_the_command_line_writes_into_the_given_folder(tmp_path, capsys):
    from booktools.__main__ import main

    # --devices cpu: what is written is the test, not which devices this machine has (on a GPU node the default
    # measures its GPU too, which a node whose GPU torch cannot use would fail on).
    assert main(["bench", "--quick", "--devices", "cpu", "--no-progress", "--folder", str(tmp_path),
                 "--name", "here"]) == 0
    written = read_benchmark_file(tmp_path / "here.json")
    expected = f"python -m booktools bench --quick --devices cpu --no-progress --folder {tmp_path} --name here"
    assert written["command"] == expected
    assert "wrote" in capsys.readouterr().out


def test_a_quick_run_from_the_command_line_stays_out_of_the_books_data(tmp_path, monkeypatch):
    from booktools.__main__ import main
    from gpukit.base import paths

    monkeypatch.setattr(paths, "project_root", lambda: tmp_path)
    assert main(["bench", "--quick", "--devices", "cpu", "--no-progress"]) == 0
    assert not (tmp_path / "data").exists()
    assert len(list((tmp_path / "_build" / "cache" / "benchmarks-quick").glob("*.json"))) == 1


def test_the_achievable_rate_is_never_below_a_matmul_shapes_row(quick_run):
    """A matmul-shapes row is a matrix product in its dtype: the achievable rate of that precision, the best the
    device did, cannot be below it (a file that says so is wrong: the validator names the row)."""
    made = copy.deepcopy(quick_run)
    achieved = made["devices"]["cpu"]["achievable"]["matmul"]["float32"]["flop_s"]
    shapes = [r for r in made["results"] if r["benchmark"] == "matmul-shapes"]
    assert shapes and all(r["rate"] * 1e9 <= achieved * (1 + 1e-9) for r in shapes)
    shapes[0]["rate"] = 2 * achieved / 1e9
    with pytest.raises(BenchmarkFileError, match=r"'devices.cpu.achievable.matmul.float32.flop_s' is below the row "
                                                 rf"of size {shapes[0]['size']} \(matmul-shapes, "):
        validate_record(made, "shapes.json")


def test_matmul_shapes_rows_are_read_as_matrix_products(quick_run):
    table = results_table({"quick.json": quick_run})
    shapes = table[table["benchmark"] == "matmul-shapes"]
    best = quick_run["devices"]["cpu"]["achievable"]["matmul"]["float32"]["flop_s"] / 1e9
    assert len(shapes) == 2 and shapes["rate_unit"].eq("GFLOP/s").all()
    assert shapes["achievable_rate"].eq(best).all()
    assert shapes["fraction_of_achievable"].tolist() == pytest.approx((shapes["rate"] / best).tolist())
    assert shapes["fraction_of_peak"].notna().all()
    curves = reference_curves("matmul-shapes", "float32", records={"quick.json": quick_run})
    assert curves["size"].tolist() == sorted(bench.plan_for("cpu", quick=True).shape_sizes)


def test_the_committed_files_are_valid():
    records = read_benchmark_folder()
    assert records and all(r["mode"] == "full" for r in records.values())


def _broken(change):
    bad = copy.deepcopy(record(gpu=True))
    change(bad)
    return bad


@pytest.mark.parametrize("change, field", [
    (lambda r: r.pop("results"), "'results' is missing"),
    (lambda r: r.pop("host"), "'host' is missing"),
    (lambda r: r["host"].pop("cpu_model"), "'host.cpu_model' is missing"),
    (lambda r: r.update(schema="gpukit.benchmarks/0"), "'schema'"),
    (lambda r: r.update(date="yesterday"), "'date'"),
    (lambda r: r.update(mode="slow"), "'mode'"),
    (lambda r: r["results"][2].update(median=-1.0), "'results[2].median'"),
    (lambda r: r["results"][0].pop("rate_unit"), "'results[0].rate_unit' is missing"),
    (lambda r: r["results"][0].update(rate_unit="TFLOP/s"), "'results[0].rate_unit'"),
    (lambda r: r["results"][1].update(device="cuda:7"), "'results[1].device'"),
    (lambda r: r["results"][1].update(benchmark="sort"), "'results[1].benchmark'"),
    (lambda r: r["results"][0].update(best=1.0), "'results[0].best'"),
    (lambda r: r["results"][0].update(batch=4), "'results[0].batch'"),
    (lambda r: r["results"].append(copy.deepcopy(r["results"][0])), "repeats the measurement"),
    (lambda r: r["devices"]["cuda:0"].update(kind="mps"), "'devices.cuda:0.kind'"),
    (lambda r: r["devices"]["cuda:0"]["peaks"].pop("source"), "'devices.cuda:0.peaks.source' is missing"),
    (lambda r: r["devices"]["cpu"].pop("clocks"), "'devices.cpu.clocks' is missing"),
    (lambda r: r["software"].update(torch=""), "'software.torch'"),
    (lambda r: r.update(extra=1), "'extra' is not part of the schema"),
    (lambda r: r.update(results=[]), "'results'"),
])
def test_a_bad_or_partial_file_names_the_file_and_the_field(tmp_path, change, field):
    path = tmp_path / "bad-box.json"
    path.write_text(json.dumps(_broken(change)))
    with pytest.raises(BenchmarkFileError, match="bad-box.json") as raised:
        read_benchmark_file(path)
    assert field in str(raised.value)


def test_the_folder_fails_loudly_on_any_bad_file(folder):
    (folder / "zz-truncated.json").write_text(json.dumps(record())[:200])
    with pytest.raises(BenchmarkFileError, match="zz-truncated.json: not valid JSON"):
        read_benchmark_folder(folder)


def test_an_empty_or_missing_folder_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m booktools bench"):
        read_benchmark_folder(tmp_path)
    with pytest.raises(FileNotFoundError, match="no folder"):
        read_benchmark_folder(tmp_path / "absent")


def test_writing_refuses_an_invalid_record(tmp_path):
    with pytest.raises(BenchmarkFileError, match="the new record"):
        bench.write_benchmark_file(_broken(lambda r: r.pop("machine")), tmp_path)
    assert not list(tmp_path.iterdir())


def test_the_table_reads_every_file(folder):
    table = results_table(read_benchmark_folder(folder))
    assert set(table["file"]) == {"cpu-box.json", "gpu-box.json"}
    assert set(table[table["file"] == "gpu-box.json"]["device"]) == {"cpu", "cuda:0"}


def test_reference_curves_and_the_overlay_label_every_file(folder):
    curves = reference_curves("matmul", "float32", folder=folder)
    assert curves["curve"].nunique() == 3  # two CPUs and a GPU
    assert any("Test GPU" in c and "gpu-box.json" in c for c in curves["curve"])
    mine = pd.DataFrame({"case": ["cpu here", "cpu here"], "n": [128, 256], "median_s": [1e-3, 8e-3],
                         "speedup": [1.0, 1.0]})
    fig = plot_sweep(mine, baseline="cpu here")
    drawn = overlay_reference_curves(fig, curves)
    assert len(drawn) == 3
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert labels[0] == "this build: cpu here"
    assert sum(label.startswith("measured elsewhere") for label in labels) == 3
    speed_labels = [line.get_label() for line in fig.axes[1].get_lines() if not line.get_label().startswith("_")]
    assert len([s for s in speed_labels if "Test GPU" in s]) == 1  # only the GPU, over its own CPU
    assert any("measured in this build" in t.get_text() for t in fig.texts)
    plt.close(fig)


def test_the_overlay_says_when_there_is_nothing_to_show():
    mine = pd.DataFrame({"case": ["a"], "n": [1], "median_s": [1.0]})
    fig = plot_sweep(mine)
    none = reference_curves("matmul", "float32", records={"x.json": record()}).iloc[0:0]
    assert overlay_reference_curves(fig, none) == []
    assert any("No reference files" in t.get_text() for t in fig.texts)
    plt.close(fig)
    with pytest.raises(ValueError, match="unknown benchmark"):
        reference_curves("sort", "float32", records={"x.json": record()})


def test_det_fft_curves_are_chosen_by_batch(folder):
    assert len(reference_curves("det+fft", "complex64", batch=2048, folder=folder)) == 3
    assert reference_curves("det+fft", "complex64", batch=64, folder=folder).empty


def test_lu_determinant_matches_det():
    import torch

    a = torch.randn(6, 5, 5, dtype=torch.complex128)
    assert torch.allclose(bench.lu_determinant(a), torch.linalg.det(a))


def test_gpu_peaks_with_a_fake_cuda_device(monkeypatch):
    """The CUDA branch of the peaks: a published row matched by name gives fractions of peak."""
    import torch

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100-SXM4-40GB")
    results = [result("matmul", "cuda:0", 1024, 1e-4), result("elementwise", "cuda:0", 2**20, 1e-5),
               result("host-to-device pinned", "cuda:0", 2**20, 1e-4)]
    results[1]["rate"] = 800.0
    peaks = bench._peaks("cuda:0", results)
    assert peaks["float32_flop_s"] > 1e13 and peaks["source"].startswith("published")
    assert results[0]["fraction_of_peak"] == pytest.approx(results[0]["rate"] * 1e9 / peaks["float32_flop_s"])
    assert results[1]["fraction_of_peak"] == pytest.approx(800e9 / peaks["memory_bytes_per_s"])
    assert results[2]["fraction_of_peak"] is None
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Mystery GPU")
    assert bench._peaks("cuda:0", [])["source"].startswith("unknown")


def test_float64_matmul_fraction_on_a_fake_h100_uses_the_tensor_core_peak(monkeypatch):
    """An H100 runs float64 products on FP64 tensor cores (67 TFLOP/s), above its vector FP64 figure (34):
    a plausible 55 TFLOP/s must come out below 1, and elementwise work still uses the bandwidth."""
    import torch

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    n = 8192
    float64 = result("matmul", "cuda:0", n, 2 * n**3 / 55e12, dtype="float64")
    float32 = result("matmul", "cuda:0", n, 2 * n**3 / 50e12)
    elementwise = result("elementwise", "cuda:0", 2**26, 1e-3)
    elementwise["rate"] = 3000.0
    peaks = bench._peaks("cuda:0", [float64, float32, elementwise])
    assert peaks["float64_flop_s"] == pytest.approx(67e12) and peaks["float32_flop_s"] == pytest.approx(67e12)
    assert float64["fraction_of_peak"] == pytest.approx(55 / 67) and float64["fraction_of_peak"] < 1
    assert float32["fraction_of_peak"] == pytest.approx(50 / 67)
    assert elementwise["fraction_of_peak"] == pytest.approx(3000 / 3350)
    assert "float64 matmul on FP64 tensor cores" in peaks["source"]
    assert "float32 matmul on FP32 vector units" in peaks["source"]
    # A V100 has no FP64 tensor cores: its float64 products are held to the vector figure.
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100-SXM2-16GB")
    assert bench._peaks("cuda:0", [])["float64_flop_s"] == pytest.approx(7.8e12)


def test_plans_grow_on_a_gpu_and_drop_float64_on_mps():
    assert max(bench.plan_for("cuda:0").matmul_sizes) > max(bench.plan_for("cpu").matmul_sizes)
    assert set(bench.plan_for("cpu").matmul_sizes) <= set(bench.plan_for("cuda:0").matmul_sizes)
    assert bench.plan_for("mps").matmul_dtypes == ("float32",)
    assert max(bench.plan_for("cpu", quick=True).matmul_sizes) <= 64


def test_validate_record_accepts_the_synthetic_records():
    assert validate_record(record(gpu=True))["machine"] == "test machine"


def test_chapter_12_sweeps_at_the_batch_the_files_record():
    """Chapter 12 draws the files' det+fft curves beside a sweep of its own: both must be of DET_BATCH matrices,
    since the curves are read by benchmark and dtype, not by batch."""
    import re

    notebook = ROOT / "notebooks" / "12-case-study.ipynb"
    code = "\n".join("".join(c["source"]) for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]
                     if c["cell_type"] == "code")
    assert 'reference=("det+fft", "complex64")' in code
    assert [int(b) for b in re.findall(r"^batch = (\d+)", code, re.M)] == [bench.DET_BATCH]


def test_reference_curves_are_labelled_by_device_and_date_and_the_note_names_the_files(folder):
    """Lessons 1 and 12 draw every file's curves: each label names the device and the date (a file name in each
    label made the legend cover the curves), the note under the figure names the files, and a GPU's speed-up over
    its own machine's CPU has a legend entry on the speed-up panel."""
    references = reference_curves("matmul", "float32", folder=folder)
    mine = pd.DataFrame({"case": ["cpu here", "cpu here"], "n": [128, 256], "median_s": [1e-3, 8e-3],
                         "speedup": [1.0, 1.0]})
    fig = plot_sweep(mine, baseline="cpu here")
    overlay_reference_curves(fig, references)
    time_labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert time_labels.count("measured elsewhere: cpu (Test CPU), 2026-01-02") == 2  # one per file
    assert "measured elsewhere: cuda:0 (Test GPU 80GB),\n  2026-01-02" in time_labels
    assert not any(".json" in label for label in time_labels)
    speed_labels = [t.get_text().replace("\n  ", " ") for t in fig.axes[1].get_legend().get_texts()]
    assert "measured elsewhere: cuda:0 (Test GPU 80GB), 2026-01-02, over its own machine's CPU" in speed_labels
    note = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    assert "(cpu-box.json, gpu-box.json)" in note
    plt.close(fig)
