"""Importing gpukit changes nothing about the process: a learner's own script that imports it behaves as the
same script without it (JAX's memory settings included; the lesson that uses JAX sets them in plain view)."""

import os
import pkgutil
import subprocess
import sys

import gpukit

MODULES = sorted(name for _, name, _ in pkgutil.walk_packages(gpukit.__path__, "gpukit."))


def test_importing_every_gpukit_module_leaves_the_environment_as_it_was():
    probe = ("import os, importlib, json\n"
             "before = dict(os.environ)\n"
             f"for name in {MODULES!r}:\n"
             "    importlib.import_module(name)\n"
             "changed = {k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)}\n"
             "print(json.dumps(sorted(changed)))\n")
    # A bare environment: this test process has imported gpukit already, and whatever that set would be inherited
    # and then not seen to change.
    bare = {name: os.environ[name] for name in ("PATH", "HOME", "LANG") if name in os.environ}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, env=bare)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", f"importing gpukit changed: {done.stdout}"


def test_every_module_was_tried():
    assert "gpukit.exercises.checking" in MODULES and "gpukit.core.glue" in MODULES and len(MODULES) > 30


def test_a_lessons_first_cell_imports_only_what_it_needs():
    """``import gpukit`` and the names a lesson's first cell takes from it load no chapter's exercise checks and no
    doctor (the first ``check`` loads the checks, the first ``environment_report`` the doctor), and never the
    book's machinery."""
    probe = ("import sys\n"
             "from gpukit import check, glue, lesson_stamp, pick_device, skip_unless\n"
             "first = sorted(m for m in sys.modules if m.startswith(('gpukit', 'booktools')))\n"
             "print(' '.join(first))\n"
             "check('ex-env-batch-bytes', None)\n"
             "from gpukit import environment_report\n"
             "print(' '.join(sorted(m for m in sys.modules if m.startswith(('gpukit', 'booktools')))))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    first, after = (set(line.split()) for line in done.stdout.strip().splitlines()[-2:])
    assert "gpukit.core.device" in first and "gpukit.exercises.checking" in first
    loaded_early = sorted(m for m in first if m.startswith(("gpukit.exercises.", "gpukit.commands", "booktools"))
                          and m != "gpukit.exercises.checking")
    assert not loaded_early, f"import gpukit loaded {loaded_early}"
    assert {"gpukit.exercises.pytorch", "gpukit.exercises.training_at_scale", "gpukit.commands.doctor"} <= after
    assert not any(m.startswith("booktools") for m in after)
