"""Chapter 16's kernel checks where numba-cuda cannot launch on the GPU for want of a CUDA toolkit library (libNVVM,
NVRTC): the node's limitation, not the book's, so the simulator's verdict stands even with GPUKIT_REQUIRE_GPU=1 (the
lesson itself skips its kernel cells there, with the sentence of gpukit.topics.simulators.numba_cuda_problem). A
numba-cuda broken by the book's environment still raises there (tests/exercises/test_performance.py)."""

import pytest

from gpukit.exercises import check
from gpukit.exercises import performance as checks
from tests.exercises.cases.performance import kernels

# What cuda.pathfinder raises, through numba-cuda, where no place it searches holds the library.
MISSING = {
    "libNVVM": 'Failure finding "libnvvm.so.4 or libnvvm.so": No such file: libnvvm.so.4 or libnvvm.so',
    "NVRTC": 'Failure finding "libnvrtc.so.13 or libnvrtc.so.12": No such file: libnvrtc.so.13 or libnvrtc.so.12',
}
DynamicLibNotFoundError = type("DynamicLibNotFoundError", (RuntimeError,), {})


@pytest.mark.parametrize("library", sorted(MISSING))
@pytest.mark.parametrize("label", ["ex-perf-transpose-padded", "ex-perf-block-sum"])
def test_without_a_toolkit_library_the_simulators_verdict_stands_even_with_a_gpu_required(label, library,
                                                                                          monkeypatch):
    def no_library(*_):
        raise DynamicLibNotFoundError(MISSING[library])

    monkeypatch.setattr(checks, "launches_on_the_gpu", lambda kernel: True)
    monkeypatch.setattr(checks, "run_on_the_gpu", no_library)
    monkeypatch.setenv("GPUKIT_REQUIRE_GPU", "1")
    k = kernels()
    right, wrong = {"ex-perf-block-sum": (k.block_sums, k.block_sums_by_atomics)}.get(
        label, (k.transpose_padded, k.transpose_tiled))
    assert check(label, right)
    assert not check(label, wrong)  # still graded, on the simulator
