"""A lesson's own cells, run outside Jupyter: the tests run the code the pages show, not a copy of it.

:func:`code_cell` finds a code cell by a piece of its text (so a test follows the cell when cells move),
:func:`run_cell` executes it in a namespace the test prepared (a fake profile bound to ``prof``, ``dev`` set to a
CUDA device, ...), and :func:`stored_output` reads the output nbval compares for a cell tagged
``nbval-check-output``.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def notebook(name: str) -> dict:
    path = ROOT / "notebooks" / name
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell) -> str:
    return "".join(cell["source"])


def code_cell(name: str, contains: str) -> str:
    """The source of the one code cell of notebook ``name`` whose text contains ``contains``."""
    found = [_source(c) for c in notebook(name)["cells"] if c["cell_type"] == "code" and contains in _source(c)]
    if len(found) != 1:
        raise LookupError(f"{name}: {len(found)} code cells contain {contains!r}, expected one")
    return found[0]


def markdown(name: str) -> str:
    return "\n".join(_source(c) for c in notebook(name)["cells"] if c["cell_type"] == "markdown")


def stored_output(name: str, contains: str) -> str:
    """The text a checked cell printed when its reference output was stored."""
    cells = [c for c in notebook(name)["cells"] if c["cell_type"] == "code" and contains in _source(c)]
    if len(cells) != 1:
        raise LookupError(f"{name}: {len(cells)} code cells contain {contains!r}, expected one")
    return "".join("".join(o.get("text", "")) for o in cells[0].get("outputs", []) if o.get("output_type") == "stream")


def run_cell(source, namespace: dict, where: str = "lesson cell") -> str:
    """Execute a cell's source (or code compiled from it) in ``namespace``, as the kernel would: its names stay
    bound there. Returns what it printed."""
    code = compile(source, where, "exec") if isinstance(source, str) else source
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(code, namespace)
    return printed.getvalue()


class Glue:
    """Stands in for gpukit's ``glue``: records each value a hidden cell glues for the prose."""

    def __init__(self):
        self.values: dict[str, object] = {}

    def __call__(self, name, value, fmt=None, display=True):
        self.values[name] = value
