"""Memory arithmetic: how many bytes an array needs, and how many a device has free."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from gpukit.base.arguments import is_whole_number
from gpukit.base.units import human_bytes
from gpukit.core.device import device_available, validate_device


def _itemsize(dtype) -> int:
    """Bytes per element for a NumPy, torch or JAX dtype, or a name such as ``"float32"``."""
    itemsize = getattr(dtype, "itemsize", None)  # torch.dtype and np.dtype both carry it
    if isinstance(itemsize, int):
        return itemsize
    try:
        return np.dtype(dtype).itemsize
    except TypeError as error:
        raise TypeError(f"unknown dtype {dtype!r}; use e.g. 'float32', numpy.float64 or torch.float16") from error


def nbytes(shape, dtype="float32") -> int:
    """Bytes needed by an array of ``shape`` and ``dtype`` (data only, no allocator overhead)."""
    if is_whole_number(shape):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError as error:
        raise TypeError(f"shape must be a whole number or a sequence of them, not {shape!r}") from error
    for dim in dims:
        if not is_whole_number(dim) or dim < 0:
            raise ValueError(f"every dimension must be a whole number >= 0; got {dim!r} in shape {shape!r}")
    return math.prod(int(d) for d in dims) * _itemsize(dtype)


FREE = "free"
HEADROOM = "headroom"


@dataclass(frozen=True)
class DeviceMemory:
    """Free and total bytes of a device; either may be ``None`` where the system does not say.

    ``free_kind`` says what ``free`` counts. ``"free"``: memory nobody holds (on CUDA, across all
    processes; on the CPU, what the system can give without swapping). ``"headroom"`` (MPS): how much
    more this process may take before Metal's recommended maximum, ``total``; the GPU shares the
    machine's memory with everything else, so neither number is the machine's free memory.
    """

    device: str
    free: int | None
    total: int | None
    free_kind: str = FREE

    def __str__(self) -> str:
        free = "unknown" if self.free is None else human_bytes(self.free)
        total = "unknown" if self.total is None else human_bytes(self.total)
        if self.free_kind == HEADROOM:
            return (f"{self.device}: {free} headroom for this process (Metal's recommended maximum {total} "
                    "minus what this process's Metal driver has allocated)")
        return f"{self.device}: {free} free of {total}"


def device_memory(device: str) -> DeviceMemory:
    """Free and total memory of ``device`` (``cpu`` is the machine's RAM); see :class:`DeviceMemory`."""
    device = validate_device(device)
    if not device_available(device):
        raise RuntimeError(f"device {device!r} is not available here")
    if device.startswith("cuda"):
        import torch

        # cudaMemGetInfo: the whole device's free memory, whichever process holds the rest.
        free, total = torch.cuda.mem_get_info(torch.device(device))
        return DeviceMemory(device, int(free), int(total))
    if device == "mps":
        import torch

        # Metal reports no free memory for a GPU that shares RAM; it recommends a ceiling per process.
        ceiling = int(torch.mps.recommended_max_memory())
        headroom = max(ceiling - int(torch.mps.driver_allocated_memory()), 0)
        return DeviceMemory(device, headroom, ceiling, free_kind=HEADROOM)
    return DeviceMemory("cpu", *_host_memory())


def _host_memory() -> tuple[int | None, int | None]:
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        info = psutil.virtual_memory()
        return int(info.available), int(info.total)
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        return page * os.sysconf("SC_AVPHYS_PAGES"), page * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None, None


# --------------------------------------------------------------------------- this process
@dataclass(frozen=True)
class ProcessMemory:
    """This process's memory on the host: ``resident`` (in RAM now) and ``virtual`` (all address space it
    has mapped, which ``RLIMIT_AS`` caps); either is ``None`` where the system does not say."""

    resident: int | None
    virtual: int | None

    def __str__(self) -> str:
        def show(count):
            return "unknown" if count is None else human_bytes(count)

        return f"resident {show(self.resident)}, address space {show(self.virtual)}"


def process_memory() -> ProcessMemory:
    """This process's resident and virtual size, from psutil if installed, else Linux's ``/proc/self/statm``."""
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        info = psutil.Process().memory_info()
        return ProcessMemory(int(info.rss), int(info.vms))
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            virtual_pages, resident_pages = (int(field) for field in statm.read().split()[:2])
        page = os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return ProcessMemory(None, None)
    return ProcessMemory(resident_pages * page, virtual_pages * page)
