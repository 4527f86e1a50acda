"""Libraries a lesson can do without: import them if present, else say what is skipped and how to install.

Workshop kernels often have NumPy, PyTorch, Matplotlib and pandas but not JAX, CuPy, Ray, Dask,
ipyparallel or myst-nb. A lesson never crashes for one of those: :func:`optional_import` returns the module
or ``None`` after printing which library is missing and the exact command that installs the version the
book was built with. (The values the prose shows, glued for the page, are :mod:`gpukit.core.glue`.)
"""

from __future__ import annotations

import importlib
import importlib.metadata
import shlex
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from gpukit.base.child_python import pip_command
from gpukit.base.cuda_stacks import STACKS, torch_cuda_major

# Import name -> the distribution pip installs it from, where the two differ (CuPy: see distribution_of).
DISTRIBUTIONS = {
    "myst_nb": "myst-nb",
    "sklearn": "scikit-learn",
}


def distribution_of(import_name: str) -> str:
    """The distribution that provides ``import_name``. CuPy's wheel is named after the CUDA major it is built
    for, which must be torch's (one CUDA stack per environment): cupy-cuda12x beside a CUDA 12 torch, else
    cupy-cuda13x, the stack of PyPI's torch."""
    if import_name == "cupy":
        major = torch_cuda_major()
        return f"cupy-cuda{major}x" if major else STACKS[0].cupy
    return DISTRIBUTIONS.get(import_name, import_name)


def installed_version(distribution: str) -> str | None:
    """The version of ``distribution`` installed here (``importlib.metadata.version``), or None where it is not."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


# gpukit's extras, each read from a requirements file of the book (pyproject.toml's optional-dependencies).
# In pyproject.toml's order, which is the order of gpukit's metadata.
EXTRAS = ("lessons", "lab", "hub", "book", "test", "cuda13", "cuda12")
REQUIREMENT_FILES = {extra: f"requirements/{extra}.txt" for extra in EXTRAS}


def _gpukit_requirements() -> list[str]:
    try:
        return importlib.metadata.requires("gpukit") or []
    except importlib.metadata.PackageNotFoundError:
        # gpukit imported from a folder, not installed (a lesson's setup cell on a JupyterHub puts the book's
        # repository on the path): no metadata, but the requirements files lie beside the package.
        return _requirements_beside_gpukit()


def _requirements_beside_gpukit(root: Path | None = None) -> list[str]:
    """The extras' requirements as gpukit's metadata lists them (``'torch==2.13.0; extra == "lessons"'``), read
    from the requirements files in ``root``, the folder that holds the gpukit package unless given; files
    that are not there add nothing."""
    root = Path(__file__).resolve().parents[2] if root is None else Path(root)
    found = []
    for extra, name in REQUIREMENT_FILES.items():
        path = root / name
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                found.append(str(_with_extra(Requirement(line), extra)))
    return found


def _with_extra(requirement: Requirement, extra: str) -> Requirement:
    """``requirement`` as setuptools writes it into the metadata of ``extra``: its own marker, parenthesised,
    and the extra's (setuptools' ``_core_metadata._include_extra``; packaging drops the parentheses where the
    marker is a single comparison, and writes every value in double quotes)."""
    parts = [f"({requirement.marker})"] if requirement.marker else []
    requirement.marker = Marker(" and ".join([*parts, f'extra == "{extra}"']))
    return requirement


def pinned_requirements(extra: str) -> list[str]:
    """Every pin of one of gpukit's extras (``"lessons"``, ``"book"``, ``"test"``, ``"cuda13"``, ``"cuda12"``: the
    files requirements/<extra>.txt) that pip would install here for ``gpukit[<extra>]``, without its markers.

    Each requirement's marker is evaluated as pip evaluates it, for this machine and this extra: a pin for Linux
    only (``sys_platform == "linux"``) is not among a Mac's."""
    found = []
    for line in _gpukit_requirements():
        requirement = Requirement(line)
        if requirement.marker is None or not requirement.marker.evaluate({"extra": extra}):
            continue  # a requirement of gpukit itself (no extra), or one for another extra or platform
        requirement.marker = None
        found.append(str(requirement))
    return found


def pinned_requirement(distribution: str) -> str:
    """The book's pin for ``distribution`` (``"torch==2.13.0"``), else its bare name.

    The pins are the files in ``requirements/``, which gpukit's own metadata carries as its extras
    (``pyproject.toml`` reads them), so they are found the same way however gpukit was installed. Where two
    extras pin the same distribution (torch in ``lessons`` and, as its CUDA 12 build, in ``cuda12``), the pin of
    the extra listed first in ``REQUIREMENT_FILES`` is the one named. Names are compared as pip compares them
    (``myst_nb`` is ``myst-nb``).
    """
    if not isinstance(distribution, str) or not distribution.strip():
        raise ValueError(f"a distribution name such as 'jax' is needed, not {distribution!r}")
    wanted = canonicalize_name(distribution)
    # Metadata lists the extras in its own order (setuptools sorts them), so go through them in the files'.
    for extra in REQUIREMENT_FILES:
        for spec in pinned_requirements(extra):
            requirement = Requirement(spec)
            exact = any(specifier.operator == "==" for specifier in requirement.specifier)
            if canonicalize_name(requirement.name) == wanted and exact:
                return spec
    return distribution


def install_command(*distributions: str) -> str:
    """The exact command that installs ``distributions``, at the book's pins, into the Python running this
    (``%pip install ...`` in a notebook: :func:`gpukit.base.child_python.pip_command`)."""
    if not distributions:
        raise ValueError("name at least one distribution to install")
    specs = " ".join(shlex.quote(pinned_requirement(d)) for d in distributions)
    return f"{pip_command()} install {specs}"


def install_hint(import_name: str) -> str:
    return f"install it with: {install_command(distribution_of(import_name))}"


def optional_import(import_name: str, needed_for: str):
    """Import ``import_name`` and return it; where it is missing, print what is skipped and return ``None``.

    ``needed_for`` completes the sentence "... so <needed_for> is skipped", e.g. ``"the JAX comparison"``.
    """
    if not isinstance(needed_for, str) or not needed_for.strip():
        raise ValueError("say what the library is needed for, e.g. 'the JAX comparison'")
    try:
        return importlib.import_module(import_name)
    except ImportError:
        print(f"Skipped: {import_name} is not installed, so {needed_for} is skipped; {install_hint(import_name)}")
        return None
