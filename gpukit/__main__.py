"""Command line: ``python -m gpukit doctor`` prints the environment report for workshop attendees;
``python -m gpukit doctor --gpu`` runs the GPU preflight, every library exercised on this node's GPU
(:mod:`gpukit.commands.preflight`);
``python -m gpukit probe`` runs the backend-support probe (:mod:`gpukit.topics.backend_support`). The book's own
commands (the benchmark suite, ``make gpu-check``) are ``python -m booktools``'s, beside gpukit."""

from __future__ import annotations

import argparse
import sys

from gpukit.commands.doctor import environment_report
from gpukit.commands.preflight import main as preflight
from gpukit.topics.backend_support import add_probe_command, run_probe_command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpukit", description="Helpers for the GPU Python book.")
    commands = parser.add_subparsers(dest="command", required=True)
    doctor = commands.add_parser("doctor", help="check this machine for the lessons and say how to fix problems")
    output = doctor.add_mutually_exclusive_group()
    output.add_argument("--markdown", action="store_true", help="print a Markdown table instead of text")
    output.add_argument("--gpu", action="store_true",
                        help="the GPU preflight: run every library the book uses on this node's GPU, one line per "
                             "check with the fix for each failure; exits non-zero on any failure or without a GPU")
    add_probe_command(commands)
    args = parser.parse_args(argv)
    if args.command == "probe":
        return run_probe_command(args)

    if args.gpu:
        return preflight()
    report = environment_report()
    print(report.to_markdown() if args.markdown else report.to_text())
    return 0 if report.ready else 1


if __name__ == "__main__":
    sys.exit(main())
