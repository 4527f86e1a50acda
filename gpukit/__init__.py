"""gpukit: the helpers that the GPU Python lessons share.

Device choice (:mod:`gpukit.device`), honest timing (:mod:`gpukit.timing`), memory arithmetic
(:mod:`gpukit.memory`), the environment report (:mod:`gpukit.report`) and exercise checks
(:mod:`gpukit.checks`) are exported here. Chapter-specific helpers are imported from their modules:
size sweeps (:mod:`gpukit.sweep`) and their plots (:mod:`gpukit.plots`), hardware peaks
(:mod:`gpukit.hardware`), clusters and workloads for parallel Python (:mod:`gpukit.parallel`), random
streams (:mod:`gpukit.random_streams`) and sentences for glued prose (:mod:`gpukit.wording`).
What a reader need not see lives here, out of the way and tested like any other code.
"""

from .checks import CheckResult, check
from .device import (
    NoGPUError,
    announce_device,
    available_devices,
    cuda_available,
    describe_device,
    mps_available,
    pick_device,
    skip_unless,
)
from .memory import DeviceMemory, device_memory, human_bytes, nbytes
from .report import environment_report
from .timing import Timing, benchmark, format_seconds, synchronize

__all__ = [
    "CheckResult",
    "DeviceMemory",
    "NoGPUError",
    "Timing",
    "announce_device",
    "available_devices",
    "benchmark",
    "check",
    "cuda_available",
    "describe_device",
    "device_memory",
    "environment_report",
    "format_seconds",
    "human_bytes",
    "mps_available",
    "nbytes",
    "pick_device",
    "skip_unless",
    "synchronize",
]
__version__ = "0.1.0"
