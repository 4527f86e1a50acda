"""What each lesson's tests cost a `make test`, in core-seconds, read from the test ids and each test's measured
cost (conftest.py measures every test, setup to teardown, and writes the table this module makes to
``_build/test-costs.md``; `make bench` prints it).

A test belongs to a lesson when it is:

- one of the lesson's cells under nbval (``notebooks/NN-name.ipynb::Cell 3``): "nbval";
- the lesson's thin-kernel run (``tests/lessons/test_thin_kernel.py::...[...NN-name.ipynb...]``): "thin kernel";
- a check of one of the lesson's exercises (``test_every_exercise.py::...[ex-label]`` and the other tests of the
  ``tests/exercises/test_<chapter>.py`` whose checks the lesson calls): "exercises";
- a test under ``tests/lessons/`` whose file names this lesson's notebook and no other's, or, in a file of several
  lessons, that :func:`lesson_of_test` finds this lesson's: "lesson tests" (its GPU paths run on the CPU, its
  predictions, its cells in child Pythons).

Everything else is "the rest", by folder: the book's pages, the site and the hub, the Slurm templates, gpukit's
and booktools' unit tests. A lesson's cost is what adding one like it adds to `make test`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

KINDS = ("nbval", "thin kernel", "exercises", "lesson tests")


def lesson_of_file(text: str, lessons: Iterable[str]) -> str | None:
    """The one lesson (a notebook's stem, "09-writing-kernels") a test file's text names, or None where it names
    none or several."""
    named = {stem for stem in lessons if stem in text}
    return named.pop() if len(named) == 1 else None


def lesson_of_test(nodeid: str, lessons: Iterable[str]) -> str | None:
    """The one lesson (a notebook's stem) that a test of a file about several lessons is about: the lesson its
    parameters name (``test_predictions.py::test_x[09-writing-kernels/h100]``), or whose topic its name begins with
    (``test_writing_kernels_...``); None where that is none or several."""
    name, _, params = nodeid.partition("::")[2].partition("[")
    named = {stem for stem in lessons if stem in params or name.startswith(f"test_{stem[3:].replace('-', '_')}_")}
    return named.pop() if len(named) == 1 else None


def attribute(nodeid: str, lessons: Mapping[str, set[str]], chapters: Mapping[str, set[str]],
              lesson_files: Mapping[str, str | None]) -> tuple[str, str]:
    """(lesson or folder, kind) for the test ``nodeid``. ``lessons`` maps each lesson's stem to its exercise labels,
    ``chapters`` each stem to the exercise chapters its labels belong to, ``lesson_files`` each file of
    tests/lessons/ to :func:`lesson_of_file`'s answer."""
    path, _, rest = nodeid.partition("::")
    parts = Path(path).parts
    if parts[:1] == ("notebooks",):
        return Path(path).stem, "nbval"
    if path == "tests/lessons/test_thin_kernel.py":
        found = [stem for stem in lessons if f"[{stem}.ipynb]" in rest]
        if len(found) == 1:
            return found[0], "thin kernel"
    if path == "tests/exercises/test_every_exercise.py":
        found = [stem for stem, labels in lessons.items() if any(rest.endswith(f"[{label}]") for label in labels)]
        if len(found) == 1:
            return found[0], "exercises"
    if parts[:2] == ("tests", "exercises") and Path(path).name.startswith("test_"):
        chapter = Path(path).stem.removeprefix("test_")
        found = [stem for stem, names in chapters.items() if chapter in names]
        if len(found) == 1:
            return found[0], "exercises"
    if parts[:2] == ("tests", "lessons"):
        lesson = lesson_files.get(Path(path).name) or lesson_of_test(nodeid, lessons)
        if lesson:
            return lesson, "lesson tests"
    return "/".join(parts[:2]) if len(parts) > 2 else path, "the rest"


def cost_table(costs: Mapping[str, float], lessons: Mapping[str, set[str]], chapters: Mapping[str, set[str]],
               lesson_files: Mapping[str, str | None]) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Core-seconds by lesson and kind, and the rest by folder, from ``costs`` (core-seconds by test id)."""
    by_lesson: dict[str, dict[str, float]] = {stem: dict.fromkeys(KINDS, 0.0) for stem in lessons}
    rest: dict[str, float] = defaultdict(float)
    for nodeid, seconds in costs.items():
        where, kind = attribute(nodeid, lessons, chapters, lesson_files)
        if kind == "the rest":
            rest[where] += seconds
        else:
            by_lesson.setdefault(where, dict.fromkeys(KINDS, 0.0))[kind] += seconds
    return by_lesson, dict(sorted(rest.items(), key=lambda kv: -kv[1]))


def markdown(by_lesson: Mapping[str, Mapping[str, float]], rest: Mapping[str, float],
             costliest: Mapping[str, float] | None = None) -> str:
    """The table `make bench` prints: each lesson's tests by kind, then the rest by folder, then the total, and
    ``costliest`` (core-seconds by test), where a next cut would pay."""
    lines = ["| lesson | " + " | ".join(KINDS) + " | total |", "| --- |" + " ---: |" * (len(KINDS) + 1)]
    for stem in sorted(by_lesson):
        kinds = by_lesson[stem]
        lines.append(f"| {stem} | " + " | ".join(f"{kinds[k]:.0f}" for k in KINDS)
                     + f" | {sum(kinds.values()):.0f} |")
    lessons_total = sum(sum(kinds.values()) for kinds in by_lesson.values())
    lines += ["", "| the rest | core-seconds |", "| --- | ---: |"]
    lines += [f"| {folder} | {seconds:.0f} |" for folder, seconds in rest.items()]
    everything = lessons_total + sum(rest.values())
    lines += ["", f"The lessons' tests: {lessons_total:.0f} core-seconds ({lessons_total / len(by_lesson):.0f} a "
                  f"lesson on average); the rest: {sum(rest.values()):.0f}; all: {everything:.0f}."
              if by_lesson else f"All: {everything:.0f} core-seconds."]
    if costliest:
        lines += ["", "| the costliest tests | core-seconds |", "| --- | ---: |"]
        lines += [f"| `{test}` | {seconds:.1f} |" for test, seconds in costliest.items()]
        lines += ["", "A lesson's kernel is counted where it ends: its last cell under nbval carries the whole "
                      "lesson's kernel, and the first test to use a fixture (a browser, a site) carries the fixture."]
    return "\n".join(lines) + "\n"


def costliest(costs: Mapping[str, float], count: int = 25) -> dict[str, float]:
    """The ``count`` tests that cost the most, costliest first."""
    return dict(sorted(costs.items(), key=lambda kv: -kv[1])[:count])
