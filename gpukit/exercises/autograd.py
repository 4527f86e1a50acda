"""Chapter 5, autograd and custom operations: what its exercises expect, and how a wrong answer is told apart.

- ``ex-autograd-grad-by-hand``: a gradient worked out on paper, entered as a tensor;
- ``ex-autograd-forces``: forces as minus the gradient of an energy, computed with autograd on the lesson's
  device. The check calls the learner's function twice with the same positions: gradients that accumulate in
  ``.grad`` (the lesson's first habit) make the second answer differ from the first. It then runs the function on
  positions on PyTorch's ``meta`` device, where positions moved to the host, or a tensor made there, fail as they
  would on a GPU (:mod:`._on_meta`);
- ``ex-autograd-tanh-backward``: the backward of a custom ``torch.autograd.Function``. The check runs it on the
  lesson's device in ``float32`` against autograd's own gradient of ``torch.tanh``, with an incoming gradient
  that is not all ones; on PyTorch's ``meta`` device, where a tensor the backward makes on the host fails as it
  would on a GPU; and under ``gradcheck`` in ``float64``, on the device where it has ``float64`` and on the CPU
  where it has not (Apple's MPS);
- ``ex-autograd-fake-distances``: the fake implementation of a custom operator (``torch.library.custom_op``) whose
  kernel, in NumPy, computes the distances between every pair of points. The check runs the fake on fake tensors
  (shape, dtype and device, no values) made from points in ``float32`` on the lesson's device and in ``float64``
  where the device has it, compares what it describes with what the kernel returns, then runs
  ``torch.library.opcheck``, which also traces the operator as ``torch.compile`` does.

- ``ex-autograd-predict-layer``: ``predicted_ms(peak_flops, bandwidth)``, the least time of a forward and backward
  pass of the lesson's dense layer (three matrix products), written before "Which version is faster?" times it;
  tried on a compute-bound and a memory-bound device and on the run's own (:mod:`._predicting`).

As in chapter 4's checks, the function runs once, in the ``method`` step, and what it returned goes to the
comparison (``result``) through :func:`.checking.keep_output`.
"""

from __future__ import annotations

from gpukit.base.errors import first_line

from ._on_meta import host_use_on_meta
from ._predicting import Work, function_exercise
from .checking import Exercise, compare, register
from .checking import keep_output as _kept
from .checking import kept_output as _output_of
from .checking import raised as _raised

_TANH_RTOL, _TANH_ATOL = 1e-5, 1e-6


def gradcheck_device(device) -> str:
    """Where ``gradcheck`` can run for work on ``device``: the device itself, or the CPU where the device has no
    ``float64`` (Apple's MPS)."""
    import torch

    return "cpu" if torch.device(device).type == "mps" else str(device)


# -------------------------------------------------------------------------------- ex-autograd-grad-by-hand
def _gradient_of_the_mean_cubic():
    """d/dx of mean(x**3 - 2x) = x**2 - 2/3, at x = (1, 2, 3), as PyTorch's default float32 on the CPU."""
    import torch

    x = torch.tensor([1.0, 2.0, 3.0])
    return x**2 - 2 / 3


# ------------------------------------------------------------------------------------- ex-autograd-forces
def _particles(device):
    """Twelve particles near the points of a 2 x 2 x 3 grid of unit spacing (no two close), on ``device``."""
    import torch

    generator = torch.Generator().manual_seed(5)
    grid = torch.stack(torch.meshgrid(torch.arange(2.0), torch.arange(2.0), torch.arange(3.0), indexing="ij"), -1)
    jitter = 0.2 * (torch.rand(12, 3, generator=generator) - 0.5)
    return (grid.reshape(12, 3) + jitter).to(device)


def _coulomb_forces(device):
    """F_i = sum over j != i of (x_i - x_j) / r_ij**3, the forces of E = sum over pairs of 1 / r_ij, worked out
    by hand in float64 on the CPU."""
    import torch

    x = _particles("cpu").double()
    difference = x[:, None, :] - x[None, :, :]
    distance = difference.norm(dim=-1) + torch.eye(len(x), dtype=torch.float64)  # no pair with itself
    forces = (difference / distance.unsqueeze(-1) ** 3).sum(dim=1)
    return forces.float().to(device)


def _forces_by_autograd(answer, device) -> str | None:
    import torch

    if not callable(answer) or isinstance(answer, type):
        return (f"expected your function itself (forces, a def taking positions), got {type(answer).__name__}: pass "
                "the function, not what it returns.")
    positions = _particles(device)
    results = []
    for call in ("first", "second"):
        try:
            results.append(answer(positions))
        except Exception as error:  # the reader's code: report whatever it raised
            return _raised(f"on the {call} call, with positions on {positions.device.type}, your function", error) + "."
        if not isinstance(results[-1], torch.Tensor):
            return (f"your function returned {type(results[-1]).__name__}: return the forces as one tensor of shape "
                    "(n, 3), on the positions' device.")
    first, second = results
    if first.shape == second.shape and not torch.allclose(first.detach(), second.detach()):
        return ("called twice with the same positions, your function returned different forces: gradients add up in "
                ".grad from one backward to the next. Take them with torch.autograd.grad, which returns them, or "
                "work on a fresh copy (positions.detach().requires_grad_()) at each call.")
    if positions.requires_grad or positions.grad is not None:
        return ("your function changed the caller's positions (set requires_grad or filled .grad): work on a copy, "
                "x = positions.detach().requires_grad_().")
    on_the_host = host_use_on_meta(lambda: answer(torch.empty(12, 3, device="meta")))
    if on_the_host:
        return (f"on positions on PyTorch's meta device (no values; it stands for a GPU) your function {on_the_host}: "
                "it moves the positions to the host or makes a tensor there. Make every tensor where the positions "
                "are (device=positions.device), and leave the forces there.")
    _kept(answer, first.detach())
    return None


# ------------------------------------------------------------------------------ ex-autograd-tanh-backward
def _tanh_exercise_inputs(device):
    """Where the reader's Tanh is tried: seven points, and an incoming gradient that is not all ones (a backward
    that forgets ``grad_y`` would pass with ones), in float32 on ``device``."""
    import torch

    x = torch.linspace(-2.0, 2.0, 7).to(device).requires_grad_()
    grad_y = torch.linspace(0.5, 2.0, 7).to(device)
    return x, grad_y


def _tanh_gradient_by_autograd(device):
    import torch

    x, grad_y = _tanh_exercise_inputs(device)
    (grad,) = torch.autograd.grad(torch.tanh(x), x, grad_y)
    return grad


def _is_a_working_tanh_function(answer, device) -> str | None:
    import torch
    from torch.autograd import gradcheck

    if not (isinstance(answer, type) and issubclass(answer, torch.autograd.Function)):
        return (f"expected your Function class itself (a subclass of torch.autograd.Function, such as Tanh), "
                f"got {type(answer).__name__}.")
    name = answer.__name__
    x, grad_y = _tanh_exercise_inputs(device)
    where = x.device.type
    try:
        y = answer.apply(x)
    except Exception as error:
        return _raised(f"{name}.apply(x), with x on {where},", error) + "."
    if not (isinstance(y, torch.Tensor) and y.shape == x.shape and torch.allclose(y, torch.tanh(x))):
        return f"{name}'s forward no longer computes tanh(x): keep the forward as given."
    try:
        (grad,) = torch.autograd.grad(y, x, grad_y, allow_unused=True)
    except Exception as error:
        return _raised(f"{name}'s backward, on {where},", error) + "."
    if grad is None:
        return f"{name}'s backward returned None: return the gradient with respect to x, a tensor shaped like x."
    values = compare(grad, _tanh_gradient_by_autograd(device), rtol=_TANH_RTOL, atol=_TANH_ATOL)
    if not values:
        return f"on {where}, in float32, the gradient your backward gives: {values.message}"
    meta = torch.empty(7, device="meta", requires_grad=True)
    try:
        torch.autograd.grad(answer.apply(meta), meta, torch.empty(7, device="meta"))
    except RuntimeError as error:
        if "device" in str(error):
            return (_raised(f"on PyTorch's meta device (no values; it stands for a GPU) {name}'s backward", error)
                    + ": it makes a tensor on the host. Compute from grad_y and y alone, or make the tensor where y "
                      "is (device=y.device).")
    except Exception:  # noqa: S110 - an operation without a meta version tells nothing about devices
        pass
    checked_on = gradcheck_device(device)
    x64 = torch.linspace(-1.5, 1.7, 6, dtype=torch.float64, device=checked_on, requires_grad=True)
    try:
        passed = gradcheck(answer.apply, (x64,), raise_exception=False)
    except Exception as error:
        return _raised(f"gradcheck of {name} in float64 on {checked_on}", error) + "."
    if not passed:
        return (f"gradcheck, in float64 on {checked_on}, finds {name}'s backward wrong: its gradient is not the "
                "derivative of the forward times grad_y.")
    _kept(answer, grad)
    return None


# ----------------------------------------------------------------------------- ex-autograd-fake-distances
def _pair_distances(device):
    """|x_i - x_j| for every pair of the twelve particles (shape (12, 12), 0 on the diagonal), float32 on
    ``device``."""
    x = _particles(device)
    return (x[:, None, :] - x[None, :, :]).norm(dim=-1)


def _layout(tensor) -> dict[str, object]:
    return {"shape": tuple(tensor.shape), "dtype": tensor.dtype, "device": tensor.device.type,
            "strides": tuple(tensor.stride())}


_LAYOUT_ADVICE = {
    "shape": "work out the result's shape from the points' shape",
    "dtype": "take the dtype from the points (points.new_empty(...), or dtype=points.dtype)",
    "device": "take the device from the points (points.new_empty(...), or device=points.device)",
    "strides": "return a contiguous tensor, as the kernel does (new_empty or torch.empty, not a transpose)",
}


def _fake_describes_the_kernel(answer, points) -> str | None:
    """What is wrong with the fake implementation of ``answer`` for ``points``, or None."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    where = f"for points of shape {tuple(points.shape)} in {points.dtype} on {points.device.type}"
    real = answer(points)
    try:
        with FakeTensorMode() as mode:
            fake = answer(mode.from_tensor(points))
    except Exception as error:  # the reader's fake: report whatever it raised
        if "no fake impl" in str(error):
            return ("your operator has no fake implementation: register one with the @pair_distances.register_fake "
                    "decorator, then pass the operator.")
        return (_raised(f"{where}, your fake implementation", error)
                + ": it runs on fake tensors, which have a shape, a dtype and a device but no values, so it cannot "
                  "run the kernel or read values (.numpy(), .item(), .tolist()). Make an empty result from the "
                  "points' shape alone.")
    if not isinstance(fake, torch.Tensor):
        returned = "None" if fake is None else type(fake).__name__
        return (f"your fake implementation returned {returned}: return an empty tensor laid out as the kernel's "
                "result (points.new_empty(...)).")
    got, want = _layout(fake), _layout(real)
    for what, advice in _LAYOUT_ADVICE.items():
        if got[what] != want[what]:
            return (f"{where}, your fake implementation describes a result with {what} {got[what]}, where the "
                    f"kernel returns {want[what]}: {advice}.")
    return None


def _is_an_operator_with_a_working_fake(answer, device) -> str | None:
    import torch
    from torch._library.custom_ops import CustomOpDef

    if not isinstance(answer, CustomOpDef):
        return ("expected the custom operator itself (pair_distances, what @torch.library.custom_op made of the "
                f"function), got {type(answer).__name__}.")
    points = _particles(device)
    try:
        distances = answer(points)
    except Exception as error:
        return _raised(f"your operator, called on points on {points.device.type},", error) + "."
    kernel = compare(distances, _pair_distances(device), rtol=1e-5, atol=1e-6)
    if not kernel:
        return ("your operator's own kernel no longer computes the distances between the points ("
                + kernel.message.rstrip(".") + "): keep the given definition, and register the fake implementation "
                  "on it.")
    for tried in (points, points.to(gradcheck_device(device)).double()):
        wrong = _fake_describes_the_kernel(answer, tried)
        if wrong:
            return wrong
    results = torch.library.opcheck(answer, (points,), raise_exception=False)
    failed = [(test, error) for test, error in results.items() if error != "SUCCESS"]
    if failed:
        test, error = failed[0]
        return (f"torch.library.opcheck's {test} fails, with {type(error).__name__}: "
                f"{first_line(error).rstrip(' .!:')}.")
    _kept(answer, distances)
    return None


register(
    Exercise("ex-autograd-grad-by-hand", _gradient_of_the_mean_cubic, writes="a number"),
    Exercise("ex-autograd-forces", _coulomb_forces, needs=("device",), rtol=1e-4, atol=1e-5,
             method=_forces_by_autograd, result=_output_of, writes="device code"),
    Exercise("ex-autograd-tanh-backward", _tanh_gradient_by_autograd, needs=("device",), rtol=_TANH_RTOL,
             atol=_TANH_ATOL,
             method=_is_a_working_tanh_function, result=_output_of, writes="device code"),
    Exercise("ex-autograd-fake-distances", _pair_distances, needs=("device",), rtol=1e-5, atol=1e-6,
             method=_is_an_operator_with_a_working_fake, result=_output_of, writes="device code"),
)


# ------------------------------------------------------------------ ex-autograd-predict-layer
def _layer(n_batch: int, n_in: int, n_out: int, **_) -> Work:
    """Forward x @ W^T, backward grad_z @ W and grad_z^T @ x: three products of 2 n_batch n_in n_out FLOPs, each
    reading two float32 matrices and writing one (the sigmoid's and the bias's elementwise work is left out)."""
    return Work(3 * 2 * n_batch * n_in * n_out, 3 * 4 * (n_batch * n_in + n_out * n_in + n_batch * n_out))


def _layer_mistakes(n_batch: int, n_in: int, n_out: int, **_) -> list[tuple[str, Work]]:
    right = _layer(n_batch, n_in, n_out)
    return [("counting a multiply-add as one FLOP", Work(right.flops / 2, right.bytes_moved)),
            ("counting the forward product only (the backward pass does two more: for x and for the weights)",
             Work(right.flops / 3, right.bytes_moved / 3)),
            ("counting each matrix's bytes once (each of the three products reads two matrices and writes one)",
             Work(right.flops, 4 * (n_batch * n_in + n_out * n_in + n_batch * n_out))),
            ("counting 8 bytes per element (float32 has 4)", Work(right.flops, 2 * right.bytes_moved))]


register(function_exercise("ex-autograd-predict-layer", _layer, _layer_mistakes,
                           needs=("device", "n_batch", "n_in", "n_out")))
