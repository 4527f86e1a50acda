"""Choosing the device a lesson runs on: CUDA, then Apple MPS, then the CPU.

Two environment variables steer the choice without editing a notebook:

``GPUKIT_DEVICE``
    Force a device (``cpu``, ``cuda``, ``cuda:1``, ``mps``), e.g. to compare a GPU node's CPU with its GPU.
``GPUKIT_REQUIRE_GPU``
    When true (``1``, ``true``, ``yes``), choosing the CPU is an error. GPU CI runners set it, so that a
    runner whose GPU silently went missing fails at a notebook's start instead of passing on the CPU.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Iterable

from gpukit.base.units import human_bytes
from gpukit.core.machine import cpu_name

DEVICE_ENV = "GPUKIT_DEVICE"
REQUIRE_GPU_ENV = "GPUKIT_REQUIRE_GPU"

_DEVICE_PATTERN = re.compile(r"^(cuda)(:\d+)?$|^(mps|cpu)$")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


class NoGPUError(RuntimeError):
    """A GPU was required (``GPUKIT_REQUIRE_GPU``) but the chosen device is the CPU."""


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def cuda_available() -> bool:
    """True when PyTorch sees at least one CUDA (or ROCm) device."""
    torch = _torch()
    return bool(torch is not None and torch.cuda.is_available())


def mps_available() -> bool:
    """True when PyTorch can use Apple's Metal Performance Shaders backend."""
    torch = _torch()
    return bool(torch is not None and torch.backends.mps.is_available())


def available_devices() -> list[str]:
    """The devices this machine offers, best first; the CPU is always last."""
    found = []
    if cuda_available():
        found.extend(f"cuda:{i}" for i in range(_torch().cuda.device_count()))
    if mps_available():
        found.append("mps")
    found.append("cpu")
    return found


def gpu_required() -> bool:
    """Read ``GPUKIT_REQUIRE_GPU``; an unreadable value is an error rather than a silent no."""
    raw = os.environ.get(REQUIRE_GPU_ENV, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ValueError(
        f"{REQUIRE_GPU_ENV}={os.environ[REQUIRE_GPU_ENV]!r} is not understood; use 1 (require a GPU) or 0."
    )


def validate_device(name: str) -> str:
    """Return ``name`` normalised (``"CUDA"`` -> ``"cuda"``), or raise ``ValueError`` naming it."""
    if not isinstance(name, str):
        raise TypeError(f"a device name must be a string such as 'cuda' or 'cpu', not {type(name).__name__} {name!r}")
    normalised = name.strip().lower()
    if not _DEVICE_PATTERN.match(normalised):
        raise ValueError(f"unknown device {name!r}; expected one of cuda, cuda:N, mps, cpu")
    return normalised


def device_available(device: str) -> bool:
    """True when the (already validated) ``device`` exists here: ``cpu`` always does."""
    if device == "cpu":
        return True
    if device == "mps":
        return mps_available()
    index = int(device.split(":")[1]) if ":" in device else 0
    return cuda_available() and index < _torch().cuda.device_count()


def devices_to_run(devices: str | Iterable[str] | None = None, what: str = "run on") -> list[str]:
    """The devices a command measures: every device present (:func:`available_devices`) for ``None``, else the ones
    named (a name or several), normalised, in order, without repeats. A device that is not present here, or an
    empty list, is a ``ValueError`` naming what is present; ``what`` names the work in that message."""
    if devices is None:
        return available_devices()
    if isinstance(devices, str):
        devices = [devices]
    resolved = [validate_device(d) for d in devices]
    absent = [d for d in resolved if not device_available(d)]
    if absent:
        raise ValueError(f"device(s) {absent} are not present here; present: {', '.join(available_devices())}")
    if not resolved:
        raise ValueError(f"no devices to {what}")
    return list(dict.fromkeys(resolved))


def pick_device(preferred: str | None = None) -> str:
    """Choose the device to run on and return its name (``"cuda"``, ``"cuda:1"``, ``"mps"`` or ``"cpu"``).

    The order is: ``preferred`` if given, else ``GPUKIT_DEVICE`` if set, else the best available device
    (CUDA > MPS > CPU). Asking for a device that is not present is an error, not a quiet fallback.
    """
    source = "argument"
    if preferred is None:
        preferred = os.environ.get(DEVICE_ENV) or None
        source = DEVICE_ENV
    if preferred is None:
        device = "cuda" if cuda_available() else "mps" if mps_available() else "cpu"
    else:
        device = validate_device(preferred)
        if not device_available(device):
            raise RuntimeError(
                f"device {device!r} (from {source}) is not available here; available: {', '.join(available_devices())}"
            )
    if device == "cpu" and gpu_required():
        raise NoGPUError(
            f"{REQUIRE_GPU_ENV} is set but no GPU is usable (available: {', '.join(available_devices())}). "
            "Check `nvidia-smi`, that the job asked for a GPU, and that torch is a CUDA build "
            "(`python -m gpukit doctor`)."
        )
    return device


def describe_device(device: str) -> str:
    """One line naming the hardware behind ``device``, e.g. ``cuda:0 (NVIDIA A100-SXM4-40GB, 40.0 GiB)``."""
    device = validate_device(device)
    if not device_available(device):
        # Asking torch about an absent device fails deep inside CUDA or Metal, with a less useful message.
        raise RuntimeError(f"device {device!r} is not available here; available: {', '.join(available_devices())}")
    if device.startswith("cuda"):
        torch = _torch()
        index = int(device.split(":")[1]) if ":" in device else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        return f"cuda:{index} ({props.name}, {human_bytes(props.total_memory)})"
    if device == "mps":
        return f"mps (Apple GPU on {platform.machine()}, {platform.mac_ver()[0] or 'macOS'})"
    return f"cpu ({cpu_name()}, {os.cpu_count()} logical cores)"


def announce_device(preferred: str | None = None) -> str:
    """Pick the device, print which one this run uses, and return its name: a lesson's stamp cell."""
    device = pick_device(preferred)
    print(f"Running on {describe_device(device)}")
    return device


def skip_unless(condition: bool, reason: str) -> bool:
    """Return ``condition``; when it is false, print why the cell is skipping.

    Use as ``if skip_unless(cuda_available(), "pinned memory needs CUDA"): ...`` so that a notebook still
    runs to the end where the hardware is missing, and says so.
    """
    if not condition:
        print(f"Skipped: {reason}")
        SKIPS.append(reason)
    return bool(condition)


# Every reason skip_unless gave in this Python process: the book's tests tell a solution that skipped (its
# library or GPU is missing here) from one that never ran its check.
SKIPS: list[str] = []
