"""The lessons' predictions: each speed claim a lesson's prose glues is set beside what the device's limits predict.

Each lesson's hidden prediction cells run here with made-up timings, as on an H100 (``fake_cuda``: the GPU
predicate is true and torch names the device "NVIDIA H100 80GB HBM3"; ``pcie5``: nvidia-smi answers PCIe 5.0 x16)
and as on a CPU-only machine (``made_up_cpu``: a 4-core AVX2 CPU at 2 GHz, 256 GFLOP/s in float32, 128 in float64,
and a copy of 20 GB/s), so that each predicted figure is a number worked out here by hand (the comments).

:data:`CLAIMS` is the table of what differs per lesson and machine: the fixtures, the lesson's names at the end of
its timings, the cells that glue the predictions (a dict between them is what the lesson computes in between) and
what each glued sentence must say. :data:`SOLUTIONS` runs each prediction exercise's solution as the lesson writes
it, where it must pass its check. What fits neither table is a test of its own, at the end, under its lesson.
"""

from __future__ import annotations

import ast
import math
import os
import re
import statistics
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

import gpukit
from gpukit import check, skip_unless
from gpukit.core import peaks, timing
from gpukit.core.timing import Timing
from gpukit.measuring import roofline
from tests.exercises.cases.autograd import LAYER
from tests.support.lesson_code import Glued, code_cell, gluing, lesson, run
from tests.support.made_up_machines import timed

RATIO = re.compile(r"measured [\d.,]+ (ms|µs|s)\b[^;]*?, ([\d.,]+) times that")


def solution_code(stem: str, label: str) -> str:
    """The code of exercise ``label``'s solution, as lesson ``stem`` writes it in its solution block."""
    cell = next(c for c in lesson(stem) if f"{{solution}} {label}" in "".join(c["source"]))
    return "".join(cell["source"]).split("```python\n", 1)[1].split("```", 1)[0]


def run_cells(stem: str, steps, ns: dict) -> Glued:
    """Run the cells of lesson ``stem`` that glue each name in ``steps`` (a dict there updates the namespace, as the
    lesson's cells between them would), in ``ns``; what they glued."""
    cells = lesson(stem)
    for step in steps:
        if isinstance(step, dict):
            ns.update(step)
        else:
            run(gluing(cells, step), ns)
    return ns["glue"]


def says(text: str, how: str, expected) -> bool:
    """Whether ``text`` says ``expected`` in the way ``how`` names."""
    if how == "==":
        return text == expected
    if how == "in":
        return expected in text
    if how == "not in":
        return expected not in text
    if how == "not in (any case)":
        return expected.lower() not in text.lower()
    if how == "startswith":
        return text.startswith(expected)
    if how == "endswith":
        return text.endswith(expected)
    if how == "count":  # (a piece of text, how many times)
        return text.count(expected[0]) == expected[1]
    if how == "ratios":  # how many "measured ..., N times that" (None: at least one)
        found = len(RATIO.findall(text))
        return found >= 1 if expected is None else found == expected
    if how == "non-empty":
        return bool(text)
    raise ValueError(f"no such check: {how}")


# --------------------------------------------------------------------------- each lesson's names after its timings
def ns_cpu_vs_gpu(device, n, with_jax=True):
    """Lesson 01's names at the end of its timings, with made-up times (s): a GPU at its H100 speeds, the CPU's."""
    m = 2**20
    on_gpu = device != "cpu"
    jax = SimpleNamespace(default_backend=lambda: "gpu" if on_gpu else "cpu") if with_jax else None
    return {
        "torch": torch, "device": device, "on_gpu": on_gpu, "n": n, "m": m, "glue": Glued(),
        "skip_unless": skip_unless, "check": check, "statistics": statistics,
        "matmul_flops": 2 * n**3, "a": torch.ones(2, 2), "copy_rate": 2.7e12 if on_gpu else 15e9,
        "jax": jax, "finished": 1.1e-3, "solve_ms": [200.0, 1.3, 1.4, 1.3, 1.3],
        "mm_cpu": timed(0.23), "mm_dev": timed(2.71e-3 if on_gpu else 0.23), "mm_one": timed(1.4),
        "mm_all": timed(0.18), "mm_cpu64": timed(0.22), "mm_dev64": timed(2.22e-3), "ew_cpu": timed(0.18),
        "ew_dev": timed(8.3e-4 if on_gpu else 0.18), "ew_bytes": 8 * m, "vector_bytes": 4 * m,
        "copies": {f"host -> {device}, pageable": (0.01, [0.6e-3] * 5),
                   f"{device} -> host, pageable": (0.01, [0.6e-3] * 5)},
        "round_trip": 1.2e-3,
    }


def ns_parallel_cpu(cores, ipp=True):
    return {"os": os, "np": np, "n": 1024, "cores": cores, "threadpoolctl": True, "ipp": ipp, "dask_ready": True,
            "numpy_times": {1: timed(0.1), 2: timed(0.05)}, "torch_times": {1: timed(0.2), 2: timed(0.15)},
            "n_workers": 2, "n_folds": 8, "ALPHAS": [1.0, 10.0, 100.0, 1000.0, 10000.0],
            "X": np.zeros((6_000, 120)), "serial_time": timed(0.3), "ipp_start_s": 4.0, "ipp_time": timed(0.6),
            "dask_start_s": 3.0, "dask_time": timed(0.8), "glue": Glued()}


def ns_cupy(gpu_ready):
    n = 4096
    matrix = np.zeros((n, n), dtype=np.float32)
    return {"gpu_ready": gpu_ready, "n": n, "a": matrix, "a_gpu": matrix, "product_gpu": matrix, "glue": Glued(),
            "matmul_flops": 2 * n**3, "numpy_mm": Timing("numpy", (0.16,) * 3),
            "cupy_mm": Timing("cupy", (2.75e-3,) * 3),
            "copies_back": {"a new array": Timing("new", (0.24,) * 3),
                            "a pageable buffer": Timing("pageable", (0.03,) * 3),
                            "a pinned buffer": Timing("pinned", (1.2e-3,) * 3)}}


def ns_pytorch(device):
    on_gpu = device != "cpu"
    n_samples, n_features = (2**17, 512) if on_gpu else (8192, 128)
    m = 2**26 if on_gpu else 2**22
    return {"device": device, "on_gpu": on_gpu, "glue": Glued(), "steps": 100, "n_samples": n_samples,
            "n_features": n_features, "m": m, "ew_bytes": 8 * m, "batch": 10_000 if on_gpu else 2_000, "k": 8,
            "fit_cpu": timed(0.08), "fit_dev": timed(0.05), "eager": timed(8.3e-4), "compiled": timed(2.1e-4),
            "loop_mm": timed(0.12), "batched_mm": timed(3e-5), "loop_solve": timed(0.9),
            "batched_solve": timed(4e-4)}


def ns_autograd(device, cpp=True):
    on_gpu = device != "cpu"
    n_batch, n_in, n_out = (8192, 1024, 1024) if on_gpu else (512, 256, 256)
    versions = dict.fromkeys(("built-in ops", "Python Function", "C++ Function")[:3 if cpp else 2])
    where = {"cpu": versions}
    timings = {(name, "cpu"): timed(0.004 + 0.001 * i) for i, name in enumerate(versions)}
    if on_gpu:
        where[device] = {**versions, "CUDA Function": None}
        timings.update({(name, device): timed(0.001 + 1e-4 * i) for i, name in enumerate(where[device])})
    return {"device": device, "glue": Glued(), "n_batch": n_batch, "n_in": n_in, "n_out": n_out,
            "flops": 6 * n_batch * n_in * n_out, "where": where, "timings": timings}


def ns_mps(device, batch):
    return {"glue": Glued(), "batch": batch, "k": 6, "real_dev": torch.device(device),
            "eager_t": Timing("t", (2e-3,) * 5), "fast_t": Timing("t", (1e-3,) * 5)}


def ns_jax(on_gpu):
    kind = "NVIDIA H100 80GB HBM3" if on_gpu else "cpu"
    jax = SimpleNamespace(default_backend=lambda: "gpu" if on_gpu else "cpu",
                          devices=lambda: [SimpleNamespace(device_kind=kind)])
    m = 2**26 if on_gpu else 2**22
    return {"glue": Glued(), "jax": jax, "jax_gpu": on_gpu, "can_x64": True, "n": 8192 if on_gpu else 1500,
            "finished": 3e-3 if on_gpu else 0.03, "m": m, "ew_bytes": 2 * 4 * m, "jitted": timed(2e-4),
            "eager": timed(1e-3), "by_numpy": timed(0.1)}


def jax_linalg_after(on_gpu):
    """What lesson 08 has timed by its linear algebra's predictions: a smaller n, the products and factorisations."""
    return dict(n=7000 if on_gpu else 800, default32=timed(2e-3 if on_gpu else 5e-3),
                linalg={("float32", "matmul"): timed(0.012), ("float64", "matmul"): timed(0.02),
                        ("float32", "cholesky"): timed(0.003), ("float64", "cholesky"): timed(0.005)})


def ns_kernels(gpu):
    k, rows, cols = 2**26, 16384, 4000
    return {"glue": Glued(), "triton": True, "gpu": gpu, "kernel_device": "cuda" if gpu else "cpu", "k": k,
            "ew_bytes": 3 * 4 * k, "add_times": {"Triton add": 300e-6, "torch.add": 250e-6}, "rows": rows,
            "cols": cols, "softmax_bytes": 2 * 4 * rows * cols, "softmax_times": {"Triton": 400e-6, "torch": 200e-6}}


def ns_multi_gpu(ring_device, slowest_seconds):
    ns = {"glue": Glued(), "ring": SimpleNamespace(world_size=4), "ring_device": ring_device, "n_values": 10_000,
          "ring_table": pd.DataFrame({"ring seconds": [slowest_seconds / 2, slowest_seconds, 1e-6, 2e-6]})}
    cell = next("".join(c["source"]) for c in lesson("10-multi-gpu")
                if "def ring_bytes_per_rank" in "".join(c["source"]))
    run(ast.get_source_segment(cell, ast.parse(cell).body[0]), ns)  # the lesson's own function
    return ns


def ns_case_study(device, with_jax=True):
    on_gpu = device != "cpu"
    count = 16384 if on_gpu else 2048
    jax = SimpleNamespace(default_backend=lambda: "gpu" if on_gpu else "cpu",
                          devices=lambda: [SimpleNamespace(device_kind="NVIDIA H100 80GB HBM3" if on_gpu else "cpu")])
    overlap = SimpleNamespace(together=timed(0.02))
    return {"math": math, "statistics": statistics, "glue": Glued(), "n": 32, "count": count, "work_device": device,
            "loop": timed(0.9), "timings": {"Python loop": timed(0.9), "vectorised CPU": timed(0.03),
                                            "batched": timed(1.2e-3 if on_gpu else 0.025)},
            "torch_pair": ([0.002] * 7, [0.0015] * 7) if on_gpu else None, "device_s": 8e-4,
            "jax": jax, "jax_pair": ([0.05] * 7, [0.04] * 7) if with_jax else None, "jax_s": 0.004,
            "streams": {"copy alone": [6e-4] * 7, "FFTs alone": [8e-4] * 7} if on_gpu else None,
            "copy_part": 4096, "half": np.empty((count // 2, 1, 1)), "small": np.empty((count // 8, 1, 1)),
            "in_threads": overlap, "two_loops": overlap}


def ns_profiling(device, n, features, hidden, step_us):
    return {"glue": Glued(), "device": device, "n": n, "features": features, "hidden": hidden,
            "step_row": SimpleNamespace(cpu_time_total=3 * step_us, count=3)}


def ns_precision(device):
    on_gpu = device != "cpu"
    speed = {"float32": timed(0.02 if on_gpu else 2e-3), "bfloat16": timed(2e-3), "float16": timed(2e-3)}
    if on_gpu:
        speed["TF32"] = timed(4e-3)
    return {"glue": Glued(), "device": device, "size": 8192 if on_gpu else 256, "speed": speed,
            "many": timed(0.02), "two": timed(2e-5)}


class Pausing(list):
    """A stand-in for lesson 15's SlowDataset: its length and its pause per sample."""

    seconds = 0.0005


def ns_data_pipeline(device, workers):
    return {"glue": Glued(), "device": device, "predict": roofline.predict, "device_limits": roofline.device_limits,
            "dataset": Pausing(range(192)), "in_the_loop": range(6), "batch": 32, "workers": workers,
            "epochs": {0: timed(0.12), workers: timed(0.06)} if workers else {0: timed(0.12)},
            "split": {0: {"data": 100.0, "step": 5.0}}}


# ------------------------------------------------------------------------ machines the tables' fixtures make up
@pytest.fixture
def v100(monkeypatch):
    """A V100 has no TF32 tensor cores, so gpukit's table has no TF32 figure for it."""
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100-SXM2-16GB")


@pytest.fixture
def no_known_peak(monkeypatch):
    monkeypatch.setattr(peaks, "gpu_peak", lambda *args, **kwargs: None)


@pytest.fixture
def cupy_h100(monkeypatch, made_up_cpu, pcie5):
    """The made-up CPU beside an H100 that CuPy names, on a PCIe 5.0 x16 link."""
    monkeypatch.setattr(timing, "gpu_name_of", lambda array=None, device=None: "NVIDIA H100 80GB HBM3")


@pytest.fixture
def apple_copy(made_up_cpu, monkeypatch):
    """The made-up CPU, and a copy of 100 GB/s on an Apple GPU, which has no datasheet figure in gpukit's table."""
    monkeypatch.setattr(roofline, "_measured_copy_bandwidth", lambda device: 20e9 if device == "cpu" else 100e9)


H100 = ("fake_cuda", "made_up_cpu")
CPU = ("made_up_cpu",)
L01 = ("naive_predicted", "jax_predicted", "solve_predicted", "predict_story", "mm_predicted", "ew_predicted",
       "threads_predicted", "f64_predicted", "copy_predicted", "trip_predicted")
L02 = ("numpy_predicted", "torch_predicted", "cv_predicted", "dask_predicted")
L04 = ("fit_predicted", "fused_predicted", "batch_predicted")
L08 = ("dispatch_predicted", "jit_predicted", "linalg_predicted", "tf32_predicted")
L12 = ("batch_predicted", "overlap_predicted", "stream_predicted", "threads_predicted")


def claim(stem, machine, fixtures, namespace, steps, *expected):
    """One row of :data:`CLAIMS`: lesson ``stem``'s cells gluing ``steps`` run on ``machine`` (the fixtures making it
    up) in ``namespace()``, and each (glued name, how, text) of ``expected`` holds."""
    return pytest.param(stem, fixtures, namespace, steps, expected, id=f"{stem}/{machine}")


CLAIMS = [
    # ---- 01: the products, the element-wise work, the copies, JAX's product and the solves
    claim("01-cpu-vs-gpu", "h100", (*H100, "pcie5"), lambda: ns_cpu_vs_gpu("cuda:0", 4096), L01,
          # The product against the H100's 67 TFLOP/s: 2.05 ms predicted, 2.71 ms measured.
          ("mm_predicted", "in", "on the cuda:0, the datasheet predicts 2.05 ms (intensity 683 FLOP/B, so "
                                 "compute-bound); measured 2.71 ms, 1.32 times that"),
          ("mm_predicted", "startswith", "On the CPU, the CPU's estimated peak and measured bandwidth predict"),
          ("ew_predicted", "in", "so memory-bound"), ("ew_predicted", "in", "on the cuda:0, the datasheet predicts"),
          # float64 products run on the H100's FP64 tensor cores at the float32 rate: the same prediction.
          ("f64_predicted", "in", "on the cuda:0, the datasheet predicts 2.05 ms"),
          ("copy_predicted", "in", "the PCIe 5.0 x16 link predicts"),
          ("copy_predicted", "in", "for host -> cuda:0, pageable"),
          ("trip_predicted", "in", "for the round trip"),
          # JAX's product runs in TF32: against the H100's dense TF32 peak, 494.5 TFLOP/s, 278 µs.
          ("jax_predicted", "in", "the datasheet predicts 278 µs (intensity 683 FLOP/B, so compute-bound); measured "
                                  "1.1 ms"),
          ("naive_predicted", "in", "no less than 2.051 ms"),
          ("solve_predicted", "in", "for the first"), ("solve_predicted", "in", "the datasheet predicts"),
          *((name, "ratios", None) for name in ("mm_predicted", "ew_predicted", "threads_predicted", "f64_predicted",
                                                "copy_predicted", "solve_predicted"))),
    claim("01-cpu-vs-gpu", "v100", (*H100, "pcie5", "v100"), lambda: ns_cpu_vs_gpu("cuda:0", 4096), L01,
          # Without a TF32 figure, JAX's product is bound by the bandwidth.
          ("jax_predicted", "in", "predicts at least"), ("jax_predicted", "in", "no tf32 figure")),
    claim("01-cpu-vs-gpu", "cpu", CPU, lambda: ns_cpu_vs_gpu("cpu", 1024), L01,
          ("mm_predicted", "not in", "on the"),  # one device, one sentence
          # The made-up CPU: 4 cores x 2 GHz x 32 FLOPs per cycle = 256 GFLOP/s; one core a quarter of it.
          ("mm_predicted", "in", "predict 8.39 ms"), ("threads_predicted", "in", "predict 33.6 ms"),
          ("f64_predicted", "in", "predict 16.8 ms"),  # float64: half the lanes
          ("copy_predicted", "in", "a copy within memory"),  # 4 MiB read and written at the lesson's 15 GB/s
          ("copy_predicted", "in", "predicts 559 µs"),
          ("jax_predicted", "startswith", "For the product on JAX's cpu backend, the CPU's estimated peak"),
          *((name, "non-empty", None) for name in L01)),
    claim("01-cpu-vs-gpu", "no jax, no known peak", (*H100, "pcie5", "no_known_peak"),
          lambda: ns_cpu_vs_gpu("cuda:0", 4096, with_jax=False), ("jax_predicted", "naive_predicted", "predict_story"),
          ("jax_predicted", "==", ""), ("naive_predicted", "==", ""),
          ("predict_story", "in", "knows no FLOP/s peak")),
    # ---- 02: the float64 product with 1 and 2 threads, and the cross-validation's folds serial, on engines, workers
    claim("02-parallel-cpu", "4 cores", CPU, lambda: ns_parallel_cpu(cores=4), L02,
          # AVX2 with FMA: 4 float64 lanes x 2 units x 2 FLOPs = 16 FLOP per cycle, 32 GFLOP/s a core at 2 GHz. A 1024
          # x 1024 product does 2 x 1024**3 = 2.147 GFLOP: 67.1 ms on one core, 33.6 ms on two; it moves 3 x 8 x
          # 1024**2 bytes, intensity 1024 / 12 = 85.3 FLOP/B.
          ("numpy_predicted", "==",
           "For the product with 1 thread, the CPU's estimated peak and measured bandwidth predict 67.1 ms (intensity "
           "85.3 FLOP/B, so compute-bound); measured 100 ms, 1.49 times that; with 2 threads, the CPU's estimated "
           "peak and measured bandwidth predict 33.6 ms (intensity 85.3 FLOP/B, so compute-bound); measured 50 ms, "
           "1.49 times that."),
          ("torch_predicted", "in", "measured 200 ms, 2.98 times that; with 2 threads"),
          # 8 folds of 5,250 training rows x 120: 6 m k**2 + 20 k**3 = 488.16 MFLOP per SVD, 2.30 MFLOP besides:
          # 3.92 GFLOP in all, 123 ms on one core and 61.3 ms on two.
          ("cv_predicted", "startswith", "Counted as a thin SVD per fold, the folds do 3.92 GFLOP. For the serial "
                                         "loop, with 1 core's peak, the CPU's estimated peak and measured bandwidth "
                                         "predict 123 ms (intensity"),
          ("cv_predicted", "in", "measured 300 ms, 2.45 times that; on 2 engines, with 2 cores' peak"),
          ("cv_predicted", "in", "predict 61.3 ms"), ("cv_predicted", "in", "measured 600 ms, 9.79 times that."),
          ("dask_predicted", "startswith", "On 2 workers, with 2 cores' peak, the CPU's estimated peak and measured "
                                           "bandwidth predict 61.3 ms"),
          ("dask_predicted", "endswith", "measured 800 ms, 13 times that.")),
    claim("02-parallel-cpu", "1 core", CPU, lambda: ns_parallel_cpu(cores=1), L02,
          # With one usable core, two threads or two workers still have one core's peak.
          ("numpy_predicted", "count", ("predict 67.1 ms", 2)),
          ("cv_predicted", "in", "on 2 engines, with 1 core's peak")),
    claim("02-parallel-cpu", "no ipyparallel", CPU, lambda: ns_parallel_cpu(cores=4, ipp=None), L02,
          ("cv_predicted", "in", "For the serial loop, with 1 core's peak"), ("cv_predicted", "not in", "engines")),
    # ---- 03: NumPy's and CuPy's products and CuPy's copies back (the CuPy stand-in: test_gpu_branches.py)
    claim("03-cupy", "h100", ("cupy_h100",), lambda: ns_cupy(True), ("cupy_predicted", "copy_back_predicted"),
          ("numpy_predicted", "startswith", "For NumPy on the CPU, the CPU's estimated peak and measured bandwidth "
                                            "predict 537 ms"),  # 4 cores x 2 GHz x 32 FLOPs per cycle
          ("cupy_predicted", "==", "For CuPy on the GPU, the datasheet predicts 2.05 ms (intensity 683 FLOP/B, so "
                                   "compute-bound); measured 2.75 ms, 1.34 times that."),
          # 64 MiB over PCIe 5.0 x16 (63 GB/s each way): 1.06 ms; the three copies back, as many times that.
          ("copy_back_predicted", "startswith", "For each copy of 64 MiB back, the PCIe 5.0 x16 link predicts 1.06 ms"),
          ("copy_back_predicted", "in", "into a new array, 225 times that"),
          ("copy_back_predicted", "in", "into a pinned buffer, 1.13 times that")),
    claim("03-cupy", "no gpu", ("cupy_h100",), lambda: ns_cupy(False), ("cupy_predicted", "copy_back_predicted"),
          ("cupy_predicted", "==", ""), ("copy_back_predicted", "==", ""),
          ("numpy_predicted", "in", "measured 160 ms")),
    # ---- 04: the training step, eager against compiled, the batched products and solves
    claim("04-pytorch-gpu", "h100", H100, lambda: ns_pytorch("cuda"), L04,
          # A step reads 2**17 x 512 float32 inputs twice: 537 MB at 3.35 TB/s, 160 µs.
          ("fit_predicted", "in", "; on cuda, the datasheet predicts 160 µs (intensity 0.5 FLOP/B, so memory-bound); "
                                  "measured 500 µs, 3.12 times that."),
          ("fit_predicted", "startswith", "Per step, on the CPU, the CPU's estimated peak and measured bandwidth"),
          ("fused_predicted", "==", "For the expression, the datasheet predicts 160 µs (intensity 0.5 FLOP/B, so "
                                    "memory-bound); measured 830 µs eagerly, 5.18 times that, and 210 µs compiled, "
                                    "1.31 times that."),
          ("batch_predicted", "startswith", "For the products, the datasheet predicts 2.29 µs (intensity 1.33 FLOP/B, "
                                            "so memory-bound); measured 120 ms in the loop, 52,344 times that, and 30 "
                                            "µs batched"),
          ("batch_predicted", "in", "; for the solves, the datasheet predicts")),
    claim("04-pytorch-gpu", "cpu", CPU, lambda: ns_pytorch("cpu"), L04,
          ("fit_predicted", "not in", "; on "),  # one line per claim
          # 8192 x 128 float32 read twice, 8.39 MB at 20 GB/s.
          ("fit_predicted", "in", "predict 419 µs (intensity 0.5 FLOP/B, so memory-bound); measured 800 µs"),
          *((name, "in", "times that") for name in L04)),
    # ---- 05: each version of the dense layer on each device (the H100's sentence: a test of its own, below)
    claim("05-autograd-custom-ops", "cpu", CPU, lambda: ns_autograd("cpu", cpp=False), ("layer_predicted",),
          # 512 x 256 x 256, three products: 201 MFLOP at 4 cores x 2 GHz x 32 FLOP/cycle (AVX2 FMA, float32), 786
          # µs; it moves 12 x (512 x 256 + 256 x 256 + 512 x 256) bytes, 3.93 MB: 51.2 FLOP/B.
          ("layer_predicted", "startswith", "On the CPU, the CPU's estimated peak and measured bandwidth predict 786 "
                                            "µs (intensity 51.2 FLOP/B, so compute-bound); measured 4 ms for the "
                                            "built-in ops, 5.09 times that, and 5 ms for the Python Function"),
          ("layer_predicted", "not in", "C++"), ("layer_predicted", "not in (any case)", "cuda")),
    # ---- 07: the batched LU determinants, eager and compiled
    claim("07-apple-mps", "h100", ("fake_cuda", "apple_copy"), lambda: ns_mps("cuda", 8192),
          ("compiled_predicted",),
          # 8,192 matrices of 6 x 6, each read and its factors written: 2.36 MB at 3.35 TB/s, 704 ns.
          ("compiled_predicted", "==", "On cuda, for the batch, the datasheet predicts 704 ns (intensity 0.5 FLOP/B, "
                                       "so memory-bound); measured 2 ms eagerly, 2,840 times that, and 1 ms "
                                       "compiled, 1,420 times that.")),
    claim("07-apple-mps", "mac", ("apple_copy",), lambda: ns_mps("mps", 8192), ("compiled_predicted",),
          # 2.36 MB at the made-up 100 GB/s measured on the device: 23.6 µs, a bound from the bandwidth only.
          ("compiled_predicted", "startswith", "On mps, for the batch, a measured copy on the device predicts at "
                                               "least 23.6 µs from the bandwidth alone (intensity 0.5 FLOP/B; Apple "
                                               "publishes no FLOP/s figure"),
          ("compiled_predicted", "in", "measured 2 ms eagerly, 84.8 times that")),
    claim("07-apple-mps", "cpu", ("apple_copy",), lambda: ns_mps("cpu", 512), ("compiled_predicted",),
          # 512 matrices: 147 kB at 20 GB/s, 7.37 µs.
          ("compiled_predicted", "startswith", "On cpu, for the batch, the CPU's estimated peak and measured "
                                               "bandwidth predict 7.37 µs (intensity 0.5 FLOP/B, so memory-bound); "
                                               "measured 2 ms eagerly, 271 times that")),
    # ---- 08: JAX's product, the expression jitted, op by op and in NumPy, float32 and float64, the default precision
    claim("08-jax", "h100", CPU, lambda: ns_jax(on_gpu=True),
          (*L08[:2], jax_linalg_after(on_gpu=True), *L08[2:]),
          # 2 x 8192³ FLOPs at the H100's dense TF32 peak, 494.5 TFLOP/s: 2.22 ms.
          ("dispatch_predicted", "==", "For the product, the datasheet predicts 2.22 ms (intensity 1,365 FLOP/B, so "
                                       "compute-bound); measured 3 ms, 1.35 times that."),
          # 2**26 float32 values read and written, 537 MB at 3.35 TB/s: 160 µs; NumPy's on the made-up CPU, 26.8 ms.
          ("jit_predicted", "==",
           "For the expression on JAX's gpu backend, the datasheet predicts 160 µs (intensity 0.5 FLOP/B, so "
           "memory-bound); measured 200 µs jitted, 1.25 times that, and 1 ms op by op, 6.24 times that; for NumPy on "
           "the CPU, the CPU's estimated peak and measured bandwidth predict 26.8 ms (intensity 0.5 FLOP/B, so "
           "memory-bound); measured 100 ms, 3.73 times that."),
          # 2 x 7000³ FLOPs at 67 TFLOP/s, float32 on the vector units and float64 on the FP64 tensor cores: 10.2 ms.
          ("linalg_predicted", "in", "For the product in `float32`, the datasheet predicts 10.2 ms"),
          ("linalg_predicted", "in", "For the product in `float64`, the datasheet predicts 10.2 ms"),
          ("linalg_predicted", "in", "For the Cholesky factorisation in `float32`, the datasheet predicts 1.71 ms"),
          ("linalg_predicted", "ratios", 4),
          # The default precision's product on the TF32 tensor cores: 1.39 ms.
          ("tf32_predicted", "==", "At the default precision, the datasheet predicts 1.39 ms (intensity 1,167 "
                                   "FLOP/B, so compute-bound); measured 2 ms, 1.44 times that.")),
    claim("08-jax", "cpu", CPU, lambda: ns_jax(on_gpu=False), (*L08[:2], jax_linalg_after(on_gpu=False), *L08[2:]),
          # 2 x 1500³ FLOPs at 4 cores x 2 GHz x 32 FLOP/cycle: 26.4 ms.
          ("dispatch_predicted", "startswith", "For the product, the CPU's estimated peak and measured bandwidth "
                                               "predict 26.4 ms (intensity 250 FLOP/B, so compute-bound)"),
          ("jit_predicted", "startswith", "For the expression on the CPU, the CPU's estimated peak and measured "
                                          "bandwidth predict 1.68 ms (intensity 0.5 FLOP/B, so memory-bound); "
                                          "measured 200 µs jitted, 0.119 times that"),
          ("jit_predicted", "in", "and 100 ms with NumPy, 59.6 times that"),
          # float64 at half the float32 rate: 4 ms and 8 ms for 2 x 800³ FLOPs.
          ("linalg_predicted", "in", "in `float32`, the CPU's estimated peak and measured bandwidth predict 4 ms"),
          ("linalg_predicted", "in", "in `float64`, the CPU's estimated peak and measured bandwidth predict 8 ms"),
          ("tf32_predicted", "startswith", "At the default precision, the CPU's estimated peak and measured "
                                           "bandwidth predict 4 ms"),
          *((name, "ratios", None) for name in L08)),
    claim("08-jax", "no jax", (), lambda: {"glue": Glued(), "jax": None, "can_x64": False}, L08,
          *((name, "==", "") for name in L08)),
    # ---- 09: the Triton and PyTorch vector adds and softmaxes, timed on a GPU only
    claim("09-writing-kernels", "h100", ("fake_cuda",), lambda: ns_kernels(gpu=True),
          ("add_predicted", "softmax_predicted"),
          # 2**26 float32 additions, 12 bytes each: 805 MB at 3.35 TB/s, 240 µs.
          ("add_predicted", "==", "For the add, the datasheet predicts 240 µs (intensity 0.0833 FLOP/B, so "
                                  "memory-bound); measured 300 µs for Triton, 1.25 times that, and 250 µs for "
                                  "torch.add, 1.04 times that."),
          # 16,384 x 4,000 values read and written, 524 MB at 3.35 TB/s: 157 µs.
          ("softmax_predicted", "==", "For the softmax, the datasheet predicts 157 µs (intensity 0.625 FLOP/B, so "
                                      "memory-bound); measured 400 µs for Triton, 2.56 times that, and 200 µs for "
                                      "torch.softmax, 1.28 times that.")),
    claim("09-writing-kernels", "no gpu", (), lambda: ns_kernels(gpu=False), ("add_predicted", "softmax_predicted"),
          ("add_predicted", "==", ""), ("softmax_predicted", "==", "")),
    # ---- 10: the ring all-reduce, against one rank's bytes and additions
    claim("10-multi-gpu", "h100", H100, lambda: ns_multi_gpu("cuda:0", 40e-6), ("ring_predicted",),
          # One rank of 4 sends 2 x 3/4 x 40,000 bytes and receives as much: 120,000 bytes, at 3.35 TB/s 35.8 ns; it
          # adds 7,500 values, intensity 0.0625 FLOP/B.
          ("ring_predicted", "==", "For the ring alone, with the datasheet's memory bandwidth as the link, the "
                                   "datasheet predicts 35.8 ns (intensity 0.0625 FLOP/B, so memory-bound); measured "
                                   "40 µs on the slowest rank, 1,117 times that")),
    claim("10-multi-gpu", "cpu", CPU, lambda: ns_multi_gpu("cpu", 3e-3), ("ring_predicted",),
          # 120,000 bytes at 20 GB/s: 6 µs.
          ("ring_predicted", "==", "For the ring alone, with a copy measured in memory as the link, the CPU's "
                                   "estimated peak and measured bandwidth predict 6 µs (intensity 0.0625 FLOP/B, so "
                                   "memory-bound); measured 3 ms on the slowest rank, 500 times that")),
    # ---- 12: the loop, vectorised and batched determinants and FFTs, the overlaps' pieces, the threads' work
    claim("12-case-study", "h100", (*H100, "pcie5"), lambda: ns_case_study("cuda"), L12,
          # 16,384 matrices of 32 x 32: 2.27 GFLOP and 24 n² = 24,576 bytes each, 403 MB at 3.35 TB/s: 120 µs.
          ("batch_predicted", "endswith", " On cuda, the datasheet predicts 120 µs (intensity 5.64 FLOP/B, so "
                                          "memory-bound); measured 1.2 ms batched, 9.98 times that."),
          ("batch_predicted", "startswith", "On the CPU, the CPU's estimated peak and measured bandwidth predict"),
          ("batch_predicted", "in", "for the Python loop"), ("batch_predicted", "in", "vectorised"),
          # The FFTs alone: 16 n² bytes a matrix, 268 MB at 3.35 TB/s: 80.1 µs.
          ("overlap_predicted", "startswith", "For the FFTs alone on cuda, the datasheet predicts 80.1 µs (intensity "
                                              "3.12 FLOP/B, so memory-bound); measured 800 µs, 9.98 times that."),
          ("overlap_predicted", "in", "For JAX's batched work on gpu, the datasheet predicts 120 µs"),
          # 4,096 matrices of 8 KiB over PCIe 5.0 x16 (63.0 GB/s): 532 µs.
          ("stream_predicted", "startswith", "For the copy alone, the PCIe 5.0 x16 link predicts 532 µs (no "
                                             "arithmetic, so bound by the link); measured 600 µs, 1.13 times that"),
          ("stream_predicted", "in", "for the FFTs alone, the datasheet predicts 80.1 µs"),
          *((name, "ratios", None) for name in L12)),
    claim("12-case-study", "cpu", CPU, lambda: ns_case_study("cpu"), L12,
          # 2,048 matrices: 50.3 MB at 20 GB/s, 2.52 ms (their 284 MFLOP at 256 GFLOP/s take 1.11 ms).
          ("batch_predicted", "==",
           "On the CPU, the CPU's estimated peak and measured bandwidth predict 2.52 ms (intensity 5.64 FLOP/B, so "
           "memory-bound); measured 900 ms for the Python loop, 358 times that, 30 ms vectorised, 11.9 times that, "
           "and 25 ms batched with PyTorch, 9.93 times that."),
          ("stream_predicted", "==", ""),  # no CUDA, no streams timed, and the prose says so already
          ("overlap_predicted", "startswith", "For JAX's batched work on cpu, the CPU's estimated peak and measured "
                                              "bandwidth predict 2.52 ms"),
          # The two halves are the whole batch; the two loops 2 x 256 matrices, 629 µs.
          ("threads_predicted", "startswith", "Together, the two halves did the whole batch's work, for which the "
                                              "CPU's estimated peak and measured bandwidth predict 2.52 ms"),
          ("threads_predicted", "in", "for the two loops' work, the CPU's estimated peak and measured bandwidth "
                                      "predict 629 µs")),
    claim("12-case-study", "no jax, no gpu", CPU, lambda: ns_case_study("cpu", with_jax=False), L12,
          ("overlap_predicted", "==", "")),  # nothing to predict for the overlaps
    # ---- 14: the host's time of a profiled training step against its two large products
    claim("14-profiling", "h100", H100, lambda: ns_profiling("cuda", 65_536, 256, 1024, step_us=2500),
          ("step_predicted",),
          # 2 x 2 x 65,536 x 256 x 1,024 FLOPs at 67 TFLOP/s: 1.03 ms (their 673 MB at 3.35 TB/s: 201 µs).
          ("step_predicted", "==", "For its two large products, the datasheet predicts 1.03 ms (intensity 102 "
                                   "FLOP/B, so compute-bound); measured 2.5 ms, 2.44 times that.")),
    claim("14-profiling", "cpu", CPU, lambda: ns_profiling("cpu", 1024, 32, 128, step_us=400), ("step_predicted",),
          # 1.34 MB at 20 GB/s: 67.2 µs, just above the 65.5 µs of 16.8 MFLOP at 256 GFLOP/s.
          ("step_predicted", "==", "For its two large products, the CPU's estimated peak and measured bandwidth "
                                   "predict 67.2 µs (intensity 12.5 FLOP/B, so memory-bound); measured 400 µs, 5.95 "
                                   "times that.")),
    # ---- 15: the products in each format, the launch-bound small operations, the data pipeline
    claim("15-precision-and-data", "h100", H100, lambda: ns_precision("cuda"),
          ("precision_predicted", "many_predicted"),
          # 2 x 8192³ FLOPs: 16.4 ms at 67 TFLOP/s (float32), 1.11 ms at 989.5 (bfloat16, float16), 2.22 ms at 494.5.
          ("precision_predicted", "startswith",
           "For float32, the datasheet predicts 16.4 ms (intensity 1,365 FLOP/B, so compute-bound); measured 20 ms, "
           "1.22 times that. For bfloat16, the datasheet predicts 1.11 ms (intensity 2,731 FLOP/B, so "
           "compute-bound); measured 2 ms, 1.8 times that."),
          ("precision_predicted", "in", "For TF32, the datasheet predicts 2.22 ms (intensity 1,365 FLOP/B, so "
                                        "compute-bound); measured 4 ms"),
          # 64,000 FLOPs and 512 kB of either's arithmetic: 153 ns at 3.35 TB/s.
          ("many_predicted", "==", "For their arithmetic alone, the datasheet predicts 153 ns (intensity 0.125 "
                                   "FLOP/B, so memory-bound); measured 20 ms for the 2,000 small operations, 130,859 "
                                   "times that, and 20 µs for the two large ones, 131 times that.")),
    claim("15-precision-and-data", "cpu", CPU, lambda: ns_precision("cpu"), ("precision_predicted", "many_predicted"),
          # gpukit estimates no bfloat16 or float16 peak for a CPU, so the bandwidth bounds those alone.
          # 2 x 256³ FLOPs at 256 GFLOP/s: 131 µs; the 16-bit products' 393 kB at 20 GB/s: at least 19.7 µs.
          ("precision_predicted", "startswith", "For float32, the CPU's estimated peak and measured bandwidth "
                                                "predict 131 µs"),
          ("precision_predicted", "in", "For bfloat16, the CPU's measured bandwidth predicts at least 19.7 µs from "
                                        "the bandwidth alone"),
          ("precision_predicted", "not in", "TF32"),
          ("many_predicted", "startswith", "For their arithmetic alone, the CPU's estimated peak and measured "
                                           "bandwidth predict 25.6 µs (intensity 0.125 FLOP/B, so memory-bound)")),
    claim("15-precision-and-data", "pipeline, 2 workers", CPU, lambda: ns_data_pipeline("cpu", workers=2),
          ("epoch_predicted", "ranges_predicted"),
          # 192 pauses of 0.5 ms: 96 ms. The first layer's products, 201 MFLOP at 256 GFLOP/s: 786 µs.
          ("epoch_predicted", "==",
           "The pauses alone take 96 ms an epoch and, for the products, the CPU's estimated peak and measured "
           "bandwidth predict 786 µs (intensity 14.2 FLOP/B, so compute-bound); so an epoch without workers takes at "
           "least 96.8 ms: measured 120 ms, 1.24 times that. With 2 workers loading at once, at best 48 ms: measured "
           "60 ms, 1.25 times that."),
          ("ranges_predicted", "==",
           "The pauses predict at least 96 ms in `data`, measured 100 ms, 1.04 times that; the CPU's estimated peak "
           "and measured bandwidth predict 786 µs (intensity 14.2 FLOP/B, so compute-bound); measured 5 ms in "
           "`step`, 6.36 times that.")),
]


@pytest.mark.parametrize("stem, fixtures, namespace, steps, expected", CLAIMS)
def test_each_claim_has_its_prediction(stem, fixtures, namespace, steps, expected, request, monkeypatch):
    assert expected, "a row of CLAIMS that expects nothing tests nothing"
    for fixture in fixtures:
        request.getfixturevalue(fixture)
    ns = namespace()
    monkeypatch.setattr(gpukit, "glue", ns["glue"])  # the hidden cells that import glue from gpukit
    glued = run_cells(stem, steps, ns)
    wrong = [f"{name} ({how} {text!r}): {glued.get(name)!r}" for name, how, text in expected
             if not says(glued[name], how, text)]
    assert not wrong, "\n".join(wrong)


def solution(stem, label, namespace, **inputs):
    """One row of :data:`SOLUTIONS`: exercise ``label``'s solution runs in ``namespace`` and passes its check with
    ``inputs`` (on the CPU)."""
    return pytest.param(stem, label, namespace, inputs, id=stem)


SOLUTIONS = [
    solution("02-parallel-cpu", "ex-par-predict-matmul", lambda: {"n": 1024}, n=1024),
    solution("04-pytorch-gpu", "ex-torch-predict-bmm", lambda: {"device": "cpu", "batch": 2_000, "k": 8},
             batch=2_000, k=8),
    solution("05-autograd-custom-ops", "ex-autograd-predict-layer", lambda: {"device": "cpu", **LAYER}, **LAYER),
    solution("07-apple-mps", "ex-mps-predict-lu", lambda: {"real_dev": torch.device("cpu"), "batch": 512, "k": 6},
             batch=512, k=6),
    solution("08-jax", "ex-jax-predict-fused", lambda: {"skip_unless": lambda *args: True, "jax": True,
                                                        "jax_gpu": False, "device": "cpu", "m": 2**22}, m=2**22),
    solution("09-writing-kernels", "ex-kernels-predict-add", lambda: {"device": "cpu", "add_size": 2**26}, k=2**26),
    solution("10-multi-gpu", "ex-dist-predict-ring", lambda: ns_multi_gpu("cpu", 1e-3), n_values=10_000,
             world_size=4),
    solution("12-case-study", "ex-case-predict-batch", lambda: {"math": math, "work_device": "cpu", "count": 2048,
                                                                "n": 32}, count=2048, n=32),
    solution("14-profiling", "ex-prof-predict-step", lambda: {"device": "cpu", "n": 1024, "features": 32,
                                                              "hidden": 128}, n=1024, features=32, hidden=128),
    solution("15-precision-and-data", "ex-prec-predict-bf16", lambda: {"device": "cpu", "size": 256}, size=256),
]


@pytest.mark.parametrize("stem, label, namespace, inputs", SOLUTIONS)
def test_the_exercises_solution_passes(stem, label, namespace, inputs):
    ns = run(solution_code(stem, label), {"check": check, **namespace()})
    assert check(label, ns["predicted_ms"], device="cpu", **inputs)


# ------------------------------------------------------------------------------ 01-cpu-vs-gpu: the visible cell
@pytest.mark.parametrize("device", ["cpu", "cuda:0"])
def test_cpu_vs_gpu_the_visible_prediction_and_the_exercises_solution_run_on_both(device, request, made_up_cpu,
                                                                                  capsys):
    if device != "cpu":
        request.getfixturevalue("fake_cuda")
    ns = ns_cpu_vs_gpu(device, 256)
    ns["peak"] = peaks.device_peak(device, "float32", operation="matmul")
    ns["a"] = torch.ones(2, 2, device=device)
    run(code_cell("01-cpu-vs-gpu", "mm_bytes = 3 * a.element_size() * n * n"), ns)
    assert "predicted on" in capsys.readouterr().out
    ns["device_peak"] = peaks.device_peak
    run(solution_code("01-cpu-vs-gpu", "ex-cpu-gpu-predict-float64"), ns)
    assert check("ex-cpu-gpu-predict-float64", ns["predicted_ms"], device=device, n=256, bandwidth=ns[
        "byte_ceiling"])


def test_cpu_vs_gpu_the_check_names_the_float32_peak_only_where_it_differs(fake_cuda, made_up_cpu):
    n, bandwidth = 4096, 3350e9
    right = 1e3 * 2 * n**3 / 67e12
    on_gpu = check("ex-cpu-gpu-predict-float64", right, device="cuda", n=n, bandwidth=bandwidth)
    assert on_gpu, on_gpu.message
    assert "multiply-add" in check("ex-cpu-gpu-predict-float64", right / 2, device="cuda", n=n,
                                   bandwidth=bandwidth).message
    cpu_right = 1e3 * 2 * 1024**3 / 128e9  # float64 on the made-up CPU: 128 GFLOP/s
    assert check("ex-cpu-gpu-predict-float64", cpu_right, device="cpu", n=1024, bandwidth=20e9)
    half = check("ex-cpu-gpu-predict-float64", cpu_right / 2, device="cpu", n=1024, bandwidth=20e9).message
    assert "float32 peak" in half and "multiply-add" in half


# ------------------------------------------------------------------------------------ 03-cupy: CuPy's GPU names
@pytest.mark.parametrize("name, said", [("CuPy stand-in on NumPy (no GPU)", "does not know the CuPy stand-in"),
                                         (None, "reported no name")])
def test_cupy_a_gpu_the_table_does_not_know_is_said_so(cupy_h100, monkeypatch, name, said):
    # The CuPy stand-in of tests/lessons/test_gpu_branches.py reports a name of its own, or, to gpukit, none at all.
    monkeypatch.setattr(timing, "gpu_name_of", lambda array=None, device=None: name)
    text = run_cells("03-cupy", ("cupy_predicted",), ns_cupy(True))["cupy_predicted"]
    assert "nothing predicts its time here" in text and said in text


def test_cupy_the_exercises_solution_passes_and_uses_the_lessons_n():
    ns = run(solution_code("03-cupy", "ex-cupy-predict-matmul"), {"check": check, "device": "cpu", "n": 256})
    assert ns["predicted_ms"](1e12, 1e18) == pytest.approx(1e3 * 2 * 256**3 / 1e12)
    assert "def predicted_ms(peak_flops, bandwidth):\n    return None" in code_cell("03-cupy", "return None  # replace")


# --------------------------------------------------------------------- 05-autograd-custom-ops: the H100's sentence
def test_autograd_custom_ops_on_an_h100_each_version_has_its_devices_prediction(fake_cuda, made_up_cpu):
    text = run_cells("05-autograd-custom-ops", ("layer_predicted",), ns_autograd("cuda"))["layer_predicted"]
    cpu, gpu = text.split(" On cuda, ")
    # 8192 x 1024 x 1024, three products: 51.5 GFLOP at the H100's 67 TFLOP/s float32 (no tensor cores), 769 µs;
    # it moves 12 x (8192 x 1024 + 1024 x 1024 + 8192 x 1024) bytes, 214 MB: 241 FLOP/B.
    assert gpu.startswith("the datasheet predicts 769 µs (intensity 241 FLOP/B, so compute-bound); measured 1 ms "
                          "for the built-in ops, 1.3 times that")
    assert gpu.count("times that") == 4 and "for the CUDA Function" in gpu
    assert cpu.startswith("On the CPU, the CPU's estimated peak and measured bandwidth predict")
    assert cpu.count("times that") == 3


# ---------------------------------------------------------------------------- 10-multi-gpu: what the ring times
def test_multi_gpu_the_timing_is_the_rings_alone_and_the_table_keeps_its_columns():
    cells = lesson("10-multi-gpu")
    script = next("".join(c["source"]) for c in cells if "ring_allreduce.py" in "".join(c["source"])
                  and "%%writefile" in "".join(c["source"]))
    # timed after a first call and a barrier, and on a GPU after the device has finished (NCCL's wait() does not
    # wait for the GPU)
    first, timed_call = script.index("ring_all_reduce(mine.clone())"), script.index("sent = ring_all_reduce(mine)")
    assert first < script.index("dist.barrier()") < script.index("started = time.perf_counter()") < timed_call
    assert script.index("torch.cuda.synchronize(on)", timed_call) < script.index("seconds = time.perf_counter()")
    table_cell = next("".join(c["source"]) for c in cells if "ring_table = ring.table()" in "".join(c["source"]))
    assert 'drop(columns="ring seconds")' in table_cell  # the kept output has no time in it


# ------------------------------------------------------------------- 12-case-study: the reference curves' sentence
@pytest.mark.parametrize("gpu_curves, sentence", [
    (0, "No GPU's file has been added to data/benchmarks/ yet"),
    (1, "1 of the reference curves was measured on a GPU."),
    (2, "2 of the reference curves were measured on a GPU."),
])
def test_case_study_the_reference_curves_sentence_counts_the_gpu_curves(monkeypatch, gpu_curves, sentence):
    from gpukit.measuring import benchmark_records

    rows = [{"file": "cpu.json", "kind": "cpu", "curve": "a CPU"}] + [
        {"file": f"gpu{i}.json", "kind": "cuda", "curve": f"GPU {i}"} for i in range(gpu_curves)]
    monkeypatch.setattr(benchmark_records, "reference_curves", lambda *args, **kwargs: pd.DataFrame(rows))
    glued = run_cells("12-case-study", ("gpu_reference_story",), {"glue": Glued(), "batch": 64})
    assert glued["gpu_reference_story"].startswith(sentence)


# ------------------------------------------------- 15-precision-and-data: no second loader where there are no workers
def test_precision_and_data_without_workers_there_is_no_second_loader_to_predict(fake_cuda, made_up_cpu):
    text = run_cells("15-precision-and-data", ("epoch_predicted", "ranges_predicted"),
                     ns_data_pipeline("cuda", workers=0))["epoch_predicted"]
    # On an H100 the products are memory-bound: 14.2 MB at 3.35 TB/s, 4.23 µs.
    assert "for the products, the datasheet predicts 4.23 µs (intensity 14.2 FLOP/B, so memory-bound)" in text
    assert "workers" not in text.split("without workers")[1]
