"""gpukit: the helpers that the GPU Python lessons share, in layers by role.

Each layer imports only the layers above it in this list (``tests/book/test_layers.py`` holds it to that):

- :mod:`gpukit.base`: utilities that import nothing of gpukit (arguments, paths, units, child Pythons, nvcc);
- :mod:`gpukit.core`: what every lesson uses (device, arrays, timing, memory, optional libraries, peaks, glue,
  the stamp);
- :mod:`gpukit.measuring`: sweeps, plots, progress bars, threads, overlap, predictions, benchmark records;
- :mod:`gpukit.topics`: one lesson's helpers each (clusters, CUDA sources, extensions, Slurm, traces, ...);
- :mod:`gpukit.exercises`: every exercise's checks;
- :mod:`gpukit.commands`: ``python -m gpukit doctor`` and ``doctor --gpu``.

The book's own machinery (GPU runs, the benchmark suite) is the package ``booktools`` beside gpukit, which
imports gpukit and is never imported by it.

Exported here, as the lessons import them: choosing the device, honest timing, memory arithmetic, the
environment report, exercise checks, optional libraries, the values the prose shows and the page stamp.
What a reader need not see lives here, out of the way and tested like any other code.
"""

# Importing gpukit changes no setting of the process: a lesson that needs one (JAX's memory preallocation) sets
# it in its own code, where the reader sees it.
from gpukit.base.units import human_bytes
from gpukit.core.device import (
    NoGPUError,
    announce_device,
    available_devices,
    cuda_available,
    describe_device,
    mps_available,
    pick_device,
    skip_unless,
)
from gpukit.core.glue import glue, glued
from gpukit.core.memory import DeviceMemory, device_memory, nbytes
from gpukit.core.optional import optional_import
from gpukit.core.stamp import lesson_stamp
from gpukit.core.timing import Timing, benchmark, format_seconds, synchronize
from gpukit.exercises.checking import CheckResult, check

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


def __getattr__(name: str):
    """``environment_report``, imported when first asked for: the doctor reads every library's version, which a
    lesson's first cell does not need."""
    if name == "environment_report":
        from gpukit.commands.doctor import environment_report  # lazy: see above

        return environment_report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
