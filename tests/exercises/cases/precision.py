"""Chapter 15 (Precision, the data pipeline and CUDA graphs): each exercise's solution and wrong answers, for
tests/exercises/test_every_exercise.py.

Every answer is a function the check runs on the chosen device (a GPU where the tests have one, else the CPU). The
wrong answers are the classic mistakes: float16 without scaling (it overflows), the product left in float32, the
scales not undone; a step without autocast, autocast for another device type or dtype, the model cast to
bfloat16, the backward pass inside autocast, the loss read on the host; a loader without workers, with memory
pinned where there is no CUDA, with batches dropped or in the same order every epoch."""

import math

import torch
from torch import nn
from torch.utils.data import DataLoader

from gpukit.core.device import pick_device
from tests.exercises.cases import named
from tests.support.exercise_cases import (
    on_the_lessons_device,
    prediction_slips,
    scaled_prediction,
    solved_on_the_lessons_device,
)


# ------------------------------------------------------------------------------------------ ex-prec-fp16-scaled
def scaled_fp16_matmul(a, b):
    scale_a = 2.0 ** torch.ceil(torch.log2(a.abs().max()))  # powers of two: exact
    scale_b = 2.0 ** torch.ceil(torch.log2(b.abs().max()))
    product = (a / scale_a).half() @ (b / scale_b).half()
    return product.float() * (scale_a * scale_b)


def _scales(a, b):
    """The solution's scales of ``a`` and ``b``: powers of two, made on the device."""
    return 2.0 ** torch.ceil(torch.log2(a.abs().max())), 2.0 ** torch.ceil(torch.log2(b.abs().max()))


def scaled_under_autocast(a, b):  # the same, with autocast making the float16 product
    scale_a, scale_b = _scales(a, b)
    with torch.autocast(a.device.type, dtype=torch.float16):
        product = (a / scale_a) @ (b / scale_b)
    return product.float() * (scale_a * scale_b)


def _unscaled(a, b):  # straight to float16: the product overflows
    return (a.half() @ b.half()).float()


def _in_float32(a, b):  # scaled, but never in float16
    scale_a, scale_b = _scales(a, b)
    return ((a / scale_a) @ (b / scale_b)) * (scale_a * scale_b)


def _scales_not_undone(a, b):
    scale_a, scale_b = _scales(a, b)
    return ((a / scale_a).half() @ (b / scale_b).half()).float()


def _undone_in_float16(a, b):  # the scales multiplied back before leaving float16
    scale_a, scale_b = _scales(a, b)
    product = (a / scale_a).half() @ (b / scale_b).half()
    return (product * (scale_a * scale_b).half()).float()


def scales_read_on_the_host(a, b):  # right values, but each scale read with .item(): the host waits for the device
    scale_a = 2.0 ** math.ceil(math.log2(a.abs().max().item()))
    scale_b = 2.0 ** math.ceil(math.log2(b.abs().max().item()))
    product = (a / scale_a).half() @ (b / scale_b).half()
    return product.float() * (scale_a * scale_b)


def _one_scale_undone(a, b):
    scale_a, scale_b = _scales(a, b)
    product = (a / scale_a).half() @ (b / scale_b).half()
    return product.float() * scale_a


# ---------------------------------------------------------------------------------------- ex-prec-autocast-step
def autocast_step(model, optimiser, x, y):
    optimiser.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.bfloat16):
        loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimiser.step()
    return loss.detach()


def _stepping(*, autocast=True, device_type=None, dtype=torch.bfloat16, backward_inside=False,
              record=lambda loss: loss.detach(), cast_model=None, zero_grad=True):
    """A training step with one of the classic mistakes, chosen by keyword."""

    def step(model, optimiser, x, y):
        if cast_model is not None:
            model.to(cast_model)
            x, y = x.to(cast_model), y.to(cast_model)
        if zero_grad:
            optimiser.zero_grad()
        with torch.autocast(device_type or x.device.type, dtype=dtype, enabled=autocast):
            loss = nn.functional.mse_loss(model(x), y)
            if backward_inside:
                loss.backward()
        if not backward_inside:
            loss.backward()
        optimiser.step()
        return record(loss)

    return step


def _other_device_type():
    return "cpu" if pick_device().startswith(("cuda", "mps")) else "cuda"


# ------------------------------------------------------------------------------------------------ ex-prec-loader
def make_loader(dataset, device):
    return DataLoader(dataset, batch_size=32, shuffle=True, num_workers=2, prefetch_factor=4,
                      pin_memory=torch.device(device).type == "cuda", persistent_workers=True)


def _loader(**settings):
    chosen = {"batch_size": 32, "shuffle": True, "num_workers": 2, "prefetch_factor": 4}
    chosen.update(settings)

    def build(dataset, device):
        return DataLoader(dataset, pin_memory=torch.device(device).type == "cuda", **chosen)

    return build


def _wrong_pinning(dataset, device):  # pinned where there is no CUDA, or not pinned on CUDA
    return DataLoader(dataset, batch_size=32, shuffle=True, num_workers=2, prefetch_factor=4,
                      pin_memory=torch.device(device).type != "cuda")


def _batches(dataset, device):  # returns the batches, not the loader
    return list(DataLoader(dataset, batch_size=32, shuffle=True))


# ------------------------------------------------------------------------------------------------ ex-prec-fp8-rows
E4M3 = torch.float8_e4m3fn


def to_fp8_rows(t):
    scales = t.abs().amax(dim=1, keepdim=True) / 448  # float8_e4m3fn's largest value
    return (t / scales).to(E4M3), scales


def to_fp8_rows_powers_of_two(t):  # each scale a power of two: the largest value lands in (224, 448]
    scales = 2.0 ** torch.ceil(torch.log2(t.abs().amax(dim=1, keepdim=True) / 448))
    return (t / scales).to(E4M3), scales


def _fp8_rows(scales_of, to=E4M3):
    """An answer with the scales ``scales_of(t)`` (whatever their shape), the values divided by them."""
    def answer(t):
        scales = scales_of(t)
        return (t / scales).to(to), scales

    return answer


def scales_row_by_row_on_the_host(t):  # right values, but each row's scale read on the host: a wait per row
    scales = torch.tensor([row.abs().max().item() / 448 for row in t]).unsqueeze(1)
    return (t / scales.to(t.device)).to(E4M3), scales


def _divided_by_other_scales(t):  # the scales returned are right, but the values were divided by twice them
    scales = t.abs().amax(dim=1, keepdim=True) / 448
    return (t / (2 * scales)).to(E4M3), scales


SIZE = 256


def predicted_ms(peak_flops, bandwidth, size=SIZE):
    """The lesson's solution of ex-prec-predict-bf16."""
    return 1e3 * max(2 * size**3 / peak_flops, 3 * 2 * size**2 / bandwidth)


SOLUTIONS = {
    "ex-prec-predict-bf16": lambda: (predicted_ms, on_the_lessons_device(size=SIZE)),
    **solved_on_the_lessons_device({"ex-prec-fp16-scaled": scaled_fp16_matmul, "ex-prec-autocast-step": autocast_step,
                                    "ex-prec-loader": make_loader, "ex-prec-fp8-rows": to_fp8_rows}),
}


WRONG_ANSWERS = {
    "ex-prec-predict-bf16": lambda: [
        (scaled_prediction(predicted_ms, flops_share=0.5), "multiply-add as one FLOP"),
        (scaled_prediction(predicted_ms, bytes_share=2), "4 bytes per value"),
        (scaled_prediction(predicted_ms, bytes_share=1 / 3), "one matrix's bytes"),
        *prediction_slips(predicted_ms),
    ],
    "ex-prec-fp16-scaled": lambda: [
        (_unscaled, "float16 overflowed"),
        (_in_float32, "multiplied matrices in float32"),
        (_scales_not_undone, "values differ"),
        (_undone_in_float16, "inf or nan"),
        (_one_scale_undone, "values differ"),
        (lambda a, b: (a @ b).half(), "float32"),  # the product in float32, then rounded
        ("scaled_fp16_matmul", "expected your function itself"),
        (scales_read_on_the_host, "meta device"),
    ],
    "ex-prec-autocast-step": lambda: [
        (_stepping(autocast=False), "computed in float32"),
        (named("autocast_for_another_device_type", _stepping(device_type=_other_device_type())),
         "name the device type"),
        (_stepping(dtype=torch.float16), "computed in float16"),
        (_stepping(backward_inside=True), "autocast was still on"),
        (_stepping(autocast=False, cast_model=torch.bfloat16), "parameters are bfloat16"),
        (_stepping(record=lambda loss: loss.item()), "returned float"),
        (_stepping(record=lambda loss: loss), "with its graph"),
        (_stepping(record=lambda loss: loss.detach().bfloat16()), "bfloat16 loss"),
        (_stepping(zero_grad=False), "values differ"),
        (lambda model, optimiser, x, y: None, "trains nothing yet"),  # the placeholder
    ],
    "ex-prec-fp8-rows": lambda: [
        (lambda t: (t.to(E4M3), torch.ones(t.shape[0], 1)), "saturates"),  # no scale at all
        (_fp8_rows(lambda t: t.abs().amax() / 448), "one scale per row"),  # one scale for the whole matrix
        (_fp8_rows(lambda t: (t.abs().amax() / 448).expand(t.shape[0], 1)), "wastes"),  # the same, per row
        (_fp8_rows(lambda t: t.abs().amax(dim=0, keepdim=True) / 448), "one scale per row"),  # per column
        (_fp8_rows(lambda t: t.abs().amax(dim=1, keepdim=True)), "wastes"),  # the largest value sent to 1
        (_fp8_rows(lambda t: t.abs().amax(dim=1, keepdim=True) / 1024), "saturates"),  # too small a scale
        (_fp8_rows(lambda t: 448 / t.abs().amax(dim=1, keepdim=True)), "saturates"),  # the inverse
        (_fp8_rows(lambda t: t.abs().amax(dim=1, keepdim=True).double() / 448), "float32"),
        (_fp8_rows(lambda t: t.abs().amax(dim=1, keepdim=True) / 448, to=torch.bfloat16), "float8_e4m3fn"),
        (lambda t: to_fp8_rows(t)[0], "not a pair"),
        # The scales returned are right but the values were divided by other ones: what comes back is wrong.
        (_divided_by_other_scales, "divide each row by the very scale"),
        (lambda t: None, "NoneType"),  # the placeholder
        (scales_row_by_row_on_the_host, "meta device" if pick_device() == "cpu" else "scales on cpu"),
    ],
    "ex-prec-loader": lambda: [
        (_loader(num_workers=0, prefetch_factor=None), "num_workers=0"),
        (_loader(prefetch_factor=2), "prefetch_factor"),
        (_loader(batch_size=64), "batches of 64"),
        (_loader(shuffle=False), "shuffle=True"),
        (_wrong_pinning, "pin"),
        (_loader(drop_last=True), "drop_last=True"),
        (_batches, "not a torch.utils.data.DataLoader"),
        (lambda dataset, device: None, "NoneType"),  # the placeholder
    ],
}


# The planted device mistakes (tests/exercises/test_planted_device_mistakes.py).
DEVICE_MISTAKES = {
    "ex-prec-fp16-scaled": {
        "scales_read_on_the_host": "worked out the scales with .item() and Python's math: each read waits for the "
                                   "device (the exercise's hint: the scale is a tensor on the device, no .item())",
    },
    "ex-prec-autocast-step": {
        "autocast_for_another_device_type": "named another device type in torch.autocast than the one the model "
                                            "is on, so autocast changes nothing there",
    },
    "ex-prec-fp8-rows": {
        "scales_row_by_row_on_the_host": "worked out each row's scale in a Python loop with .item(): a wait for the "
                                         "device per row, and the scales made on the host",
    },
    "ex-prec-loader": {
        "_wrong_pinning": "set pin_memory the wrong way round: not pinned where batches go to a CUDA GPU (slower "
                          "copies that cannot overlap), or pinned where there is no CUDA",
    },
}
