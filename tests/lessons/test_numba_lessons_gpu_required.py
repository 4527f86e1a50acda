"""Lessons 09 and 16 on a GPU node whose Numba CUDA target cannot run kernels, run as the book's GPU runs run them:
every cell executed in turn, with ``GPUKIT_REQUIRE_GPU=1``, a cell that raises not stopping the next (nbclient's
``allow_errors``), each exercise's solution run right after it (tests/support/lesson_solutions.py).

The review of the first GPU run (2026-11-26, one H100: numba-cuda 0.30.4 beside NumPy 2.5.2) predicted for the next
one: lesson 09's check of Numba's target raises under ``GPUKIT_REQUIRE_GPU=1``, and ``numba_ready``, bound only after
that call, is then unbound in every later Numba cell (``NameError``: cells 19-27, 57, 60 and two solutions); lesson
16's three kernel-exercise solutions raise ``NumbaCudaUnavailable``. What the lessons must do instead:

- numba-cuda broken by the book's own environment (NumPy 2.5's missing ``np.row_stack``, forced here by
  tests/support/gpu_node's ``forcing_env(numpy_2_5=True)``): the run fails at the one cell that checks Numba's
  target, with its sentence, and every later Numba cell skips, saying why;
- no libNVVM where numba-cuda looks for it (the node's limitation, not the book's): no cell fails, the check prints
  one sentence saying so and how to get it, and the Numba cells skip.

The child Python looks like the H100 node (tests/support/gpu_node: torch and numba-cuda report the GPU, so the
lessons keep Numba's simulator off). The missing libNVVM is forced, whatever this machine has: numba-cuda asks
cuda.pathfinder's ``load_nvidia_dynamic_lib("nvvm")`` for it (numba_cuda/numba/cuda/cuda_paths.py, ``_get_nvvm``;
cuda.bindings.nvvm loads it through the same call), and in the child that call raises what cuda.pathfinder raises
when none of the places it searches holds the library.
"""

from __future__ import annotations

import json
import re

import nbformat
import pytest

from gpukit.base.child_python import run_python
from tests.support.booktoc import ROOT
from tests.support.gpu_node import forcing_env, gpu_node_env
from tests.support.lesson_solutions import HIDDEN, solution_run_source, solutions_in

LESSONS = {"09": ROOT / "notebooks" / "09-writing-kernels.ipynb",
           "16": ROOT / "notebooks" / "16-performance-engineering.ipynb"}
# What lesson 16's Numba cells take from its earlier cells (the roofline's), which need no Numba.
LESSON_16_BEFORE = "import torch\n\nfrom gpukit import check"

# Runs cells in one namespace as a kernel would, going on after a cell that raises (allow_errors); prints each
# cell's output and error.
RUN_ALL = '''
import contextlib, io, json, sys

cells = json.load(open(sys.argv[1], encoding="utf-8"))
namespace = {"__name__": "__main__"}
results = []
for source in cells:
    printed = io.StringIO()
    error = None
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(source, "<cell>", "exec"), namespace)
    except Exception as failed:
        error = f"{type(failed).__name__}: {failed}"
    results.append({"out": printed.getvalue(), "error": error})
print("CELLS " + json.dumps(results))
'''

# No libNVVM anywhere numba-cuda looks. The message is cuda.pathfinder's (search_steps.py, raise_not_found) when the
# library is in none of the places it searched.
NO_LIBNVVM = '''
import cuda.pathfinder as pathfinder

_load = pathfinder.load_nvidia_dynamic_lib


def load_nvidia_dynamic_lib(libname):
    if libname == "nvvm":
        raise pathfinder.DynamicLibNotFoundError(
            'Failure finding "libnvvm.so.4 or libnvvm.so": No such file: libnvvm.so.4 or libnvvm.so')
    return _load(libname)


pathfinder.load_nvidia_dynamic_lib = load_nvidia_dynamic_lib
'''


def numba_cells(number: str) -> list[str]:
    """The lesson's code cells that set up or use Numba, in order, each exercise's solution right after its cell
    (hidden cells, which glue prose values, left out): those that mention Numba, and the one that picks the
    kernels' mode (`gpu = torch.cuda.is_available()`)."""
    cells = [LESSON_16_BEFORE] if number == "16" else []
    for cell in nbformat.read(LESSONS[number], as_version=4).cells:
        if cell.cell_type == "code" and HIDDEN not in cell.metadata.get("tags", []):
            if "numba" in cell.source.lower() or "gpu = torch.cuda.is_available()" in cell.source:
                cells.append(cell.source)
        for label, code in solutions_in(cell):
            if "numba" in code.lower():
                cells.append(solution_run_source(label, code))
    return cells


def on_the_gpu_node(tmp_path, number: str, *, numpy_2_5: bool = False, libnvvm: bool = True) -> list[dict]:
    """Lesson ``number``'s Numba cells run on the simulated H100 node with GPUKIT_REQUIRE_GPU=1: each cell's
    (source, output, error)."""
    cells = numba_cells(number)
    listing = tmp_path / "cells.json"
    listing.write_text(json.dumps(([] if libnvvm else [NO_LIBNVVM]) + cells), encoding="utf-8")
    script = tmp_path / "run_all.py"
    script.write_text(RUN_ALL, encoding="utf-8")
    node = gpu_node_env(parts=("torch", "numba"), cxx=None)
    env = {**node, **(forcing_env(numpy_2_5=True) if numpy_2_5 else {}), "PYTHONPATH": node["PYTHONPATH"],
           "GPUKIT_REQUIRE_GPU": "1", "NUMBA_ENABLE_CUDASIM": "0", "TRITON_INTERPRET": "0", "MPLBACKEND": "Agg"}
    run = run_python(str(script), str(listing), env=env, timeout=300)
    lines = [line for line in run.stdout.splitlines() if line.startswith("CELLS ")]
    assert run.ok and lines, f"exit {run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    results = json.loads(lines[-1][len("CELLS "):])[(0 if libnvvm else 1):]
    return [{"source": source, **result} for source, result in zip(cells, results, strict=True)]


def probe_index(results: list[dict]) -> int:
    found = [i for i, r in enumerate(results) if "numba_cuda_problem(" in r["source"]]
    assert len(found) == 1, f"{len(found)} cells check Numba's CUDA target"
    return found[0]


def later_numba_cells(results: list[dict]) -> list[dict]:
    """The cells after the check that run Numba's kernels: those guarded on the check's verdict."""
    after = results[probe_index(results) + 1:]
    return [r for r in after if re.search(r"skip_unless\((numba_ready|kernels_ready|simulating)", r["source"])
            or re.search(r"skip_unless\(torch\.cuda\.is_available\(\) and kernels_ready", r["source"])]


ROW_STACK_SENTENCE = re.compile(
    r"Numba's CUDA target cannot run a kernel here \(AttributeError: module 'numpy' has no attribute "
    r"'row_stack'\): numba-cuda 0\.30\.4 still uses np\.row_stack, which NumPy \d+\.\d+\.\d+ no longer has "
    r"\(NumPy 2\.5 removed it\); install the NumPy the book pins, `.* -m pip install numpy==\S+`, and restart "
    r"the kernel\.")
NO_LIBNVVM_SENTENCE = re.compile(
    r"Numba's CUDA target cannot run a kernel here \(DynamicLibNotFoundError: Failure finding \"libnvvm\.so\.4 or "
    r"libnvvm\.so\": [^)]*\): numba-cuda 0\.30\.4 found no libNVVM, [^;]*; install libNVVM from NVIDIA's wheels [^;]*"
    r"`.* -m pip install 'numba-cuda\[cu1[23]\]==0\.30\.4'`, or set CUDA_HOME to a CUDA toolkit [^.]*"
    r"nvvm/lib64/libnvvm\.so[^.]*, and restart the kernel\.")


@pytest.mark.parametrize("number", ["09", "16"])
def test_numba_cuda_broken_by_numpy_fails_the_one_cell_that_checks_it_and_the_others_skip(tmp_path, number):
    results = on_the_gpu_node(tmp_path, number, numpy_2_5=True)
    failed = [(i, r["error"]) for i, r in enumerate(results) if r["error"]]
    assert len(failed) == 1, failed
    assert failed[0][0] == probe_index(results), failed
    name, _, message = failed[0][1].partition(": ")
    assert name == "NumbaCudaUnavailable" and ROW_STACK_SENTENCE.fullmatch(message), failed
    later = later_numba_cells(results)
    assert len(later) >= (8 if number == "09" else 7), [r["source"][:60] for r in later]
    for result in later:
        assert result["out"].startswith("Skipped: "), (result["source"][:200], result["out"])


@pytest.mark.parametrize("number", ["09", "16"])
def test_without_libnvvm_the_numba_cells_skip_with_one_sentence_even_with_a_gpu_required(tmp_path, number):
    results = on_the_gpu_node(tmp_path, number, libnvvm=False)
    assert [r["error"] for r in results] == [None] * len(results), [(r["source"][:60], r["error"])
                                                                     for r in results if r["error"]]
    probe = results[probe_index(results)]["out"].strip()
    assert probe.startswith("Skipped: ") and probe.count("\n") == 0, probe
    assert NO_LIBNVVM_SENTENCE.fullmatch(probe[len("Skipped: "):]), probe
    for result in later_numba_cells(results):
        assert result["out"].startswith("Skipped: "), (result["source"][:200], result["out"])


def test_the_cells_taken_are_the_lessons_numba_cells():
    """What the tests above run: every cell that runs Numba's kernels, and the exercises' solutions."""
    nine, sixteen = numba_cells("09"), numba_cells("16")
    assert sum("expect_a_passing_check" in c for c in nine) == 2  # ex-kernels-launch, ex-kernels-numba-saxpy
    assert sum("expect_a_passing_check" in c for c in sixteen) == 3  # the transposes and the block sum
    assert not any("triton.jit" in c or "cupy.RawKernel" in c for c in nine)
