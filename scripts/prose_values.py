"""What JupyterLab shows in a lesson's prose where a measured value goes, before the lesson has run.

The prose shows measured values with ``{eval}`glued.<name>``` (CONTRIBUTING.md, item 4). On the page the value is
the book's run's. In JupyterLab, jupyterlab-myst (2.7.0) evaluates the expression in the attendee's kernel when the
Markdown cell is run, and keeps each result in the cell's metadata, ``user_expressions``: a list of
``{"expression": "glued.name", "result": {"status": "ok", "data": {"text/plain": ...}, "metadata": {}}}``, the
``user_expressions`` of the kernel's execute reply (jupyterlab-myst's src/actions.ts). It renders an expression
from that metadata when the cell has an entry for it (src/components/inlineExpression.tsx; text/plain as plain
text, whether the notebook is trusted or not), and as its source, ``glued.name`` in code type, when it has none.
A lesson opened from a launch link has run nothing, so without this script every value reads ``glued.name``.

This script writes into each Markdown cell with ``{eval}`` roles one entry per expression whose text says which
cell computes the value: ``[run the code cell above]`` (the cell that glues the name is the nearest code cell
above), ``[run the 2nd code cell above]`` or ``[run the 3rd code cell above]``, ``[run the code cells above]``
(further up, or glued where this script cannot read the name), ``[computed by a code cell below]``. Running the
Markdown cell (Shift+Enter, Run All) replaces the entries with the kernel's own results, as before. No value is
written, so nothing can pass for a value of the attendee's run, and the notebooks do not change with each run.
Each entry's ``result.metadata`` names this script, which is how ``--check`` tells a kernel's saved results (a
run's values, saved from JupyterLab) from its own.

    python scripts/prose_values.py --check   # exit status 1, naming each notebook whose entries differ
    python scripts/prose_values.py --write   # write the entries into every notebooks/*.ipynb

The entries are made from the notebook as it is (its Markdown and the ``glue("<name>", ...)`` calls in its code
cells), so `--write` after any edit of a lesson brings it up to date, and changes nothing when run again.
Notebooks are written as the repository stores them (JSON with an indent of 1, keys in their order, a final newline).
"""

from __future__ import annotations

import json
import re
import sys

# The command line, the report and the notebooks' text as stored (nbstripout's form), as scripts/setup_cell.py has
# them (scripts/ is on the path when a script there runs, and the tests put it there).
from setup_cell import arguments, checked, notebook_text, shown

KEY = "user_expressions"  # the cell metadata jupyterlab-myst reads (src/userExpressions.ts, metadataSection)
MARK = {"written_by": "scripts/prose_values.py"}  # each entry's result.metadata: not a kernel's result
ROLE = re.compile(r"\{eval\}`([^`]+)`")
GLUE = re.compile(r"\bglue\(\s*([\"'])([A-Za-z_][A-Za-z0-9_]*)\1")
NAME = re.compile(r"glued\.([A-Za-z_][A-Za-z0-9_]*)")
# How many code cells may lie between the cell that glues a value and its prose for the placeholder to count them.
COUNTED = 2
# Every text placeholder() writes, and nothing a kernel's result for a glued value is likely to be (a number, a
# sentence): the hub test counts them on the page (tests/support/hub_lesson_checks.py). Python's and JavaScript's
# syntax.
PLACEHOLDER = re.compile(r"\[(?:run the (?:(?:2nd|3rd|[0-9]+th) )?code cells? above|computed by a code cell below)\]")


def source(cell: dict) -> str:
    text = cell.get("source", "")
    return text if isinstance(text, str) else "".join(text)


def expressions(markdown: str) -> list[str]:
    """The expressions of the ``{eval}`` roles in ``markdown``, each once, in order."""
    return list(dict.fromkeys(ROLE.findall(markdown)))


def glued_in(cell: dict) -> set[str]:
    """The names a code cell glues with a literal name: ``glue("name", ...)``."""
    return {match[1] for match in GLUE.findall(source(cell))} if cell.get("cell_type") == "code" else set()


def ordinal(n: int) -> str:
    return {2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def placeholder(cells: list[dict], index: int, expression: str) -> str:
    """What the Markdown cell ``cells[index]`` shows for ``expression`` before it is run: which cell computes it."""
    found = NAME.fullmatch(expression)
    gluing = [i for i, cell in enumerate(cells) if found and found[1] in glued_in(cell)]
    above = [i for i in gluing if i < index]
    if above:
        between = sum(1 for cell in cells[above[-1] + 1:index] if cell.get("cell_type") == "code")
        if between == 0:
            return "[run the code cell above]"
        if between < COUNTED + 1:
            return f"[run the {ordinal(between + 1)} code cell above]"
        return "[run the code cells above]"
    if gluing:
        return "[computed by a code cell below]"
    return "[run the code cells above]"


def entries(cells: list[dict], index: int) -> list[dict]:
    """The ``user_expressions`` the Markdown cell ``cells[index]`` should carry (empty: none)."""
    return [{"expression": expression,
             "result": {"status": "ok", "data": {"text/plain": placeholder(cells, index, expression)},
                        "metadata": dict(MARK)}}
            for expression in expressions(source(cells[index]))]


def written_here(found) -> bool:
    return isinstance(found, list) and all(
        isinstance(entry, dict) and (entry.get("result") or {}).get("metadata") == MARK for entry in found)


def problems(nb: dict) -> list[str]:
    """What differs from the generated entries, one line per cell; empty when the notebook is up to date."""
    cells, found = nb["cells"], []
    for index, cell in enumerate(cells):
        expected = entries(cells, index) if cell.get("cell_type") == "markdown" else []
        present = cell.get("metadata", {}).get(KEY)
        if present is None and not expected or present == expected and expected:
            continue
        if present is None:
            why = f"no {KEY} for its {len(expected)} {{eval}} expression(s) (JupyterLab shows them as source)"
        elif not written_here(present):
            why = f"{KEY} that this script did not write (a run's values, saved from JupyterLab?)"
        elif not expected:
            why = f"{KEY} but no {{eval}} role"
        else:
            why = f"{KEY} out of date with its {{eval}} roles or the cells that glue them"
        found.append(f"cell {index}: {why}")
    return found


def with_entries(nb: dict) -> dict:
    """``nb`` with every Markdown cell's ``user_expressions`` the generated ones (and none on other cells)."""
    cells = nb["cells"]
    fresh = [entries(cells, index) if cell.get("cell_type") == "markdown" else [] for index, cell in enumerate(cells)]
    out = []
    for cell, wanted in zip(cells, fresh, strict=True):
        metadata = {key: value for key, value in cell.get("metadata", {}).items() if key != KEY}
        if wanted:
            metadata[KEY] = wanted
        out.append({**cell, "metadata": metadata})
    return {**nb, "cells": out}


def main(argv: list[str] | None = None) -> int:
    args, paths = arguments(__doc__, argv, "exit status 1 if a notebook's entries differ",
                            "write the entries into every notebook")
    wrong, written = [], 0
    for path in paths:
        nb = json.loads(path.read_text(encoding="utf-8"))
        found = problems(nb)
        if not found:
            continue
        if args.write:
            path.write_text(notebook_text(with_entries(nb)), encoding="utf-8")
            written += 1
            print(f"{shown(path)}: wrote the {KEY} of {len(found)} Markdown cell(s)")
        else:
            wrong.extend(f"{shown(path)}: {line}" for line in found)
    return checked(wrong, "Markdown cell(s)", "prose_values.py", None if written else
                   f"{len(paths)} notebook(s) checked: every {{eval}} expression has its placeholder")


if __name__ == "__main__":
    sys.exit(main())
