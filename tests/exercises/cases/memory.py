"""Chapter 6 (VRAM and device errors): each exercise's solution, and wrong answers with a word the check's
message must contain.

The two code exercises run on the device the tests pick (the CPU here, the GPU on a GPU runner), against the
check's allocator stand-in; the wrong answers are the classic mistakes of the estimate (bytes per value
forgotten or assumed, rounded up, the wrong count) and of the halving loop (no halving, no stop, rows lost or
repeated, every error caught, the cache never emptied)."""

import torch

from gpukit.core.device import pick_device
from tests.exercises.cases import named


def device():
    return pick_device()


# ---------------------------------------------------------------------------------------- ex-mem-chunk-rows
def nearest_within(points, centres, budget):
    """The lesson's solution: the rows whose distance matrix fits in the budget, then slices of that many."""
    row_bytes = len(centres) * points.element_size()
    rows = max(budget // row_bytes, 1)
    pieces = [torch.cdist(points[start:start + rows], centres).min(dim=1).values
              for start in range(0, len(points), rows)]
    return torch.cat(pieces)


def nearest_with_rows(rule, tail=True):
    """nearest_within with another rule for the rows of a slice (``tail=False`` drops the last, partial slice)."""
    def nearest(points, centres, budget):
        rows = rule(points, centres, budget)
        stop = len(points) if tail else len(points) - len(points) % rows
        return torch.cat([torch.cdist(points[s:s + rows], centres).min(dim=1).values for s in range(0, stop, rows)])

    return nearest


def nearest_wrong_answers():
    return [
        # Bytes per value forgotten: four (or eight) times too many rows.
        (nearest_with_rows(lambda p, c, b: b // len(c)), "more than the budget"),
        # Rounded up: one row too many.
        (nearest_with_rows(lambda p, c, b: b // (len(c) * p.element_size()) + 1), "more than the budget"),
        # Four bytes assumed: right for float32, twice too many rows in float64.
        (nearest_with_rows(lambda p, c, b: b // (len(c) * 4)), "float64"),
        # The points counted instead of the centres: slices far smaller than what fits.
        (nearest_with_rows(lambda p, c, b: max(b // (len(p) * p.element_size()), 1)), "less than half"),
        # The last, partial slice left out: rows lost.
        (nearest_with_rows(lambda p, c, b: b // (len(c) * p.element_size()), tail=False), "shape is"),
        # All the points at once: the estimate skipped.
        (named("all_points_at_once", lambda p, c, b: torch.cdist(p, c).min(dim=1).values), "more than the budget"),
        # The distances without cdist: the budget never consulted.
        (lambda p, c, b: (p[:, None, :] - c[None, :, :]).norm(dim=-1).min(dim=1).values, "never called"),
        # The result, not the function.
        (torch.zeros(3), "expected your function itself"),
    ]


# -------------------------------------------------------------------------------------- ex-mem-halve-on-oom
def in_chunks(f, x, min_rows):
    """The lesson's solution: the whole batch first; on running out of memory, halve, empty the cache, retry."""
    size, start, pieces = len(x), 0, []
    while start < len(x):
        try:
            pieces.append(f(x[start:start + size]))
            start += size
            continue
        except torch.OutOfMemoryError:
            if size // 2 < min_rows:
                raise
        size //= 2
        torch.cuda.empty_cache()
    return torch.cat(pieces)


def loop(*, halve=lambda size: size // 2, first=None, empty=True, catch=(torch.OutOfMemoryError,), stop=True,
         skip_failed=False, advance=lambda size: size):
    """in_chunks with one thing changed: how it shrinks, where it starts, what it catches, whether it stops..."""
    def in_chunks(f, x, min_rows):
        size, start, pieces = first or len(x), 0, []
        while start < len(x):
            try:
                pieces.append(f(x[start:start + size]))
                start += advance(size)
                continue
            except catch:
                if stop and halve(size) < min_rows:
                    raise
                if skip_failed:
                    start += size
            size = halve(size)
            if empty:
                torch.cuda.empty_cache()
        return torch.cat(pieces)

    return in_chunks


def halving_wrong_answers():
    return [
        (loop(halve=lambda size: size - 1), "halve the slice"),  # shrinks by one row
        (loop(halve=lambda size: size // 10), "halve the slice"),  # shrinks tenfold
        (loop(first=64), "try the whole batch"),  # a fixed first chunk
        (named("halving_without_emptying_the_cache", loop(empty=False)), "without emptying"),  # the cache kept
        (loop(stop=False), "never"),  # halves down to 0 and loops on empty slices
        (loop(skip_failed=True), "the same slice again"),  # the failed slice's rows are lost
        (loop(advance=lambda size: size - 1), "lost, repeated or reordered"),  # each slice's last row repeated
        (loop(catch=(Exception,)), "ValueError"),  # every error taken for running out of memory
        (lambda f, x, min_rows: f(x), "let the out-of-memory error"),  # no loop at all
        (in_chunks(lambda rows: rows, torch.zeros(4, 2), 1), "expected your function itself"),
    ]


def stops_too_early(f, x, min_rows):
    """Gives up at twice min_rows: halving once more would still have been allowed."""
    return loop(halve=lambda size: size // 2 if size // 2 >= 2 * min_rows else 0)(f, x, min_rows)


def halving_wrong_answers_with_early_stop():
    return [*halving_wrong_answers(), (stops_too_early, "gave up")]


SOLUTIONS = {
    "ex-mem-tensor-bytes": lambda: (2048 * 2048 * 16 * torch.complex64.itemsize, {}),
    "ex-mem-chunk-rows": lambda: (nearest_within, {"device": device()}),
    "ex-mem-halve-on-oom": lambda: (in_chunks, {"device": device()}),
}

WRONG_ANSWERS = {
    "ex-mem-tensor-bytes": lambda: [
        (2048 * 2048 * 16 * 4, "too small"),  # four bytes, as if float32
        (2048 * 2048 * 16 * 16, "too large"),  # complex128
        ("512 MiB", "expected a number"),
        (torch.zeros(2048, 16, dtype=torch.complex64), "expected a number"),
    ],
    "ex-mem-chunk-rows": nearest_wrong_answers,
    "ex-mem-halve-on-oom": halving_wrong_answers_with_early_stop,
}


# The planted device mistakes (tests/exercises/test_planted_device_mistakes.py): here mistakes of the device's memory,
# which the checks' allocator stand-in shows on the CPU.
DEVICE_MISTAKES = {
    "ex-mem-chunk-rows": {
        "all_points_at_once": "made the whole distance matrix at once: more memory than the device's budget holds",
    },
    "ex-mem-halve-on-oom": {
        "halving_without_emptying_the_cache": "retried after an out-of-memory error without "
                                              "torch.cuda.empty_cache(): the caching allocator keeps the failed "
                                              "try's blocks, and the smaller slice can fail too",
    },
}
