import numpy as np
import pytest
import torch

from gpukit.checks import check


def test_placeholder_answer_asks_for_an_answer():
    result = check(None, 3)
    assert not result
    assert "replace the placeholder" in repr(result)


def test_scalar_answers():
    assert check(19_267_584, 19_267_584.0)
    too_big = check(20_000_000, 19_267_584)
    assert not too_big and "too large" in too_big.message
    # The verdict must not give the expected value away.
    assert "19,267,584" not in too_big.message
    assert not check("12", 12)
    assert check(np.float32(0.5), 0.5)
    assert check(torch.tensor(2.0), 2.0)


def test_wrong_kind_library_shape_dtype_and_device_are_named():
    expected = torch.zeros(2, 3)
    assert "expected an array" in check(5, expected).message
    assert "torch array, got a numpy" in check(np.zeros((2, 3), np.float32), expected).message
    assert "shape is (3, 2)" in check(torch.zeros(3, 2), expected).message
    assert "dtype is torch.float64" in check(torch.zeros(2, 3, dtype=torch.float64), expected).message
    on_meta = torch.zeros(2, 3, device="meta")
    assert "on meta" in check(on_meta, expected).message


def test_wrong_values_point_at_the_first_difference():
    expected = np.arange(6.0).reshape(2, 3)
    answer = expected.copy()
    answer[1, 2] = 99
    result = check(answer, expected)
    assert not result
    assert "1 of 6 values differ" in result.message and "(1, 2)" in result.message


def test_tolerances_are_applied():
    expected = np.ones(4, np.float32)
    assert check(expected + 1e-7, expected)
    assert not check(expected + 1e-3, expected)
    assert check(expected + 1e-3, expected, rtol=1e-2)


def test_correct_array_passes_and_says_so():
    result = check(torch.ones(2, 2), torch.ones(2, 2))
    assert result and repr(result).startswith("Correct:")


@pytest.mark.parametrize("bad", [[1, 2], "abc"])
def test_non_array_answer_to_array_question(bad):
    assert not check(bad, np.zeros(2))
