"""`make lesson NN=.. NAME=..` (scripts/new_lesson.py) writes a lesson whose own tests pass at once: in a copy of
the book, the new lesson's notebook runs under nbval with its solution, in a kernel without the optional
libraries, and its exercise's solution passes while its wrong answers and planted device mistake are rejected.
It refuses a lesson number or name that is taken, and then writes nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.booktoc import ROOT

NOT_COPIED = (".git", ".venv", "_build", "build", "__pycache__", "*.egg-info", ".*_cache", "node_modules")


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("new lesson") / "gpu python"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(*NOT_COPIED))
    return copy


def new_lesson(book: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/new_lesson.py", *args], cwd=book, capture_output=True,
                          text=True, timeout=120)


def test_make_lesson_runs_the_script_with_its_arguments():
    done = subprocess.run(["make", "-n", "--no-print-directory", "lesson", "NN=18", "NAME=sparse-matrices",
                           "TITLE=Sparse matrices"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert 'scripts/new_lesson.py "18" "sparse-matrices" --title "Sparse matrices"' in done.stdout, done.stdout


def test_a_new_lesson_passes_its_own_tests_at_once(book):
    done = new_lesson(book, "98", "sparse-matrices", "--title", "Sparse matrices on the GPU")
    assert done.returncode == 0, done.stderr
    notebook = json.loads((book / "notebooks" / "98-sparse-matrices.ipynb").read_text(encoding="utf-8"))
    assert any("setup-gpukit" in c["metadata"].get("tags", []) for c in notebook["cells"]), "no setup cell"
    for path, needle in [("_toc.yml", "notebooks/98-sparse-matrices"),
                         ("chapters/instructor-notes.md", "## 98. Sparse matrices on the GPU"),
                         ("chapters/instructor-guide.md", "| 98. Sparse matrices on the GPU |"),
                         ("tests/exercises/cases/sparse_matrices.py", "DEVICE_MISTAKES")]:
        assert needle in (book / path).read_text(encoding="utf-8"), f"{path} lacks {needle!r}"
    # The copy's gpukit, not this checkout's editable install, in pytest and in the kernels it starts.
    env = {**os.environ, "PYTHONPATH": str(book)}
    tests = subprocess.run([sys.executable, "-m", "pytest", "--lesson", "98", "-q", "-n", "0",
                            "-p", "no:cacheprovider"], cwd=book, env=env, capture_output=True, text=True, timeout=600)
    assert tests.returncode == 0, tests.stdout[-4000:]
    summary = tests.stdout.strip().splitlines()[-1]
    assert "failed" not in summary and "error" not in summary, summary
    ran = int(summary.split(" passed")[0].split()[-1])
    assert ran >= 5, f"too few of the lesson's tests ran: {summary}"  # its cells, the thin kernel, the checks


def test_a_taken_number_or_name_is_refused_and_nothing_is_written(book):
    before = {path: (book / path).read_text(encoding="utf-8") for path in ("_toc.yml", "chapters/instructor-notes.md")}
    for args, expected in [(["01", "more-timing"], "lesson 01 exists already"),
                           (["19", "pytorch"], "gpukit/exercises/pytorch.py exists already"),
                           (["1", "x"], "two digits"), (["19", "Sparse Matrices"], "lower case words")]:
        done = new_lesson(book, *args)
        assert done.returncode == 2 and expected in done.stderr, (args, done.stderr)
    assert before == {path: (book / path).read_text(encoding="utf-8") for path in before}
    assert not list((book / "notebooks").glob("19-*"))
