"""A lesson's own code, taken from its notebook for a test to run: the cells between two headings, the cell that
glues a value, one function's definition, and a stand-in for ``glue`` that keeps what the prose would show."""

from __future__ import annotations

import ast
import json
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def lesson(name: str) -> list[dict]:
    """The cells of ``notebooks/<name>.ipynb``."""
    return json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))["cells"]


def source(cell) -> str:
    return "".join(cell["source"])


def between(cells, start: str, end: str) -> list[str]:
    """The code of the cells after the Markdown cell holding ``start`` and before the one holding ``end``."""
    marks = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown"]
    first = next(i for i in marks if start in source(cells[i]))
    last = next(i for i in marks if i > first and end in source(cells[i]))
    return [source(c) for c in cells[first + 1:last] if c["cell_type"] == "code"]


def gluing(cells, name: str) -> str:
    """The code of the one cell that glues ``name``."""
    found = [source(c) for c in cells if c["cell_type"] == "code" and f'glue("{name}"' in source(c)]
    assert len(found) == 1, f"{len(found)} cells glue {name!r}"
    return found[0]


def definition(cells, name: str) -> str:
    """The code of the lesson's one ``def name`` (whatever else its cell does)."""
    found = [ast.get_source_segment(source(c), node) for c in cells if c["cell_type"] == "code"
             for node in ast.parse(source(c)).body if isinstance(node, ast.FunctionDef) and node.name == name]
    assert len(found) == 1, f"{len(found)} definitions of {name!r}"
    return found[0]


class Glued(dict):
    """A stand-in for gpukit's ``glue``: it keeps each value as the prose would show it."""

    def __call__(self, name, value, display=False, fmt=None):
        self[name] = format(value, fmt) if fmt else value


def run(code: str, namespace: dict) -> dict:
    exec(compile(code, "<lesson cell>", "exec"), namespace)
    return namespace
