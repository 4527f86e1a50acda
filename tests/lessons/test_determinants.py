"""The book's determinant from an LU factorisation, and the size of a random determinant.

Chapter 7 writes `lu_determinant` in the notebook, where a reader sees it; chapter 12's exercise asks for it for
a batch, and its solution writes it again; the benchmark suite has its own copy
(`booktools.bench.lu_determinant`).
One choice for all three: `lu_factor_ex`, which gives 0 for a singular matrix where `lu_factor` raises. These
tests check that the three are the same code, that it is right, and the growth law chapter 12 states,
E|det A|^2 = n! s^n.
"""

import ast
import inspect
import json
import math
import textwrap

import numpy as np
import pytest
import torch

from booktools.bench import lu_determinant
from tests.support.booktoc import ROOT

NOTEBOOKS = ROOT / "notebooks"
LESSONS = ("07-apple-mps.ipynb", "12-case-study.ipynb")


def _function_in_notebook(notebook: str, name: str) -> ast.FunctionDef:
    """The one `def name` among the notebook's code cells and the python code of its exercise solutions."""
    from tests.support.lesson_solutions import solutions_in

    found = []
    for cell in json.loads((NOTEBOOKS / notebook).read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "code":
            sources = ["".join(cell["source"])]
        else:
            sources = [code for _, code in solutions_in(cell)]
        for source in sources:
            if source.lstrip().startswith("%"):
                continue  # a cell magic, not Python
            found += [node for node in ast.parse(source).body
                      if isinstance(node, ast.FunctionDef) and node.name == name]
    assert len(found) == 1, f"{notebook} should define {name} once, not {len(found)} times"
    return found[0]


def _body_without_docstring(function: ast.FunctionDef) -> str:
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    # Imports inside a function (the benchmark suite imports torch lazily) are not part of the computation.
    return "\n".join(ast.dump(node) for node in body if not isinstance(node, ast.Import | ast.ImportFrom))


@pytest.mark.parametrize("notebook", LESSONS)
def test_the_lessons_and_the_benchmark_suite_compute_it_the_same_way(notebook):
    suite = ast.parse(textwrap.dedent(inspect.getsource(lu_determinant))).body[0]
    lesson = _function_in_notebook(notebook, "lu_determinant")
    assert _body_without_docstring(lesson) == _body_without_docstring(suite)


@pytest.mark.parametrize("notebook", LESSONS)
def test_the_lessons_use_lu_factor_ex_and_never_lu_factor(notebook):
    calls = {node.attr for node in ast.walk(_function_in_notebook(notebook, "lu_determinant"))
             if isinstance(node, ast.Attribute)}
    assert "lu_factor_ex" in calls and "lu_factor" not in calls


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128])
def test_it_agrees_with_det(dtype):
    g = torch.Generator().manual_seed(3)
    a = torch.randn(7, 5, 5, generator=g, dtype=torch.float64)
    if dtype.is_complex:
        a = torch.complex(a, torch.randn(7, 5, 5, generator=g, dtype=torch.float64))
    a = a.to(dtype)
    got = lu_determinant(a)
    assert got.dtype == dtype and got.shape == (7,)
    tolerance = 1e-4 if dtype in (torch.float32, torch.complex64) else 1e-10
    assert torch.allclose(got, torch.linalg.det(a), rtol=tolerance, atol=tolerance)


def test_the_sign_follows_the_row_swaps():
    # Chapter 7's example: two swaps, so the sign is +1 and det = -5 is the product of U's diagonal;
    # the identity with its rows swapped: one swap, det = -1.
    a = torch.tensor([[0.0, 2.0, 1.0], [1.0, 1.0, 0.0], [3.0, 0.0, 1.0]], dtype=torch.float64)
    assert lu_determinant(a).item() == pytest.approx(-5.0)
    swap = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    assert lu_determinant(swap).item() == pytest.approx(-1.0)


def test_a_singular_matrix_gives_zero_where_lu_factor_raises():
    singular = torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=torch.float64)
    with pytest.raises(RuntimeError):
        torch.linalg.lu_factor(singular)
    batch = torch.stack([singular, torch.eye(2, dtype=torch.float64)])
    assert lu_determinant(batch).tolist() == [0.0, 1.0]


# ---------------------------------------------------------------- how large random determinants are
def test_mean_square_determinant_is_n_factorial_times_the_variance_to_the_n():
    """Chapter 12's law, sampled: entries x + iy with x, y standard normal have E|a|^2 = s = 2."""
    rng = np.random.default_rng(0)
    n, count = 3, 200_000
    z = rng.standard_normal((count, n, n)) + 1j * rng.standard_normal((count, n, n))
    mean_square = np.mean(np.abs(np.linalg.det(z)) ** 2)
    assert mean_square == pytest.approx(math.factorial(n) * 2**n, rel=0.03)
    # and not the n! of unit-variance entries, which is 2^n times smaller
    assert mean_square > 4 * math.factorial(n)


def test_the_growth_explains_the_complex64_overflow_and_the_scaling():
    """Unscaled 64 x 64 matrices: a typical |det| far beyond complex64's largest value; scaled to
    E|a|^2 = 1/n, 32 x 32 ones stay small, yet inside complex64's normal range."""
    largest, smallest = float(np.finfo(np.complex64).max), float(np.finfo(np.complex64).tiny)
    assert math.sqrt(math.factorial(64) * 2**64) > largest
    assert smallest < math.sqrt(math.factorial(32) / 32**32) < 1.0
