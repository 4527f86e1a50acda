"""The two CUDA stacks the book installs, and which one a machine's NVIDIA driver can run.

Every CUDA library in one environment must be built for the same CUDA major: CuPy's cuBLAS module links
``libcublas.so.12`` or ``.so.13``, JAX's plugin and torch each load their own cuDNN, and two majors side by
side are unsupported: they typically fail at import or at the first call into a CUDA library. The book
therefore installs exactly one of:

- **CUDA 13** (gpukit's ``cuda13`` extra, requirements/cuda13.txt): PyPI's torch 2.13.0, which is a CUDA 13
  build on Linux, with ``jax[cuda13]``, ``cupy-cuda13x[ctk]`` and ``numba-cuda[cu13]``;
- **CUDA 12** (``cuda12``, requirements/cuda12.txt): torch's CUDA 12 build from PyTorch's own wheel index,
  with ``jax[cuda12]``, ``cupy-cuda12x[ctk]`` and ``numba-cuda[cu12]``, for clusters whose driver is older.

NVIDIA's minor-version compatibility lets a program built with any CUDA 13.x toolkit run on a driver of
version 580 or newer, and one built with CUDA 12.x on 525 or newer (table "CUDA Toolkit 11.x, 12.x, and 13.x
Minimum and Maximum Required Driver Versions",
https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from gpukit.base.child_python import pip_command

__all__ = ["CudaStack", "STACKS", "install_command", "stack_for_driver", "torch_cuda_major"]


@dataclass(frozen=True)
class CudaStack:
    major: int
    extra: str  # gpukit's extra, and requirements/<extra>.txt
    minimum_driver: int  # the NVIDIA driver's major version (nvidia-smi's "Driver Version: 580.95.05" -> 580)
    torch_index: str | None = None  # where this stack's torch comes from, when PyPI's is not it

    @property
    def cupy(self) -> str:
        return f"cupy-cuda{self.major}x"

    def __str__(self) -> str:
        return f"CUDA {self.major} (driver {self.minimum_driver} or newer; gpukit's '{self.extra}' extra)"


# Newest first: a driver gets the newest stack it can run.
STACKS = (
    CudaStack(major=13, extra="cuda13", minimum_driver=580),
    CudaStack(major=12, extra="cuda12", minimum_driver=525, torch_index="https://download.pytorch.org/whl/cu129"),
)


def _driver_major(driver_version: str | int) -> int:
    match = re.match(r"\s*(\d+)", str(driver_version))
    if not match:
        raise ValueError(f"an NVIDIA driver version such as '580.95.05' is needed, not {driver_version!r}")
    return int(match.group(1))


def stack_for_driver(driver_version: str | int) -> CudaStack | None:
    """The newest stack a driver of this version runs (``"535.104.05"`` -> CUDA 12), or None if too old."""
    major = _driver_major(driver_version)
    return next((stack for stack in STACKS if major >= stack.minimum_driver), None)


def stack_for_cuda(cuda_major: int) -> CudaStack | None:
    return next((stack for stack in STACKS if stack.major == cuda_major), None)


def torch_cuda_major() -> int | None:
    """The CUDA major the installed torch was built for (``torch.version.cuda``), None for a CPU or MPS build
    or when torch is missing."""
    try:
        import torch
    except ImportError:
        return None
    version = getattr(torch.version, "cuda", None)
    return int(str(version).split(".")[0]) if version else None


def install_command(stack: CudaStack, extras: str = "lessons") -> str:
    """The command that installs ``stack`` on top of the lessons, from the book's repository folder."""
    index = f" --extra-index-url {stack.torch_index}" if stack.torch_index else " -c requirements/lock.txt"
    target = shlex.quote(f".[{extras},{stack.extra}]")
    return f"{pip_command()} install{index} -e {target}"
