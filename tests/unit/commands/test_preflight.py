"""The GPU preflight (``python -m gpukit doctor --gpu``, the package gpukit/commands/preflight/).

No GPU here, so three kinds of evidence:
- every FAIL line the preflight can print, made from hand-built :class:`Facts` and a fake runner that returns
  what a child Python would have printed (real error messages of the libraries), with the fix each must
  carry; a healthy CUDA node and a healthy Mac pass; a machine without a GPU fails with skip lines;
- the child checks themselves (the files of gpukit/commands/preflight/checks/), run for real on their CPU
  stand-ins (torch on the CPU, Numba's simulator, Triton's interpreter, gloo, JAX on the CPU, the MPS probe on the
  CPU), and with the stand-ins switched off, where they must fail with the message the fixes look for; the CUDA
  sources compiled with nvcc; the checks carried by an install that is not editable;
- the child runner: a time limit that stops the whole process group, a crash read as a crash, the
  simulation variables removed.

No test assumes that this machine lacks a GPU or a library: each forces what it tests (the GPU hidden from a child
with ``CUDA_VISIBLE_DEVICES=""``, JAX held to the CPU with ``JAX_PLATFORMS=cpu``, an import blocked in a child,
hand-made facts), so the file passes on a GPU node too; tests/support/gpu_node simulates one (on the first GPU run,
eight of these tests had failed because they assumed no GPU).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import gpukit
from gpukit.base import cuda_stacks
from gpukit.base.nvcc import compile_cuda, find_nvcc, ptx_entries
from gpukit.commands import preflight
from gpukit.commands.preflight import (
    CUDA_CHECKS,
    FAIL,
    MARKER,
    MPS_CHECKS,
    MPS_CPU_ONLY,
    MPS_OPERATIONS,
    NOTE,
    OK,
    SKIP,
    ChildRun,
    Facts,
    Result,
    check_names,
    run_child,
    run_preflight,
    run_script,
)
from gpukit.core.optional import install_command
from gpukit.topics.distributed import worker_env
from gpukit.topics.extensions import BuildTools
from tests.support.booktoc import ROOT
from tests.support.gpu_node import forcing_env, gpu_node_env
from tests.support.installed_copy import install_a_copy

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc (NVIDIA's CUDA toolkit) is not installed here")

# ------------------------------------------------------------------------------------------ fake machines
CUDA13_DISTRIBUTIONS = {
    "torch": "2.13.0", "triton": "3.7.1", "cupy-cuda13x": "14.2.0", "jax": "0.10.2", "jaxlib": "0.10.2",
    "jax-cuda13-plugin": "0.10.2", "jax-cuda13-pjrt": "0.10.2", "numba-cuda": "0.30.4",
    "cuda-toolkit": "13.0.3", "cuda-bindings": "13.0.3", "nvidia-cublas": "13.1.0.3",
    "nvidia-cudnn-cu13": "9.20.0.48", "nvidia-nccl-cu13": "2.28.7",
}
TOOLS13 = BuildTools(compiler="/usr/bin/c++", ninja="/usr/bin/ninja", python_headers="/usr/include/python3.11",
                     torch_cuda="13.0", cuda_device=True, cuda_home="/usr/local/cuda-13.0",
                     nvcc="/usr/local/cuda-13.0/bin/nvcc", nvcc_cuda="13.0")
H100 = Facts(system="linux", smi_gpus=("NVIDIA H100 80GB HBM3, 81559 MiB, 580.95.05",), driver="580.95.05",
             torch_version="2.13.0", torch_cuda="13.0", cuda_devices=1, distributions=CUDA13_DISTRIBUTIONS,
             tools=TOOLS13)
MAC = Facts(system="darwin", torch_version="2.13.0", mps=True, distributions={"torch": "2.13.0"})


def without(*names: str) -> dict[str, str]:
    return {name: version for name, version in CUDA13_DISTRIBUTIONS.items() if name not in names}


def reported(**fields) -> ChildRun:
    """A child that ran and printed its doctor."""
    return ChildRun(0, f"{MARKER}{json.dumps(fields)}\n", "", seconds=1.0)


def raised(*stderr_lines: str) -> ChildRun:
    """A child that ended with a traceback whose last lines are ``stderr_lines``."""
    text = "\n".join(["Traceback (most recent call last):", '  File "check.py", line 9, in <module>',
                      *stderr_lines])
    return ChildRun(1, "", text + "\n", seconds=1.0)


class FakeRunner:
    """Stands in for run_check_in_child: ``outcomes[check name]`` is a ChildRun, or a callable of (check,
    timeout); any other check reports success (every MPS operation "ok")."""

    def __init__(self, **outcomes):
        self.outcomes = outcomes
        self.calls: list[tuple[str, float]] = []

    def __call__(self, check, timeout):
        self.calls.append((check.name, timeout))
        outcome = self.outcomes.get(check.name)
        if callable(outcome):
            return outcome(check, timeout)
        if outcome is not None:
            return outcome
        if check.name == "mps linear algebra":
            return reported(results={name: "ok" for name in check.args}, detail="fake")
        return reported(detail=f"{check.name} ran (fake)")


def outcome_of(facts: Facts, **outcomes) -> tuple[preflight.Preflight, FakeRunner]:
    runner = FakeRunner(**outcomes)
    return run_preflight(facts, runner=runner), runner


def line(outcome: preflight.Preflight, name: str) -> Result:
    found = [r for r in outcome.results if r.name == name]
    assert len(found) == 1, f"{name!r} printed {len(found)} times: {outcome.to_text()}"
    return found[0]


def words_for(facts: Facts) -> dict[str, str]:
    return preflight.fix_words(facts)


# ------------------------------------------------------------------------------------------ healthy machines
def test_a_healthy_cuda_node_passes_every_check_in_order():
    outcome, runner = outcome_of(H100)
    assert outcome.kind == "cuda" and outcome.passed, outcome.to_text()
    assert [r.name for r in outcome.results] == list(check_names("cuda"))
    assert {r.status for r in outcome.results} == {OK}
    assert sorted(name for name, _ in runner.calls) == sorted(check.name for check in CUDA_CHECKS)
    assert all(limit <= preflight.BUDGET_S for _, limit in runner.calls)
    assert "runs CUDA 13 (needs 580+)" in line(outcome, "driver").detail
    majors = line(outcome, "CUDA majors").detail
    assert majors.startswith("CUDA 13 throughout: torch 2.13.0 (CUDA 13.0), cuda-bindings 13.0.3")
    assert "cupy-cuda13x" in majors and "jax-cuda13-plugin" in majors and majors.endswith("more")
    assert outcome.summary().startswith("Passed: 9 ok, 0 notes, 0 skipped")


def test_a_cuda_12_node_with_the_cuda_12_stack_passes():
    cu12 = {name.replace("cu13", "cu12").replace("cuda13", "cuda12"): version
            for name, version in CUDA13_DISTRIBUTIONS.items()}
    cu12.update({"cuda-toolkit": "12.9.2", "cuda-bindings": "12.9.4", "nvidia-cublas-cu12": "12.9.1.4"})
    del cu12["nvidia-cublas"]
    facts = dataclasses.replace(H100, driver="550.54.15", torch_version="2.13.0+cu129", torch_cuda="12.9",
                                distributions=cu12, tools=dataclasses.replace(TOOLS13, torch_cuda="12.9",
                                                                              nvcc_cuda="12.9"))
    outcome, _ = outcome_of(facts)
    assert outcome.passed, outcome.to_text()
    assert "runs CUDA 12 (needs 525+)" in line(outcome, "driver").detail


def test_a_new_driver_runs_the_older_stack_and_says_so():
    facts = dataclasses.replace(H100, torch_version="2.13.0+cu129", torch_cuda="12.9",
                                distributions={"torch": "2.13.0+cu129", "cupy-cuda12x": "14.2.0"})
    assert "(it would also run CUDA 13)" in check(facts, "driver").detail


def test_a_healthy_mac_passes():
    outcome, runner = outcome_of(MAC)
    assert outcome.kind == "mps" and outcome.passed, outcome.to_text()
    assert [r.name for r in outcome.results] == list(check_names("mps"))
    assert [name for name, _ in runner.calls] == [check.name for check in MPS_CHECKS]
    probed = next(c.args for c in MPS_CHECKS if c.name == "mps linear algebra")
    assert {op.name for op in MPS_OPERATIONS} <= set(probed)


def check(facts: Facts, name: str, **outcomes) -> Result:
    outcome, _ = outcome_of(facts, **outcomes)
    return line(outcome, name)


# ------------------------------------------------------------------------------------------ every FAIL line
# (what is wrong, the machine, the line, what its detail says, what its fix must contain)
MACHINE_FAILURES = [
    ("driver older than any stack", dataclasses.replace(H100, driver="470.57.02"), "driver",
     "NVIDIA driver 470.57.02 is older than 525", "NVIDIA driver 580 or newer (CUDA 13), at least 525"),
    ("torch not installed", dataclasses.replace(H100, torch_version=None, torch_cuda=None, distributions=without(
        "torch")), "driver", "runs CUDA 13 .*, but torch is not installed", "--force-reinstall"),
    ("torch not installed, so no matmul", dataclasses.replace(H100, torch_version=None, torch_cuda=None),
     "torch matmul", "torch is not installed", "--force-reinstall"),
    ("torch's CPU wheel on a GPU node", dataclasses.replace(H100, torch_version="2.13.0+cpu", torch_cuda=None,
                                                             cuda_devices=0),
     "driver", r"torch 2\.13\.0\+cpu is a CPU build", "-c requirements/lock.txt -e '.[lessons,cuda13]'"),
    ("torch built for a CUDA the book has no stack for", dataclasses.replace(H100, torch_cuda="11.8"), "driver",
     "built for CUDA 11.8, which none of the book's stacks uses", "--force-reinstall"),
    ("CUDA 13 torch on a driver that runs CUDA 12 only", dataclasses.replace(H100, driver="550.54.15"), "driver",
     "needs driver 580 or newer; this NVIDIA driver 550.54.15 runs CUDA 12",
     "--extra-index-url https://download.pytorch.org/whl/cu129 -e '.[lessons,cuda12]'"),
    ("CUDA 12 libraries beside CUDA 13 ones", dataclasses.replace(H100, distributions={
        **CUDA13_DISTRIBUTIONS, "cupy-cuda12x": "14.2.0", "nvidia-cublas-cu12": "12.9.1.4"}), "CUDA majors",
     r"more than one CUDA major in one environment \(CUDA 12: cupy-cuda12x, nvidia-cublas-cu12; CUDA 13: torch",
     "pip uninstall -y cupy-cuda12x nvidia-cublas-cu12 && "),
    ("no CuPy", dataclasses.replace(H100, distributions=without("cupy-cuda13x")), "CuPy",
     r"CuPy \(cupy-cuda12x / cupy-cuda13x\) is not installed", "-e '.[lessons,cuda13]'"),
    ("no JAX", dataclasses.replace(H100, distributions=without("jax")), "JAX", "jax is not installed",
     "cuda13]'"),
    ("no Triton", dataclasses.replace(H100, distributions=without("triton")), "Triton", "triton is not installed",
     "cuda13]'"),
    ("no numba-cuda", dataclasses.replace(H100, distributions=without("numba-cuda")), "Numba CUDA",
     "numba-cuda is not installed", "cuda13]'"),
    ("no C++ compiler", dataclasses.replace(H100, tools=dataclasses.replace(TOOLS13, compiler=None)),
     "C++/CUDA extension", "cannot build any extension: no C\\+\\+ compiler", "install what is missing"),
    ("nvcc of another CUDA major", dataclasses.replace(H100, tools=dataclasses.replace(TOOLS13, nvcc_cuda="12.4")),
     "C++/CUDA extension", "cannot build a CUDA extension: .*12.4", "e.g. cuda/13"),
]


@pytest.mark.parametrize(("facts", "name", "detail", "fix"), [case[1:] for case in MACHINE_FAILURES],
                         ids=[case[0] for case in MACHINE_FAILURES])
def test_each_machine_problem_is_a_fail_line_with_its_fix(facts, name, detail, fix):
    outcome, _ = outcome_of(facts)
    found = line(outcome, name)
    assert found.status == FAIL and re.search(detail, found.detail), found.line()
    assert fix in found.fix, found.line()
    assert not outcome.passed and outcome.summary().startswith("FAILED: ")


# (check, what the child printed on stderr, which of the check's fixes applies: an index, or None for its fix)
CHILD_FAILURES = [
    ("torch matmul", ["RuntimeError: torch 2.13.0 (CUDA 13.0): torch.cuda.is_available() is False"], 1),
    ("torch matmul", ["UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found "
                      "version 12080).", "RuntimeError: torch 2.13.0 (CUDA 13.0): torch.cuda.is_available() is "
                      "False"], 0),
    ("torch matmul", ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a total "
                      "capacity of 79.19 GiB of which 3.06 MiB is free."], 2),
    ("torch matmul", ["RuntimeError: the product on cuda is wrong: relative error 3.1e-01 against float64"], None),
    ("CuPy", ["cupy.cuda.compiler.CompileException: nvrtc: error: invalid value for --gpu-architecture (-arch)"], 0),
    ("CuPy", ["ImportError: libcublas.so.12: cannot open shared object file: No such file or directory"], 1),
    ("CuPy", ["RuntimeError: the RawKernel's result is wrong"], None),
    ("JAX", ["RuntimeError: JAX holds 60.8 GiB of GPU memory after one small function although "
             "XLA_PYTHON_CLIENT_PREALLOCATE=false: it preallocated"], 0),
    ("JAX", ["E external/xla/xla/stream_executor/cuda/cuda_dnn.cc:535] Loaded runtime CuDNN library: 9.1.0 but "
             "source was compiled with: 9.8.0.  CuDNN library needs to have matching major version and equal or "
             "higher minor version.",
             "jaxlib.xla_extension.XlaRuntimeError: FAILED_PRECONDITION: DNN library initialization failed."], 1),
    ("JAX", ["RuntimeError: jaxlib version 0.10.2 is newer than and incompatible with jax version 0.9.0. Please "
             "update your jax and/or jaxlib packages."], 2),
    ("JAX", ["RuntimeError: JAX runs on cpu, not the GPU: its devices are [CpuDevice(id=0)]"], 3),
    ("JAX", ["RuntimeError: Unable to initialize backend 'cuda': FAILED_PRECONDITION: No visible GPU devices."], 3),
    ("JAX", ["RuntimeError: the jitted function's result differs from NumPy's"], None),
    ("Triton", ["RuntimeError: Triton's interpreter is on (TRITON_INTERPRET=1): the kernel would run on the CPU "
                "instead of being compiled"], 0),
    ("Triton", ["/tmp/tmpab12/main.c:5:10: fatal error: Python.h: No such file or directory",
                "subprocess.CalledProcessError: Command '['/usr/bin/gcc', '/tmp/tmpab12/main.c']' returned "
                "non-zero exit status 1."], 2),
    ("Triton", ["AssertionError: libcuda.so cannot found!"], 1),
    ("Triton", ["RuntimeError: Internal Triton PTX codegen error: `ptxas` stderr:",
                "ptxas fatal   : Value 'sm_120a' is not defined for option 'gpu-name'"], 3),
    ("Triton", ["AssertionError: Tensor-likes are not close!"], None),
    ("Numba CUDA", ["RuntimeError: Numba's CUDA simulator is on (NUMBA_ENABLE_CUDASIM=1): the kernel would run on "
                    "the CPU"], 0),
    ("Numba CUDA", ["AttributeError: module 'numpy' has no attribute 'row_stack'"], 1),  # the first GPU run
    ("Numba CUDA", ['cuda.pathfinder._dynamic_libs.load_dl_common.DynamicLibNotFoundError: Failure finding '
                    '"libnvrtc.so.13 or libnvrtc.so.12": No such file: libnvrtc.so.13 or libnvrtc.so.12'], 2),
    ("Numba CUDA", ["RuntimeError: numba.cuda.is_available() is False: numba-cuda cannot reach the driver or its "
                    "CUDA libraries"], 3),
    ("Numba CUDA", ["RuntimeError: the Numba kernel's result is wrong"], None),
    ("NCCL all_reduce", ["RuntimeError: this torch (2.13.0) was built without NCCL"], 0),
    ("NCCL all_reduce", ["torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
                         "network address. port: 29500, useIPv6: 0, code: -98, name: EADDRINUSE, message: address "
                         "already in use"], 1),
    ("NCCL all_reduce", ["torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3356, unhandled "
                         "system error"], None),
    ("C++/CUDA extension", ["nvcc fatal   : Unsupported gpu architecture 'compute_120'",
                            "RuntimeError: Error building extension 'gpukit_preflight_axpy'"], 0),
    ("C++/CUDA extension", ["#error -- unsupported GNU version! gcc versions later than 14 are not supported!",
                            "RuntimeError: Error building extension 'gpukit_preflight_axpy'"], 1),
    ("C++/CUDA extension", ["RuntimeError: The detected CUDA version (12.4) mismatches the version that was used to "
                            "compile PyTorch (13.0). Please make sure to use the same CUDA versions."], 2),
    ("C++/CUDA extension", ["RuntimeError: Ninja is required to load C++ extensions (pip install ninja to get it)"], 3),
    ("C++/CUDA extension", ["RuntimeError: Error building extension 'gpukit_preflight_axpy'"], None),
]
BY_NAME = {check.name: check for check in (*CUDA_CHECKS, *MPS_CHECKS)}


@pytest.mark.parametrize(("name", "stderr", "which"), CHILD_FAILURES,
                         ids=[f"{name}: {stderr[-1][:50]}" for name, stderr, _ in CHILD_FAILURES])
def test_each_way_a_check_fails_names_its_fix(name, stderr, which):
    found = check(H100, name, **{name: raised(*stderr)})
    if which is None:
        chosen, groups = BY_NAME[name].fix, {}
        assert chosen.startswith(preflight.UNKNOWN)  # a cause it does not know is not dressed up as one
    else:
        pattern, chosen = BY_NAME[name].fixes[which]
        groups = re.search(pattern, "\n".join(stderr), re.IGNORECASE).groupdict()
    assert found.status == FAIL and found.fix == chosen.format(**words_for(H100), **groups), found.line()
    # The exception's line; where it ends with a colon, the line after it (which holds the cause) too.
    shown = " ".join(stderr[-2:]) if stderr[-2:][0].endswith(":") else stderr[-1]
    assert found.detail == preflight.short(shown), found.line()


# Causes any check can meet (preflight.COMMON_FIXES), each with a library's real message: (check, stderr, which).
COMMON_FAILURES = [
    ("CuPy", ["ModuleNotFoundError: No module named 'cupy'"], 0),
    ("torch matmul", ["ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"], 1),
    ("CuPy", ["cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorInsufficientDriver: CUDA driver version "
              "is insufficient for CUDA runtime version"], 2),
    ("NCCL all_reduce", ["RuntimeError: CUDA error: no CUDA-capable device is detected"], 3),
    ("torch matmul", ["RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable"], 4),
    ("JAX", ["jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
             "34359738368 bytes."], 5),
    ("torch matmul", ["RuntimeError: CUDA error: no kernel image is available for execution on the device"], 6),
    ("C++/CUDA extension", ["OSError: [Errno 28] No space left on device"], 7),
    ("NCCL all_reduce", ["OSError: [Errno 12] Cannot allocate memory"], 8),
]


@pytest.mark.parametrize(("name", "stderr", "which"), COMMON_FAILURES,
                         ids=[f"{name}: {stderr[-1][:50]}" for name, stderr, _ in COMMON_FAILURES])
def test_a_cause_any_check_can_meet_gets_its_own_fix(name, stderr, which):
    found = check(H100, name, **{name: raised(*stderr)})
    pattern, fix = preflight.COMMON_FIXES[which]
    groups = re.search(pattern, stderr[-1], re.IGNORECASE).groupdict()
    assert found.status == FAIL and found.fix == fix.format(**words_for(H100), **groups), found.line()
    assert found.detail == preflight.short(stderr[-1])


def test_every_common_cause_is_shown_above_by_a_real_message():
    assert {which for _, _, which in COMMON_FAILURES} == set(range(len(preflight.COMMON_FIXES)))


def test_a_missing_module_is_named_in_the_fix():
    found = check(H100, "CuPy", CuPy=raised("ModuleNotFoundError: No module named 'cupy'"))
    assert found.fix.startswith("cupy cannot be imported in this Python: install the stack into it: ")
    assert cuda_stacks.install_command(cuda_stacks.STACKS[0]) in found.fix


def test_numpy_2_5_under_numba_cuda_names_numpy_and_the_pinned_numpy():
    """The first GPU run's Numba line: numba-cuda 0.30.4 beside NumPy 2.5.2 (the fix it printed, "install
    numba-cuda[cu13]", was wrong)."""
    from gpukit.core.optional import pinned_requirement

    facts = dataclasses.replace(H100, numpy_version="2.5.2")
    found = check(facts, "Numba CUDA", **{"Numba CUDA": raised(
        "AttributeError: module 'numpy' has no attribute 'row_stack'")})
    assert found.detail == "AttributeError: module 'numpy' has no attribute 'row_stack'"
    assert found.fix.startswith("numba-cuda 0.30.4 uses np.row_stack, which NumPy 2.5.2 no longer has")
    assert found.fix.endswith(f"install the NumPy the book pins: {install_command('numpy')}")
    assert pinned_requirement("numpy") == "numpy==2.4.6" and "numpy==2.4.6" in found.fix
    assert "numba-cuda[cu" not in found.fix


def test_every_fix_of_every_check_is_shown_above_by_a_real_message():
    covered = {(name, which) for name, _, which in CHILD_FAILURES}
    for check_ in CUDA_CHECKS:
        for which in (None, *range(len(check_.fixes))):
            assert (check_.name, which) in covered, f"no test above makes {check_.name!r} pick fix {which}"


def test_a_fix_names_the_stack_the_driver_runs():
    facts = dataclasses.replace(H100, driver="535.104.05", torch_version="2.13.0+cu129", torch_cuda="12.9",
                                distributions={"torch": "2.13.0+cu129", "cupy-cuda12x": "14.2.0"})
    found = check(facts, "CuPy", CuPy=raised("ImportError: libnvrtc.so.12: cannot open shared object file"))
    assert "cupy-cuda12x[ctk]" in found.fix and "whl/cu129" in found.fix


def test_a_check_that_is_stopped_at_its_limit():
    slow = ChildRun(-signal.SIGKILL, "", "compiling...\n", timed_out=True, seconds=60.0)
    found = check(H100, "JAX", JAX=slow)
    assert found.status == FAIL
    assert found.detail == "did not finish within 60 s and was stopped (its last line: 'compiling...')"
    assert found.fix.startswith("rerun the preflight (a first run compiles kernels)")


def test_a_crashed_child_is_reported_as_a_crash():
    crash = ChildRun(-signal.SIGSEGV, "", "Fatal Python error: Segmentation fault\n")
    found = check(H100, "CuPy", CuPy=crash)
    assert found.status == FAIL
    assert found.detail == "crashed: killed by SIGSEGV after 'Fatal Python error: Segmentation fault'"


def test_a_child_that_reports_nothing_fails():
    found = check(H100, "Numba CUDA", **{"Numba CUDA": ChildRun(0, "some output\n", "")})
    assert found.status == FAIL
    assert found.detail == "the child Python ended without reporting a result (its last line: 'some output')"


def test_a_runner_that_cannot_start_the_child_fails_that_check_only():
    def cannot_start(check_, timeout):
        raise OSError("[Errno 12] Cannot allocate memory")

    outcome, _ = outcome_of(H100, JAX=cannot_start)
    assert line(outcome, "JAX").detail == "could not start the check: [Errno 12] Cannot allocate memory"
    assert [r.name for r in outcome.failures] == ["JAX"]


def test_checks_left_without_time_fail_without_running():
    def slow(check_, timeout):
        time.sleep(1.0)
        return reported(detail="ran")

    runner = FakeRunner(**{"torch matmul": slow})
    outcome = run_preflight(H100, runner=runner, budget=preflight.MIN_CHECK_S + 0.5)
    assert line(outcome, "torch matmul").status == OK
    assert runner.calls[0][1] <= preflight.MIN_CHECK_S + 0.5
    later = [r for r in outcome.results if r.name in ("CuPy", "JAX", "Triton", "Numba CUDA", "NCCL all_reduce")]
    assert later and all(r.status == FAIL and r.detail.startswith("not run: the preflight's time") for r in later)
    assert outcome.seconds < 5


def test_no_gpu_means_skip_lines_and_a_failed_preflight():
    outcome, runner = outcome_of(Facts(system="linux", torch_version="2.13.0+cpu", distributions={"torch": "x"}))
    assert outcome.kind is None and not outcome.passed and runner.calls == []
    assert [r.name for r in outcome.results] == list(check_names("cuda"))
    assert {r.status for r in outcome.results} == {SKIP}
    assert "nvidia-smi lists none; torch 2.13.0+cpu is not a CUDA build" in outcome.results[0].detail
    assert "on a GPU node: make lessons GPU=cuda13" in outcome.results[0].detail  # the command that fixes it
    assert outcome.summary().startswith("FAILED: no GPU here")
    mac, _ = outcome_of(Facts(system="darwin", torch_version="2.13.0", distributions={"torch": "2.13.0"}))
    assert [r.name for r in mac.results] == list(check_names("mps"))
    assert "MPS is not available" in mac.results[0].detail


def test_a_fail_line_must_carry_a_fix():
    with pytest.raises(ValueError, match="must say how to fix it"):
        Result("x", FAIL, "broken")
    with pytest.raises(ValueError, match="a preflight status is one of"):
        Result("x", "warn", "odd")


# ------------------------------------------------------------------------------------------ the Mac's lines
def mps_results(**cells) -> ChildRun:
    names = preflight.mps_probe_names()
    return reported(results={name: cells.get(name, "ok") for name in names}, detail="fake")


def test_an_operation_that_gives_wrong_numbers_on_mps_fails():
    outcome, _ = outcome_of(MAC, **{"mps linear algebra": mps_results(
        **{"linalg.lu_factor_ex (float32)": "wrong: max error 3.2e-01"})})
    found = line(outcome, "mps linalg.lu_factor_ex (float32)")
    assert found.status == FAIL and "GPUKIT_DEVICE=cpu" in found.fix
    assert found.detail.startswith("wrong: max error 3.2e-01; chapter 7's lu_det")


def test_an_operation_missing_on_mps_fails_with_the_fallback_as_fix():
    outcome, _ = outcome_of(MAC, **{"mps linear algebra": mps_results(
        **{"linalg.det (float32)": "error: NotImplementedError: The operator 'aten::_linalg_det.result' is not "
                                   "currently implemented for the MPS device."})})
    found = line(outcome, "mps linalg.det (float32)")
    assert found.status == FAIL and "PYTORCH_ENABLE_MPS_FALLBACK=1" in found.fix


def test_an_operation_the_lesson_guards_is_a_note_and_the_mac_still_passes():
    unsupported = "error: RuntimeError: MPS does not support complex FFT on macOS 13"
    outcome, _ = outcome_of(MAC, **{"mps linear algebra": mps_results(
        **{"fft.fft (complex64)": unsupported, "fft.fft2 (complex64)": unsupported})})
    assert line(outcome, "mps fft.fft (complex64)").status == NOTE
    assert line(outcome, "mps fft.fft2 (complex64)").status == NOTE  # chapter 12 guards it with fft.fft
    assert outcome.passed and "2 notes" in outcome.summary()


def test_an_operation_the_probe_did_not_report_fails():
    payload = {"results": {"linalg.solve (float32)": "ok"}, "detail": "fake"}
    outcome, _ = outcome_of(MAC, **{"mps linear algebra": reported(**payload)})
    assert line(outcome, "mps linalg.det (float32)").detail.startswith("not probed")


def test_mps_matmul_failing_says_what_mps_needs():
    found = check(MAC, "torch matmul (MPS)", **{"torch matmul (MPS)": raised(
        "RuntimeError: The MPS backend is supported on MacOS 14.0+. Current OS version can be queried using "
        "`sw_vers`")})
    assert found.status == FAIL and found.fix.startswith("MPS needs Apple silicon, macOS 14 or newer")


def test_mps_out_of_memory_says_so_and_no_cuda_advice_reaches_a_mac():
    found = check(MAC, "torch matmul (MPS)", **{"torch matmul (MPS)": raised(
        "RuntimeError: MPS backend out of memory (MPS allocated: 18.00 GB, other allocations: 1.20 GB, max allowed: "
        "20.40 GB). Tried to allocate 64.00 MiB on private pool.")})
    assert found.status == FAIL and found.fix.startswith("the Mac's memory, which its GPU shares with the CPU")
    odd = check(MAC, "torch matmul (MPS)", **{"torch matmul (MPS)": raised(
        "RuntimeError: CUDA error: no kernel image is available for execution on the device")})
    assert odd.fix.startswith(preflight.UNKNOWN) and "nvidia-smi" not in odd.fix


def lesson_torch_calls(notebook: str) -> set[str]:
    """``linalg.solve``, ``fft.fft2``, ...: the torch.linalg and torch.fft functions a notebook's code calls."""
    cells = json.loads((ROOT / "notebooks" / notebook).read_text(encoding="utf-8"))["cells"]
    code = "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")
    return {".".join(match) for match in re.findall(r"torch\.(linalg|fft)\.(\w+)", code)}


def test_the_mac_checks_cover_the_linear_algebra_the_lessons_call():
    called = set().union(*(lesson_torch_calls(name) for name in ("01-cpu-vs-gpu.ipynb", "04-pytorch-gpu.ipynb",
                                                                 "07-apple-mps.ipynb", "12-case-study.ipynb")))
    assert {"linalg.solve", "linalg.lu_factor_ex", "fft.fft2"} <= called  # the search finds calls at all
    checked = {op.name.split(" ")[0] for op in MPS_OPERATIONS}
    missing = called - checked - {f"linalg.{name}" for name in MPS_CPU_ONLY}
    assert not missing, f"the lessons call these on the device but the Mac's preflight does not check them: {missing}"
    stale = checked - called - {"fft.fft"}  # fft.fft is the probe chapter 12 guards fft2 with
    assert not stale, f"the Mac's preflight checks what no lesson calls: {stale}"


# ------------------------------------------------------------------------------------------ the real child scripts
def script_calling(check_name: str, call: str) -> str:
    """A script that imports a check's file (from its folder, as the check itself runs) and reports
    ``<call>``, e.g. ``run(device="cpu")``, instead of what its ``__main__`` block runs."""
    module = BY_NAME[check_name].path.stem
    return (f"import sys\nsys.path.insert(0, {str(preflight.CHECKS)!r})\nfrom preflight_child import report\n"
            f"from {module} import run\n\nreport(**{call})\n")


def report_of(run) -> dict:
    found = preflight.payloads(run)
    assert run.ok and found, f"exit {run.returncode}:\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
    return found[-1]


def as_the_preflight_reads(name: str, run) -> Result:
    return preflight.interpret(BY_NAME[name], run, words_for(H100), 60.0)[0]


def test_every_check_is_a_file_of_the_package_that_reports():
    """Each child check is a file of gpukit/commands/preflight/checks/ (which ruff lints with gpukit) that reports
    through preflight_child when run as a script; and the folder holds no file that no check runs or imports."""
    folder = ROOT / "gpukit" / "commands" / "preflight" / "checks"
    assert preflight.CHECKS == folder
    used = set()
    for check_ in (*CUDA_CHECKS, *MPS_CHECKS):
        assert check_.path.parent == folder and check_.path.is_file(), check_.path
        tree = ast.parse(check_.path.read_text(encoding="utf-8"), filename=str(check_.path))
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module ==
                    "preflight_child" for alias in node.names}
        assert imported == {"report"}, check_.path
        assert 'if __name__ == "__main__":' in check_.path.read_text(encoding="utf-8"), check_.path
        used.add(check_.path.name)
    helpers = {"preflight_child.py", "preflight_sources.py"}
    assert {path.name for path in folder.glob("*.py")} == used | helpers


def test_the_checks_are_scripts_that_no_module_walk_imports():
    """tests/unit/test_import.py imports every gpukit module pkgutil lists; a check imports its library at its top
    (CuPy, missing on most machines) and its neighbours by bare names, so the checks' folder is no package of
    modules (no __init__.py) and pkgutil lists none of its files."""
    import pkgutil

    assert not (preflight.CHECKS / "__init__.py").exists()
    listed = {name for _, name, _ in pkgutil.walk_packages(gpukit.__path__, "gpukit.")}
    assert "gpukit.commands.preflight.runner" in listed  # the walk reaches the preflight at all
    assert not {name for name in listed if name.startswith("gpukit.commands.preflight.checks")}, listed


def test_no_check_file_hides_a_library():
    """A check runs with its folder first on the import path: a file there named as a library (cupy.py, jax.py)
    would be imported instead of it, whether or not this machine has the library."""
    files = {path.stem for path in preflight.CHECKS.glob("*.py")} - {"__init__"}
    imported = set()
    for path in preflight.CHECKS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    assert {"torch", "cupy", "jax", "triton", "numba", "gpukit"} <= imported  # the walk finds the imports at all
    clashes = files & (imported - {"preflight_child", "preflight_sources"})
    assert not clashes, f"check files named as what the checks import: {clashes}"
    for stem in files:
        assert importlib.util.find_spec(stem) is None, f"{stem}.py has the name of an importable module"


def test_torch_matmul_script_on_the_cpu():
    detail = report_of(run_script(BY_NAME["torch matmul"].path, ("cpu",), timeout=120))["detail"]
    assert re.match(r"\d+\.\d\d TFLOP/s, float32 256 x 256 on cpu \(wall clock, median of 10\); torch 2\.", detail)


def test_torch_matmul_script_refuses_a_torch_that_sees_no_gpu():
    run = run_script(BY_NAME["torch matmul"].path, ("cuda",), env=forcing_env(hide_gpu=True), timeout=120)
    found = as_the_preflight_reads("torch matmul", run)
    assert found.status == FAIL and "torch.cuda.is_available() is False" in found.detail
    assert found.fix == BY_NAME["torch matmul"].fixes[1][1]


def test_triton_script_in_the_interpreter():
    run = run_child(script_calling("Triton", 'run(device="cpu", interpreted_ok=True)'),
                    env={"TRITON_INTERPRET": "1"}, timeout=120)
    assert report_of(run)["detail"].startswith("ran in Triton's interpreter; triton ")


def test_triton_script_refuses_the_interpreter():
    run = run_script(BY_NAME["Triton"].path, env={"TRITON_INTERPRET": "1"}, timeout=120)
    found = as_the_preflight_reads("Triton", run)
    assert found.status == FAIL and "interpreter is on" in found.detail
    assert found.fix.startswith("unset TRITON_INTERPRET")


def test_numba_script_on_the_simulator():
    run = run_child(script_calling("Numba CUDA", "run(simulator_ok=True)"), env={"NUMBA_ENABLE_CUDASIM": "1"},
                    timeout=120)
    assert report_of(run)["detail"] == "ran on Numba's CUDA simulator"


def test_numba_script_refuses_the_simulator():
    run = run_script(BY_NAME["Numba CUDA"].path, env={"NUMBA_ENABLE_CUDASIM": "1"}, timeout=120)
    found = as_the_preflight_reads("Numba CUDA", run)
    assert found.status == FAIL and found.fix.startswith("unset NUMBA_ENABLE_CUDASIM")


def force(monkeypatch, **conditions) -> None:
    """Set what ``forcing_env(**conditions)`` returns here, for the children the preflight's own runner starts."""
    for name, value in forcing_env(**conditions).items():
        monkeypatch.setenv(name, value)


def test_numba_script_beside_numpy_2_5_fails_at_the_compiler_with_numpys_error():
    """The real script, with numba-cuda's real CUDA target (told by tests/support/gpu_node that a GPU is there) and
    NumPy
    without np.row_stack, as NumPy 2.5 is: it stops where the first GPU run did, in numba-cuda's NumPy lowering,
    before anything needs a GPU."""
    env = {**gpu_node_env(parts=("numba",), cxx=None), **forcing_env(numpy_2_5=True)}
    env["PYTHONPATH"] = gpu_node_env(parts=("numba",), cxx=None)["PYTHONPATH"]
    run = run_script(BY_NAME["Numba CUDA"].path, env=env, unset=preflight.SIMULATION_VARIABLES, timeout=120)
    assert 'numba_cuda/numba/cuda/np/arrayobj.py", line' in run.stderr and "overload(np.row_stack)" in run.stderr
    words = preflight.fix_words(dataclasses.replace(H100, numpy_version="2.5.2"))
    found = preflight.interpret(BY_NAME["Numba CUDA"], run, words, 60.0)[0]
    assert found.status == FAIL and found.detail == "AttributeError: module 'numpy' has no attribute 'row_stack'"
    assert "NumPy 2.5.2 no longer has" in found.fix and found.fix.endswith("numpy==2.4.6")


def test_the_preflight_runs_numba_without_the_simulator_even_where_the_lessons_set_it(monkeypatch):
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")  # as a CPU machine's notebook kernel has it
    force(monkeypatch, hide_gpu=True)  # so that the real CUDA target, which the child must get, finds no GPU
    found = as_the_preflight_reads("Numba CUDA", preflight.run_check_in_child(BY_NAME["Numba CUDA"], 120))
    assert found.status == FAIL and "numba.cuda.is_available() is False" in found.detail, found.line()


def test_nccl_script_with_gloo_on_the_cpu():
    run = run_child(script_calling("NCCL all_reduce", 'run(backend="gloo", device="cpu")'), env=worker_env(),
                    timeout=120)
    assert report_of(run)["detail"] == "all_reduce of 4 MiB over 1 rank with gloo, rendezvous at 127.0.0.1"


def test_nccl_script_with_a_torch_without_nccl(monkeypatch):
    force(monkeypatch, torch_without_nccl=True)  # torch.distributed.is_nccl_available() is False in the child
    found = as_the_preflight_reads("NCCL all_reduce", preflight.run_check_in_child(BY_NAME["NCCL all_reduce"], 120))
    assert found.status == FAIL and "was built without NCCL" in found.detail, found.line()
    assert found.fix.startswith("this torch has no NCCL")


def test_jax_script_on_the_cpu():
    run = run_child(script_calling("JAX", "run(require_gpu=False)"),
                    env={**preflight.JAX_MEMORY_ENV, "JAX_PLATFORMS": "cpu"}, timeout=120)
    detail = report_of(run)["detail"]
    assert detail.startswith("jit ran on cpu (cpu) and matched NumPy")
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false; jax 0." in detail


def test_jax_script_refuses_the_cpu(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")  # JAX then runs on the CPU, with its CUDA plugin or without
    found = as_the_preflight_reads("JAX", preflight.run_check_in_child(BY_NAME["JAX"], 120))
    assert found.status == FAIL and found.detail.startswith("RuntimeError: JAX runs on cpu, not the GPU")
    assert found.fix.startswith("JAX has no working CUDA plugin here")


def test_the_mac_probe_script_on_the_cpu():
    names = preflight.mps_probe_names()
    run = run_child(script_calling("mps linear algebra", f'run("cpu", {list(names)!r})'), timeout=120)
    assert report_of(run)["results"] == {name: "ok" for name in names}


def test_cupy_script_without_cupy_fails_with_the_install_command(monkeypatch):
    force(monkeypatch, hide=("cupy",))
    found = as_the_preflight_reads("CuPy", preflight.run_check_in_child(BY_NAME["CuPy"], 120))
    assert found.status == FAIL and "No module named 'cupy'" in found.detail
    assert cuda_stacks.install_command(cuda_stacks.STACKS[0]) in found.fix


@needs_nvcc
def test_the_cupy_kernel_compiles_with_nvcc():
    assert ptx_entries(compile_cuda(preflight.CUPY_KERNEL)) == [preflight.CUPY_KERNEL_NAME]


def test_a_non_editable_install_carries_the_checks_and_runs_them(tmp_path):
    """pip install --target of a copy of the project, with the source tree out of reach: setuptools' package
    discovery (pyproject.toml: gpukit.*, namespace packages found) installs the checks' folder, which has no
    __init__.py, and the preflight runs a check from the installed copy."""
    target, elsewhere = install_a_copy(tmp_path, also_left_out=("data", "tests", "chapters"))
    script = (
        "import json\n"
        "import gpukit.commands.preflight as p\n"
        "check = next(c for c in p.CUDA_CHECKS if c.name == 'torch matmul')\n"
        "run = p.run_script(check.path, ('cpu',), timeout=120)\n"
        "print('FOUND ' + json.dumps({'file': p.__file__, 'checks': sorted(f.name for f in p.CHECKS.glob('*.py')),\n"
        "      'all': all(c.path.is_file() for c in (*p.CUDA_CHECKS, *p.MPS_CHECKS)), 'reports': p.payloads(run),\n"
        "      'stderr': run.stderr[-2000:]}))\n")
    run = subprocess.run([sys.executable, "-c", script], cwd=elsewhere, capture_output=True, text=True, timeout=240,
                         env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, check=False)
    lines = [line for line in run.stdout.splitlines() if line.startswith("FOUND ")]
    assert run.returncode == 0 and lines, run.stderr
    found = json.loads(lines[-1][len("FOUND "):])
    assert found["file"].startswith(str(target)), found["file"]
    assert found["all"] and "check_cupy.py" in found["checks"] and "preflight_child.py" in found["checks"]
    assert found["reports"] and "on cpu (wall clock" in found["reports"][-1]["detail"], found["stderr"]


# The preflight's extension source is compiled against PyTorch's headers with chapter 5's, in one translation unit:
# tests/unit/topics/test_extensions.py::test_the_cuda_extension_sources_compile_against_pytorchs_headers.


# ------------------------------------------------------------------------------------------ the child runner
def test_the_child_sees_this_gpukit_and_not_the_simulation_variables(monkeypatch):
    for variable in preflight.SIMULATION_VARIABLES:
        monkeypatch.setenv(variable, "1")
    script = (f"import os\nimport sys\nsys.path.insert(0, {str(preflight.CHECKS)!r})\n"
              "from preflight_child import report\nimport gpukit\n"
                        "report(file=gpukit.__file__, set=sorted(k for k in os.environ if k in "
                        f"{preflight.SIMULATION_VARIABLES!r}), added=os.environ.get('GPUKIT_PREFLIGHT_TEST'))\n")
    run = run_child(script, env={"GPUKIT_PREFLIGHT_TEST": "yes"}, unset=preflight.SIMULATION_VARIABLES)
    found = report_of(run)
    assert found == {"file": gpukit.__file__, "set": [], "added": "yes"}


def test_a_child_past_its_limit_is_stopped_with_what_it_started():
    script = ("import subprocess, sys, time\n"
              "helper = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
              "print(helper.pid, flush=True)\ntime.sleep(120)\n")
    started = time.monotonic()
    run = run_child(script, timeout=3)
    assert run.timed_out and time.monotonic() - started < 20
    helper = int(run.stdout.split()[0])
    for _ in range(50):  # the killed helper is reaped by init shortly after
        if not os.path.exists(f"/proc/{helper}") or "Z" in _state(helper):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the child's own process {helper} outlived the time limit")


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_a_child_that_segfaults_is_read_as_a_crash():
    run = run_child("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    assert run.returncode == -signal.SIGSEGV and not run.timed_out
    found = as_the_preflight_reads("CuPy", run)
    assert found.status == FAIL and found.detail.startswith("crashed: killed by SIGSEGV")


# ------------------------------------------------------------------------------------------ facts and the command
def test_the_driver_is_read_from_nvidia_smi_or_the_kernel_module(tmp_path):
    from gpukit.core import machine

    assert machine.driver_in_smi_lines(["NVIDIA H100 80GB HBM3, 81559 MiB, 580.95.05"]) == "580.95.05"
    assert machine.driver_in_smi_lines(["garbage"]) is None
    proc = tmp_path / "version"
    proc.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
                    "(dvs-builder@U22-I3-AM02-24-3)  Wed Sep 24 20:10:46 UTC 2025\n"
                    "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n")
    assert machine.kernel_module_driver(str(proc)) == "580.95.05"
    assert machine.kernel_module_driver(str(tmp_path / "absent")) is None


@pytest.mark.parametrize(("name", "version", "major"), [
    ("nvidia-cublas-cu12", "12.9.1.4", 12), ("nvidia_cudnn_cu13", "9.20.0.48", 13), ("cupy-cuda13x", "14.2.0", 13),
    ("jax-cuda12-plugin", "0.10.2", 12), ("jax_cuda13_pjrt", "0.10.2", 13), ("cuda-toolkit", "13.0.3", 13),
    ("cuda-bindings", "12.9.4", 12), ("nvidia-cublas", "13.1.0.3", None), ("nvidia-cufft", "12.0.0", None),
    ("jax", "0.10.2", None),
])
def test_the_cuda_major_a_distribution_is_built_for(name, version, major):
    assert preflight.distribution_cuda_major(name, version) == major


@pytest.mark.parametrize(("name", "canonical"), [
    ("Jax_CUDA13.Plugin", "jax-cuda13-plugin"), ("nvidia_cudnn_cu13", "nvidia-cudnn-cu13"),
    ("CuPy-CUDA13x", "cupy-cuda13x"),
    ("numba__cuda", "numba-cuda"), ("torch", "torch"),
])
def test_distribution_names_are_compared_as_pip_compares_them(name, canonical):
    assert preflight.canonical_name(name) == canonical


@pytest.mark.parametrize(("version", "major"), [
    ("13.0", 13), ("12.9", 12), ("13.0.3", 13), ("2.13.0+cu129", 2), (" 11.8 ", 11), ("v13.0", 13), (None, None),
    ("", None), ("(version unknown)", None),
])
def test_the_major_of_a_version_is_packagings(version, major):
    assert preflight.major_of(version) == major


def test_a_torch_whose_cuda_is_not_a_version_is_treated_as_no_known_stack():
    """torch.version.cuda is read with packaging: a string that is no version has no major, so no stack is
    taken for it (the driver line then says torch is built for a CUDA none of the book's stacks uses)."""
    facts = dataclasses.replace(H100, torch_cuda="unknown")
    assert facts.torch_major is None
    found = check(facts, "driver")
    assert found.status == FAIL and "built for CUDA unknown, which none of the book's stacks uses" in found.detail


def fake_machine(monkeypatch, *, smi: list[str] | None, cuda: str | None, devices: int) -> None:
    """What gather_facts reads: nvidia-smi's lines (None: no nvidia-smi), torch's CUDA build and its devices."""
    import torch

    from gpukit.core import machine

    monkeypatch.setattr(machine, "nvidia_smi_gpus", lambda: smi)
    monkeypatch.setattr(machine, "kernel_module_driver", lambda path=None: None)
    monkeypatch.setattr(torch.version, "cuda", cuda)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: devices > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: devices)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


def test_the_facts_of_a_machine_without_a_gpu_say_so(monkeypatch):
    fake_machine(monkeypatch, smi=None, cuda=None, devices=0)
    facts = preflight.gather_facts()
    assert facts.kind is None and facts.tools is None and facts.cuda_devices == 0 and facts.driver is None
    assert "torch" in facts.distributions and facts.torch_cuda is None


def test_the_facts_of_a_cuda_node_name_its_gpu_driver_and_build_tools(monkeypatch):
    fake_machine(monkeypatch, smi=["NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04"], cuda="13.0", devices=1)
    facts = preflight.gather_facts()
    assert facts.kind == "cuda" and facts.driver == "580.159.04" and facts.cuda_devices == 1
    assert facts.torch_cuda == "13.0" and facts.tools is not None and facts.tools.torch_cuda == "13.0"


def test_the_command_without_a_gpu_prints_a_skip_line_per_check_and_fails():
    # No GPU for the child: CUDA shows none, and nvidia-smi fails as on a node whose driver is not loaded.
    hidden = {**os.environ, **forcing_env(hide_gpu=True, no_nvidia_smi=True)}
    done = subprocess.run([sys.executable, "-m", "gpukit", "doctor", "--gpu"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env=hidden)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("GPU preflight (no GPU found)")
    for name in check_names("cuda"):
        assert any(re.match(rf"skip\s+{re.escape(name)}\s+skipped: no GPU here", text) for text in lines), name
    assert lines[-1].startswith("FAILED: no GPU here, so nothing was checked")


def test_the_preflight_has_no_markdown_form():
    done = subprocess.run([sys.executable, "-m", "gpukit", "doctor", "--gpu", "--markdown"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "not allowed with argument" in done.stderr
