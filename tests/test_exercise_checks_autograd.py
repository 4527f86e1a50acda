"""The chapter 5 checks beyond tests/test_exercises.py: where gradcheck runs for each device (Apple's MPS has no
float64), and a forces function written by hand, without autograd, is judged by its values as any other."""

import torch
from exercise_cases_autograd import _context

from gpukit.exercises import check
from gpukit.exercises.autograd import gradcheck_device


def test_gradcheck_runs_on_the_device_unless_it_lacks_float64():
    assert gradcheck_device("cpu") == "cpu"
    assert gradcheck_device("cuda") == "cuda" and gradcheck_device("cuda:1") == "cuda:1"
    assert gradcheck_device("mps") == "cpu"


def test_forces_worked_out_by_hand_are_right_too():
    def by_hand(positions):
        difference = positions[:, None, :] - positions[None, :, :]
        distance = difference.norm(dim=-1) + torch.eye(len(positions), device=positions.device)
        return (difference / distance.unsqueeze(-1) ** 3).sum(dim=1)

    assert check("ex-autograd-forces", by_hand, **_context())
