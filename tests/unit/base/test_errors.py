import ast
import re
from pathlib import Path

import pytest

from gpukit.base.errors import error_line, first_line
from tests.support.booktoc import ROOT


@pytest.mark.parametrize(("error", "expected"), [
    (ValueError("bad size\nTraceback (most recent call last): ..."), "bad size"),
    (RuntimeError("\n\n  CUDA error: out of memory  \nmore"), "CUDA error: out of memory"),
    ("\nstderr's first line\nsecond", "stderr's first line"),
    (KeyError(), ""),
])
def test_first_line_is_the_first_non_empty_line(error, expected):
    assert first_line(error) == expected


def test_a_long_line_is_cut_and_says_so():
    line = first_line("x" * 500, limit=20)
    assert len(line) == 20 and line.endswith("...")
    assert first_line("y" * 20, limit=20) == "y" * 20


def test_error_line_names_the_type():
    assert error_line(AttributeError("module 'numpy' has no attribute 'row_stack'\nhint")) == \
        "AttributeError: module 'numpy' has no attribute 'row_stack'"
    assert error_line(MemoryError()) == "MemoryError"


def copies_of_the_first_line(root: Path) -> list[str]:
    """Where gpukit, outside gpukit/base/errors.py, takes an error's first line itself: a function named for it, or
    the idiom ``(str(error).strip().splitlines() or [""])[0]`` that the copies were written with, in either quoting."""
    found = []
    for path in sorted((root / "gpukit").rglob("*.py")):
        if path == root / "gpukit" / "base" / "errors.py":
            continue
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(root)
        found += [f"{where}, line {node.lineno}: def {node.name}" for node in ast.walk(ast.parse(text))
                  if isinstance(node, ast.FunctionDef) and "first_line" in node.name]
        found += [f"{where}, line {number}: {line.strip()}" for number, line in enumerate(text.splitlines(), 1)
                  if re.search(r"splitlines\(\) or \[(\"\"|'')\]\)\[0\]", line)]
    return found


def test_gpukit_takes_an_errors_first_line_from_one_place():
    copies = copies_of_the_first_line(ROOT)
    assert not copies, "use gpukit.base.errors.first_line or error_line instead of:\n" + "\n".join(copies)


def test_a_copy_is_found(tmp_path):
    planted = tmp_path / "gpukit" / "exercises" / "x.py"
    planted.parent.mkdir(parents=True)
    planted.write_text('def _first_line(e):\n    return (str(e).strip().splitlines() or [""])[0][:200]\n'
                       "why = (str(error).strip().splitlines() or [''])[0]\n")
    assert [c.split(": ", 1)[1] for c in copies_of_the_first_line(tmp_path)] == [
        "def _first_line", 'return (str(e).strip().splitlines() or [""])[0][:200]',
        "why = (str(error).strip().splitlines() or [''])[0]"]
