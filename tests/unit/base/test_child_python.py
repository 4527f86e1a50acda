"""gpukit.base.child_python: a child Python, its exit status and its error line."""

import sys

import pytest

from gpukit.base.child_python import ScriptRun, run_python


def test_a_successful_child(tmp_path):
    script = tmp_path / "ok.py"
    script.write_text("import os\nprint('hello', os.environ['GREETING'])\n")
    run = run_python(script, env={"GREETING": "world"})
    assert run.ok and run.returncode == 0 and run.stdout == "hello world\n" and run.error == ""


def test_a_failing_child_names_its_error(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text("def f():\n    raise ValueError('nope')\n\nprint('before')\nf()\n")
    run = run_python(script)
    assert not run.ok and run.stdout == "before\n"
    assert run.error == "ValueError: nope"


def test_code_can_be_given_with_dash_c():
    run = run_python("-c", "import sys; print(sys.argv[1:])", "a", 3)
    assert run.stdout.strip() == "['a', '3']"


def test_the_error_line_is_found_above_trailing_advice():
    stderr = ("Traceback (most recent call last):\n  File \"x.py\", line 8, in <module>\n"
              "torch.AcceleratorError: CUDA error: device-side assert triggered\n"
              "CUDA kernel errors might be asynchronously reported at some other API call.\n"
              "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n")
    run = ScriptRun(1, "", stderr)
    assert run.error == "torch.AcceleratorError: CUDA error: device-side assert triggered"
    assert ScriptRun(3, "", "").error == "exit status 3, nothing on stderr"
    assert ScriptRun(1, "", "killed\n").error == "killed"


def test_bad_arguments():
    with pytest.raises(ValueError, match="needs a script"):
        run_python()
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        run_python("-c", "pass", timeout=0)
    with pytest.raises(TypeError, match="env must map"):
        run_python("-c", "pass", env={"A": 1})


def test_it_runs_this_interpreter():
    assert run_python("-c", "import sys; print(sys.executable)").stdout.strip() == sys.executable
