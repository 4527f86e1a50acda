"""Chapter 16's kernel checks beyond test_every_exercise: every call draws new sizes and values (an answer that
replays an earlier result cannot pass), the tolerated variant passes, and where numba's target is a GPU the kernel
also runs there and must match (that branch forced on the CPU, the simulator standing in for the GPU)."""

import numpy as np
import pytest

from gpukit.exercises import check
from gpukit.exercises import performance as checks
from tests.exercises.cases.performance import kernels
from tests.support.device_probe import skip_where_the_gpu_cannot_work

launches_on_the_gpu = checks.launches_on_the_gpu  # the check's own, before on_the_simulator replaces it


@pytest.fixture(autouse=True)
def on_the_simulator(monkeypatch):
    """The checks grade on the simulator on any machine; whether they also launch on a GPU is forced per test
    (never left to what this machine reports)."""
    monkeypatch.setattr(checks, "launches_on_the_gpu", lambda kernel: False)


@pytest.fixture
def launches(monkeypatch):
    """The arrays of every counted launch the checks make."""
    seen = []
    count = checks.count_accesses

    def counting(kernel, blocks, threads, *arrays):
        seen.append([a.copy() if isinstance(a, np.ndarray) else a for a in arrays])
        counts = count(kernel, blocks, threads, *arrays)
        seen[-1].append(arrays[-1])
        return counts

    monkeypatch.setattr(checks, "count_accesses", counting)
    return seen


def test_each_transpose_check_draws_new_sizes_and_values_and_a_replayed_result_cannot_pass(launches, monkeypatch):
    k = kernels()
    for _ in range(3):
        assert check("ex-perf-transpose-tiled", k.transpose_tiled)
    shapes = [arrays[0].shape for arrays in launches]
    assert len(set(shapes)) > 1
    assert all(rows != cols and rows % 32 and cols % 32 for rows, cols in shapes)
    assert len({float(arrays[0][0, 0]) for arrays in launches}) == 3
    # An answer that replays the output of a run that passed (the last one's) fails the next check.
    monkeypatch.setattr(k, "REMEMBERED", launches[-1][-1])
    result = check("ex-perf-transpose-tiled", k.transpose_remembered)
    assert not result and "values differ" in result.message


def test_each_block_sum_check_draws_a_new_length_and_one_atomic_per_block_is_tolerated(launches):
    k = kernels()
    for kernel in (k.block_sums, k.block_sums_one_atomic, k.block_sums):  # the tolerated variant passes too
        assert check("ex-perf-block-sum", kernel)
    sizes = [arrays[0].size for arrays in launches]
    assert len(set(sizes)) > 1 and all(n % checks.THREADS for n in sizes)


class CUDADispatcher:
    """Stands for a kernel compiled for a GPU: its Python function is ``counted``'s, and a launch runs ``launched``
    (on the simulator, standing for the GPU)."""

    def __init__(self, counted, launched=None):
        self.py_func = counted.py_func
        self.targetoptions = {"device": False}
        self.launched = launched or counted
        self.launches = 0

    def __getitem__(self, configuration):
        self.launches += 1
        return self.launched[configuration]


@pytest.mark.parametrize("label", ["ex-perf-transpose-padded", "ex-perf-block-sum"])
def test_on_a_gpu_the_kernel_also_runs_there_and_must_match(label, monkeypatch):
    # The stand-in launches on numba's target: the simulator where the kernels are the simulator's, the GPU where
    # numba's target is the real one (only there is numba's GPU probed, a child Python).
    k = kernels()
    if type(k.transpose_tiled).__name__ != "FakeCUDAKernel":
        skip_where_the_gpu_cannot_work("numba", needs="the stand-in launches the kernel on the GPU numba reports")
    right, wrong = {"ex-perf-block-sum": (k.block_sums, k.block_sums_off_by_one_block)}.get(
        label, (k.transpose_padded, k.transpose_padded_swapped))
    monkeypatch.setattr(checks, "launches_on_the_gpu", lambda kernel: isinstance(kernel, CUDADispatcher))
    on_the_gpu = CUDADispatcher(right)
    assert check(label, on_the_gpu)
    assert on_the_gpu.launches == 1
    differs_there = CUDADispatcher(right, launched=wrong)
    result = check(label, differs_there)
    assert not result and "on the GPU" in result.message and "values differ" in result.message


def test_where_numba_has_no_gpu_a_kernel_compiled_for_one_is_graded_on_the_simulator():
    k = kernels()
    assert check("ex-perf-transpose-padded", CUDADispatcher(k.transpose_padded))
    result = check("ex-perf-transpose-padded", CUDADispatcher(k.transpose_tiled))
    assert not result and "bank conflicts" in result.message


def test_a_kernel_on_the_simulator_is_never_sent_to_a_gpu():
    k = kernels()
    if type(k.transpose_tiled).__name__ != "FakeCUDAKernel":
        pytest.skip("numba's CUDA target is the real one in this process (a GPU is reported)")
    assert not launches_on_the_gpu(k.transpose_tiled)
    assert not launches_on_the_gpu(CUDADispatcher(k.transpose_tiled))  # numba is simulating


@pytest.mark.parametrize("required", [False, True])
def test_where_numba_cuda_cannot_run_on_the_gpu_the_simulators_verdict_stands(required, monkeypatch):
    # numba-cuda 0.30.4 beside NumPy 2.5 fails at its first kernel (the book's first GPU run): the learner's kernel
    # is not to blame; a GPU run that requires the GPU (GPUKIT_REQUIRE_GPU=1) stops and says why.
    from gpukit.topics.simulators import NumbaCudaUnavailable

    def broken(*_):
        raise AttributeError("module 'numpy' has no attribute 'row_stack'")

    monkeypatch.setattr(checks, "launches_on_the_gpu", lambda kernel: True)
    monkeypatch.setattr(checks, "run_on_the_gpu", broken)
    monkeypatch.setenv("GPUKIT_REQUIRE_GPU", "1" if required else "0")
    k = kernels()
    if required:
        with pytest.raises(NumbaCudaUnavailable, match="row_stack"):
            check("ex-perf-block-sum", k.block_sums)
    else:
        assert check("ex-perf-block-sum", k.block_sums)
        assert not check("ex-perf-block-sum", k.block_sums_by_atomics)  # still graded on the simulator


def test_an_error_of_the_kernel_on_the_gpu_is_reported(monkeypatch):
    def failing(*_):
        raise TypeError("No matching definition for argument type(s) array(float64, 1d, C)")

    monkeypatch.setattr(checks, "launches_on_the_gpu", lambda kernel: True)
    monkeypatch.setattr(checks, "run_on_the_gpu", failing)
    result = check("ex-perf-block-sum", kernels().block_sums)
    assert not result and "launching your kernel on the GPU raised TypeError" in result.message


# ----------------------------------------------------------------------------- ex-perf-no-recompile's batch sizes
def test_a_first_batch_as_wide_as_the_features_ties_them_under_dynamic_true():
    """Why the check never draws _FEATURES: with dynamic=True, a first batch of _FEATURES rows shares its symbol
    with the features (duck sizing), and the next size recompiles a right answer."""
    import torch

    def dynamic(fn, backend):
        return torch.compile(fn, backend=backend, dynamic=True)

    tied, _, _ = checks._compilations(dynamic, [checks._FEATURES, 37, 21], "cpu")
    untied, _, _ = checks._compilations(dynamic, [checks._FEATURES + 1, 37, 21], "cpu")
    assert (len(tied), len(untied)) == (2, 1)


def test_the_checks_batch_sizes_never_include_the_features_width():
    draws = [checks.batch_sizes() for _ in range(300)]
    assert all(len(set(sizes)) == checks._BATCHES and checks._FEATURES not in sizes and min(sizes) >= 2
               for sizes in draws)
    assert len({tuple(sizes) for sizes in draws}) > 250  # fresh sizes each check


def test_each_planted_device_mistake_is_rejected_on_the_cpu_with_what_went_wrong():
    """The mistakes of the device that a CPU alone would not show (tests/exercises/cases/performance.py's
    DEVICE_MISTAKES): each is a wrong answer of its exercise, and its check rejects it on this CPU for that
    reason (the simulator's barrier order for the kernels, the meta device for the compiled function)."""
    from tests.exercises.cases import name_of
    from tests.exercises.cases.performance import DEVICE_MISTAKES, SOLUTIONS, WRONG_ANSWERS

    for label, mistakes in DEVICE_MISTAKES.items():
        _, context = SOLUTIONS[label]()
        by_name = {name_of(wrong): word for wrong, word in WRONG_ANSWERS[label]()}
        answers = {name_of(wrong): wrong for wrong, _ in WRONG_ANSWERS[label]()}
        for name in mistakes:
            result = check(label, answers[name], **context)
            assert not result, f"{label}: {name} was accepted"
            assert by_name[name] in result.message, f"{label}: {name}: {result.message}"


def test_a_copy_to_the_host_inside_the_compiled_function_is_named_with_its_cost():
    import torch

    from tests.exercises.cases.performance import compile_for_any_batch, result_copied_to_host

    result = check("ex-perf-no-recompile", result_copied_to_host, device="cpu")
    assert not result and "right on the CPU, but given tensors on another device" in result.message
    assert "a copy and a wait at every call" in result.message and "Cannot copy out of meta tensor" in result.message

    def left_on_another_device(fn, backend):  # a result moved elsewhere without raising
        compiled = torch.compile(fn, backend=backend, dynamic=True)
        return lambda x, *args: compiled(x, *args).to("cpu") if x.device.type == "cpu" else torch.zeros(1)

    result = check("ex-perf-no-recompile", left_on_another_device, device="cpu")
    assert not result and "returned its result on cpu" in result.message
    assert check("ex-perf-no-recompile", compile_for_any_batch, device="cpu")
