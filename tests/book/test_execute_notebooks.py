"""scripts/execute_notebooks.py: one line per notebook in the build log, and no warning where nothing is wrong."""

import sys

import nbformat
import pytest

from tests.support.booktoc import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import execute_notebooks  # noqa: E402  (scripts/ is not a package)


def notebook(tmp_path, code: str):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "lesson.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(execute_notebooks, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(execute_notebooks, "ROOT", tmp_path)


def test_a_kernel_runs_without_the_plain_text_transport_warning(tmp_path, cache, capfd):
    path, seconds, error = execute_notebooks.execute(notebook(tmp_path, "print(6 * 7)"), timeout=120)
    assert error is None and seconds > 0
    execute_notebooks.report(path, seconds, error)
    out, err = capfd.readouterr()
    assert "without encryption" not in out + err, err
    assert out.strip().startswith("lesson.ipynb:") and out.strip().endswith(" s")


def test_a_failure_is_one_plain_line(tmp_path, cache, capfd):
    path, seconds, error = execute_notebooks.execute(notebook(tmp_path, "raise ValueError('no such size')"),
                                                     timeout=120)
    assert seconds is None and "ValueError" in error
    execute_notebooks.report(path, seconds, error)
    out, _ = capfd.readouterr()
    assert "\x1b[" not in out and out.count("\n") == 1 and "ValueError: no such size" in out


def test_a_kernel_that_does_not_start_is_started_again(tmp_path, cache, monkeypatch, capfd):
    """Two kernels started at once by two processes may pick the same free port; the second start fails before
    any cell runs. That notebook gets a new kernel instead of ending the whole build."""
    real, starts = execute_notebooks.single_nb_execution, []

    def first_start_fails(nb, **kwargs):
        starts.append(1)
        if len(starts) == 1:
            raise RuntimeError("Kernel died before replying to kernel_info")
        return real(nb, **kwargs)

    monkeypatch.setattr(execute_notebooks, "single_nb_execution", first_start_fails)
    path, seconds, error = execute_notebooks.execute(notebook(tmp_path, "print(6 * 7)"), timeout=120)
    assert error is None and seconds > 0 and len(starts) == 2
    assert "starting another" in capfd.readouterr().out


def test_a_kernel_that_never_starts_is_a_reported_failure(tmp_path, cache, monkeypatch):
    def never_starts(nb, **kwargs):
        raise RuntimeError("Kernel died before replying to kernel_info")

    monkeypatch.setattr(execute_notebooks, "single_nb_execution", never_starts)
    path, seconds, error = execute_notebooks.execute(notebook(tmp_path, "print(6 * 7)"), timeout=120)
    assert seconds is None and "did not start" in error and "kernel_info" in error


def test_the_build_and_gpu_check_agree_on_the_lessons_that_run_alone(tmp_path):
    """`make book` and `make gpu-check` run the same lessons: one rule says which publish speed measurements."""
    from booktools import gpu_check

    assert execute_notebooks.runs_alone is gpu_check.runs_alone
    assert execute_notebooks.KERNEL_CONFIG["KernelManager"]["transport_encryption"] == "auto"
    speed = nbformat.v4.new_notebook(metadata={"gpukit": {"run_alone": True, "gpus": 1}})
    assert execute_notebooks.runs_alone(speed) and not execute_notebooks.runs_alone(nbformat.v4.new_notebook())
