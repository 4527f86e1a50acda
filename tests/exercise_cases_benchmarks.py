"""The appendix on benchmarks across hardware: each exercise's solution, and wrong answers with a word the
check's message must contain."""

import numpy as np

from gpukit.benchmark_files import read_benchmark_folder, results_table


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
    "ex-bench-v100-fraction": lambda: ((2 * 10_000**3 / 0.144) / 15.7e12, {}),
    "ex-bench-best-cpu-rate": best_cpu_rate,
}

WRONG_ANSWERS = {
    "ex-bench-v100-fraction": lambda: [
        (10_000**3 / 0.144 / 15.7e12, "too small"),  # n^3, forgetting the factor of 2
        (np.float32(12.37 / 0.144), "too large"),  # the speed-up, not a fraction
        ("most of it", "expected a number"),
    ],
    "ex-bench-best-cpu-rate": _wrong_cpu_rates,
}
