"""Planted device mistakes: every exercise whose learner writes device code has, among its wrong answers, at least
one mistake of the device that a CPU alone would not show (a missing .to(device), a result left on the device, a
clock stopped without synchronising, a host-side tensor inside device code...), and its check rejects it on the
CPU too: it runs the answer where the mistake shows (PyTorch's meta device, a stand-in that records copies or
waits, a simulator).

Each chapter's cases module (tests/exercises/cases/<chapter>.py) names them in ``DEVICE_MISTAKES``: ``{"<exercise
label>": {"<the wrong answer's __name__>": "the mistake in a learner's words", ...}, ...}``, a wrong answer of its
``WRONG_ANSWERS[label]`` each (a factory's answer or a value gets its name with ``tests.exercises.cases.named``).

Whether a planted mistake was rejected is read from what test_every_exercise's wrong-answer test kept for this run
(it checks every wrong answer anyway); where it has not run (this file alone, or `make check`, which leaves some of
its costly exercises out) the planted mistakes alone are checked here. The test writes
_build/planted-mistakes.md: each lesson's device-code exercises, their planted mistakes, and how many of them the
check rejects on this machine.
"""

from __future__ import annotations

import functools
import json
import re

import pytest

import conftest
from gpukit.exercises import EXERCISES, check
from tests.exercises.cases import name_of
from tests.exercises.test_every_exercise import (  # noqa: F401 - on_the_cpu: the same autouse fixture as there
    CASE_MODULES,
    NEEDS_THE_REPORTED_GPU,
    WARNED_BY_WRONG_ANSWERS,
    each_exercise,
    kept_verdicts,
    on_the_cpu,
    skip_where_the_reported_gpu_cannot_work,
    solution,
    wrong_answers,
)
from tests.support.booktoc import ROOT

REPORT = ROOT / "_build" / "planted-mistakes.md"

DEVICE_CODE = sorted(label for label, exercise in EXERCISES.items() if exercise.writes == "device code")


def module_of(label):
    """The cases module that holds ``label``'s wrong answers."""
    for cases in CASE_MODULES:
        if label in cases.WRONG_ANSWERS:
            return cases
    raise AssertionError(f"no wrong answers written for {label}")


def planted(label) -> dict[str, str]:
    """``label``'s planted device mistakes, by name, from whichever cases module names them."""
    return getattr(module_of(label), "DEVICE_MISTAKES", {}).get(label, {})


def chapter(cases) -> str:
    return cases.__name__.rsplit(".", 1)[-1]


@functools.cache
def lesson_of() -> dict[str, str]:
    """Each exercise label's lesson (its notebook's name)."""
    lessons = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        text = "\n".join("".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"])
        lessons.update((label, path.stem) for label in re.findall(r"```\{exercise\}[^\n]*\n:label: (\S+)", text))
    return lessons


def test_each_module_plants_mistakes_in_its_own_device_code_exercises_and_says_what_they_are():
    for cases in CASE_MODULES:
        for label, mistakes in getattr(cases, "DEVICE_MISTAKES", {}).items():
            where = f"cases/{chapter(cases)}.py's DEVICE_MISTAKES[{label!r}]"
            assert label in cases.WRONG_ANSWERS, f"{where}: {label} has no wrong answers in that module"
            assert EXERCISES[label].writes == "device code", f"{where}: {label}'s learner writes no device code"
            assert mistakes, f"{where} names no mistake"
            for name, description in mistakes.items():
                assert isinstance(description, str) and len(description.split()) >= 4, (
                    f"{where}[{name!r}]: say the mistake in a learner's words")


def test_every_device_code_exercise_has_a_planted_device_mistake():
    missing = [f"{label} (cases/{chapter(module_of(label))}.py)" for label in DEVICE_CODE if not planted(label)]
    assert not missing, ("device-code exercises without a planted device mistake in DEVICE_MISTAKES: "
                         + ", ".join(missing))


# Where this run holds no verdict of test_every_exercise's on an exercise (it has not reached it yet, or `make check`
# left it out), its planted mistakes are checked here, unless conftest.py leaves that exercise's wrong-answer test
# out of `make check` (its check starts torchrun, or takes seconds): then their rejection is left to that test,
# which checks every wrong answer, rather than paid for again here, in a test `make check` keeps and watches.
WRONG_ANSWER_TEST = ("tests/exercises/test_every_exercise.py::"
                     "test_wrong_answers_are_rejected_without_giving_the_answer_away[{label}]")


def left_out_of_make_check(label) -> str | None:
    """Why conftest.py leaves ``label``'s wrong-answer test out of `make check`, or None."""
    return conftest.LEFT_OUT_OF_CHECK.get(WRONG_ANSWER_TEST.format(label=label))


# What the checks made of each exercise's planted mistakes in this process: label -> (names, rejected, skipped), for
# the report, which the last test of this file writes.
FOUND: dict[str, tuple[list[str], int, str | None]] = {}


# The same warning filters as the wrong-answer test's, for the same answers.
@pytest.mark.parametrize("label", [p for p in each_exercise(WARNED_BY_WRONG_ANSWERS) if planted(p.values[0])])
def test_each_planted_mistake_is_a_wrong_answer_of_its_exercise_and_its_check_rejects_it(label, request):
    names = sorted(planted(label))
    if label in NEEDS_THE_REPORTED_GPU:
        try:
            skip_where_the_reported_gpu_cannot_work(label)
        except pytest.skip.Exception as skipped:
            FOUND[label] = (names, 0, str(skipped))
            raise
    cases = wrong_answers(label)
    by_name: dict[str, list] = {}
    for wrong, _ in cases:
        by_name.setdefault(name_of(wrong), []).append(wrong)
    where = f"cases/{chapter(module_of(label))}.py"
    for name in names:
        assert name in by_name, f"{where}: DEVICE_MISTAKES names {name!r}, which is no wrong answer of {label}"
        assert len(by_name[name]) == 1, f"{where}: {len(by_name[name])} wrong answers of {label} are named {name!r}"
    verdicts = kept_verdicts(label, request.config)
    costly = left_out_of_make_check(label)
    if (verdicts is None or not set(names) <= set(verdicts)) and costly:
        FOUND[label] = (names, 0, f"left to test_every_exercise ({costly})")
        pytest.skip(f"{label}: this run has no verdict of test_every_exercise's wrong-answer test on it, which checks "
                    f"it ({costly})")
    if verdicts is None or not set(names) <= set(verdicts):
        _, context = solution(label)
        verdicts = {}
        for name in names:
            result = check(label, by_name[name][0], **context)
            verdicts[name] = [not result, result.message]
    accepted = [f"{name} ({verdicts[name][1]})" for name in names if not verdicts[name][0]]
    FOUND[label] = (names, len(names) - len(accepted), None)
    assert not accepted, f"{label}: the check accepts planted device mistakes: " + "; ".join(accepted)


def test_the_report_says_per_lesson_what_is_planted_and_rejected():
    """Written last in this file: from what the tests above found in this process (a label they did not check here
    is said to be so)."""
    rows = []
    for label in sorted(DEVICE_CODE, key=lambda label: (lesson_of().get(label, "~"), label)):
        names, rejected, skipped = FOUND.get(label, (sorted(planted(label)), None, None))
        if not names:
            shown, verdict = "none", "-"
        else:
            shown = ", ".join(f"`{name}`" for name in names)
            verdict = (f"skipped: {skipped}" if skipped else "not checked in this run" if rejected is None
                       else f"{rejected} of {len(names)}")
        rows.append(f"| {lesson_of().get(label, '?')} | {label} | {shown} | {verdict} |")
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text("| lesson | exercise | planted device mistakes | rejected by the check here |\n"
                      "|---|---|---|---|\n" + "\n".join(rows) + "\n", encoding="utf-8")
    assert len(rows) == len(DEVICE_CODE)
