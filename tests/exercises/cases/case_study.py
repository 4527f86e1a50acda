"""Chapter 12 (case study): each exercise's solution, and wrong answers with a word the check's message must
contain. The wrong answers are the classic mistakes, as learners write them: a Python loop left in, a sum over
the wrong axes, a widened dtype, data copied to the host, a forgotten sign, lu_factor where a matrix is singular,
the last slice dropped, the whole batch copied at once, results left on the device."""

import math

import numpy as np
import torch

from booktools.bench import lu_determinant
from gpukit.core.device import pick_device
from gpukit.exercises.case_study import power_batch

device = pick_device()


# ------------------------------------------------------------------------------- ex-case-batched-power
def spectral_power(batch):
    return torch.fft.fft2(batch).abs().square().sum(dim=(-2, -1))


def power_in_a_loop(batch):
    return torch.stack([torch.fft.fft2(matrix).abs().square().sum() for matrix in batch])


def power_by_index(batch):
    out = torch.empty(len(batch), device=batch.device)
    for i in range(len(batch)):
        out[i] = torch.fft.fft2(batch[i]).abs().square().sum()
    return out


def power_of_everything(batch):
    return torch.fft.fft2(batch).abs().square().sum()


def power_of_rows(batch):
    return torch.fft.fft2(batch).abs().square().sum(dim=-1)


def power_in_double(batch):
    return torch.fft.fft2(batch.to(torch.complex128)).abs().square().sum(dim=(-2, -1))


def power_with_numpy(batch):
    spectra = np.fft.fft2(batch.cpu().numpy())
    return torch.from_numpy((np.abs(spectra) ** 2).sum(axis=(-2, -1)).astype(np.float32))


# ------------------------------------------------------------------------------- ex-case-lu-det
# The lesson's solution: the book's one determinant from LU (tests/lessons/test_determinants.py: the same code).
lu_det = lu_determinant


def unsigned_det(a):
    """Forgets the row swaps: right magnitudes, wrong signs."""
    lu, _, _ = torch.linalg.lu_factor_ex(a)
    return torch.diagonal(lu, dim1=-2, dim2=-1).prod(dim=-1)


def det_from_lu_factor(a):
    """lu_factor raises for the singular matrix of the batch."""
    lu, pivots = torch.linalg.lu_factor(a)
    steps = torch.arange(1, a.shape[-1] + 1, dtype=pivots.dtype, device=a.device)
    sign = 1 - 2 * ((pivots != steps).sum(dim=-1) % 2)
    return sign.to(a.dtype) * torch.diagonal(lu, dim1=-2, dim2=-1).prod(dim=-1)


def det_from_slogdet(a):
    sign, logabsdet = torch.linalg.slogdet(a)
    return sign * logabsdet.exp()


def det_with_numpy(a):
    return torch.from_numpy(np.linalg.det(a.cpu().numpy()))


# ------------------------------------------------------------------------------- ex-case-chunks
def in_chunks(batch, chunk, work):
    results = []
    for start in range(0, len(batch), chunk):
        part = torch.from_numpy(batch[start:start + chunk]).to(device)
        results.append(work(part).cpu())
    return torch.cat(results)


def chunks_without_the_last(batch, chunk, work):
    results = []
    for i in range(len(batch) // chunk):
        part = torch.from_numpy(batch[i * chunk:(i + 1) * chunk]).to(device)
        results.append(work(part).cpu())
    return torch.cat(results)


def all_at_once(batch, chunk, work):
    return work(torch.from_numpy(batch).to(device)).cpu()


def copied_whole_then_sliced(batch, chunk, work):
    whole = torch.from_numpy(batch).to(device)
    return torch.cat([work(whole[s:s + chunk]).cpu() for s in range(0, len(batch), chunk)])


def numpy_slices(batch, chunk, work):
    return torch.cat([work(batch[s:s + chunk]).cpu() for s in range(0, len(batch), chunk)])


def results_left_on_the_device(batch, chunk, work):
    parts = [torch.from_numpy(batch[s:s + chunk]).to(device) for s in range(0, len(batch), chunk)]
    return torch.cat([work(part) for part in parts]).cpu()


def one_matrix_at_a_time(batch, chunk, work):
    return torch.cat([work(torch.from_numpy(batch[i:i + 1]).to(device)).cpu() for i in range(len(batch))])


def list_of_results(batch, chunk, work):
    return [work(torch.from_numpy(batch[s:s + chunk]).to(device)).cpu() for s in range(0, len(batch), chunk)]


def slices_left_on_the_host(batch, chunk, work):
    return torch.cat([work(torch.from_numpy(batch[s:s + chunk])).cpu() for s in range(0, len(batch), chunk)])


BATCH = {"count": 2048, "n": 32}


def predicted_ms(peak_flops, bandwidth, count=2048, n=32):
    """The lesson's solution of ex-case-predict-batch."""
    flops = count * (8 * n**3 / 3 + 5 * n**2 * math.log2(n**2))  # LU and FFT
    moved = count * 8 * (n * n + 2 * n * n)  # det reads, fft2 reads and writes
    return 1e3 * max(flops / peak_flops, moved / bandwidth)


def prediction_with(flops_share=1.0, bytes_share=1.0, **batch):
    return lambda peak_flops, bandwidth: predicted_ms(peak_flops / flops_share, bandwidth / bytes_share,
                                                      **(batch or BATCH))


def lu_as_real(peak_flops, bandwidth, count=2048, n=32):
    """The LU's complex multiply-adds counted as 2 real FLOPs, not 8."""
    flops = count * (2 * n**3 / 3 + 5 * n**2 * math.log2(n**2))
    moved = count * 24 * n * n
    return 1e3 * max(flops / peak_flops, moved / bandwidth)


SOLUTIONS = {
    "ex-case-predict-batch": lambda: (predicted_ms, {"device": device, **BATCH}),
    "ex-case-batched-power": lambda: (spectral_power, {}),
    "ex-case-lu-det": lambda: (lu_det, {}),
    "ex-case-chunks": lambda: (in_chunks, {}),
}

WRONG_ANSWERS = {
    "ex-case-predict-batch": lambda: [
        (lu_as_real, "as 2 real FLOPs each"),
        (prediction_with(bytes_share=0.5), "4 bytes per complex64"),
        (prediction_with(bytes_share=1 / 3), "each matrix's bytes once"),
        (prediction_with(bytes_share=2), "complex128"),
        (prediction_with(count=1, n=32), "one matrix instead of the whole batch"),
        (lambda peak_flops, bandwidth: None, "replace the placeholder"),
        (lambda peak_flops, bandwidth: 1e-3 * predicted_ms(peak_flops, bandwidth), "thousand times off"),
    ],
    "ex-case-batched-power": lambda: [
        (power_in_a_loop, "Python loop"),
        (power_by_index, "Python loop"),
        (power_of_everything, "shape is ()"),
        (power_of_rows, "shape is (48, 8)"),
        (power_in_double, "dtype is torch.float64"),
        (power_with_numpy, "copies data to the host"),
        (lambda batch: None, "returned None"),
        (spectral_power(power_batch()), "expected your function"),
    ],
    "ex-case-lu-det": lambda: [
        (torch.linalg.det, "torch's det itself"),
        (lambda a: torch.linalg.det(a), "calls torch's det"),
        (det_from_slogdet, "calls torch's slogdet"),
        (unsigned_det, "values differ"),
        (det_from_lu_factor, "singular"),
        (lambda a: lu_det(a).to(torch.complex128), "dtype is torch.complex128"),
        (det_with_numpy, "copies data to the host"),
        (lambda a: None, "returned None"),
        (lu_det(torch.eye(3, dtype=torch.complex128)[None]), "expected your function itself"),
    ],
    "ex-case-chunks": lambda: [
        (chunks_without_the_last, "work saw 96 matrices"),
        (all_at_once, "100 matrices at once"),
        (copied_whole_then_sliced, "copied 100 matrices to the device at once"),
        (numpy_slices, "not a torch tensor"),
        (results_left_on_the_device, "keeps the results of work on the device"),
        (one_matrix_at_a_time, "called work 100 times"),
        (list_of_results, "expected an array, got list"),
        (lambda batch, chunk, work: None, "never called work"),
        # A slice never copied to the device: on a GPU it arrives on the CPU; on a CPU the check sees no copy.
        (slices_left_on_the_host, "work received a slice on cpu" if device != "cpu" else "never copied"),
    ],
}


# The planted device mistakes (tests/exercises/test_planted_device_mistakes.py).
DEVICE_MISTAKES = {
    "ex-case-batched-power": {
        "power_with_numpy": "copied the batch to the host (.cpu().numpy()) to take its spectra with NumPy, and "
                            "returned the powers there",
    },
    "ex-case-lu-det": {
        "det_with_numpy": "copied the matrices to the host for NumPy's det, and returned the determinants there",
    },
    "ex-case-chunks": {
        "slices_left_on_the_host": "never copied a slice to the device: work ran on host tensors",
        "copied_whole_then_sliced": "copied the whole batch to the device at once, then sliced it there: the "
                                    "device holds all of it, which the chunks were meant to avoid",
        "results_left_on_the_device": "copied every slice first and kept every result of work on the device until "
                                      "the end, instead of bringing each back as it is done",
    },
}
