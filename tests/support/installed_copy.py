"""gpukit installed as a user gets it from pip, not as the editable install of this checkout: for the tests that
prove a non-editable install carries what gpukit reads at run time (its data tables, the preflight's checks)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.booktoc import ROOT

# What never goes into the copy pip builds from: version control, environments, build outputs, caches.
NOT_COPIED = (".git", ".venv", "_build", "build", "__pycache__", "*.egg-info", ".*_cache", "notebooks", "node_modules")


def install_a_copy(tmp_path: Path, *, also_left_out: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """``pip install --target`` of a copy of the project (a copy, because pip builds in place and would leave
    build/ in the working tree), the copy removed after, so that nothing is read from it either. Returns the
    folder it was installed into and an empty folder, outside the repository, to run Python from."""
    source, target, elsewhere = tmp_path / "src", tmp_path / "site", tmp_path / "elsewhere"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_COPIED, *also_left_out))
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=300, check=False)
    assert install.returncode == 0, install.stderr
    shutil.rmtree(source)
    elsewhere.mkdir()
    return target, elsewhere
