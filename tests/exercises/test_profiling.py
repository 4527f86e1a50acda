"""The checks of chapter 14's exercises beyond their cases (tests/exercises/cases/profiling.py): another right
answer passes, the check's data make clipping matter, and a check leaves the reader's session as it was."""

import torch

from gpukit.core.device import pick_device
from gpukit.exercises import check
from gpukit.exercises import profiling as answers
from tests.exercises.cases.profiling import clipped_step_without_waiting, clipped_with_clamp, train_step_in_ranges
from tests.support.exercise_cases import on_the_cpu  # noqa: F401 - the autouse fixture


def test_clipping_by_hand_without_a_wait_passes():
    result = check("ex-prof-hidden-sync", clipped_with_clamp, device=pick_device())
    assert result, result.message


def test_the_checks_data_clip_some_steps_and_not_others():
    """Otherwise a step without clipping, or one that always rescales, would train to the same values."""
    model, optimiser, x, y = answers._regression("cpu")
    clipped = []
    for _ in range(1 + answers._STEPS):
        optimiser.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()]))
        clipped.append(bool(norm > answers._MAX_NORM))
        torch.nn.utils.clip_grad_norm_(model.parameters(), answers._MAX_NORM)
        optimiser.step()
    assert any(clipped) and not all(clipped), clipped


def test_a_check_leaves_the_random_stream_and_tensor_methods_alone():
    methods = {name: torch.Tensor.__dict__.get(name) for name in ("cpu", "numpy", "tolist")}
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    assert check("ex-prof-hidden-sync", clipped_step_without_waiting, device=pick_device())
    assert check("ex-prof-ranges", train_step_in_ranges, device=pick_device())
    assert torch.equal(torch.rand(3), expected)
    assert {name: torch.Tensor.__dict__.get(name) for name in methods} == methods
    assert torch.ones(2).tolist() == [1.0, 1.0]


def test_a_step_that_raises_is_reported_with_its_error():
    def broken(model, optimiser, x, y, max_norm=1.0):
        raise RuntimeError("shapes do not match")

    result = check("ex-prof-hidden-sync", broken, device=pick_device())
    assert not result and "raised RuntimeError: shapes do not match" in result.message
