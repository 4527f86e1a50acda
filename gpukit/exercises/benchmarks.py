"""The appendix "Benchmarks across hardware": what its exercises expect, and how a wrong answer is told apart."""

from __future__ import annotations

from .checking import Exercise, register


def _best_cpu_matmul_rate(results):
    """The highest float32 matmul rate (GFLOP/s) of any CPU in the benchmark files' results table."""
    chosen = results[(results["kind"] == "cpu") & (results["benchmark"] == "matmul")
                     & (results["dtype"] == "float32")]
    return float(chosen["rate"].max())


register(
    # The Clemson V100 figure (10000 x 10000 float32 product in 0.144 s) against the V100's
    # published FP32 peak of 15.7 TFLOP/s; and the best CPU rate in the files.
    Exercise("ex-bench-v100-fraction", lambda: 2 * 10_000**3 / 0.144 / 15.7e12, rtol=1e-3, writes="a number"),
    Exercise("ex-bench-best-cpu-rate", _best_cpu_matmul_rate, needs=("results",), rtol=1e-9, writes="CPU code"),
)
