"""Chapter 9's GPU paths, run on the CPU (notebooks/09-writing-kernels.ipynb).

The first GPU run found two defects there that no CPU run could show:

- the Numba cells were guarded on numba being importable, not on its CUDA target working, and numba-cuda 0.30.4
  beside NumPy 2.5 fails at the first kernel (``AttributeError: module 'numpy' has no attribute 'row_stack'``).
  Here the lesson's own cells run in a child Python whose numba-cuda uses its real CUDA target (tests/support/gpu_node
  tells it and torch that there is a GPU) beside a NumPy without ``np.row_stack``, as NumPy 2.5 is: the lesson
  must skip its Numba cells with one sentence naming the cause and the fix, and with ``GPUKIT_REQUIRE_GPU=1`` fail
  with that sentence;
- Triton's softmax was timed with a host clock around 12 µs of GPU work, so the launch was timed. The lesson's
  timing cells run here with the GPU predicate forced true, in Triton's interpreter, with a stand-in device behind
  Triton's driver (the events, the synchronisation and the L2 flush that ``triton.testing.do_bench`` asks of
  ``runtime.driver.active``) whose timer is not the host's clock. The test checks what the lesson needs, not how
  one Triton's do_bench goes about it (Triton 3.6 and 3.7 both pass): each time is do_bench's, read from the
  device's timer after synchronising, after a warm-up and with the cache flushed before each timed call, its
  milliseconds made seconds; the same checks refuse a host clock around the launch and other wrong timings. The
  prose that follows the measurement is built from fabricated timings for every outcome.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys

import nbformat
import pytest

from gpukit.base.child_python import run_python
from gpukit.core.glue import glue, glued
from gpukit.measuring.speed_sentences import speed_phrase
from tests.support.booktoc import ROOT
from tests.support.gpu_node import forcing_env, gpu_node_env

LESSON = ROOT / "notebooks" / "09-writing-kernels.ipynb"

# Runs a list of cells (with, before each, a line that may force `gpu`) in one namespace, as a kernel would, and
# prints each cell's output and error.
RUN_CELLS = '''
import contextlib, io, json, sys

cells = json.load(open(sys.argv[1], encoding="utf-8"))
namespace = {"__name__": "__main__"}
results = []
for preamble, source in cells:
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(preamble, "<preamble>", "exec"), namespace)
            exec(compile(source, "<cell>", "exec"), namespace)
    except Exception as error:
        results.append({"out": printed.getvalue(), "error": f"{type(error).__name__}: {error}",
                        "context_shown": not error.__suppress_context__ and error.__context__ is not None})
        break
    results.append({"out": printed.getvalue(), "error": None})
extra = namespace.get("REPORT", lambda: {})()
print("CELLS " + json.dumps({"results": results, "extra": extra}))
'''


def code_cells() -> list[nbformat.NotebookNode]:
    return [cell for cell in nbformat.read(LESSON, as_version=4).cells if cell.cell_type == "code"]


def the_cell(marker: str) -> str:
    found = [cell.source for cell in code_cells() if marker in cell.source]
    assert len(found) == 1, f"{len(found)} code cells of chapter 9 hold {marker!r}"
    return found[0]


def run_cells(tmp_path, cells: list[tuple[str, str]], env: dict[str, str]) -> dict:
    listing = tmp_path / "cells.json"
    listing.write_text(json.dumps(cells), encoding="utf-8")
    script = tmp_path / "run_cells.py"
    script.write_text(RUN_CELLS, encoding="utf-8")
    clean = {name: "0" for name in ("NUMBA_ENABLE_CUDASIM", "TRITON_INTERPRET", "GPUKIT_REQUIRE_GPU")}
    run = run_python(str(script), str(listing), env={**clean, "MPLBACKEND": "Agg", **env}, timeout=300)
    lines = [line for line in run.stdout.splitlines() if line.startswith("CELLS ")]
    assert run.ok and lines, f"exit {run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return json.loads(lines[-1][len("CELLS "):])


# ------------------------------------------------------------------------------------------ Numba's CUDA target
# The cells from the one that picks the kernels' mode to the shared-memory sum: the mode, the imports, the
# warning filter, the check of Numba's target, and every Numba cell of the lesson's first half.
NUMBA_MARKERS = ("gpu = torch.cuda.is_available()", 'optional_import("numba"', "warnings.filterwarnings(",
                 "numba_cuda_problem", "def add(x, y, out)", "add[blocks, threads]", "def add_without_guard",
                 "def block_sums", "block_sums[sum_blocks, THREADS]")


def numpy_2_5_on_a_gpu_node(required: bool) -> dict[str, str]:
    """A child where torch and numba-cuda see a GPU (so the lesson keeps the simulator off) and NumPy has no
    np.row_stack; GPUKIT_REQUIRE_GPU as asked."""
    env = {**gpu_node_env(parts=("torch", "numba"), cxx=None), **forcing_env(numpy_2_5=True)}
    env["PYTHONPATH"] = gpu_node_env(parts=("torch", "numba"), cxx=None)["PYTHONPATH"]
    env["GPUKIT_REQUIRE_GPU"] = "1" if required else "0"
    return env


def expected_sentence() -> re.Pattern:
    return re.compile(
        r"Numba's CUDA target cannot run a kernel here \(AttributeError: module 'numpy' has no attribute "
        r"'row_stack'\): numba-cuda 0\.30\.4 still uses np\.row_stack, which NumPy \d+\.\d+\.\d+ no longer has "
        r"\(NumPy 2\.5 removed it\); install the NumPy the book pins, `.* -m pip install numpy==2\.4\.6`, and "
        r"restart the kernel\.")


def test_numba_cells_skip_with_the_cause_and_fix_where_numba_cudas_target_fails(tmp_path):
    cells = [("", the_cell(marker)) for marker in NUMBA_MARKERS]
    results = run_cells(tmp_path, cells, numpy_2_5_on_a_gpu_node(required=False))["results"]
    assert [r["error"] for r in results] == [None] * len(cells), results
    mode, _, _, probe, *numba_cells = [r["out"] for r in results]
    assert mode.strip() == "kernels run on the GPU"  # the simulator stays off, as on a GPU node
    assert probe.startswith("Skipped: ") and probe.count("\n") == 1, probe
    assert expected_sentence().fullmatch(probe.strip()[len("Skipped: "):]), probe
    simulating = NUMBA_MARKERS.index("def add_without_guard") - 4
    for index, out in enumerate(numba_cells):
        reason = ("on a real GPU the out-of-bounds writes would go unnoticed" if index == simulating
                  else "Numba cannot run kernels here (see above)")
        assert out.strip() == f"Skipped: {reason}", (NUMBA_MARKERS[index + 4], out)


def test_with_a_gpu_required_the_lesson_stops_at_the_check_with_the_sentence(tmp_path):
    cells = [("", the_cell(marker)) for marker in NUMBA_MARKERS]
    results = run_cells(tmp_path, cells, numpy_2_5_on_a_gpu_node(required=True))["results"]
    failed = results[-1]
    assert len(results) == NUMBA_MARKERS.index("numba_cuda_problem") + 1, results  # stopped at the check
    name, _, message = failed["error"].partition(": ")
    assert name == "NumbaCudaUnavailable" and expected_sentence().fullmatch(message), failed
    assert not failed["context_shown"]  # one sentence, not numba-cuda's traceback beneath it


def test_where_numba_works_the_check_says_so_and_the_kernels_run(tmp_path):
    """On the CPU, the simulator: the check passes and the Numba cells run (the lesson's usual CPU run)."""
    cells = [("", the_cell(marker)) for marker in NUMBA_MARKERS]
    results = run_cells(tmp_path, cells, forcing_env(hide_gpu=True))["results"]
    assert [r["error"] for r in results] == [None] * len(cells), results
    assert results[3]["out"].strip() == "Numba's CUDA target compiled and ran a test kernel on the simulator"
    assert "matches NumPy: True" in results[5]["out"] and "matches NumPy: True" in results[8]["out"]


# ------------------------------------------------------------------------------------------ Triton's timings
# What the lesson needs of its timing, whatever Triton's version does inside do_bench: the time is the GPU's (read
# from the device's own timer through events, after synchronising), do_bench warmed the kernel up and flushed the
# cache before each timed call, and the milliseconds it returns became seconds. The stand-in below is a device for
# Triton's driver (`runtime.driver.active`: the device interface with its events and synchronisation, and the
# cache flush): it answers as CUDA does and logs, in order, what was asked of it, with every call of the function
# timed. Nothing here counts the events or flushes of one Triton's do_bench.
#
# The stand-in device's timer is its own clock, not the host's: it counts SCALE milliseconds for each host
# millisecond, as if the GPU's work took that much longer than the host's part of the call. A host clock around a
# launch (on a GPU it times the launch, not the work) therefore reads far less than the device's timer, as it
# would on a GPU. As on a GPU, an event's time can be read only once the device has reached it
# (cudaErrorNotReady before): a timing that reads its events without synchronising fails.
STAND_IN_DEVICE = '''
import itertools
import time

SCALE = 1000.0  # the device's milliseconds in one host millisecond
LOG = []  # what was asked of the device, in order: [kind, ...]
_ids = itertools.count()
_pending = []  # events recorded that the device has not reached yet


def device_ms():
    return time.perf_counter() * 1e3 * SCALE


class StandInEvent:
    def __init__(self, enable_timing=False, **_):
        self.id, self.timing, self.at, self.reached = next(_ids), enable_timing, None, False

    def record(self, stream=None):
        self.at, self.reached = device_ms(), False
        _pending.append(self)
        LOG.append(["record", self.id])

    def query(self):
        return self.reached

    def synchronize(self):
        self.reached = self.at is not None
        LOG.append(["sync", self.id])

    def elapsed_time(self, end):
        if not (self.timing and end.timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if not (self.reached and end.reached):
            raise RuntimeError("CUDA error: device not ready (cudaErrorNotReady): an event's time was read "
                               "before the device reached it; synchronise first")
        LOG.append(["elapsed", self.id, end.id, end.at - self.at])
        return end.at - self.at  # milliseconds, as torch.cuda.Event.elapsed_time


class _Missing:
    def __getattr__(self, name):
        raise AttributeError(f"the stand-in {type(self).__name__} has no {name!r}, which this Triton asked for: "
                             "add it to STAND_IN_DEVICE in tests/lessons/test_writing_kernels_gpu_paths.py")


class StandInDeviceInterface(_Missing):
    Event = StandInEvent

    def synchronize(self, device=None):
        for event in _pending:
            event.reached = True
        _pending.clear()
        LOG.append(["sync"])


class StandInDriver(_Missing):
    def get_device_interface(self):
        return StandInDeviceInterface()

    def get_empty_cache_for_benchmark(self):
        import torch

        return torch.empty(1 << 16, dtype=torch.int32)

    def clear_cache(self, cache):
        cache.zero_()
        LOG.append(["flush"])
'''
# Sets the stand-in as Triton's active driver and watches do_bench: each call's log, with its result, and every call
# of the function it times.
INSTALL_STAND_IN = '''
import triton
import triton.testing

triton.runtime.driver.set_active(StandInDriver())
BENCHES = []  # one per do_bench call: {"log": [...], "ms": its result}
_do_bench = triton.testing.do_bench


def watched_do_bench(fn, *args, **kwargs):
    def timed():
        LOG.append(["call"])
        return fn()

    start = len(LOG)
    result = _do_bench(timed, *args, **kwargs)
    BENCHES.append({"log": LOG[start:], "ms": result})
    return result


triton.testing.do_bench = watched_do_bench


def REPORT():
    from gpukit import glued

    return {"benches": LESSON_BENCHES, "variants": VARIANT_RESULTS,
            "times": [*namespace_times(globals(), "add_times"), *namespace_times(globals(), "softmax_times")],
            "add_story": getattr(glued, "add_story", None), "softmax_story": getattr(glued, "softmax_story", None)}


def namespace_times(names, name):
    return list(names.get(name, {}).values())
'''
# One call between two events, read with or without synchronising first: two of the wrong timings below.
EVENTS_AROUND_ONE_CALL = '''
def gpu_seconds(fn, *args):
    device = triton.runtime.driver.active.get_device_interface()
    start, end = device.Event(enable_timing=True), device.Event(enable_timing=True)
    start.record()
    fn(*args)
    end.record()
{synchronise}    return start.elapsed_time(end) / 1e3
'''
# Wrong ways to write the lesson's `gpu_seconds`, each run in place of it by the add timing cell (with `gpu` true):
# the checks below must refuse every one, for the reason named.
WRONG_TIMINGS = {
    "a host clock around the launch": ('''
import time


def gpu_seconds(fn, *args):
    begin = time.perf_counter()
    fn(*args)
    return time.perf_counter() - begin
''', "not timed by triton.testing.do_bench"),
    "a host clock after synchronising": ('''
import time


def gpu_seconds(fn, *args):
    fn(*args)
    device = triton.runtime.driver.active.get_device_interface()
    device.synchronize()
    begin = time.perf_counter()
    fn(*args)
    device.synchronize()
    return time.perf_counter() - begin
''', "not timed by triton.testing.do_bench"),
    "do_bench's milliseconds as seconds": ('''
def gpu_seconds(fn, *args):
    return triton.testing.do_bench(lambda: fn(*args), return_mode="median")
''', "not do_bench's milliseconds / 1000"),
    "events read without synchronising": (EVENTS_AROUND_ONE_CALL.format(synchronise=""), "cudaErrorNotReady"),
    "events, synchronised, but no warm-up and no flush": (EVENTS_AROUND_ONE_CALL.format(
        synchronise="    device.synchronize()\n"), "not timed by triton.testing.do_bench"),
}
# Runs, after the lesson's cells, the add timing cell once with each wrong `gpu_seconds`, each in a copy of the
# lesson's namespace; keeps the lesson's own benches first.
RUN_WRONG_TIMINGS = '''
import contextlib, io

LESSON_BENCHES = list(BENCHES)
VARIANT_RESULTS = {}
for name, source in WRONG_SOURCES.items():
    BENCHES.clear()
    names = dict(globals(), gpu=True)
    error = None
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(source, name, "exec"), names)
            exec(compile(ADD_TIMING_CELL, "add timing", "exec"), names)
    except Exception as failed:
        error = f"{type(failed).__name__}: {failed}"
    VARIANT_RESULTS[name] = {"benches": list(BENCHES), "error": error,
                             "times": list(names.get("add_times", {}).values()) if error is None else []}
'''


def _timed_calls(log: list[list]) -> list[int]:
    """Where the calls of the function timed by some pair of events lie in a log: between the record of the start
    event and that of the end event of a pair whose elapsed time was read."""
    where = {entry[1]: at for at, entry in enumerate(log) if entry[0] == "record"}
    timed = set()
    for entry in log:
        if entry[0] == "elapsed":
            first, last = where[entry[1]], where[entry[2]]
            timed |= {at for at in range(first, last) if log[at][0] == "call"}
    return sorted(timed)


def bench_problems(bench: dict) -> list[str]:
    """What is wrong with one do_bench call, read from the stand-in's log: what the lesson relies on do_bench for (a
    warm-up call before any timed one, the device's events read after synchronising, the cache flushed before each
    timed call, a result among the device timer's readings), however a Triton version arranges it."""
    log, problems = bench["log"], []
    kinds = [entry[0] for entry in log]
    readings = [entry[3] for entry in log if entry[0] == "elapsed"]
    if not readings:
        return ["read no time from the device's events"]
    timed = _timed_calls(log)
    if not any(kind == "call" and at not in timed for at, kind in enumerate(kinds[:min(timed, default=0)])):
        problems.append("no warm-up: the first call was timed")
    recorded = {entry[1]: at for at, entry in enumerate(log) if entry[0] == "record"}
    for at, entry in enumerate(log):
        if entry[0] == "elapsed" and not any(
                log[sync][0] == "sync" and (len(log[sync]) == 1 or log[sync][1] == entry[2])
                for sync in range(recorded[entry[2]], at)):
            problems.append("read an event's time before synchronising")
            break
    calls = [at for at, kind in enumerate(kinds) if kind == "call"]
    for at in timed:
        previous = max((c for c in calls if c < at), default=-1)
        if "flush" not in kinds[previous + 1:at]:
            problems.append("a timed call ran without the cache flushed before it")
            break
    if not min(readings) <= bench["ms"] <= max(readings):
        problems.append(f"returned {bench['ms']:.4g} ms, outside the device timer's readings "
                        f"({min(readings):.4g} to {max(readings):.4g} ms)")
    return problems


def timing_problems(benches: list[dict], seconds: list[float], error: str | None = None) -> list[str]:
    """What is wrong with the timings a cell reported (`seconds`, in order) given the do_bench calls it made."""
    if error is not None:
        return [f"the cell failed: {error}"]
    if len(benches) != len(seconds):
        return [f"{len(seconds)} timings reported after {len(benches)} do_bench calls: not timed by "
                "triton.testing.do_bench"]
    problems = []
    for index, (bench, reported) in enumerate(zip(benches, seconds, strict=True)):
        problems += [f"timing {index}: {problem}" for problem in bench_problems(bench)]
        if not math.isclose(reported * 1e3, bench["ms"], rel_tol=1e-9):
            problems.append(f"timing {index}: {reported:.4g} s is not do_bench's milliseconds / 1000 "
                            f"({bench['ms']:.4g} ms)")
    return problems


# The cells that measure or tell the measurement: they run with `gpu` forced true.
TIMING_MARKERS = ("add_times = {", 'glue("add_story"', "softmax_times = {", 'glue("softmax_story"')
TRITON_MARKERS = ("gpu = torch.cuda.is_available()", 'optional_import("numba"', "def add_kernel(",
                  "def triton_add(", "do_bench", TIMING_MARKERS[0], TIMING_MARKERS[1], "def softmax_kernel(",
                  "def triton_softmax(", TIMING_MARKERS[2], TIMING_MARKERS[3])


def test_the_timing_cells_time_the_gpus_work_with_do_bench_events(tmp_path):
    mode, *rest = TRITON_MARKERS
    # The mode cell decides `gpu` (no GPU: the interpreter); the hidden cell with glue and NO_GPU and the stand-in
    # come after it; then each cell runs with the real `gpu`, except the timing and story cells, which run with it
    # forced true; last, the add timing cell once with each wrong timing in place of the lesson's.
    wrong = (f"WRONG_SOURCES = {({name: source for name, (source, _) in WRONG_TIMINGS.items()})!r}\n"
             f"ADD_TIMING_CELL = {the_cell(TIMING_MARKERS[0])!r}\n" + RUN_WRONG_TIMINGS)
    cells = [("", the_cell(mode)), ("", the_cell("NO_GPU = (")), ("", STAND_IN_DEVICE + INSTALL_STAND_IN)]
    cells += [("gpu = True" if marker in TIMING_MARKERS else "gpu = torch.cuda.is_available()", the_cell(marker))
              for marker in rest]
    cells += [("", wrong)]
    report = run_cells(tmp_path, cells, forcing_env(hide_gpu=True))
    results, extra = report["results"], report["extra"]
    assert [r["error"] for r in results] == [None] * len(cells), results
    out = {marker: results[index if index == 0 else index + 2]["out"] for index, marker in enumerate(TRITON_MARKERS)}
    assert out["gpu = torch.cuda.is_available()"].strip().startswith("kernels run on the CPU")
    add_lines = out[TIMING_MARKERS[0]].strip().splitlines()
    assert [line.split(":")[0] for line in add_lines] == ["Triton add", "torch.add"], add_lines
    assert all(re.search(r": \d+\.\d µs of GPU time, \d+ GB/s$", line) for line in add_lines), add_lines
    soft_lines = out[TIMING_MARKERS[2]].strip().splitlines()
    assert [line.split(" softmax")[0] for line in soft_lines] == ["Triton", "torch"], soft_lines
    assert all(" softmax of 256 x 400: " in line for line in soft_lines), soft_lines  # 4 x (64, 100)
    # The four timings are do_bench's, each the GPU's time (the device timer's, synchronised, after a warm-up and
    # with the cache flushed before each timed call), its milliseconds made seconds.
    assert len(extra["times"]) == 4 and timing_problems(extra["benches"], extra["times"]) == [], extra
    assert extra["add_story"].startswith("On 1,000 float32 values the Triton kernel took ")
    assert extra["softmax_story"].startswith("On 256 rows of 400 values the fused Triton softmax took ")
    # The same checks refuse every wrong timing, for its reason.
    for name, (_, reason) in WRONG_TIMINGS.items():
        variant = extra["variants"][name]
        problems = timing_problems(variant["benches"], variant["times"], variant["error"])
        assert any(reason in problem for problem in problems), (name, problems)


def good_bench(*, warm_up=True, flush=True, synchronise=True, ms=None) -> dict:
    """A do_bench call's log as the stand-in writes it: a warm-up call, then two timed calls, each after a flush."""
    log = [["call"], ["sync"]] if warm_up else []
    for pair in range(2):
        log += [["flush"]] if flush else []
        log += [["record", 2 * pair], ["call"], ["record", 2 * pair + 1]]
    log += [["sync"]] if synchronise else []
    log += [["elapsed", 0, 1, 4.0], ["elapsed", 2, 3, 6.0]]
    return {"log": log, "ms": 5.0 if ms is None else ms}


@pytest.mark.parametrize(("bench", "seconds", "reason"), [
    (good_bench(warm_up=False), 5e-3, "no warm-up"),
    (good_bench(flush=False), 5e-3, "without the cache flushed"),
    (good_bench(synchronise=False), 5e-3, "before synchronising"),
    (good_bench(ms=0.004), 4e-6, "outside the device timer's readings"),  # a host clock's reading
    (good_bench(), 5.0, "not do_bench's milliseconds / 1000"),
], ids=["no warm-up", "no flush", "no synchronisation", "not the device's time", "milliseconds as seconds"])
def test_the_checks_refuse_each_wrong_timing_in_a_log(bench, seconds, reason):
    """The checks, on logs written by hand; the test above runs them on the lesson's cells and on wrong timings."""
    assert timing_problems([good_bench()], [5e-3]) == []
    problems = timing_problems([bench], [seconds])
    assert len(problems) == 1 and reason in problems[0], problems


def test_the_stand_in_events_answer_as_cuda_events_do():
    """Read before the device reaches them, their time is an error; after a synchronisation, milliseconds of the
    device's own timer; and a name the stand-in lacks says where to add it."""
    names: dict = {}
    exec(compile(STAND_IN_DEVICE, "stand-in", "exec"), names)
    device = names["StandInDeviceInterface"]()
    start, end = device.Event(enable_timing=True), device.Event(enable_timing=True)
    start.record()
    end.record()
    with pytest.raises(RuntimeError, match="cudaErrorNotReady"):
        start.elapsed_time(end)
    device.synchronize()
    assert start.elapsed_time(end) >= 0 and names["LOG"][-1][:3] == ["elapsed", start.id, end.id]
    with pytest.raises(AttributeError, match="add it to STAND_IN_DEVICE"):
        names["StandInDriver"]().get_current_stream()


def story(marker: str, namespace: dict) -> str:
    names = {"NO_GPU": "no GPU here", "glue": glue, **namespace}
    exec(compile(the_cell(marker), marker, "exec"), names)
    return getattr(glued, marker.split('"')[1])


# (Triton's seconds, torch's seconds, the comparison, what the softmax story goes on to say)
OUTCOMES = [
    (100e-6, 200e-6, "2.00 times faster than", "beat a library kernel here"),
    (100e-6, 102e-6, "about as fast as", "matching it is already a good result"),
    (200e-6, 100e-6, "2.00 times slower than", "Triton's softmax tutorial tunes both"),
]


@pytest.mark.parametrize(("triton_s", "torch_s", "compared", "verdict"), OUTCOMES,
                         ids=["faster", "about the same", "slower"])
def test_the_stories_follow_the_measurement(triton_s, torch_s, compared, verdict):
    add = story('glue("add_story"', {"triton": True, "gpu": True, "k": 2**26,
                                      "add_times": {"Triton add": triton_s, "torch.add": torch_s}})
    assert add == (f"On 67,108,864 float32 values the Triton kernel took {triton_s * 1e6:.0f} µs of GPU time and "
                   f"`torch.add` {torch_s * 1e6:.0f} µs: it was {compared} PyTorch's kernel.")
    softmax = story('glue("softmax_story"', {"triton": True, "gpu": True, "rows": 16384, "cols": 4000,
                                              "softmax_times": {"Triton": triton_s, "torch": torch_s},
                                              "speed_phrase": speed_phrase})
    assert softmax.startswith(f"On 16,384 rows of 4,000 values the fused Triton softmax took {triton_s * 1e6:.0f} "
                              f"µs of GPU time and `torch.softmax` {torch_s * 1e6:.0f} µs: it was {compared} "
                              "PyTorch's kernel")
    assert verdict in softmax
    others = [v for _, _, _, v in OUTCOMES if v != verdict]
    assert not any(other in softmax for other in others)


def test_without_a_gpu_the_stories_say_there_is_no_timing():
    for marker in ('glue("add_story"', 'glue("softmax_story"'):
        assert story(marker, {"triton": True, "gpu": False, "speed_phrase": None}) == "no GPU here"


def test_the_prose_after_the_softmax_story_holds_for_every_outcome():
    nb = nbformat.read(LESSON, as_version=4)
    after = next(cell.source for cell in nb.cells
                 if cell.cell_type == "markdown" and "{eval}`glued.softmax_story`" in cell.source)
    sentence = after.split("{eval}`glued.softmax_story`", 1)[1].split("\n\n")[0]
    for claim in ("matching it is already a good result", "slower", "faster than"):
        assert claim not in sentence, f"the prose after the story says {claim!r} whatever was measured"


if __name__ == "__main__":  # pragma: no cover - a convenience for running the file alone
    sys.exit(pytest.main([os.fspath(__file__), "-q"]))
