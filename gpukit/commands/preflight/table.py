"""The checks and their fixes: the two that run in the preflight's own process (the driver against torch's CUDA,
one CUDA major across the environment), the gates that decide whether a child check runs, and the child checks of a
CUDA node (:data:`CUDA_CHECKS`) and of a Mac (:data:`MPS_CHECKS`), each with its file in ``checks/`` and the fixes
for the causes its errors show."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gpukit.base import cuda_stacks
from gpukit.commands.preflight.facts import VERSIONED_LIKE_CUDA, Facts, distribution_cuda_major
from gpukit.commands.preflight.fixes import UNKNOWN, reinstall_command
from gpukit.commands.preflight.results import FAIL, NOTE, OK, SKIP, Result
from gpukit.commands.preflight.runner import ChildCheck
from gpukit.topics.distributed import worker_env

# The JAX memory setting every lesson that uses JAX makes before JAX starts; the JAX check runs with it too.
JAX_MEMORY_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
# The extension check's time limit; a lock file older than this was left by a build that was stopped.
EXTENSION_TIMEOUT_S = 100.0


# ------------------------------------------------------------------------------------------ in-process checks
def check_driver(facts: Facts, words: Mapping[str, str]) -> Result:
    """The NVIDIA driver against the CUDA major torch is built for, by the stacks of :mod:`gpukit.base.cuda_stacks`."""
    name = "driver"
    torch_text = f"torch {facts.torch_version}"
    if facts.driver is None:
        return Result(name, OK, "driver version not readable here (no nvidia-smi, no /proc/driver/nvidia/version);"
                      f" {torch_text}, built for CUDA {facts.torch_cuda}, sees {facts.cuda_devices} GPU(s)")
    stack = cuda_stacks.stack_for_driver(facts.driver)
    if stack is None:
        newest, oldest = cuda_stacks.STACKS[0], cuda_stacks.STACKS[-1]
        return Result(name, FAIL, f"NVIDIA driver {facts.driver} is older than {oldest.minimum_driver}, the oldest "
                      "that any of the book's CUDA stacks runs on",
                      f"ask the cluster's admins for NVIDIA driver {newest.minimum_driver} or newer (CUDA "
                      f"{newest.major}), at least {oldest.minimum_driver} (CUDA {oldest.major})")
    if facts.torch_version is None:
        return Result(name, FAIL, f"NVIDIA driver {facts.driver} runs {stack}, but torch is not installed",
                      reinstall_command(stack))
    if facts.torch_cuda is None:
        return Result(name, FAIL, f"{torch_text} is a CPU build; NVIDIA driver {facts.driver} runs {stack}",
                      reinstall_command(stack))
    torch_stack = cuda_stacks.stack_for_cuda(facts.torch_major)
    if torch_stack is None:
        return Result(name, FAIL, f"{torch_text} is built for CUDA {facts.torch_cuda}, which none of the book's "
                      f"stacks uses; NVIDIA driver {facts.driver} runs {stack}", reinstall_command(stack))
    if torch_stack.major > stack.major:
        return Result(name, FAIL, f"{torch_text} is built for CUDA {facts.torch_cuda}, which needs driver "
                      f"{torch_stack.minimum_driver} or newer; this NVIDIA driver {facts.driver} runs {stack}",
                      reinstall_command(stack))
    also = f" (it would also run CUDA {stack.major})" if stack.major > torch_stack.major else ""
    return Result(name, OK, f"NVIDIA driver {facts.driver} runs CUDA {torch_stack.major} (needs "
                  f"{torch_stack.minimum_driver}+){also}; {torch_text} is built for CUDA {facts.torch_cuda}")


# The distributions named in the CUDA majors line's ok text; the others are counted.
_SHOWN_DISTRIBUTIONS = re.compile(r"^(cupy-.*|jax-cuda.*-plugin|cuda-toolkit|cuda-bindings)$")


def cuda_builds(facts: Facts) -> list[tuple[str, str, int]]:
    """(distribution, how it is shown, CUDA major) for torch and every distribution that says its major."""
    builds = []
    if facts.torch_major is not None:
        builds.append(("torch", f"torch {facts.torch_version} (CUDA {facts.torch_cuda})", facts.torch_major))
    for name, version in sorted(facts.distributions.items()):
        major = distribution_cuda_major(name, version)
        if major is not None and name != "torch":
            shown = f"{name} {version}" if name in VERSIONED_LIKE_CUDA else name
            builds.append((name, shown, major))
    return builds


def check_cuda_majors(facts: Facts, words: Mapping[str, str]) -> Result:
    """One CUDA major across the environment: torch, CuPy's wheel, JAX's plugin, the toolkit numba-cuda and
    CuPy load (cuda-toolkit, cuda-bindings), and no ``-cu12`` distribution beside a ``-cu13`` one."""
    name = "CUDA majors"
    builds = cuda_builds(facts)
    if not builds:
        return Result(name, SKIP, "no CUDA build of any library is installed (see the driver line)")
    majors = sorted({major for _, _, major in builds})
    if len(majors) == 1:
        shown = [text for dist, text, _ in builds if dist == "torch" or _SHOWN_DISTRIBUTIONS.match(dist)]
        others = len(builds) - len(shown)
        more = f" and {others} more" if others else ""
        return Result(name, OK, f"CUDA {majors[0]} throughout: {', '.join(shown)}{more}")
    target = int(words["major"])
    groups = "; ".join(f"CUDA {major}: {', '.join(text for _, text, m in builds if m == major)}" for major in majors)
    odd = [dist for dist, _, major in builds if major != target]
    return Result(name, FAIL, f"more than one CUDA major in one environment ({groups})",
                  f"python -m pip uninstall -y {' '.join(odd)} && {words['install']}")


# ------------------------------------------------------------------------------------------ gates
def needs(distribution: str, shown: str | None = None) -> Callable:
    """A gate: FAIL where ``distribution`` (a prefix if it ends in '-') is not installed."""
    def gate(facts: Facts, words):
        if facts.installed(distribution):
            return None
        return Result("", FAIL, f"{shown or distribution} is not installed", words["install"])
    return gate


def torch_gate(needs_gpu: bool) -> Callable:
    """A gate: skip where torch is not a CUDA build (the driver line says why) or, if ``needs_gpu``, where torch
    sees no GPU (the torch matmul line says why)."""
    def gate(facts: Facts, words):
        if facts.torch_version is None:
            return Result("", FAIL, "torch is not installed", words["reinstall"])
        if facts.torch_cuda is None:
            return Result("", SKIP, f"needs a CUDA build of torch; torch {facts.torch_version} is not one "
                          "(see the driver line)")
        if needs_gpu and not facts.cuda_devices:
            return Result("", SKIP, "torch sees no GPU (see the torch matmul line)")
        return None
    return gate


def all_of(*gates: Callable) -> Callable:
    def gate(facts, words):
        return next((found for g in gates if (found := g(facts, words)) is not None), None)
    return gate


def extension_gate(facts: Facts, words) -> Result | None:
    """Build only where torch sees the GPU, the C++ tools exist, and nvcc exists with torch's CUDA major."""
    found = torch_gate(needs_gpu=True)(facts, words)
    if found is not None:
        return found
    tools = facts.tools
    if tools is None:
        return Result("", SKIP, "the build tools could not be looked at (gpukit.topics.extensions.build_tools failed)")
    if tools.cpp_reason:
        return Result("", FAIL, f"cannot build any extension: {tools.cpp_reason}",
                      f"install what is missing: {tools.cpp_reason}")
    major = facts.torch_major
    toolkit = (f"load a CUDA {major} toolkit (on a cluster, its module in GPU_PYTHON_MODULES of "
               f"slurm_templates/site.sh, e.g. cuda/{major}) or set CUDA_HOME to the folder holding its bin/nvcc")
    if tools.cuda_home is None:
        return Result("", SKIP, f"no CUDA toolkit (nvcc) here, so chapter 5's CUDA extension skips; to build it, "
                      f"{toolkit}")
    if tools.cuda_reason:
        return Result("", FAIL, f"cannot build a CUDA extension: {tools.cuda_reason}", toolkit)
    return None


# ------------------------------------------------------------------------------------------ the checks
CUDA_CHECKS: tuple[ChildCheck, ...] = (
    ChildCheck(
        "torch matmul", "check_torch_matmul.py", args=("cuda",), gate=torch_gate(needs_gpu=False),
        fix=UNKNOWN + "run `python -m gpukit doctor` on this node; reinstall the stack: {reinstall}",
        # The driver's pattern first: with an old driver torch warns "too old" and then is_available() is False.
        fixes=((r"driver version is insufficient|too old", "the driver is too old for this torch: {reinstall}"),
               (r"is_available\(\) is False|no CUDA GPUs are available",
                "torch sees no GPU although nvidia-smi lists one: ask the job for a GPU (#SBATCH --gpus=1) and "
                "check CUDA_VISIBLE_DEVICES; `python -m gpukit doctor` shows what torch sees"),
               (r"out of memory", "the GPU's memory is taken: `nvidia-smi` shows by whom; ask for a GPU of your "
                "own (a whole GPU, not a shared one)"))),
    ChildCheck(
        "CuPy", "check_cupy.py", gate=needs("cupy-", "CuPy (cupy-cuda12x / cupy-cuda13x)"),
        fix=UNKNOWN + "reinstall CuPy with its CUDA libraries (the stack's [ctk] extra): {install}",
        fixes=((r"CompileException", "NVRTC could not compile the kernel for this GPU (an NVRTC older than the "
                "GPU): install the stack's cupy-cuda{major}x[ctk], which brings a matching NVRTC: {install}"),
               (r"nvrtc|cublas|cannot open shared object|CUDA path could not be detected|\.so",
                "CuPy cannot load the CUDA libraries it needs: install the stack, whose cupy-cuda{major}x[ctk] "
                "brings them: {install}"),)),
    ChildCheck(
        "JAX", "check_jax.py", gate=needs("jax"), env=tuple(JAX_MEMORY_ENV.items()),
        fix=UNKNOWN + "install JAX's CUDA {major} plugin with the stack: {install}",
        fixes=((r"preallocated", "JAX ignored XLA_PYTHON_CLIENT_PREALLOCATE=false: look for "
                "XLA_PYTHON_CLIENT_MEM_FRACTION or XLA_PYTHON_CLIENT_ALLOCATOR in the job's environment and "
                "unset them"),
               (r"cuDNN|DNN library initialization failed",
                "JAX's CUDA plugin met a cuDNN of another version than it was built with: install the stack, "
                "which pins the cuDNN it needs: {install}"),
               (r"jaxlib version|incompatible with jaxlib|plugin version",
                "jax, jaxlib and the CUDA plugin are of different versions: install them together: {install}"),
               (r"runs on cpu|not the GPU|Unable to initialize backend|CUDA backend",
                "JAX has no working CUDA plugin here: install the stack's jax[cuda{major}]: {install}"))),
    ChildCheck(
        "Triton", "check_triton.py", gate=all_of(needs("triton"), torch_gate(needs_gpu=True)),
        fix=UNKNOWN + "reinstall torch's Triton with the stack: {reinstall}",
        fixes=((r"interpreter is on", "unset TRITON_INTERPRET in the job's environment (the lessons set it only "
                "where there is no GPU)"),
               (r"libcuda\.so cannot found|0 active drivers|cannot find -lcuda",
                "Triton cannot find the driver's libcuda.so.1: set TRITON_LIBCUDA_PATH to the folder that holds it "
                "(`ldconfig -p | grep libcuda` shows it)"),
               (r"Python\.h|gcc|cc1|ld returned|No such file or directory: '?cc", "Triton builds a small C launcher"
                " at its first use: it needs a C compiler and Python's headers on the node (e.g. module load gcc; "
                "python3-dev)"),
               (r"ptxas|PTX .*not supported|is not defined for option 'gpu-name'",
                "Triton's ptxas does not know this GPU (a Triton older than the GPU): install the stack's torch and "
                "Triton: {reinstall}"))),
    ChildCheck(
        "Numba CUDA", "check_numba.py", gate=needs("numba-cuda"),
        fix=UNKNOWN + "reinstall numba-cuda with its CUDA {major} toolkit through the stack: {install}",
        fixes=((r"simulator is on", "unset NUMBA_ENABLE_CUDASIM in the job's environment (the lessons set it only "
                "where there is no GPU)"),
               # numba-cuda 0.30.4 overloads np.row_stack when its NumPy lowering is imported (numba/cuda/np/
               # arrayobj.py), which NumPy 2.5 removed: the first GPU run met it with NumPy 2.5.2.
               (r"module 'numpy' has no attribute '(?P<attribute>\w+)'",
                "numba-cuda {numba_cuda} uses np.{attribute}, which NumPy {numpy} no longer has (NumPy 2.5 removed "
                "np.row_stack): install the NumPy the book pins: {numpy_install}"),
               (r"libnvvm|NvvmSupportError|libnvrtc|NVRTC|DynamicLibNotFoundError|libdevice",
                "numba-cuda cannot load the CUDA toolkit's compilers (NVVM, NVRTC): install numba-cuda with its CUDA "
                "{major} toolkit (numba-cuda[cu{major}]) through the stack: {install}"),
               (r"is_available\(\) is False",
                "numba-cuda cannot reach the GPU through the driver (see the driver and torch matmul lines): "
                "reinstall numba-cuda[cu{major}] with the stack: {install}"))),
    ChildCheck(
        "NCCL all_reduce", "check_nccl.py", gate=torch_gate(needs_gpu=True), env=tuple(worker_env().items()),
        fix=UNKNOWN + "rerun with NCCL_DEBUG=INFO set to see where NCCL stopped (this check keeps NCCL on the "
            "loopback interface)",
        fixes=((r"without NCCL|nccl.*not available", "this torch has no NCCL: install the stack's torch: "
                "{reinstall}"),
               (r"Address already in use|EADDRINUSE", "another process took the rendezvous port between its choice "
                "and its use: rerun the preflight"))),
    ChildCheck(
        "C++/CUDA extension", "check_extension.py", args=(str(EXTENSION_TIMEOUT_S),), timeout=EXTENSION_TIMEOUT_S,
        gate=extension_gate, background=True,
        fix=UNKNOWN + "read the compiler's message in the line above; a first build on a busy node can take minutes: "
            "rerun (the build is cached)",
        fixes=((r"unsupported gpu architecture|Unsupported gpu architecture",
                "this nvcc is too old for the GPU: load a newer CUDA {major} toolkit"),
               (r"unsupported GNU version|host compiler", "nvcc does not accept this host compiler: load a gcc that "
                "CUDA {major} supports (e.g. module load gcc)"),
               (r"mismatches the version that was used to compile PyTorch|CUDA_HOME", "torch finds no CUDA {major} "
                "toolkit: load one (on a cluster, e.g. module load cuda/{major}) or set CUDA_HOME to the folder "
                "holding its bin/nvcc"),
               (r"[Nn]inja is required", "torch's builder needs ninja: pip install ninja"))),
)


@dataclass(frozen=True)
class LessonOperation:
    """An operation the lessons run on the MPS device, by its name in :mod:`gpukit.topics.backend_support`' probe.

    ``guarded_by`` names the probe results a lesson checks before calling it on the device: where one of them
    failed, the lesson uses the CPU instead, so a failure of this operation there is a note, not a problem.
    """

    name: str
    used: str
    guarded_by: tuple[str, ...] = ()


# From notebooks 01, 04, 07 and 12 (tests/unit/commands/test_preflight.py checks that every torch.linalg and torch.fft
# function their code calls is here, or in MPS_CPU_ONLY).
MPS_OPERATIONS = (
    LessonOperation("linalg.solve (float32)", "chapters 1 and 4 solve systems on the device"),
    LessonOperation("linalg.det (float32)", "chapter 4 takes the determinants of a stack on the device"),
    LessonOperation("linalg.vector_norm (float32)", "chapter 4 measures residuals on the device"),
    LessonOperation("linalg.lu_factor_ex (float32)", "chapter 7's lu_det factorises on the device"),
    LessonOperation("linalg.lu_factor (float32)", "chapter 7 probes it and uses the CPU where it fails",
                    ("linalg.lu_factor (float32)",)),
    LessonOperation("linalg.lu_factor (complex64)", "chapters 7 and 12 probe it and use the CPU where it fails",
                    ("linalg.lu_factor (complex64)",)),
    LessonOperation("linalg.det (complex64)", "chapter 12 probes it and uses an LU determinant where it fails",
                    ("linalg.det (complex64)",)),
    LessonOperation("fft.fft (complex64)", "chapter 12 probes it and uses the CPU where it fails",
                    ("fft.fft (complex64)",)),
    LessonOperation("fft.fft2 (complex64)", "chapter 12 runs it on the device where fft.fft and complex LU pass",
                    ("fft.fft (complex64)", "linalg.lu_factor (complex64)")),
)
# torch.linalg functions the lessons call only on CPU tensors.
MPS_CPU_ONLY = {"cond": "chapter 7 computes condition numbers on the CPU, in float64"}


def mps_lines(payload: Mapping, words) -> list[Result]:
    cells = payload.get("results", {})
    failed = {name for name, cell in cells.items() if cell != "ok"}
    lines = []
    for op in MPS_OPERATIONS:
        name, cell = f"mps {op.name}", cells.get(op.name, "not probed")
        if cell == "ok":
            lines.append(Result(name, OK, f"runs on MPS and matches the CPU; {op.used}"))
        elif failed.intersection(op.guarded_by):
            lines.append(Result(name, NOTE, f"{cell}; {op.used}, so the lesson still runs"))
        elif cell.startswith("wrong"):
            lines.append(Result(name, FAIL, f"{cell}; {op.used}",
                                "run that lesson on the CPU (GPUKIT_DEVICE=cpu) until torch's MPS kernel is fixed"))
        else:
            lines.append(Result(name, FAIL, f"{cell}; {op.used}",
                                "start Jupyter with PYTORCH_ENABLE_MPS_FALLBACK=1 (the operation then runs on the "
                                "CPU), or run that lesson with GPUKIT_DEVICE=cpu"))
    return lines


def mps_probe_names() -> tuple[str, ...]:
    names = [op.name for op in MPS_OPERATIONS]
    names += [guard for op in MPS_OPERATIONS for guard in op.guarded_by if guard not in names]
    return tuple(dict.fromkeys(names))


_MPS_FIX = ("MPS needs Apple silicon, macOS 14 or newer and torch's macOS wheel: update macOS, then "
            "{torch_install}")
# torch's messages: "The MPS backend is supported on MacOS 14.0+. ...", "MPS backend out of memory (MPS allocated:
# ...)"; any other error is not a cause the preflight knows.
_MPS_FIXES = ((r"supported on MacOS|MPS.*not available", _MPS_FIX),
              (r"MPS backend out of memory", "the Mac's memory, which its GPU shares with the CPU, is taken: close "
               "other applications and rerun"))
MPS_CHECKS: tuple[ChildCheck, ...] = (
    ChildCheck("torch matmul (MPS)", "check_torch_matmul.py", args=("mps",), fix=UNKNOWN + _MPS_FIX,
               fixes=_MPS_FIXES, common_fixes=False),
    ChildCheck("mps linear algebra", "check_mps_linalg.py", args=mps_probe_names(), fix=UNKNOWN + _MPS_FIX,
               fixes=_MPS_FIXES, lines=mps_lines, common_fixes=False),
)


def check_names(kind: str) -> tuple[str, ...]:
    """The names of the lines a preflight of ``kind`` ("cuda" or "mps") prints."""
    if kind == "mps":
        return ("torch matmul (MPS)", *(f"mps {op.name}" for op in MPS_OPERATIONS))
    return ("driver", "CUDA majors", *(check.name for check in CUDA_CHECKS))
