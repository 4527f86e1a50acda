"""The contributor's quick loop (conftest.py): `make check` keeps exactly the tests that start no server and execute no
lesson, and a test it keeps that starts one fails, whatever run it is in; `make test LESSON=NN` picks one lesson's
tests."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import conftest
from tests.support.booktoc import ROOT

TESTS = ROOT / "tests"


@pytest.mark.parametrize("argv, what", [
    (["/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "k.json"], "a Jupyter kernel"),
    ([sys.executable, "-m", "pytest", "-q", "tests/unit"], "a child pytest run"),
    (["/venv/bin/pytest", "tests"], "a child pytest run"),
    (["/venv/bin/jupyter-book", "build", "."], "a book build"),
    ([sys.executable, "/book/scripts/execute_notebooks.py", "--cache", "c"], "a book build"),
    (["jupyter", "nbconvert", "--to", "notebook", "--execute", "a.ipynb"], "a notebook executed"),
    (["jupyter", "lab", "--port", "8888"], "a server (jupyter lab)"),
    (["/usr/sbin/slurmctld", "-D"], "a server (slurmctld)"),
    (["/x/playwright/driver/node", "/x/cli.js", "run-driver"], "a server (node)"),
    (["python3.12", "-m", "http.server", "8000"], "a server (python -m http.server)"),
    (["git", "daemon", "--reuseaddr"], "a server (git daemon)"),
    (["/bin/sh", "-c", "cd /x && jupyterhub -f config.py"], "a server (jupyterhub)"),
    (["unshare", "-rn", "env", "A=1", "/usr/sbin/slurmd", "-D"], "a server (slurmd)"),
    ([sys.executable, "-m", "booktools", "gpu-check", "--lessons", "11"],
     "booktools gpu-check, which executes lessons"),
])
def test_what_a_check_test_must_not_start_is_recognised(argv, what):
    assert (conftest.started(argv) or "").startswith(what)


@pytest.mark.parametrize("argv", [
    [sys.executable, "-c", "print(1)"], [sys.executable, "/tmp/child.py"], ["nvcc", "-ptx", "a.cu"],
    ["git", "commit", "-m", "node"], ["make", "-n", "book"], ["jupyter", "--paths"], ["/bin/sh", "-c", "ls node"],
    [sys.executable, "-m", "gpukit", "doctor"], ["sbatch", "--test-only", "job.sh"], ["make", "-n", "check"],
])
def test_a_child_python_or_a_compiler_is_not_a_server(argv):
    assert conftest.started(argv) is None


def a_test_item():
    return SimpleNamespace(stash=pytest.Stash(), path=ROOT / "tests" / "planted.py", name="test_planted")


def test_the_watch_sees_a_child_server_before_it_starts_and_a_server_socket_in_the_process():
    """What the audit hook and the wrapped listen() record for the test being watched (nothing here starts: the
    planted command does not exist, and the socket listens on the loopback for a moment)."""
    item = a_test_item()
    with conftest.watching(item):
        with pytest.raises(FileNotFoundError):
            subprocess.Popen(["/nonexistent/bin/python3", "-m", "pytest", "-q"])
        subprocess.run([sys.executable, "-c", "pass"], check=True)  # a plain child Python: fine
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen()
    seen = item.stash[conftest.SEEN]
    assert len(seen) == 2 and seen[0].startswith("a child pytest run: /nonexistent/bin/python3 -m pytest")
    assert seen[1].startswith("a server in the test's own process (a socket listening on ('127.0.0.1', ")
    with pytest.raises(pytest.fail.Exception, match=r"(?s)its run started:\n  a child pytest run.*LEFT_OUT_OF_CHECK"):
        conftest.fail_for_what_it_started(item, "run")


def test_a_watched_test_sees_only_its_own_children():
    outer, inner = a_test_item(), a_test_item()
    with conftest.watching(outer):
        with conftest.watching(inner), pytest.raises(FileNotFoundError):
            subprocess.Popen(["/nonexistent/jupyter-book", "build"])
        assert conftest.Watch.item is outer
    assert conftest.SEEN not in outer.stash and len(inner.stash[conftest.SEEN]) == 1


def fixtures_defined_in_tests() -> set[str]:
    found = set()
    for path in TESTS.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        found.update(re.findall(r"@pytest\.fixture[^\n]*\n(?:@[^\n]*\n)*def (\w+)\(", text))
    return found


def test_the_fixtures_named_as_starting_servers_or_running_lessons_exist():
    """A renamed fixture would put its tests into make check: the watch would then fail them, but say so here."""
    named = set(conftest.FIXTURES_THAT_START_SERVERS) | set(conftest.FIXTURES_THAT_EXECUTE_LESSONS)
    assert named <= fixtures_defined_in_tests(), named - fixtures_defined_in_tests()


def test_each_test_left_out_of_check_exists_and_says_why():
    for key, why in conftest.LEFT_OUT_OF_CHECK.items():
        file, _, name = key.partition("::")
        assert (ROOT / file).is_file(), f"LEFT_OUT_OF_CHECK names {file}, which does not exist"
        if name:
            function = re.escape(name.split("[")[0])
            assert re.search(rf"^\s*def {function}\(", (ROOT / file).read_text(encoding="utf-8"), re.M), \
                f"LEFT_OUT_OF_CHECK names {key}, which does not exist"
        kind, _, reason = why.partition(": ")
        assert kind in conftest.QUICK_KINDS and reason, f"{key}: say '<{'|'.join(conftest.QUICK_KINDS)}>: why'"


def test_the_budget_names_each_test_and_file_over_its_share_and_a_total_over_the_whole(monkeypatch):
    monkeypatch.setattr(conftest, "CHECK_TEST_BUDGET_S", 5.0)
    monkeypatch.setattr(conftest, "CHECK_FILE_BUDGET_S", 10.0)
    monkeypatch.setattr(conftest, "CHECK_BUDGET_S", 30.0)
    assert conftest.over_budget({"tests/a.py": 9.0, "tests/b.py": 8.0}, {"tests/a.py::t": 4.5}) == []
    assert conftest.over_budget({"tests/a.py": 12.5, "tests/b.py": 8.0}, {"tests/b.py::t[x]": 6.0}) == [
        "tests/b.py::t[x]: 6.0 core-seconds (a test may take 5)", "tests/a.py: 12.5 core-seconds (a file may take 10)"]
    assert conftest.over_budget({f"tests/{n}.py": 9.0 for n in "abcd"}) == [
        "all of make check's tests together: 36 core-seconds (they may take 30)"]


def item(where: str, fixtures=(), test="test_x", **params):
    return SimpleNamespace(path=ROOT / where, callspec=SimpleNamespace(params=params), fixturenames=list(fixtures),
                           nodeid=f"{where}::{test}")


def test_a_lessons_tests_are_its_notebook_thin_kernel_exercises_lesson_tests_and_page(monkeypatch):
    monkeypatch.setattr(conftest, "lessons_the_site_would_execute", lambda notebook: [])
    notebook = conftest.lesson_notebook("03")
    mine = [
        item("notebooks/03-cupy.ipynb"),
        item("tests/lessons/test_thin_kernel.py", path=notebook),
        item("tests/exercises/test_every_exercise.py", label="ex-cupy-softmax"),
        item("tests/exercises/test_cupy.py"),
        item("tests/lessons/test_predictions.py", test="test_each_claim_has_its_prediction[03-cupy/h100]"),
        item("tests/lessons/test_predictions.py", test="test_cupy_the_exercises_solution_passes_and_uses_the_n"),
        item("tests/book/test_site.py", ["site", "served_site", "browser"], doc="notebooks/03-cupy"),
        item("tests/book/test_jupyterhub.py", ["site"], doc="notebooks/03-cupy"),
    ]
    others = [
        item("notebooks/04-pytorch-gpu.ipynb"),
        item("tests/lessons/test_thin_kernel.py", path=ROOT / "notebooks" / "04-pytorch-gpu.ipynb"),
        item("tests/lessons/test_thin_kernel.py"),
        item("tests/exercises/test_every_exercise.py", label="ex-pytorch-where"),
        item("tests/exercises/test_pytorch.py"),
        item("tests/lessons/test_predictions.py", test="test_each_claim_has_its_prediction[04-pytorch-gpu/h100]"),
        item("tests/lessons/test_predictions.py", test="test_the_table_of_claims_covers_every_lesson"),
        item("tests/lessons/test_precision_fp8.py"),
        item("tests/book/test_site.py", ["site", "served_site", "browser"], doc="notebooks/04-pytorch-gpu"),
        item("tests/book/test_site.py", ["site"]),
        item("tests/book/test_jupyterhub.py", ["site", "hub"], doc="notebooks/03-cupy"),
        item("tests/unit/core/test_timing.py"),
    ]
    assert conftest.lessons_tests(others + mine, notebook) == mine


def test_a_lessons_page_is_left_out_where_the_site_would_execute_other_lessons(monkeypatch):
    monkeypatch.setattr(conftest, "lessons_the_site_would_execute", lambda notebook: ["01", "02"])
    monkeypatch.setattr(conftest, "LESSON_NOTES", [])
    page = item("tests/book/test_site.py", ["site"], doc="notebooks/03-cupy")
    assert conftest.lessons_tests([page], conftest.lesson_notebook("03")) == []
    assert "would execute 01, 02 first" in conftest.LESSON_NOTES[0] and "run make book" in conftest.LESSON_NOTES[0]


def test_every_lesson_has_exercises_in_one_chapter():
    for notebook in conftest.lessons():
        labels = conftest.exercise_labels(notebook)
        assert labels and len(conftest.exercise_chapters(labels)) == 1, notebook.name


def test_a_number_that_is_no_lesson_is_refused_with_the_lessons():
    with pytest.raises(pytest.UsageError, match=r"'3' is not a lesson; the lessons are: 00 01 02 03"):
        conftest.lesson_notebook("3")


# ----------------------------------------------------------------------- end to end, in a child pytest (make test)
PLANTED = '''
import http.server
import subprocess
import sys

import pytest

import conftest

conftest.CHECK_TEST_BUDGET_S = {test_budget}


def test_serves_in_its_process():
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    server.server_close()


def test_runs_a_child_pytest():
    subprocess.run([sys.executable, "-m", "pytest", "--version"], capture_output=True)


def test_runs_a_child_python():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.fixture(scope="module")
def hub():
    subprocess.run([sys.executable, "-m", "http.server", "--help"], capture_output=True)
    yield "a hub"


def test_uses_a_fixture_that_starts_a_server(hub):
    assert hub == "a hub"
'''


def planted_run(tmp_path: Path, *args: str, test_budget: float = 100.0) -> subprocess.CompletedProcess:
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "test_planted.py").write_text(PLANTED.format(test_budget=test_budget), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_ADDOPTS": ""}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-n", "0",
                           "-rA", "--rootdir", str(tmp_path), "-c", str(tmp_path / "pytest.ini"), *args,
                           str(tmp_path / "test_planted.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_a_test_that_starts_a_server_or_a_child_pytest_fails_in_any_run_and_make_check_leaves_out_the_rest(tmp_path):
    done = planted_run(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    failed = re.findall(r"^FAILED test_planted.py::(\w+)", done.stdout, re.M)
    passed = re.findall(r"^PASSED test_planted.py::(\w+)", done.stdout, re.M)
    assert failed == ["test_serves_in_its_process", "test_runs_a_child_pytest"], done.stdout
    # The fixture's tests are left out of make check, so not watched; a child Python is no server.
    assert passed == ["test_runs_a_child_python", "test_uses_a_fixture_that_starts_a_server"]
    assert re.search(r"test_serves_in_its_process is one of `make check`'s tests .* its run started:\n  a server in "
                     r"the test's own process \(a socket listening on \('127.0.0.1', \d+\)\)", done.stdout)
    assert "test_runs_a_child_pytest is one of `make check`'s tests" in done.stdout
    assert "its run started:\n  a child pytest run: " in done.stdout
    quick = planted_run(tmp_path, "--quick")
    assert "1 deselected" in quick.stdout and "test_uses_a_fixture_that_starts_a_server" not in quick.stdout
    assert "make check: " in quick.stdout and "core-seconds of tests" in quick.stdout


def test_make_check_fails_on_a_test_over_its_budget(tmp_path):
    done = planted_run(tmp_path, "--quick", "-k", "child_python", test_budget=0.0)
    assert "1 passed" in done.stdout and done.returncode == 1, done.stdout
    assert re.search(r"test_planted.py::test_runs_a_child_python: \d+\.\d core-seconds \(a test may take 0\)",
                     done.stdout), done.stdout
