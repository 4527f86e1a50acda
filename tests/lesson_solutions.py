"""How nbval runs a lesson: its solutions run where the learner's answer goes.

Solutions. A solution is one markdown cell: a ``{solution} <exercise label>`` directive with ``:class: dropdown``,
holding prose and the answered code cell in a ``python`` fence. It is never a code cell, so JupyterLab's "Run All"
runs the learner's cell and never overwrites the learner's answer with the solution. The tests run the fenced
code instead: conftest.py puts it into a code cell right after the solution, inside ``expect_a_passing_check``,
when nbval runs the lesson (:func:`as_tested`).
"""

from __future__ import annotations

import copy
import re
import textwrap

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


def solution_run_source(label: str, code: str) -> str:
    """The code cell that runs a solution where the lesson's tests expect it to pass its check."""
    return (f"from gpukit.exercises.checking import expect_a_passing_check\n\n"
            f"with expect_a_passing_check({label!r}):  # the solution of {label}, from the cell above\n"
            f"{textwrap.indent(code, '    ')}\n")


def as_tested(nb, name: str = "lesson"):
    """A copy of the notebook (nbformat's) as nbval runs it: a code cell after each solution that runs its code."""
    nb = copy.deepcopy(nb)
    cells = []
    for cell in nb.cells:
        cells.append(cell)
        for label, code in solutions_in(cell):
            run = copy.deepcopy(cell)
            run.update(cell_type="code", id=f"solution-{label}", source=solution_run_source(label, code),
                       metadata={"tags": ["solution-run"]}, outputs=[], execution_count=None)
            run.pop("attachments", None)
            cells.append(run)
    nb.cells = cells
    return nb
