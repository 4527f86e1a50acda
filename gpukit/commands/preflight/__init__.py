"""The GPU preflight, ``python -m gpukit doctor --gpu``: every library the book uses, exercised on this node's
GPU, one line per check, with the fix for each failure. Run it on each kind of GPU node the day before a
workshop (the GPU job templates in ``slurm_templates/`` run it first).

On an NVIDIA GPU the checks are: the driver against the CUDA major torch is built for (:mod:`gpukit.base.cuda_stacks`
holds the two stacks the book installs and the driver each needs); one CUDA major across every CUDA library of
the environment; a torch matmul timed with CUDA events; cuBLAS through ``cupy.matmul`` and a CuPy
``RawKernel`` compiled by NVRTC; a JAX ``jit`` with the book's memory setting; a Triton kernel compiled (not
interpreted); a Numba CUDA kernel with the simulator off; a C++/CUDA extension built with ``load_inline``
where nvcc exists and its major matches torch's; an NCCL ``all_reduce`` over one rank. On an Apple GPU: a
torch matmul timed with MPS events, and the linear algebra the lessons call on MPS
(:data:`MPS_OPERATIONS`), with ``PYTORCH_ENABLE_MPS_FALLBACK`` unset.

Each library check is a file of its own in ``checks/`` (``check_cupy.py``, ...), run as a script in a child Python
(:mod:`~gpukit.commands.preflight.runner`), in a process group that is stopped at its time limit, with the variables
that switch a library to its CPU stand-in removed (:data:`SIMULATION_VARIABLES`): a library that crashes (a
segmentation fault after a driver mismatch) or hangs costs one FAIL line, not the preflight, and the whole run stays
within :data:`BUDGET_S`. Each child prints one ``GPUKIT-PREFLIGHT {json}`` line with what it measured. Where there is
no GPU at all, every check is a ``skip`` line and the preflight fails: a GPU preflight that found no GPU checked
nothing.

The package, by role: :mod:`~gpukit.commands.preflight.facts` (what it reads of the machine),
:mod:`~gpukit.commands.preflight.runner` (a check's child Python), :mod:`~gpukit.commands.preflight.reading` (what
the child's end says), :mod:`~gpukit.commands.preflight.fixes` (the fix for a cause),
:mod:`~gpukit.commands.preflight.table` (the checks), :mod:`~gpukit.commands.preflight.results` (the lines), and
here the run and the command.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from gpukit.base.errors import first_line
from gpukit.commands.preflight.checks.preflight_sources import (
    CUPY_KERNEL,
    CUPY_KERNEL_NAME,
    EXTENSION_DECLARATION,
    EXTENSION_SOURCE,
)
from gpukit.commands.preflight.facts import (
    Facts,
    canonical_name,
    distribution_cuda_major,
    gather_facts,
    major_of,
)
from gpukit.commands.preflight.fixes import (
    COMMON_FIXES,
    UNKNOWN,
    fix_words,
    pick_fix,
)
from gpukit.commands.preflight.reading import interpret, short
from gpukit.commands.preflight.results import FAIL, NOTE, OK, SKIP, Preflight, Result
from gpukit.commands.preflight.runner import (
    CHECKS,
    MARKER,
    SIMULATION_VARIABLES,
    ChildCheck,
    ChildRun,
    payloads,
    run_check_in_child,
    run_child,
    run_script,
)
from gpukit.commands.preflight.table import (
    CUDA_CHECKS,
    JAX_MEMORY_ENV,
    MPS_CHECKS,
    MPS_CPU_ONLY,
    MPS_OPERATIONS,
    check_cuda_majors,
    check_driver,
    check_names,
    mps_probe_names,
)

__all__ = [
    "BUDGET_S",
    "CHECKS",
    "COMMON_FIXES",
    "CUDA_CHECKS",
    "CUPY_KERNEL",
    "CUPY_KERNEL_NAME",
    "EXTENSION_DECLARATION",
    "EXTENSION_SOURCE",
    "FAIL",
    "JAX_MEMORY_ENV",
    "MARKER",
    "MIN_CHECK_S",
    "MPS_CHECKS",
    "MPS_CPU_ONLY",
    "MPS_OPERATIONS",
    "NOTE",
    "OK",
    "SIMULATION_VARIABLES",
    "SKIP",
    "UNKNOWN",
    "ChildCheck",
    "ChildRun",
    "Facts",
    "Preflight",
    "Result",
    "canonical_name",
    "check_cuda_majors",
    "check_driver",
    "check_names",
    "distribution_cuda_major",
    "fix_words",
    "gather_facts",
    "interpret",
    "main",
    "major_of",
    "mps_probe_names",
    "payloads",
    "pick_fix",
    "run_check_in_child",
    "run_child",
    "run_preflight",
    "run_script",
    "short",
    "why_no_gpu",
]

# What installs the lessons with a CUDA stack (the Makefile's `lessons` target), and nothing only the tests need.
LESSONS_WITH_CUDA = "make lessons GPU=cuda13"
# The whole preflight, checks in child processes included, ends within two minutes.
BUDGET_S = 110.0
# A check is not started with less time than this left.
MIN_CHECK_S = 5.0


def why_no_gpu(facts: Facts) -> str:
    if facts.torch_version is None:
        torch_text = "torch is not installed"
    elif facts.torch_cuda is None:
        torch_text = f"torch {facts.torch_version} is not a CUDA build"
        if facts.system != "darwin":  # on a GPU node, one command installs the lessons with the CUDA build
            torch_text += f"; on a GPU node: {LESSONS_WITH_CUDA}"
    else:
        torch_text = f"torch {facts.torch_version} (CUDA {facts.torch_cuda}) sees no GPU"
    where = "MPS is not available" if facts.system == "darwin" else "nvidia-smi lists none"
    return f"skipped: no GPU here ({where}; {torch_text})"


def gated_or_run(check: ChildCheck, facts: Facts, words, runner, deadline: float) -> list[Result]:
    gated = check.gate(facts, words) if check.gate is not None else None
    if gated is not None:
        return [Result(check.name, gated.status, gated.detail, gated.fix)]
    remaining = deadline - time.monotonic()
    if remaining < MIN_CHECK_S:
        return [Result(check.name, FAIL, "not run: the preflight's time was used up by the checks before it",
                       "rerun the preflight; the checks that were slow are the ones to look at")]
    limit = min(check.timeout, remaining)
    try:
        run = runner(check, limit)
    except Exception as error:  # noqa: BLE001 - a runner that fails is this check's failure, not the preflight's
        return [Result(check.name, FAIL, f"could not start the check: {first_line(error, 240)}",
                       pick_fix(check, str(error), words))]
    return interpret(check, run, words, limit)


def run_preflight(facts: Facts | None = None, *, runner: Callable | None = None,
                  emit: Callable[[Result], None] | None = None, budget: float = BUDGET_S) -> Preflight:
    """Run every check for this machine's GPU and return the :class:`Preflight`; ``emit`` sees each line as it
    is found. ``facts`` (default: :func:`gather_facts`) and ``runner(check, timeout) -> ChildRun`` (default:
    :func:`run_check_in_child`) can be replaced, which is how the tests fake a GPU."""
    started = time.monotonic()
    facts = gather_facts() if facts is None else facts
    runner = run_check_in_child if runner is None else runner
    outcome = Preflight(kind=facts.kind)

    def add(result: Result) -> None:
        outcome.results.append(result)
        if emit is not None:
            emit(result)

    if facts.kind is None:
        for name in check_names("mps" if facts.system == "darwin" else "cuda"):
            add(Result(name, SKIP, why_no_gpu(facts)))
        outcome.seconds = time.monotonic() - started
        return outcome
    words = fix_words(facts)
    checks = CUDA_CHECKS if facts.kind == "cuda" else MPS_CHECKS
    if facts.kind == "cuda":
        add(check_driver(facts, words))
        add(check_cuda_majors(facts, words))
    deadline = started + budget
    with ThreadPoolExecutor(max_workers=1) as beside:
        background = [(check, beside.submit(gated_or_run, check, facts, words, runner, deadline))
                      for check in checks if check.background]
        for check in checks:
            if not check.background:
                for result in gated_or_run(check, facts, words, runner, deadline):
                    add(result)
        for _, future in background:
            for result in future.result():
                add(result)
    outcome.seconds = time.monotonic() - started
    return outcome


def main() -> int:
    """``python -m gpukit doctor --gpu``: print each line as it comes, then the verdict; 0 only if all passed."""
    facts = gather_facts()
    kind = facts.kind
    names = check_names("mps" if kind == "mps" or (kind is None and facts.system == "darwin") else "cuda")
    width = max(len(name) for name in names)
    where = {"cuda": f"NVIDIA GPU(s): {'; '.join(facts.smi_gpus) or f'{facts.cuda_devices} seen by torch'}",
             "mps": "Apple GPU (MPS)", None: "no GPU found"}[kind]
    print(f"GPU preflight ({where}); each library runs in a child Python, all within {BUDGET_S:.0f} s.",
          flush=True)
    outcome = run_preflight(facts, emit=lambda result: print(result.line(width), flush=True))
    print(outcome.summary(), flush=True)
    return 0 if outcome.passed else 1
