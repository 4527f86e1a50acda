"""The environment report: what this machine offers the lessons, what is missing, and how to fix it.

Run it as ``python -m gpukit doctor`` from a terminal, or call :func:`environment_report` in a notebook.

Besides what is missing, it names drift: each library a lesson imports whose installed version differs from the
book's lock (``requirements/lock.txt``, the versions the lessons were checked with), as a warning line that says
which lessons the difference can break (:func:`version_drift`). A cluster's own module (numpy 2.5 where the book
pins 2.4) is the usual source: the lessons may still run, or fail deep inside a library.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import json
import os
import platform
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from gpukit.base import cuda_stacks
from gpukit.base.child_python import pip_command
from gpukit.base.paths import project_root
from gpukit.base.units import human_bytes
from gpukit.core import device as _device
from gpukit.core.machine import driver_in_smi_lines, nvidia_smi_gpus
from gpukit.core.memory import device_memory
from gpukit.core.optional import DISTRIBUTIONS, distribution_of, install_command, installed_version

# (import name, distribution name, what the book uses it for)
CORE_LIBRARIES = (
    ("numpy", "numpy", "arrays on the CPU"),
    ("torch", "torch", "tensors on CUDA, MPS and the CPU"),
    ("jax", "jax", "the JAX chapter"),
    ("matplotlib", "matplotlib", "plots"),
    ("pandas", "pandas", "tables of results"),
    ("threadpoolctl", "threadpoolctl", "controlling BLAS threads"),
    ("tqdm", "tqdm", "progress bars"),
)
# (import name, what the book uses it for); the distribution depends on the CUDA stack (optional.distribution_of).
GPU_LIBRARIES = (("cupy", "the CuPy chapter (NVIDIA GPUs only)"),)

OK, PROBLEM, NOTE, WARNING = "ok", "problem", "note", "warning"


@dataclass(frozen=True)
class Finding:
    """One line of the report. ``fix`` is the exact command that resolves a problem."""

    topic: str
    status: str
    detail: str
    fix: str | None = None


# What a report that found no GPU means to an attendee: ready, but for the CPU only.
NO_GPU_NOTE = ("No GPU here, only the CPU: the lessons' GPU cells will skip, each saying why. In a GPU workshop, "
               "stop this server and start one with a GPU (on a JupyterHub: File > Hub Control Panel).")


@dataclass
class Report:
    device: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.status == PROBLEM]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.status == WARNING]

    @property
    def ready(self) -> bool:
        """No problem to fix (warnings, such as versions that differ from the pins, do not count)."""
        return not self.problems

    def verdict(self) -> str:
        if self.problems:
            return f"{len(self.problems)} problem(s) to fix (see FIX lines)."
        if self.warnings:
            verdict = (f"Ready, with {len(self.warnings)} warning(s): the lessons named on the warn lines may fail "
                       "where this environment differs from the book's pins.")
        else:
            verdict = "Ready: nothing to fix."
        return f"{verdict} {NO_GPU_NOTE}" if self.device.startswith("cpu") else verdict

    def to_text(self) -> str:
        width = max(len(f.topic) for f in self.findings)
        lines = []
        for f in self.findings:
            mark = {OK: "ok  ", PROBLEM: "FIX ", NOTE: "note", WARNING: "warn"}[f.status]
            lines.append(f"[{mark}] {f.topic:<{width}}  {f.detail}")
            if f.fix:
                lines.append(f"       {'':<{width}}  -> {f.fix}")
        return "\n".join([f"Lessons will run on: {self.device}", *lines, self.verdict()])

    def to_markdown(self) -> str:
        rows = ["| | topic | finding | fix |", "|---|---|---|---|"]
        for f in self.findings:
            mark = {OK: "✅", PROBLEM: "❌", NOTE: "ℹ️", WARNING: "⚠️"}[f.status]
            detail = f.detail.replace("|", "\\|")
            fix = f"`{f.fix}`" if f.fix else ""
            rows.append(f"| {mark} | {f.topic} | {detail} | {fix} |")
        return "\n".join(rows)

    def __str__(self) -> str:
        return self.to_text()


def library_version(import_name: str) -> str | None:
    """The version of an importable library, or ``None`` when it cannot be imported."""
    try:
        module = importlib.import_module(import_name)
    except Exception:  # noqa: BLE001 - a broken install is as unusable as a missing one
        return None
    return getattr(module, "__version__", None) or importlib.metadata.version(import_name)


def shown_path(path: str) -> str:
    """``path`` as a reader needs it, without the build machine's folders: relative to the book's folder,
    or to the Python environment it belongs to."""
    target = Path(path)
    try:
        return f"{target.relative_to(project_root())} in the book's folder"
    except (ValueError, FileNotFoundError):
        pass
    try:
        return f"{target.relative_to(sys.prefix)} in the environment {Path(sys.prefix).name!r}"
    except ValueError:
        return str(target)


def _machine_findings() -> list[Finding]:
    ram = device_memory("cpu")
    return [
        Finding("python", OK, f"{platform.python_version()} ({shown_path(sys.executable)})"),
        Finding("machine", OK, f"{platform.system()} {platform.machine()}, {_device.describe_device('cpu')}"),
        Finding("memory", OK, f"{human_bytes(ram.total)} RAM, {human_bytes(ram.free)} available"
                if ram.total else "RAM size unknown"),
    ]


def _library_findings() -> list[Finding]:
    findings = []
    for import_name, dist, purpose in CORE_LIBRARIES:
        version = library_version(import_name)
        if version is None:
            findings.append(Finding(import_name, PROBLEM, f"missing; needed for {purpose}", install_command(dist)))
        else:
            findings.append(Finding(import_name, OK, version))
    return findings


# ------------------------------------------------------------------------------------------ drift
LOCK = "requirements/lock.txt"
# One pin of the lock: ``name==version``, then an optional environment marker (``; sys_platform == 'linux'``).
_LOCK_LINE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(?P<version>[^\s;]+)\s*"
                        r"(?:;\s*(?P<marker>.+?))?\s*$")
# Libraries a lesson needs without importing them itself, each with the import that pulls it in and why. Only
# cases known to break a lesson, or versioned in lockstep with the library imported.
TRANSITIVE = {
    "numba-cuda": (("numba", "Numba's CUDA target (numba.cuda) comes from numba-cuda"),),
    "numpy": (("numba", "numba-cuda needs the pinned NumPy: 0.30.4 calls np.row_stack, which NumPy 2.5 removed"),),
    "jaxlib": (("jax", "jaxlib is JAX's compiled half, released with jax"),),
    "jax-cuda13-plugin": (("jax", "JAX's CUDA plugin is released with jax"),),
    "jax-cuda13-pjrt": (("jax", "JAX's CUDA plugin is released with jax"),),
}
# Import names whose distribution has another name (besides gpukit.core.optional.DISTRIBUTIONS); CuPy's wheel is named
# after its CUDA major, so any locked cupy-cuda* matches.
_IMPORT_DISTRIBUTIONS = {**DISTRIBUTIONS, "IPython": "ipython", "PIL": "pillow", "yaml": "pyyaml",
                         "cupyx": "cupy", "skimage": "scikit-image"}


def canonical(name: str) -> str:
    """A distribution's name as the packaging standards compare them (PEP 503: lower case, runs of -_. as -)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _marker_holds(marker: str | None, environment: Mapping[str, str] | None) -> bool:
    if not marker:
        return True
    from packaging.markers import Marker

    return Marker(marker).evaluate(dict(environment) if environment is not None else None)


def locked_versions(lock: Path | str | None = None, environment: Mapping[str, str] | None = None) -> dict[str, str]:
    """{canonical distribution name: version} from the lock, for the pins whose marker holds on this machine (or
    in ``environment``, a dict of PEP 508 marker variables that replace this machine's): the lock pins some
    packages twice, once per Python or platform (contourpy 1.3.3 below Python 3.12, 1.4.0 from it)."""
    path = Path(lock) if lock is not None else project_root() / LOCK
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        found = _LOCK_LINE.match(line.strip())
        if found and _marker_holds(found["marker"], environment):
            pins[canonical(found["name"])] = found["version"]
    return pins


def _strip_magics(code: str) -> str:
    """A cell's code without IPython's line magics and shell escapes (``%time``, ``!nvidia-smi``), which
    Python's parser refuses."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in code.splitlines())


def imports_of(code: str) -> set[str]:
    """The top-level names a cell's code imports: ``import x.y``, ``from x import y``, and the libraries it loads
    by name, ``optional_import("x", ...)`` and ``importlib.import_module("x")``."""
    names = set()
    try:
        tree = ast.parse(_strip_magics(code))
    except SyntaxError:  # cell magics (%%time) and the like: read the import lines
        for found in re.finditer(r"^\s*(?:from\s+([\w.]+)\s+import|import\s+([\w., ]+))", code, re.M):
            names.update(part.split()[0] for part in (found[1] or found[2]).split(",") if part.strip())
        names.update(re.findall(r"""(?:optional_import|import_module)\(\s*["']([\w.]+)["']""", code))
        return {name.split(".")[0] for name in names}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if called in ("optional_import", "import_module") and isinstance(node.args[0].value, str):
                names.add(node.args[0].value)
    return {name.split(".")[0] for name in names}


@lru_cache(maxsize=4)
def lesson_imports(folder: Path | None = None) -> dict[str, frozenset[str]]:
    """{top-level import name: the lessons (notebook names without .ipynb) whose code cells import it}, read from
    the notebooks in ``folder`` (the book's notebooks/ by default)."""
    folder = project_root() / "notebooks" if folder is None else Path(folder)
    found: dict[str, set[str]] = {}
    for path in sorted(folder.glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        for cell in cells:
            if cell.get("cell_type") == "code":
                code = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
                for name in imports_of(code):
                    found.setdefault(name, set()).add(path.stem)
    return {name: frozenset(lessons) for name, lessons in found.items()}


def _distribution_matches(import_name: str, distribution: str) -> bool:
    wanted = canonical(_IMPORT_DISTRIBUTIONS.get(import_name, import_name))
    return distribution == wanted or (wanted == "cupy" and distribution.startswith("cupy-cuda"))


@dataclass(frozen=True)
class Drift:
    """A library whose installed version differs from the lock's, with the lessons that import it (``lessons``)
    and those that need it through another library they import (``through``: (that import, its lessons, why))."""

    distribution: str
    installed: str
    pinned: str
    lessons: tuple[str, ...] = ()
    through: tuple[tuple[str, tuple[str, ...], str], ...] = ()

    def affected(self) -> list[str]:
        return sorted({*self.lessons, *(lesson for _, lessons, _ in self.through for lesson in lessons)})

    def detail(self) -> str:
        text = f"{self.installed} installed, the book's lock pins {self.pinned}"
        affected = self.affected()
        if not affected:
            return f"{text}; no lesson imports it"
        parts = [_numbers(self.lessons)] if self.lessons else []
        parts += [f"{_numbers(lessons)} through {name} ({why})" for name, lessons, why in self.through]
        return f"{text}: can break lesson(s) {'; '.join(parts)}"


def _numbers(lessons) -> str:
    """Lessons by their numbers: 01, 09."""
    return ", ".join(lesson.split("-")[0] for lesson in lessons)


def _same_release(installed: str, pinned: str) -> bool:
    """2.13.0+cu130 is the pinned 2.13.0: a local label (+cpu, +cu129) names the build, not the release."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(installed).public == Version(pinned).public
    except InvalidVersion:
        return installed == pinned


def version_drift(lock: Path | str | None = None, notebooks: Path | None = None,
                  installed: Callable[[str], str | None] = installed_version,
                  environment: Mapping[str, str] | None = None) -> list[Drift]:
    """Each library the lessons use (their imports, :data:`TRANSITIVE`, and gpukit's :data:`CORE_LIBRARIES`)
    that is installed at another version than the lock's, with the lessons it can break. Libraries that are
    not installed are not drift (the report's other lines, and the lessons' skip messages, cover them), nor are
    those the lock does not pin here (CUDA 12 stacks, whose torch comes from PyTorch's own index)."""
    pins = locked_versions(lock, environment)
    imports = lesson_imports(None if notebooks is None else Path(notebooks))
    used = {canonical(dist) for _, dist, _ in CORE_LIBRARIES} | set(TRANSITIVE)
    used |= {dist for dist in pins if any(_distribution_matches(name, dist) for name in imports)}
    drift = []
    for dist in sorted(used & pins.keys()):
        version = installed(dist)
        if version is None or _same_release(version, pins[dist]):
            continue
        lessons = sorted({lesson for name, found in imports.items() if _distribution_matches(name, dist)
                          for lesson in found})
        through = tuple((name, tuple(sorted(imports[name])), why) for name, why in TRANSITIVE.get(dist, ())
                        if imports.get(name))
        drift.append(Drift(dist, version, pins[dist], tuple(lessons), through))
    return drift


def _drift_findings() -> list[Finding]:
    try:
        drift = version_drift()
    except FileNotFoundError as missing:  # gpukit without the book's repository around it: no lock to read
        return [Finding("pins", NOTE, f"not compared with the book's lock: {missing}")]
    except ImportError:
        return [Finding("pins", NOTE, "not compared with the book's lock: the packaging library is not installed")]
    if not drift:
        return [Finding("pins", OK, "every library the lessons use is at the version of requirements/lock.txt")]
    return [Finding(d.distribution, WARNING, d.detail(), f"{pip_command()} install {d.distribution}=={d.pinned}")
            for d in drift]


def _stack_finding(driver: str) -> Finding:
    """Which CUDA stack this driver runs, and whether the installed torch is built for one it can run."""
    stack = cuda_stacks.stack_for_driver(driver)
    oldest = cuda_stacks.STACKS[-1]
    if stack is None:
        return Finding("CUDA stack", PROBLEM, f"driver {driver} is older than any stack the book installs needs",
                       f"ask the cluster's admins for an NVIDIA driver {oldest.minimum_driver} or newer")
    torch_major = cuda_stacks.torch_cuda_major()
    if torch_major is not None and torch_major > stack.major:
        return Finding("CUDA stack", PROBLEM,
                       f"torch is built for CUDA {torch_major}, which driver {driver} cannot run; it runs {stack}",
                       cuda_stacks.install_command(stack))
    return Finding("CUDA stack", OK, f"driver {driver} runs {stack}")


def _gpu_findings(smi_gpus: list[str] | None) -> list[Finding]:
    findings = []
    torch_version = library_version("torch")
    driver = driver_in_smi_lines(smi_gpus)
    if smi_gpus:
        findings.append(Finding("nvidia-smi", OK, "; ".join(smi_gpus)))
        if driver:
            findings.append(_stack_finding(driver))
    else:
        findings.append(Finding("nvidia-smi", NOTE, "no NVIDIA GPU visible (command absent or lists none)"))

    if torch_version is not None:
        import torch

        if _device.cuda_available():
            for i in range(torch.cuda.device_count()):
                findings.append(Finding(f"torch cuda:{i}", OK, _device.describe_device(f"cuda:{i}")))
        elif smi_gpus:
            build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
            stack = (cuda_stacks.stack_for_driver(driver) if driver else None) or cuda_stacks.STACKS[0]
            findings.append(Finding(
                "torch + GPU", PROBLEM,
                f"nvidia-smi sees a GPU but torch ({build}) cannot use it",
                cuda_stacks.install_command(stack).replace(" install ", " install --force-reinstall ", 1),
            ))
        else:
            findings.append(Finding("torch cuda", NOTE, "no CUDA device (torch build: "
                                    f"{'CUDA ' + torch.version.cuda if torch.version.cuda else 'CPU only'})"))
        if _device.mps_available():
            findings.append(Finding("torch mps", OK, _device.describe_device("mps")))
        elif sys.platform == "darwin":
            findings.append(Finding("torch mps", NOTE, "MPS not available (needs Apple silicon and macOS 12.3+)"))

    if library_version("jax") is not None:
        import jax

        backend = jax.default_backend()
        if smi_gpus and backend == "cpu":
            # The JAX build must match torch's CUDA (one stack per environment); with a CPU torch, PyPI's stack.
            stack = cuda_stacks.stack_for_cuda(cuda_stacks.torch_cuda_major() or 0) or cuda_stacks.STACKS[0]
            findings.append(Finding("jax", PROBLEM, f"a GPU is visible but JAX runs on the CPU; install {stack}",
                                    cuda_stacks.install_command(stack)))
        else:
            findings.append(Finding("jax devices", OK if backend != "cpu" else NOTE,
                                    ", ".join(str(d) for d in jax.devices())))

    for import_name, purpose in GPU_LIBRARIES:
        version = library_version(import_name)
        if version is None:
            status = PROBLEM if smi_gpus else NOTE
            fix = install_command(distribution_of(import_name)) if smi_gpus else None
            findings.append(Finding(import_name, status, f"not installed; used by {purpose}", fix))
        else:
            import cupy

            usable = cupy.cuda.is_available()
            findings.append(Finding(import_name, OK if usable else NOTE,
                                    f"{version}, {'GPU usable' if usable else 'no usable GPU: lessons use NumPy'}"))
    return findings


def environment_report() -> Report:
    """Probe this machine and the installed libraries. Probing never raises: failures become findings."""
    try:
        chosen = _device.describe_device(_device.pick_device())
        device_finding = Finding("device", OK, f"lessons pick {chosen}")
    except (RuntimeError, ValueError) as error:
        chosen = "no usable device"
        # Either run where the requested GPU exists, or drop the request:
        device_finding = Finding("device", PROBLEM, str(error), f"unset {_device.DEVICE_ENV} {_device.REQUIRE_GPU_ENV}")
    findings = [device_finding, *_machine_findings(), *_library_findings(), *_drift_findings(),
                *_gpu_findings(nvidia_smi_gpus())]
    for variable in (_device.DEVICE_ENV, _device.REQUIRE_GPU_ENV, "CUDA_VISIBLE_DEVICES"):
        if variable in os.environ:
            findings.append(Finding(variable, NOTE, f"set to {os.environ[variable]!r}"))
    return Report(device=chosen, findings=findings)


def build_summary() -> dict[str, str]:
    """Short strings a book page can show about the machine that built it."""
    versions = {name: library_version(name) for name, _, _ in CORE_LIBRARIES}
    return {
        "device": _device.describe_device(_device.pick_device()),
        "python": platform.python_version(),
        "libraries": ", ".join(f"{name} {version}" for name, version in versions.items() if version),
    }
