"""Gather the wheels ``make gpu-check`` needs on a GPU node that has no network (``make wheelhouse``).

A GPU node's Python often has the GPU libraries (torch, JAX, CuPy, Numba, Triton) and nothing of the book's: no
Jupyter kernel, no nbclient to run a lesson, no pytest, and sometimes a NumPy newer than numba-cuda supports. Run
this where there is network (a login node, a laptop), for the node's platform and Python; copy the folder with the
checkout; then ``make gpu-check WHEELHOUSE=DIR`` on the node installs from it into a private folder of the run
(``booktools.gpu_check``), offline, without root, leaving the node's own packages as they are.

What it gathers, at the versions of ``requirements/lock.txt`` (markers evaluated for the target):
  every package that running the lessons, their exercises' solutions and the GPU tests needs (:data:`NEEDED`), with
  everything they need in turn (the lock's ``# via`` lines give the graph), except the GPU libraries and what only
  they need (:data:`GPU_LIBRARIES`: the node brings those, built for its CUDA) and what a lesson skips without
  (:data:`LEFT_OUT`, with why); plus the pip that installs them, so that the node needs no pip of its own.

It writes ``DIR/*.whl`` and ``DIR/wheelhouse.json``: the target, the lock's hash, and each wheel's distribution,
version and size. ``--max-mb`` (default 60, 100 with ``--with``) fails the command when the wheels weigh more: they
travel with a checkout.

    python scripts/wheelhouse.py DIR --platform linux-x86_64 --python 3.12
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

try:
    from packaging.markers import Marker
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # a login node's bare Python: pip carries its own copy of packaging
    from pip._vendor.packaging.markers import Marker
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "lock.txt"
SCHEMA = "gpukit.wheelhouse/1"
MANIFEST = "wheelhouse.json"

# What gpu-check runs on the node, beyond the GPU libraries: a lesson in a Jupyter kernel (nbclient, ipykernel),
# the GPU tests (pytest, pyyaml for tests/support/booktoc.py, setuptools for torch's extension builds), and the
# lessons' small libraries (requirements/lessons.txt), NumPy at the book's pin among them.
NEEDED = ("nbclient", "nbformat", "jupyter-client", "ipykernel", "pytest", "pytest-xdist", "pyyaml", "setuptools",
          "packaging", "numpy", "threadpoolctl", "tqdm", "psutil", "array-api-compat", "ninja", "ipyparallel", "dask",
          "distributed", "dask-jobqueue")
# The lessons' large libraries, which a GPU node's scientific Python has (the first H100 node had both): about 37 MB
# with what they need, over the 60 MB a wheelhouse that travels with a checkout may weigh. `--with matplotlib pandas`
# adds them for a node that lacks them; gpu-check names any the node lacks and the wheelhouse does not carry.
USUALLY_ON_THE_NODE = ("matplotlib", "pandas")
# The node's own, built for its CUDA: the wheelhouse never carries them, nor what only they need.
GPU_LIBRARIES = ("torch", "jax", "jaxlib", "numba", "numba-cuda", "triton", "cupy-cuda13x", "cupy-cuda12x",
                 "llvmlite")
# Installed on the node even where it has its own: numba-cuda 0.30 does not run on NumPy 2.5 (the first H100 run),
# and every lesson's numbers assume the book's NumPy.
PINNED_ON_THE_NODE = ("numpy",)
# Never carried, nor what only they need, each with its reason.
LEFT_OUT = {
    "ray": "about 70 MB; lesson 02's Ray cells skip without it",
    "debugpy": "ipykernel's debugger (about 4 MB), which a lesson run by nbclient never starts",
    "jedi": "IPython's completion (about 5 MB), which a lesson run by nbclient never asks for",
}
# The node's glibc is taken to be 2.28 or newer (RHEL 8, Ubuntu 20.04 and later). pip's --platform takes each
# tag as given (pip 23 does not add the older manylinux tags), so every tag a wheel may carry is named.
GLIBC_MINORS = range(28, 16, -1)


def manylinux_tags(machine: str) -> list[str]:
    return [f"manylinux_2_{minor}_{machine}" for minor in GLIBC_MINORS] + [f"manylinux2014_{machine}"]


PLATFORMS = {
    # name: (marker values, pip's --platform tags)
    "linux-x86_64": ({"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64"},
                     manylinux_tags("x86_64")),
    "linux-aarch64": ({"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "aarch64"},
                      manylinux_tags("aarch64")),
}
PYTHONS = ("3.11", "3.12", "3.13")
MAX_MB = 60.0
# What --with matplotlib pandas adds to the cap (they weigh about 37 MB with what they need).
WITH_MB = 40.0


def lock_entries(text: str) -> list[dict]:
    """The lock's packages: name, version, marker (or None) and ``via`` (the packages that need it; "-r file" for
    the book's own requirement files)."""
    entries: list[dict] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith(" "):
            comment = line.strip().lstrip("#").strip()
            if entries and comment:
                entries[-1]["via"].extend(part.strip() for part in comment.removeprefix("via").split(",")
                                          if part.strip() and comment != "via")
            continue
        requirement = Requirement(line)
        (pin,) = requirement.specifier
        entries.append({"name": canonicalize_name(requirement.name), "version": pin.version,
                        "marker": requirement.marker, "via": []})
    return entries


def marker_environment(platform: str, python: str) -> dict[str, str]:
    values, _ = PLATFORMS[platform]
    return {"python_version": python, "python_full_version": f"{python}.0", "os_name": "posix",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": "", **values}


def for_target(entries: Iterable[dict], environment: Mapping[str, str]) -> dict[str, dict]:
    """{name: entry} of the lock's packages that the target installs (their marker holds there)."""
    chosen = {}
    for entry in entries:
        marker: Marker | None = entry["marker"]
        if marker is None or marker.evaluate(dict(environment)):
            chosen[entry["name"]] = entry
    return chosen


def closure(roots: Iterable[str], packages: Mapping[str, dict]) -> set[str]:
    """``roots`` and everything they need in turn, among ``packages`` (the lock's ``via`` lines read backwards)."""
    needs: dict[str, set[str]] = {}
    for name, entry in packages.items():
        for parent in entry["via"]:
            if not parent.startswith("-r"):
                needs.setdefault(canonicalize_name(parent), set()).add(name)
    found, todo = set(), [canonicalize_name(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in found or name not in packages:
            continue
        found.add(name)
        todo.extend(needs.get(name, ()))
    return found


def wheel_set(packages: Mapping[str, dict], extra: Iterable[str] = ()) -> dict[str, str]:
    """{name: version} the wheelhouse holds: what :data:`NEEDED` and ``extra`` need in turn, never passing through a
    GPU library (what only those need is the node's) or :data:`LEFT_OUT`."""
    kept = {name: entry for name, entry in packages.items() if name not in GPU_LIBRARIES and name not in LEFT_OUT}
    chosen = closure([*NEEDED, *extra], kept)
    return {name: packages[name]["version"] for name in sorted(chosen)}


def download(pins: Mapping[str, str], folder: Path, platform: str, python: str) -> None:
    """pip download of exactly these wheels (no dependencies: the set is complete) for the target."""
    _, tags = PLATFORMS[platform]
    abi = "cp" + python.replace(".", "")
    command = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps",
               "--only-binary=:all:", "--implementation", "cp", "--python-version", python, "--abi", abi,
               "--dest", str(folder)]
    for tag in tags:
        command += ["--platform", tag]
    command += [f"{name}=={version}" for name, version in pins.items()]
    subprocess.run(command, check=True)


def pip_pin() -> str:
    """The pip that installs the wheels on the node: the one running here (it downloads them too)."""
    import importlib.metadata

    return importlib.metadata.version("pip")


def wheel_name(path: Path) -> tuple[str, str]:
    """(distribution, version) of a wheel's file name."""
    name, version = path.name.split("-")[:2]
    return canonicalize_name(name), version


def write_manifest(folder: Path, platform: str, python: str, lock_text: str) -> dict:
    wheels = sorted(folder.glob("*.whl"))
    manifest = {
        "schema": SCHEMA, "platform": platform, "python": python,
        "lock_sha256": hashlib.sha256(lock_text.encode("utf-8")).hexdigest(),
        "needed": list(NEEDED), "usually_on_the_node": list(USUALLY_ON_THE_NODE),
        "pinned_on_the_node": list(PINNED_ON_THE_NODE), "left_out": LEFT_OUT,
        "wheels": [{"file": w.name, "name": wheel_name(w)[0], "version": wheel_name(w)[1],
                    "bytes": w.stat().st_size} for w in wheels],
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="where the wheels go (made if missing; wheels of other versions "
                                                  "already there are removed)")
    parser.add_argument("--platform", choices=sorted(PLATFORMS), default="linux-x86_64")
    parser.add_argument("--python", choices=PYTHONS, default="3.12", help="the node's Python (major.minor)")
    parser.add_argument("--max-mb", type=float, help=f"fail above this size (default {MAX_MB:g}; "
                                                     f"{MAX_MB + WITH_MB:g} with --with)")
    parser.add_argument("--with", dest="extra", nargs="+", default=[], choices=USUALLY_ON_THE_NODE,
                        help="also carry these, for a node whose Python lacks them (about 37 MB more)")
    parser.add_argument("--list", action="store_true", help="print the wheels it would gather and exit")
    args = parser.parse_args(argv)
    lock_text = LOCK.read_text(encoding="utf-8")
    packages = for_target(lock_entries(lock_text), marker_environment(args.platform, args.python))
    pins = wheel_set(packages, args.extra) | {"pip": pip_pin()}
    if args.list:
        print("\n".join(f"{name}=={version}" for name, version in pins.items()))
        return 0
    folder = args.folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.whl"):
        if pins.get(wheel_name(old)[0]) != wheel_name(old)[1]:
            old.unlink()
    print(f"Gathering {len(pins)} wheels for {args.platform}, Python {args.python}, into {folder}", flush=True)
    download(pins, folder, args.platform, args.python)
    manifest = write_manifest(folder, args.platform, args.python, lock_text)
    missing = sorted(set(pins) - {w["name"] for w in manifest["wheels"]})
    if missing:
        print(f"wheelhouse: no wheel for {', '.join(missing)}", file=sys.stderr)
        return 1
    size = sum(w["bytes"] for w in manifest["wheels"]) / 1e6
    print(f"{len(manifest['wheels'])} wheels, {size:.1f} MB, in {folder}")
    print(f"On the GPU node: make gpu-check WHEELHOUSE={folder}")
    limit = args.max_mb if args.max_mb is not None else MAX_MB + (WITH_MB if args.extra else 0)
    if size > limit:
        print(f"wheelhouse: {size:.1f} MB is more than {limit:g} MB (--max-mb)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
