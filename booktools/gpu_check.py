"""``make gpu-check`` (``python -m booktools gpu-check``): the book's whole GPU run again, in one command, on the node
it runs on. What an instructor runs on each kind of node the day before a workshop, what ``gpu.yml`` runs on the
GPU runner, and what turns a GPU node held for a few minutes into lesson pages the book can publish.

It runs in the Python that runs it (the book's ``.venv``, or a cluster's own environment, e.g. a module's torch)
and reaches no network. Where that Python lacks the book's tools, ``--wheelhouse DIR`` (a folder ``make wheelhouse``
filled where there is network) installs what it lacks into a private folder of the run
(:mod:`booktools.node_packages`). In order:

1. the environment, in a child Python: versions, driver, CUDA, the device, the commit, and how the versions differ
   from the book's lock (:func:`gpukit.commands.doctor.version_drift`). Where the lessons would find no usable GPU, the
   preflight runs (its lines say why) and the command stops there: the first line of the report gives the reason;
2. the steps, in the order the time budget goes to them (:func:`make_plan`): the GPU preflight (``python -m gpukit
   doctor --gpu``) and the lessons with no kept GPU run of their current code, then the GPU-relevant tests
   (:data:`GPU_TESTS`) under pytest, then the benchmark (``python -m booktools bench``), then the lessons already kept.
   Each lesson runs top to bottom with ``GPUKIT_REQUIRE_GPU=1`` and ``XLA_PYTHON_CLIENT_PREALLOCATE=false``; the
   lessons that publish speed measurements (notebook metadata ``"gpukit": {"run_alone": true}``) one at a time, the
   others several at once where the GPU's memory and the cores allow (:func:`lane_count`).

Every step has a time limit and the whole run a budget (:data:`BUDGET_S`, 9 minutes by default): a step that hangs
is stopped at its limit, and a step whose estimate (:data:`ESTIMATES_S`) does not fit what is left of the budget is
not started and is reported as left for the next run, which starts where this one stopped.

It writes one folder, ``_build/gpu-check/<date>-<device>/`` (``GPUKIT_GPU_CHECK_DIR`` or ``--out`` choose
another): ``report.md`` (first line: the verdict and its reason; then what was kept, what failed, what is left),
``environment.json``, ``gpu-check.json`` (every result), the executed notebooks, the benchmark's file, and each
step's output in ``logs/``. It exits 1 on any failure. A lesson runs as the book's tests run it (:func:`as_tested`):
each exercise's solution right after it, where it must pass its check on this device, so that this one run proves
the solutions on a GPU; ``runs/`` keeps that run and ``notebooks/`` the lesson itself with its outputs. A lesson
fails on an error in any cell (a solution's included), on a cell whose checked output (tag ``nbval-check-output``)
differs from the stored one as nbval would compare them, and at its time limit; every line it wrote to stderr is
listed, failure or not.

With ``--save-run`` it also keeps each lesson as soon as it passes as a GPU run (:class:`Keeper`): a new folder under
``data/gpu-runs/`` with the lessons' notebooks and their outputs, and a manifest of the device, driver, CUDA and its
stack, versions, date, commit and each lesson's code hash (:func:`lesson_code_hash`). Committed, it is what `make
book` builds a lesson's page from while the lesson's code is unchanged (scripts/execute_notebooks.py,
_ext/gpu_runs.py; data/gpu-runs/README.md says the rest).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from booktools import node_packages
from booktools.gpu_runs import (
    GPU_RUNS,
    MANIFEST,
    RUN_SCHEMA,
    GpuRun,
    book_stderr_setting,
    cell_source,
    cuda_stack,
    lesson_code_hash,
    load_gpu_runs,
    page_stderr,
    read_or_empty,
    runs_of_lesson,
)
from gpukit.base.errors import error_line
from gpukit.base.machine_files import file_name
from gpukit.base.paths import project_root
from gpukit.commands import doctor
from gpukit.commands.preflight.runner import SIMULATION_VARIABLES
from gpukit.core import device, machine
from gpukit.core.optional import installed_version
from gpukit.core.stamp import notebook_stamp
from gpukit.measuring.progress import progress_bar
from gpukit.measuring.threads import usable_cores

# The GPU-relevant test files: what this command runs, what gpu.yml runs through it, and what a CPU run with a
# simulated GPU node must pass. This tuple is the one list; `python -m booktools gpu-check --list-tests` prints it.
GPU_TESTS = (
    "tests/unit/core/test_gpu_only.py",
    "tests/unit/core/test_memory.py",
    "tests/unit/topics/test_backend_support.py",
    "tests/unit/base/test_nvcc.py",
    "tests/exercises/test_cupy.py",
    "tests/unit/commands/test_preflight.py",
    "tests/unit/topics/test_distributed.py",
    "tests/unit/topics/test_extensions.py",
    # Numba's real CUDA target (not the simulator) and chapter 9's GPU timing cells.
    "tests/unit/topics/test_simulators.py",
    "tests/lessons/test_writing_kernels_gpu_paths.py",
)
# Each step's estimate on one GPU node, with the lessons' exercise solutions, which gpu-check runs after each
# exercise: the order steps start in and the plan's estimate. For lessons 00-15, the seconds each took on the
# first GPU run (one H100 80GB, 16 cores, 2026-11-26: ../shared/gpu-runs; two lessons at a time and without their
# solutions) plus its solutions' seconds in a run of the lesson as tested on this project's 2-core CPU machine
# (2026-11-29; 0 to 12 s, 10-multi-gpu's the most). 03-cupy took 12.5 s there because its GPU cells failed at once;
# 25 s is the estimate for them running. Lessons 16 and 17 have not run on a GPU. 16: its parts estimated one by
# one (80 s): max-autotune's 21 choices for the lesson's layer (torch 2.11's kernel/mm.py and
# template_heuristics/triton.py), 20 Triton compiles on 16 workers and each choice benchmarked for 25 ms, about
# 25 s; ncu with -c 1 over three sections, about 8 s; compute-sanitizer, nvcc and the TORCH_LOGS child, 3 to 6 s
# each (each bounded at 60 to 120 s by the lesson); the Numba part 12 s; the rest as its CPU cells; since then, ncu
# on a PyTorch kernel (a Python that imports torch, under ncu: about 30 s) and the GPU timings of the copies,
# transposes and sums (about 15 s), 125 s in all, none of it measured. 17: its CPU run's 24 s in `make book`, plus
# about 5 s its MFU, alpha-beta and monitored-barrier cells added (estimated), times 3.2, the median ratio of the
# H100 run's seconds to the CPU's over lessons 00-15 (1.8 to 7.3). The tests were not timed there (the run
# stopped inside them); on this project's 2-core CPU machine they take 90 s, and their CUDA extension build adds
# about 40 s on a GPU. The bench took 45 s there; its achievable search, added since, adds at most
# 10 x BENCH_SEARCH_S.
ESTIMATES_S = {
    "preflight": 50.0, "tests": 150.0, "bench": 80.0,
    "00-environment-check": 12.0, "01-cpu-vs-gpu": 71.5, "02-parallel-cpu": 62.5, "03-cupy": 27.5,
    "04-pytorch-gpu": 62.5, "05-autograd-custom-ops": 87.5, "06-vram-and-errors": 60.5, "07-apple-mps": 36.0,
    "08-jax": 33.0, "09-writing-kernels": 33.5, "10-multi-gpu": 53.5, "11-slurm": 9.0, "12-case-study": 75.5,
    "13-benchmarks": 10.5, "14-profiling": 24.0, "15-precision-and-data": 31.5,
    "16-performance-engineering": 125.0, "17-training-at-scale": 29 * 3.2,
}
DEFAULT_LESSON_S = 60.0
# Time limits: a lesson gets three times its estimate (an extension build on fewer cores, a slower GPU), at least
# LESSON_MIN_LIMIT_S; pytest stops a single test after TEST_LIMIT_S.
LESSON_LIMIT_FACTOR = 3.0
LESSON_MIN_LIMIT_S = 90.0
LIMITS_S = {"environment": 90.0, "preflight": 150.0, "tests": 300.0, "bench": 150.0}
# The bench's search for the achievable matmul rate gets this many seconds per precision and device here (a run of
# its own gives it 20-30 s): with five precisions on the GPU and on the CPU, at most 40 s of the bench's limit,
# leaving the rest for its size sweep (45 s on the H100 node, before the search existed). On an H100 a precision's
# search takes a few seconds, so the estimate adds about 35 s to the 45.
BENCH_SEARCH_S = 4.0
TEST_LIMIT_S = 120
# The whole run, from start to report: 9 minutes, what a GPU node held for a few minutes gives (a short interactive
# allocation, a debug queue's job). Steps run in priority order and each starts only where its estimate fits
# (make_plan), so a shorter budget keeps fewer lessons and a longer one (--budget) more.
BUDGET_S = 540.0
# A step is not started with less than this left of the budget.
MIN_STEP_S = 15.0
# After a step's own limit, the seconds it has to write what it has before it is killed.
GRACE_S = 15.0
# Lanes: each needs this much GPU memory and this many cores; never more than MAX_LANES (more lessons at once
# measure each other, and the H100 run's two lanes already shared 16 cores).
LANE_GIB = 16.0
CORES_PER_LANE = 4
MAX_LANES = 3
# Every step runs with these: a lesson fails at its start if the GPU is unusable, JAX allocates what it uses (not
# 75% of the GPU, which the other lanes need), and pip installs nothing (a setup cell that finds no gpukit).
STEP_ENV = {"GPUKIT_REQUIRE_GPU": "1", "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "PIP_NO_INDEX": "1"}
FOLDER_ENV = "GPUKIT_GPU_CHECK_DIR"

# Shared with scripts/execute_notebooks.py, which runs the lessons for `make book`.
# The kernels' messages are encrypted (CurveZMQ keys the kernel manager provisions; ipykernel's kernel spec
# declares it supports them). Without that, every kernel logs a warning that its TCP traffic is plain text.
KERNEL_SETTINGS = {"KernelManager": {"transport_encryption": "auto"}}
# A kernel that does not start (two kernels started at once picked the same free port) is started again.
KERNEL_STARTS = 3
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

OK, FAILED, TIMED_OUT, NOT_RUN = "ok", "FAILED", "timed out", "not run"


def runs_alone(notebook: Mapping) -> bool:
    """Whether a lesson publishes speed measurements, and so must not share the machine: its metadata says
    ``"gpukit": {"run_alone": true}``."""
    return bool(notebook.get("metadata", {}).get("gpukit", {}).get("run_alone"))


# ------------------------------------------------------------------------------------------ the plan
@dataclass(frozen=True)
class Step:
    """One thing the run does: ``kind`` is environment, preflight, lesson, tests or bench; ``estimate`` and
    ``limit`` are seconds; ``alone`` marks a lesson that publishes speed measurements."""

    kind: str
    name: str
    estimate: float
    limit: float
    alone: bool = False
    path: str | None = None
    kept: str | None = None  # a lesson's kept GPU run of its current code (its folder's name), if any


def lesson_step(path: Path, runs: Sequence[GpuRun] = ()) -> Step:
    """The step that runs the lesson at ``path``; ``runs``: the kept GPU runs (newest first), to say whether one
    has the lesson's current code."""
    notebook = json.loads(Path(path).read_text(encoding="utf-8"))
    estimate = ESTIMATES_S.get(Path(path).stem, DEFAULT_LESSON_S)
    limit = max(LESSON_MIN_LIMIT_S, LESSON_LIMIT_FACTOR * estimate)
    current, _ = runs_of_lesson(runs, Path(path).stem, lesson_code_hash(notebook))
    return Step("lesson", Path(path).stem, estimate, limit, runs_alone(notebook), str(path),
                current.name if current else None)


def fixed_step(kind: str) -> Step:
    return Step(kind, kind, ESTIMATES_S.get(kind, 0.0), LIMITS_S[kind])


def start_order(steps: Iterable[Step]) -> list[Step]:
    """For steps that share lanes: the preflight first (it says at once what is wrong with the node), then the
    longest first, which keeps the lanes even."""
    return sorted(steps, key=lambda s: (s.kind != "preflight", -s.estimate, s.name))


def shortest_first(steps: Iterable[Step]) -> list[Step]:
    """For steps that run one at a time: the shortest first, so that a budget that cannot hold them all keeps as
    many as it can, and leaves the longest for a later run (which starts with them)."""
    return sorted(steps, key=lambda s: (s.estimate, s.name))


def fits(step: Step, left: float) -> bool:
    """Whether ``step`` is started with ``left`` seconds of the budget: its estimate, and :data:`MIN_STEP_S`, fit.
    A step that would be cut by the budget's end is left for a later run instead of lost halfway."""
    return left >= max(MIN_STEP_S, step.estimate)


def simulate(phases: Sequence[tuple[int, Sequence[Step]]], budget: float) -> tuple[float, list[Step]]:
    """(seconds until the last step ends, the steps not started) by the estimates, when the phases run one after
    another and in each every lane takes the next step in order as soon as it is free, starting it only where it
    :func:`fits` (as :func:`run_phase` does)."""
    now, left = 0.0, []
    for lanes, steps in phases:
        free_at = [now] * max(1, lanes)
        for step in steps:
            lane = free_at.index(min(free_at))
            if fits(step, budget - free_at[lane]):
                free_at[lane] += step.estimate
            else:
                left.append(step)
        now = max(free_at)
    return now, left


@dataclass
class Plan:
    """Phases run one after another; each is (lanes, steps in start order). ``estimate``: seconds by the
    estimates; ``left``: the steps the estimate leaves for a later run; ``too_long``: lessons whose estimate
    alone is more than the budget; ``why`` says it in a sentence."""

    lanes: int
    phases: list[tuple[int, list[Step]]]
    estimate: float
    why: str
    left: list[str] = field(default_factory=list)
    too_long: list[str] = field(default_factory=list)

    def steps(self) -> list[Step]:
        return [step for _, steps in self.phases for step in steps]


def make_plan(steps: Sequence[Step], lanes: int, budget: float = BUDGET_S) -> Plan:
    """The phases, in the order the budget is spent: the preflight and the lessons whose current code has no kept
    run (in ``lanes`` lanes, then the lessons that publish speed measurements alone, one at a time); the GPU tests;
    the bench; then the lessons that have a kept run of their current code, the same way. Each step starts only
    where its estimate :func:`fits` what is left, so a tight budget leaves the last steps for a later run, which
    continues where this one stopped."""
    def lessons(kept: bool, alone: bool) -> list[Step]:
        return [s for s in steps if s.kind == "lesson" and bool(s.kept) == kept and s.alone == alone]

    def of_kind(kind: str) -> list[Step]:
        return [s for s in steps if s.kind == kind]

    phases = [(lanes, start_order(of_kind("preflight") + lessons(False, False))),
              (1, shortest_first(lessons(False, True))), (1, of_kind("tests")), (1, of_kind("bench")),
              (lanes, start_order(lessons(True, False))), (1, shortest_first(lessons(True, True)))]
    phases = [(min(n, len(p)), p) for n, p in phases if p]
    estimate, left = simulate(phases, budget)
    todo = [s for s in steps if s.kind == "lesson" and not s.kept]
    kept = [s for s in steps if s.kind == "lesson" and s.kept]
    alone = [s for s in steps if s.kind == "lesson" and s.alone]
    parts = [f"{len(todo)} lesson(s) with no kept GPU run of their current code first"
             + (f", then the tests and the bench, then the {len(kept)} with one" if kept else ", then the rest"),
             f"the {len(alone)} that publish speed measurements one at a time" if alone else
             "no lesson publishes speed measurements"]
    if left:
        parts.append(f"by the estimates, {len(left)} step(s) will be left for a later run: "
                     f"{', '.join(s.name for s in left)}")
    too_long = [s.name for s in steps if s.kind == "lesson" and s.estimate > budget]
    if too_long:
        parts.append(f"{', '.join(too_long)} cannot run within a budget of {budget:.0f} s (--budget "
                     f"{max(s.estimate for s in steps) * 1.25:.0f} gives them time)")
    return Plan(lanes, phases, estimate, "; ".join(parts), [s.name for s in left], too_long)


def lane_count(gpu_memory_gib: float | None, cores: int) -> int:
    """How many steps run at once: one per :data:`LANE_GIB` of GPU memory and :data:`CORES_PER_LANE` cores, at
    least 1 and at most :data:`MAX_LANES`. Unknown memory (an Apple GPU shares the RAM) gives one lane."""
    if not gpu_memory_gib:
        return 1
    return max(1, min(MAX_LANES, int(gpu_memory_gib // LANE_GIB), cores // CORES_PER_LANE))


# ------------------------------------------------------------------------------------------ results
@dataclass
class Item:
    """One line inside a step: a preflight check, a test, a failed cell, a line of stderr."""

    name: str
    status: str
    detail: str = ""
    seconds: float | None = None


@dataclass
class Result:
    """How a step ended. ``errors``: (cell index, error) for a lesson; ``stderr``: (cell index or None, line);
    ``items``: the preflight's checks or the tests; ``files``: what the step left in the run's folder."""

    kind: str
    name: str
    status: str
    seconds: float = 0.0
    detail: str = ""
    errors: list[tuple[int, str]] = field(default_factory=list)
    mismatches: list[tuple[int, str]] = field(default_factory=list)
    stderr: list[tuple[int | None, str]] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    lane: int | None = None
    started: float | None = None
    ended: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == OK


def not_run(step: Step, why: str) -> Result:
    return Result(step.kind, step.name, NOT_RUN, detail=why)


# ------------------------------------------------------------------------------------------ running
def step_environment(root: Path, packages: str | Path | None = None) -> dict[str, str]:
    """The environment every step runs with: this one, plus :data:`STEP_ENV`, gpukit's folder first on the
    import path (the book's copy, whether or not it is installed), then ``packages`` (the private folder the
    wheelhouse installed into, before the node's own site-packages), the state folders inside the project, and no
    switch to a CPU stand-in."""
    # The switches to CPU stand-ins (Numba's simulator, Triton's interpreter, MPS's CPU fallback) are removed for
    # every step, as the preflight removes them for its checks.
    env = {key: value for key, value in os.environ.items() if key not in SIMULATION_VARIABLES}
    env.update(STEP_ENV)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), str(packages or ""), env.get("PYTHONPATH", "")) if p)
    env.setdefault("MPLCONFIGDIR", str(root / "_build" / "cache" / "matplotlib"))
    env.setdefault("IPYTHONDIR", str(root / "_build" / "cache" / "ipython"))
    for folder in (env["MPLCONFIGDIR"], env["IPYTHONDIR"]):
        Path(folder).mkdir(parents=True, exist_ok=True)
    return env


def _signal_groups(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def run_process(command: Sequence[str], *, cwd: Path, env: Mapping[str, str], limit: float, log: Path,
                also_stop: Callable[[], Iterable[int]] = tuple) -> tuple[int | None, float]:
    """Run ``command`` in a process group of its own, its output to ``log``.out and ``log``.err; stop the group
    (and the groups of the pids ``also_stop`` returns: a notebook's kernel runs in a session of its own) after
    ``limit`` seconds: TERM, then KILL 5 s later. Returns (exit status, or None when it was stopped; seconds)."""
    started = time.monotonic()
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{log}.out", "w", encoding="utf-8") as out, open(f"{log}.err", "w", encoding="utf-8") as err:
        process = subprocess.Popen(list(command), cwd=cwd, env=dict(env), stdout=out, stderr=err,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            status = process.wait(timeout=max(1.0, limit))
        except subprocess.TimeoutExpired:
            status = None
            groups = [process.pid, *also_stop()]
            _signal_groups(groups, signal.SIGTERM)  # then 5 s to end, and KILL for what is left
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            _signal_groups(groups, signal.SIGKILL)
            process.wait()
        else:
            _signal_groups(also_stop(), signal.SIGKILL)  # a kernel left behind by a child that died
    return status, time.monotonic() - started


def _lines(text: str) -> list[str]:
    """The non-blank lines of ``text`` as a terminal would show them: colour codes removed, and of a line
    rewritten with carriage returns (a progress bar) only its last state."""
    lines = []
    for line in ANSI_ESCAPE.sub("", text).replace("\r\n", "\n").split("\n"):
        line = line.rstrip("\r").rsplit("\r", 1)[-1].rstrip()
        if line.strip():
            lines.append(line)
    return lines


@dataclass
class Context:
    """What the step runners share: the book's folder, the run's folder, the Python, the environment."""

    root: Path
    folder: Path
    python: str
    env: dict[str, str]


# ---- the preflight
_PREFLIGHT_LINE = re.compile(r"^(?P<status>ok|note|FAIL|skip)\s+(?P<name>\S(?:.*?\S)?)\s{2,}(?P<detail>.*?)"
                             r"(?:\s+-> fix: (?P<fix>.*))?$")


def preflight_checks(output: str) -> list[Item]:
    """The check lines of ``python -m gpukit doctor --gpu``'s output (``gpukit.commands.preflight.Result.line``: status,
    name and detail separated by two or more spaces, then ``-> fix: ...`` for a failure)."""
    items = []
    for line in _lines(output):
        found = _PREFLIGHT_LINE.match(line)
        if found:
            detail = found["detail"] + (f" -> fix: {found['fix']}" if found["fix"] else "")
            items.append(Item(found["name"], found["status"], detail))
    return items


def run_preflight_step(step: Step, limit: float, ctx: Context) -> Result:
    log = ctx.folder / "logs" / "preflight"
    status, seconds = run_process([ctx.python, "-m", "gpukit", "doctor", "--gpu"], cwd=ctx.root, env=ctx.env,
                                  limit=limit, log=log)
    output = read_or_empty(Path(f"{log}.out"))
    lines = _lines(output)
    verdict = next((line for line in reversed(lines) if line.startswith(("Passed", "FAILED"))), "")
    stderr = [(None, line) for line in _lines(read_or_empty(Path(f"{log}.err")))]
    result = Result(step.kind, step.name, OK if status == 0 else FAILED, seconds, verdict,
                    items=preflight_checks(output), stderr=stderr)
    if status is None:
        result.status, result.detail = TIMED_OUT, f"stopped at its time limit of {limit:.0f} s"
    elif status != 0 and not verdict:
        result.detail = f"exit status {status}" + (f": {lines[-1]}" if lines else "")
    return result


# ---- the lessons
CHECKED_TAG, CHECKED_MARKER = "nbval-check-output", "NBVAL_CHECK_OUTPUT"
# What nbval leaves out of a comparison (nbval.plugin.IPyNbFile.skip_compare, without nbdime).
_NOT_COMPARED = ("metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
                 "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg")


def sanitize_patterns(path: Path) -> list[tuple[str, str]]:
    """The regex/replace pairs of an nbval sanitize file (tests/support/nbval_sanitize.cfg), in order."""
    return re.findall(r"^regex: (.*)$\n^replace: (.*)$", read_or_empty(path), flags=re.M)


def _merged_streams(outputs: Sequence[Mapping]) -> list[dict]:
    """Outputs with each stream's pieces joined into one, backspaces and carriage returns applied, as nbval's
    ``coalesce_streams`` does before comparing."""
    merged, streams = [], {}
    for output in outputs:
        if output.get("output_type") == "stream":
            name, text = output.get("name", "stdout"), _text(output.get("text", ""))
            if name in streams:
                streams[name]["text"] += text
                continue
            streams[name] = {"output_type": "stream", "name": name, "text": text}
            merged.append(streams[name])
        else:
            merged.append(dict(output))
    for stream in streams.values():
        text = stream["text"]
        while True:
            shorter = re.sub(r"[^\n]\x08", "", text)
            if shorter == text:
                break
            text = shorter
        stream["text"] = re.sub(r"^.*\r(?=[^\n])", "", text, flags=re.M)
    return merged


def _text(value) -> str:
    """A notebook's multi-line string: stored files hold a list of lines, a running kernel sends one string."""
    return "".join(value) if isinstance(value, list) else value


def _compared(outputs: Sequence[Mapping], patterns: Sequence[tuple[str, str]]) -> dict[str, list]:
    """{key: values} of outputs as nbval compares them: a stream by its name, display data by MIME type."""
    values: dict[str, list] = {}
    for output in _merged_streams(outputs):
        if output.get("output_type") == "stream":
            output = {output["name"]: output["text"]}
        for key, value in output.items():
            if key in _NOT_COMPARED:
                continue
            pairs = value.items() if key == "data" else [(key, value)]
            for sub, text in pairs:
                if sub in _NOT_COMPARED:
                    continue
                text = _text(text)
                if isinstance(text, str):
                    for regex, replace in patterns:
                        text = re.sub(regex, replace, text)
                values.setdefault(sub, []).append(text)
    return values


def output_difference(stored: Sequence[Mapping], ran: Sequence[Mapping],
                      patterns: Sequence[tuple[str, str]] = ()) -> str | None:
    """Why a checked cell's new outputs differ from its stored ones under nbval's rules, or None if they agree."""
    want, got = _compared(stored, patterns), _compared(ran, patterns)
    if set(want) != set(got):
        return f"outputs {sorted(got)} where the stored cell has {sorted(want)}"
    for key in want:
        if want[key] != got[key]:
            first = "\n".join(map(str, want[key])).split("\n")
            second = "\n".join(map(str, got[key])).split("\n")
            length = max(len(first), len(second))
            first, second = first + [""] * (length - len(first)), second + [""] * (length - len(second))
            for number, (a, b) in enumerate(zip(first, second, strict=True), 1):
                if a != b:
                    return f"{key} differs at line {number}: stored {a!r}, this run {b!r}"
            return f"{key}: {len(got[key])} output(s) where the stored cell has {len(want[key])}"
    return None


def is_checked(cell: Mapping) -> bool:
    """Whether nbval (in its lax mode, as `make test` runs it) compares this cell's outputs with the stored ones."""
    tags = cell.get("metadata", {}).get("tags", [])
    return (CHECKED_TAG in tags or CHECKED_MARKER in cell_source(cell)) and "nbval-skip" not in tags


def lesson_outcome(stored: Mapping, executed: Mapping, patterns: Sequence[tuple[str, str]] = ()) -> dict:
    """What one executed lesson shows, cell by cell (indices are positions in the executed notebook's cell list,
    which holds a code cell after each solution where the lesson ran as tested, :func:`as_tested`): every error,
    every line of stderr, every checked output that differs, and the code cells that did not run. A cell is
    compared with the stored cell of the same id."""
    errors, stderr, mismatches, missed = [], [], [], []
    stored_cells = {cell.get("id"): cell for cell in stored["cells"]}
    for index, cell in enumerate(executed["cells"]):
        if cell.get("cell_type") != "code":
            continue
        if "skip-execution" in cell.get("metadata", {}).get("tags", []):
            continue
        if cell.get("execution_count") is None:
            missed.append(index)
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                value = " ".join(_lines(str(output.get("evalue", "")))) or "(no message)"
                errors.append((index, f"{output.get('ename', 'Error')}: {value}"))
            elif output.get("output_type") == "stream" and output.get("name") == "stderr":
                stderr.extend((index, line) for line in _lines(_text(output.get("text", ""))))
        before = stored_cells.get(cell.get("id"), {})
        if before and is_checked(before) and before.get("outputs"):
            difference = output_difference(before["outputs"], cell.get("outputs", []), patterns)
            if difference:
                mismatches.append((index, difference))
    return {"errors": errors, "stderr": stderr, "mismatches": mismatches, "not_run": missed}


def as_tested(notebook, root: Path):
    """The lesson as the book's tests run it (``tests/support/lesson_solutions.py`` of the repository at ``root``): each
    exercise's solution runs after it, where it must pass its check on this device, and each hidden cell runs with
    names of its own. Where the repository has no such file (gpukit installed on its own), the lesson as stored."""
    described = root / "tests" / "support" / "lesson_solutions.py"
    if not described.is_file():
        return notebook
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpukit_gpu_check_lesson_solutions", described)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.as_tested(notebook, Path(notebook.metadata.get("gpukit_name", "lesson")).name)


def as_the_lesson(stored, executed):
    """The stored lesson with the outputs its run produced (by cell id): no solution runs, the hidden cells' own
    code, so that the notebook reads as the lesson does (a page can be built from it)."""
    import copy

    lesson = copy.deepcopy(stored)
    ran = {cell.get("id"): cell for cell in executed.cells if cell.cell_type == "code"}
    for cell in lesson.cells:
        if cell.cell_type == "code":
            match = ran.get(cell.get("id"))
            cell.outputs = list(match.outputs) if match is not None else []
            cell.execution_count = match.execution_count if match is not None else None
    return lesson


def run_lesson_step(step: Step, limit: float, ctx: Context) -> Result:
    path = Path(step.path)
    executed = ctx.folder / "runs" / path.name  # as tested; lesson_path(executed) holds the lesson's own form
    state = ctx.folder / "logs" / f"{step.name}.state.json"
    log = ctx.folder / "logs" / step.name
    own_limit = max(5.0, limit - GRACE_S)  # the lesson stops itself at this, and writes what it has

    def kernel() -> list[int]:
        pid = _json(state).get("kernel_pid")
        return [pid] if isinstance(pid, int) else []

    code = "import sys; from booktools.gpu_check import lesson_child; sys.exit(lesson_child(sys.argv[1:]))"
    status, seconds = run_process([ctx.python, "-c", code, str(path), str(executed), str(state), f"{own_limit:.0f}"],
                                  cwd=ctx.root, env=ctx.env, limit=limit, log=log, also_stop=kernel)
    child = _json(state)
    result = Result(step.kind, step.name, OK, seconds,
                    files=[str(p.relative_to(ctx.folder)) for p in (lesson_path(executed), executed) if p.exists()])
    result.stderr = [(None, line) for line in _lines(read_or_empty(Path(f"{log}.err")))]
    if not executed.exists():
        result.status = FAILED
        result.detail = child.get("stopped") or f"it did not run (exit status {status}); see logs/{log.name}.err"
        return result
    outcome = lesson_outcome(json.loads(path.read_text(encoding="utf-8")),
                             json.loads(executed.read_text(encoding="utf-8")),
                             sanitize_patterns(ctx.root / "tests" / "support" / "nbval_sanitize.cfg"))
    result.errors, result.mismatches = outcome["errors"], outcome["mismatches"]
    result.stderr = outcome["stderr"] + result.stderr
    stopped = child.get("stopped") or (f"stopped at its time limit of {limit:.0f} s" if status is None else None)
    if status is None or child.get("timed_out"):
        result.status = TIMED_OUT
    elif stopped or result.errors or result.mismatches or outcome["not_run"] or status != 0:
        result.status = FAILED
    parts = [stopped] if stopped else []
    if result.errors:
        parts.append(f"{len(result.errors)} cell error(s), first in cell {result.errors[0][0]}")
    if result.mismatches:
        parts.append(f"{len(result.mismatches)} checked output(s) differ")
    if outcome["not_run"] and not stopped:
        parts.append(f"{len(outcome['not_run'])} cell(s) not run")
    if status not in (0, None) and not parts:
        parts.append(f"exit status {status}")
    result.detail = "; ".join(parts)
    return result


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _write_json(path: Path, data) -> None:
    """Write through a temporary file, so that a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    partial.replace(path)


def lesson_child(argv: Sequence[str]) -> int:
    """Run one lesson, cell by cell, in a kernel of this Python (the child process of :func:`run_lesson_step`):
    ``argv`` is the notebook, where to write it executed, where to write the state, and the seconds it may take.
    Each cell gets the notebook's own cell limit (``mystnb.execution_timeout``), cut to the time left; a cell
    still running then is interrupted, and the cells after it do not run. The executed notebook is written after
    every cell, so that whatever stops this process leaves the cells that ran."""
    source, executed, state_file, seconds = Path(argv[0]), Path(argv[1]), Path(argv[2]), float(argv[3])
    try:
        import nbformat
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import AsyncKernelManager
        from nbclient import NotebookClient
        from nbclient.exceptions import DeadKernelError
        from traitlets.config import Config
    except ImportError as missing:  # a cluster's own environment may have torch but no Jupyter
        _write_json(state_file, {"stopped": f"this Python cannot run notebooks ({missing}): the lessons need nbclient "
                                            f"and ipykernel in {sys.executable}"})
        return 1
    deadline = time.monotonic() + seconds
    state: dict = {"stopped": None, "timed_out": False}
    stored = nbformat.read(source, as_version=4)
    for cell in stored.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    # As nbval runs it: the solutions are proven on this device too, in the one run of the lesson.
    stored.metadata["gpukit_name"] = source.name
    notebook = as_tested(stored, source.parents[1])
    stored.metadata.pop("gpukit_name")
    cell_limit = notebook.metadata.get("mystnb", {}).get("execution_timeout") or _book_timeout(source)

    class ThisPython(KernelSpecManager):
        """The kernel of the Python running this, whatever kernels Jupyter has installed (nbval's current-env)."""

        def get_kernel_spec(self, kernel_name):
            import ipykernel.kernelspec

            return self.kernel_spec_class(resource_dir=ipykernel.kernelspec.RESOURCES,
                                          **ipykernel.kernelspec.get_kernel_dict())

    def write() -> None:
        # The run as tested (what the report reads), and the lesson with its outputs beside it (what a page shows).
        for path, content in ((executed, notebook), (lesson_path(executed), as_the_lesson(stored, notebook))):
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(path.name + ".partial")
            nbformat.write(content, partial)
            partial.replace(path)

    client = None
    for attempt in range(1, KERNEL_STARTS + 1):
        manager = AsyncKernelManager(kernel_name="gpukit-this-python", kernel_spec_manager=ThisPython(),
                                config=Config(KERNEL_SETTINGS))
        client = NotebookClient(notebook, km=manager, timeout=int(cell_limit), allow_errors=True,
                                interrupt_on_timeout=True, resources={"metadata": {"path": str(source.parent)}})
        try:
            context = client.setup_kernel(cleanup_kc=True)  # shut the kernel down at the end: we made its manager
            context.__enter__()
            break
        except Exception as error:  # noqa: BLE001 - a kernel that did not start is the lesson's failure
            if attempt == KERNEL_STARTS:
                state["stopped"] = f"the kernel did not start ({KERNEL_STARTS} tries): {error_line(error)}"
                _write_json(state_file, state)
                write()
                return 1
            print(f"the kernel did not start ({error}); starting another", file=sys.stderr, flush=True)
    provisioner = getattr(client.km, "provisioner", None)
    state["kernel_pid"] = getattr(provisioner, "pid", None) or getattr(getattr(provisioner, "process", None),
                                                                      "pid", None)
    _write_json(state_file, state)
    try:
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code" or "skip-execution" in cell.metadata.get("tags", []):
                continue
            left = deadline - time.monotonic()
            if left < 1:
                state["stopped"] = f"its time limit of {seconds:.0f} s came before cell {index}"
                state["timed_out"] = True
                break
            client.timeout = max(1, int(min(cell_limit, left)))
            started = time.monotonic()
            try:
                client.execute_cell(cell, index)
            except DeadKernelError as error:
                state["stopped"] = f"the kernel died in cell {index} ({error})"
                break
            finally:
                write()
            if time.monotonic() - started >= client.timeout and any(
                    o.get("ename") == "KeyboardInterrupt" for o in cell.outputs if o.get("output_type") == "error"):
                limited = "its time limit" if client.timeout < cell_limit else "the notebook's cell time limit"
                state["stopped"] = f"cell {index} was interrupted at {limited} ({client.timeout} s)"
                state["timed_out"] = client.timeout < cell_limit
                break
    finally:
        _write_json(state_file, state)
        context.__exit__(None, None, None)
    return 0


def lesson_path(executed: Path) -> Path:
    """Where the lesson form of an executed run is written: ``notebooks/NN-name.ipynb`` beside the run as tested,
    ``runs/NN-name.ipynb``."""
    return executed.parent.parent / "notebooks" / executed.name


def _book_timeout(notebook: Path) -> int:
    """The book's cell time limit (_config.yml's execute.timeout), 300 s where it cannot be read."""
    text = read_or_empty(notebook.resolve().parents[1] / "_config.yml")
    found = re.search(r"^execute:\s*\n(?:[ \t]+.*\n)*?[ \t]+timeout:\s*(\d+)", text, re.M)
    return int(found[1]) if found else 300


# ---- the tests
def test_items(junit: Path) -> list[Item]:
    """One item per test of pytest's JUnit XML: passed, failed, error or skipped, with the message."""
    try:
        tree = ElementTree.parse(junit)
    except (FileNotFoundError, ElementTree.ParseError):
        return []
    items = []
    for case in tree.iter("testcase"):
        # pytest's class name is the test file's module ("tests.unit.core.test_memory"), a class in it appended.
        parts = (case.get("classname") or "").split(".")
        file_end = next((i for i, part in enumerate(parts) if part.startswith("test_")), len(parts) - 1)
        module, within = "/".join(parts[: file_end + 1]), "::".join(parts[file_end + 1:])
        test = f"{within}::{case.get('name')}" if within else str(case.get("name"))
        name = f"{module}.py::{test}" if module else test
        status, detail = "passed", ""
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                status = {"failure": "failed"}.get(tag, tag)
                detail = " ".join(_lines(found.get("message") or found.text or ""))[:500]
                break
        items.append(Item(name, status, detail, float(case.get("time") or 0)))
    return items


def tests_command(python: str, files: Sequence[str], junit: Path, *, timeout_plugin: bool) -> list[str]:
    """pytest over ``files``, one test at a time (-n 0: they share the GPU with the lanes), results to ``junit``.
    The project's addopts are replaced (they start xdist and nbval, which the node's Python may lack)."""
    command = [python, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider", "-q", "-rfEs",
               f"--junitxml={junit}"]
    if timeout_plugin:
        command.append(f"--timeout={TEST_LIMIT_S}")
    return [*command, *files]


def run_tests_step(step: Step, limit: float, ctx: Context, files: Sequence[str]) -> Result:
    junit = ctx.folder / "tests.xml"
    has_timeout = subprocess.run([ctx.python, "-c", "import pytest_timeout"], env=ctx.env, capture_output=True,
                                 cwd=ctx.root).returncode == 0
    log = ctx.folder / "logs" / "tests"
    status, seconds = run_process(tests_command(ctx.python, files, junit, timeout_plugin=has_timeout), cwd=ctx.root,
                                  env=ctx.env, limit=limit, log=log)
    items = test_items(junit)
    counts = {s: sum(i.status == s for i in items) for s in ("passed", "failed", "error", "skipped")}
    result = Result(step.kind, step.name, OK if status == 0 else FAILED, seconds, items=items,
                    files=["tests.xml"] if junit.exists() else [])
    result.detail = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no test results"
    if status is None:
        result.status, result.detail = TIMED_OUT, f"stopped at its time limit of {limit:.0f} s; {result.detail}"
    elif status != 0 and not (counts["failed"] or counts["error"]):
        tail = _lines(read_or_empty(Path(f"{log}.out")) + read_or_empty(Path(f"{log}.err")))
        result.detail = f"pytest exit status {status}" + (f": {tail[-1]}" if tail else "")
    return result


# ---- the bench
def run_bench_step(step: Step, limit: float, ctx: Context) -> Result:
    folder = ctx.folder / "bench"
    log = ctx.folder / "logs" / "bench"
    status, seconds = run_process([ctx.python, "-m", "booktools", "bench", "--folder", str(folder), "--no-progress",
                                   "--search-seconds", f"{BENCH_SEARCH_S:g}"], cwd=ctx.root, env=ctx.env, limit=limit,
                                  log=log)
    files = sorted(str(p.relative_to(ctx.folder)) for p in folder.glob("*.json"))
    result = Result(step.kind, step.name, OK if status == 0 and files else FAILED, seconds, files=files,
                    items=[Item(line, "") for line in _lines(read_or_empty(Path(f"{log}.out")))])
    result.stderr = [(None, line) for line in _lines(read_or_empty(Path(f"{log}.err")))]
    if status is None:
        result.status, result.detail = TIMED_OUT, f"stopped at its time limit of {limit:.0f} s"
    elif status != 0:
        tail = [line for _, line in result.stderr] or [i.name for i in result.items]
        result.detail = f"exit status {status}" + (f": {tail[-1]}" if tail else "")
    else:
        result.detail = f"wrote {', '.join(files)}" if files else "wrote no file"
    return result


# ---- phases
def run_phase(steps: Sequence[Step], lanes: int, deadline: float, run: Callable[[Step, float], Result],
              done: Callable[[Result], None] = lambda result: None, clock: Callable[[], float] = time.monotonic
              ) -> list[Result]:
    """Run ``steps`` in ``lanes`` lanes, each lane taking the next step in order as soon as it is free. A step
    gets its own limit, cut to what is left before ``deadline``; where its estimate does not :func:`fit <fits>` in
    what is left it is not started. ``run(step, limit)`` returns its :class:`Result`; ``done`` sees each as it ends."""
    lane_of: dict[int, int] = {}
    lock = threading.Lock()

    def one(step: Step) -> Result:
        with lock:
            lane = lane_of.setdefault(threading.get_ident(), len(lane_of) + 1)
        left = deadline - clock()
        if not fits(step, left):
            result = not_run(step, f"not started: {max(0.0, left):.0f} s of the time budget were left"
                             + (f", less than its estimate of {step.estimate:.0f} s" if step.estimate > MIN_STEP_S
                                else ""))
        else:
            started = clock()
            try:
                result = run(step, min(step.limit, left))
            except Exception as error:  # noqa: BLE001 - a step that cannot run is its own failure
                result = Result(step.kind, step.name, FAILED, detail=f"could not run: {error_line(error)}")
            result.started, result.ended, result.lane = started, clock(), lane
        done(result)
        return result

    if not steps:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(lanes, len(steps))), thread_name_prefix="lane") as pool:
        return list(pool.map(one, steps))


def beside(results: Sequence[Result], result: Result) -> list[str]:
    """The steps that ran at the same time as ``result``."""
    if result.started is None:
        return []
    return [other.name for other in results if other is not result and other.started is not None
            and other.started < result.ended and result.started < other.ended]


# ------------------------------------------------------------------------------------------ the environment
def environment_facts() -> dict:
    """What this Python and this node offer (run in a child Python by the command): versions, driver, CUDA, the
    device the lessons pick with a GPU required, and the drift against the book's lock."""
    names = ["numpy", "torch", "jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "cupy-cuda13x",
             "cupy-cuda12x", "numba", "numba-cuda", "triton", "pandas", "matplotlib", "nbclient", "ipykernel",
             "pytest"]
    facts: dict = {"python": platform.python_version(), "executable": sys.executable,
                   "system": f"{platform.system()} {platform.machine()}", "cores": usable_cores(),
                   "versions": {name: version for name in names if (version := installed_version(name))}}
    smi = machine.nvidia_smi_gpus() or []
    facts["nvidia_smi"] = smi
    facts["driver"] = machine.driver_in_smi_lines(smi)
    nvcc = shutil.which("nvcc")
    if nvcc:
        banner = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
        release = re.search(r"release ([\d.]+)", banner)
        facts["nvcc"] = f"{release[1] if release else '?'} ({nvcc})"
    try:
        import torch
    except Exception as error:  # noqa: BLE001 - a torch that cannot import is a fact to report
        torch = None
        facts["torch_error"] = error_line(error)
    else:
        facts["torch_cuda"] = torch.version.cuda
    previous = os.environ.get(device.REQUIRE_GPU_ENV)
    os.environ[device.REQUIRE_GPU_ENV] = "1"
    try:
        chosen = device.pick_device()
        facts["device"] = device.describe_device(chosen)
        facts["usable_gpu"] = True
        if chosen.startswith("cuda") and torch is not None:
            properties = torch.cuda.get_device_properties(chosen)
            facts["gpu_name"] = properties.name
            facts["gpu_memory_gib"] = properties.total_memory / 2**30
            facts["compute_capability"] = f"{properties.major}.{properties.minor}"
        else:
            facts["gpu_name"] = "Apple MPS"
    except Exception as error:  # noqa: BLE001 - NoGPUError above all; the reason is the report's first line
        facts["usable_gpu"] = False
        facts["why_not"] = " ".join(str(error).split())
        facts["device"] = "no usable GPU"
    finally:
        if previous is None:
            del os.environ[device.REQUIRE_GPU_ENV]
        else:
            os.environ[device.REQUIRE_GPU_ENV] = previous
    if facts["usable_gpu"] and installed_version("jax"):
        try:
            import jax

            facts["jax_devices"] = [str(d) for d in jax.devices()]
        except Exception as error:  # noqa: BLE001
            facts["jax_devices"] = [error_line(error)]
    try:
        facts["drift"] = [asdict(d) | {"line": f"{d.distribution}: {d.detail()}"} for d in doctor.version_drift()]
    except (FileNotFoundError, ImportError) as error:
        facts["drift_error"] = str(error)
    return facts


def git_commit(root: Path) -> str:
    """The commit checked out, with "+ local changes" where the work tree differs from it; "unknown" without git."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=20)
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                 capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return "unknown (no git)"
    if commit.returncode != 0:
        return "unknown (not a git clone)"
    return commit.stdout.strip() + (" + local changes" if changed.stdout.strip() else "")


def probe_environment(ctx: Context, limit: float) -> dict:
    code = ("import json, sys; from booktools.gpu_check import environment_facts; "
            "print('GPUKIT-ENVIRONMENT ' + json.dumps(environment_facts()))")
    log = ctx.folder / "logs" / "environment"
    status, seconds = run_process([ctx.python, "-c", code], cwd=ctx.root, env=ctx.env, limit=limit, log=log)
    out = read_or_empty(Path(f"{log}.out"))
    found = re.search(r"^GPUKIT-ENVIRONMENT (.*)$", out, re.M)
    if found:
        facts = json.loads(found[1])
    else:
        err = _lines(read_or_empty(Path(f"{log}.err")))
        why = ("stopped at its time limit" if status is None else
               f"exit status {status}" + (f": {err[-1]}" if err else ""))
        facts = {"usable_gpu": False, "why_not": f"the environment probe failed ({why})", "device": "unknown"}
    facts["seconds"] = seconds
    facts["commit"] = git_commit(ctx.root)
    return facts


def device_slug(facts: Mapping) -> str:
    """The device part of the run folder's name: "h100-80gb-hbm3", "apple-mps", or "no-gpu"."""
    if not facts.get("usable_gpu"):
        return "no-gpu"
    name = re.sub(r"^nvidia\s+", "", str(facts.get("gpu_name") or "gpu"), flags=re.I)
    try:
        return file_name(name)
    except ValueError:
        return "gpu"


def run_folder(root: Path, facts: Mapping, when: time.struct_time | None = None, suffix: str | None = None) -> Path:
    """``<root>/<date>-<device>`` (``-<suffix>`` after it where given), with -2, -3, ... where that exists
    already."""
    base = root / f"{time.strftime('%Y-%m-%d', when or time.localtime())}-{device_slug(facts)}"
    base = base.with_name(f"{base.name}-{suffix}") if suffix else base
    folder, number = base, 1
    while folder.exists():
        number += 1
        folder = base.with_name(f"{base.name}-{number}")
    return folder


def no_gpu_reason(facts: Mapping, preflight: Result) -> str:
    """The report's one-line reason where the lessons find no usable GPU: the preflight's own words where it says
    why (every check skipped: what nvidia-smi and torch show; else its first failed check), else the device
    choice's error."""
    skipped = [i for i in preflight.items if i.status == "skip"]
    failed = [i for i in preflight.items if i.status == "FAIL"]
    if skipped and len(skipped) == len(preflight.items):
        found = re.search(r"\((.*)\)\s*$", skipped[0].detail)
        why = found[1] if found else skipped[0].detail
    elif failed:
        why = f"the preflight's {failed[0].name} check failed: {failed[0].detail}"
    else:
        why = str(facts.get("why_not") or "the lessons' device choice found none")
    return f"no usable GPU here ({why}), so nothing ran on a GPU"


# ------------------------------------------------------------------------------------------ keeping GPU runs
class Keeper:
    """Keeps each lesson of a run as a GPU run as soon as it passes (``--save-run``): the first lesson kept makes
    the run's folder under ``parent`` (``<date>-<device>-<stack>``), and every lesson kept after it rewrites the
    folder's ``manifest.json`` (device, driver, CUDA, stack, versions, date, commit, each lesson's code hash), so
    that a run stopped by its limit, a crash or an out-of-memory error loses only the lesson in flight. A lesson
    that failed, or whose stderr would stop the book's build, is left out, with why. :meth:`finish` writes the
    run's verdict."""

    def __init__(self, parent: Path, root: Path, facts: Mapping, check: Path, when: time.struct_time | None = None,
                 plan: str | None = None):
        self.parent, self.facts, self.check, self.plan = Path(parent), dict(facts), Path(check), plan
        self.when = when or time.localtime()
        self.stderr_default = book_stderr_setting(root)
        self.folder: Path | None = None
        self.kept: dict[str, dict] = {}
        self.left_out: dict[str, str] = {}
        self.lock = threading.Lock()

    def consider(self, result: Result, beside_it: Sequence[str] = ()) -> None:
        """Keep ``result``'s lesson if it passed and its page can be built; else note why not. ``beside_it``:
        the steps that shared the GPU with it."""
        if result.kind != "lesson":
            return
        with self.lock:
            if not result.ok:
                self.left_out[result.name] = f"{result.status}" + (f": {result.detail}" if result.detail else "")
                return
            try:
                self._keep(result, beside_it)
            except (OSError, ValueError) as error:  # the run goes on, and its report says why this one is not kept
                self.left_out[result.name] = f"passed, but could not be kept: {error_line(error)}"

    def _keep(self, result: Result, beside_it: Sequence[str]) -> None:
        notebook_file = self.check / "notebooks" / f"{result.name}.ipynb"
        notebook = json.loads(notebook_file.read_text(encoding="utf-8"))
        stderr = page_stderr(notebook, self.stderr_default)
        if stderr:
            self.left_out[result.name] = (f"stderr in cell(s) {', '.join(map(str, stderr))}, which the book's "
                                          f"build rejects")
            return
        if self.folder is None:
            self.folder = run_folder(self.parent, self.facts, self.when, suffix=cuda_stack(self.facts))
            (self.folder / "notebooks").mkdir(parents=True)
        entry = {"notebook": f"notebooks/{result.name}.ipynb", "code_hash": lesson_code_hash(notebook),
                 "seconds": round(result.seconds, 1), "stamp": notebook_stamp(notebook),
                 "shared_gpu_with": sorted(beside_it)}
        partial = self.folder / f"{entry['notebook']}.partial"
        shutil.copyfile(notebook_file, partial)
        partial.replace(self.folder / entry["notebook"])
        self.kept[result.name] = entry
        self._write("the run had not ended when this lesson was kept: each lesson listed here passed")

    def finish(self, run: Run) -> dict:
        """Write the run's verdict into the manifest; what was kept (:func:`saved_line` reads it)."""
        for result in run.results:
            if result.kind == "lesson" and not result.ok and result.name not in self.left_out:
                self.left_out[result.name] = f"{result.status}" + (f": {result.detail}" if result.detail else "")
        with self.lock:
            if self.folder is not None:
                self._write(run.verdict().removeprefix("# "))
        return {"folder": str(self.folder) if self.folder else None, "lessons": sorted(self.kept),
                "left_out": dict(self.left_out)}

    def _write(self, verdict: str) -> None:
        facts = self.facts
        manifest = {
            "schema": RUN_SCHEMA,
            "made_by": "make gpu-check GPU_CHECK_FLAGS=--save-run (python -m booktools gpu-check)",
            "date": time.strftime("%Y-%m-%d", self.when), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z", self.when),
            "commit": facts.get("commit"), "device": facts.get("device"), "gpu_name": facts.get("gpu_name"),
            "gpu_memory_gib": facts.get("gpu_memory_gib"), "compute_capability": facts.get("compute_capability"),
            "driver": facts.get("driver"), "cuda": facts.get("torch_cuda"), "nvcc": facts.get("nvcc"),
            "stack": cuda_stack(facts), "python": facts.get("python"), "system": facts.get("system"),
            "cores": facts.get("cores"), "versions": facts.get("versions") or {},
            "drift": [d["line"] for d in facts.get("drift") or []], "node_packages": facts.get("node_packages"),
            "verdict": verdict, "plan": self.plan, "lessons": self.kept, "left_out": self.left_out,
        }
        _write_json(self.folder / MANIFEST, manifest)


def save_gpu_run(run: Run, check: Path, parent: Path, root: Path, when: time.struct_time | None = None) -> dict:
    """Keep the lessons of a finished ``run`` that passed, from its folder ``check``, as a GPU run under
    ``parent`` (what a :class:`Keeper` does as each lesson ends, all at once)."""
    keeper = Keeper(parent, root, run.facts, check, when, run.plan.why if run.plan else None)
    for result in run.results:
        keeper.consider(result, beside(run.results, result))
    return keeper.finish(run)


# ------------------------------------------------------------------------------------------ the report
@dataclass
class Run:
    """One run of the command: the environment facts, the plan, every step's result, the budget."""

    facts: dict
    plan: Plan | None
    results: list[Result]
    budget: float
    seconds: float = 0.0
    stopped: str | None = None  # why the run stopped before the lessons (no usable GPU)
    saved: dict | None = None  # the GPU run kept (--save-run): save_gpu_run's answer

    @property
    def failures(self) -> list[Result]:
        return [r for r in self.results if not r.ok]

    @property
    def passed(self) -> bool:
        return self.stopped is None and not self.failures and bool(self.results)

    def verdict(self) -> str:
        """The report's first line: passed, FAILED or incomplete, and why, in one line."""
        where = self.facts.get("device", "unknown device")
        if self.stopped:
            return f"# gpu-check FAILED: {self.stopped}"
        if self.passed:
            kinds = {kind: sum(r.kind == kind for r in self.results) for kind in ("lesson", "preflight", "tests",
                                                                                   "bench")}
            return (f"# gpu-check passed on {where}: {kinds['lesson']} lessons, the preflight, "
                    f"{'the GPU tests, ' if kinds['tests'] else ''}{'the bench, ' if kinds['bench'] else ''}"
                    f"in {self.seconds:.0f} s")
        broken = [r for r in self.failures if r.status != NOT_RUN]
        left = len(self.failures) - len(broken)
        later = f"; {left} left for the next run (the budget ran out)" if left else ""
        if not broken:
            done = sum(r.ok for r in self.results)
            return f"# gpu-check incomplete on {where}: {done} step(s) passed{later}"
        named = ", ".join(f"{r.name} ({r.status})" for r in broken[:6])
        more = f" and {len(broken) - 6} more" if len(broken) > 6 else ""
        return f"# gpu-check FAILED on {where}: {len(broken)} step(s) failed: {named}{more}{later}"

    def summary(self) -> list[str]:
        """The lines under the verdict: what was kept, what failed and why, what is left for the next run."""
        out = []
        if self.saved is not None:
            out.append(saved_line(self.saved))
        broken = [r for r in self.failures if r.status != NOT_RUN]
        if broken:
            out.append("Failed: " + "; ".join(f"{r.name} ({r.detail if r.detail.startswith(r.status) else r.status}"
                                              + (f": {r.detail})" if r.detail and not r.detail.startswith(r.status)
                                                 else ")") for r in broken))
        left = [r.name for r in self.failures if r.status == NOT_RUN]
        if left:
            out.append(f"Left for the next run: {', '.join(left)}: the budget ran out before them; the next run "
                       f"starts with the lessons that have no kept run")
        kept_before = [s for s in (self.plan.steps() if self.plan else []) if s.kind == "lesson" and s.kept]
        if kept_before:
            out.append(f"Already kept from earlier runs (their current code): "
                       f"{', '.join(f'{s.name} ({s.kept})' for s in kept_before)}")
        return out


def _cell(text) -> str:
    """Text for a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _fenced(lines: Sequence[str]) -> list[str]:
    """``lines`` in a fenced block whose fence no line can close."""
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}text", *lines, fence]


def report_markdown(run: Run) -> str:
    """The run's report: the verdict on the first line, then the steps, the environment, the preflight's checks,
    each lesson's errors, differing outputs and stderr, every test, and the bench."""
    facts, out = run.facts, [run.verdict(), ""]
    summary = run.summary()
    out += [*summary, ""] if summary else []
    if run.stopped and facts.get("why_not"):
        out += [f"The lessons pick no GPU here: {facts['why_not']}", ""]
        out += ["Nothing ran on a GPU: the lessons, the GPU tests and the bench were not started. Run it on a "
                "GPU node: `srun --gpus=1 make gpu-check`, or `sbatch slurm_templates/gpu-check.sbatch`.", ""]
    packages = facts.get("node_packages")
    if packages:
        out += [f"- {_cell(line)}" for line in packages["lines"]] + [""]
    out += [f"Run on: {facts.get('device', '?')}; commit {facts.get('commit', '?')}, "
            f"{time.strftime('%Y-%m-%d %H:%M %Z')}; {run.seconds:.0f} s of a {run.budget:.0f} s budget.", ""]
    if run.plan:
        out += [f"Plan: {run.plan.lanes} lane(s); {run.plan.why}; estimated {run.plan.estimate:.0f} s.", ""]

    out += ["## Steps", "", "| step | status | seconds | lane | ran beside | detail |", "|---|---|---|---|---|---|"]
    for r in run.results:
        mark = "✅" if r.ok else "❌"
        seconds = f"{r.seconds:.1f}" if r.seconds else ""
        together = ", ".join(beside(run.results, r))
        out.append(f"| {_cell(r.name)} | {mark} {r.status} | {seconds} | {r.lane or ''} | {_cell(together)} | "
                   f"{_cell(r.detail)} |")
    out.append("")

    out += ["## Environment", ""]
    out += [f"- {label}: {_cell(value)}" for label, value in (
        ("Python", f"{facts.get('python', '?')} ({facts.get('executable', '?')})"),
        ("machine", f"{facts.get('system', '?')}, {facts.get('cores', '?')} cores"),
        ("GPU (nvidia-smi)", "; ".join(facts.get("nvidia_smi") or []) or "none listed"),
        ("driver", facts.get("driver") or "none"),
        ("CUDA", f"torch built for {facts.get('torch_cuda') or 'no CUDA'}; nvcc {facts.get('nvcc') or 'not found'}"),
        ("device the lessons pick", facts.get("device", "?")),
        ("JAX devices", ", ".join(facts.get("jax_devices") or []) or "not asked"),
        ("commit", facts.get("commit", "?")),
    )]
    versions = facts.get("versions") or {}
    out.append("- versions: " + (", ".join(f"{name} {v}" for name, v in versions.items()) or "unknown"))
    drift = facts.get("drift")
    if drift:
        out += ["", f"Versions that differ from the book's lock (requirements/lock.txt), {len(drift)}:", ""]
        out += [f"- ⚠️ {_cell(d['line'])}" for d in drift]
    elif drift == []:
        out += ["", "Every library the lessons use is at the version of the book's lock (requirements/lock.txt)."]
    elif facts.get("drift_error"):
        out += ["", f"Not compared with the book's lock: {_cell(facts['drift_error'])}"]
    out.append("")

    for r in run.results:
        if r.kind == "preflight":
            out += ["## Preflight (`python -m gpukit doctor --gpu`)", "", _cell(r.detail or r.status), ""]
            out += ["| check | status | detail |", "|---|---|---|"]
            out += [f"| {_cell(i.name)} | {i.status} | {_cell(i.detail)} |" for i in r.items] + [""]
            if r.stderr:
                out += ["stderr:", "", *_fenced([line for _, line in r.stderr]), ""]

    lessons = [r for r in run.results if r.kind == "lesson"]
    if lessons:
        out += ["## Lessons", "", "| lesson | status | seconds | errors | checked outputs differing | stderr lines |",
                "|---|---|---|---|---|---|"]
        out += [f"| {r.name} | {'✅' if r.ok else '❌'} {r.status} | {r.seconds:.1f} | {len(r.errors)} | "
                f"{len(r.mismatches)} | {len(r.stderr)} |" for r in lessons] + [""]
        for r in lessons:
            if not (r.errors or r.mismatches or r.stderr or r.detail):
                continue
            out += [f"### {r.name}: {r.status}", ""]
            if r.detail:
                out += [_cell(r.detail), ""]
            out += [f"- cell {index}: {_cell(error)}" for index, error in r.errors]
            out += [f"- cell {index}, checked output: {_cell(why)}" for index, why in r.mismatches]
            if r.errors or r.mismatches:
                out.append("")
            if r.stderr:
                lines = [f"[cell {index}] {line}" if index is not None else f"[kernel] {line}"
                         for index, line in r.stderr]
                out += [f"stderr ({len(lines)} lines; [kernel]: the kernel process's own, outside any cell):", "",
                        *_fenced(lines), ""]

    for r in run.results:
        if r.kind == "tests":
            out += ["## Tests", "", f"{r.status}: {_cell(r.detail)}", "", "| test | result | seconds | message |",
                    "|---|---|---|---|"]
            order = {"failed": 0, "error": 1, "skipped": 3, "passed": 4}
            for item in sorted(r.items, key=lambda i: order.get(i.status, 2)):
                out.append(f"| {_cell(item.name)} | {item.status} | {item.seconds or 0:.2f} | {_cell(item.detail)} |")
            out.append("")
        if r.kind == "bench":
            out += ["## Bench (`python -m booktools bench`)", "", f"{r.status}: {_cell(r.detail)}", ""]
            if r.items:
                out += [*_fenced([i.name for i in r.items]), ""]
            if r.stderr:
                out += ["stderr:", "", *_fenced([line for _, line in r.stderr]), ""]
    not_started = [r for r in run.results if r.status == NOT_RUN]
    if not_started:
        out += ["## Not run", ""] + [f"- {r.name}: {_cell(r.detail)}" for r in not_started] + [""]
    if run.saved is not None:
        out += ["## GPU run kept (`--save-run`, each lesson as it passed)", "", saved_line(run.saved), ""]
        out += [f"- left out {name}: {_cell(why)}" for name, why in run.saved["left_out"].items()]
        out += [""] if run.saved["left_out"] else []
    return "\n".join(out).rstrip() + "\n"


def saved_line(saved: Mapping) -> str:
    """One line on the GPU run ``--save-run`` kept (:func:`save_gpu_run`'s answer)."""
    if not saved["folder"]:
        return f"No GPU run kept: {saved.get('why') or 'no lesson passed'}."
    lessons = saved["lessons"]
    return (f"Kept {len(lessons)} lesson(s) as a GPU run in {saved['folder']}: {', '.join(lessons)}. Commit that "
            f"folder, and `make book` builds their pages from it while their code is unchanged.")


def run_record(run: Run) -> dict:
    """Everything the run found, for gpu-check.json."""
    return {"verdict": run.verdict(), "summary": run.summary(), "passed": run.passed, "seconds": run.seconds,
            "budget": run.budget, "stopped": run.stopped, "saved": run.saved, "plan": None if run.plan is None else {
                "lanes": run.plan.lanes, "estimate": run.plan.estimate, "why": run.plan.why, "left": run.plan.left,
                "too_long": run.plan.too_long,
                "phases": [[lanes, [asdict(s) for s in steps]] for lanes, steps in run.plan.phases]},
            "results": [asdict(r) for r in run.results]}


# ------------------------------------------------------------------------------------------ the command
def lessons_in(root: Path, chosen: Sequence[str] | None = None) -> list[Path]:
    """The lessons (notebooks/NN-*.ipynb); ``chosen``: only those whose name starts with one of these."""
    paths = sorted((root / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    if chosen:
        paths = [p for p in paths if any(p.name.startswith(c) for c in chosen)]
        if not paths:
            raise SystemExit(f"no lesson in notebooks/ starts with {' or '.join(chosen)}")
    return paths


def add_gpu_check_command(commands) -> None:
    """Add ``gpu-check`` to ``python -m booktools``'s subcommands."""
    parser = commands.add_parser(
        "gpu-check", help="the whole GPU run again: preflight, every lesson, the GPU tests and the bench, into "
                          "one folder with a report; exits non-zero on any failure",
        description=__doc__.split("\n\n")[0])
    parser.add_argument("--lessons", nargs="+", metavar="NN", help="only these lessons (by number or name prefix)")
    parser.add_argument("--tests", nargs="+", metavar="FILE", help=f"these test files (default: the {len(GPU_TESTS)} "
                        "of --list-tests)")
    parser.add_argument("--no-tests", action="store_true", help="run no tests")
    parser.add_argument("--no-bench", action="store_true", help="do not run the benchmark")
    parser.add_argument("--budget", type=float, default=BUDGET_S,
                        help=f"seconds for the whole run (default {BUDGET_S:.0f}); with enough, the lessons that "
                             "publish speed measurements run one at a time")
    parser.add_argument("--lanes", type=int, help="steps at once (default: by the GPU's memory and the cores)")
    parser.add_argument("--out", type=Path, help=f"the run's folder (default: _build/gpu-check/<date>-<device>, or "
                                                 f"under ${FOLDER_ENV})")
    parser.add_argument("--list-tests", action="store_true", help="print the GPU-relevant test files and exit")
    parser.add_argument("--save-run", nargs="?", const="", metavar="FOLDER",
                        help=f"keep each lesson as soon as it passes, as a GPU run in a new folder under FOLDER "
                             f"(default: {GPU_RUNS}/ of the book): commit it and `make book` builds their pages "
                             f"from it")
    parser.add_argument("--wheelhouse", type=Path, metavar="DIR",
                        help="install what this Python lacks (the Jupyter kernel, nbclient, pytest, the book's "
                             "NumPy) from DIR, made by `make wheelhouse` on a machine with network, into a private "
                             "folder of the run: offline, no root, the node's own packages untouched")


class Progress:
    """A line per finished step on the terminal, under a bar (a bar only where the output is a terminal)."""

    def __init__(self, total: int):
        self.total, self.count = total, 0
        self.bar = progress_bar(total, "gpu-check", file=sys.stdout, disable=None)

    def say(self, text: str) -> None:
        self.bar.write(text)

    def done(self, result: Result) -> None:
        self.count += 1
        lane = f"  (lane {result.lane})" if result.lane else ""
        self.say(f"[{self.count:>2}/{self.total}] {result.status:<9} {result.name:<24} {result.seconds:6.1f} s{lane}"
                 + (f"  {result.detail}" if result.detail and not result.ok else ""))
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def _prepare_folder(folder: Path) -> None:
    """An empty folder for the run: a folder that holds another run's report is emptied, any other refused."""
    if folder.exists() and any(folder.iterdir()):
        if not (folder / "gpu-check.json").exists():
            raise SystemExit(f"{folder} is not empty and holds no earlier gpu-check run: choose another --out")
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)


def run_gpu_check_command(args) -> int:
    if args.list_tests:
        print("\n".join(GPU_TESTS))
        return 0
    started, started_at = time.monotonic(), time.localtime()
    deadline = started + args.budget
    root = project_root()
    python = sys.executable
    lessons = lessons_in(root, args.lessons)
    tests = [] if args.no_tests else list(args.tests or GPU_TESTS)
    saving = getattr(args, "save_run", None) is not None
    runs_parent = Path(args.save_run) if saving and args.save_run else root / GPU_RUNS
    scratch = Path(tempfile.mkdtemp(prefix="gpu-check-"))  # the probe's logs, until the folder has its name
    print(f"gpu-check: {len(lessons)} lesson(s), {len(tests)} test file(s), "
          f"{'no bench' if args.no_bench else 'the bench'}; {python}; budget {args.budget:.0f} s", flush=True)
    packages, stopped = None, None
    parent = Path(os.environ.get(FOLDER_ENV) or root / "_build" / "gpu-check")
    if getattr(args, "wheelhouse", None):
        try:
            packages = node_packages.install(args.wheelhouse, parent, scratch / "logs" / "pip")
        except node_packages.WheelhouseError as error:
            stopped = f"the wheelhouse cannot be used: {error}"
        else:
            for line in packages.lines():
                print(f"gpu-check: {line}", flush=True)
            if packages.folder:  # this process too (its progress bar): after the book's folder, before the node's
                sys.path.insert(1 if sys.path and sys.path[0] == str(root) else 0, packages.folder)
    ctx = Context(root, scratch, python, step_environment(root, packages.folder if packages else None))
    facts = probe_environment(ctx, LIMITS_S["environment"])
    if packages:
        facts["node_packages"] = asdict(packages) | {"lines": packages.lines()}
    folder = args.out if args.out else run_folder(parent, facts)
    _prepare_folder(folder)
    shutil.copytree(scratch, folder, dirs_exist_ok=True)
    shutil.rmtree(scratch, ignore_errors=True)
    ctx.folder = folder
    _write_json(folder / "environment.json", facts)
    print(f"gpu-check: {facts.get('device')}; writing {folder}", flush=True)
    for line in facts.get("drift") or []:
        print(f"  version drift: {line['line']}", flush=True)

    runs = load_gpu_runs(root, runs_parent)
    steps = [fixed_step("preflight"), *(lesson_step(p, runs) for p in lessons)]
    steps += [fixed_step("tests")] if tests else []
    steps += [] if args.no_bench else [fixed_step("bench")]
    runners = {"preflight": lambda s, limit: run_preflight_step(s, limit, ctx),
               "lesson": lambda s, limit: run_lesson_step(s, limit, ctx),
               "tests": lambda s, limit: run_tests_step(s, limit, ctx, tests),
               "bench": lambda s, limit: run_bench_step(s, limit, ctx)}

    # What ran beside what: the steps in flight, and those ended, when each ends (a kept lesson records them).
    in_flight: dict[str, float] = {}
    ended: list[Result] = []
    lock = threading.Lock()

    def run_step(step: Step, limit: float) -> Result:
        with lock:
            in_flight[step.name] = time.monotonic()
        try:
            return runners[step.kind](step, limit)
        finally:
            with lock:
                in_flight.pop(step.name, None)

    def shared_with(result: Result) -> list[str]:
        with lock:
            others = [name for name in in_flight if name != result.name] + beside(ended, result)
            ended.append(result)
        return others

    results: list[Result] = []
    plan = keeper = None
    if stopped:
        print(f"gpu-check: {stopped}", flush=True)
    elif not facts.get("usable_gpu"):
        print("gpu-check: the lessons would find no usable GPU; the preflight says why, then the run stops",
              flush=True)
        progress = Progress(1)
        results = run_phase([steps[0]], 1, deadline, run_step, progress.done)
        progress.close()
        stopped = no_gpu_reason(facts, results[0])
    else:
        lanes = args.lanes or lane_count(facts.get("gpu_memory_gib"), facts.get("cores") or usable_cores())
        plan = make_plan(steps, lanes, deadline - time.monotonic())
        print(f"gpu-check: {lanes} lane(s); {plan.why}; estimated {plan.estimate:.0f} s", flush=True)
        keeper = Keeper(runs_parent, root, facts, folder, started_at, plan.why) if saving else None
        progress = Progress(len(plan.steps()))
        def done(result: Result) -> None:
            progress.done(result)
            others = shared_with(result)
            if keeper:
                keeper.consider(result, others)

        for lanes_here, phase in plan.phases:
            results += run_phase(phase, lanes_here, deadline, run_step, done)
        progress.close()
    run = Run(facts, plan, results, args.budget, time.monotonic() - started, stopped)
    if saving:
        if keeper is None:
            run.saved = {"folder": None, "lessons": [], "left_out": {}, "why": "nothing ran on a GPU"}
        else:
            run.saved = keeper.finish(run)
        print(saved_line(run.saved), flush=True)
    (folder / "report.md").write_text(report_markdown(run), encoding="utf-8")
    _write_json(folder / "gpu-check.json", run_record(run))
    for line in [run.verdict().removeprefix("# "), *run.summary()]:
        print(line, flush=True)
    print(f"Report: {folder / 'report.md'}", flush=True)
    return 0 if run.passed else 1
