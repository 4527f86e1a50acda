"""Running GPU kernels without a GPU: Numba's CUDA simulator and Triton's interpreter.

Both are switched on by an environment variable that the library reads early, so it must be set before the
library sees it:

* ``NUMBA_ENABLE_CUDASIM=1``: Numba reads it when ``numba`` is first imported; ``numba.cuda`` is then a
  simulator that runs every CUDA thread as a Python thread on the CPU and raises ``IndexError`` for an
  index past the end of an array. Set it before the first ``import numba`` (in a notebook: before any cell
  imports numba; otherwise restart the kernel).
* ``TRITON_INTERPRET=1``: Triton reads it when ``@triton.jit`` decorates a kernel, which then runs in NumPy
  on CPU tensors. Setting it before ``import triton`` is the safe rule.

:func:`use_cuda_simulator` sets Numba's only where there is no CUDA GPU (on a GPU the kernels should run for
real) and returns a sentence saying what it did. :func:`numba_simulating` and :func:`triton_interpreting` tell
which mode a process or a kernel is in, and :func:`is_numba_cuda_kernel` whether an object is a Numba CUDA kernel.
Chapter 9 sets the two variables in plain code; the exercise checks (:mod:`gpukit.exercises.kernels`) use these
functions to launch a reader's kernel in the mode the reader's notebook is in.

Numba's CUDA target can be importable and still fail at its first kernel: on the first GPU run of the book,
numba-cuda 0.30.4 beside NumPy 2.5.2 raised ``AttributeError: module 'numpy' has no attribute 'row_stack'``
(numba-cuda's ``numba/cuda/np/arrayobj.py`` overloads ``np.row_stack`` at import, guarded by
``numpy_version >= (2, 0)`` only, and NumPy 2.5 removed the alias; numba 0.68's own arrayobj.py has the guard
``< (2, 5)``). :func:`numba_cuda_problem` tries what chapter 9's cells need once (compile a kernel, launch it on
one thread, read the result back) and returns ``None`` or one sentence with the error's first line, its cause and
its fix (:func:`numba_cuda_advice`); with ``GPUKIT_REQUIRE_GPU=1`` it raises :class:`NumbaCudaUnavailable` with
that sentence instead, so that a GPU run fails where a kernel cannot run. Not where the node lacks the CUDA toolkit's
compiler libraries (:func:`node_lacks_toolkit`): a missing libNVVM (or NVRTC) is the node's limitation, not the book's,
so it is a sentence to skip with even then, one that says how to get it (:func:`find_libnvvm`).

Where numba-cuda 0.30.4 finds libNVVM (numba_cuda/numba/cuda/cuda_paths.py, ``_get_nvvm``; ``cuda.bindings.nvvm``,
which compiles its kernels, loads it through the same call): ``cuda.pathfinder.load_nvidia_dynamic_lib("nvvm")``
(cuda-pathfinder's _dynamic_libs/load_nvidia_dynamic_lib.py and search_steps.py) looks, in order, for a copy already
loaded, in NVIDIA's wheels in site-packages (``nvidia/cu13/lib``: nvidia-nvvm, which ``numba-cuda[cu13]`` installs
through ``cuda-toolkit[nvvm]``; ``nvidia/cuda_nvcc/nvvm/lib64``: nvidia-cuda-nvcc-cu12, ``numba-cuda[cu12]``'s), under
``$CONDA_PREFIX``, through the system's loader (``LD_LIBRARY_PATH``, ld.so.cache), under ``$CUDA_PATH`` or
``$CUDA_HOME`` (``nvvm/lib64``), and last under a toolkit found through a CUDA library the system's loader finds; it
raises ``DynamicLibNotFoundError: Failure finding "libnvvm.so.4 or libnvvm.so"`` when none has it. ``/usr/local/cuda``
is not searched as such (numba-cuda's ``get_system_ctk`` serves libdevice and the library folder only), and
cuda.pathfinder reads CUDA_PATH and CUDA_HOME once per process, at its first search that gets that far
(``get_cuda_path_or_home`` is cached), so numba-cuda's own fallback, which sets CUDA_HOME for a moment to a folder it
infers from NVRTC's path, comes after that reading. :func:`use_system_toolkit` therefore sets CUDA_HOME, numba-cuda's
variable for the toolkit, to ``/usr/local/cuda`` before numba.cuda is imported (its import already has
cuda.pathfinder find the CUDA runtime), where nothing else names a toolkit and that one holds libNVVM.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
from collections.abc import MutableMapping
from pathlib import Path

from gpukit.base.child_python import pip_command
from gpukit.base.cuda_stacks import STACKS, torch_cuda_major
from gpukit.base.errors import error_line, first_line
from gpukit.core.device import cuda_available, gpu_required
from gpukit.core.optional import install_command, installed_version, optional_import, pinned_requirement

NUMBA_FLAG = "NUMBA_ENABLE_CUDASIM"


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


def triton_interpreting(kernel) -> bool:
    """Whether a ``@triton.jit`` kernel was made in interpreter mode (it runs on CPU tensors)."""
    return type(kernel).__name__ == "InterpretedFunction"


def is_numba_cuda_kernel(kernel) -> bool:
    """Whether ``kernel`` is a ``@cuda.jit`` kernel, simulated (``FakeCUDAKernel``) or real (``CUDADispatcher``)."""
    return type(kernel).__name__ in ("FakeCUDAKernel", "CUDADispatcher")


# ------------------------------------------------------------------------------------------ does Numba's CUDA work?
class NumbaCudaUnavailable(RuntimeError):
    """Numba's CUDA target (or its simulator) cannot run a kernel here, and ``GPUKIT_REQUIRE_GPU`` asks for a GPU."""


# What NumPy's module __getattr__ raises for a name it no longer has (numpy/__init__.py): numba-cuda 0.30.4 asks
# for np.row_stack, which NumPy 2.5 removed.
NUMPY_LACKS = re.compile(r"module 'numpy' has no attribute '(\w+)'")
# numba-cuda cannot load the CUDA toolkit's compilers (cuda.pathfinder's DynamicLibNotFoundError, NVVM, NVRTC).
NUMBA_TOOLKIT_MISSING = re.compile(r"libnvvm|NvvmSupportError|libnvrtc|NVRTC|DynamicLibNotFoundError|libdevice",
                                   re.IGNORECASE)
# ... and libNVVM is the one it lacks: cuda.pathfinder's "Failure finding "libnvvm.so.4 or libnvvm.so"", numba-cuda's
# NvvmSupportError("libNVVM is not available") and its "original nvvm error" (numba/cuda/cuda_paths.py, _get_nvvm).
NUMBA_NVVM_MISSING = re.compile(r"libnvvm|NvvmSupportError|nvvm error|nvvm not found", re.IGNORECASE)
# numba-cuda cannot reach a GPU through the driver (cuda.pathfinder's words for the driver's own library too).
NUMBA_NO_DEVICE = re.compile(r"CudaSupportError|cuInit|CUDA_ERROR_NO_DEVICE|no CUDA-capable device|CUDA driver "
                             r"library cannot be found|Error at driver init|NVIDIA driver library", re.IGNORECASE)


def node_lacks_toolkit(error: BaseException | str) -> bool:
    """Whether an error of Numba's CUDA target (an exception, or its first line) says that numba-cuda found no
    library of the CUDA toolkit it compiles kernels with (libNVVM, NVRTC, libdevice): the node's limitation, which
    installing a wheel or pointing CUDA_HOME at a toolkit lifts, not a fault of the book's environment (a NumPy that
    numba-cuda does not support) nor a GPU that the driver cannot reach."""
    line = error_line(error) if isinstance(error, BaseException) else first_line(error)
    return bool(NUMBA_TOOLKIT_MISSING.search(line)) and not NUMBA_NO_DEVICE.search(line)


def numba_cuda_cause(line: str, *, numpy_version: str | None = None,
                     numba_cuda_version: str | None = None) -> tuple[str, str] | None:
    """(the cause, its fix) that an error of Numba's CUDA target shows in ``line`` (its first line, as
    :func:`gpukit.base.errors.error_line` gives it), or None where it shows none known."""
    numba_cuda = f"numba-cuda {numba_cuda_version}" if numba_cuda_version else "numba-cuda"
    lacking = NUMPY_LACKS.search(line)
    if lacking:
        numpy = f"NumPy {numpy_version}" if numpy_version else "the installed NumPy"
        removed = " (NumPy 2.5 removed it)" if lacking.group(1) == "row_stack" else ""
        return (f"{numba_cuda} still uses np.{lacking.group(1)}, which {numpy} no longer has{removed}",
                f"install the NumPy the book pins, `{install_command('numpy')}`, and restart the kernel")
    if node_lacks_toolkit(line):
        major = torch_cuda_major() or STACKS[0].major
        pinned = pinned_requirement("numba-cuda").replace("numba-cuda", f"numba-cuda[cu{major}]", 1)
        install = f"`{pip_command()} install '{pinned}'`"
        if NUMBA_NVVM_MISSING.search(line):
            return (f"{numba_cuda} found no libNVVM, the CUDA toolkit's library that compiles its kernels (it looks "
                    "in NVIDIA's wheels, on the system's library path and under CUDA_HOME)",
                    f"install libNVVM from NVIDIA's wheels with numba-cuda's CUDA {major} extra, {install}, or set "
                    "CUDA_HOME to a CUDA toolkit that has nvvm/lib64/libnvvm.so before numba is imported, and "
                    "restart the kernel")
        return (f"{numba_cuda} cannot load the CUDA toolkit's compilers (NVVM, NVRTC) it compiles kernels with",
                f"install it with its CUDA {major} toolkit, {install}, or set CUDA_HOME to a CUDA toolkit before "
                "numba is imported, and restart the kernel")
    if NUMBA_NO_DEVICE.search(line):
        return (f"{numba_cuda} cannot reach a GPU through the NVIDIA driver",
                "run on a GPU node whose job was given a GPU (`nvidia-smi` lists it; CUDA_VISIBLE_DEVICES is not "
                "empty), and check the driver with `python -m gpukit doctor --gpu`")
    return None


def numba_cuda_advice(error: BaseException | str, *, numpy_version: str | None = None,
                      numba_cuda_version: str | None = None) -> str:
    """One sentence for a failure of Numba's CUDA target: the error's first line, the cause it shows and the fix.
    The versions default to those of the NumPy this Python imported and of the installed numba-cuda."""
    line = error_line(error) if isinstance(error, BaseException) else first_line(error)
    imported = sys.modules.get("numpy")
    numpy_version = numpy_version or getattr(imported, "__version__", None) or installed_version("numpy")
    numba_cuda_version = numba_cuda_version or installed_version("numba-cuda")
    known = numba_cuda_cause(line, numpy_version=numpy_version, numba_cuda_version=numba_cuda_version)
    if known is None:
        known = ("an error that gpukit does not recognise",
                 "`python -m gpukit doctor --gpu` tries Numba's CUDA target in a fresh Python on this node and "
                 "shows the error in full")
    cause, fix = known
    return f"Numba's CUDA target cannot run a kernel here ({line}): {cause}; {fix}."


# ------------------------------------------------------------------------------- where numba-cuda finds libNVVM
SYSTEM_TOOLKIT = "/usr/local/cuda"
# Where cuda.pathfinder looks for libNVVM under CUDA_HOME on Linux, and its names (cuda-pathfinder's
# _dynamic_libs/descriptor_catalog.py, the "nvvm" descriptor: anchor_rel_dirs_linux and linux_sonames).
NVVM_FOLDER = ("nvvm", "lib64")
NVVM_NAMES = ("libnvvm.so.4", "libnvvm.so")
TOOLKIT_VARIABLES = ("CUDA_PATH", "CUDA_HOME")  # cuda.pathfinder reads both (CUDA_PATH first), numba-cuda too


def toolkit_libnvvm(root: str | os.PathLike) -> Path | None:
    """The libNVVM that cuda.pathfinder would take from the CUDA toolkit at ``root`` (``nvvm/lib64/libnvvm.so.4``
    or ``libnvvm.so``), or None where it has none."""
    folder = Path(root).joinpath(*NVVM_FOLDER)
    return next((folder / name for name in NVVM_NAMES if (folder / name).is_file()), None)


def use_system_toolkit(environ: MutableMapping[str, str] | None = None, root: str = SYSTEM_TOOLKIT) -> str | None:
    """Set ``CUDA_HOME`` to the CUDA toolkit at ``root`` (``/usr/local/cuda``) where numba-cuda would otherwise not
    find its libNVVM there; return a sentence saying so, or None where nothing changed.

    It changes nothing where CUDA_HOME or CUDA_PATH names a toolkit already, where ``root`` has no
    ``nvvm/lib64/libnvvm.so`` (or ``.so.4``), or where the first ``nvcc`` on the ``PATH`` belongs to another toolkit
    (one loaded by ``module load``, say: that is the toolkit meant). Call it before numba.cuda is imported:
    cuda.pathfinder, which finds libNVVM for numba-cuda, reads the variables once per process, and the import of
    numba.cuda already has it find the CUDA runtime (see the module's docstring)."""
    environ = os.environ if environ is None else environ
    if any(environ.get(name) for name in TOOLKIT_VARIABLES) or toolkit_libnvvm(root) is None:
        return None
    nvcc = shutil.which("nvcc", path=environ.get("PATH", ""))
    if nvcc is not None and not Path(nvcc).resolve().is_relative_to(Path(root).resolve()):
        return None
    environ["CUDA_HOME"] = root
    return (f"CUDA_HOME={root}: numba-cuda takes libNVVM from the CUDA toolkit there "
            f"({toolkit_libnvvm(root)}), which its search would not otherwise look in.")


def find_libnvvm() -> BaseException | None:
    """None where numba-cuda finds libNVVM (cuda.pathfinder loads it, as numba-cuda and cuda.bindings.nvvm do), else
    the exception that the search raised (``DynamicLibNotFoundError: Failure finding "libnvvm.so.4 or
    libnvvm.so"``). Where cuda.pathfinder is missing (a numba-cuda older than the book's), None: nothing to tell."""
    use_system_toolkit()
    try:
        from cuda import pathfinder
    except ImportError:
        return None
    try:
        pathfinder.load_nvidia_dynamic_lib("nvvm")
    except Exception as error:  # noqa: BLE001 - not found, or found and not loadable: either way numba-cuda has none
        return error
    return None


def _probe_kernel(out):
    out[0] = out[0] + 1.0


def try_numba_cuda() -> BaseException | None:
    """Run what chapter 9's Numba cells need, once: compile a kernel (on the real CUDA target), copy an array to
    the device, launch the kernel on one thread, wait for it and copy the result back. Returns the exception that
    stopped it, or None. On the real target the kernel is first compiled to PTX for sm_75 (the oldest
    architecture CUDA 13 supports), which needs no GPU: it goes through the same target set-up as a launch,
    where numba-cuda imports its NumPy lowering (numba/cuda/np/arrayobj.py)."""
    import warnings

    import numpy as np

    use_system_toolkit()  # before numba.cuda is imported, which asks cuda.pathfinder for the CUDA runtime
    try:
        from numba import config, cuda, float32

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numba-cuda's warning about a grid of one block
            if not config.ENABLE_CUDASIM:
                cuda.compile_ptx(_probe_kernel, (float32[::1],), cc=(7, 5))
            out = cuda.to_device(np.zeros(1, dtype=np.float32))
            cuda.jit(_probe_kernel)[1, 1](out)
            cuda.synchronize()
            value = float(out.copy_to_host()[0])
    except Exception as error:  # noqa: BLE001 - whatever stops the kernel is the answer
        return error
    if value != 1.0:
        return RuntimeError(f"a one-thread kernel that adds 1 to 0 wrote {value}")
    return None


def numba_cuda_problem(required: bool | None = None, needed_for: str = "every Numba cell") -> str | None:
    """None where Numba's CUDA target (or its simulator) compiles and runs a one-thread kernel; else one sentence
    with the error's first line, its cause and its fix (:func:`numba_cuda_advice`). Where the error is a library of
    the CUDA toolkit that numba-cuda could not find (:func:`node_lacks_toolkit`) and libNVVM is missing too
    (:func:`find_libnvvm`), the sentence is about libNVVM, whichever library numba-cuda asked for first. Where numba
    is not installed, it prints :func:`gpukit.optional_import`'s skip for it (``needed_for``: what is skipped, with
    the pinned install command) and returns "Numba is not installed (see above)".

    ``required`` (default: ``GPUKIT_REQUIRE_GPU``): raise :class:`NumbaCudaUnavailable` with that sentence
    instead of returning it, so that a GPU run stops where a lesson would otherwise skip its kernels; but not for
    a missing toolkit library, the node's limitation (the sentence says how to lift it), where a lesson skips, nor
    for a missing numba, an optional library. A lesson binds what its later cells test before it calls this (its
    ``numba_ready = False`` first), so that after the error they skip instead of failing on an unbound name."""
    use_system_toolkit()  # before anything imports numba.cuda
    if importlib.util.find_spec("numba") is None:  # found, not imported: a caller may still set the simulator's flag
        optional_import("numba", needed_for)  # prints its skip, with the pinned install command
        return "Numba is not installed (see above)"
    error = try_numba_cuda()
    if error is None:
        return None
    if node_lacks_toolkit(error):
        missing = find_libnvvm()
        return numba_cuda_advice(missing if missing is not None and node_lacks_toolkit(missing) else error)
    sentence = numba_cuda_advice(error)
    if gpu_required() if required is None else required:
        raise NumbaCudaUnavailable(sentence) from None
    return sentence
