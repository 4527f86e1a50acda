"""How nbval runs a lesson: its solutions run where the learner's answer goes, and its hidden cells run apart.

Solutions. A solution is one markdown cell: a ``{solution} <exercise label>`` directive with ``:class: dropdown``,
holding prose and the answered code cell in a ``python`` fence. It is never a code cell, so JupyterLab's "Run All"
runs the learner's cell and never overwrites the learner's answer with the solution. The tests run the fenced
code instead: conftest.py puts it into a code cell right after the solution, inside ``expect_a_passing_check``,
when nbval runs the lesson (:func:`as_tested`); booktools/gpu_check.py does the same on a GPU node. The cell
carries that hook's own code, so the kernel (whose working directory is ``notebooks/``) needs nothing but gpukit,
and gpukit keeps no hook of the tests: the hook records the verdicts of ``check`` by wrapping the function that
``check`` calls for them, for as long as the solution runs.

Hidden cells. A cell tagged ``remove-cell`` is not on the page (it glues values for the prose). Code copied from
the page must run without it, so nothing a visible cell uses may be defined only in a hidden one. nbval runs
each hidden cell with names of its own: it sees the lesson's names, but what it defines is seen only by later
hidden cells, so a visible cell that uses a hidden name fails with NameError in the same run that tests the
lesson. (A hidden cell could still change state behind a name, e.g. an environment variable; CONTRIBUTING.md
asks hidden cells to compute and glue only.) The setup cell is exempt: its job is to make gpukit importable.
"""

from __future__ import annotations

import copy
import inspect
import re
import textwrap
from contextlib import contextmanager

# ````{solution} label ... ```` (four or more backticks, because the body holds ``` fences).
SOLUTION = re.compile(r"^(?P<fence>`{4,})\{solution\} (?P<label>\S+)[ \t]*\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                      re.M | re.S)
PYTHON_FENCE = re.compile(r"^```python[ \t]*\n(?P<code>.*?)^```[ \t]*$", re.M | re.S)


def source(cell) -> str:
    text = cell["source"]
    return text if isinstance(text, str) else "".join(text)


def solutions_in(cell) -> list[tuple[str, str]]:
    """(exercise label, the code of its python fences joined) for each solution in a markdown cell."""
    if cell["cell_type"] != "markdown":
        return []
    return [(found["label"], "\n".join(code["code"].rstrip() for code in PYTHON_FENCE.finditer(found["body"])))
            for found in SOLUTION.finditer(source(cell))]


@contextmanager
def expect_a_passing_check(label: str):
    """Fail unless the code run inside checks ``label`` correctly, or skips (a library or the GPU it needs is
    missing here, and gpukit's skip said so). A solution that raises, skips nothing and checks nothing, or gets
    "Not yet" fails with the check's message."""
    from gpukit.core import device
    from gpukit.exercises import checking

    verdicts = []
    judge = checking._verdict  # what check() calls for the verdict, once the label and the context are right

    def recorded(exercise, answer, context):
        verdict = judge(exercise, answer, context)
        if exercise.label == label:
            verdicts.append(verdict)
        return verdict

    skips_before = len(device.SKIPS)
    checking._verdict = recorded
    try:
        yield
    finally:
        checking._verdict = judge
    if not verdicts:
        if len(device.SKIPS) > skips_before:
            return
        raise AssertionError(f"the solution of {label} neither called check({label!r}, ...) nor skipped")
    if not verdicts[-1]:
        raise AssertionError(f"the solution of {label} does not pass its check: {verdicts[-1]!r}")


def solution_run_source(label: str, code: str) -> str:
    """The code cell that runs a solution where the lesson's tests expect it to pass its check: the hook's code
    (:func:`expect_a_passing_check`), then the solution inside it."""
    return (f"from contextlib import contextmanager\n\n\n{inspect.getsource(expect_a_passing_check)}\n\n"
            f"with expect_a_passing_check({label!r}):  # the solution of {label}, from the cell above\n"
            f"{textwrap.indent(code, '    ')}\n")


HIDDEN = "remove-cell"
SETUP = "setup-gpukit"


def hidden_run_source(code: str, where: str) -> str:
    """A hidden cell's code, run in a scope of its own: the lesson's names plus what earlier hidden cells defined;
    what it defines goes to the hidden cells' names only. IPython's transform turns magics into Python first."""
    return (f"__hidden__ = globals().setdefault('__hidden_cells_names__', {{}})\n"
            f"__scope__ = {{**globals(), **__hidden__}}\n"
            f"exec(compile(get_ipython().transform_cell({code!r}), {where!r}, 'exec'), __scope__)\n"
            f"__hidden__.update((name, value) for name, value in __scope__.items()\n"
            f"                  if name not in globals() or globals()[name] is not value)\n"
            f"del __hidden__, __scope__\n")


def as_tested(nb, name: str = "lesson"):
    """A copy of the notebook (nbformat's) as nbval runs it: a code cell after each solution that runs its code,
    and each hidden code cell run in a scope of its own."""
    nb = copy.deepcopy(nb)
    cells = []
    for index, cell in enumerate(nb.cells):
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "code" and HIDDEN in tags and SETUP not in tags:
            cell["source"] = hidden_run_source(source(cell), f"{name}, hidden cell {index}")
        cells.append(cell)
        for label, code in solutions_in(cell):
            run = copy.deepcopy(cell)
            run.update(cell_type="code", id=f"solution-{label}", source=solution_run_source(label, code),
                       metadata={"tags": ["solution-run"]}, outputs=[], execution_count=None)
            run.pop("attachments", None)
            cells.append(run)
    nb.cells = cells
    return nb
