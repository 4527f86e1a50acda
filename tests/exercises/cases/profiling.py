"""Chapter 14 (Profiling): each exercise's solution and wrong answers, for tests/exercises/test_every_exercise.py.

Every answer is a training step that the check runs under torch.profiler on the chosen device (a GPU where the
tests have one, else the CPU). The wrong answers are the classic mistakes: the hidden synchronisation left in (a
Python ``if`` on a tensor), moved rather than removed (``float()``, ``.item()``, a copy to the host), or removed
with the clipping it served; ranges misnamed, empty, or wrapped around the wrong phase; a step that no longer
trains the same."""

import torch
from torch import nn
from torch.profiler import record_function

from tests.exercises.cases import named
from tests.support.exercise_cases import (
    on_the_lessons_device,
    prediction_slips,
    scaled_prediction,
    solved_on_the_lessons_device,
)


# ------------------------------------------------------------------------------------- ex-prof-hidden-sync
def clipped_step_without_waiting(model, optimiser, x, y, max_norm=1.0):
    optimiser.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimiser.step()
    return loss.detach()


def _clipping(scale_of, *, record=lambda loss: loss.detach()):
    """A step whose gradients are multiplied by ``scale_of(norm, max_norm)`` (``None``: left alone)."""

    def step(model, optimiser, x, y, max_norm=1.0):
        optimiser.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        grads = [p.grad for p in model.parameters()]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        scale = scale_of(norm, max_norm)
        if scale is not None:
            for g in grads:
                g.mul_(scale)
        optimiser.step()
        return record(loss)

    return step


def _clamped(norm, max_norm):  # by hand, without a wait: scale by min(1, max_norm / norm)
    return torch.clamp(max_norm / norm, max=1.0)


clipped_with_clamp = named("clipped_with_clamp", _clipping(_clamped))  # another right answer


def _as_given(norm, max_norm):  # the exercise's step: a Python if on a tensor
    return max_norm / norm if norm > max_norm else None


def _with_float(norm, max_norm):  # the wait moved into float(), not removed
    return min(1.0, max_norm / float(norm))


def _always(norm, max_norm):  # no if, and no limit: scales small gradients up too
    return max_norm / norm


def _never(norm, max_norm):  # the sync removed with the clipping
    return None


def _old_signature(model, optimiser, x, y):
    return clipped_step_without_waiting(model, optimiser, x, y)


# ------------------------------------------------------------------------------------------- ex-prof-ranges
def train_step_in_ranges(model, optimiser, x, y):
    optimiser.zero_grad()
    with record_function("forward"):
        loss = nn.functional.mse_loss(model(x), y)
    with record_function("backward"):
        loss.backward()
    with record_function("optimiser"):
        optimiser.step()
    return loss.detach()


def _laid_out(*layout):
    """A training step whose phases run as ``layout`` says: each item a phase ("zero_grad", "forward", "backward",
    "step"), or a pair (name, [items]) of items run inside ``record_function(name)``."""

    def step(model, optimiser, x, y):
        losses = []

        def run(items):
            for item in items:
                if isinstance(item, tuple):
                    with record_function(item[0]):
                        run(item[1])
                elif item == "zero_grad":
                    optimiser.zero_grad()
                elif item == "forward":
                    losses.append(nn.functional.mse_loss(model(x), y))
                elif item == "backward":
                    losses[-1].backward()
                else:
                    optimiser.step()

        run(layout)
        return losses[-1].detach()

    return step


_plain = _laid_out("zero_grad", "forward", "backward", "step")
_capitalised = _laid_out("zero_grad", ("Forward", ["forward"]), ("Backward", ["backward"]), ("Optimiser", ["step"]))
# The forward range marks nothing: the work runs after it.
_empty_ranges = _laid_out("zero_grad", ("forward", []), "forward", ("backward", ["backward"]), ("optimiser", ["step"]))
_forward_holds_backward = _laid_out("zero_grad", ("forward", ["forward", ("backward", ["backward"])]),
                                    ("optimiser", ["step"]))
# The optimiser's range holds its zero_grad, not its step.
_optimiser_outside = _laid_out(("optimiser", ["zero_grad"]), ("forward", ["forward"]), ("backward", ["backward"]),
                               "step")
# No zero_grad: gradients pile up from step to step.
_without_zero_grad = _laid_out(("forward", ["forward"]), ("backward", ["backward"]), ("optimiser", ["step"]))


def returning_the_loss_read_on_the_host(model, optimiser, x, y):  # the lesson's log kept: a wait every step
    return train_step_in_ranges(model, optimiser, x, y).item()


STEP = {"n": 1024, "features": 32, "hidden": 128}


def predicted_ms(peak_flops, bandwidth, n=1024, features=32, hidden=128, products=2, value_bytes=4, result=True):
    """The lesson's solution of ex-prof-predict-step, and (other arguments) its classic mistakes."""
    flops = products * 2 * n * features * hidden
    one = value_bytes * (n * features + features * hidden + (n * hidden if result else 0))
    return 1e3 * max(flops / peak_flops, products * one / bandwidth)


SOLUTIONS = {
    "ex-prof-predict-step": lambda: (predicted_ms, on_the_lessons_device(**STEP)),
    **solved_on_the_lessons_device({"ex-prof-hidden-sync": clipped_step_without_waiting,
                                    "ex-prof-ranges": train_step_in_ranges}),
}


WRONG_ANSWERS = {
    "ex-prof-predict-step": lambda: [
        (scaled_prediction(predicted_ms, products=1), "forward product only"),
        (scaled_prediction(predicted_ms, flops_share=0.5), "multiply-add as one FLOP"),
        (scaled_prediction(predicted_ms, value_bytes=8), "8 bytes per value"),
        (scaled_prediction(predicted_ms, result=False), "without the result"),
        *prediction_slips(predicted_ms),
    ],
    "ex-prof-hidden-sync": lambda: [
        (named("clipping_with_a_python_if", _clipping(_as_given)), "waited for the device: aten::"),
        (named("clipping_with_float", _clipping(_with_float)), "aten::_local_scalar_dense"),
        (_clipping(_never), "values differ"),
        (_clipping(_always), "values differ"),
        (named("recording_the_loss_with_item",
               _clipping(_clamped, record=lambda loss: loss.item())), "aten::item"),
        (named("copying_the_loss_to_the_host",
               _clipping(_clamped, record=lambda loss: loss.detach().cpu())), "host"),
        (_old_signature, "max_norm"),
        ("clipped_step_without_waiting", "expected your function itself"),
        (lambda model, optimiser, x, y, max_norm=1.0: None, "trains nothing yet"),  # the placeholder
    ],
    "ex-prof-ranges": lambda: [
        (_plain, "0 record_function range(s) named 'forward'"),
        (_capitalised, "Forward x6"),
        (_empty_ranges, "holds none of the model's layers"),
        (_forward_holds_backward, "also holds the backward pass"),
        (_optimiser_outside, "no Optimizer.step row"),
        (_without_zero_grad, "values differ"),
        (returning_the_loss_read_on_the_host, "read values on the host"),
        (lambda model, optimiser, x, y: None, "trains nothing yet"),  # the placeholder
    ],
}


# The planted device mistakes (tests/exercises/test_planted_device_mistakes.py).
DEVICE_MISTAKES = {
    "ex-prof-hidden-sync": {
        "clipping_with_a_python_if": "kept the step as given: `if norm > max_norm` reads the norm on the host, a "
                                     "wait for the device at every step",
        "clipping_with_float": "moved the wait into float(norm) instead of removing it",
        "recording_the_loss_with_item": "removed the if, but read the loss with .item(): a wait for the device",
        "copying_the_loss_to_the_host": "removed the if, but copied the loss to the host with .cpu(): a wait too",
    },
    "ex-prof-ranges": {
        "returning_the_loss_read_on_the_host": "kept the lesson's log, returning loss.item(): on a GPU the host "
                                               "waits for the device at every step, inside the ranges",
    },
}
