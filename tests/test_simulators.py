"""Switching Numba's CUDA simulator and Triton's interpreter on only where there is no GPU, telling kernels' kinds
apart (gpukit.simulators), and chapter 9's filter of numba-cuda's low-occupancy warning."""

import sys
from pathlib import Path

import pytest

from gpukit import simulators


@pytest.fixture
def numba_not_imported(monkeypatch):
    monkeypatch.setattr(simulators, "numba_simulating", lambda: None)


def test_the_simulator_is_switched_on_without_a_gpu(numba_not_imported):
    environ = {}
    message = simulators.use_cuda_simulator(environ, gpu=False)
    assert environ == {"NUMBA_ENABLE_CUDASIM": "1"} and "simulator" in message


def test_the_simulator_stays_off_on_a_gpu(numba_not_imported, monkeypatch):
    monkeypatch.setattr(simulators, "cuda_available", lambda: True)  # a fake GPU
    environ = {}
    assert "will run on it" in simulators.use_cuda_simulator(environ)
    assert environ == {}


@pytest.mark.parametrize(("simulating", "gpu", "words"), [
    (True, False, "CUDA simulator"), (False, True, "real CUDA target"), (False, False, "restart the kernel"),
])
def test_numba_imported_already_is_reported(monkeypatch, simulating, gpu, words):
    monkeypatch.setattr(simulators, "numba_simulating", lambda: simulating)
    environ = {}
    assert words in simulators.use_cuda_simulator(environ, gpu=gpu)
    assert environ == {}


def test_numba_simulating_is_none_before_numba_is_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "numba", raising=False)
    assert simulators.numba_simulating() is None


def test_the_interpreter_is_switched_on_only_without_a_gpu(monkeypatch):
    environ = {}
    assert "interpreter" in simulators.use_triton_interpreter(environ, gpu=False)
    assert environ == {"TRITON_INTERPRET": "1"}
    monkeypatch.setattr(simulators, "cuda_available", lambda: True)
    clean = {}
    assert "compile its kernels" in simulators.use_triton_interpreter(clean) and clean == {}
    assert "unset it" in simulators.use_triton_interpreter({"TRITON_INTERPRET": "1"})


def test_kernel_kinds_are_recognised_by_their_type_names():
    InterpretedFunction = type("InterpretedFunction", (), {})
    FakeCUDAKernel = type("FakeCUDAKernel", (), {})
    CUDADispatcher = type("CUDADispatcher", (), {})
    assert simulators.triton_interpreting(InterpretedFunction())
    assert not simulators.triton_interpreting(lambda: None)
    assert simulators.is_numba_cuda_kernel(FakeCUDAKernel()) and simulators.is_numba_cuda_kernel(CUDADispatcher())
    assert not simulators.is_numba_cuda_kernel(print)


# ---------------------------------------------------------------- numba-cuda's low-occupancy warning
# On a real GPU, numba-cuda warns (NumbaPerformanceWarning) when a launch is configured with fewer than 128
# blocks: numba/cuda/dispatcher.py, _LaunchConfiguration.__init__, switched by the config option
# CUDA_LOW_OCCUPANCY_WARNINGS (environment: NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS, on by default). The simulator
# never does. Chapter 9 launches small grids on purpose (the saxpy check: 4 blocks of 32), and its checked
# cells must print the same on a GPU, so the lesson filters that one warning in a cell of its own.
NOTEBOOK_09 = Path(__file__).resolve().parents[1] / "notebooks" / "09-writing-kernels.ipynb"

OCCUPANCY_PROBE = '''
import json, sys, warnings

from numba import config, cuda


@cuda.jit
def kernel(x):
    pass


def warned(blocks):
    with warnings.catch_warnings(record=True) as caught:
        kernel[blocks, 32]  # configuring the launch is where numba-cuda warns; nothing runs
    return [f"{w.category.__name__}: {w.message}" for w in caught]


def other_performance_warning():
    from numba.cuda.core.errors import NumbaPerformanceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.warn(NumbaPerformanceWarning("Host array used in CUDA kernel will incur copy overhead"))
    return len(caught)


warnings.simplefilter("always")
before = {blocks: warned(blocks) for blocks in (4, 127, 128)}
exec(open(sys.argv[1]).read())  # the lesson's filter cell
after = warned(5) + warned(100)  # grid sizes not configured before: numba-cuda caches configurations
print(json.dumps({"simulating": bool(config.ENABLE_CUDASIM), "before": before, "after": after,
                  "other": other_performance_warning()}))
'''


def _code_cells(path):
    import nbformat

    return [(i, c.source) for i, c in enumerate(nbformat.read(path, as_version=4).cells) if c.cell_type == "code"]


def _occupancy_filter_cell():
    cells = [(i, source) for i, source in _code_cells(NOTEBOOK_09)
             if "warnings.filterwarnings" in source and "Grid size" in source]
    assert len(cells) == 1, "chapter 9 should filter numba-cuda's low-occupancy warning in one cell"
    return cells[0]


def _run_occupancy_probe(tmp_path, simulate):
    import json

    from gpukit.scripts import run_python

    _, source = _occupancy_filter_cell()
    cell = tmp_path / "filter_cell.py"
    cell.write_text(source, encoding="utf-8")
    probe = tmp_path / "occupancy_probe.py"
    probe.write_text(OCCUPANCY_PROBE, encoding="utf-8")
    run = run_python(probe, cell, env={"NUMBA_ENABLE_CUDASIM": "1" if simulate else "0",
                                       "NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS": "1"})
    assert run.ok, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.fixture
def needs_numba_cuda():
    import importlib.util

    if importlib.util.find_spec("numba") is None or importlib.util.find_spec("numba_cuda") is None:
        pytest.skip("numba and numba-cuda are not installed")


def test_the_filter_cell_comes_before_every_numba_launch():
    index, _ = _occupancy_filter_cell()
    launches = [i for i, source in _code_cells(NOTEBOOK_09)
                if "[blocks, threads]" in source or 'check("ex-kernels-numba-saxpy"' in source
                or 'check("ex-kernels-launch"' in source
                or "[sum_blocks, THREADS]" in source]
    assert launches and index < min(launches)


def test_the_real_cuda_target_warns_below_128_blocks_and_the_lesson_filter_silences_it(tmp_path,
                                                                                       needs_numba_cuda):
    """The warning is raised for real: configuring a launch needs no GPU (the kernel never runs)."""
    result = _run_occupancy_probe(tmp_path, simulate=False)
    assert not result["simulating"]
    warned = result["before"]
    assert len(warned["4"]) == 1 and warned["4"][0].startswith("NumbaPerformanceWarning: Grid size 4 ")
    assert "low occupancy" in warned["4"][0] and len(warned["127"]) == 1
    assert warned["128"] == []  # the rule: fewer than 128 blocks
    assert result["after"] == []  # the lesson's filter removes it...
    assert result["other"] == 1  # ...and no other performance warning


def test_the_simulator_never_warns(tmp_path, needs_numba_cuda):
    result = _run_occupancy_probe(tmp_path, simulate=True)
    assert result["simulating"]
    assert all(caught == [] for caught in result["before"].values())
