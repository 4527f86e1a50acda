"""The checks of chapter 15's exercises beyond their cases (tests/exercises/cases/precision.py): other right answers
pass, the check's data make float16 overflow unless scaled, and a check leaves the reader's session as it was."""

import pytest
import torch
from torch.utils.data import DataLoader

from gpukit.core.device import pick_device
from gpukit.exercises import check
from gpukit.exercises import precision as answers
from tests.exercises.cases.precision import autocast_step, make_loader, scaled_fp16_matmul, scaled_under_autocast
from tests.support.exercise_cases import on_the_cpu  # noqa: F401 - the autouse fixture


def test_float16_under_autocast_passes():
    result = check("ex-prec-fp16-scaled", scaled_under_autocast, device=pick_device())
    assert result, result.message


def test_the_checks_matrices_overflow_float16_and_scale_exactly():
    a, b = answers._large_matrices("cpu")
    assert torch.isinf(a.half() @ b.half()).any()
    exact = a.double() @ b.double()
    assert exact.abs().max() > torch.finfo(torch.float16).max
    assert torch.equal(scaled_fp16_matmul(a, b).double(), exact)


# The loader check forks its workers in a test process that may have imported JAX for another file's tests; the
# lesson's kernel forks them with no JAX threads (tests/exercises/test_every_exercise.py filters the same for
# ex-prec-loader).
FORKED_BESIDE_JAX = pytest.mark.filterwarnings(r"ignore:os\.fork\(\) was called:RuntimeWarning")


@FORKED_BESIDE_JAX
def test_a_loader_without_persistent_workers_passes():
    def loader(dataset, device):
        return DataLoader(dataset, batch_size=32, shuffle=True, num_workers=2, prefetch_factor=4,
                          pin_memory=torch.device(device).type == "cuda")

    result = check("ex-prec-loader", loader, device=pick_device())
    assert result, result.message


@FORKED_BESIDE_JAX
def test_a_check_leaves_the_random_stream_alone():
    torch.manual_seed(321)
    expected = torch.rand(3)
    torch.manual_seed(321)
    for label, answer in (("ex-prec-fp16-scaled", scaled_fp16_matmul), ("ex-prec-autocast-step", autocast_step),
                          ("ex-prec-loader", make_loader)):
        assert check(label, answer, device=pick_device()), label
    assert torch.equal(torch.rand(3), expected)
    assert not torch.is_autocast_enabled("cpu")


def test_a_function_that_raises_is_reported_with_its_error():
    def broken(a, b):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    result = check("ex-prec-fp16-scaled", broken, device=pick_device())
    assert not result and "raised RuntimeError: mat1 and mat2 shapes cannot be multiplied" in result.message
