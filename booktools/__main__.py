"""Command line, run from the book's top folder: ``python -m booktools bench`` runs the benchmark suite and writes
``data/benchmarks/<machine>-<date>.json`` (:mod:`booktools.bench`); ``python -m booktools gpu-check`` (``make
gpu-check``) runs the preflight, every lesson, the GPU tests and the bench on this node's GPU and writes a report
(:mod:`booktools.gpu_check`)."""

from __future__ import annotations

import argparse
import sys

from booktools.bench import add_bench_command, run_bench_command
from booktools.gpu_check import add_gpu_check_command, run_gpu_check_command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools", description="The GPU Python book's own tools.")
    commands = parser.add_subparsers(dest="command", required=True)
    add_bench_command(commands)
    add_gpu_check_command(commands)
    args = parser.parse_args(argv)
    if args.command == "bench":
        return run_bench_command(args, argv)
    return run_gpu_check_command(args)


if __name__ == "__main__":
    sys.exit(main())
