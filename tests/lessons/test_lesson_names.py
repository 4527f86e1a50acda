"""Every name a lesson uses is bound on every branch before it: GPU, MPS, CPU, a library missing (lesson_names.py).

The first H100 run failed the CuPy lesson at every GPU cell with ``NameError: name 'no_gpu' is not defined``: the
skip reason was bound only on the branches where CuPy or a GPU was missing, and no CPU run ever took the other one.
"""

from __future__ import annotations

import textwrap

import nbformat
import pytest

from tests.support.booktoc import ROOT
from tests.support.lesson_names import unbound_names

LESSONS = sorted((ROOT / "notebooks").glob("*.ipynb"))


# The first cell of every lesson below: what a real lesson would import or compute before the cells under test.
INPUTS = ("from inputs import (build, check, compile_it, cupy, device, flag, glue, gpu, jax, make, optional_import, "
          "other, skip_unless, tools, why)")


def lesson(*cells: str, hidden: tuple[int, ...] = ()) -> nbformat.NotebookNode:
    """A notebook of code cells (dedented) after the INPUTS cell (cell 0), those at the `hidden` positions (counted
    from 1) tagged remove-cell."""
    nb = nbformat.v4.new_notebook()
    for index, code in enumerate([INPUTS, *cells]):
        cell = nbformat.v4.new_code_cell(textwrap.dedent(code))
        if index in hidden:
            cell.metadata["tags"] = ["remove-cell"]
        nb.cells.append(cell)
    return nb


def names(nb) -> list[str]:
    return [problem.name for problem in unbound_names(nb)]


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_every_name_is_bound_on_every_branch_before_its_use(path):
    problems = unbound_names(nbformat.read(path, as_version=4))
    assert not problems, f"{path.name}: a branch that no CPU run takes leaves names unbound:\n" + "\n".join(
        f"  {problem}" for problem in problems)


def test_the_reason_bound_only_where_the_gpu_is_missing_is_found():
    # The CuPy lesson's cell as the H100 ran it, and the first cell that used it.
    nb = lesson("""
        gpu_ready = bool(cupy) and cupy.cuda.is_available()
        if cupy is None:
            no_gpu = "this cell needs CuPy"
        elif not gpu_ready:
            no_gpu = "CuPy sees no GPU"
        else:
            print("CuPy on a GPU")
        """, """
        if skip_unless(gpu_ready, no_gpu):
            x_gpu = cupy.ones(3)
        """)
    (problem,) = unbound_names(nb)
    assert problem.name == "no_gpu" and problem.where == "cell 2" and problem.conditions == ()
    assert problem.bound_under == (("cupy is None",), ("cupy is not None", "not (gpu_ready)"))
    assert "'no_gpu' is used where always" in str(problem)


@pytest.mark.parametrize(("cells", "unbound"), [
    pytest.param(["""
        gpu_ready = flag()
        if cupy is None:
            reason = "no CuPy"
        elif not gpu_ready:
            reason = "no GPU"
        else:
            reason = "unused"
        """, """
        if skip_unless(gpu_ready, reason):
            a_gpu = cupy.ones(3)
        if gpu_ready:
            print(a_gpu.sum())
        if skip_unless(gpu_ready and a_gpu.size, why):
            b_gpu = a_gpu * 2
        if gpu_ready and a_gpu.size:
            print(b_gpu)
        """], [], id="a_name_bound_on_every_branch_or_under_the_same_condition_is_fine"),
    pytest.param(["""
        gpu_ready = flag()
        if gpu_ready:
            a_gpu = make()
        if other():
            print(a_gpu)
        print(a_gpu)
        print(gpu_ready and a_gpu)
        print(a_gpu if gpu_ready else None, None if gpu_ready else a_gpu)
        """], ["a_gpu", "a_gpu", "a_gpu"],  # once for each use under other conditions
        id="a_name_bound_under_one_condition_and_used_under_another_is_found"),
    # `simulating` implies `numba`; `built is not None` implies the condition it was built under.
    pytest.param(["""
        numba = optional_import("numba", why)
        can = tools()
        built = None
        if skip_unless(numba, why):
            cuda = numba.cuda
        if skip_unless(can, why):
            built = build()
            build_log = "log"
        simulating = bool(numba) and numba.config.ENABLE_CUDASIM
        if simulating:
            cuda.jit(print)
        if built is not None:
            print(build_log)
        if not (built is None):
            print(build_log)
        """], [], id="conditions_learnt_from_assignments"),
    pytest.param(["""
        if device != "mps":
            m = 1
        if not (device == "mps"):
            print(m)
        if jax is not None:
            j = 1
        if not jax is None:
            print(j)
        if device == "mps":
            print(m)
        """], ["m"], id="negations_are_read_as_a_reader_writes_them"),
    pytest.param(["""
        try:
            ptx = compile_it()
        except FileNotFoundError as missing:
            ptx = ""
            print(missing)
        print(ptx)
        try:
            import foo
        except ImportError:
            print("skipped")
        print(foo)
        try:
            import bar
        except ImportError:
            raise SystemExit("needed")
        print(bar)
        """], ["foo"], id="try_binds_only_where_the_body_and_every_handler_bind"),
    pytest.param(["""
        def copy_seconds(source):
            return stream_of(source)

        def first_and_later(source):
            return copy_seconds(source)
        """, """
        if gpu:
            stream_of = make()
        if gpu:
            print(first_and_later(1))
        print(first_and_later(2))
        """], ["stream_of (read by copy_seconds())"],
        id="a_function_is_checked_where_it_is_called_for_the_globals_it_reads"),
    pytest.param(["""
        rows = [x * 2 for x in range(3)]
        pairs = {k: v for k, v in zip(rows, rows) if k > limit}
        key = lambda row: row.total + offset
        """], ["limit", "offset"], id="comprehension_and_lambda_variables_are_their_own"),
])
def test_names_unbound_on_a_branch_are_found_and_only_those(cells, unbound):
    assert names(lesson(*cells)) == unbound


def test_hidden_cells_names_are_seen_by_hidden_cells_only():
    problems = unbound_names(lesson("total = 1", "story = f'{total}'", "print(story)", "glue(story)", hidden=(2, 4)))
    assert [(p.where, p.name) for p in problems] == [("cell 3", "story")]


def test_solutions_run_after_their_cell_in_the_visible_scope():
    nb = lesson("answer = None\ncheck('ex-one', answer)")
    nb.cells.append(nbformat.v4.new_markdown_cell(
        "````{solution} ex-one\n:class: dropdown\n\n```python\nif skip_unless(gpu, why):\n"
        "    answer, result = 1, 2\nprint(answer, result)\n```\n````"))
    (problem,) = unbound_names(nb)
    assert (problem.name, problem.where) == ("result", "cell 2, the solution of ex-one")
