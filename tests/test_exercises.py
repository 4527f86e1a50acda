"""Every exercise's solution passes its check, and wrong answers are rejected with a message that names
what is wrong without giving the expected value away."""

import importlib
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from gpukit.device import pick_device
from gpukit.exercises import EXERCISES, check, checking, compare
from gpukit.random_streams import first_draws, jumped_generators, spawned_generators

# Later chapters keep their cases in tests/exercise_cases_<topic>.py: SOLUTIONS maps a label to a function
# returning (answer, context), WRONG_ANSWERS maps it to a function returning [(wrong answer, word the
# message must contain), ...].
CASE_MODULES = [importlib.import_module(p.stem) for p in sorted(Path(__file__).parent.glob("exercise_cases_*.py"))]

# The run's values some exercises are computed from: a stand-in for the lesson's cross-validation errors.
SERIAL_ERRORS = np.random.default_rng(0).random((8, 5))


def dask_mean_graph(errors):
    dask = pytest.importorskip("dask")
    per_fold = [dask.delayed(lambda row: row)(row) for row in errors]
    return dask.delayed(np.mean)(per_fold, axis=0)


def solution(label):
    """Each exercise's answer, worked out here as the lesson's solution does it."""
    if label == "ex-env-batch-bytes":
        return 64 * 3 * 224 * 224 * 2, {}
    if label == "ex-env-zeros-on-device":
        return torch.zeros(2, 3, dtype=torch.float32, device=pick_device()), {}
    if label == "ex-cpu-gpu-matmul-flops":
        return 2 * 3000**3, {}
    if label == "ex-cpu-gpu-transfer-share":
        return 180 / 250, {}
    if label == "ex-cpu-gpu-ew-bytes":
        return 80_000_000, {}
    if label == "ex-par-torch-threads":
        return torch.get_num_threads(), {}
    if label == "ex-par-dask-mean":
        return dask_mean_graph(SERIAL_ERRORS), {"serial_errors": SERIAL_ERRORS}
    if label == "ex-par-jumped":
        base = np.random.PCG64(2026)
        return first_draws([np.random.Generator(base.jumped(i)) for i in range(4)]), {}
    for cases in CASE_MODULES:
        if label in cases.SOLUTIONS:
            return cases.SOLUTIONS[label]()
    raise AssertionError(f"no solution written for {label}: add one to this test")


def wrong_answers(label):
    """At least two wrong answers per exercise, with a word the message must contain."""
    if label == "ex-env-batch-bytes":
        return [(64 * 3 * 224 * 224 * 4, "too large"), ("a lot", "expected a number")]
    if label == "ex-env-zeros-on-device":
        device = pick_device()
        return [(torch.zeros(3, 2, device=device), "shape is (3, 2)"),
                (torch.zeros(2, 3, dtype=torch.float64, device=device), "dtype is torch.float64"),
                (torch.zeros(2, 3, device="meta"), "on meta"),
                (np.zeros((2, 3), np.float32), "expected a torch array")]
    if label == "ex-cpu-gpu-matmul-flops":
        return [(3000**3, "too small"), ([3000, 3000], "expected a number")]
    if label == "ex-cpu-gpu-transfer-share":
        return [(60 / 130, "too small"), (None, "replace the placeholder")]
    if label == "ex-cpu-gpu-ew-bytes":
        return [(40_000_000, "too small"), (np.zeros(2), "expected a number")]
    if label == "ex-par-torch-threads":
        wrong = torch.get_num_threads() + 1
        return [(wrong, "too large"), ("two", "expected a number")]
    if label == "ex-par-dask-mean":
        dask = pytest.importorskip("dask")
        return [(SERIAL_ERRORS.mean(axis=0), "expected a Dask delayed task"),
                (dask.delayed(SERIAL_ERRORS.mean(axis=0)), "task graph has 1 task"),
                (dask.delayed(np.mean)([dask.delayed(r) for r in SERIAL_ERRORS], axis=1), "shape is (8,)"),
                (dask.delayed(np.median)([dask.delayed(r) for r in SERIAL_ERRORS], axis=0), "values differ")]
    if label == "ex-par-jumped":
        return [(first_draws(spawned_generators(2026, 4)), "values differ"),
                (first_draws(jumped_generators(2026, 3)), "shape is (3, 4)"),
                (first_draws(jumped_generators(2026, 4)).astype(np.float64), "dtype is float64")]
    for cases in CASE_MODULES:
        if label in cases.WRONG_ANSWERS:
            return cases.WRONG_ANSWERS[label]()
    raise AssertionError(f"no wrong answers written for {label}: add some to this test")


@pytest.mark.parametrize("label", sorted(EXERCISES))
def test_the_solution_passes(label):
    answer, context = solution(label)
    result = check(label, answer, **context)
    assert result, result.message
    assert repr(result).startswith("Correct:")


@pytest.mark.parametrize("label", sorted(EXERCISES))
def test_wrong_answers_are_rejected_without_giving_the_answer_away(label):
    answer, context = solution(label)
    expected = EXERCISES[label].expected(**context)
    cases = wrong_answers(label)
    assert len(cases) >= 2
    for wrong, named in cases:
        result = check(label, wrong, **context)
        assert not result, f"{label}: {wrong!r} was accepted"
        assert named in result.message, f"{label}: {result.message!r} should say {named!r}"
        if not hasattr(expected, "shape"):
            shown = {f"{expected:,}", f"{expected}", f"{expected:.6g}", f"{expected:.2f}"}
            assert not any(re.search(rf"(?<![\d.]){re.escape(s)}(?![\d])", result.message) for s in shown), (
                f"{label}: the message gives the expected value away: {result.message!r}")


def test_an_array_message_shows_the_answers_value_not_the_expected_one():
    expected = np.array([1.25, 2.5, 3.75])
    result = compare(np.array([1.25, 9.5, 3.75]), expected)
    assert not result and "index (1,)" in result.message and "9.5" in result.message
    assert "2.5" not in result.message


def test_placeholder_asks_for_an_answer():
    for label in EXERCISES:
        answer, context = solution(label)
        result = check(label, None, **context)
        assert not result and "replace the placeholder" in result.message


def test_unknown_label_and_missing_context_are_errors_that_say_so():
    with pytest.raises(ValueError, match="no exercise is labelled 'ex-nope'"):
        check("ex-nope", 1)
    with pytest.raises(TypeError, match=r"needs the values \['serial_errors'\]"):
        check("ex-par-dask-mean", 1)
    with pytest.raises(TypeError, match="not expected"):
        check("ex-env-batch-bytes", 1, device="cpu")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_tensors_can_be_checked(dtype):
    expected = torch.arange(4, dtype=dtype)
    assert compare(torch.arange(4, dtype=dtype), expected)
    wrong = compare(torch.arange(4, dtype=dtype) * 2, expected)
    assert not wrong and "values differ" in wrong.message
    assert "dtype is torch.float32" in compare(torch.arange(4, dtype=torch.float32), expected).message


def test_a_cuda_array_is_named_as_being_on_the_wrong_device(monkeypatch):
    """The device comparison on a machine without a GPU: a fake array that says it lives on CUDA."""

    class FakeCudaArray:
        __module__ = "torch"
        shape = (2, 3)
        dtype = torch.float32
        device = torch.device("cuda:0")

    monkeypatch.setattr(checking, "device_kind", lambda a: "cuda" if isinstance(a, FakeCudaArray) else "cpu")
    result = compare(FakeCudaArray(), torch.zeros(2, 3))
    assert not result and "on cuda, expected it on cpu" in result.message


def test_every_exercise_in_the_notebooks_is_registered_and_checked_by_label():
    import json

    labels = set()
    for path in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        text = "\n".join("".join(c["source"]) for c in nb["cells"])
        found = set(re.findall(r"```\{exercise\}[^\n]*\n:label: (\S+)", text))
        for label in found:
            assert f'check("{label}"' in text, f"{path.name}: {label} is not checked with check(\"{label}\", ...)"
        labels |= found
    assert labels == set(EXERCISES)


def test_a_label_cannot_be_registered_twice():
    from gpukit.exercises import Exercise, register

    with pytest.raises(ValueError, match="registered twice"):
        register(Exercise("ex-env-batch-bytes", lambda: 1, writes="a number"))


def test_an_exercise_says_what_the_learner_writes():
    from gpukit.exercises import Exercise, register

    with pytest.raises(ValueError, match="must say what the learner writes"):
        register(Exercise("ex-nowhere", lambda: 1))
    with pytest.raises(ValueError, match="must say what the learner writes"):
        register(Exercise("ex-nowhere", lambda: 1, writes="an essay"))
