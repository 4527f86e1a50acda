"""gpukit.topics.chunking: work in chunks that halve on out-of-memory errors, and only on those."""

import numpy as np
import pytest
import torch

from gpukit.topics import chunking
from gpukit.topics.chunking import (
    StillOutOfMemory,
    describe_out_of_memory,
    is_out_of_memory,
    join_pieces,
    run_in_chunks,
)

CPU_OOM = ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you "
           "tried to allocate 268435456 bytes. Error code 12 (Cannot allocate memory)")
CUDA_OOM = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 15.77 GiB of which "
            "1.05 GiB is free.")
MPS_OOM = "MPS backend out of memory (MPS allocated: 1.00 GiB, other allocations: 0 bytes, max allowed: 2 GiB)."


def squares(values):
    return lambda start, stop: values[start:stop] ** 2


def failing_above(limit, make_error, values, calls=None):
    """work that raises ``make_error()`` when its slice is longer than ``limit``."""

    def work(start, stop):
        if calls is not None:
            calls.append((start, stop))
        if stop - start > limit:
            raise make_error()
        return values[start:stop] ** 2

    return work


OOM_ERRORS = {
    "torch.OutOfMemoryError": lambda: torch.OutOfMemoryError(CUDA_OOM),
    "torch.cuda.OutOfMemoryError": lambda: torch.cuda.OutOfMemoryError(CUDA_OOM),
    "MemoryError": lambda: MemoryError("Unable to allocate 909. TiB for an array"),
    "cpu RuntimeError": lambda: RuntimeError(CPU_OOM),
    "mps RuntimeError": lambda: RuntimeError(MPS_OOM),
    "jax": lambda: RuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 1000 bytes."),
}


@pytest.mark.parametrize("name", sorted(OOM_ERRORS))
def test_out_of_memory_errors_are_recognised(name):
    assert is_out_of_memory(OOM_ERRORS[name]())


@pytest.mark.parametrize("error", [RuntimeError("Expected all tensors to be on the same device"), ValueError("x"),
                                   IndexError("CUDA out of memory"), KeyboardInterrupt()])
def test_other_errors_are_not_out_of_memory(error):
    assert not is_out_of_memory(error)


def test_real_allocation_failures_of_this_machine_are_recognised():
    for attempt in (lambda: torch.empty(10**15 // 4), lambda: np.empty(10**15 // 4, np.float32)):
        with pytest.raises((RuntimeError, MemoryError)) as caught:
            attempt()
        assert is_out_of_memory(caught.value)


@pytest.mark.parametrize(("error", "text"), [
    (RuntimeError(CPU_OOM), "RuntimeError asking for 256.00 MiB"),
    (torch.OutOfMemoryError(CUDA_OOM), "OutOfMemoryError asking for 2.00 GiB"),
    (MemoryError("Unable to allocate 909. TiB for an array"), "MemoryError asking for 909 TiB"),
    (MemoryError(), "MemoryError"),
])
def test_describe_names_the_class_and_the_size_asked_for(error, text):
    assert describe_out_of_memory(error) == text


@pytest.mark.parametrize("name", sorted(OOM_ERRORS))
def test_the_chunk_halves_until_it_fits_and_the_result_is_unchanged(name):
    values = torch.arange(1000, dtype=torch.float64)
    lines = []
    run = run_in_chunks(failing_above(130, OOM_ERRORS[name], values), 1000, report=lines.append)
    assert torch.equal(run.result, values**2)
    assert run.chunk == 125 and run.calls == 8
    assert [line.split(" (")[0] for line in lines] == [
        "out of memory with chunks of 1,000", "out of memory with chunks of 500", "out of memory with chunks of 250"]
    assert lines[-1].endswith("trying 125") and run.halvings == tuple(lines)
    assert "8 call(s) of at most 125 items; the chunk was halved 3 time(s)" == str(run)


def test_the_failed_slice_is_retried_and_the_smaller_chunk_is_kept():
    values = np.arange(10.0)
    calls = []
    run = run_in_chunks(failing_above(4, MemoryError, values, calls), 10, chunk=8, report=None)
    assert np.array_equal(run.result, values**2)
    assert calls == [(0, 8), (0, 4), (4, 8), (8, 10)]


def test_no_halving_when_everything_fits():
    values = np.arange(7.0)
    run = run_in_chunks(squares(values), 7, report=None)
    assert np.array_equal(run.result, values**2) and run.calls == 1 and run.halvings == ()
    assert "never halved" in str(run)


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 1000])
def test_results_match_the_unchunked_computation(chunk):
    values = torch.linspace(-3, 3, 257, dtype=torch.float32)

    def work(start, stop):
        return torch.sin(values[start:stop]) * 2 + 1

    assert torch.equal(run_in_chunks(work, 257, chunk=chunk, report=None).result, work(0, 257))


def test_it_gives_up_below_the_minimum_with_a_clear_chained_error():
    values = np.arange(100.0)
    error = RuntimeError(CPU_OOM)
    with pytest.raises(StillOutOfMemory, match=r"even with chunks of 25 items .*below min_chunk=20") as caught:
        run_in_chunks(failing_above(10, lambda: error, values), 100, min_chunk=20, report=None)
    assert caught.value.__cause__ is error
    assert "RuntimeError asking for 256.00 MiB" in str(caught.value)


def test_it_gives_up_at_once_when_the_first_chunk_is_already_the_minimum():
    with pytest.raises(StillOutOfMemory, match="chunks of 8 items"):
        run_in_chunks(failing_above(4, MemoryError, np.arange(8.0)), 8, chunk=8, min_chunk=8, report=None)


@pytest.mark.parametrize("error", [ValueError("bad value"), RuntimeError("Expected all tensors on one device"),
                                   KeyError("k"), ZeroDivisionError()])
def test_other_errors_propagate_unchanged_and_at_once(error):
    calls = []

    def work(start, stop):
        calls.append((start, stop))
        raise error

    with pytest.raises(type(error)) as caught:
        run_in_chunks(work, 100, report=None)
    assert caught.value is error and calls == [(0, 100)]


def test_cached_memory_is_released_before_each_retry(monkeypatch):
    events = []
    monkeypatch.setattr(chunking, "release_cached_memory", lambda: events.append("release"))
    values = np.arange(16.0)

    def work(start, stop):
        events.append(("work", start, stop))
        if stop - start > 4:
            raise MemoryError
        return values[start:stop]

    run_in_chunks(work, 16, chunk=16, report=None)
    assert events[:5] == [("work", 0, 16), "release", ("work", 0, 8), "release", ("work", 0, 4)]


def test_after_a_cuda_out_of_memory_error_empty_cache_runs_before_the_retry(monkeypatch):
    """The CUDA branch on a machine without a GPU: CUDA reported as started, empty_cache recorded."""
    events = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: events.append("empty_cache"))
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)

    def work(start, stop):
        events.append(stop - start)
        if stop - start > 2:
            raise torch.OutOfMemoryError(CUDA_OOM)
        return torch.zeros(stop - start)

    run = run_in_chunks(work, 4, report=None)
    assert events[:4] == [4, "empty_cache", 2, 2]
    assert run.chunk == 2


def test_mps_cache_is_released_where_mps_exists(monkeypatch):
    events = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.mps, "empty_cache", lambda: events.append("mps"))
    chunking.release_cached_memory()
    assert events == ["mps"]


def test_release_without_cuda_touches_no_cache(monkeypatch):
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: pytest.fail("empty_cache called without CUDA"))
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    chunking.release_cached_memory()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"chunk": 0}, "chunk must be a whole number >= 1, not 0"),
    ({"chunk": -4}, "chunk must be a whole number >= 1, not -4"),
    ({"chunk": 2.5}, "chunk must be a whole number >= 1, not 2.5"),
    ({"chunk": True}, "chunk must be a whole number >= 1, not True"),
    ({"chunk": "10"}, "chunk must be a whole number >= 1, not '10'"),
    ({"min_chunk": 0}, "min_chunk must be a whole number >= 1, not 0"),
    ({"min_chunk": -1}, "min_chunk must be a whole number >= 1"),
    ({"min_chunk": 1.0}, "min_chunk must be a whole number >= 1, not 1.0"),
    ({"chunk": 10, "min_chunk": 20}, r"min_chunk \(20\) must not exceed the first chunk \(10\)"),
])
def test_bad_chunk_sizes_are_rejected_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        run_in_chunks(squares(np.arange(10.0)), 10, report=None, **kwargs)


@pytest.mark.parametrize("total", [-1, 2.0, None, "10"])
def test_bad_totals_are_rejected(total):
    with pytest.raises(ValueError, match="total must be a whole number >= 0"):
        run_in_chunks(squares(np.arange(10.0)), total, report=None)


def test_non_callables_are_rejected():
    with pytest.raises(TypeError, match="work must be a function work\\(start, stop\\), not ndarray"):
        run_in_chunks(np.arange(3.0), 3)
    with pytest.raises(TypeError, match="combine must be a function"):
        run_in_chunks(squares(np.arange(3.0)), 3, combine=[])
    with pytest.raises(TypeError, match="report must be a function"):
        run_in_chunks(squares(np.arange(3.0)), 3, report="loud")


def test_a_minimum_above_everything_is_allowed_when_no_chunk_is_given():
    values = np.arange(5.0)
    assert np.array_equal(run_in_chunks(squares(values), 5, min_chunk=64, report=None).result, values**2)


def test_nothing_to_do_calls_work_once_for_an_empty_result():
    run = run_in_chunks(squares(np.arange(3.0)), 0, report=None)
    assert run.result.shape == (0,) and run.calls == 1


def test_pieces_are_joined_by_kind_or_by_the_given_function():
    assert torch.equal(join_pieces([torch.ones(2), torch.zeros(1)]), torch.tensor([1.0, 1.0, 0.0]))
    assert np.array_equal(join_pieces([np.ones(1), np.zeros(2)]), [1.0, 0.0, 0.0])
    assert join_pieces([[1], [2, 3]]) == [1, 2, 3]
    assert join_pieces([1, 2]) == [1, 2] and join_pieces([]) == []
    run = run_in_chunks(lambda a, b: sum(range(a, b)), 10, chunk=3, combine=sum, report=None)
    assert run.result == sum(range(10))
