"""The chapter 4 checks beyond tests/exercises/test_every_exercise.py: other right answers pass, and running a
learner's function leaves PyTorch as it was (its Tensor class, the reader's random numbers)."""

import torch

from gpukit.core.device import pick_device
from gpukit.exercises import check
from tests.exercises.cases.pytorch import fit_batched, rescaled_with_where, standardise_anywhere, train_without_waiting
from tests.support.device_probe import skip_where_the_gpu_cannot_work
from tests.support.exercise_cases import on_the_cpu  # noqa: F401 - the autouse fixture


def fit_one(t, y):
    """One data set's fit, written for one problem: torch.vmap runs it on the whole stack at once."""
    vander = t.unsqueeze(-1) ** torch.arange(3, device=t.device)
    return torch.linalg.solve(vander.T @ vander, vander.T @ y)


def test_other_right_answers_pass():
    skip_where_the_gpu_cannot_work(needs="torch.compile saves the CUDA random state before it traces")
    device = pick_device()
    assert check("ex-torch-compile-break", rescaled_with_where, device=device)
    assert check("ex-torch-compile-break", torch.compile(rescaled_with_where), device=device)
    vmapped = check("ex-torch-batched-fit", torch.vmap(fit_one), device=device)  # one problem's code, batched
    assert vmapped, vmapped.message
    solved = check("ex-torch-batched-fit",
                   lambda times, values: torch.linalg.lstsq(
                       times.unsqueeze(-1) ** torch.arange(3, device=times.device),
                       values.unsqueeze(-1)).solution.squeeze(-1), device=device)
    assert solved, solved.message


def test_counting_host_reads_leaves_the_tensor_class_as_it_was():
    before = dict(torch.Tensor.__dict__)
    assert check("ex-torch-no-item", train_without_waiting, device=pick_device())
    assert not check("ex-torch-no-item", lambda *args: float("nan"), device=pick_device())
    assert dict(torch.Tensor.__dict__) == before
    assert torch.tensor([1.5]).item() == 1.5 and f"{torch.tensor(2.0):.1f}" == "2.0"


def test_a_check_does_not_reset_the_readers_random_numbers():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    for label, answer in [("ex-torch-no-item", train_without_waiting), ("ex-torch-fix-mismatch", standardise_anywhere),
                          ("ex-torch-batched-fit", fit_batched)]:
        assert check(label, answer, device=pick_device())
    assert torch.equal(torch.rand(3), expected)
