"""A lesson's own code, taken from its notebook for a test to run: the tests run the code the pages show, not a
copy of it.

- Finding it: :func:`code_cell` (the one code cell holding a piece of text, so that a test follows the cell when
  cells move), :func:`lesson_cells` (several at once), :func:`between` (the code between two pieces of prose),
  :func:`gluing` (the cell that glues a value), :func:`definition` (one function), :func:`stored_output` (what a
  checked cell printed when its reference was stored), :func:`markdown` (the prose).
- Running it here: :func:`run_cell` (in a namespace the test prepared: a fake profile bound to ``prof``, ``dev`` a
  stand-in CUDA device, ...; returns what it printed) and :func:`run` (returns the namespace), with
  :class:`Glued` standing in for gpukit's ``glue``.
- Running it in a child Python, as a kernel would, with what the test forces in its environment:
  :func:`run_cells` (what each cell printed, and all of stderr, which a page would show); running a whole lesson in
  a Jupyter kernel that first runs start-up files of the test's: :func:`ipython_dir` (the kernel's IPYTHONDIR).
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


def notebook(name: str) -> dict:
    """``notebooks/<name>`` (with or without its .ipynb)."""
    path = NOTEBOOKS / (name if name.endswith(".ipynb") else f"{name}.ipynb")
    return json.loads(path.read_text(encoding="utf-8"))


def lesson(name: str) -> list[dict]:
    """The cells of ``notebooks/<name>.ipynb``."""
    return notebook(name)["cells"]


def source(cell) -> str:
    return "".join(cell["source"])


def code_cell(name: str, contains: str) -> str:
    """The source of the one code cell of lesson ``name`` whose text contains ``contains``."""
    found = [source(c) for c in lesson(name) if c["cell_type"] == "code" and contains in source(c)]
    if len(found) != 1:
        raise LookupError(f"{name}: {len(found)} code cells contain {contains!r}, expected one")
    return found[0]


def lesson_cells(name: str, *markers: str) -> list[str]:
    """The source of the one code cell of lesson ``name`` that contains each of ``markers``, in that order."""
    return [code_cell(name, marker) for marker in markers]


def markdown(name: str) -> str:
    return "\n".join(source(c) for c in lesson(name) if c["cell_type"] == "markdown")


def stored_output(name: str, contains: str) -> str:
    """The text a checked cell printed when its reference output was stored."""
    cells = [c for c in lesson(name) if c["cell_type"] == "code" and contains in source(c)]
    if len(cells) != 1:
        raise LookupError(f"{name}: {len(cells)} code cells contain {contains!r}, expected one")
    return "".join("".join(o.get("text", "")) for o in cells[0].get("outputs", []) if o.get("output_type") == "stream")


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
    """A stand-in for gpukit's ``glue``: it keeps each value as the prose would show it (``fmt`` applied), and in
    :attr:`values` as the cell computed it."""

    def __init__(self):
        super().__init__()
        self.values: dict[str, object] = {}

    def __call__(self, name, value, display=False, fmt=None):
        self.values[name] = value
        self[name] = format(value, fmt) if fmt else value


def run(code: str, namespace: dict) -> dict:
    """Execute a cell's code in ``namespace``, as the kernel would: its names stay bound there."""
    exec(compile(code, "<lesson cell>", "exec"), namespace)
    return namespace


def run_cell(code, namespace: dict, where: str = "lesson cell") -> str:
    """Execute a cell's source (or code compiled from it) in ``namespace``; returns what it printed."""
    compiled = compile(code, where, "exec") if isinstance(code, str) else code
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compiled, namespace)
    return printed.getvalue()


# The child: runs each source in one namespace, as a kernel runs cells, marking where each cell's output starts.
CHILD = r"""
import json
import sys

sources = json.loads(open(sys.argv[1], encoding="utf-8").read())
namespace = {"__name__": "__main__"}
for index, source in enumerate(sources):
    print(f"\n<<cell {index}>>", flush=True)
    exec(compile(source, f"<cell {index}>", "exec"), namespace)
    sys.stdout.flush()
print("\n<<end>>", flush=True)
"""
_MARK = re.compile(r"\n<<cell (\d+)>>\n")


@dataclass
class CellRun:
    outputs: list[str]  # what each source printed on stdout, in order
    stdout: str
    stderr: str
    returncode: int

    def failed(self) -> str:
        return f"exit status {self.returncode}\nstdout:\n{self.stdout[-4000:]}\nstderr:\n{self.stderr[-4000:]}"


def run_cells(sources: list[str], folder: Path, env: dict[str, str] | None = None, unset: tuple[str, ...] = (),
              timeout: float = 300) -> CellRun:
    """Run ``sources`` one after the other in a child Python, from the book's folder, with gpukit from this
    repository; ``env`` adds to the environment and ``unset`` removes names from it."""
    script = folder / "cells.json"
    script.write_text(json.dumps(sources), encoding="utf-8")
    child_env = {key: value for key, value in os.environ.items() if key not in unset}
    child_env.update({"PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg", **(env or {})})
    done = subprocess.run([sys.executable, "-c", CHILD, str(script)], cwd=NOTEBOOKS, env=child_env,
                          capture_output=True, text=True, timeout=timeout)
    parts = _MARK.split(done.stdout.split("\n<<end>>")[0])
    outputs = [parts[i + 1] for i in range(1, len(parts) - 1, 2)]
    return CellRun(outputs, done.stdout, done.stderr, done.returncode)


def ipython_dir(folder: Path, startup: dict[str, str]) -> Path:
    """``folder`` made an IPython folder (a kernel's IPYTHONDIR) whose default profile runs each start-up file of
    ``startup`` (file name: code, run in the order of the names) before any cell."""
    files = folder / "profile_default" / "startup"
    files.mkdir(parents=True)
    for name, code in startup.items():
        (files / name).write_text(code, encoding="utf-8")
    return folder
