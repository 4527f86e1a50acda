"""Switching Numba's CUDA simulator and Triton's interpreter on only where there is no GPU, telling kernels' kinds
apart (gpukit.topics.simulators), and chapter 9's filter of numba-cuda's low-occupancy warning."""

import sys

import pytest

from gpukit.topics import simulators
from tests.support.booktoc import ROOT


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
NOTEBOOK_09 = ROOT / "notebooks" / "09-writing-kernels.ipynb"

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

    from gpukit.base.child_python import run_python

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


# ---------------------------------------------------------------- does Numba's CUDA target work?
ROW_STACK = "AttributeError: module 'numpy' has no attribute 'row_stack'"  # the first GPU run's error


def test_the_advice_shows_the_first_line_of_an_error_with_its_type_or_of_a_text():
    """An exception is shown as gpukit.base.errors.error_line tells it, a child's stderr by its first line."""
    def shown(error):
        return simulators.numba_cuda_advice(error, numpy_version="2.5.2", numba_cuda_version="0.30.4").split(
            "(", 1)[1].split("):", 1)[0]

    assert shown(AttributeError("module 'numpy' has no attribute 'row_stack'\nhint")) == ROW_STACK
    assert shown(RuntimeError("first\nsecond")) == "RuntimeError: first"
    assert shown(KeyError()) == "KeyError"
    assert shown("\n  DynamicLibNotFoundError: x\nmore") == "DynamicLibNotFoundError: x"


def test_numpy_2_5_is_named_as_the_cause_and_the_pinned_numpy_as_the_fix():
    from gpukit.core.optional import install_command

    sentence = simulators.numba_cuda_advice(AttributeError("module 'numpy' has no attribute 'row_stack'"),
                                            numpy_version="2.5.2", numba_cuda_version="0.30.4")
    assert sentence == (f"Numba's CUDA target cannot run a kernel here ({ROW_STACK}): numba-cuda 0.30.4 still uses "
                        "np.row_stack, which NumPy 2.5.2 no longer has (NumPy 2.5 removed it); install the NumPy the "
                        f"book pins, `{install_command('numpy')}`, and restart the kernel.")
    assert install_command("numpy").endswith(" install numpy==2.4.6")  # requirements/lock.txt's pin
    assert "numba-cuda[" not in sentence  # the preflight's old, wrong fix


@pytest.mark.parametrize(("error", "cause", "fix"), [
    ('cuda.pathfinder._dynamic_libs.load_dl_common.DynamicLibNotFoundError: Failure finding "libnvrtc.so.13 or '
     'libnvrtc.so.12"', "cannot load the CUDA toolkit's compilers", "install 'numba-cuda[cu"),
    ("numba.cuda.cudadrv.error.CudaSupportError: Error at driver init: Call to cuInit results in "
     "CUDA_ERROR_NO_DEVICE (100)", "cannot reach a GPU through the NVIDIA driver", "CUDA_VISIBLE_DEVICES"),
])
def test_other_causes_get_their_own_fix(error, cause, fix):
    found = simulators.numba_cuda_cause(error, numba_cuda_version="0.30.4")
    assert found is not None and cause in found[0] and fix in found[1], found


def test_an_unknown_error_is_shown_and_sent_to_the_preflight():
    assert simulators.numba_cuda_cause("ValueError: something else") is None
    sentence = simulators.numba_cuda_advice(ValueError("something else"))
    assert "(ValueError: something else): an error that gpukit does not recognise" in sentence
    assert "python -m gpukit doctor --gpu" in sentence


@pytest.fixture
def target_fails(monkeypatch):
    """Numba's CUDA target failing as on the first GPU run: the probe returns what numba-cuda raised."""
    monkeypatch.setattr(simulators, "try_numba_cuda",
                        lambda: AttributeError("module 'numpy' has no attribute 'row_stack'"))


def test_without_a_gpu_required_the_problem_is_a_sentence_to_skip_with(target_fails, monkeypatch):
    monkeypatch.setenv("GPUKIT_REQUIRE_GPU", "0")
    sentence = simulators.numba_cuda_problem()
    assert sentence.startswith(f"Numba's CUDA target cannot run a kernel here ({ROW_STACK}): ")
    assert sentence.endswith("and restart the kernel.") and sentence.count(". ") == 0  # one sentence


def test_with_a_gpu_required_the_problem_is_an_error_with_that_sentence(target_fails, monkeypatch):
    monkeypatch.setenv("GPUKIT_REQUIRE_GPU", "1")
    with pytest.raises(simulators.NumbaCudaUnavailable) as raised:
        simulators.numba_cuda_problem()
    assert str(raised.value) == simulators.numba_cuda_problem(required=False)
    assert raised.value.__suppress_context__


def test_a_working_target_is_no_problem(monkeypatch):
    monkeypatch.setattr(simulators, "try_numba_cuda", lambda: None)
    monkeypatch.setenv("GPUKIT_REQUIRE_GPU", "1")
    assert simulators.numba_cuda_problem() is None


PROBE = '''
import json
from gpukit.topics.simulators import try_numba_cuda

error = try_numba_cuda()
print(json.dumps(None if error is None else f"{type(error).__name__}: {error}"))
'''


def test_the_probe_runs_a_kernel_on_the_simulator(tmp_path, needs_numba_cuda):
    from gpukit.base.child_python import run_python

    script = tmp_path / "probe.py"
    script.write_text(PROBE, encoding="utf-8")
    run = run_python(str(script), env={"NUMBA_ENABLE_CUDASIM": "1"})
    assert run.ok and run.stdout.strip().splitlines()[-1] == "null", run.stderr


def test_the_probe_meets_numpy_2_5_where_numba_cuda_sets_up_its_target(tmp_path, needs_numba_cuda):
    """numba-cuda's real CUDA target beside a NumPy without np.row_stack (tests/support/gpu_node's stand-in for NumPy
    2.5):
    the probe compiles before it touches a device, so it stops at numba-cuda's error on any machine."""
    from gpukit.base.child_python import run_python
    from tests.support.gpu_node import forcing_env

    script = tmp_path / "probe.py"
    script.write_text(PROBE, encoding="utf-8")
    run = run_python(str(script), env={"NUMBA_ENABLE_CUDASIM": "0", **forcing_env(numpy_2_5=True)})
    assert run.ok and run.stdout.strip().splitlines()[-1] == f'"{ROW_STACK}"', run.stderr


# ---------------------------------------------------------------- the CUDA toolkit numba-cuda compiles with
# A missing libNVVM (or NVRTC) is the node's limitation: the sentence says how to get it, and a lesson skips with it
# even with GPUKIT_REQUIRE_GPU=1. A numba-cuda broken by the book's own environment still raises there.
NO_LIBNVVM = 'Failure finding "libnvvm.so.4 or libnvvm.so": No such file: libnvvm.so.4 or libnvvm.so'
NO_LIBNVRTC = 'Failure finding "libnvrtc.so.13 or libnvrtc.so.12": No such file: libnvrtc.so.13 or libnvrtc.so.12'
DynamicLibNotFoundError = type("DynamicLibNotFoundError", (RuntimeError,), {})  # cuda.pathfinder's, by its name


@pytest.mark.parametrize(("error", "lacks"), [
    (DynamicLibNotFoundError(NO_LIBNVVM), True),
    (DynamicLibNotFoundError(NO_LIBNVRTC), True),
    (ImportError("libNVVM is not available"), True),  # numba-cuda's NvvmSupportError is an ImportError
    ("NvvmSupportError: libNVVM cannot be found", True),
    ("RuntimeError: Missing libdevice file.", True),
    (AttributeError("module 'numpy' has no attribute 'row_stack'"), False),  # the book's environment
    ("CudaSupportError: Error at driver init: CUDA driver library cannot be found.", False),  # no GPU
    (DynamicLibNotFoundError('"cuda" is an NVIDIA driver library and can only be found via system search.'), False),
])
def test_a_missing_toolkit_library_is_told_apart(error, lacks):
    assert simulators.node_lacks_toolkit(error) is lacks


USE_SYSTEM_TOOLKIT = getattr(simulators, "use_system_toolkit", None)  # the real one, for its own tests


@pytest.fixture(autouse=True)
def no_system_toolkit_change(monkeypatch):
    """numba_cuda_problem would point CUDA_HOME at /usr/local/cuda where that toolkit holds libNVVM: not from a test
    of other things (the tests of use_system_toolkit pass it an environment of their own)."""
    monkeypatch.setattr(simulators, "use_system_toolkit", lambda *args, **kwargs: None, raising=False)


@pytest.fixture
def no_libnvvm(monkeypatch):
    """numba-cuda's first kernel fails for want of a toolkit library (NVRTC, as on a machine whose toolkit has
    no NVRTC), and cuda.pathfinder finds no libNVVM either."""
    monkeypatch.setattr(simulators, "try_numba_cuda", lambda: DynamicLibNotFoundError(NO_LIBNVRTC))
    monkeypatch.setattr(simulators, "find_libnvvm", lambda: DynamicLibNotFoundError(NO_LIBNVVM), raising=False)


@pytest.mark.parametrize("required", ["0", "1"])
def test_without_libnvvm_the_problem_is_one_sentence_saying_how_to_get_it_even_with_a_gpu_required(
        no_libnvvm, monkeypatch, required):
    monkeypatch.setenv("GPUKIT_REQUIRE_GPU", required)
    sentence = simulators.numba_cuda_problem()
    assert sentence.startswith(f"Numba's CUDA target cannot run a kernel here (DynamicLibNotFoundError: {NO_LIBNVVM}):"
                               " numba-cuda "), sentence
    assert "found no libNVVM" in sentence and "install 'numba-cuda[cu1" in sentence
    assert "or set CUDA_HOME to a CUDA toolkit that has nvvm/lib64/libnvvm.so" in sentence
    assert sentence.endswith("and restart the kernel.") and sentence.count(". ") == 0  # one sentence


def test_without_nvrtc_alone_the_sentence_names_the_toolkits_compilers(monkeypatch):
    monkeypatch.setattr(simulators, "try_numba_cuda", lambda: DynamicLibNotFoundError(NO_LIBNVRTC))
    monkeypatch.setattr(simulators, "find_libnvvm", lambda: None, raising=False)  # libNVVM is there
    monkeypatch.setenv("GPUKIT_REQUIRE_GPU", "1")
    sentence = simulators.numba_cuda_problem()
    assert f"(DynamicLibNotFoundError: {NO_LIBNVRTC})" in sentence and "(NVVM, NVRTC)" in sentence
    assert "libNVVM" not in sentence and "install 'numba-cuda[cu1" in sentence and "CUDA_HOME" in sentence


def test_numpys_breakage_is_reported_first_and_raises_with_a_gpu_required_even_without_libnvvm(target_fails,
                                                                                              monkeypatch):
    """numba-cuda meets NumPy 2.5 before it loads any toolkit library: the book's environment is to blame, and a
    GPU run says so, whatever the toolkit."""
    monkeypatch.setattr(simulators, "find_libnvvm", lambda: DynamicLibNotFoundError(NO_LIBNVVM), raising=False)
    monkeypatch.setenv("GPUKIT_REQUIRE_GPU", "1")
    with pytest.raises(simulators.NumbaCudaUnavailable, match="row_stack"):
        simulators.numba_cuda_problem()


def test_a_missing_numba_is_skipped_as_optional_import_skips_it_never_raised(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "numba", None)  # `import numba` raises ImportError, as where it is missing
    monkeypatch.setattr(simulators, "try_numba_cuda", lambda: ModuleNotFoundError("No module named 'numba'"))
    monkeypatch.setenv("GPUKIT_REQUIRE_GPU", "1")
    assert simulators.numba_cuda_problem(needed_for="every kernel cell") == "Numba is not installed (see above)"
    printed = capsys.readouterr().out
    assert printed.startswith("Skipped: numba is not installed, so every kernel cell is skipped; install it with: ")
    assert "numba==" in printed


def test_find_libnvvm_asks_cuda_pathfinder_as_numba_cuda_does(monkeypatch):
    pathfinder = pytest.importorskip("cuda.pathfinder")
    asked = []

    def missing(libname):
        asked.append(libname)
        raise pathfinder.DynamicLibNotFoundError(NO_LIBNVVM)

    monkeypatch.setattr(pathfinder, "load_nvidia_dynamic_lib", missing)
    error = simulators.find_libnvvm()
    assert asked == ["nvvm"] and str(error) == NO_LIBNVVM and simulators.node_lacks_toolkit(error)
    monkeypatch.setattr(pathfinder, "load_nvidia_dynamic_lib", lambda libname: asked.append(libname))
    assert simulators.find_libnvvm() is None


def toolkit(root, *, libnvvm="nvvm/lib64/libnvvm.so.4", nvcc=True):
    """A CUDA toolkit's folders, as far as the search needs them: libNVVM where ``libnvvm`` says, and bin/nvcc."""
    if libnvvm:
        (root / libnvvm).parent.mkdir(parents=True)
        (root / libnvvm).write_bytes(b"")
    if nvcc:
        (root / "bin").mkdir(parents=True)
        (root / "bin" / "nvcc").write_text("#!/bin/sh\n")
        (root / "bin" / "nvcc").chmod(0o755)
    return root


def test_cuda_home_is_set_to_the_system_toolkit_that_holds_libnvvm(tmp_path):
    root = toolkit(tmp_path / "cuda")
    environ = {"PATH": str(tmp_path / "empty")}
    sentence = USE_SYSTEM_TOOLKIT(environ, root=str(root))
    assert environ["CUDA_HOME"] == str(root) and sentence.startswith(f"CUDA_HOME={root}: ")
    own_nvcc = {"PATH": str(root / "bin")}  # the toolkit's own nvcc first on PATH: the same toolkit
    assert USE_SYSTEM_TOOLKIT(own_nvcc, root=str(root)) and own_nvcc["CUDA_HOME"] == str(root)


@pytest.mark.parametrize("case", ["CUDA_HOME set", "CUDA_PATH set", "no libNVVM there", "libNVVM elsewhere there",
                                  "another toolkit's nvcc first"])
def test_cuda_home_is_left_alone_where_a_toolkit_is_named_or_that_one_has_no_libnvvm(tmp_path, case):
    root = toolkit(tmp_path / "cuda", libnvvm={"no libNVVM there": None,
                                                "libNVVM elsewhere there": "lib/libnvvm.so"}.get(case,
                                                                                                 "nvvm/lib64/libnvvm.so"))
    other = toolkit(tmp_path / "cuda-12.8", libnvvm=None)
    environ = {"PATH": str(other / "bin") if case == "another toolkit's nvcc first" else ""}
    if case.endswith(" set"):
        environ[case.split()[0]] = str(other)
    before = dict(environ)
    assert USE_SYSTEM_TOOLKIT(environ, root=str(root)) is None
    assert environ == before


def test_the_search_numba_cuda_uses_looks_where_gpukit_expects():
    """What use_system_toolkit and find_libnvvm rely on, read from the installed numba-cuda and cuda-pathfinder:
    numba-cuda asks cuda.pathfinder for libNVVM; under CUDA_HOME that looks in nvvm/lib64 for libnvvm.so.4 or
    libnvvm.so; and it reads CUDA_PATH and CUDA_HOME once per process (a cached function)."""
    import importlib.util
    from pathlib import Path

    numba_cuda = importlib.util.find_spec("numba_cuda")  # read, not imported: importing numba fixes its mode
    if numba_cuda is None:
        pytest.skip("numba-cuda is not installed")
    from cuda.pathfinder._dynamic_libs.lib_descriptor import LIB_DESCRIPTORS
    from cuda.pathfinder._utils import env_vars

    cuda_paths = (Path(numba_cuda.submodule_search_locations[0]) / "numba" / "cuda" / "cuda_paths.py").read_text()
    get_nvvm = cuda_paths.split("def _get_nvvm():", 1)[1].split("\ndef ", 1)[0]
    assert 'pathfinder.load_nvidia_dynamic_lib("nvvm")' in get_nvvm
    nvvm = LIB_DESCRIPTORS["nvvm"]
    assert tuple(nvvm.anchor_rel_dirs_linux) == ("/".join(simulators.NVVM_FOLDER),)
    assert tuple(nvvm.linux_sonames) == simulators.NVVM_NAMES
    assert hasattr(env_vars.get_cuda_path_or_home, "cache_info")  # functools.cache: read once
    assert env_vars._CUDA_PATH_ENV_VARS_ORDERED == simulators.TOOLKIT_VARIABLES
