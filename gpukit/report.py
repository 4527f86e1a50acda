"""The environment report: what this machine offers the lessons, what is missing, and how to fix it.

Run it as ``python -m gpukit doctor`` from a terminal, or call :func:`environment_report` in a notebook.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import cuda_stacks
from . import device as _device
from .memory import device_memory
from .optional import distribution_of, install_command
from .paths import project_root
from .units import human_bytes

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

OK, PROBLEM, NOTE = "ok", "problem", "note"


@dataclass(frozen=True)
class Finding:
    """One line of the report. ``fix`` is the exact command that resolves a problem."""

    topic: str
    status: str
    detail: str
    fix: str | None = None


@dataclass
class Report:
    device: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.status == PROBLEM]

    @property
    def ready(self) -> bool:
        return not self.problems

    def to_text(self) -> str:
        width = max(len(f.topic) for f in self.findings)
        lines = []
        for f in self.findings:
            mark = {OK: "ok  ", PROBLEM: "FIX ", NOTE: "note"}[f.status]
            lines.append(f"[{mark}] {f.topic:<{width}}  {f.detail}")
            if f.fix:
                lines.append(f"       {'':<{width}}  -> {f.fix}")
        verdict = "Ready: nothing to fix." if self.ready else f"{len(self.problems)} problem(s) to fix (see FIX lines)."
        return "\n".join([f"Lessons will run on: {self.device}", *lines, verdict])

    def to_markdown(self) -> str:
        rows = ["| | topic | finding | fix |", "|---|---|---|---|"]
        for f in self.findings:
            mark = {OK: "✅", PROBLEM: "❌", NOTE: "ℹ️"}[f.status]
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


def nvidia_smi_gpus() -> list[str] | None:
    """GPU name, memory and driver version as ``nvidia-smi`` lists them (``"NVIDIA A100-SXM4-40GB, 40960 MiB,
    535.104.05"``); ``None`` when the command is absent or fails."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    return [line.strip() for line in out.splitlines() if line.strip()]


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


def _driver_version(smi_gpus: list[str] | None) -> str | None:
    """The driver version in nvidia-smi's lines (its third field), if they carry one."""
    fields = [part.strip() for part in smi_gpus[0].split(",")] if smi_gpus else []
    return fields[2] if len(fields) > 2 and fields[2][:1].isdigit() else None


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
    if smi_gpus:
        findings.append(Finding("nvidia-smi", OK, "; ".join(smi_gpus)))
        driver = _driver_version(smi_gpus)
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
            driver = _driver_version(smi_gpus)
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
    findings = [device_finding, *_machine_findings(), *_library_findings(), *_gpu_findings(nvidia_smi_gpus())]
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
