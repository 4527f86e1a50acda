"""What this machine is, read in one place: its CPU (name, cores, SIMD flags, maximum clock), the NVIDIA GPUs and
driver that ``nvidia-smi`` lists, and the clocks of the GPU behind one of torch's CUDA devices.

The rest of gpukit asks here: :mod:`gpukit.core.peaks` estimates the CPU's peak from :func:`parse_cpuinfo` and
:func:`reported_max_mhz`; ``python -m booktools bench`` records the host, the driver and each GPU's clocks; the doctor
lists :func:`nvidia_smi_gpus`; the roofline reads the PCIe link with :func:`nvidia_smi_query`.

nvidia-smi lists every GPU of the node in PCI bus order and ignores ``CUDA_VISIBLE_DEVICES``, while torch numbers
the GPUs it can see from 0 in CUDA's order, so torch's ``cuda:0`` can be nvidia-smi's second line (a Slurm job
given the node's second GPU, ``CUDA_VISIBLE_DEVICES=1``). A GPU's facts are therefore matched by its UUID
(:func:`cuda_uuid`, :func:`gpu_clocks`), never by position.
"""

from __future__ import annotations

import math
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

__all__ = ["CPUINFO", "DRIVER_FILE", "SYS_CPU", "cpu_name", "cuda_uuid", "driver_in_smi_lines", "driver_version",
           "gpu_clocks", "gpu_link", "kernel_module_driver", "nvidia_smi_gpus", "nvidia_smi_query", "parse_cpuinfo",
           "parse_lscpu_max_mhz", "physical_cores", "reported_max_mhz"]

CPUINFO = Path("/proc/cpuinfo")
SYS_CPU = Path("/sys/devices/system/cpu")
DRIVER_FILE = Path("/proc/driver/nvidia/version")


# ------------------------------------------------------------------------------------------ the CPU
def parse_cpuinfo(text: str) -> dict:
    """Physical cores, clock in MHz (largest reported) and SIMD flags from the text of ``/proc/cpuinfo``."""
    cores, mhz, flags, logical = set(), [], set(), 0
    block: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if "processor" in block:
                logical += 1
                cores.add((block.get("physical id", "0"), block.get("core id", block["processor"])))
                if "cpu MHz" in block:
                    mhz.append(float(block["cpu MHz"]))
                flags.update(block.get("flags", "").split())
            block = {}
            continue
        key, _, value = line.partition(":")
        block[key.strip()] = value.strip()
    return {"cores": len(cores), "logical": logical, "mhz": max(mhz) if mhz else None, "flags": flags}


def physical_cores() -> int | None:
    """This machine's physical cores, from ``/proc/cpuinfo``; ``None`` where it cannot be read (macOS, Windows)."""
    try:
        return parse_cpuinfo(CPUINFO.read_text(encoding="utf-8"))["cores"] or None
    except OSError:
        return None


def cpu_name() -> str:
    """The processor's model name where the system tells it, else its architecture."""
    try:
        with CPUINFO.open(encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def parse_lscpu_max_mhz(text: str) -> float | None:
    """The largest ``CPU max MHz`` in the text of ``lscpu``'s output, or ``None`` where it reports none.

    Virtual machines often report none; machines with two kinds of core report one per kind.
    """
    found = []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() == "cpu max mhz":
            try:
                found.append(float(value.strip().replace(",", ".")))
            except ValueError:
                continue
    found = [mhz for mhz in found if math.isfinite(mhz) and mhz > 0]
    return max(found) if found else None


def _sysfs_max_mhz() -> float | None:
    found = []
    for path in SYS_CPU.glob("cpu[0-9]*/cpufreq/cpuinfo_max_freq"):
        try:
            found.append(int(path.read_text().strip()) / 1000)  # the files are in kHz
        except (OSError, ValueError):
            continue
    return max(found) if found else None


def _lscpu_text() -> str | None:
    if shutil.which("lscpu") is None:
        return None
    try:
        # The C locale keeps the field names and the decimal point the parser expects.
        done = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10,
                              env={**os.environ, "LC_ALL": "C"}, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def reported_max_mhz() -> tuple[float, str] | None:
    """The maximum clock this system reports, in MHz, and where it was read; ``None`` where it reports none."""
    mhz = _sysfs_max_mhz()
    if mhz:
        return mhz, f"maximum clock from {SYS_CPU}/cpu*/cpufreq/cpuinfo_max_freq"
    text = _lscpu_text()
    mhz = parse_lscpu_max_mhz(text) if text else None
    if mhz:
        return mhz, "maximum clock from lscpu's CPU max MHz"
    return None


# ------------------------------------------------------------------------------------------ NVIDIA GPUs
def _nvidia_smi(arguments: list[str]) -> list[str] | None:
    """nvidia-smi's non-empty output lines for ``arguments``; ``None`` where it is missing or fails."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", *arguments], capture_output=True, text=True, timeout=20,
                             check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    return [line.strip() for line in out.splitlines() if line.strip()]


def nvidia_smi_query(fields: str, index: int | None = None) -> list[str] | None:
    """nvidia-smi's answer to ``--query-gpu=<fields>`` (no header, no units): one line per GPU in PCI bus order, or
    GPU ``index``'s only (nvidia-smi's own numbering, not torch's); ``None`` where nvidia-smi is missing or fails."""
    selected = [] if index is None else [f"--id={index}"]
    return _nvidia_smi([*selected, f"--query-gpu={fields}", "--format=csv,noheader,nounits"])


def nvidia_smi_gpus() -> list[str] | None:
    """GPU name, memory and driver version as ``nvidia-smi`` lists them (``"NVIDIA A100-SXM4-40GB, 40960 MiB,
    535.104.05"``); ``None`` when the command is absent or fails."""
    return _nvidia_smi(["--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"])


def kernel_module_driver(path: str | os.PathLike | None = None) -> str | None:
    """The driver version the NVIDIA kernel module reports (``NVRM version: ... Kernel Module  580.95.05 ...``), read
    where nvidia-smi is missing (``path`` defaults to :data:`DRIVER_FILE`); ``None`` where the file is absent or
    names none."""
    try:
        text = Path(DRIVER_FILE if path is None else path).read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("NVRM"):
            match = re.search(r"\s(\d{3,}\.\d+(?:\.\d+)?)\s", line + " ")
            if match:
                return match.group(1)
    return None


def driver_in_smi_lines(lines) -> str | None:
    """The driver version in lines of :func:`nvidia_smi_gpus` (name, memory, driver version), or ``None``."""
    for line in lines or ():
        fields = [part.strip() for part in line.split(",")]
        if len(fields) > 2 and re.fullmatch(r"\d+(\.\d+)*", fields[2]):
            return fields[2]
    return None


def driver_version() -> str | None:
    """The NVIDIA driver's version: nvidia-smi's ``driver_version``, else the kernel module's; ``None`` without
    either (no NVIDIA driver here)."""
    lines = nvidia_smi_query("driver_version")
    found = lines[0] if lines and re.fullmatch(r"\d+(\.\d+)*", lines[0]) else None
    return found or kernel_module_driver()


def _plain_uuid(text: str) -> str:
    """A GPU's UUID as lower-case hex groups: nvidia-smi writes ``GPU-5f1c0e51-...``, torch ``5f1c0e51-...``."""
    text = text.strip().lower()
    return text[len("gpu-"):] if text.startswith("gpu-") else text


def cuda_uuid(index: int) -> str | None:
    """The UUID of torch's CUDA device ``index`` as nvidia-smi writes it (``GPU-5f1c0e51-7e8f-...``), or ``None`` where
    torch gives none.

    ``torch.cuda.get_device_properties(i).uuid`` is a ``torch._C._CUuuid`` (the driver's 16 bytes, ``cudaDeviceProp``'s
    ``uuid``) whose ``str()`` is the 8-4-4-4-12 lower-case hex form without nvidia-smi's ``GPU-`` prefix
    (pytorch/pytorch, torch/csrc/cuda/Module.cpp: ``registerCudaDeviceProperties`` and ``uuid_to_string``); a MIG
    instance has its own UUID, which no line of ``--query-gpu`` carries.
    """
    try:
        import torch  # lazy: torch is heavy, and only a CUDA machine asks

        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    except (ImportError, AssertionError, RuntimeError):  # no torch, or a torch without CUDA or this device
        return None
    text = _plain_uuid(str(uuid)) if uuid is not None else ""
    return f"GPU-{text}" if re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", text) else None


def _mhz(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def _rows_by_uuid(fields: str) -> list[list[str]] | None:
    """nvidia-smi's ``uuid`` and ``fields`` (two, comma-separated), one row of stripped values per GPU; ``None``
    where nvidia-smi is missing or fails. torch's device numbers are not nvidia-smi's (PCI order, blind to
    ``CUDA_VISIBLE_DEVICES``): only the UUID in a row's first place says which GPU the row is."""
    lines = nvidia_smi_query(f"uuid,{fields}")
    if lines is None:
        return None
    return [row for row in ([part.strip() for part in line.split(",")] for line in lines) if len(row) == 3]


def gpu_link(uuid: str | None) -> tuple[int, int] | None:
    """(PCIe generation, lanes) of the GPU whose UUID is ``uuid`` (as :func:`cuda_uuid` gives it): the most the GPU
    and this system allow (``pcie.link.gen.max``, ``pcie.link.width.max``; the current values drop while the GPU
    idles). Without a UUID (a CuPy-only kernel has no torch to ask) only a node with a single GPU is unambiguous.
    ``None`` where nvidia-smi is missing, no line is this GPU's, or it answers ``[N/A]``."""
    rows = _rows_by_uuid("pcie.link.gen.max,pcie.link.width.max") or []
    if uuid is None:
        mine = rows if len(rows) == 1 else []
    else:
        mine = [row for row in rows if _plain_uuid(row[0]) == _plain_uuid(uuid)]
    try:
        return (int(mine[0][1]), int(mine[0][2])) if mine else None
    except ValueError:
        return None


def gpu_clocks(uuid: str | None) -> tuple[dict | None, str]:
    """The maximum SM and memory clocks in MHz (``{"sm_max_mhz": ..., "memory_max_mhz": ...}``) of the GPU whose
    UUID is ``uuid`` (as :func:`cuda_uuid` gives it), and where they were read; ``(None, why)`` where nvidia-smi
    lists no GPU of that UUID, or no clocks for it. Never another GPU's clocks."""
    if uuid is None:
        return None, "no clocks: torch gives no UUID for this device, so nvidia-smi's lines cannot be matched to it"
    rows = _rows_by_uuid("clocks.max.sm,clocks.max.memory")
    if rows is None:
        return None, "no clocks: nvidia-smi is missing or failed"
    for row in rows:
        if _plain_uuid(row[0]) == _plain_uuid(uuid):
            clocks = {"sm_max_mhz": _mhz(row[1]), "memory_max_mhz": _mhz(row[2])}
            if not any(clocks.values()):
                return None, f"no clocks: nvidia-smi reports none for {uuid}"
            return clocks, f"nvidia-smi's clocks.max.sm and clocks.max.memory of {uuid}"
    return None, (f"no clocks: nvidia-smi lists no GPU with the UUID {uuid} (a MIG instance, or a GPU nvidia-smi "
                  "does not show)")
