"""Chapter 5, autograd and custom operations: what its exercises expect, and how a wrong answer is told apart."""

from __future__ import annotations

from .checking import Exercise, register


def _gradient_of_the_mean_cubic():
    """d/dx of mean(x**3 - 2x) = x**2 - 2/3, at x = (1, 2, 3), as PyTorch's default float32 on the CPU."""
    import torch

    x = torch.tensor([1.0, 2.0, 3.0])
    return x**2 - 2 / 3


def _tanh_exercise_inputs():
    """Where the reader's Tanh is tried: seven points, and an incoming gradient that is not all ones (a
    backward that forgets ``grad_y`` would pass with ones)."""
    import torch

    x = torch.linspace(-2.0, 2.0, 7, dtype=torch.float64, requires_grad=True)
    grad_y = torch.linspace(0.5, 2.0, 7, dtype=torch.float64)
    return x, grad_y


def _tanh_gradient_by_autograd():
    import torch

    x, grad_y = _tanh_exercise_inputs()
    (grad,) = torch.autograd.grad(torch.tanh(x), x, grad_y)
    return grad


def _tanh_gradient_of(function):
    import torch

    x, grad_y = _tanh_exercise_inputs()
    (grad,) = torch.autograd.grad(function.apply(x), x, grad_y)
    return grad


def _is_a_working_tanh_function(answer) -> str | None:
    import torch

    if not (isinstance(answer, type) and issubclass(answer, torch.autograd.Function)):
        return (f"expected your Function class itself (a subclass of torch.autograd.Function, such as Tanh), "
                f"got {type(answer).__name__}.")
    x, grad_y = _tanh_exercise_inputs()
    try:
        y = answer.apply(x)
    except Exception as error:  # the reader's code: report whatever it raised
        return f"{answer.__name__}.apply(x) raised {type(error).__name__}: {error}"
    if not (isinstance(y, torch.Tensor) and y.shape == x.shape and torch.allclose(y, torch.tanh(x))):
        return f"{answer.__name__}'s forward no longer computes tanh(x): keep the forward as given."
    try:
        (grad,) = torch.autograd.grad(y, x, grad_y, allow_unused=True)
    except Exception as error:
        return f"{answer.__name__}'s backward raised {type(error).__name__}: {error}"
    if grad is None:
        return (f"{answer.__name__}'s backward returned None: return the gradient with respect to x, a tensor "
                "shaped like x.")
    return None


register(
    Exercise("ex-autograd-grad-by-hand", _gradient_of_the_mean_cubic, writes="a number"),
    Exercise("ex-autograd-tanh-backward", _tanh_gradient_by_autograd, rtol=1e-7, atol=1e-12,
             method=_is_a_working_tanh_function, result=_tanh_gradient_of, writes="device code"),
    Exercise("ex-autograd-broken-coverage", lambda: 64 + 32 - 1, writes="a number"),
)
