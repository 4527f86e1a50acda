"""Chapter 12, the case study: what its exercises expect, and how a wrong answer is told apart."""

from __future__ import annotations

import numpy as np

from .checking import Exercise, register


def _case_study_batch():
    """Five 4 x 4 complex128 matrices whose LU factorisations swap rows: what a reader's det is tried on."""
    import torch

    g = torch.Generator().manual_seed(12)
    real, imag = torch.randn(2, 5, 4, 4, generator=g, dtype=torch.float64)
    return torch.complex(real, imag)


def _determinants_of_the_case_study_batch():
    import torch

    return torch.linalg.det(_case_study_batch())


def _det_without_linalg_det(answer) -> str | None:
    """The reader's function must work where ``torch.linalg.det`` is missing (as on MPS): it is removed
    while the function runs."""
    import torch

    if not callable(answer):
        return f"expected your function itself (slogdet_free_det), got {type(answer).__name__}."

    def missing(*args, **kwargs):
        raise NotImplementedError("torch.linalg.det is not available here")

    original = torch.linalg.det
    if answer is original:
        return "that is torch.linalg.det itself: build the determinants from torch.linalg.lu_factor_ex."
    torch.linalg.det = missing
    try:
        out = answer(_case_study_batch())
    except NotImplementedError as error:
        if "torch.linalg.det" in str(error):
            return "your function calls torch.linalg.det: build the determinants from torch.linalg.lu_factor_ex."
        return f"your function raised NotImplementedError: {error}"
    except Exception as error:  # the reader's code: report whatever it raised
        first_line = (str(error).strip().splitlines() or [""])[0][:200]
        return f"on a batch of shape (5, 4, 4) your function raised {type(error).__name__}: {first_line}"
    finally:
        torch.linalg.det = original
    if out is None:
        return "your function returned None: return one determinant per matrix."
    return None


def _called_on_the_case_study_batch(answer):
    return answer(_case_study_batch())


def _chunked_calls(total=10_000, chunk=4096):
    """Successful calls of run_in_chunks when only the first call runs out of memory: the chunk halves once."""
    return -(-total // (chunk // 2))


register(
    Exercise("ex-case-batch-bytes", lambda: 2 * 4096 * 64 * 64 * np.dtype("complex64").itemsize, writes="a number"),
    Exercise("ex-case-lu-det", _determinants_of_the_case_study_batch, rtol=1e-9,
             method=_det_without_linalg_det, result=_called_on_the_case_study_batch, writes="device code"),
    Exercise("ex-case-chunk-calls", _chunked_calls, rtol=0.0, writes="a number"),
)
