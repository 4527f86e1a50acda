"""Switching Numba's CUDA simulator and Triton's interpreter on only where there is no GPU, and running a
harmful demonstration in a child process (gpukit.simulators)."""

import signal
import sys

import pytest

from gpukit import simulators
from gpukit.scripts import ScriptRun


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


def test_a_script_runs_in_a_child_with_the_flags_where_there_is_no_gpu(monkeypatch):
    monkeypatch.setattr(simulators, "cuda_available", lambda: False)
    source = "import os\nprint(os.environ['TRITON_INTERPRET'], os.environ['NUMBA_ENABLE_CUDASIM'])\n"
    run = simulators.run_script(source, "flags_probe")
    assert run.ok and run.stdout.split() == ["1", "1"]
    monkeypatch.setattr(simulators, "cuda_available", lambda: True)
    run = simulators.run_script("import os\nprint('TRITON_INTERPRET' in os.environ)\n", "flags_probe",
                                env={"TRITON_INTERPRET": "0"})
    assert run.stdout.strip() == "True"  # only what env says: the flags are not added on a GPU


@pytest.mark.parametrize(("kwargs", "message"), [({"source": ""}, "source must be"),
                                                 ({"source": "print(1)", "name": "my-demo"}, "identifier")])
def test_bad_scripts_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        simulators.run_script(**kwargs)


def test_how_it_ended_names_the_signal():
    assert "normally" in simulators.how_it_ended(ScriptRun(0, "", ""))
    assert "SIGSEGV" in simulators.how_it_ended(ScriptRun(-signal.SIGSEGV, "", ""))
    assert "SIGABRT" in simulators.how_it_ended(ScriptRun(-signal.SIGABRT, "", ""))
    failed = simulators.how_it_ended(ScriptRun(1, "", "Traceback\nValueError: bad\n"))
    assert "exit status 1" in failed and "ValueError: bad" in failed


def test_a_killed_child_is_reported_by_its_signal():
    run = simulators.run_script("import os, signal\nos.kill(os.getpid(), signal.SIGABRT)\n", "abort_probe")
    assert not run.ok and "SIGABRT" in simulators.how_it_ended(run)
