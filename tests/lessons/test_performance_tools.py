"""Lesson 16's Nsight Compute and compute-sanitizer cells, run on the CPU with the GPU reported and stand-ins for
the two tools: small scripts that print what the tools print, in the layouts NVIDIA documents (``ncu --csv --page
details``: quoted columns, one row per metric; compute-sanitizer's memcheck: ``=========`` lines, an ``Invalid
__global__ write`` block per bad access, an ``ERROR SUMMARY``). nvcc compiles the lesson's CUDA C++ program for
real where it is installed (it needs no GPU).

Each tool runs through the lesson's ``run_tool``, with a time limit (on an H100 node the sanitizer and ncu take
seconds; a minute is their limit, so that a tool that waits on a lock or a busy GPU cannot hold the lesson past its
own). A stand-in that never finishes shows each cell's limit, its sentence and the tool stopped: the limits are
scaled down to a second here, and the tests check the seconds each cell asked for.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from gpukit import skip_unless
from gpukit.topics.performance import ncu_summary
from tests.support.lesson_code import code_cell, run_cell
from tests.unit.topics.test_performance import KERNEL, new_layout

LESSON = "16-performance-engineering.ipynb"


def cell(contains):
    return code_cell(LESSON, contains)


def tool(folder: Path, name: str, prints: str, code: int = 0, hangs: bool = False) -> str:
    """An executable called ``name`` that logs its arguments to ``<name>.args`` and its process id to ``<name>.pid``
    and prints ``prints``; with ``hangs``, it then waits for ever (a profiler waiting on a lock)."""
    (folder / f"{name}.out").write_text(prints)
    path = folder / name
    path.write_text(f"#!{sys.executable}\nimport os, sys, time\nopen({str(folder / (name + '.args'))!r}, 'w').write("
                    f"'\\n'.join(sys.argv[1:]))\nopen({str(folder / (name + '.pid'))!r}, 'w').write(str(os.getpid()))\n"
                    f"print(open({str(folder / (name + '.out'))!r}).read(), end='', flush=True)\n"
                    f"while {hangs}:\n    time.sleep(1)\nsys.exit({code})\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def limits_scaled_down(namespace) -> list[float]:
    """Replace the lesson's ``run_tool`` (bound by the cell that builds the program) by one that gives each tool one
    second, whatever the cell asked; returns the list that collects the seconds each cell asked for."""
    asked, run_tool = [], namespace["run_tool"]

    def run_for_a_second(command, seconds, **options):
        asked.append(seconds)
        return run_tool(command, 1, **options)

    namespace["run_tool"] = run_for_a_second
    return asked


def stopped(folder: Path, name: str) -> bool:
    """Whether the stand-in ``name`` is no longer running (stopped and reaped; or stopped before it wrote its id)."""
    if not (folder / f"{name}.pid").is_file():
        return True
    pid = int((folder / f"{name}.pid").read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


@pytest.fixture
def lesson():
    """What the lesson's cells before these bound: os, torch, skip_unless."""
    return {"os": os, "torch": torch, "skip_unless": skip_unless}


def compile_cell(namespace, monkeypatch, nvcc):
    """The cell that writes the CUDA C++ program, finds the tools and builds it, with ``nvcc`` (a path, or None to
    hide it) the only tool ``shutil.which`` finds."""
    monkeypatch.setattr(shutil, "which", lambda name: nvcc if name == "nvcc" else None)
    monkeypatch.setenv("CUDA_HOME", "/nonexistent")
    return run_cell(cell('SOURCE = r"""'), namespace)


# ------------------------------------------------------------------------------------------ compute-sanitizer
MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at fill_unguarded(float *, int)+0x70 in /tmp/lesson16/kernels.cu:10
=========     by thread (232,0,0) in block (3,0,0)
=========     Address 0x7f2a4c0003e80 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f2a4c000000 of size 4000 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========
========= Invalid __global__ write of size 4 bytes
=========     at fill_unguarded(float *, int)+0x70 in /tmp/lesson16/kernels.cu:10
=========     by thread (233,0,0) in block (3,0,0)
=========     Address 0x7f2a4c0003e84 is out of bounds
=========
no error
========= ERROR SUMMARY: 2 errors
"""


def test_the_sanitizer_runs_the_planted_bug_and_its_report_is_shown(lesson, gpu, tmp_path, monkeypatch):
    compile_cell(lesson, monkeypatch, None)  # nvcc hidden: the cell skips the build
    lesson["program"] = str(tmp_path / "kernels")  # as if nvcc had built it
    sanitizer = tool(tmp_path, "compute-sanitizer", MEMCHECK)
    lesson["cuda_tool"] = lambda name: sanitizer if name == "compute-sanitizer" else None
    printed = run_cell(cell('sanitizer = cuda_tool("compute-sanitizer")'), lesson)
    assert (tmp_path / "compute-sanitizer.args").read_text().split("\n") == [
        "--tool", "memcheck", str(tmp_path / "kernels"), "bug"]
    assert printed.startswith("2 invalid writes found")
    assert "at fill_unguarded(float *, int)+0x70 in /tmp/lesson16/kernels.cu:10" in printed
    assert "by thread (232,0,0) in block (3,0,0)" in printed
    assert "ERROR SUMMARY: 2 errors" in printed


def test_without_a_gpu_the_sanitizer_cell_prints_the_command(lesson, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    compile_cell(lesson, monkeypatch, None)
    lesson["cuda_tool"] = lambda name: tool(tmp_path, name, MEMCHECK)  # the tool is there, the GPU is not
    printed = run_cell(cell('sanitizer = cuda_tool("compute-sanitizer")'), lesson)
    assert printed.startswith("Skipped:") and "compute-sanitizer --tool memcheck ./kernels bug" in printed
    assert not (tmp_path / "compute-sanitizer.args").exists()


def test_a_sanitizer_that_does_not_finish_is_stopped_at_its_limit(lesson, gpu, tmp_path, monkeypatch):
    compile_cell(lesson, monkeypatch, None)
    lesson["program"] = str(tmp_path / "kernels")
    sanitizer = tool(tmp_path, "compute-sanitizer", MEMCHECK, hangs=True)
    lesson["cuda_tool"] = lambda name: sanitizer if name == "compute-sanitizer" else None
    asked = limits_scaled_down(lesson)
    printed = run_cell(cell('sanitizer = cuda_tool("compute-sanitizer")'), lesson)
    assert asked == [60]  # a minute: seconds on an H100 node
    assert printed == "compute-sanitizer did not finish within 1 s: stopped\n"
    assert stopped(tmp_path, "compute-sanitizer")


# ------------------------------------------------------------------------------------------ ncu
def test_ncu_profiles_the_copy_and_the_cell_prints_its_three_numbers(lesson, gpu, tmp_path, monkeypatch):
    compile_cell(lesson, monkeypatch, None)
    lesson["program"] = str(tmp_path / "kernels")
    ncu = tool(tmp_path, "ncu", new_layout())
    monkeypatch.setattr(shutil, "which", lambda name: ncu if name == "ncu" else None)
    run_cell(cell("NCU_ARGS = ["), lesson)
    printed = run_cell(cell("from gpukit.topics.performance import ncu_summary"), lesson)
    args = (tmp_path / "ncu.args").read_text().split("\n")
    assert args[:3] == ["--csv", "--page", "details"]
    for section in ("SpeedOfLight", "Occupancy", "WarpStateStats"):
        assert ["--section", section] == args[args.index(section) - 1:args.index(section) + 1]
    # one launch of each copy: copy_rows and its 128-bit version, copy_rows4
    assert args[-5:] == ["-k", "regex:copy_rows", "-c", "2", str(tmp_path / "kernels")]
    assert printed == (f"{KERNEL}: DRAM 2779 GB/s, achieved occupancy 83%, main stall: long_scoreboard "
                       "(48.9 cycles per instruction)\n")


def test_ncu_without_permission_to_the_counters_says_so(lesson, gpu, tmp_path, monkeypatch):
    compile_cell(lesson, monkeypatch, None)
    lesson["program"] = str(tmp_path / "kernels")
    refused = ("==PROF== Connected to process 4242\n==ERROR== ERR_NVGPUCTRPERM - The user does not have "
               "permission to access NVIDIA GPU Performance Counters on the target device 0.\n")
    ncu = tool(tmp_path, "ncu", refused, code=1)
    monkeypatch.setattr(shutil, "which", lambda name: ncu if name == "ncu" else None)
    run_cell(cell("NCU_ARGS = ["), lesson)
    printed = run_cell(cell("from gpukit.topics.performance import ncu_summary"), lesson)
    assert printed.startswith("ncu gave no metrics:") and "ERR_NVGPUCTRPERM" in printed


def test_an_ncu_that_does_not_finish_is_stopped_at_its_limit(lesson, gpu, tmp_path, monkeypatch):
    compile_cell(lesson, monkeypatch, None)
    lesson["program"] = str(tmp_path / "kernels")
    ncu = tool(tmp_path, "ncu", "==PROF== Connected to process 4242\n", hangs=True)
    monkeypatch.setattr(shutil, "which", lambda name: ncu if name == "ncu" else None)
    asked = limits_scaled_down(lesson)
    printed = run_cell(cell("NCU_ARGS = ["), lesson)
    assert printed.split() == ["ncu", *lesson["NCU_ARGS"], "-k", "regex:copy_rows", "-c", "2", "./kernels"]
    printed = run_cell(cell("from gpukit.topics.performance import ncu_summary"), lesson)
    assert asked == [60]
    assert printed == "ncu did not finish within 1 s: stopped\n"
    assert stopped(tmp_path, "ncu")


def test_the_copy_with_128_bit_loads_is_in_the_program_and_launched():
    source = cell('SOURCE = r"""')
    assert "__global__ void copy_rows4(const float4 *in, float4 *out, int n4)" in source
    launch = "copy_rows4<<<(n/4+255)/256,256>>>((constfloat4*)in,(float4*)out,n/4);"
    assert launch in "".join(source.split())  # launched over n / 4 float4 values, whatever the line breaks


# ------------------------------------------------------------------------------------------ ncu on PyTorch
TORCH_KERNEL_NAME = ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, "
                     "float, at::native::binary_internal::MulFunctor<float>>, std::array<char *, 2>>(int, T2, T3)")
LOADS = "l1tex__t_{}_pipe_lsu_mem_global_op_ld.sum"
TORCH_METRICS = [  # x * 2 over 2^26 floats: 2^28 bytes read, in 16-byte loads (2^24 threads, 2^19 warp requests)
    ("GPU Speed Of Light Throughput", "Duration", "nsecond", "201,504"),
    ("Command line profiler metrics", "dram__bytes.sum.per_second", "byte/second", "2,664,270,810,510.64"),
    ("Command line profiler metrics", LOADS.format("requests"), "", "524,288"),
    ("Command line profiler metrics", LOADS.format("sectors"), "sector", "8,388,608"),
]


def test_ncu_profiles_pytorchs_kernel_and_its_counters_sit_beside_the_simulators(lesson, gpu, tmp_path,
                                                                                  monkeypatch):
    compile_cell(lesson, monkeypatch, None)
    ncu = tool(tmp_path, "ncu", new_layout(TORCH_METRICS, kernel=TORCH_KERNEL_NAME))
    monkeypatch.setattr(shutil, "which", lambda name: ncu if name == "ncu" else None)
    run_cell(cell("NCU_ARGS = ["), lesson)
    run_cell(cell("TORCH_KERNEL = "), lesson)
    lesson["ncu_summary"] = ncu_summary  # bound by the copies' ncu cell, before
    counted = SimpleNamespace(sectors_per_request={"inp": 4.0})
    lesson["copies"] = {"copy_coalesced": counted}  # what the simulator counted on this CPU
    printed = run_cell(cell('sys.executable, "-c", TORCH_KERNEL'), lesson)
    args = (tmp_path / "ncu.args").read_text().split("\n")
    assert args[:3] == ["--csv", "--page", "details"]
    assert args[args.index("-k") + 1] == "regex:elementwise" and args[args.index("-c") + 1] == "1"
    python = args.index(sys.executable)  # the script's lines follow, one an argument line each
    assert args[python + 1] == "-c" and "y = x * 2  # one elementwise kernel" in args[python + 2:]
    metrics = args[args.index("--metrics") + 1].split(",")
    assert metrics == ["dram__bytes.sum.per_second", LOADS.format("requests"), LOADS.format("sectors")]
    assert printed == (f"{TORCH_KERNEL_NAME[:60]}...\n  DRAM 2664 GB/s, 524,288 load requests, 16.0 sectors a "
                       "request, 100% of each sector's bytes used\n"
                       "the simulator's copy_coalesced: 4.0 sectors a request of 4-byte loads\n")


def test_without_a_gpu_the_pytorch_profile_skips_and_the_simulators_counts_remain(lesson, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    compile_cell(lesson, monkeypatch, None)
    run_cell(cell("NCU_ARGS = ["), lesson)
    run_cell(cell("TORCH_KERNEL = "), lesson)
    lesson["ncu_summary"] = ncu_summary  # bound by the copies' ncu cell, before
    lesson["copies"] = {}
    printed = run_cell(cell('sys.executable, "-c", TORCH_KERNEL'), lesson)
    assert printed == "Skipped: ncu needs a CUDA GPU and the tool: the command is above\n"


def test_an_ncu_refused_the_counters_on_pytorch_says_so(lesson, gpu, tmp_path, monkeypatch):
    compile_cell(lesson, monkeypatch, None)
    refused = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n"
    ncu = tool(tmp_path, "ncu", refused, code=1)
    monkeypatch.setattr(shutil, "which", lambda name: ncu if name == "ncu" else None)
    run_cell(cell("NCU_ARGS = ["), lesson)
    run_cell(cell("TORCH_KERNEL = "), lesson)
    lesson["ncu_summary"] = ncu_summary  # bound by the copies' ncu cell, before
    lesson["copies"] = {}
    printed = run_cell(cell('sys.executable, "-c", TORCH_KERNEL'), lesson)
    assert printed.startswith("ncu gave no metrics:") and "ERR_NVGPUCTRPERM" in printed


# ------------------------------------------------------------------------------------------ nvcc
def test_nvcc_builds_the_program_without_a_gpu(lesson, monkeypatch):
    from gpukit.base.nvcc import find_nvcc

    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc is not installed here")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    printed = compile_cell(lesson, monkeypatch, nvcc)
    assert printed.startswith("compiled"), printed
    program = Path(lesson["program"])
    assert program.is_file() and os.access(program, os.X_OK)
    assert b"fill_unguarded" in program.read_bytes() and b"copy_rows" in program.read_bytes()


def test_an_nvcc_that_does_not_finish_is_stopped_and_there_is_no_program(lesson, tmp_path, monkeypatch):
    nvcc = tool(tmp_path, "nvcc", "", hangs=True)
    monkeypatch.setattr(shutil, "which", lambda name: nvcc if name == "nvcc" else None)
    monkeypatch.setenv("CUDA_HOME", "/nonexistent")
    source = cell('SOURCE = r"""')
    definitions, build = source.split("\nprogram = None\n")  # run_tool is defined before the build
    run_cell(definitions, lesson)
    asked = limits_scaled_down(lesson)
    printed = run_cell("program = None\n" + build, lesson)
    assert asked == [60]  # seconds on a GPU node or on this book's 2-core machine
    assert printed == "nvcc did not finish within 1 s: stopped\n" and lesson["program"] is None
    assert stopped(tmp_path, "nvcc")


def test_without_nvcc_the_build_skips_and_the_tools_have_no_program(lesson, gpu, monkeypatch):
    printed = compile_cell(lesson, monkeypatch, None)
    assert printed.startswith("Skipped: nvcc")
    assert lesson["program"] is None
