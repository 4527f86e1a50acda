"""``make gpu-check`` (booktools/gpu_check.py) on the CPU: its plan (lanes, order, time limits), the steps'
plumbing
(processes stopped at their limit, a lesson's cells read for errors, stderr and checked outputs), the report from
fabricated results, and the real command on a machine where the GPU is hidden, which must stop at once and say
why on the report's first line."""

import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import types
from pathlib import Path

import nbformat
import pytest

from booktools import gpu_check as g
from gpukit.commands import preflight
from tests.support.booktoc import ROOT
from tests.support.gpu_node import forcing_env


def step(name, estimate, kind="lesson", alone=False, limit=None, kept=None):
    return g.Step(kind, name, estimate, limit or 3 * estimate, alone, kept=kept)


def names(phases):
    return [[s.name for s in phase] for _, phase in phases]


# ------------------------------------------------------------------------------------------ the plan
def test_the_gpu_tests_are_one_list_of_files_that_exist(capsys):
    h100_run = {"test_gpu_only.py", "test_memory.py", "test_backend_support.py", "test_nvcc.py", "test_cupy.py",
                "test_preflight.py", "test_distributed.py", "test_extensions.py"}
    assert h100_run <= {name.split("/")[-1] for name in g.GPU_TESTS}
    assert all((ROOT / name).is_file() for name in g.GPU_TESTS)
    from booktools.__main__ import main

    assert main(["gpu-check", "--list-tests"]) == 0
    assert capsys.readouterr().out.split() == list(g.GPU_TESTS)


def test_shared_lanes_start_the_preflight_then_the_longest_and_one_lane_the_shortest():
    steps = [step("b", 10), step("a", 80), step("tests", 50, kind="tests"), step("preflight", 5, kind="preflight")]
    assert [s.name for s in g.start_order(steps)] == ["preflight", "a", "tests", "b"]
    assert [s.name for s in g.shortest_first(steps)] == ["preflight", "b", "tests", "a"]
    # Two lanes take the next step as soon as they are free: 5+3+3 | 4+3 ... by estimates; then one lane 9 more.
    phases = [(2, [step("x", 5), step("y", 4), step("z", 3), step("w", 3), step("v", 3)]), (1, [step("u", 9)])]
    assert g.simulate(phases, 1000) == (10 + 9, [])


def test_the_budget_goes_to_lessons_without_a_kept_run_then_the_tests_and_bench_then_the_kept_ones():
    steps = [g.fixed_step("preflight"), step("00-a", 10), step("01-b", 60, alone=True), step("02-c", 50, alone=True),
             step("03-d", 40), step("04-e", 20, kept="2026-11-30-h100-80gb-hbm3-cuda13"),
             step("05-f", 30, alone=True, kept="2026-11-30-h100-80gb-hbm3-cuda13"), g.fixed_step("tests"),
             g.fixed_step("bench")]
    roomy = g.make_plan(steps, lanes=3, budget=5000)
    assert names(roomy.phases) == [["preflight", "03-d", "00-a"], ["02-c", "01-b"], ["tests"], ["bench"], ["04-e"],
                                   ["05-f"]]
    assert [lanes for lanes, _ in roomy.phases] == [3, 1, 1, 1, 1, 1]  # the speed lessons always alone
    assert not roomy.left and "one at a time" in roomy.why and "4 lesson(s) with no kept GPU run" in roomy.why
    # 325 s: the lanes end at 50, the speed lessons at 160, the tests at 310; the bench (80) does not fit the 15 s
    # left, and neither do the kept lessons: they are left for a later run, and the plan says so.
    tight = g.make_plan(steps, lanes=3, budget=325)
    assert tight.left == ["bench", "04-e", "05-f"] and "left for a later run: bench, 04-e, 05-f" in tight.why
    assert tight.estimate == pytest.approx(310)
    # A lesson whose estimate is more than the whole budget can never run in it: the plan names it.
    assert g.make_plan(steps, lanes=1, budget=55).too_long == ["01-b"]


def test_every_lesson_has_a_gpu_estimate_with_its_solutions_and_the_h100s_nine_minutes_keep_most_of_them():
    lessons = g.lessons_in(ROOT)
    assert {p.stem for p in lessons} <= set(g.ESTIMATES_S), "a lesson without a GPU estimate"
    steps = [g.fixed_step("preflight"), *(g.lesson_step(p) for p in lessons), g.fixed_step("tests"),
             g.fixed_step("bench")]
    assert g.lane_count(79.2, 16) == 3  # the H100 80GB of the first run, 16 cores
    plan = g.make_plan(steps, 3, g.BUDGET_S)
    ran = [s for s in plan.steps() if s.kind == "lesson" and s.name not in plan.left]
    assert plan.estimate <= g.BUDGET_S and len(ran) >= 9, plan.why
    assert not plan.too_long
    # Every step has a limit; a lesson's is its estimate three times over, never below the minimum.
    for s in plan.steps():
        assert s.limit >= max(s.estimate, 1)
    alone = {p.stem for p in lessons if nbformat.read(p, as_version=4).metadata.get("gpukit", {}).get("run_alone")}
    assert {s.name for s in steps if s.alone} == alone
    # With the first window's lessons kept, a second window starts with the rest and reaches the tests.
    first = [s.name for s in ran]
    again = [g.Step(s.kind, s.name, s.estimate, s.limit, s.alone, s.path, "earlier" if s.name in first else None)
             for s in steps]
    second = g.make_plan(again, 3, g.BUDGET_S)
    assert second.phases[1][1] and all(s.name not in first for s in second.phases[1][1])
    assert not [name for name in second.left if name[:2].isdigit() and name not in first], second.why


@pytest.mark.parametrize(("gib", "cores", "lanes"), [(79.2, 16, 3), (39.4, 16, 2), (15.8, 16, 1), (79.2, 4, 1),
                                                     (140.0, 64, 3), (None, 16, 1)])
def test_lanes_follow_the_gpus_memory_and_the_cores(gib, cores, lanes):
    assert g.lane_count(gib, cores) == lanes


def test_phases_share_lanes_cut_limits_to_the_deadline_and_skip_what_cannot_start(monkeypatch):
    monkeypatch.setattr(g, "MIN_STEP_S", 1.0)
    given = {}

    def run(s, limit):
        given[s.name] = limit
        time.sleep(s.estimate)
        return g.Result(s.kind, s.name, g.OK, s.estimate)

    # Two lanes: a (1.2 s) beside b (0.6 s), then c (0.6 s) where b was; d would start at 1.2 s, with 0.9 s left.
    steps = [step("a", 1.2, limit=100), step("b", 0.6, limit=1.5), step("c", 0.6, limit=100), step("d", 0.1)]
    results = g.run_phase(steps, 2, time.monotonic() + 2.1, run)
    assert [r.name for r in results] == ["a", "b", "c", "d"]
    assert given["b"] == 1.5 and 1.5 < given["a"] <= 2.1  # its own limit, or what is left before the deadline
    assert {r.lane for r in results[:2]} == {1, 2} and g.beside(results, results[0]) == ["b", "c"]
    assert results[3].status == g.NOT_RUN and "time budget" in results[3].detail
    failing = g.run_phase([step("e", 1)], 1, time.monotonic() + 60, lambda s, limit: 1 / 0)
    assert failing[0].status == g.FAILED and "ZeroDivisionError" in failing[0].detail


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_step_past_its_limit_is_stopped_with_its_children_and_the_kernel(tmp_path):
    kernel = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a kernel runs in a session of its own
    script = "import subprocess, time; print(subprocess.Popen(['sleep', '60']).pid, flush=True); time.sleep(60)"
    started = time.monotonic()
    status, seconds = g.run_process([sys.executable, "-c", script], cwd=tmp_path, env=os.environ, limit=2,
                                    log=tmp_path / "logs" / "slow", also_stop=lambda: [kernel.pid])
    assert status is None and seconds < 10 and time.monotonic() - started < 10
    assert kernel.wait(timeout=10) == -15
    grandchild = int((tmp_path / "logs" / "slow.out").read_text())
    for _ in range(50):  # the child's own child, in its process group: gone once init has reaped it
        if not alive(grandchild):
            break
        time.sleep(0.1)
    assert not alive(grandchild)
    assert g.run_process(["true"], cwd=tmp_path, env=os.environ, limit=5, log=tmp_path / "ok")[0] == 0


def test_every_step_requires_the_gpu_and_runs_no_stand_in(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = g.step_environment(tmp_path)
    assert env["GPUKIT_REQUIRE_GPU"] == "1" and env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert env["PIP_NO_INDEX"] == "1"  # a setup cell that finds no gpukit cannot install one from the network
    assert "NUMBA_ENABLE_CUDASIM" not in env and "TRITON_INTERPRET" not in env
    assert env["PYTHONPATH"].split(os.pathsep) == [str(tmp_path), "/elsewhere"]
    assert g.SIMULATION_VARIABLES is preflight.SIMULATION_VARIABLES  # one list, the preflight's


# ------------------------------------------------------------------------------------------ reading the steps
def code(source, outputs=(), count=1, tags=()):
    cell = nbformat.v4.new_code_cell(source, execution_count=count, outputs=list(outputs))
    cell.metadata["tags"] = list(tags)
    return cell


def stream(text, name="stdout"):
    return nbformat.v4.new_output("stream", name=name, text=text)


def run_tiny_lesson(tmp_path, name: str, cells: list, limit: float):
    """``cells`` written as the lesson notebooks/<name>.ipynb under ``tmp_path``, then run as gpu-check runs a
    lesson, into ``tmp_path``/run."""
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "notebooks" / f"{name}.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    ctx = g.Context(ROOT, tmp_path / "run", sys.executable, g.step_environment(ROOT))
    return g.run_lesson_step(g.lesson_step(path), limit, ctx)


def test_a_lessons_errors_stderr_and_checked_outputs_are_read_by_cell_index():
    stored = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# A lesson"),
        code("work()"),
        code("print(chain)", [stream("main\n  step\n    aten::mm\n")], tags=["keep_output", "nbval-check-output"]),
        code("timing()", [stream("median 3.2 ms\n")], tags=["keep_output", "nbval-check-output"]),
        code("skip_unless(gpu_ready, no_gpu)"),
        code("noted()", [stream("stored text\n")]),  # not checked: its text may change
        code("later()", count=None),
        code("never()", count=None, tags=["skip-execution"]),
    ])
    executed = nbformat.from_dict(json.loads(json.dumps(stored)))
    executed.cells[1].outputs = [stream("a\n"), stream("progress  10%\rprogress 100%\n", "stderr"),
                                 stream("\x1b[31mUserWarning: slow\x1b[0m\n", "stderr")]
    executed.cells[2].outputs = [stream("main\n  step\n")]  # the shorter chain a GPU printed (14, cell 26)
    executed.cells[3].outputs = [stream("median 0.41 ms\n")]  # a duration: sanitized, so equal
    executed.cells[4].outputs = [nbformat.v4.new_output("error", ename="NameError",
                                                        evalue="name 'no_gpu' is not defined", traceback=[])]
    executed.cells[5].outputs = [stream("other text\n")]
    outcome = g.lesson_outcome(stored, executed, g.sanitize_patterns(ROOT / "tests" / "support" / "nbval_sanitize.cfg"))
    assert outcome["errors"] == [(4, "NameError: name 'no_gpu' is not defined")]
    assert outcome["stderr"] == [(1, "progress 100%"), (1, "UserWarning: slow")]
    assert [index for index, _ in outcome["mismatches"]] == [2]
    assert "differs at line 3: stored '    aten::mm'" in outcome["mismatches"][0][1]
    assert outcome["not_run"] == [6]


@pytest.mark.parametrize(("stored", "ran", "differs"), [
    ([stream("x = 1\n")], [stream("x = "), stream("1\n")], False),  # a stream in pieces is one stream
    ([stream("took 12 ms\n")], [stream("took 0.8 s\n")], False),
    ([stream("x = 1\n")], [stream("x = 1\n"), stream("warning\n", "stderr")], True),  # new stderr in a checked cell
    ([stream("x = 1\n")], [stream("x = 2\n")], True),
    ([nbformat.v4.new_output("execute_result", data={"text/plain": "3"}, execution_count=1)],
     [nbformat.v4.new_output("execute_result", data={"text/plain": "3", "image/png": "AAAA"}, execution_count=9)],
     False),  # nbval compares neither images nor execution counts
])
def test_checked_outputs_compare_as_nbval_does(stored, ran, differs):
    patterns = g.sanitize_patterns(ROOT / "tests" / "support" / "nbval_sanitize.cfg")
    assert (g.output_difference(stored, ran, patterns) is not None) == differs


def test_preflight_lines_are_read_back_as_the_preflight_prints_them():
    results = [preflight.Result("driver", preflight.OK, "NVIDIA driver 580.159.04 runs CUDA 13"),
               preflight.Result("Numba CUDA", preflight.FAIL, "AttributeError: module 'numpy' has no attribute "
                                "'row_stack'", "install the pinned NumPy: python -m pip install numpy==2.4.6"),
               preflight.Result("C++/CUDA extension", preflight.SKIP, "skipped: no nvcc")]
    width = max(len(r.name) for r in results)
    output = "GPU preflight (NVIDIA GPU(s): H100); ...\n" + "\n".join(r.line(width) for r in results) + "\nFAILED: 1\n"
    items = g.preflight_checks(output)
    assert [(i.name, i.status) for i in items] == [("driver", "ok"), ("Numba CUDA", "FAIL"),
                                                   ("C++/CUDA extension", "skip")]
    assert items[1].detail.endswith("-> fix: install the pinned NumPy: python -m pip install numpy==2.4.6")


def stand_in_python(tmp_path, body: str) -> str:
    """A 'python' that runs a shell script instead: what each step's command gets to work with."""
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_the_preflight_and_bench_steps_read_their_commands_output(tmp_path):
    lines = [preflight.Result("driver", preflight.OK, "NVIDIA driver 580.159.04 runs CUDA 13").line(12),
             preflight.Result("Numba CUDA", preflight.FAIL, "AttributeError: row_stack", "pin NumPy").line(12)]
    python = stand_in_python(tmp_path, "echo 'GPU preflight (NVIDIA GPU(s): H100)'\n" + "".join(
        f"echo '{line}'\n" for line in lines) + "echo 'FAILED: 1 of 2 checks failed'\necho 'a warning' >&2\nexit 1\n")
    ctx = g.Context(ROOT, tmp_path / "run", python, dict(os.environ))
    result = g.run_preflight_step(g.fixed_step("preflight"), 30, ctx)
    assert result.status == g.FAILED and result.detail == "FAILED: 1 of 2 checks failed"
    assert [(i.name, i.status) for i in result.items] == [("driver", "ok"), ("Numba CUDA", "FAIL")]
    assert result.stderr == [(None, "a warning")]
    # The bench: $5 is --folder's value; a file written there is the step's result.
    ctx.python = stand_in_python(tmp_path, 'mkdir -p "$5" && echo "{}" > "$5/linux-h100-2026-11-27.json" && '
                                           'echo "cuda:0 matmul float32 51.5 TFLOP/s"\n')
    bench = g.run_bench_step(g.fixed_step("bench"), 30, ctx)
    assert bench.ok and bench.files == ["bench/linux-h100-2026-11-27.json"]
    assert [i.name for i in bench.items] == ["cuda:0 matmul float32 51.5 TFLOP/s"]
    ctx.python = stand_in_python(tmp_path, "echo 'RuntimeError: CUDA error: out of memory' >&2\nexit 1\n")
    failed = g.run_bench_step(g.fixed_step("bench"), 30, ctx)
    assert failed.status == g.FAILED and failed.detail == "exit status 1: RuntimeError: CUDA error: out of memory"


def test_each_test_is_read_from_pytests_junit_file(tmp_path):
    junit = tmp_path / "tests.xml"
    junit.write_text(textwrap.dedent("""\
        <testsuites><testsuite name="pytest">
        <testcase classname="tests.unit.core.test_gpu_only" name="test_a_gpu_is_here" time="0.01"/>
        <testcase classname="tests.unit.commands.test_preflight" name="test_jax_script_on_the_cpu" time="2.5">
          <failure message="AssertionError: ran on cuda:0">trace</failure></testcase>
        <testcase classname="tests.unit.core.test_gpu_only" name="test_mps" time="0">
          <skipped message="needs MPS"/></testcase>
        <testcase classname="tests.unit.core.test_memory.TestChunks" name="test_c" time="0"/>
        </testsuite></testsuites>"""))
    items = g.test_items(junit)
    assert [(i.name, i.status) for i in items] == [
        ("tests/unit/core/test_gpu_only.py::test_a_gpu_is_here", "passed"),
        ("tests/unit/commands/test_preflight.py::test_jax_script_on_the_cpu", "failed"),
        ("tests/unit/core/test_gpu_only.py::test_mps", "skipped"),
        ("tests/unit/core/test_memory.py::TestChunks::test_c", "passed")]
    assert items[1].detail == "AssertionError: ran on cuda:0" and items[1].seconds == 2.5
    assert g.test_items(tmp_path / "missing.xml") == []
    command = g.tests_command("python", ["tests/unit/core/test_memory.py"], junit, timeout_plugin=True)
    assert command[-1] == "tests/unit/core/test_memory.py" and f"--timeout={g.TEST_LIMIT_S}" in command
    assert "addopts=" in command  # the project's -n auto and nbval options need plugins a node may lack


def test_a_lesson_runs_cell_by_cell_and_stops_at_its_limit(tmp_path, monkeypatch):
    """A real kernel: an error and stderr are kept with their cells, a checked output that differs fails the lesson,
    and a cell still running at the lesson's limit is interrupted, the cells after it not run."""
    # The lesson stops itself after 20 s and has 10 s to shut down. The kernel's start counts against the 20 s: on a
    # loaded runner it took over 6 s, and a 7 s limit then came before the sleeping cell, which was never interrupted;
    # on a machine loaded five times over, the interrupt and the kernel's shutdown took more than 4 s of grace.
    monkeypatch.setattr(g, "GRACE_S", 10.0)
    started = time.monotonic()
    result = run_tiny_lesson(tmp_path, "90-tiny", [
        nbformat.v4.new_markdown_cell("# Tiny"),
        code("import sys\nprint('to stdout'); print('to stderr', file=sys.stderr)", count=None),
        code("raise ValueError('no such size')", count=None),
        code("print(6 * 7)", [stream("41\n")], count=1, tags=["keep_output", "nbval-check-output"]),
        code("import time\ntime.sleep(60)", count=None),
        code("print('after')", count=None),
    ], 30)
    assert time.monotonic() - started < 45
    assert result.status == g.TIMED_OUT, result
    assert result.errors[0] == (2, "ValueError: no such size")
    assert [index for index, error in result.errors if error.startswith("KeyboardInterrupt")] == [4], result.detail
    assert (1, "to stderr") in result.stderr
    assert result.mismatches and result.mismatches[0][0] == 3 and "'41'" in result.mismatches[0][1]
    executed = nbformat.read(tmp_path / "run" / "notebooks" / "90-tiny.ipynb", as_version=4)
    stdout = "".join(out.get("text", "") for out in executed.cells[1].outputs if out.get("name") == "stdout")
    assert stdout == "to stdout\n" and executed.cells[5].execution_count is None  # a print may come in two messages
    assert "interrupted" in result.detail and "cell 4" in result.detail


def test_a_lesson_runs_as_tested_its_solutions_proven_on_the_device_and_is_kept_as_the_lesson(tmp_path):
    """Each solution runs after its exercise, as nbval runs it, and must pass its check there: on the GPU runner this
    one run of the lesson is what proves the solutions on a GPU. The notebook kept for pages is the lesson itself."""
    (tmp_path / "tests" / "support").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "support" / "lesson_solutions.py", tmp_path / "tests" / "support")
    solution = ("````{solution} ex-tiny\n:class: dropdown\n\n```python\n"
                "print('a solution that checks nothing')\n```\n````")
    cells = [
        nbformat.v4.new_markdown_cell("# Tiny"),
        code("answer = None", count=None),
        nbformat.v4.new_markdown_cell(solution),
        code("hidden = 1", count=None, tags=["remove-cell"]),
        code("print('last')", count=None),
    ]
    for index, cell in enumerate(cells):
        cell["id"] = str(index)
    result = run_tiny_lesson(tmp_path, "91-tiny", cells, 60)
    assert result.status == g.FAILED
    ((index, error),) = result.errors
    assert index == 3 and "the solution of ex-tiny neither called check('ex-tiny', ...) nor skipped" in error
    as_tested = nbformat.read(tmp_path / "run" / "runs" / "91-tiny.ipynb", as_version=4)
    assert [cell.get("id") for cell in as_tested.cells] == ["0", "1", "2", "solution-ex-tiny", "3", "4"]
    lesson = nbformat.read(tmp_path / "run" / "notebooks" / "91-tiny.ipynb", as_version=4)
    assert [cell.source for cell in lesson.cells] == [cell.source for cell in cells]  # the hidden cell's own code
    # The kernel may send "last" and its newline as two stream messages, kept as two outputs: read them together.
    printed = "".join(out.get("text", "") for out in lesson.cells[4].outputs if out["output_type"] == "stream")
    assert printed == "last\n" and lesson.cells[3].execution_count is not None
    assert sorted(result.files) == ["notebooks/91-tiny.ipynb", "runs/91-tiny.ipynb"]


# ------------------------------------------------------------------------------------------ the report
def fabricated_run(**changes) -> g.Run:
    facts = {"device": "cuda:0 (NVIDIA H100 80GB HBM3, 79.18 GiB)", "python": "3.12.3", "executable": "/opt/py",
             "system": "Linux x86_64", "cores": 16, "nvidia_smi": ["NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04"],
             "driver": "580.159.04", "torch_cuda": "13.0", "nvcc": "13.0 (/usr/local/cuda/bin/nvcc)",
             "commit": "ba075f4ff845", "versions": {"numpy": "2.5.2", "torch": "2.11.0+cu130"}, "usable_gpu": True,
             "drift": [{"line": "numpy: 2.5.2 installed, the book's lock pins 2.4.6: can break lesson(s) 01, 09"}]}
    results = [
        g.Result("preflight", "preflight", g.FAILED, 44.0, "FAILED: 1 of 9 checks failed",
                 items=[g.Item("torch matmul", "ok", "50.09 TFLOP/s"),
                        g.Item("Numba CUDA", "FAIL", "AttributeError: np.row_stack -> fix: the pinned NumPy")],
                 lane=1, started=0, ended=44),
        g.Result("lesson", "03-cupy", g.FAILED, 12.5, "11 cell error(s), first in cell 9",
                 errors=[(9, "NameError: name 'no_gpu' is not defined"), (15, "NameError: name 'cupy_mm' is not "
                                                                              "defined")],
                 stderr=[(56, "Traceback (most recent call last):"), (None, "[IPKernelApp] WARNING | a ``` fence")],
                 lane=2, started=1, ended=14),
        g.Result("lesson", "14-profiling", g.FAILED, 23.2, "1 checked output(s) differ",
                 mismatches=[(26, "stdout differs at line 3")], lane=3, started=2, ended=25),
        g.Result("lesson", "00-environment-check", g.OK, 11.7, lane=2, started=15, ended=27),
        g.Result("tests", "tests", g.FAILED, 120.0, "159 passed, 1 failed",
                 items=[g.Item("tests/unit/core/test_memory.py::test_nbytes", "passed", "", 0.1),
                        g.Item("tests/unit/commands/test_preflight.py::test_jax_script_refuses_the_cpu", "failed",
                               "ran on cuda | 0", 2.0)], lane=1, started=44, ended=164),
        g.Result("bench", "bench", g.OK, 40.0, "wrote bench/x.json", items=[g.Item("cuda:0 matmul 51 TFLOP/s", "")],
                 files=["bench/x.json"], lane=1, started=170, ended=210),
    ]
    plan = g.Plan(3, [], 336.0, "3 lesson(s) with no kept GPU run of their current code first, then the rest")
    return g.Run(**{"facts": facts, "plan": plan, "results": results, "budget": 480.0, "seconds": 215.0, **changes})


def test_the_report_says_every_failure_with_its_cell_check_and_test():
    text = g.report_markdown(fabricated_run())
    first = text.splitlines()[0]
    assert first.startswith("# gpu-check FAILED on cuda:0 (NVIDIA H100") and "4 step(s) failed" in first
    assert "preflight (FAILED)" in first and "03-cupy (FAILED)" in first
    assert "- cell 9: NameError: name 'no_gpu' is not defined" in text
    assert "- cell 15: NameError: name 'cupy_mm' is not defined" in text
    assert "[cell 56] Traceback (most recent call last):" in text and "[kernel] [IPKernelApp] WARNING" in text
    assert "````text" in text  # a fence longer than the ``` inside a stderr line
    assert "- cell 26, checked output: stdout differs at line 3" in text
    assert "| Numba CUDA | FAIL | AttributeError: np.row_stack -> fix: the pinned NumPy |" in text
    assert ("| tests/unit/commands/test_preflight.py::test_jax_script_refuses_the_cpu | failed | 2.00 | ran on cuda "
            "\\| 0 |") in text
    assert text.index("test_jax_script_refuses_the_cpu") < text.index("test_nbytes")  # failures first
    assert "⚠️ numpy: 2.5.2 installed, the book's lock pins 2.4.6" in text
    assert "580.159.04" in text and "ba075f4ff845" in text and "torch built for 13.0" in text
    assert "| 03-cupy | ❌ FAILED | 12.5 | 2 | preflight, 14-profiling | 11 cell error(s), first in cell 9 |" in text
    assert "| 03-cupy | ❌ FAILED | 12.5 | 2 | 0 | 2 |" in text  # the lessons' table: errors, outputs, stderr
    assert "cuda:0 matmul 51 TFLOP/s" in text and "no kept GPU run of their current code first" in text


def test_a_run_passes_only_when_every_step_passed():
    run = fabricated_run()
    for r in run.results:
        r.status = g.OK
    assert run.passed and run.verdict().startswith("# gpu-check passed on cuda:0") and "3 lessons" in run.verdict()
    run.results.append(g.not_run(g.fixed_step("bench"), "not started: 3 s of the time budget were left"))
    assert not run.passed and run.verdict().startswith("# gpu-check incomplete on cuda:0")
    assert "1 left for the next run (the budget ran out)" in run.verdict()
    assert run.summary()[-1].startswith("Left for the next run: bench: the budget ran out")
    assert "## Not run" in g.report_markdown(run)
    run.results[0].status = g.TIMED_OUT
    assert run.verdict().startswith("# gpu-check FAILED on cuda:0") and "1 step(s) failed: preflight (timed out)" in (
        run.verdict()) and run.verdict().endswith("1 left for the next run (the budget ran out)")
    record = json.loads(json.dumps(g.run_record(run)))
    assert record["passed"] is False and record["results"][1]["errors"][0] == [9, "NameError: name 'no_gpu' is not "
                                                                                 "defined"]


def test_the_reason_for_no_gpu_is_the_preflights_own():
    skipped = g.Result("preflight", "preflight", g.FAILED, items=[
        g.Item(name, "skip", "skipped: no GPU here (nvidia-smi lists none; torch 2.13.0+cpu is not a CUDA build)")
        for name in ("driver", "torch matmul")])
    facts = {"why_not": "GPUKIT_REQUIRE_GPU is set but no GPU is usable (available: cpu)."}
    assert g.no_gpu_reason(facts, skipped) == ("no usable GPU here (nvidia-smi lists none; torch 2.13.0+cpu is not a "
                                               "CUDA build), so nothing ran on a GPU")
    failed = g.Result("preflight", "preflight", g.FAILED, items=[
        g.Item("driver", "ok", "580"), g.Item("torch matmul", "FAIL", "torch sees no GPU -> fix: reinstall")])
    assert "torch matmul check failed: torch sees no GPU" in g.no_gpu_reason(facts, failed)
    assert "available: cpu" in g.no_gpu_reason(facts, g.Result("preflight", "preflight", g.TIMED_OUT))


def test_the_environment_of_a_gpu_node_gives_its_memory_and_name(monkeypatch):
    """The CUDA branch of the probe, with torch's device queries faked (this machine may have no GPU)."""
    torch = pytest.importorskip("torch")
    from gpukit.core import device

    monkeypatch.setenv("GPUKIT_REQUIRE_GPU", "0")
    monkeypatch.setattr(device, "pick_device", lambda: "cuda:0")
    monkeypatch.setattr(device, "describe_device", lambda d: "cuda:0 (NVIDIA H100 80GB HBM3, 79.18 GiB)")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace(
        name="NVIDIA H100 80GB HBM3", total_memory=85_020_000_256, major=9, minor=0))
    jax = pytest.importorskip("jax")
    monkeypatch.setattr(jax, "devices", lambda: ["cuda:0"])
    facts = g.environment_facts()
    assert facts["usable_gpu"] and facts["compute_capability"] == "9.0" and facts["jax_devices"] == ["cuda:0"]
    assert g.lane_count(facts["gpu_memory_gib"], 16) == 3
    assert g.device_slug(facts) == "h100-80gb-hbm3" and "drift" in facts
    assert os.environ["GPUKIT_REQUIRE_GPU"] == "0"  # set to 1 while the device was chosen, then as it was


def test_gpu_check_imports_and_probes_a_python_without_torch():
    """gpu-check runs on a node's own Python, which may have no torch: importing it imports no GPU library (its
    gpukit imports sit at the top of the file), and the environment probe says in one line that torch is missing."""
    script = ("import json, sys\nimport booktools.gpu_check as g\n"
              "loaded = sorted(m for m in ('torch', 'jax', 'cupy') if m in sys.modules)\n"
              "facts = g.environment_facts()\n"
              "print('FACTS ' + json.dumps({'loaded': loaded, 'torch_error': facts.get('torch_error'), "
              "'usable_gpu': facts['usable_gpu']}))\n")
    env = {**os.environ, **forcing_env(hide=("torch", "jax"))}
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    lines = [line for line in run.stdout.splitlines() if line.startswith("FACTS ")]
    assert run.returncode == 0 and lines, run.stderr
    found = json.loads(lines[-1][len("FACTS "):])
    assert found == {"loaded": [], "torch_error": "ModuleNotFoundError: No module named 'torch'", "usable_gpu": False}


class _BrokenTorch:
    """A meta path finder under which ``import torch`` fails as a torch whose CUDA libraries are missing does: a
    message of several lines."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("libcudnn.so.9: cannot open shared object file: No such file or directory\n"
                              "\nThe above exception was the direct cause of a long story the report cannot hold")
        return None


def test_a_torch_that_cannot_import_is_one_line_of_the_environment(monkeypatch):
    for name in [name for name in sys.modules if name == "torch" or name.startswith("torch.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_BrokenTorch(), *sys.meta_path])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    facts = g.environment_facts()
    assert facts["torch_error"] == "ImportError: libcudnn.so.9: cannot open shared object file: No such file or " \
                                   "directory"
    assert not facts["usable_gpu"]


def test_each_run_gets_a_folder_of_its_own(tmp_path):
    facts = {"usable_gpu": True, "gpu_name": "NVIDIA A100-SXM4-40GB"}
    when = time.strptime("2026-11-27", "%Y-%m-%d")
    first = g.run_folder(tmp_path, facts, when)
    assert first.name == "2026-11-27-a100-sxm4-40gb"
    first.mkdir()
    assert g.run_folder(tmp_path, facts, when).name == "2026-11-27-a100-sxm4-40gb-2"
    assert g.run_folder(tmp_path, {"usable_gpu": False}, when).name == "2026-11-27-no-gpu"


def test_progress_is_a_line_per_step_and_no_bar_in_a_log_file(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    progress = g.Progress(2)
    progress.done(g.Result("lesson", "03-cupy", g.FAILED, 12.5, "11 cell error(s), first in cell 9", lane=2))
    progress.close()
    assert out.getvalue() == ("[ 1/2] FAILED    03-cupy                    12.5 s  (lane 2)  11 cell error(s), "
                              "first in cell 9\n")


# ------------------------------------------------------------------------------------------ the real command
@pytest.mark.skipif(sys.platform == "darwin", reason="an Apple GPU cannot be hidden from a child process")
def test_without_a_gpu_the_command_stops_at_once_and_says_why_first(tmp_path):
    """The real command, its GPU hidden whatever this machine has: no device for torch (CUDA_VISIBLE_DEVICES
    empty), an nvidia-smi that finds none, as on a node whose job asked for no GPU, and the lessons' device choice
    held to the CPU (GPUKIT_DEVICE=cpu), which a torch.cuda faked to report a device cannot change."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'No devices were found'\nexit 6\n")
    smi.chmod(0o755)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT), "GPUKIT_DEVICE": "cpu"}
    out = tmp_path / "run"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "booktools", "gpu-check", "--lessons", "11", "--tests",
                           "tests/unit/core/test_memory.py", "--no-bench", "--out", str(out), "--save-run",
                           str(tmp_path / "gpu-runs")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 1, done.stdout + done.stderr
    assert time.monotonic() - started < 90
    report = (out / "report.md").read_text(encoding="utf-8").splitlines()
    assert report[0].startswith("# gpu-check FAILED: no usable GPU here ("), report[0]
    assert report[0].endswith("so nothing ran on a GPU") and len(report[0]) < 200
    assert not (out / "notebooks").exists() and not (out / "tests.xml").exists() and not (out / "bench").exists()
    record = json.loads((out / "gpu-check.json").read_text())
    assert [r["name"] for r in record["results"]] == ["preflight"] and not record["passed"]
    assert json.loads((out / "environment.json").read_text())["usable_gpu"] is False
    assert report[0].removeprefix("# ") in done.stdout  # the terminal gets the same line
    assert "No GPU run kept: nothing ran on a GPU." in report and not (tmp_path / "gpu-runs").exists()


def test_on_a_gpu_node_the_command_runs_every_step_in_its_phase_and_writes_the_folder(tmp_path, monkeypatch):
    """The command's own course where the probe finds a GPU (faked: the probe and each kind of step are stand-ins
    that record what they were given)."""
    facts = {"usable_gpu": True, "device": "cuda:0 (NVIDIA H100 80GB HBM3, 79.18 GiB)", "cores": 16, "drift": [],
             "gpu_name": "NVIDIA H100 80GB HBM3", "gpu_memory_gib": 79.18, "commit": "abc"}
    monkeypatch.setattr(g, "probe_environment", lambda ctx, limit: dict(facts))
    ran = []

    def stand_in(status=g.OK):
        def run(step, limit, ctx, *tests):
            ran.append((step.name, threading.current_thread().name, limit))
            assert ctx.env["GPUKIT_REQUIRE_GPU"] == "1" and ctx.env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
            assert not tests or list(tests[0]) == list(g.GPU_TESTS)
            return g.Result(step.kind, step.name, status, 1.0)
        return run

    monkeypatch.setattr(g, "run_preflight_step", stand_in())
    monkeypatch.setattr(g, "run_lesson_step", stand_in())
    monkeypatch.setattr(g, "run_tests_step", stand_in())
    monkeypatch.setattr(g, "run_bench_step", stand_in(g.FAILED))
    from booktools.__main__ import main

    status = main(["gpu-check", "--lessons", "01", "11", "--out", str(tmp_path / "run"), "--budget", "2000"])
    assert status == 1  # the bench failed
    assert [name for name, _, _ in ran][:1] == ["preflight"] and [name for name, _, _ in ran][-1] == "bench"
    assert {name for name, _, _ in ran} == {"preflight", "01-cpu-vs-gpu", "11-slurm", "tests", "bench"}
    # 01 publishes speed measurements: with this budget it runs after the lanes, alone.
    assert [name for name, _, _ in ran].index("01-cpu-vs-gpu") > [name for name, _, _ in ran].index("11-slurm")
    record = json.loads((tmp_path / "run" / "gpu-check.json").read_text())
    assert record["plan"]["lanes"] == 3 and [len(p) for _, p in record["plan"]["phases"]] == [2, 1, 1, 1] and (
        not record["passed"])
    assert (tmp_path / "run" / "report.md").read_text().startswith("# gpu-check FAILED on cuda:0 (NVIDIA H100")
    assert json.loads((tmp_path / "run" / "environment.json").read_text())["gpu_name"] == "NVIDIA H100 80GB HBM3"
    # A second run into the same folder replaces the first; a folder that is not a run's is refused.
    assert main(["gpu-check", "--lessons", "11", "--no-tests", "--no-bench", "--out", str(tmp_path / "run")]) == 0
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("keep me")
    with pytest.raises(SystemExit, match="not empty"):
        main(["gpu-check", "--lessons", "11", "--out", str(tmp_path / "mine")])
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "keep me"


def test_the_bench_step_gives_the_search_a_budget_its_time_limit_holds(tmp_path):
    """The bench's achievable search (five precisions on the GPU and on the CPU) gets BENCH_SEARCH_S per precision
    in gpu-check, which with the size sweep's H100 time fits the step's limit; a search at its own default budgets
    (20 s and 30 s per precision) would not."""
    from booktools.bench import search_for
    from gpukit.core.peaks import MATMUL_PRECISIONS

    sweep_s = 45.0  # the H100 node's bench before the search (ESTIMATES_S's comment)
    searches = 2 * len(MATMUL_PRECISIONS)
    assert sweep_s + searches * g.BENCH_SEARCH_S <= g.LIMITS_S["bench"]
    assert sweep_s + len(MATMUL_PRECISIONS) * (search_for("cuda:0").budget_s + search_for("cpu").budget_s) > \
        g.LIMITS_S["bench"]
    assert search_for("cuda:0", seconds=g.BENCH_SEARCH_S).budget_s == g.BENCH_SEARCH_S
    # The step passes the budget on the command line: the stand-in prints its arguments.
    python = stand_in_python(tmp_path, 'mkdir -p "$5" && echo "{}" > "$5/x.json" && echo "args: $*"\n')
    ctx = g.Context(ROOT, tmp_path / "run", python, dict(os.environ))
    bench = g.run_bench_step(g.fixed_step("bench"), 30, ctx)
    assert bench.ok and f"--search-seconds {g.BENCH_SEARCH_S:g}" in bench.items[0].name


def test_a_nine_minute_window_on_the_simulated_node_keeps_each_lesson_as_it_passes_and_the_next_continues(
        tmp_path, monkeypatch):
    """The whole command with the budget and every estimate scaled down 100 times (540 s -> 5.4 s): the real
    environment probe on the simulated H100 node, stand-ins for the steps that take their step's scaled estimate
    and write the lesson as run. Each lesson is in the kept run's manifest before the next starts; a lesson that
    fails is left out with why; the report's first lines say what was kept, what failed and what is left; and a
    second window starts with what the first left."""
    from booktools.__main__ import main
    from tests.support.gpu_node import gpu_node_env

    scale = 100
    monkeypatch.setattr(g, "ESTIMATES_S", {k: v / scale for k, v in g.ESTIMATES_S.items()})
    monkeypatch.setattr(g, "MIN_STEP_S", g.MIN_STEP_S / scale)
    for name, value in gpu_node_env().items():
        monkeypatch.setenv(name, value)
    # The node's real probe (a child Python that imports torch: seconds, not scaled), made before the clock starts.
    probe = tmp_path / "probe"
    facts = g.probe_environment(g.Context(ROOT, probe, sys.executable, g.step_environment(ROOT)), 90)
    assert facts["gpu_name"] == "NVIDIA H100 80GB HBM3" and facts["usable_gpu"], facts
    monkeypatch.setattr(g, "probe_environment", lambda ctx, limit: dict(facts))
    runs = tmp_path / "gpu-runs"
    started, seen = [], {}

    def lesson(step, limit, ctx):
        started.append(step.name)
        manifest = runs.glob("*/manifest.json")
        seen[step.name] = {n for f in manifest for n in json.loads(f.read_text())["lessons"]}
        time.sleep(step.estimate)
        notebook = nbformat.read(step.path, as_version=4)
        (ctx.folder / "notebooks").mkdir(exist_ok=True)
        nbformat.write(notebook, ctx.folder / "notebooks" / f"{step.name}.ipynb")
        status = g.FAILED if step.name.startswith("09") else g.OK
        return g.Result("lesson", step.name, status, step.estimate, "1 cell error(s), first in cell 17"
                        if status == g.FAILED else "")

    def other(step, limit, ctx, *tests):
        started.append(step.name)
        time.sleep(step.estimate)
        return g.Result(step.kind, step.name, g.OK, step.estimate)

    for runner in ("run_preflight_step", "run_tests_step", "run_bench_step"):
        monkeypatch.setattr(g, runner, other)
    monkeypatch.setattr(g, "run_lesson_step", lesson)
    budget = str(g.BUDGET_S / scale)
    status = main(["gpu-check", "--out", str(tmp_path / "first"), "--budget", budget, "--save-run", str(runs)])
    record = json.loads((tmp_path / "first" / "gpu-check.json").read_text())
    plan = [s["name"] for _, phase in record["plan"]["phases"] for s in phase]
    ran = [r["name"] for r in record["results"] if r["status"] != g.NOT_RUN]
    left = [r["name"] for r in record["results"] if r["status"] == g.NOT_RUN]
    assert status == 1 and left and "tests" in left and "bench" in left  # the lessons come first
    (folder,) = runs.iterdir()
    manifest = json.loads((folder / "manifest.json").read_text())
    kept = [name for name in ran if name in manifest["lessons"]]
    lessons_ran = [name for name in ran if name[:2].isdigit()]
    assert kept == [name for name in lessons_ran if not name.startswith("09")] and len(kept) >= 8
    assert manifest["left_out"]["09-writing-kernels"].startswith("FAILED: 1 cell error(s)")
    # Kept as each passed: every lesson started with all the lessons ended before it already in the manifest.
    assert all(seen[name] == set(kept[:kept.index(name)]) for name in kept)
    assert all(not entry["shared_gpu_with"] for name, entry in manifest["lessons"].items()
               if nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4).metadata["gpukit"].get(
                   "run_alone"))
    report = (tmp_path / "first" / "report.md").read_text().splitlines()
    assert report[0].startswith("# gpu-check FAILED on cuda:0 (NVIDIA H100 80GB HBM3") and "left for the next" in (
        report[0])
    assert report[2].startswith(f"Kept {len(kept)} lesson(s) as a GPU run in {folder}")
    assert report[3].startswith("Failed: 09-writing-kernels (FAILED: 1 cell error(s)")
    assert report[4].startswith(f"Left for the next run: {', '.join(left)}")
    assert plan.index(left[-1]) >= plan.index("bench")

    # The next window: the lessons with a kept run of their current code go last, so it starts where this stopped.
    started.clear()
    main(["gpu-check", "--out", str(tmp_path / "second"), "--budget", budget, "--save-run", str(runs)])
    second = [name for name in started if name[:2].isdigit()]
    todo = {name for name in plan if name[:2].isdigit()} - set(kept)  # the failed lesson and those left
    assert "09-writing-kernels" in todo and set(second[:len(todo & set(second))]) == todo & set(second) != set()
    assert all(started.index(name) < started.index(later) for name in todo & set(started)
               for later in ["tests", "bench", *kept] if later in started)


def test_a_lesson_that_passed_but_cannot_be_kept_is_left_out_with_why_and_the_run_goes_on(tmp_path):
    facts = {"usable_gpu": True, "gpu_name": "NVIDIA H100 80GB HBM3", "torch_cuda": "13.0", "device": "cuda:0"}
    keeper = g.Keeper(tmp_path / "runs", ROOT, facts, tmp_path / "check")
    keeper.consider(g.Result("lesson", "11-slurm", g.OK, 9.0))  # its notebook was never written
    (tmp_path / "check" / "notebooks").mkdir(parents=True)
    shutil.copyfile(ROOT / "notebooks" / "00-environment-check.ipynb",
                    tmp_path / "check" / "notebooks" / "00-environment-check.ipynb")
    keeper.consider(g.Result("lesson", "00-environment-check", g.OK, 12.0), ["11-slurm"])
    saved = keeper.finish(g.Run(facts, None, [], 540))
    assert saved["lessons"] == ["00-environment-check"]
    assert saved["left_out"]["11-slurm"].startswith("passed, but could not be kept: FileNotFoundError")
    manifest = json.loads((tmp_path / "runs" / Path(saved["folder"]).name / "manifest.json").read_text())
    assert manifest["lessons"]["00-environment-check"]["shared_gpu_with"] == ["11-slurm"]
