"""A Python like a GPU node's, for the wheelhouse's end-to-end test: the GPU library and the scientific libraries a
node's Python has, none of the book's Jupyter or test tools, and a NumPy other than the book's.

:func:`make_node_python` makes a virtual environment without pip, whose site-packages holds links to the book
environment's copies of ``torch``, ``matplotlib`` and ``pandas`` and of everything they need in turn (their
``Requires-Dist``, markers evaluated here, extras left out), and a NumPy of another version installed from a wheel
the caller supplies. Linking costs nothing next to installing torch again (about 700 MB); what the environment
lacks is what a node's lacks: nbclient, ipykernel, jupyter_client, pytest, tqdm, ...
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import venv
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

NODE_LIBRARIES = ("torch", "matplotlib", "pandas")
# The node's NumPy, one the book does not pin (the first H100 node's was 2.5.2, which this registry lacks).
NODE_NUMPY = "2.3.5"


def needed_in_turn(roots, leave_out=("numpy",)) -> list[importlib.metadata.Distribution]:
    """The distributions of this Python that ``roots`` need, they included (markers evaluated, no extras)."""
    environment = default_environment() | {"extra": ""}
    found, todo = {}, [canonicalize_name(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in found or name in leave_out:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        found[name] = dist
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate(environment):
                todo.append(canonicalize_name(requirement.name))
    return list(found.values())


def top_level_paths(dist: importlib.metadata.Distribution) -> set[Path]:
    """The files and folders a distribution put directly into site-packages (its RECORD's first parts)."""
    site = Path(dist.locate_file(""))
    parts = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
    return {site / part for part in parts if (site / part).exists() and part != "__pycache__"}


def site_packages(folder: Path) -> Path:
    return Path(folder) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def make_node_python(folder: Path, numpy_wheel: Path) -> Path:
    """A node-like Python in ``folder`` (see the module's docstring); returns its interpreter."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    site = site_packages(folder)
    for dist in needed_in_turn(NODE_LIBRARIES):
        for path in top_level_paths(dist):
            link = site / path.name
            if not link.exists():
                link.symlink_to(path)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--disable-pip-version-check", "--target", str(site), str(numpy_wheel)], check=True)
    return Path(folder) / "bin" / "python"
