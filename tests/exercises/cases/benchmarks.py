"""The appendix on benchmarks across hardware: each exercise's solution, and wrong answers with a word the
check's message must contain. The wrong matmul timings are the classic mistakes, as learners write them."""

import time

import numpy as np
import torch

from gpukit import benchmark
from gpukit.core.device import pick_device
from gpukit.core.peaks import device_peak
from gpukit.measuring.benchmark_records import read_benchmark_folder, results_table

device = pick_device()


def peak_flops():
    return device_peak(device, "float32", operation="matmul").flops_per_s


# ------------------------------------------------------------------------------- ex-bench-matmul-fraction
def matmul_fraction(n):
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    timing = benchmark(torch.matmul, a, b, device=device)
    return 2 * n**3 / timing.median / peak_flops()


def n_cubed(n):
    a = torch.randn(n, n, device=device)
    return n**3 / benchmark(torch.matmul, a, a, device=device).median / peak_flops()


def in_float64(n):
    a = torch.randn(n, n, device=device, dtype=torch.float64)
    return 2 * n**3 / benchmark(torch.matmul, a, a, device=device).median / peak_flops()


def first_call_only(n):
    a = torch.randn(n, n, device=device)
    start = time.perf_counter()
    a @ a
    return 2 * n**3 / (time.perf_counter() - start) / peak_flops()


def ten_products_as_one(n):
    """Times ten products but divides the work of one by their time."""
    a = torch.randn(n, n, device=device)
    return 2 * n**3 / benchmark(lambda: [a @ a for _ in range(10)], device=device).median / peak_flops()


def unsynchronised(n):
    a = torch.randn(n, n, device=device)
    timing = benchmark(torch.matmul, a, a, synchronize_device=False)
    return 2 * n**3 / timing.median / peak_flops()


def on_the_host(n):
    a = torch.randn(n, n)
    return 2 * n**3 / benchmark(torch.matmul, a, a).median / peak_flops()


def the_timing_not_the_fraction(n):
    a = torch.randn(n, n, device=device)
    return benchmark(torch.matmul, a, a, device=device)


def fixed_size(n):
    a = torch.randn(1000, 1000, device=device)
    return 2 * 1000**3 / benchmark(torch.matmul, a, a, device=device).median / peak_flops()


# ------------------------------------------------------------------------------- from the files
def results():
    return results_table(read_benchmark_folder())


def best_cpu_rate():
    table = results()
    chosen = table.query("kind == 'cpu' and benchmark == 'matmul' and dtype == 'float32'")
    return float(chosen["rate"].max()), {"results": table}


def _wrong_cpu_rates():
    table = results()
    float64 = table.query("kind == 'cpu' and benchmark == 'matmul' and dtype == 'float64'")
    return [(float(float64["rate"].max()) / 10, "too small"), (table["rate"].to_numpy(), "expected a number")]


SOLUTIONS = {
    "ex-bench-matmul-fraction": lambda: (matmul_fraction, {}),
    "ex-bench-v100-fraction": lambda: ((2 * 10_000**3 / 0.144) / 15.7e12, {}),
    "ex-bench-best-cpu-rate": best_cpu_rate,
}

WRONG_ANSWERS = {
    "ex-bench-matmul-fraction": lambda: [
        (n_cubed, "too small"),
        (ten_products_as_one, "too small"),
        (in_float64, "float64"),
        (first_call_only, "multiplied once"),
        (the_timing_not_the_fraction, "return the fraction, a number"),
        (fixed_size, "multiplied no two"),
        (matmul_fraction(64), "expected your function"),
        # Where the device queues work (a GPU), a clock that does not wait measures the launch; on the CPU it is no
        # mistake that changes anything.
        # On the CPU the check notes the matrices made without device=, so matrices left on the host show too.
        (on_the_host, "your matrices are on cpu" if device != "cpu" else "made without device="),
        *([(unsynchronised, "stopped before the device had finished")] if device != "cpu" else []),
    ],
    "ex-bench-v100-fraction": lambda: [
        (10_000**3 / 0.144 / 15.7e12, "too small"),  # n^3, forgetting the factor of 2
        (np.float32(12.37 / 0.144), "too large"),  # the speed-up, not a fraction
        ("most of it", "expected a number"),
    ],
    "ex-bench-best-cpu-rate": _wrong_cpu_rates,
}


# The planted device mistakes (tests/exercises/test_planted_device_mistakes.py).
DEVICE_MISTAKES = {
    "ex-bench-matmul-fraction": {
        "on_the_host": "made the matrices without device=, so on a GPU machine the product runs on the CPU and the "
                       "fraction is of the wrong device's peak",
    },
}
