"""gpukit: the helpers that the GPU Python lessons share, one module per concept.

Exported here: choosing the device (:mod:`gpukit.device`), honest timing (:mod:`gpukit.timing`), memory
arithmetic (:mod:`gpukit.memory`), the environment report (:mod:`gpukit.report`), exercise checks
(:mod:`gpukit.exercises`), optional libraries (:mod:`gpukit.optional`), the values the prose shows
(:mod:`gpukit.page_values`) and the page stamp (:mod:`gpukit.stamp`).

Imported from their modules:

- arrays and devices: what an array is and where it lives (:mod:`gpukit.arrays`), hardware peaks
  (:mod:`gpukit.hardware`), which operations each backend supports (:mod:`gpukit.backends`);
- the CPU and clusters: threads (:mod:`gpukit.threads`), local clusters (:mod:`gpukit.clusters`), process groups
  on loopback (:mod:`gpukit.distributed`), Slurm templates and queries (:mod:`gpukit.slurm`), where state and
  sockets go (:mod:`gpukit.paths`), Python run in a child process (:mod:`gpukit.scripts`);
- measuring: size sweeps (:mod:`gpukit.sweep`), progress bars (:mod:`gpukit.progress`), plots
  (:mod:`gpukit.plots`), the benchmark suite and its files (:mod:`gpukit.bench`, :mod:`gpukit.benchmark_files`;
  one JSON file per machine: :mod:`gpukit.machine_files`; the whole GPU run of ``make gpu-check``:
  :mod:`gpukit.gpu_check`),
  CPU and GPU work side by side (:mod:`gpukit.overlap`), training-loss summaries (:mod:`gpukit.training`);
- compiling: CUDA sources through nvcc (:mod:`gpukit.kernels`), launch arithmetic (:mod:`gpukit.launch`),
  Numba's simulator and Triton's interpreter (:mod:`gpukit.simulators`), C++/CUDA extension builds
  (:mod:`gpukit.extensions`), torch.compile's cache (:mod:`gpukit.compile_cache`);
- memory: work in chunks that shrink on out-of-memory errors (:mod:`gpukit.chunking`);
- JAX devices and shards (:mod:`gpukit.sharding`), random streams (:mod:`gpukit.random_streams`), sentences
  for glued prose (:mod:`gpukit.wording`) and argument checks (:mod:`gpukit.arguments`).

What a reader need not see lives here, out of the way and tested like any other code.
"""

# Importing gpukit changes no setting of the process: a lesson that needs one (JAX's memory preallocation) sets
# it in its own code, where the reader sees it.
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
from .exercises import CheckResult, check
from .memory import DeviceMemory, device_memory, nbytes
from .optional import optional_import
from .page_values import glue, glued
from .report import environment_report
from .stamp import lesson_stamp
from .timing import Timing, benchmark, format_seconds, synchronize
from .units import human_bytes

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
    "glue",
    "glued",
    "human_bytes",
    "lesson_stamp",
    "mps_available",
    "nbytes",
    "optional_import",
    "pick_device",
    "skip_unless",
    "synchronize",
]
__version__ = "0.1.0"
