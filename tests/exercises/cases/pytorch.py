"""Chapter 4 (PyTorch on the GPU): each exercise's solution and wrong answers, for
tests/exercises/test_every_exercise.py.

Every answer is a function the check runs on the chosen device (a GPU where the tests have one, else the CPU). The
wrong answers are the classic mistakes: a constant left on the host, a ``.item()`` (or ``float``, ``print``,
``.cpu()``) in the training loop, losses that keep their graphs, a Python ``if`` on a tensor's value inside a
compiled function, a loop over small problems, the wrong dtype or shape."""

import torch
from torch import nn

from gpukit.core.device import pick_device
from gpukit.exercises.pytorch import _small_regression
from tests.exercises.cases import named
from tests.support.exercise_cases import (
    on_the_lessons_device,
    prediction_slips,
    roofline_prediction,
    solved_on_the_lessons_device,
)


# ----------------------------------------------------------------------------------- ex-torch-fix-mismatch
def standardise_anywhere(batch):
    offset = torch.tensor([0.5, -1.0, 2.0], device=batch.device)
    scale = torch.tensor([0.1, 0.2, 0.4], device=batch.device)
    return (batch - offset) / scale


def _constants(**options):
    """The exercise's offset and scale, made with ``options``."""
    return torch.tensor([0.5, -1.0, 2.0], **options), torch.tensor([0.1, 0.2, 0.4], **options)


def standardise_on_the_host(batch):  # the lesson's standardise: works on a CPU-only run, fails on a GPU
    offset, scale = _constants()
    return (batch - offset) / scale


def standardise_on_a_fixed_device(batch):  # the lesson's device, not the batch's: fails for any other caller
    offset, scale = _constants(device=pick_device())
    return (batch - offset) / scale


def standardise_on_the_cpu(batch):  # moves the batch to the constants instead
    offset, scale = _constants()
    return (batch.cpu() - offset) / scale


def standardise_in_float64(batch):
    offset, scale = _constants(dtype=torch.float64, device=batch.device)
    return (batch - offset) / scale


def standardise_backwards(batch):  # scale and offset swapped
    offset, scale = _constants(device=batch.device)
    return batch / scale - offset


# ----------------------------------------------------------------------------------------- ex-torch-no-item
def _training(record, finish=list, each_step=None):
    """The lesson's loop, recording each loss with ``record(loss)`` and returning ``finish(losses)``; where given,
    ``each_step(step, loss)`` runs after each step, and stops the loop where it returns something true."""

    def train(model, optimiser, x, y, steps):
        losses = []
        for step in range(steps):
            optimiser.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimiser.step()
            losses.append(record(loss))
            if each_step is not None and each_step(step, loss):
                break
        return finish(losses)

    return train


# The solution: each loss kept on the device, without its graph (loss.detach()), and the losses stacked at the end.
train_without_waiting = named("train_without_waiting", _training(lambda loss: loss.detach(), torch.stack))


def _print_every_fifth(step, loss):
    if step % 5 == 0:
        print(f"step {step}: loss {loss:.4f}")


_printing = named("_printing", _training(lambda loss: loss.detach(), torch.stack, _print_every_fifth))
# An if on a tensor: the host must know the value.
_stopping_early = named("_stopping_early", _training(lambda loss: loss.detach(), torch.stack,
                                                     lambda step, loss: loss < 1e-6))


# ---------------------------------------------------------------------------------- ex-torch-compile-break
def rescaled_in_one_graph(x):
    peak = x.abs().max()
    x = x / torch.clamp(peak, min=1)
    return torch.exp(x) + 3 * torch.sin(x)


def rescaled_with_where(x):
    peak = x.abs().max()
    x = torch.where(peak > 1, x / peak, x)
    return torch.exp(x) + 3 * torch.sin(x)


def rescaled_with_the_if(x):  # the exercise's function as given
    peak = x.abs().max()
    if peak > 1:
        x = x / peak
    return torch.exp(x) + 3 * torch.sin(x)


def rescaled_with_item(x):  # the branch on a Python number instead: still a break
    peak = x.abs().max().item()
    if peak > 1:
        x = x / peak
    return torch.exp(x) + 3 * torch.sin(x)


def rescaled_always(x):  # no branch, but divides also when every |x| <= 1
    x = x / x.abs().max()
    return torch.exp(x) + 3 * torch.sin(x)


def rescaled_summed(x):  # one number instead of one value per element
    return rescaled_in_one_graph(x).sum()


# ------------------------------------------------------------------------------------ ex-torch-batched-fit
def fit_batched(times, values):
    vander = torch.stack([torch.ones_like(times), times, times * times], dim=-1)
    return torch.linalg.solve(vander.mT @ vander, vander.mT @ values.unsqueeze(-1)).squeeze(-1)


def fit_in_a_loop(times, values):  # the exercise's loop as given
    fits = []
    for t, y in zip(times, values, strict=True):
        vander = torch.stack([torch.ones_like(t), t, t * t], dim=-1)
        fits.append(torch.linalg.solve(vander.T @ vander, vander.T @ y))
    return torch.stack(fits)


def _solved(vander, values):
    return torch.linalg.solve(vander.mT @ vander, vander.mT @ values.unsqueeze(-1))


def fit_with_powers_on_the_host(times, values):
    vander = times.unsqueeze(-1) ** torch.arange(3)  # on the host: fails for data on a GPU
    return _solved(vander, values).squeeze(-1)


def fit_without_squeezing(times, values):
    return _solved(torch.stack([torch.ones_like(times), times, times * times], dim=-1), values)


def fit_highest_power_first(times, values):  # as torch.vander orders the columns: t**2, t, 1
    return _solved(torch.stack([times * times, times, torch.ones_like(times)], dim=-1), values).squeeze(-1)


BATCH, K = 2_000, 8


def predicted_ms(peak_flops, bandwidth, batch=BATCH, k=K):
    """The lesson's solution of ex-torch-predict-bmm."""
    return 1e3 * max(2 * batch * k**3 / peak_flops, 3 * 4 * batch * k * k / bandwidth)


SOLUTIONS = {
    "ex-torch-predict-bmm": lambda: (predicted_ms, on_the_lessons_device(batch=BATCH, k=K)),
    **solved_on_the_lessons_device({"ex-torch-fix-mismatch": standardise_anywhere,
                                    "ex-torch-no-item": train_without_waiting,
                                    "ex-torch-compile-break": rescaled_in_one_graph,
                                    "ex-torch-batched-fit": fit_batched}),
}


WRONG_ANSWERS = {
    "ex-torch-predict-bmm": lambda: [
        (roofline_prediction(BATCH * K**3, 12 * BATCH * K * K), "multiply-add"),
        (roofline_prediction(2 * K**3, 12 * K * K), "one matrix's work"),
        (roofline_prediction(2 * BATCH * K**3, 4 * BATCH * K * K), "one stack only"),
        *prediction_slips(predicted_ms, times=1e3, itself=True),
    ],
    "ex-torch-fix-mismatch": lambda: [
        (standardise_on_the_host, "made on a fixed device"),
        (standardise_on_a_fixed_device, "meta device"),
        (standardise_on_the_cpu, "meta device"),
        (standardise_in_float64, "dtype is torch.float64"),
        (standardise_backwards, "values differ"),
        (standardise_anywhere(torch.ones(5, 3)), "expected your function itself"),
    ],
    "ex-torch-no-item": lambda: [
        (named("train_reading_item", _training(lambda loss: loss.item())),
         "read a tensor's value on the host 12 time(s) (.item() x12)"),
        (named("train_reading_item_then_copying_back",
               _training(lambda loss: loss.item(), lambda losses: torch.tensor(losses, device=pick_device()))),
         ".item() x12"),
        (named("train_reading_float", _training(float)), "float() x12"),
        (named("train_copying_to_the_host", _training(lambda loss: loss.detach().cpu(), torch.stack)), ".cpu() x12"),
        (_printing, "f-string or print"),
        (_stopping_early, "if/bool() x12"),
        (_training(lambda loss: loss, torch.stack), "requires_grad is True"),
        (_training(lambda loss: loss.detach()), "returned a list"),
        (_training(lambda loss: loss.detach(), lambda losses: torch.stack(losses).double()), "dtype is torch.float64"),
        (_training(lambda loss: loss.detach(), lambda losses: None), "returned None"),
        (train_without_waiting(*_small_regression("cpu"), 3), "expected your function itself"),
    ],
    "ex-torch-compile-break": lambda: [
        (rescaled_with_the_if, "breaks your function's graph 1 time(s)"),
        (rescaled_with_item, "breaks your function's graph"),
        (rescaled_always, "values differ"),
        (rescaled_summed, "returned shape ()"),
        (lambda x: None, "returned None"),
        (lambda x: rescaled_in_one_graph(x).tolist(), "returned list"),
    ],
    "ex-torch-batched-fit": lambda: [
        (fit_in_a_loop, "one data set at a time"),
        (fit_with_powers_on_the_host, "made on the host"),
        (fit_without_squeezing, "shape is (48, 3, 1)"),
        (fit_highest_power_first, "values differ"),
        (lambda times, values: fit_batched(times, values).double(), "dtype is torch.float64"),
    ],
}


# The planted device mistakes (tests/exercises/test_planted_device_mistakes.py): wrong answers above that a CPU
# alone would not show, each rejected by its check on the CPU too.
DEVICE_MISTAKES = {
    "ex-torch-fix-mismatch": {
        "standardise_on_the_host": "made the constants with torch.tensor and no device=, so they stay on the host "
                                   "while the batch is on the GPU",
        "standardise_on_a_fixed_device": "made the constants on the lesson's device rather than the batch's, so a "
                                         "batch anywhere else meets tensors on another device",
        "standardise_on_the_cpu": "moved the batch to the host (.cpu()) to meet the constants, so the work and the "
                                  "result leave the GPU",
    },
    "ex-torch-no-item": {
        "train_reading_item": "read each loss with .item(), which makes the host wait for the device at every step",
        "train_reading_item_then_copying_back": "read each loss with .item() and copied the list back to the "
                                                "device: a wait at every step, and a copy at the end",
        "train_reading_float": "turned each loss into a Python float, which waits for the device at every step",
        "train_copying_to_the_host": "copied each loss to the host with .cpu(), a wait for the device at every step",
        "_printing": "printed the loss in an f-string, which reads its value on the host",
        "_stopping_early": "stopped on `if loss < ...`, a Python if that needs the loss's value on the host",
    },
    "ex-torch-compile-break": {
        "rescaled_with_the_if": "branched with a Python if on a tensor, which reads its value on the host and "
                                "splits the compiled graph",
        "rescaled_with_item": "read the peak with .item() inside the compiled function: a wait for the device and a "
                              "graph break",
    },
    "ex-torch-batched-fit": {
        "fit_with_powers_on_the_host": "made the exponents with torch.arange and no device=, a host tensor meeting "
                                       "data on the GPU",
    },
}
