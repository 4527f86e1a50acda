"""Where a check works: on the GPU the learner's tensors are on (the lesson chose it, which need not be
pick_device()'s: MPS beside CUDA, cuda:1), else on the lesson's default; and how nbval proves each solution passes
its check (tests/support/lesson_solutions.py's hook, which gpukit itself no longer carries)."""

from types import SimpleNamespace

import pytest
import torch

from gpukit.core import device as dev
from gpukit.exercises import checking
from gpukit.exercises.checking import Exercise, answer_device, keep_output
from tests.support.lesson_solutions import solution_run_source

DEFAULT = "cuda:0"  # what pick_device() says in these tests: a device none of the answers below is on


@pytest.fixture
def default_elsewhere(monkeypatch):
    monkeypatch.setattr(dev, "pick_device", lambda preferred=None: DEFAULT)


def on(kind, index=None):
    """A stand-in for a learner's tensor on a GPU this machine lacks: only its device is read."""
    return SimpleNamespace(device=torch.device(kind, index) if index is not None else torch.device(kind))


@pytest.mark.parametrize(("found", "expected"), [
    ((on("cuda", 1),), "cuda:1"),  # a second GPU: not the default's cuda:0
    ((on("mps", 0),), "mps"),  # MPS beside CUDA
    ((torch.zeros(2), on("cuda", 1)), "cuda:1"),  # the first tensor on a GPU, past one on the host
    ((torch.zeros(2),), DEFAULT),  # left on the host: on a GPU machine that is the mistake to tell
    ((torch.zeros(2, device="meta"),), DEFAULT),
    ((len,), DEFAULT),  # a function carries no device
    ((), DEFAULT),
])
def test_a_check_follows_the_learners_gpu_and_else_takes_the_lessons_default(default_elsewhere, found, expected):
    assert answer_device(*found) == expected


def test_inside_a_check_the_expected_step_follows_what_the_method_step_kept(default_elsewhere):
    """The expected step gets no answer; answer_device reads what the method step kept and the value compared."""
    seen = {}

    def method(answer):
        seen["method"] = answer_device()  # nothing kept yet: the default
        keep_output(answer, on("cuda", 1))

    def expected():
        seen["expected"] = answer_device()
        return 1.0

    exercise = Exercise("ex-test-device", expected, method=method, result=lambda answer: 1.0, writes="device code")
    assert checking._verdict(exercise, lambda: None, {})
    assert seen == {"method": DEFAULT, "expected": "cuda:1"}
    assert answer_device() == DEFAULT  # nothing is carried past the check


def test_the_zeros_check_follows_a_learners_gpu_instead_of_picking_its_own(monkeypatch):
    """ex-env-zeros-on-device's expected zeros are made where the answer is when that is a GPU: with the old
    pick_device() inside the check, a learner's cuda:1 (or MPS beside CUDA) was compared with cuda:0's zeros."""
    from gpukit.exercises import environment

    made = []
    monkeypatch.setattr(dev, "pick_device", lambda preferred=None: "cpu")
    monkeypatch.setattr(torch, "zeros", lambda *shape, **kwargs: made.append(kwargs["device"]) or torch.ones(1))
    for answer in (on("cuda", 1), torch.empty(2, device="meta")):  # the second, the planted mistake: on meta
        token = checking._ATTEMPT.set({"answer": answer})  # as in the expected step of a check of ``answer``
        try:
            environment._zeros_on_the_chosen_device()
        finally:
            checking._ATTEMPT.reset(token)
    assert made == ["cuda:1", "cpu"]


# ------------------------------------------------------------------ the hook nbval runs each solution in
LABEL = "ex-cpu-gpu-transfer-share"  # a number: (2 + 1) * 60 / ((2 + 1) * 60 + 70)


def run_solution(code: str) -> None:
    namespace = {"__name__": "__main__"}
    exec(compile(solution_run_source(LABEL, code), "<solution cell>", "exec"), namespace)


def test_the_hook_passes_a_solution_that_passes_its_check():
    run_solution(f"from gpukit import check\nassert check({LABEL!r}, 180 / 250)")


def test_the_hook_fails_a_solution_whose_check_does_not_pass_with_the_checks_message():
    with pytest.raises(AssertionError, match=f"the solution of {LABEL} does not pass its check: Not yet: 0.5 is too"):
        run_solution(f"from gpukit import check\ncheck({LABEL!r}, 0.5)")
    with pytest.raises(AssertionError, match="does not pass its check: Not yet: replace the placeholder"):
        run_solution(f"from gpukit import check\ncheck({LABEL!r}, None)")


def test_the_hook_fails_a_solution_that_checks_nothing_or_another_exercise_and_passes_one_that_skips():
    with pytest.raises(AssertionError, match=f"neither called check\\('{LABEL}', ...\\) nor skipped"):
        run_solution("print('no check')")
    with pytest.raises(AssertionError, match="neither called check"):
        run_solution("from gpukit import check\ncheck('ex-bench-v100-fraction', 2 * 10_000**3 / 0.144 / 15.7e12)")
    run_solution("from gpukit import skip_unless\nif skip_unless(False, 'no GPU here'):\n    pass")


def test_the_hook_leaves_check_as_it_was_even_when_the_solution_raises():
    judge = checking._verdict
    with pytest.raises(ZeroDivisionError):
        run_solution("1 / 0")
    assert checking._verdict is judge
    assert not hasattr(checking, "VERDICTS") and not hasattr(checking, "expect_a_passing_check")
