"""Running GPU kernels without a GPU: Numba's CUDA simulator and Triton's interpreter.

Both are switched on by an environment variable that the library reads early, so it must be set before the
library sees it:

* ``NUMBA_ENABLE_CUDASIM=1``: Numba reads it when ``numba`` is first imported; ``numba.cuda`` is then a
  simulator that runs every CUDA thread as a Python thread on the CPU and raises ``IndexError`` for an
  index past the end of an array. Set it before the first ``import numba`` (in a notebook: before any cell
  imports numba; otherwise restart the kernel).
* ``TRITON_INTERPRET=1``: Triton reads it when ``@triton.jit`` decorates a kernel, which then runs in NumPy
  on CPU tensors. Setting it before ``import triton`` is the safe rule.

:func:`use_cuda_simulator` and :func:`use_triton_interpreter` set the variable only where there is no CUDA
GPU (on a GPU the kernels should run for real) and return a sentence saying what they did.
:func:`numba_simulating` and :func:`triton_interpreting` tell which mode a process or a kernel is in, and
:func:`is_numba_cuda_kernel` whether an object is a Numba CUDA kernel. Chapter 9 sets the two variables in plain
code; the exercise checks (:mod:`gpukit.exercises.kernels`) use these functions to launch a reader's kernel in the
mode the reader's notebook is in.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

from .device import cuda_available

NUMBA_FLAG = "NUMBA_ENABLE_CUDASIM"
TRITON_FLAG = "TRITON_INTERPRET"


def _flag_on(environ: MutableMapping[str, str], name: str) -> bool:
    return environ.get(name, "0").strip().lower() in ("1", "true", "yes", "on")


def numba_simulating() -> bool | None:
    """True when this process's ``numba.cuda`` is the simulator, False when it is the real CUDA target, and
    None when numba has not been imported yet (the flag can still be set)."""
    if "numba" not in sys.modules:
        return None
    from numba import config

    return bool(getattr(config, "ENABLE_CUDASIM", False))


def use_cuda_simulator(environ: MutableMapping[str, str] | None = None, gpu: bool | None = None) -> str:
    """Switch Numba's CUDA simulator on where there is no CUDA GPU; return a sentence saying what holds.

    ``gpu`` is whether a CUDA GPU is present (found out with :func:`gpukit.cuda_available` if None).
    """
    environ = os.environ if environ is None else environ
    gpu = cuda_available() if gpu is None else gpu
    simulating = numba_simulating()
    if simulating is not None:
        if simulating or gpu:
            return (f"numba was already imported, with the {'CUDA simulator' if simulating else 'real CUDA target'}"
                    "; that is what its kernels use.")
        return ("numba was imported before NUMBA_ENABLE_CUDASIM=1 was set and there is no CUDA GPU, so its "
                "kernels cannot run: restart the kernel and run this before anything imports numba.")
    if gpu:
        return "A CUDA GPU is present: Numba's kernels will run on it (the simulator stays off)."
    environ[NUMBA_FLAG] = "1"
    return (f"No CUDA GPU: {NUMBA_FLAG}=1, so Numba's kernels will run on its CUDA simulator, one Python "
            "thread per CUDA thread (keep the grids tiny).")


def use_triton_interpreter(environ: MutableMapping[str, str] | None = None, gpu: bool | None = None) -> str:
    """Switch Triton's interpreter on where there is no CUDA GPU; return a sentence saying what holds.

    Kernels decorated with ``@triton.jit`` before this call keep the mode they were made in.
    """
    environ = os.environ if environ is None else environ
    gpu = cuda_available() if gpu is None else gpu
    if gpu:
        if _flag_on(environ, TRITON_FLAG):
            return (f"A CUDA GPU is present, but {TRITON_FLAG} is set, so Triton's kernels will run in its "
                    "interpreter on the CPU; unset it to compile them for the GPU.")
        return "A CUDA GPU is present: Triton will compile its kernels for it (the interpreter stays off)."
    environ[TRITON_FLAG] = "1"
    return (f"No CUDA GPU: {TRITON_FLAG}=1, so Triton's kernels will run in its interpreter, on CPU tensors "
            "(kernels decorated from now on).")


def triton_interpreting(kernel) -> bool:
    """Whether a ``@triton.jit`` kernel was made in interpreter mode (it runs on CPU tensors)."""
    return type(kernel).__name__ == "InterpretedFunction"


def is_numba_cuda_kernel(kernel) -> bool:
    """Whether ``kernel`` is a ``@cuda.jit`` kernel, simulated (``FakeCUDAKernel``) or real (``CUDADispatcher``)."""
    return type(kernel).__name__ in ("FakeCUDAKernel", "CUDADispatcher")
