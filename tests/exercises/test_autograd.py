"""The chapter 5 checks beyond tests/exercises/test_every_exercise.py: where gradcheck runs for each device
(Apple's MPS has no float64), a forces function written by hand, without autograd, is judged by its values as any
other, and a fake implementation made of PyTorch operations (which run on fake tensors too, as the solution says)
passes."""

import torch

from gpukit.exercises import check
from gpukit.exercises.autograd import gradcheck_device
from tests.exercises.cases.autograd import pair_distances_operator
from tests.support.device_probe import skip_where_the_gpu_cannot_work
from tests.support.exercise_cases import on_the_cpu, on_the_lessons_device  # noqa: F401 - on_the_cpu: autouse


def test_gradcheck_runs_on_the_device_unless_it_lacks_float64():
    assert gradcheck_device("cpu") == "cpu"
    assert gradcheck_device("cuda") == "cuda" and gradcheck_device("cuda:1") == "cuda:1"
    assert gradcheck_device("mps") == "cpu"


def test_forces_worked_out_by_hand_are_right_too():
    def by_hand(positions):
        difference = positions[:, None, :] - positions[None, :, :]
        distance = difference.norm(dim=-1) + torch.eye(len(positions), device=positions.device)
        return (difference / distance.unsqueeze(-1) ** 3).sum(dim=1)

    assert check("ex-autograd-forces", by_hand, **on_the_lessons_device())


def test_a_fake_implementation_made_of_pytorch_operations_passes_too():
    # opcheck compiles the operator; torch.compile saves the CUDA random state wherever torch reports a GPU.
    skip_where_the_gpu_cannot_work(needs="torch.compile saves the CUDA random state before it traces")
    operator = pair_distances_operator(lambda points: torch.cdist(points, points))
    assert check("ex-autograd-fake-distances", operator, **on_the_lessons_device())
