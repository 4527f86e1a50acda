"""The fix a failure gets: the stack this environment should hold (:func:`target_stack`), the words a fix may name
(:func:`fix_words`), the causes any CUDA check can meet (:data:`COMMON_FIXES`), and :func:`pick_fix`, which chooses
by what the child printed."""

from __future__ import annotations

import re
from collections.abc import Mapping

from gpukit.base import cuda_stacks
from gpukit.commands.preflight.facts import Facts
from gpukit.commands.preflight.runner import ChildCheck
from gpukit.core.optional import install_command


def target_stack(facts: Facts) -> cuda_stacks.CudaStack:
    """The stack this environment should hold: torch's, if the driver runs it; else the newest the driver
    runs; else (driver unknown) PyPI's."""
    try:
        driver_stack = cuda_stacks.stack_for_driver(facts.driver) if facts.driver else None
    except ValueError:
        driver_stack = None
    torch_stack = cuda_stacks.stack_for_cuda(facts.torch_major) if facts.torch_major else None
    if torch_stack and (driver_stack is None or torch_stack.major <= driver_stack.major):
        return torch_stack
    return driver_stack or cuda_stacks.STACKS[0]


def reinstall_command(stack: cuda_stacks.CudaStack) -> str:
    """:func:`gpukit.base.cuda_stacks.install_command`, forced: pip keeps a ``torch 2.13.0+cpu`` that satisfies
    ``torch==2.13.0`` otherwise."""
    return cuda_stacks.install_command(stack).replace(" install ", " install --force-reinstall ", 1)


def fix_words(facts: Facts) -> dict[str, str]:
    """The values a fix may name: ``{install}``, ``{reinstall}`` (the stack's commands), ``{major}``, ``{stack}``,
    ``{torch_install}`` (the book's torch, for a Mac), ``{numpy}`` (the installed NumPy's version),
    ``{numpy_install}`` (the book's NumPy) and ``{numba_cuda}`` (numba-cuda's version)."""
    stack = target_stack(facts)
    return {"install": cuda_stacks.install_command(stack), "reinstall": reinstall_command(stack),
            "major": str(stack.major), "stack": str(stack), "torch_install": install_command("torch"),
            "numpy": facts.numpy_version or "(version unknown)", "numpy_install": install_command("numpy"),
            "numba_cuda": facts.distributions.get("numba-cuda", "(version unknown)")}


# Causes any check's error can show, tried after the check's own fixes. Each names the cause, and the fix it needs.
COMMON_FIXES: tuple[tuple[str, str], ...] = (
    (r"No module named '(?P<module>[\w.]+)'", "{module} cannot be imported in this Python: install the stack into "
     "it: {install}"),
    (r"(?P<library>lib[\w.+-]+\.so[\w.]*): cannot open shared object file",
     "{library} cannot be loaded (not installed, or of another CUDA major): reinstall the stack, which brings "
     "the CUDA {major} libraries: {reinstall}"),
    (r"driver version is insufficient|CUDA_ERROR_INSUFFICIENT_DRIVER|cudaErrorInsufficientDriver",
     "the NVIDIA driver is too old for this library's CUDA (see the driver line): install the stack this driver "
     "runs, {stack}: {reinstall}"),
    (r"no CUDA-capable device|CUDA_ERROR_NO_DEVICE|cudaErrorNoDevice|No CUDA GPUs are available",
     "CUDA shows this process no GPU: ask the job for one (#SBATCH --gpus=1) and check that CUDA_VISIBLE_DEVICES "
     "is not empty"),
    (r"busy or unavailable|CUDA_ERROR_DEVICES_UNAVAILABLE|cudaErrorDevicesUnavailable",
     "the GPU is in exclusive-process mode and another process holds it: `nvidia-smi` shows which; wait for it "
     "or ask for a GPU of your own"),
    (r"out of memory|CUDA_ERROR_OUT_OF_MEMORY|RESOURCE_EXHAUSTED|cudaErrorMemoryAllocation",
     "the GPU's memory is taken: `nvidia-smi` shows by whom; ask for a GPU of your own (a whole GPU, not a "
     "shared one)"),
    (r"no kernel image is available|CUDA_ERROR_NO_BINARY_FOR_GPU|cudaErrorNoKernelImageForDevice",
     "this library has no code for this GPU's architecture (the GPU is older or newer than its build supports): "
     "`python -m gpukit doctor` shows the GPU; install the stack's build: {reinstall}"),
    (r"No space left on device", "the disk is full (often TMPDIR or the home folder's cache): free space, or set "
     "TMPDIR to a folder with room"),
    (r"Cannot allocate memory|MemoryError", "the node ran out of host memory: ask the job for more "
     "(#SBATCH --mem=16G) or stop what else runs there"),
)
# The start of the fix for an error whose cause the preflight does not know: the line's error is all it has.
UNKNOWN = "not a cause the preflight recognises (the error is on the line): "


def pick_fix(check: ChildCheck, text: str, words: Mapping[str, str]) -> str:
    """The fix for the cause the child's output shows: the first of the check's own ``fixes``, then of
    :data:`COMMON_FIXES`, whose pattern matches (a fix may name the pattern's named groups, ``{module}``), else
    the check's ``fix``, which says that the cause is not one the preflight knows."""
    for pattern, fix in (*check.fixes, *(COMMON_FIXES if check.common_fixes else ())):
        match = re.search(pattern, text, re.IGNORECASE)
        if match:
            return fix.format(**{**words, **match.groupdict()})
    return check.fix.format(**words)
