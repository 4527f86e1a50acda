"""Chapter 7 (Apple MPS): each exercise's solution, and wrong answers with a word the check's message must
contain.

The code exercises run on the device the tests pick (the CPU here; MPS on a Mac, a GPU on a GPU runner).
Their wrong answers are the classic mistakes: a probe that lets a missing kernel's error escape, catches only
one kind of error, trusts any result that ran, compares exactly or against float32; a log-determinant that
forgets the pivots' sign or the diagonal's, takes the logarithm of an overflowing product, calls slogdet, or
leaves its result on the CPU."""

import torch

from gpukit.core.device import pick_device
from gpukit.exercises.mps import MPS_PIVOTS
from tests.exercises.cases import named
from tests.support.exercise_cases import (
    on_the_lessons_device,
    prediction_slips,
    scaled_prediction,
    solved_on_the_lessons_device,
)


# ---------------------------------------------------------------------------------------- ex-mps-works-on
def works_on(operation, example, device):
    """The lesson's solution."""
    try:
        got = operation(example.to(device)).cpu().double()
    except Exception:
        return False
    want = operation(example.double())
    return torch.allclose(got, want, rtol=1e-4, atol=1e-5)


def works_on_without_try(operation, example, device):
    got = operation(example.to(device)).cpu().double()
    return torch.allclose(got, operation(example.double()), rtol=1e-4, atol=1e-5)


def works_on_catching_only_not_implemented(operation, example, device):
    try:
        got = operation(example.to(device)).cpu().double()
    except NotImplementedError:
        return False
    return torch.allclose(got, operation(example.double()), rtol=1e-4, atol=1e-5)


def works_if_it_runs(operation, example, device):
    try:
        operation(example.to(device))
    except Exception:
        return False
    return True


def works_on_exactly(operation, example, device):
    try:
        got = operation(example.to(device)).cpu().double()
    except Exception:
        return False
    return torch.equal(got, operation(example.double()))


def works_on_against_float32(operation, example, device):
    try:
        got = operation(example.to(device)).cpu()
    except Exception:
        return False
    return torch.allclose(got, operation(example), rtol=1e-4, atol=1e-5)


def works_on_as_a_tensor(operation, example, device):
    try:
        got = operation(example.to(device)).cpu().double()
    except Exception:
        return torch.tensor(False)
    return torch.isclose(got, operation(example.double()), rtol=1e-4, atol=1e-5).all()


# -------------------------------------------------------------------------------------- ex-mps-lu-slogdet
def lu_slogdet(a):
    """The lesson's solution: the sign from the pivots and U's diagonal, log|det| as a sum of logarithms."""
    lu, pivots, _ = torch.linalg.lu_factor_ex(a)
    steps = torch.arange(1, a.shape[-1] + 1, dtype=pivots.dtype, device=a.device)
    swaps = (pivots != steps).sum(dim=-1)
    diagonal = torch.diagonal(lu, dim1=-2, dim2=-1)
    sign = (1 - 2 * (swaps % 2)).to(a.dtype) * torch.sign(diagonal).prod(dim=-1)
    return sign, torch.log(diagonal.abs()).sum(dim=-1)


def slogdet_without_pivots(a):
    lu, _, _ = torch.linalg.lu_factor_ex(a)
    diagonal = torch.diagonal(lu, dim1=-2, dim2=-1)
    return torch.sign(diagonal).prod(dim=-1), torch.log(diagonal.abs()).sum(dim=-1)


def slogdet_without_the_diagonals_signs(a):
    lu, pivots, _ = torch.linalg.lu_factor_ex(a)
    steps = torch.arange(1, a.shape[-1] + 1, dtype=pivots.dtype, device=a.device)
    sign = (1 - 2 * ((pivots != steps).sum(dim=-1) % 2)).to(a.dtype)
    return sign, torch.log(torch.diagonal(lu, dim1=-2, dim2=-1).abs()).sum(dim=-1)


def slogdet_of_the_product(a):
    sign, _ = lu_slogdet(a)
    lu, _, _ = torch.linalg.lu_factor_ex(a)
    return sign, torch.log(torch.diagonal(lu, dim1=-2, dim2=-1).prod(dim=-1).abs())


def slogdet_on_the_cpu(a):
    sign, logabsdet = lu_slogdet(a.cpu())
    return sign, logabsdet


def slogdet_in_float64(a):
    sign, logabsdet = lu_slogdet(a.double())
    return sign, logabsdet


def slogdet_wrong_answers():
    wrong = [
        (torch.linalg.slogdet, "slogdet itself"),
        (named("calls_slogdet", lambda a: torch.linalg.slogdet(a)), "lacks"),
        (lambda a: (torch.sign(torch.det(a)), torch.log(torch.det(a).abs())), "lacks"),
        (named("calls_det", lambda a: a.det()), "lacks"),
        (slogdet_without_pivots, "signs are wrong"),
        (slogdet_without_the_diagonals_signs, "signs are wrong"),
        (slogdet_of_the_product, "infinite"),
        (lambda a: lu_slogdet(a)[1], "expected a pair"),
        (lu_slogdet(torch.eye(3)[None]), "expected your function itself"),
    ]
    if pick_device() != "mps":  # MPS has no float64 at all: there the wrong answer raises instead
        wrong.append((slogdet_in_float64, "dtype is torch.float64"))
    if pick_device() != "cpu":  # only where the lesson's device is not the CPU can a result be on the wrong one
        wrong.append((slogdet_on_the_cpu, "expected it on"))
    return wrong


LU_BATCH = {"batch": 512, "k": 6}


def predicted_ms(peak_flops, bandwidth, batch=512, k=6):
    """The lesson's solution of ex-mps-predict-lu."""
    return 1e3 * max(batch * 2 * k**3 / 3 / peak_flops, batch * 4 * (k * k + k * k) / bandwidth)


SOLUTIONS = {
    "ex-mps-predict-lu": lambda: (predicted_ms, on_the_lessons_device(**LU_BATCH)),
    "ex-mps-pivot-sign": lambda: ((-1) ** sum(p != i for i, p in enumerate(MPS_PIVOTS, start=1)), {}),
    **solved_on_the_lessons_device({"ex-mps-works-on": works_on, "ex-mps-lu-slogdet": lu_slogdet}),
}

WRONG_ANSWERS = {
    "ex-mps-predict-lu": lambda: [
        (scaled_prediction(predicted_ms, bytes_share=0.5), "reads only"),
        (scaled_prediction(predicted_ms, bytes_share=2), "8 bytes per value"),
        (scaled_prediction(predicted_ms, flops_share=0.5), "multiply-add as one FLOP"),
        (scaled_prediction(predicted_ms, batch=1), "one matrix instead of the batch"),
        *prediction_slips(predicted_ms),
    ],
    "ex-mps-pivot-sign": lambda: [
        (1, "too large"),  # an even count of swaps: counting pivots equal to their step instead
        ("minus one", "expected a number"),
        (torch.tensor(MPS_PIVOTS), "expected a number"),  # the pivots themselves
    ],
    "ex-mps-works-on": lambda: [
        (works_on_without_try, "raised NotImplementedError"),
        (works_on_catching_only_not_implemented, "raised RuntimeError"),
        (works_if_it_runs, "float64"),
        (works_on_exactly, "not exactly"),
        (works_on_against_float32, "not in float32"),
        (works_on_as_a_tensor, "return True or False"),
        (works_on(torch.linalg.inv, torch.eye(2), "cpu"), "expected your function itself"),
    ],
    "ex-mps-lu-slogdet": slogdet_wrong_answers,
}


# The planted device mistakes (tests/exercises/test_planted_device_mistakes.py).
DEVICE_MISTAKES = {
    "ex-mps-works-on": {
        "works_on_without_try": "ran the operation on the device without try: one the device lacks raises "
                                "NotImplementedError instead of giving False",
        "works_if_it_runs": "took 'it ran on the device' for 'it works', never comparing the device's result with "
                            "the CPU's",
    },
    "ex-mps-lu-slogdet": {
        "calls_slogdet": "called torch.linalg.slogdet, which MPS lacks: it fails there (or falls back to the CPU)",
        "calls_det": "called Tensor.det, which MPS lacks as well",
    },
}
