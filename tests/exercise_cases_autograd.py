"""Chapter 5 (autograd and custom operations): each exercise's solution, and wrong answers with a word the
check's message must contain."""

import numpy as np
import torch


def tanh_function(backward_formula):
    """A Function computing tanh, whose backward is ``backward_formula(grad_y, y)``, as the lesson's Tanh."""

    class Tanh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = torch.tanh(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad_y):
            (y,) = ctx.saved_tensors
            return backward_formula(grad_y, y)

    return Tanh


class Exp(torch.autograd.Function):
    """A Function with a right backward for the wrong forward."""

    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        (y,) = ctx.saved_tensors
        return grad_y * y


def _mean_cubic_gradient_by_autograd():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x**3 - 2 * x).mean().backward()
    return x.grad


SOLUTIONS = {
    "ex-autograd-grad-by-hand": lambda: (torch.tensor([1 / 3, 10 / 3, 25 / 3]), {}),
    "ex-autograd-tanh-backward": lambda: (tanh_function(lambda grad_y, y: grad_y * (1 - y * y)), {}),
    "ex-autograd-broken-coverage": lambda: (
        np.unique(np.add.outer(np.arange(64), np.arange(32))).size, {}),
}

WRONG_ANSWERS = {
    "ex-autograd-grad-by-hand": lambda: [
        (torch.tensor([1.0, 10.0, 25.0]), "values differ"),  # forgot the 1/3 of the mean
        (torch.tensor([1 / 3, 10 / 3, 25 / 3], dtype=torch.float64), "dtype is torch.float64"),
        (torch.tensor([1 / 3, 10 / 3]), "shape is (2,)"),
        ([1 / 3, 10 / 3, 25 / 3], "expected an array"),
        (np.array([1 / 3, 10 / 3, 25 / 3], dtype=np.float32), "expected a torch array"),
    ],
    "ex-autograd-tanh-backward": lambda: [
        (tanh_function(lambda grad_y, y: 1 - y * y), "values differ"),  # forgot grad_y
        (tanh_function(lambda grad_y, y: grad_y * y), "values differ"),
        (tanh_function(lambda grad_y, y: None), "returned None"),
        (tanh_function(lambda grad_y, y: grad_y[:3]), "backward raised RuntimeError"),
        (Exp, "forward no longer computes tanh"),
        (torch.tanh, "expected your Function class itself"),
        (tanh_function(lambda grad_y, y: grad_y * (1 - y * y)).apply, "expected your Function class"),
    ],
    "ex-autograd-broken-coverage": lambda: [
        (64 * 32, "too large"),
        (64 + 32 - 2, "too small"),
        ("ninety-five", "expected a number"),
    ],
}
