"""Every lesson runs to the end in a thin kernel: one with NumPy, PyTorch, Matplotlib, pandas and gpukit but
none of the optional libraries, as in many workshop JupyterHubs. Each cell that needs a missing library
must print that it skips, naming the library and the command that installs it. The lesson runs as nbval runs it
(tests/support/lesson_solutions.py): each exercise's solution after the learner's cell, passing its check or
skipping.

The kernel gets an IPython start-up file that hides the optional libraries from Python's path finder, so
the lesson code (and the libraries it uses, which probe with ``importlib.util.find_spec``) meet exactly what
a kernel without them shows. Cells tagged ``skip-execution`` are
skipped, as in the book build.
"""

from __future__ import annotations

import importlib.metadata
import os
import re

import nbformat
import pytest
from nbclient import NotebookClient
from packaging.requirements import Requirement

from tests.support.booktoc import ROOT
from tests.support.device_probe import skip_where_the_gpu_cannot_work
from tests.support.lesson_code import ipython_dir
from tests.support.lesson_solutions import as_tested

OPTIONAL = ("jax", "jaxlib", "cupy", "cupyx", "ray", "dask", "distributed", "ipyparallel", "myst_nb", "numba",
            "triton", "threadpoolctl", "tqdm", "array_api_compat")


def required_by_torch(requirements: list[str] | None = None) -> set[str]:
    """Import names of what the installed torch itself requires on this machine. PyPI's CUDA build of torch
    requires triton on Linux, and torch.compile generates its GPU code with it: a kernel with that torch always
    has triton, so hiding it would fail the compile cells on a GPU node for a kernel nobody can have."""
    if requirements is None:
        requirements = importlib.metadata.requires("torch") or []
    names = set()
    for line in requirements:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.add(re.sub(r"[-.]+", "_", requirement.name).lower())
    return names


HIDDEN = tuple(name for name in OPTIONAL if name not in required_by_torch())
# Besides its optional_import skips, what a lesson must say in such a kernel, where it is not a skip.
EXTRA_LINES = {
    "01-cpu-vs-gpu.ipynb": ["No progress bar: tqdm is not installed"],
}
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

HIDE_AT_STARTUP = f'''
import sys
from importlib.machinery import PathFinder

HIDDEN = {HIDDEN!r}


class PathFinderWithoutOptionalLibraries:
    """The standard path finder, blind to the optional libraries: for them find_spec answers None, as it does
    where a library is not installed, so both `import` and `importlib.util.find_spec` probes see it missing."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            return None
        return PathFinder.find_spec(name, path, target)

    @classmethod
    def invalidate_caches(cls):
        PathFinder.invalidate_caches()

    @classmethod
    def find_distributions(cls, *args, **kwargs):
        # importlib.metadata asks the path finder for installed distributions (entry points, versions).
        return PathFinder.find_distributions(*args, **kwargs)


sys.meta_path[:] = [PathFinderWithoutOptionalLibraries if f is PathFinder else f for f in sys.meta_path]
'''


# Run last in the kernel: which optional libraries could not be imported.
PROBE = f"""
import importlib

unimportable = []
for name in {sorted(HIDDEN)!r}:
    try:
        importlib.import_module(name)
    except ImportError:
        unimportable.append(name)
print("hidden:", unimportable)
"""


def expected_lines(path) -> list[str]:
    """One skip line per hidden library the lesson imports with optional_import, plus EXTRA_LINES."""
    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code"
                     and "skip-execution" not in c.metadata.get("tags", []))
    wanted = sorted({name for name in re.findall(r'optional_import\(\s*"([\w.]+)"', code)
                     if name.split(".")[0] in HIDDEN})
    return [f"Skipped: {name} is not installed" for name in wanted] + EXTRA_LINES.get(path.name, [])


def test_what_torch_itself_requires_is_not_hidden():
    cuda_torch = ['triton==3.7.1; platform_system == "Linux"', "filelock", 'optree>=0.13.0; extra == "optree"',
                  'nvidia-cudnn-cu13==9.20.0.48; platform_system == "Never"']
    assert required_by_torch(cuda_torch) == {"triton", "filelock"}
    assert "triton" in HIDDEN or "triton" in required_by_torch()


def test_the_expected_skips_are_found_in_the_lessons():
    assert "Skipped: jax is not installed" in expected_lines(ROOT / "notebooks" / "01-cpu-vs-gpu.ipynb")
    assert set(EXTRA_LINES) <= {p.name for p in NOTEBOOKS}


@pytest.fixture(scope="module")
def thin_ipython_dir(tmp_path_factory):
    return ipython_dir(tmp_path_factory.mktemp("thin-ipython"), {"00-hide-optional-libraries.py": HIDE_AT_STARTUP})


def printed(nb) -> str:
    parts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                parts.append(output["text"])
            elif "data" in output:
                parts.append(str(output["data"].get("text/plain", "")))
    return "".join(parts)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_to_the_end_without_the_optional_libraries(path, thin_ipython_dir, monkeypatch):
    skip_where_the_gpu_cannot_work(needs="the lessons put their tensors on the GPU torch reports")
    monkeypatch.setenv("IPYTHONDIR", str(thin_ipython_dir))
    # As nbval runs it: each solution's code runs after the learner's cell, and must pass its check or skip
    # with its sentence where the library it needs is missing (the solution of ex-par-dask-mean did neither).
    nb = as_tested(nbformat.read(path, as_version=4), path.stem)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    timeout = nb.metadata.get("mystnb", {}).get("execution_timeout", 300)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=False,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute(cwd=str(path.parent), env={**os.environ, "IPYTHONDIR": str(thin_ipython_dir)})
    text = printed(nb)
    assert "Running on " in text, "the stamp cell (under the setup cell) did not run"
    for skip in expected_lines(path):
        assert skip in text, f"{path.name} did not print {skip!r}"
    for line in text.splitlines():
        missing = re.match(r"Skipped: ([\w.]+) is not installed", line)
        if missing and missing.group(1).split(".")[0] in HIDDEN:
            # In a kernel the command is IPython's %pip, which installs into the kernel's own environment and
            # names no path of this machine (the pages show it).
            assert "%pip install " in line and "==" in line, f"no pinned %pip install command in: {line}"
    assert f"hidden: {sorted(HIDDEN)}" in text, "the kernel could import an optional library after all"
