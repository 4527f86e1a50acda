"""Chapter 14, Profiling: what its exercises expect, and how a wrong answer is told apart.

Both exercises ask for a training step, which the check runs for a few steps on a small regression of its own,
on the lesson's device (``device``, passed by name), under ``torch.profiler`` with the activities that device
has (the CPU's, plus CUDA's on an NVIDIA GPU), after one step outside the profile (the first step allocates
and, on a GPU, loads kernels):

- ``ex-prof-hidden-sync``: a step with gradient clipping that no longer waits for the device. The check fails
  the step if its profile still holds an operation by which the host waits for the device
  (:data:`gpukit.topics.traces.HOST_WAITS`: a value read on the host, ``aten::_local_scalar_dense`` below ``.item()``,
  ``float()`` and an ``if`` on a tensor; on a GPU also ``cudaStreamSynchronize`` and device-to-host copies),
  inside the steps. A copy to the host with ``.cpu()``, ``.numpy()`` or ``.tolist()`` copies nothing when the
  data are on the CPU already, so a CPU profile has no operation for it: the check watches those three
  methods as well. Then it compares the trained parameters with those of the step as given, which clips: a
  step that lost its clipping, or clips always, trains to other values;
- ``ex-prof-ranges``: the same step as the lesson's, with its phases in ``record_function`` ranges named
  ``forward``, ``backward`` and ``optimiser``. The check reads the profile: one range of each name per step,
  the model's layers and the loss inside ``forward`` and none of the backward pass, the autograd engine's
  work inside ``backward`` (found by time, as on a GPU the backward pass runs on a thread of its own), the
  optimiser's ``step`` inside ``optimiser``; no value read on the host inside the steps (the lesson's log, which
  the exercise leaves out, found as ``ex-prof-hidden-sync`` finds it); and it compares the trained parameters
  with plain training.
- ``ex-prof-predict-step``: ``predicted_ms(peak_flops, bandwidth)``, the least time of the step's two large
  products (the first layer's forward product and its weight gradient), written before the step is profiled;
  tried on a compute-bound and a memory-bound device and on the run's own (:mod:`._predicting`).

The checks run the learner's function once, in the ``method`` step, and hand what it trained to the comparison
(``result``) through :func:`.checking.keep_output`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from gpukit.topics.traces import is_host_wait

from ._predicting import Work, function_exercise
from .checking import CountTensorCalls, Exercise, flat_parameters, register, seeded_regression
from .checking import keep_output as _kept
from .checking import kept_output as _output_of
from .checking import not_a_function as _a_function
from .checking import raised as _raised

_STEPS = 6  # profiled steps, after one unprofiled
_MAX_NORM = 3.0  # with the check's data the gradient norm starts near 9 and falls below 3 by the 6th step
_LR = 0.1


# ------------------------------------------------------------------------------------------- the check's data
def _regression(device):
    """A two-layer model, its SGD optimiser and data of the check's own, on ``device``; the same on every run."""
    import torch
    from torch import nn

    def labels(x, generator):
        slope = torch.randn(8, 1, generator=generator)
        return 3 * torch.tanh(x @ slope) + 0.1 * torch.randn(256, 1, generator=generator)

    return seeded_regression(device, seed=4, samples=256, hidden=16, activation=nn.Tanh, init_scale=0.5, lr=_LR,
                             labels=labels)


def _activities(device):
    from torch.profiler import ProfilerActivity

    activities = [ProfilerActivity.CPU]
    if str(device).startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)
    return activities


def _synchronize(device) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def _clipped_reference(model, optimiser, x, y, max_norm):
    """The exercise's step as given: clip the gradients' total norm to ``max_norm`` (with a Python ``if``)."""
    import torch
    from torch import nn

    optimiser.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    if norm > max_norm:
        for g in grads:
            g.mul_(max_norm / norm)
    optimiser.step()
    return loss.detach()


def _plain_reference(model, optimiser, x, y):
    from torch import nn

    optimiser.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimiser.step()
    return loss.detach()


def _trained_by(step: Callable, device, **kwargs):
    model, optimiser, x, y = _regression(device)
    for _ in range(1 + _STEPS):
        step(model, optimiser, x, y, **kwargs)
    return flat_parameters(model)


def _clipped_parameters(device):
    return _trained_by(_clipped_reference, device, max_norm=_MAX_NORM)


def _plain_parameters(device):
    return _trained_by(_plain_reference, device)


# Every Tensor method through which Python copies a tensor to the host. On the CPU the data are there already and
# nothing is copied, so the profile has no operation to show; on a GPU each is a copy the host waits for.
_HOST_COPIES = ("cpu", "numpy", "tolist")


def _profile_steps(step: Callable, device, **kwargs):
    """One unprofiled step, then :data:`_STEPS` steps under the profiler, each in a range of the check's own.

    Returns the profile's events, the (start, end) of each step's range in microseconds, the Tensor methods
    that copied to the host during the profiled steps, and the model (trained by the learner's step)."""
    import torch
    from torch.profiler import profile, record_function

    model, optimiser, x, y = _regression(device)
    before = flat_parameters(model).clone()
    step(model, optimiser, x, y, **kwargs)
    _synchronize(device)
    if torch.equal(flat_parameters(model), before):
        raise _TrainedNothing
    with CountTensorCalls(_HOST_COPIES) as copies, profile(activities=_activities(device)) as prof:
        for k in range(_STEPS):
            with record_function(f"check: step {k}"):
                step(model, optimiser, x, y, **kwargs)
        _synchronize(device)
    events = list(prof.events())
    steps = [(e.time_range.start, e.time_range.end) for e in events
             if e.name.startswith("check: step ") and e.device_type == torch.autograd.DeviceType.CPU]
    return events, steps, copies.counts, model


class _TrainedNothing(Exception):
    """The learner's step left every parameter as it was: still the placeholder, or no optimiser step."""


_TRAINED_NOTHING = ("your step left the model's parameters as they were: it trains nothing yet. Replace the "
                    "placeholder (return None) with the whole step, optimiser.step() included.")


def _within(event, spans) -> bool:
    start, end = event.time_range.start, event.time_range.end
    return any(s <= start and end <= e for s, e in spans)


def _listed(counts: Counter) -> str:
    return ", ".join(f"{name} x{count}" for name, count in counts.most_common())


# ------------------------------------------------------------------------------------- ex-prof-hidden-sync
def _never_waits(answer, device) -> str | None:
    wrong = _a_function(answer, "clipped_step_without_waiting", "model, optimiser, x, y, max_norm")
    if wrong:
        return wrong
    try:
        events, steps, copies, model = _profile_steps(answer, device, max_norm=_MAX_NORM)
    except _TrainedNothing:
        return _TRAINED_NOTHING
    except Exception as error:  # the reader's code: report whatever it raised
        if isinstance(error, TypeError) and ("max_norm" in str(error) or "argument" in str(error)):
            return (_raised("the check calls your step as step(model, optimiser, x, y, max_norm=...); it", error)
                    + ". Keep the given step's arguments.")
        return _raised(f"training on {device}, your step", error) + "."
    waits = Counter(e.name for e in events if is_host_wait(e.name) and (_within(e, steps) or "DtoH" in e.name))
    if waits:
        return (f"in {_STEPS} profiled steps on {device} the host still waited for the device: {_listed(waits)} "
                "(the operator table shows the same rows). Something reads a tensor's value on the host: an "
                ".item(), a float(), a print or an if on a tensor. Compute with tensor operations instead "
                "(torch.clamp, torch.where, or torch.nn.utils.clip_grad_norm_).")
    if copies:
        return (f"in {_STEPS} steps your step copied tensors to the host: {_listed(copies)}. On the CPU this copies "
                "nothing and leaves no trace in the profile, but on a GPU each is a device-to-host copy that "
                "waits for the device: keep the values on the device.")
    _kept(answer, flat_parameters(model))
    return None


# ------------------------------------------------------------------------------------------- ex-prof-ranges
RANGES = ("forward", "backward", "optimiser")
_FORWARD_OPS = ("aten::linear", "aten::addmm", "aten::mse_loss")
_BACKWARD_PREFIX = "autograd::engine::evaluate_function"
_OPTIMISER_PREFIX = "Optimizer.step#"


def _has_ranges(answer, device) -> str | None:
    import torch

    wrong = _a_function(answer, "train_step_in_ranges", "model, optimiser, x, y")
    if wrong:
        return wrong
    try:
        events, steps, copies, model = _profile_steps(answer, device)
    except _TrainedNothing:
        return _TRAINED_NOTHING
    except Exception as error:
        return _raised(f"training on {device}, your step", error) + "."
    cpu = torch.autograd.DeviceType.CPU
    ranges = [e for e in events if e.is_user_annotation and e.device_type == cpu and _within(e, steps)
              and not e.name.startswith("check: step ")]
    by_name: dict[str, list] = {name: [] for name in RANGES}
    others = Counter()
    for event in ranges:
        if event.name in by_name:
            by_name[event.name].append(event)
        elif not event.name.startswith("Optimizer."):  # the optimiser's own ranges are not the reader's
            others[event.name] += 1
    for name, found in by_name.items():
        if len(found) != _STEPS:
            seen = f" (other ranges found: {_listed(others)})" if others else ""
            return (f"in {_STEPS} profiled steps there are {len(found)} record_function range(s) named {name!r}: "
                    f"expected one per step{seen}. The names must be exactly {', '.join(map(repr, RANGES))}.")
    def inside(span, test) -> bool:
        return any(test(e.name) and _within(e, [span]) for e in events)

    for forward in by_name["forward"]:
        span = (forward.time_range.start, forward.time_range.end)
        if not inside(span, lambda n: n in _FORWARD_OPS):
            return ("a 'forward' range holds none of the model's layers (aten::linear) or the loss "
                    "(aten::mse_loss): compute the model's output and the loss inside it.")
        if inside(span, lambda n: n.startswith(_BACKWARD_PREFIX)):
            return ("a 'forward' range also holds the backward pass (autograd::engine rows): end it before "
                    "loss.backward().")
    for backward in by_name["backward"]:
        if not inside((backward.time_range.start, backward.time_range.end), lambda n: n.startswith(_BACKWARD_PREFIX)):
            return "a 'backward' range holds no backward pass (autograd::engine rows): call loss.backward() inside it."
    for optimiser in by_name["optimiser"]:
        span = (optimiser.time_range.start, optimiser.time_range.end)
        if not inside(span, lambda n: n.startswith(_OPTIMISER_PREFIX)):
            return ("an 'optimiser' range holds no Optimizer.step row: call optimiser.step() inside it.")
    waits = Counter(e.name for e in events if is_host_wait(e.name) and (_within(e, steps) or "DtoH" in e.name))
    waits.update(copies)
    if waits:
        return (f"in {_STEPS} profiled steps on {device} your step read values on the host: {_listed(waits)}. "
                "That is the lesson's log (loss.item()), which this step leaves out: on a GPU each read waits for "
                "the device, and the wait lands in your ranges. Return the loss as a tensor without its graph.")
    _kept(answer, flat_parameters(model))
    return None


register(
    Exercise("ex-prof-hidden-sync", _clipped_parameters, needs=("device",), rtol=1e-4, atol=1e-6,
             method=_never_waits, result=_output_of, writes="device code"),
    Exercise("ex-prof-ranges", _plain_parameters, needs=("device",), rtol=1e-4, atol=1e-6,
             method=_has_ranges, result=_output_of, writes="device code"),
)


# ------------------------------------------------------------------ ex-prof-predict-step
def _step_products(n: int, features: int, hidden: int, **_) -> Work:
    """The first layer's forward product and its weight gradient, in float32: 2 n features hidden FLOPs each; each
    reads two of x (n x features), the weights (hidden x features) and the hidden layer's output or its gradient
    (n x hidden), and writes the third."""
    return Work(2 * 2 * n * features * hidden, 2 * 4 * (n * features + features * hidden + n * hidden))


def _step_mistakes(n: int, features: int, hidden: int, **_) -> list[tuple[str, Work]]:
    right = _step_products(n, features, hidden)
    return [("counting the forward product only (the weights' gradient is a second product of the same size)",
             Work(right.flops / 2, right.bytes_moved / 2)),
            ("counting a multiply-add as one FLOP", Work(right.flops / 2, right.bytes_moved)),
            ("counting 8 bytes per value (float32 has 4)", Work(right.flops, 2 * right.bytes_moved)),
            ("counting the operands without the result", Work(right.flops, 2 * 4 * (n * features + features * hidden)))]


register(function_exercise("ex-prof-predict-step", _step_products, _step_mistakes,
                           needs=("device", "n", "features", "hidden")))
