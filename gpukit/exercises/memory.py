"""Chapter 6, VRAM and device errors: what its exercises expect, and how a wrong answer is told apart.

Two exercises take the learner's function and run it on the lesson's device against an allocator stand-in: the
check replaces ``torch.cdist`` (or hands over a work function of its own) with one that raises PyTorch's real
``torch.OutOfMemoryError`` when a call would need more than a budget of bytes, and records every call. The
learner's code cannot tell the stand-in from a GPU that is full, and the check can see how it reacted.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from gpukit.base.errors import error_line
from gpukit.core.device import mps_available

from .checking import Exercise, compare, register

EXACT = "donot_use_mm_for_euclid_dist"  # each distance by its definition: the same whatever the slice


# ------------------------------------------------------------------ ex-mem-chunk-rows: estimate, then slice
# Each trial: number of points, of centres, dtype, and the budget in bytes for one distance matrix. The float64
# trial catches an estimate that assumed 4 bytes per value.
_NEAREST_TRIALS = ((5000, 700, "float32", 2**20), (3001, 350, "float64", 2**20))


def _nearest_inputs(device, trial):
    import torch

    n, m, dtype, _ = trial
    generator = torch.Generator().manual_seed(n + m)
    points = torch.rand(n, 3, generator=generator, dtype=getattr(torch, dtype))
    centres = torch.rand(m, 3, generator=generator, dtype=getattr(torch, dtype))
    return points.to(device), centres.to(device)


def _nearest_reference(points, centres):
    import torch

    return torch.cdist(points, centres, compute_mode=EXACT).min(dim=1).values


def _nearest_expected(device):
    """The last trial's distances on the CPU: ``result`` runs the learner's function there; the method has checked
    the output on ``device``."""
    return _nearest_reference(*_nearest_inputs("cpu", _NEAREST_TRIALS[-1]))


class _Budgeted:
    """A stand-in for ``torch.cdist``: the real distances (computed exactly), or ``torch.OutOfMemoryError`` when
    the distance matrix asked for would take more than ``budget`` bytes. It records the rows of every call."""

    def __init__(self, real, budget):
        self.real, self.budget, self.rows = real, budget, []

    def __call__(self, x1, x2, *args, **kwargs):
        import torch

        rows, cols = x1.shape[-2], x2.shape[-2]
        self.rows.append(rows)
        need = rows * cols * x1.element_size()
        if need > self.budget:
            raise torch.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {need:,} bytes for a {rows} x {cols} distance matrix; "
                f"the budget is {self.budget:,} bytes.")
        return self.real(x1, x2, compute_mode=EXACT)


@contextmanager
def _cdist_replaced_by(stand_in):
    import torch

    real = torch.cdist
    torch.cdist = stand_in
    try:
        yield
    finally:
        torch.cdist = real


def _run_nearest(answer, device, trial):
    """Run the learner's function on one trial under the budget; return (output, rows of each cdist call) or the
    message that says what went wrong."""
    import torch

    points, centres = _nearest_inputs(device, trial)
    stand_in = _Budgeted(torch.cdist, trial[3])
    with _cdist_replaced_by(stand_in):
        try:
            out = answer(points, centres, trial[3])
        except torch.OutOfMemoryError:
            largest = max(stand_in.rows)
            return (f"with {len(centres)} centres in {trial[2]} and a budget of {trial[3]:,} bytes, a slice of "
                    f"{largest} rows asked cdist for {largest * len(centres) * points.element_size():,} bytes: "
                    "more than the budget. Work out the rows that fit from the bytes of one row of the distance "
                    "matrix (one value per centre, at the bytes of the points' dtype), and round down.")
        except Exception as error:  # the learner's code: any error is the answer to report
            return f"on {len(points)} points your function raised {error_line(error)}"
    if out is None:
        return "your function returned None: return the distances, one per point, as one tensor."
    if not stand_in.rows:
        return "your function never called torch.cdist: compute each slice's distances with it, as the script does."
    return out, stand_in.rows


def _slices_within_the_budget(answer, device) -> str | None:
    if not callable(answer):
        return (f"expected your function itself (nearest_within), got {type(answer).__name__}: pass the function, "
                "not its result.")
    for trial in _NEAREST_TRIALS:
        run = _run_nearest(answer, device, trial)
        if isinstance(run, str):
            return run
        out, rows = run
        n, m, dtype, budget = trial
        fits = budget // (m * np.dtype(dtype).itemsize)
        if max(rows) < fits // 2:
            return (f"with {m} centres in {dtype} and a budget of {budget:,} bytes your slices had at most "
                    f"{max(rows)} rows, less than half of what fits: take the largest number of rows that fits "
                    "(fewer, larger slices run faster).")
        points, centres = _nearest_inputs(device, trial)
        verdict = compare(out, _nearest_reference(points, centres), rtol=1e-6)
        if not verdict:
            return f"on {n} points in {dtype}: {verdict.message}"
    return None


def _nearest_on_the_last_trial(answer):
    """The learner's output for the last trial, on the CPU (the method has run it on the device already)."""
    import torch

    points, centres = _nearest_inputs("cpu", _NEAREST_TRIALS[-1])
    with _cdist_replaced_by(_Budgeted(torch.cdist, _NEAREST_TRIALS[-1][3])):
        return answer(points, centres, _NEAREST_TRIALS[-1][3])


# ------------------------------------------------------------------ ex-mem-halve-on-oom: the halving loop
# Each trial: rows, the most rows one call of f may take without running out of memory, and min_rows.
_HALVING_TRIALS = ((1000, 130, 1), (777, 100, 8))
_GIVE_UP = (1000, 0, 16)  # nothing ever fits: the loop must stop at min_rows and raise
_MOST_CALLS = 100  # a loop that calls f more often than this never stops


class _NeverStops(BaseException):
    """Raised by the stand-in f when the loop has called it too often. Not an Exception, so that a loop that
    catches every Exception cannot swallow it."""


class _Recorder:
    """The stand-in work: f(rows) is the sum of each row (row i of the input holds the number i in each column),
    or ``torch.OutOfMemoryError`` when given more than ``fits`` rows. Every call and every emptying of PyTorch's
    cache is logged, in order."""

    def __init__(self, fits, other_error=None):
        self.fits, self.other_error, self.log = fits, other_error, []

    def f(self, rows):
        import torch

        n = len(rows)
        start = int(rows[0, 0]) if n else None
        if len([e for e in self.log if e[0] == "call"]) >= _MOST_CALLS:
            raise _NeverStops()
        if self.other_error is not None:
            self.log.append(("call", start, n, "error"))
            raise self.other_error
        if n > self.fits:
            self.log.append(("call", start, n, "out of memory"))
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {n * 2**20:,} bytes "
                                         f"({n} rows of 1 MiB).")
        self.log.append(("call", start, n, "ok"))
        return rows.sum(dim=1)

    def emptied(self):
        self.log.append(("empty",))


def _halving_input(total, device):
    import torch

    return torch.arange(total, dtype=torch.float32).repeat_interleave(4).reshape(total, 4).to(device)


@contextmanager
def _cache_emptying_logged(recorder):
    """torch.cuda.empty_cache and torch.mps.empty_cache, logged to ``recorder`` (and still run where they can)."""
    import torch

    real_cuda, real_mps = torch.cuda.empty_cache, torch.mps.empty_cache

    def cuda_empty_cache():
        recorder.emptied()
        real_cuda()

    def mps_empty_cache():
        recorder.emptied()
        if mps_available():
            real_mps()

    torch.cuda.empty_cache, torch.mps.empty_cache = cuda_empty_cache, mps_empty_cache
    try:
        yield
    finally:
        torch.cuda.empty_cache, torch.mps.empty_cache = real_cuda, real_mps


def _run_halving(answer, device, total, recorder, min_rows):
    """(output, error) of the learner's function on ``total`` rows: one of them is None."""
    x = _halving_input(total, device)
    with _cache_emptying_logged(recorder):
        try:
            return answer(recorder.f, x, min_rows), None
        except _NeverStops:
            return None, _NeverStops()
        except Exception as error:  # the learner's code: whatever it raised is the answer to judge
            return None, error


def _calls(log):
    return [entry for entry in log if entry[0] == "call"]


def _how_it_halved(log, total, min_rows, error) -> str | None:
    """What is wrong with the order of the calls: the whole batch first, then after each out-of-memory error the
    cache emptied and the same slice tried again with half the rows, never fewer than ``min_rows``."""
    import torch

    calls = _calls(log)
    if not calls:
        return "your function never called f: call it on slices of x."
    if calls[0][1:3] != (0, total):
        return (f"your first call of f had {calls[0][2]} rows starting at row {calls[0][1]}: try the whole batch "
                f"({total} rows) first, and make it smaller only when it does not fit.")
    for i, entry in enumerate(log):
        if entry[0] != "call" or entry[3] != "out of memory":
            continue
        _, start, size, _ = entry
        later = log[i + 1:]
        following = next((e for e in later if e[0] == "call"), None)
        if following is None:
            if isinstance(error, torch.OutOfMemoryError):
                return (f"your function let the out-of-memory error with {size} rows escape: catch "
                        "torch.OutOfMemoryError, halve the slice and try again.")
            return (f"after running out of memory on the slice starting at row {start} you never tried the same "
                    "slice again: its rows are lost.")
        if ("empty",) not in later[:later.index(following)]:
            return (f"after running out of memory with {size} rows you tried again without emptying PyTorch's "
                    "cache: call torch.cuda.empty_cache() before the next try, so that the cached blocks go back.")
        _, next_start, next_size, _ = following
        if next_start != start:
            return (f"after running out of memory on the slice starting at row {start} your next try started at "
                    f"row {next_start}: try the same slice again, smaller, or its rows are lost.")
        if next_size not in (size // 2, -(-size // 2)):
            return (f"after running out of memory with {size} rows your next try had {next_size}: halve the "
                    "slice (size // 2).")
    # The last slice may be short because the rows run out; any other must have at least min_rows.
    sizes = [size for _, start, size, _ in calls if start is None or start + size < total]
    if sizes and min(sizes) < min_rows:
        return f"your loop tried a slice of {min(sizes)} rows, fewer than min_rows={min_rows}: stop before that."
    return None


def _is_a_halving_loop(answer, device) -> str | None:
    if not callable(answer):
        return (f"expected your function itself (in_chunks), got {type(answer).__name__}: pass the function, not "
                "its result.")
    for total, fits, min_rows in _HALVING_TRIALS:
        recorder = _Recorder(fits)
        out, error = _run_halving(answer, device, total, recorder, min_rows)
        wrong = _how_it_halved(recorder.log, total, min_rows, error)
        if wrong:
            return f"on {total} rows, of which {fits} fit at once: {wrong}"
        if isinstance(error, _NeverStops):
            return (f"your loop called f {_MOST_CALLS} times on {total} rows and had not finished: it never stops "
                    "(does the start move on after a slice succeeds? does the size reach 0?).")
        if error is not None:
            return f"on {total} rows, of which {fits} fit at once, your function raised {error_line(error)}"
        if out is None:
            return "your function returned None: return the results of all the slices, joined with torch.cat."
        expected = _halving_input(total, device).sum(dim=1)
        verdict = compare(out, expected, rtol=0.0)
        if not verdict:
            return (f"on {total} rows, of which {fits} fit at once, the joined result is wrong (lost, repeated or "
                    f"reordered rows?): {verdict.message}")

    total, fits, min_rows = _GIVE_UP
    recorder = _Recorder(fits)
    out, error = _run_halving(answer, device, total, recorder, min_rows)
    if isinstance(error, _NeverStops):
        return (f"when nothing fits, your loop called f {_MOST_CALLS} times: it never stops. Give up (raise) "
                "once half the slice would have fewer than min_rows rows.")
    if error is None:
        return ("when not even the smallest slice fits, your function returned instead of raising: re-raise the "
                "out-of-memory error once half the slice would have fewer than min_rows rows.")
    smallest = min(size for _, _, size, _ in _calls(recorder.log))
    if smallest < min_rows:
        return (f"when nothing fits, your loop went down to slices of {smallest} rows, below min_rows={min_rows}: "
                "stop halving before that.")
    if smallest >= 2 * min_rows:
        return (f"when nothing fits, your loop gave up at slices of {smallest} rows, though halving once more would "
                f"still have left at least min_rows={min_rows}: halve while size // 2 >= min_rows.")

    recorder = _Recorder(10**9, other_error=ValueError("not an out-of-memory error"))
    out, error = _run_halving(answer, device, 100, recorder, 1)
    tries = len(_calls(recorder.log))
    if not isinstance(error, ValueError) or tries != 1:
        what = "returned" if error is None else f"raised {type(error).__name__}"
        return (f"when f raised a ValueError (not an out-of-memory error), your function tried {tries} time(s) and "
                f"{what}: catch torch.OutOfMemoryError only, and let every other error through at once.")
    return None


def _halving_on_the_last_trial(answer):
    """The learner's output for the last trial, on the CPU (the method has run it on the device already)."""
    total, fits, min_rows = _HALVING_TRIALS[-1]
    recorder = _Recorder(fits)
    with _cache_emptying_logged(recorder):
        return answer(recorder.f, _halving_input(total, "cpu"), min_rows)


def _halving_expected(device):
    """The last trial's row sums on the CPU, where ``result`` runs the learner's function; the method has checked
    the output on ``device``."""
    return _halving_input(_HALVING_TRIALS[-1][0], "cpu").sum(dim=1)


register(
    Exercise("ex-mem-tensor-bytes", lambda: 2048 * 2048 * 16 * np.dtype("complex64").itemsize, writes="a number"),
    Exercise("ex-mem-chunk-rows", _nearest_expected, needs=("device",), rtol=1e-6,
             method=_slices_within_the_budget, result=_nearest_on_the_last_trial,
             writes="device code"),
    Exercise("ex-mem-halve-on-oom", _halving_expected, needs=("device",), rtol=0.0,
             method=_is_a_halving_loop, result=_halving_on_the_last_trial,
             writes="device code"),
)
