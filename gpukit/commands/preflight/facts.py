"""What the preflight learns of the machine without touching a GPU (:func:`gather_facts`): nvidia-smi's GPUs and the
driver (from nvidia-smi, else the kernel module), torch's build and devices, the CUDA distributions installed and,
where there is a GPU, the extension build tools."""

from __future__ import annotations

import importlib.metadata
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version

from gpukit.commands.doctor import canonical as canonical_name
from gpukit.core import machine
from gpukit.core.optional import installed_version
from gpukit.topics.extensions import BuildTools, build_tools


@dataclass(frozen=True)
class Facts:
    """What the preflight learns without touching a GPU: the driver, torch's build, the CUDA libraries
    installed (distribution name -> version) and, where there is a GPU, the extension build tools."""

    system: str = sys.platform
    smi_gpus: tuple[str, ...] = ()
    driver: str | None = None
    torch_version: str | None = None
    torch_cuda: str | None = None
    cuda_devices: int = 0
    mps: bool = False
    distributions: Mapping[str, str] = field(default_factory=dict)
    tools: BuildTools | None = None
    numpy_version: str | None = None  # what numba-cuda meets in the children (the same Python)

    @property
    def kind(self) -> str | None:
        if self.smi_gpus or self.cuda_devices:
            return "cuda"
        return "mps" if self.mps else None

    @property
    def torch_major(self) -> int | None:
        return major_of(self.torch_cuda)

    def installed(self, prefix: str) -> bool:
        """Whether a distribution named ``prefix`` (or, for a prefix ending in '-', starting with it) is here."""
        return any(name == prefix or (prefix.endswith("-") and name.startswith(prefix)) for name in self.distributions)


def major_of(version: str | None) -> int | None:
    """The major of a version as packaging reads it (PEP 440): ``13.0`` -> 13, ``2.13.0+cu129`` -> 2; None for no
    version or one that is not a version."""
    try:
        return Version(str(version)).major if version else None
    except InvalidVersion:
        return None


# Distributions that carry CUDA code, or tell which CUDA major the environment is built for.
_CUDA_DISTRIBUTION = re.compile(r"^(torch|triton|jax|jaxlib|numba-cuda|cupy(-.*)?|jax-cuda.*|cuda-.*|nvidia-.*)$")
# Distributions whose own version is the CUDA version (cuda-toolkit 13.0.3); other nvidia-* distributions
# number their libraries separately (CUDA 13's cuFFT is nvidia-cufft 12.0).
VERSIONED_LIKE_CUDA = ("cuda-bindings", "cuda-python", "cuda-toolkit", "nvidia-cuda-runtime",
                       "nvidia-cuda-nvrtc", "nvidia-cuda-nvcc")


def cuda_distributions() -> dict[str, str]:
    """The CUDA-related distributions installed in this environment, name -> version."""
    found = {}
    for dist in importlib.metadata.distributions():
        name = canonical_name(dist.metadata.get("Name") or "")
        if _CUDA_DISTRIBUTION.match(name):
            found[name] = dist.version
    return found


def distribution_cuda_major(name: str, version: str) -> int | None:
    """The CUDA major a distribution is built for, where its name or version says it: ``nvidia-cublas-cu12``
    -> 12, ``cupy-cuda13x`` -> 13, ``jax-cuda12-plugin`` -> 12, ``cuda-toolkit`` 13.0.3 -> 13; else None."""
    name = canonical_name(name)
    for pattern in (r"-cu(\d+)$", r"^cupy-cuda(\d+)x$", r"^jax-cuda(\d+)-(plugin|pjrt)$"):
        match = re.search(pattern, name)
        if match:
            return int(match.group(1))
    return major_of(version) if name in VERSIONED_LIKE_CUDA else None


def gather_facts() -> Facts:
    """Look at this machine: nvidia-smi (or the kernel module) for the driver, torch's build and devices,
    the CUDA distributions, and the extension build tools where there is a GPU. Starts no GPU work."""
    smi = tuple(machine.nvidia_smi_gpus() or ())
    driver = machine.driver_in_smi_lines(smi) or machine.kernel_module_driver()
    torch_version = torch_cuda = None
    cuda_devices, mps = 0, False
    try:
        import torch  # lazy: torch is optional, and slow to import
    except ImportError:
        torch = None
    if torch is not None:
        torch_version, torch_cuda = torch.__version__, getattr(torch.version, "cuda", None)
        cuda_devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
        mps = bool(torch.backends.mps.is_available())
    tools = None
    if torch is not None and (smi or cuda_devices):
        try:
            tools = build_tools()
        except Exception:  # noqa: BLE001 - the extension line then says it could not look
            tools = None
    return Facts(system=sys.platform, smi_gpus=smi, driver=driver, torch_version=torch_version,
                 torch_cuda=torch_cuda, cuda_devices=cuda_devices, mps=mps, distributions=cuda_distributions(),
                 tools=tools, numpy_version=installed_version("numpy"))
