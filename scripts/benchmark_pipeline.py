"""Time the book's pipeline, phase by phase, so that the next regression is easy to place.

    python scripts/benchmark_pipeline.py                 # here: clean build, rebuilds, tests (`make bench`)
    python scripts/benchmark_pipeline.py --fresh-clone   # as a newcomer: clone HEAD, install, book, test

In place it deletes _build first, edits one notebook for a moment (restored afterwards, whatever happens), and
runs `make book` three times (clean, unchanged, after the edit), `make check` and `make test` once. With
--fresh-clone it clones the committed HEAD into a new folder whose path is deep and has spaces (as CI and
newcomers have), then runs `make setup` (the install), `make book` and `make test` there; the clone is deleted at
the end.

Each step prints its wall time and its core-seconds: the CPU time of the command and every process it waited for
(make, pytest's workers, the kernels, compilers; from getrusage), the measure of the test budget, which does not
change with the number of cores; and the whole machine's busy core-seconds over the step (from /proc/stat, which
counts whatever else ran, and the servers that outlive their test). `make book` steps print each notebook's
execution time (scripts/execute_notebooks.py reports them) and `make test` the time of each group of tests (from
pytest's JUnit report: each test's wall time; tests run on one worker per core, 2 to 4 (conftest.py), so the
groups add up to about that many times the wall time), then the core-seconds of each lesson's tests by kind
(nbval, thin kernel, exercises, its own tests) and of the rest (tests/support/lesson_costs.py). Everything is
written to _build/bench.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
# "  notebooks/01-cpu-vs-gpu.ipynb: 17.0 s", one line per notebook scripts/execute_notebooks.py ran.
NOTEBOOK_TIME = re.compile(r"^\s*(\S+\.ipynb): (\d+\.\d) s$", re.MULTILINE)
# Notebooks the Jupyter Book build had to execute itself (none, when the script above cached them all).
BUILD_EXECUTED = re.compile(r"(\S+\.ipynb): Executing notebook", re.MULTILINE)
# The groups a `make test` run is read in: a test file's name, or one of these for the notebooks' own runs.
GROUPS = {
    "notebooks": "the lessons under nbval",
    "tests/lessons/test_thin_kernel.py": "the lessons in a thin kernel",
    "tests/book/test_site.py": "the offline site build and the browser",
    "tests/book/test_jupyterhub.py": "the JupyterHub session",
    "tests/book/test_slurm_templates.py": "the job templates on the test Slurm",
}


def children_core_seconds() -> float:
    """CPU seconds (user and system) of every process this one has waited for, and of theirs that they waited for."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def machine_busy_seconds() -> float | None:
    """Core-seconds every CPU of the machine has been busy since boot (/proc/stat), or None where there is none."""
    try:
        fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait


def run(label: str, command: list[str], cwd: Path, env: dict | None = None) -> dict:
    print(f"-> {label}: {' '.join(command)}", flush=True)
    start, cores_from, busy_from = time.perf_counter(), children_core_seconds(), machine_busy_seconds()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    core_seconds = children_core_seconds() - cores_from
    busy_to = machine_busy_seconds()
    busy = None if busy_from is None or busy_to is None else round(busy_to - busy_from)
    if done.returncode != 0:
        sys.exit(f"{label} failed ({done.returncode}) after {seconds:.0f} s:\n{done.stdout[-4000:]}\n"
                 f"{done.stderr[-4000:]}")
    text = done.stdout + done.stderr
    notebooks = {Path(name).name: float(s) for name, s in NOTEBOOK_TIME.findall(text)}
    by_build = sorted({Path(name).name for name in BUILD_EXECUTED.findall(text)})
    print(f"   {seconds:.1f} s, {core_seconds:.0f} core-seconds (the machine: {busy} busy core-seconds)", flush=True)
    for name, s in sorted(notebooks.items()):
        print(f"     {name}: {s:.1f} s", flush=True)
    if by_build:
        print(f"     executed by the build itself: {', '.join(by_build)}", flush=True)
    return {"step": label, "seconds": round(seconds, 1), "core_seconds": round(core_seconds, 1),
            "machine_busy_seconds": busy, "notebooks": notebooks, "executed_by_build": by_build}


def busy_seconds_per_group(junit: Path) -> dict[str, float]:
    """Seconds spent in each group of tests: a test file, or all the notebooks' nbval runs together."""
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("classname", "")
        # pytest names a test's class after its file, "tests.book.test_site" (or "tests.book.test_site.TestClass");
        # nbval's "notebooks.<file>".
        parts = name.split(".")
        if parts[0] == "notebooks":
            group = "notebooks"
        else:
            file_end = next((i for i, part in enumerate(parts) if part.startswith("test_")), len(parts) - 1)
            group = "/".join(parts[: file_end + 1]) + ".py" if len(parts) > 1 else name
        seconds[group] += float(case.get("time", 0))
    return dict(sorted(seconds.items(), key=lambda item: -item[1]))


def run_tests(cwd: Path, make: str) -> dict:
    junit = Path(tempfile.mkdtemp(prefix="bench-")) / "junit.xml"
    env = {**os.environ, "PYTEST_ADDOPTS": f"{os.environ.get('PYTEST_ADDOPTS', '')} --junitxml={junit}".strip()}
    result = run("make test", [make, "test"], cwd, env)
    groups = busy_seconds_per_group(junit)
    print("   seconds per group of tests (each test's wall time, summed over the test workers):", flush=True)
    for group, seconds in list(groups.items())[:20]:
        print(f"     {group}: {seconds:.0f} s{'  (' + GROUPS[group] + ')' if group in GROUPS else ''}", flush=True)
    shutil.rmtree(junit.parent, ignore_errors=True)
    # Each lesson's tests by kind, in core-seconds: conftest.py writes the table at the end of a whole run.
    costs = cwd / "_build" / "test-costs.md"
    table = costs.read_text(encoding="utf-8") if costs.is_file() else ""
    print("   core-seconds of each lesson's tests (tests/support/lesson_costs.py):\n" + table, flush=True)
    return {**result, "test_groups": {group: round(s, 1) for group, s in groups.items()}, "lesson_costs": table}


def in_place(make: str) -> list[dict]:
    shutil.rmtree(BUILD, ignore_errors=True)
    results = [run("make book from a clean _build", [make, "book"], ROOT)]
    results.append(run("make book, nothing changed", [make, "book"], ROOT))
    notebook = sorted((ROOT / "notebooks").glob("*.ipynb"))[0]
    original = notebook.read_text(encoding="utf-8")
    try:
        nb = json.loads(original)
        last_code = [c for c in nb["cells"] if c["cell_type"] == "code"][-1]
        last_code["source"] = [*last_code["source"], "\n# edited by scripts/benchmark_pipeline.py"]
        notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        results.append(run(f"make book after editing {notebook.name}", [make, "book"], ROOT))
    finally:
        notebook.write_text(original, encoding="utf-8")
    results.append(run("make check", [make, "check"], ROOT))
    results.append(run_tests(ROOT, make))
    return results


def fresh_clone(make: str) -> list[dict]:
    top = Path(tempfile.mkdtemp(prefix="bench-clone-"))
    clone = top / "a deep path" / "with spaces in it" / "GPU Workshop" / "gpu python"
    clone.parent.mkdir(parents=True)
    try:
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        results = [run("install (make setup)", [make, "setup"], clone)]
        results.append(run("make book", [make, "book"], clone))
        results.append(run_tests(clone, make))
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fresh-clone", action="store_true", help="time install, book and test in a new clone")
    args = parser.parse_args(argv)
    make = shutil.which("make") or "make"
    results = fresh_clone(make) if args.fresh_clone else in_place(make)
    BUILD.mkdir(exist_ok=True)
    (BUILD / "bench.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print("\n| step | wall seconds | core-seconds | machine busy core-seconds | notebooks executed |")
    print("|---|---|---|---|---|")
    for r in results:
        print(f"| {r['step']} | {r['seconds']} | {r['core_seconds']} | {r['machine_busy_seconds']} | "
              f"{len(r['notebooks'])} |")


if __name__ == "__main__":
    main()
