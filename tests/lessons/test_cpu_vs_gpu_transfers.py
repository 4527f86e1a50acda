"""Lesson 01's copies between host and device, and its speed stories, run on the CPU.

The first H100 run of the book showed device-to-host copies at 1.1-1.4 GB/s: the lesson copied with
``x.to("cpu", copy=True)``, a new 256 MiB host tensor per copy, and so timed allocations and page faults, not the
bus. Here the lesson's own cells of "What moving data costs" run as on a CUDA GPU (``fake_cuda``: the GPU
predicate is true, "cuda" tensors live on the CPU, pinned memory is a plain tensor that says it is pinned, the
waits are logged) at a reduced size, and every timed copy must write into a buffer allocated before the first
timing, from and into pageable and pinned memory, each way. The same cells then run on the CPU as a CPU-only
machine runs them. The stories the lesson glues from its timings are run with made-up timings of every outcome:
a gain, no gain beyond the noise, and a loss.
"""

import statistics
import time

import pytest
import torch

from gpukit import benchmark, skip_unless
from gpukit.core.timing import Timing
from tests.support.lesson_code import Glued, between, definition, gluing, lesson, run

CELLS = lesson("01-cpu-vs-gpu")
SECTION = between(CELLS, "## What moving data costs", "Is a transfer worth it?")
SIZE = 4096  # float32 values: the lesson's 2**26 on a GPU, reduced


def _namespace(device):
    namespace = {"torch": torch, "time": time, "statistics": statistics, "device": device,
                 "on_gpu": device != "cpu", "m": SIZE, "skip_unless": skip_unless, "benchmark": benchmark,
                 "glue": Glued()}
    run(definition(CELLS, "wait_for"), namespace)
    namespace["x_cpu"] = torch.rand(SIZE)
    namespace["x"] = namespace["x_cpu"].to(device)
    return namespace


def test_on_a_gpu_every_timed_copy_writes_a_buffer_allocated_before_the_timing(fake_cuda):
    namespace = _namespace("cuda:0")
    mark = len(fake_cuda.log)
    for code in SECTION:
        run(code, namespace)
    log = fake_cuda.log[mark:]
    first_wait = next(i for i, event in enumerate(log) if event[0] == "synchronize")
    late = [event for event in log[first_wait:] if event[0] == "alloc" and event[1] >= SIZE]
    assert not late, f"a buffer of the vector's size was allocated after the timing began: {late}"
    # Both directions, through pageable and through pinned memory, each copy at least six times (first and later),
    # the pinned ones queued with non_blocking=True, each kind into one buffer.
    copies = [event for event in log if event[0] == "copy"]
    for destination, source_kind, non_blocking in [("device", "host", False), ("host", "device", False),
                                                   ("device", "pinned", True), ("pinned", "device", True)]:
        made = [c for c in copies if c[1:4] == (destination, source_kind, non_blocking)]
        assert len(made) >= 6, f"{len(made)} copies {source_kind} -> {destination}"
        assert len({c[4] for c in made}) == 1, f"{source_kind} -> {destination} wrote more than one buffer"
    assert sorted(namespace["copies"]) == sorted(
        f"{way}, {memory}" for way in ("host -> cuda:0", "cuda:0 -> host") for memory in ("pageable", "pinned"))
    assert namespace["pinned_buffer"].is_pinned()
    stories = namespace["glue"]
    assert "new pageable host buffer (cuda:0 -> host)" in stories["copy_story"]
    assert stories["pinned_story"].count("With pinned host memory") == 2
    assert "pinned host -> cuda:0" not in str(namespace["to_device"])  # the benchmark lines: pageable
    assert "pageable host -> cuda:0" in str(namespace["to_device"])


def test_on_the_cpu_the_same_cells_skip_the_pinned_lines(capsys):
    namespace = _namespace("cpu")
    for code in SECTION:
        run(code, namespace)
    assert sorted(namespace["copies"]) == ["cpu -> host, pageable", "host -> cpu, pageable"]
    assert namespace["pinned_buffer"] is None
    assert "Skipped: pinned (page-locked) memory" in capsys.readouterr().out
    assert "no pinned memory to compare" in namespace["glue"]["pinned_story"]


# ---------------------------------------------------------------------------------------------- the stories
def timing(seconds, jitter=0.0, label="t"):
    return Timing(label, (seconds - jitter, seconds - jitter / 2, seconds, seconds + jitter / 2, seconds + jitter))


def later(seconds, jitter=0.0):
    return [seconds - jitter, seconds, seconds + jitter, seconds - jitter / 2, seconds + jitter / 2]


def _copy_story(pageable_s, pinned_s, first_s):
    copies = {}
    for way in ("host -> cuda:0", "cuda:0 -> host"):
        copies[f"{way}, pageable"] = (first_s, later(pageable_s, 1e-5))
        copies[f"{way}, pinned"] = (pinned_s, later(pinned_s, 1e-5))
    namespace = {"copies": copies, "device": "cuda:0", "on_gpu": True, "pinned_buffer": object(),
                 "vector_bytes": 2**28, "statistics": statistics, "glue": Glued()}
    return run(gluing(CELLS, "pinned_story"), namespace)["glue"]


@pytest.mark.parametrize("pinned_s, expected", [
    (0.005, "were 8.0 times as fast as with pageable memory"),
    (0.0399, "were about as fast as with pageable memory"),
    (0.08, "were 2.0 times slower than with pageable memory"),
])
def test_the_pinned_story_tells_a_gain_no_gain_and_a_loss(pinned_s, expected):
    story = _copy_story(0.04, pinned_s, 0.04)["pinned_story"]
    assert story.count(expected) == 2, story  # each direction, in words that fit the measurement
    assert "later host -> cuda:0 copies" in story and "later cuda:0 -> host copies" in story


@pytest.mark.parametrize("first_s, expected", [
    (0.2, "took 5.0 times as long as the median of the later ones"),
    (0.0401, "took about as long as the later ones"),
    (0.01, "was faster than the median of the later ones"),
])
def test_the_first_copy_story_tells_each_outcome(first_s, expected):
    glued = _copy_story(0.04, 0.005, first_s)
    assert expected in glued["copy_story"]
    assert glued["h2d_gbs"] == glued["d2h_gbs"] == f"{2**28 / 0.04 / 1e9:.1f}"


@pytest.mark.parametrize("one_s, all_s, expected", [
    (1.0, 0.5, "All threads were 2.00 times as fast as one thread here."),
    (1.0, 0.2, "more than 2 threads can explain"),
    (1.0, 0.99, "about as fast as one thread"),
    (0.5, 1.0, "slower than one thread"),
])
def test_the_threads_story_tells_each_outcome(one_s, all_s, expected):
    namespace = {"mm_one": timing(one_s, 0.01 * one_s), "mm_all": timing(all_s, 0.01 * all_s), "all_threads": 2,
                 "glue": Glued()}
    assert expected in run(gluing(CELLS, "threads_story"), namespace)["glue"]["threads_story"]


@pytest.mark.parametrize("trip_s, expected", [
    (0.3, "took 3.00 times as long as"),
    (0.1, "took about as long as"),
    (0.02, "took only 0.20 of the time of"),
])
def test_the_round_trip_story_tells_each_outcome(trip_s, expected):
    namespace = {"round_trip": trip_s, "ew_dev": timing(0.1, 0.002), "on_gpu": True, "glue": Glued()}
    glued = run(gluing(CELLS, "trip_story"), namespace)["glue"]
    assert glued["trip_story"] == expected and glued["trip_moral"]
    assert glued["trip_kind"] == "copying over the bus"


def test_every_glued_story_of_the_section_is_in_the_prose():
    prose = "\n".join("".join(c["source"]) for c in CELLS if c["cell_type"] == "markdown")
    for name in ("copy_story", "pinned_story", "h2d_gbs", "d2h_gbs", "trip_story", "trip_moral", "threads_story"):
        assert f"glued.{name}`" in prose
