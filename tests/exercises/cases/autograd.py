"""Chapter 5 (autograd and custom operations): each exercise's solution, and wrong answers with a word the
check's message must contain. The device exercises run on the chosen device (a GPU where the tests have one);
their wrong answers are the classic mistakes: a forgotten minus sign or ``grad_y``, gradients that accumulate
in ``.grad``, a tensor made on the host inside a backward, a forward changed by mistake, a fake implementation
that describes the wrong result (the input's shape, PyTorch's default dtype and device) or reads values."""

import itertools

import numpy as np
import torch

from gpukit.core.device import pick_device
from tests.exercises.cases import named
from tests.support.exercise_cases import (
    on_the_lessons_device,
    prediction_slips,
    scaled_prediction,
    solved_on_the_lessons_device,
)


# ------------------------------------------------------------------------------------- ex-autograd-forces
def forces(positions):
    x = positions.detach().requires_grad_()
    i, j = torch.triu_indices(len(x), len(x), offset=1, device=x.device)
    energy = (1 / (x[i] - x[j]).norm(dim=-1)).sum()
    (gradient,) = torch.autograd.grad(energy, x)
    return -gradient


def forces_without_the_minus(positions):
    return -forces(positions)


def forces_that_accumulate(positions):  # backward() on the caller's tensor: .grad adds up from call to call
    positions.requires_grad_()
    i, j = torch.triu_indices(len(positions), len(positions), offset=1, device=positions.device)
    (1 / (positions[i] - positions[j]).norm(dim=-1)).sum().backward()
    return -positions.grad.clone()


def forces_that_mark_the_callers_tensor(positions):  # right values, but the caller's tensor now requires grad
    positions.requires_grad_()
    i, j = torch.triu_indices(len(positions), len(positions), offset=1, device=positions.device)
    (gradient,) = torch.autograd.grad((1 / (positions[i] - positions[j]).norm(dim=-1)).sum(), positions)
    return -gradient


def forces_counting_each_pair_twice(positions):  # every pair, both ways: twice the energy
    x = positions.detach().requires_grad_()
    distance = (x[:, None, :] - x[None, :, :]).norm(dim=-1) + torch.eye(len(x), device=x.device)
    mask = 1 - torch.eye(len(x), device=x.device)
    (gradient,) = torch.autograd.grad((mask / distance).sum(), x)
    return -gradient


def forces_on_the_cpu(positions):
    return forces(positions.cpu())


# ------------------------------------------------------------------------------ ex-autograd-tanh-backward
def tanh_function(backward_formula, forward=torch.tanh):
    """A Function computing ``forward`` (tanh), whose backward is ``backward_formula(grad_y, y)``, as the lesson's
    Tanh."""

    class Tanh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = forward(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad_y):
            (y,) = ctx.saved_tensors
            return backward_formula(grad_y, y)

    return Tanh


Exp = named("Exp", tanh_function(lambda grad_y, y: grad_y * y, forward=torch.exp))  # right backward, wrong forward


def _ones_on_the_host(grad_y, y):  # a constant with a dimension, made on the host: fails on a GPU
    return grad_y * (torch.ones(1) - y * y)


def _right_only_in_float32(grad_y, y):  # a bug on the float64 path only, which gradcheck alone exercises
    if y.dtype == torch.float64:
        return grad_y * (1 - y)
    return grad_y * (1 - y * y)


# ----------------------------------------------------------------------------- ex-autograd-fake-distances
_OPERATOR_NUMBERS = itertools.count()


def pair_distances_operator(fake=None, squared=False):
    """The lesson's pair_distances, as a new custom operator (a name of its own at each call, as an operator is
    registered for the whole process), with ``fake`` as its fake implementation (none if None)."""

    @torch.library.custom_op(f"gpubook_cases::pair_distances_{next(_OPERATOR_NUMBERS)}", mutates_args=())
    def pair_distances(points: torch.Tensor) -> torch.Tensor:
        p = points.numpy(force=True)
        distances = ((p[:, None, :] - p[None, :, :]) ** 2).sum(axis=-1)
        return torch.from_numpy(distances if squared else np.sqrt(distances)).to(points.device)

    if fake is not None:
        pair_distances.register_fake(fake)
    return pair_distances


def _fake_distances(points):  # the solution: an empty (n, n) tensor with the points' dtype and device
    return points.new_empty(points.shape[0], points.shape[0])


def _fake_that_runs_the_kernel(points):  # NumPy on a fake tensor: it has no values
    p = points.numpy()
    return torch.from_numpy(np.sqrt(((p[:, None, :] - p[None, :, :]) ** 2).sum(axis=-1)))


_ON_THE_CPU = pick_device() == "cpu"  # torch.empty's defaults (float32, the CPU) are wrong in float64, or on a GPU


LAYER = {"n_batch": 512, "n_in": 256, "n_out": 128}


def predicted_ms(peak_flops, bandwidth, n_batch=512, n_in=256, n_out=128):
    """The lesson's solution of ex-autograd-predict-layer."""
    flops = 3 * 2 * n_batch * n_in * n_out
    moved = 3 * 4 * (n_batch * n_in + n_out * n_in + n_batch * n_out)
    return 1e3 * max(flops / peak_flops, moved / bandwidth)


SOLUTIONS = {
    "ex-autograd-predict-layer": lambda: (predicted_ms, on_the_lessons_device(**LAYER)),
    "ex-autograd-grad-by-hand": lambda: (torch.tensor([1 / 3, 10 / 3, 25 / 3]), {}),
    **solved_on_the_lessons_device({"ex-autograd-forces": forces}),
    "ex-autograd-tanh-backward": lambda: (tanh_function(lambda grad_y, y: grad_y * (1 - y * y)),
                                          on_the_lessons_device()),
    "ex-autograd-fake-distances": lambda: (pair_distances_operator(_fake_distances), on_the_lessons_device()),
}

WRONG_ANSWERS = {
    "ex-autograd-predict-layer": lambda: [
        (scaled_prediction(predicted_ms, 1 / 3, 1 / 3), "the forward product only"),
        (scaled_prediction(predicted_ms, 0.5, 1), "multiply-add"),
        (scaled_prediction(predicted_ms, 1, 1 / 3), "each matrix's bytes once"),
        (scaled_prediction(predicted_ms, 1, 2), "8 bytes per element"),
        *prediction_slips(predicted_ms, itself=True),
    ],
    "ex-autograd-grad-by-hand": lambda: [
        (torch.tensor([1.0, 10.0, 25.0]), "values differ"),  # forgot the 1/3 of the mean
        (torch.tensor([1 / 3, 10 / 3, 25 / 3], dtype=torch.float64), "dtype is torch.float64"),
        (torch.tensor([1 / 3, 10 / 3]), "shape is (2,)"),
        ([1 / 3, 10 / 3, 25 / 3], "expected an array"),
        (np.array([1 / 3, 10 / 3, 25 / 3], dtype=np.float32), "expected a torch array"),
    ],
    "ex-autograd-forces": lambda: [
        (forces_without_the_minus, "values differ"),
        (forces_that_accumulate, "gradients add up in .grad"),
        (forces_that_mark_the_callers_tensor, "changed the caller's positions"),
        (forces_counting_each_pair_twice, "values differ"),
        (lambda positions: forces(positions).double(), "dtype is torch.float64"),
        (lambda positions: forces(positions).tolist(), "returned list"),
        (forces(torch.eye(3)), "expected your function itself"),
        (forces_on_the_cpu, "meta device"),  # moved to the host: the check runs it on the meta device too
    ],
    "ex-autograd-tanh-backward": lambda: [
        (tanh_function(lambda grad_y, y: 1 - y * y), "values differ"),  # forgot grad_y
        (tanh_function(lambda grad_y, y: grad_y * y), "values differ"),
        (tanh_function(lambda grad_y, y: None), "returned None"),
        (tanh_function(lambda grad_y, y: grad_y[:3]), "backward, on"),
        (named("TanhWithOnesOnTheHost", tanh_function(_ones_on_the_host)), "makes a tensor on the host"),
        (tanh_function(_right_only_in_float32), "gradcheck, in float64"),
        (Exp, "forward no longer computes tanh"),
        (torch.tanh, "expected your Function class itself"),
        (tanh_function(lambda grad_y, y: grad_y * (1 - y * y)).apply, "expected your Function class"),
    ],
    "ex-autograd-fake-distances": lambda: [
        (pair_distances_operator(torch.empty_like), "describes a result with shape (12, 3)"),
        (named("fake_with_torch_empty_defaults",
               pair_distances_operator(lambda points: torch.empty(len(points), len(points)))),
         "describes a result with dtype" if _ON_THE_CPU else "describes a result with device"),
        (pair_distances_operator(lambda points: points.new_empty(12, 12, dtype=torch.int64)), "with dtype"),
        (pair_distances_operator(lambda points: _fake_distances(points).T), "with strides"),
        (pair_distances_operator(_fake_that_runs_the_kernel), "cannot run the kernel or read values"),
        (pair_distances_operator(lambda points: None), "returned None:"),
        (pair_distances_operator(), "has no fake implementation"),
        (pair_distances_operator(_fake_distances, squared=True), "no longer computes the distances"),
        (_fake_distances, "expected the custom operator itself"),
    ],
}


# The planted device mistakes (tests/exercises/test_planted_device_mistakes.py).
DEVICE_MISTAKES = {
    "ex-autograd-forces": {
        "forces_on_the_cpu": "moved the positions to the host (.cpu()) to compute the forces, which come back there",
    },
    "ex-autograd-tanh-backward": {
        "TanhWithOnesOnTheHost": "made a constant in the backward with torch.ones(1), on the host, while y and "
                                 "grad_y are on the GPU",
    },
    "ex-autograd-fake-distances": {
        "fake_with_torch_empty_defaults": "described the result with torch.empty(n, n), whose defaults are the CPU "
                                          "and float32, not the points' device and dtype (on a CPU-only run the "
                                          "check sees the dtype; on a GPU, the device too)",
    },
}
