"""The Makefile in any folder: a clone whose path has spaces or quotes ("~/GPU Workshop/gpu python", common on
laptops) must build and test like any other.

torch.compile and torch's extension builder hand torch's own folder to the compiler unquoted, so the Makefile
keeps the Python environment at a plain path: ``.venv`` in a plain clone, else a private folder of the user's
cache (or of /tmp, if even that path is not plain). These tests run make for real in such folders: the
dry-run (``make -n``) shows which environment and which commands each target would use, and ``make
state-dirs`` creates its folders inside the spaced clone.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.booktoc import ROOT

MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")
PLAIN = re.compile(r"[A-Za-z0-9_./+@-]+")


def clone_at(folder: Path) -> Path:
    """The files the Makefile reads, copied into ``folder``."""
    folder.mkdir(parents=True)
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, folder / name)
    shutil.copytree(ROOT / "requirements", folder / "requirements")
    return folder


def make(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """make in ``folder``, with a plain HOME of its own unless ``env`` names one."""
    environment = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent/home", **env}
    return subprocess.run([MAKE, "--no-print-directory", *args], cwd=folder, env=environment, capture_output=True,
                          text=True, timeout=60)


def pip_line(dry_run: str) -> str:
    (line,) = [line for line in dry_run.splitlines() if " -m pip install " in line]
    return line


def test_a_plain_clone_keeps_its_environment_in_dot_venv(tmp_path):
    clone = clone_at(tmp_path / "gpu-python")
    done = make(clone, "-n", "book")
    assert done.returncode == 0, done.stderr
    assert pip_line(done.stdout).startswith(".venv/bin/python -m pip install ")
    assert "ln -sfn" not in done.stdout.split("then :; elif")[0]  # nothing to link


@pytest.mark.parametrize("folder", ["GPU Workshop/gpu python", "it's mine/gpu-python", "a$b (copy)/gpu-python"])
def test_a_clone_whose_path_has_spaces_or_quotes_gets_a_plain_private_environment(tmp_path, folder):
    clone = clone_at(tmp_path / folder)
    done = make(clone, "-n", "test")
    assert done.returncode == 0, done.stderr
    python = pip_line(done.stdout).split(" -m pip install ")[0]
    assert python.startswith("/nonexistent/home/.cache/gpukit/venv-") and PLAIN.fullmatch(python)
    assert done.stdout.count(python) >= 2  # the same environment runs the tests
    # A cache folder that is not plain either: the environment goes under /tmp.
    done = make(clone, "-n", "book", XDG_CACHE_HOME=str(tmp_path / "my cache"))
    assert re.match(r"/tmp/gpukit-venv-\d+/bin/python -m pip", pip_line(done.stdout)), done.stdout


def test_the_environment_is_set_up_without_the_iri_checker_and_notebooks_still_validate(tmp_path):
    lines = make(clone_at(tmp_path / "gpu-python"), "-n", "book").stdout.splitlines()
    pips = [line.split(" -m pip ")[1].split()[0] for line in lines if " -m pip " in line]
    assert pips == ["install", "uninstall"], pips
    assert [line for line in lines if " -m pip uninstall " in line][0].endswith(" -q rfc3987-syntax")
    # What is left without it, forced here whether or not this environment has it: nbformat validates a lesson,
    # and Jupyter's event schemas (which every JupyterLab start loads) load, all without it.
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "rfc3987_syntax.py").write_text("raise ImportError('rfc3987_syntax is not installed')\n")
    code = ("import sys, nbformat, jupyter_events.validators\n"
            "nbformat.validate(nbformat.read(sys.argv[1], as_version=4))\n"
            "print(sorted(name for name in sys.modules if name.startswith('rfc3987')))")
    done = subprocess.run([sys.executable, "-c", code, str(ROOT / "notebooks" / "03-cupy.ipynb")],
                          env={**os.environ, "PYTHONPATH": str(blocked)}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr[-2000:]


def test_the_state_folders_are_made_inside_a_clone_with_spaces(tmp_path):
    clone = clone_at(tmp_path / "GPU Workshop" / "gpu python")
    done = make(clone, "state-dirs")
    assert done.returncode == 0, done.stderr
    assert (clone / "_build" / "cache" / "matplotlib").is_dir() and (clone / "_build" / "cache" / "ipython").is_dir()
    assert not (tmp_path / "GPU").exists()  # no folder made from half a path


def test_the_gpu_stack_comes_from_the_command_line_only(tmp_path):
    clone = clone_at(tmp_path / "gpu-python")
    assert "-e \".[lessons,book,cuda13]\"" in pip_line(make(clone, "-n", "book", "GPU=cuda13").stdout)
    cuda12 = pip_line(make(clone, "-n", "book", "GPU=cuda12").stdout)
    assert "--extra-index-url https://download.pytorch.org/whl/cu129" in cuda12
    assert "requirements/lock.txt" not in cuda12
    # A cluster's own variable named GPU in the environment does not choose a stack.
    assert "-e \".[lessons,book]\"" in pip_line(make(clone, "-n", "book", GPU="1").stdout)
    wrong = make(clone, "-n", "book", "GPU=cuda11")
    assert wrong.returncode != 0 and "GPU=cuda11 is not one of" in wrong.stderr


def recording_python(path: Path, log: Path) -> Path:
    """A stand-in Python that writes how it was called to ``log`` (a line per call) and does nothing else."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "$0 $*" >> "{log}"\n')
    path.chmod(0o755)
    return path


def test_gpu_check_runs_in_the_environment_that_is_there_and_installs_nothing(tmp_path):
    clone = clone_at(tmp_path / "gpu-python")
    calls = tmp_path / "calls.txt"
    module_python = recording_python(tmp_path / "module" / "bin" / "python3", calls)
    done = make(clone, "gpu-check", f"PYTHON={module_python}", "GPU_CHECK_FLAGS=--lessons 03 --no-bench")
    assert done.returncode == 0, done.stderr
    # No .venv: the Python it was given (a cluster module's), once, and never pip.
    assert calls.read_text().splitlines() == [f"{module_python} -m booktools gpu-check --lessons 03 --no-bench"]
    venv_python = recording_python(clone / ".venv" / "bin" / "python", calls)
    calls.unlink()
    assert make(clone, "gpu-check", f"PYTHON={module_python}").returncode == 0
    assert calls.read_text().splitlines() == [f"{venv_python.relative_to(clone)} -m booktools gpu-check"]
    assert (clone / "_build" / "cache" / "matplotlib").is_dir()
    assert "make gpu-check" in make(clone, "help").stdout
    # A wheelhouse for a node without network: its folder reaches gpu-check.
    calls.unlink()
    assert make(clone, "gpu-check", "WHEELHOUSE=/data/node wheels").returncode == 0
    assert calls.read_text().splitlines() == [f"{venv_python.relative_to(clone)} -m booktools gpu-check --wheelhouse "
                                              f"/data/node wheels"]
    unsaid = make(clone, "wheelhouse")
    assert unsaid.returncode != 0 and "make wheelhouse WHEELHOUSE=DIR" in unsaid.stdout + unsaid.stderr


def current_environment(clone: Path) -> None:
    """A .venv whose test stamp is newer than every file it was installed from, as after a `make test`."""
    stamp = clone / ".venv" / ".installed-test"
    stamp.parent.mkdir()
    stamp.touch()
    earlier = stamp.stat().st_mtime - 60
    for path in [clone / "pyproject.toml", *(clone / "requirements").iterdir()]:
        os.utime(path, (earlier, earlier))


def test_make_check_is_lint_and_the_quick_tests_and_installs_nothing_where_the_environment_is_current(tmp_path):
    clone = clone_at(tmp_path / "gpu-python")
    assert " -m pip install " in make(clone, "-n", "check").stdout  # a new clone: set up first, as make test does
    current_environment(clone)
    lines = make(clone, "-n", "check").stdout.splitlines()
    assert not [line for line in lines if " -m pip install " in line], lines
    for command in (".venv/bin/ruff check gpukit booktools tests _ext scripts",
                    ".venv/bin/ruff check --line-length 88 notebooks", ".venv/bin/zizmor --offline .github/workflows",
                    ".venv/bin/python -m pytest --quick tests"):
        assert command in lines, f"{command!r} not in {lines}"
    assert "make check" in make(clone, "help").stdout


def lesson_clone(tmp_path: Path) -> Path:
    clone = clone_at(tmp_path / "gpu-python")
    (clone / "notebooks").mkdir()
    for name in ("00-environment-check", "03-cupy", "13-benchmarks", "README"):
        (clone / "notebooks" / f"{name}.ipynb").write_text("{}")
    current_environment(clone)
    return clone


def test_make_test_lesson_runs_that_lessons_tests_and_plain_make_test_everything(tmp_path):
    clone = lesson_clone(tmp_path)
    lines = make(clone, "-n", "test", "LESSON=03").stdout.splitlines()
    (pytest_line,) = [line for line in lines if "-m pytest" in line]
    assert pytest_line.split(" -m pytest ")[1].split() == [
        "--lesson", "03", "notebooks/03-cupy.ipynb", "tests/lessons", "tests/exercises",
        "tests/book/test_site.py", "tests/book/test_jupyterhub.py"]
    # Plain make test is the whole gate (pyproject.toml's testpaths); a variable LESSON in the environment is not asked.
    for done in (make(clone, "-n", "test"), make(clone, "-n", "test", LESSON="03")):
        assert [line for line in done.stdout.splitlines() if "-m pytest" in line] == [".venv/bin/python -m pytest "]
    assert "make test LESSON=03" in make(clone, "help").stdout


@pytest.mark.parametrize("lesson", ["3", "99", "*", "03 13", "README"])
def test_a_lesson_that_is_not_one_stops_make_test_with_the_lessons(tmp_path, lesson):
    done = make(lesson_clone(tmp_path), "-n", "test", f"LESSON={lesson}")
    assert done.returncode != 0 and f"LESSON={lesson} is not a lesson; the lessons are: 00 03 13" in done.stderr, \
        done.stderr
