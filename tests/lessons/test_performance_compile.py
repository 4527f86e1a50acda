"""Lesson 16's torch.compile cells: the logs that TORCH_LOGS routes to a child's stderr and the cell prints, the
compilations counted with a backend of the lesson's own, and the exercise's two solutions (the page shows
``dynamic=True`` and ``mark_dynamic``) against its check."""

from __future__ import annotations

import os
import re
import subprocess

import torch

from gpukit.exercises import check
from tests.support.lesson_code import code_cell, markdown, run_cell, run_cells

LESSON = "16-performance-engineering.ipynb"


def cell(contains):
    return code_cell(LESSON, contains)


def solution_blocks(label):
    """The ```python blocks of the solution of ``label``, as the page shows them."""
    text = markdown(LESSON)
    start = text.index("````{solution} " + label)
    body = text[start:text.index("\n````", start + 10)]
    return re.findall(r"```python\n(.*?)\n```", body, re.DOTALL)


def with_run_tool(limit: float | None = None) -> dict:
    """The names the TORCH_LOGS cell takes from the cells before it: os, and run_tool from the cell that builds the
    CUDA program (its definitions only); with ``limit``, a run_tool that gives the child that many seconds, whatever the
    cell asks (the seconds asked are kept in the namespace's ``asked``)."""
    source = code_cell(LESSON, 'SOURCE = r"""')
    namespace = {"os": os, "subprocess": subprocess}
    run_cell(source.split("\nprogram = None\n")[0], namespace)
    if limit is not None:
        run_tool, namespace["asked"] = namespace["run_tool"], []

        def limited(command, seconds, **options):
            namespace["asked"].append(seconds)
            return run_tool(command, limit, **options)

        namespace["run_tool"] = limited
    return namespace


def test_torch_logs_show_each_recompilation_with_its_guard_and_the_graph_break():
    namespace = with_run_tool()
    printed = run_cell(cell('SCRIPT = """'), namespace)
    lines = printed.splitlines()
    assert sum(line.startswith("Recompiling function scaled") for line in lines) == 2  # 3 sizes, dynamic=False
    assert "- 0/0: tensor 'x' size mismatch at index 0. expected 8, actual 16" in lines
    assert any(line.startswith("Graph break in user code") for line in lines)
    assert any(line.startswith("Explanation:") and "`print`" in line for line in lines)
    assert all(len(line) <= 100 for line in lines)


def test_a_child_that_does_not_finish_is_stopped_and_the_cell_says_so():
    namespace = with_run_tool(limit=0.01)  # stopped before it has imported torch
    printed = run_cell(cell('SCRIPT = """'), namespace)
    assert namespace["asked"] == [120]  # about 5 s on an H100 node, 10 on this book's 2-core machine
    assert printed.splitlines() == [f"{os.path.basename(namespace['sys'].executable)} did not finish within 0.01 s: "
                                    "stopped"]


def test_explain_counts_the_graphs_and_the_break_without_writing_to_stderr(tmp_path):
    # In a child Python, as a kernel runs it: under pytest, dynamo's warning for a break at .item() (which the
    # cell avoids) does not reach stderr, in a kernel it does, and the book build fails on a cell's stderr.
    done = run_cells(["import torch", cell("explanation = torch._dynamo.explain(noisy)")], tmp_path)
    assert done.returncode == 0, done.failed()
    assert done.stderr == ""
    assert done.outputs[1].splitlines()[1:] == ["2 graphs, 1 break:", "- Failed to trace builtin operator"]


def test_the_counting_backend_counts_what_the_prose_says():
    namespace = {"torch": torch}
    printed = run_cell(cell("def counting_backend(graph, example_inputs)"), namespace)
    assert printed.splitlines() == ["dynamic=False: 4 compilations, 4 batch sizes",
                                    "dynamic=None : 2 compilations, 4 batch sizes",
                                    "dynamic=True : 1 compilations, 4 batch sizes"]


def test_both_solutions_of_the_recompilation_exercise_pass_and_the_stub_does_not():
    stub = {"torch": torch, "check": check, "device": "cpu"}
    run_cell(cell("def compile_for_any_batch(fn, backend)"), stub)
    assert "compiled 2 times" in check("ex-perf-no-recompile", stub["compile_for_any_batch"], device="cpu").message
    blocks = solution_blocks("ex-perf-no-recompile")
    assert len(blocks) == 2
    for block in blocks:
        namespace = {"torch": torch, "check": check, "device": "cpu"}
        run_cell(block, namespace)
        verdict = check("ex-perf-no-recompile", namespace["compile_for_any_batch"], device="cpu")
        assert verdict, verdict
