"""The book's packages on a GPU node without network: what ``gpu-check --wheelhouse DIR`` installs, and where.

A GPU node's Python often has the GPU libraries and none of what runs a lesson (nbclient, a Jupyter kernel) or the
tests (pytest), and sometimes a library at a version that breaks the book (NumPy 2.5 under numba-cuda 0.30).
``make wheelhouse`` (scripts/wheelhouse.py) gathers those wheels where there is network; on the node, this module
installs from that folder, with ``--no-index`` and no root, into a private folder of the run, which the run's steps
find first on their import path:

- every wheel whose distribution the node's Python lacks;
- the wheels the book pins on the node (the wheelhouse's ``pinned_on_the_node``: NumPy) where the node has another
  version, which the private folder then shadows; the report names each;
- nothing else: a library the node has stays the node's own (its versions are in the report's drift list).

pip itself comes from the wheelhouse (``python pip-*.whl/pip install ...``), so the node needs none, and reads no
configuration file, so no index or find-links of the node's is asked.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpukit.base.errors import error_line

# Written by scripts/wheelhouse.py (its SCHEMA and MANIFEST; tests/book/test_wheelhouse.py holds them equal).
WHEELHOUSE_SCHEMA = "gpukit.wheelhouse/1"
WHEELHOUSE_MANIFEST = "wheelhouse.json"
# Marks a private folder whose install finished: a run stopped halfway through pip leaves a folder without it.
DONE = "gpukit-node-packages.json"
INSTALL_LIMIT_S = 300


def canonicalize_name(name: str) -> str:
    """A distribution's name as PEP 503 compares them (packaging's canonicalize_name, which a bare node may lack)."""
    return re.sub(r"[-_.]+", "-", name).lower()


class WheelhouseError(Exception):
    """The wheelhouse cannot be used by this Python: the message says why and what to run instead."""


@dataclass
class NodePackages:
    """What the wheelhouse gave this run: the private ``folder`` (None where the node lacked nothing), the
    ``installed`` wheels ("name version"), the node's versions it ``shadowed`` ((name, the node's, the book's)),
    what the book needs that neither has (``lacking``), and the seconds pip took (0 where an earlier run's folder
    was reused)."""

    wheelhouse: str
    folder: str | None = None
    installed: list[str] = field(default_factory=list)
    shadowed: list[tuple[str, str, str]] = field(default_factory=list)
    lacking: list[str] = field(default_factory=list)
    reused: bool = False
    seconds: float = 0.0

    def lines(self) -> list[str]:
        """The report's sentences about it."""
        where = f"into {self.folder}" + (" (an earlier run's install, reused)" if self.reused else "")
        out = [f"Wheelhouse {self.wheelhouse}: {len(self.installed)} wheel(s) the node's Python lacked or the book "
               f"pins, installed {where}" if self.installed else
               f"Wheelhouse {self.wheelhouse}: the node's Python had everything it carries; nothing installed"]
        out += [f"shadowed the node's {name} {theirs} with the book's {ours}" for name, theirs, ours in self.shadowed]
        if self.lacking:
            names = " ".join(self.lacking)
            out.append(f"the node's Python lacks {names.replace(' ', ', ')}, which the wheelhouse does not carry: "
                       f"the lessons that use them fail (make wheelhouse WHEEL_WITH=\"{names}\" adds them)")
        return out


def this_platform() -> str:
    """The wheelhouse platform name of this machine, e.g. "linux-x86_64"."""
    return f"{sys.platform}-{platform.machine().lower()}"


def this_python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def read_wheelhouse(folder: Path) -> dict:
    """The wheelhouse's manifest, checked against this Python and machine; :class:`WheelhouseError` where it
    cannot serve them."""
    manifest_file = Path(folder) / WHEELHOUSE_MANIFEST
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise WheelhouseError(f"{folder} is not a wheelhouse: it has no {WHEELHOUSE_MANIFEST} (make wheelhouse "
                              f"WHEELHOUSE={folder} writes one)") from None
    except (OSError, json.JSONDecodeError) as error:
        raise WheelhouseError(f"{manifest_file} cannot be read: {error_line(error)}") from None
    if manifest.get("schema") != WHEELHOUSE_SCHEMA:
        raise WheelhouseError(f"{manifest_file}: schema {manifest.get('schema')!r}, not {WHEELHOUSE_SCHEMA!r}")
    target = (manifest.get("platform"), manifest.get("python"))
    if target != (this_platform(), this_python()):
        raise WheelhouseError(
            f"the wheelhouse {folder} is for Python {target[1]} on {target[0]}, and this Python is {this_python()} "
            f"on {this_platform()}: on a machine with network, run make wheelhouse WHEELHOUSE={folder} "
            f"WHEEL_PLATFORM={this_platform()} WHEEL_PYTHON={this_python()}")
    missing = [w["file"] for w in manifest.get("wheels", []) if not (Path(folder) / w["file"]).is_file()]
    if missing:
        raise WheelhouseError(f"the wheelhouse {folder} lacks {len(missing)} of the wheels its manifest lists "
                              f"(the first: {missing[0]}): copy the whole folder")
    if not any(w["name"] == "pip" for w in manifest.get("wheels", [])):
        raise WheelhouseError(f"the wheelhouse {folder} carries no pip wheel to install with")
    return manifest


def installed_versions() -> dict[str, str]:
    """{distribution: version} that this Python finds (the first of a name on its path, as an import would)."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonicalize_name(name), dist.version)
    return found


def choose(manifest: Mapping, have: Mapping[str, str]) -> tuple[list[dict], list[tuple[str, str, str]], list[str]]:
    """(wheels to install, the node's versions they shadow, what the book needs that neither has) for a node
    whose Python has ``have``. pip is the installer, never installed."""
    pinned = {canonicalize_name(n) for n in manifest.get("pinned_on_the_node", [])}
    install, shadowed = [], []
    for wheel in manifest["wheels"]:
        name = wheel["name"]
        if name == "pip":
            continue
        theirs = have.get(name)
        if theirs is None:
            install.append(wheel)
        elif name in pinned and theirs != wheel["version"]:
            install.append(wheel)
            shadowed.append((name, theirs, wheel["version"]))
    carried = {w["name"] for w in manifest["wheels"]}
    wanted = [canonicalize_name(n) for n in [*manifest.get("needed", []), *manifest.get("usually_on_the_node", [])]]
    lacking = [name for name in wanted if name not in have and name not in carried]
    return install, shadowed, lacking


def install_command(python: str, wheelhouse: Path, manifest: Mapping, wheels: list[dict], target: Path) -> list[str]:
    """pip, run from its own wheel, installing exactly ``wheels`` (their dependencies are in the set or the node's)
    into ``target``, from the wheelhouse alone."""
    pip_wheel = next(w["file"] for w in manifest["wheels"] if w["name"] == "pip")
    return [python, str(Path(wheelhouse) / pip_wheel / "pip"), "install", "--no-index", "--find-links",
            str(wheelhouse), "--no-deps", "--target", str(target), "--no-compile", "--disable-pip-version-check",
            "--no-warn-script-location", "--quiet", *(str(Path(wheelhouse) / w["file"]) for w in wheels)]


def pip_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment pip runs in: no PIP_ setting and no configuration file of the node's (an index or a
    find-links there would be asked), no PYTHONPATH (the private folder is written, not read)."""
    environ = os.environ if environ is None else environ
    env = {k: v for k, v in environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def install(wheelhouse: Path, parent: Path, log: Path, python: str | None = None,
            have: Mapping[str, str] | None = None) -> NodePackages:
    """Install what this node's Python lacks (and the book's pins) from ``wheelhouse`` into a folder under
    ``parent`` named after what it holds, reused where an earlier run finished the same install. pip's output
    goes to ``log``. Raises :class:`WheelhouseError` where the wheelhouse cannot serve this Python or pip fails."""
    wheelhouse = Path(wheelhouse).resolve()
    manifest = read_wheelhouse(wheelhouse)
    python = python or sys.executable
    wheels, shadowed, lacking = choose(manifest, installed_versions() if have is None else have)
    result = NodePackages(str(wheelhouse), installed=[f"{w['name']} {w['version']}" for w in wheels],
                          shadowed=shadowed, lacking=lacking)
    if not wheels:
        return result
    key = hashlib.sha256(json.dumps([this_python(), sorted(w["file"] for w in wheels)]).encode()).hexdigest()[:12]
    folder = Path(parent) / f"node-packages-{this_python()}-{key}"
    result.folder = str(folder)
    if (folder / DONE).is_file():
        result.reused = True
        return result
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(folder, ignore_errors=True)
    partial.mkdir(parents=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log, "w", encoding="utf-8") as out:
        try:
            done = subprocess.run(install_command(python, wheelhouse, manifest, wheels, partial), stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=pip_environment(),
                                  timeout=INSTALL_LIMIT_S, check=False)
        except subprocess.TimeoutExpired:
            raise WheelhouseError(f"pip did not finish installing from {wheelhouse} in {INSTALL_LIMIT_S} s "
                                  f"(its output: {log})") from None
    result.seconds = time.monotonic() - started
    if done.returncode != 0:
        tail = [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
        raise WheelhouseError(f"pip could not install from {wheelhouse} (exit status {done.returncode})"
                              + (f": {tail[-1].strip()}" if tail else "") + f"; its output: {log}")
    (partial / DONE).write_text(json.dumps({"wheelhouse": str(wheelhouse), "installed": result.installed}, indent=1),
                                encoding="utf-8")
    partial.replace(folder)
    return result
