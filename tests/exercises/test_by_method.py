"""The checks of chapter 12 and of the benchmarks appendix judge how an answer was made (the torch calls it makes,
the products it times), so a right answer written another way than the lesson's solution must pass too, and the
checks' own machinery must see what they claim to see. (tests/exercises/test_every_exercise.py runs each exercise's
solution and
wrong answers; these are the other right answers.)"""

import time

import torch

from gpukit import check
from gpukit.core.peaks import device_peak
from gpukit.exercises import benchmarks, case_study
from tests.support.exercise_cases import on_the_cpu  # noqa: F401 - the autouse fixture

device = "cpu"  # on_the_cpu forces it for the checks too


def peak_flops():
    return device_peak(device, "float32", operation="matmul").flops_per_s


def test_the_spectral_power_by_parseval_or_vmap_passes():
    def parseval(batch):
        return batch.shape[-1] * batch.shape[-2] * batch.abs().square().sum(dim=(-2, -1))

    def mapped(batch):
        return torch.vmap(lambda m: torch.fft.fft2(m).abs().square().sum())(batch)

    for answer in (parseval, mapped):
        result = check("ex-case-batched-power", answer)
        assert result, result.message


def test_a_loop_is_told_apart_from_a_batched_call_by_its_calls():
    watch = case_study._Watch()
    batch = case_study.power_batch()
    watch.run(lambda b: [torch.fft.fft2(m) for m in b], batch)
    assert case_study._loop_message(watch, len(batch)).startswith("your function called torch.fft.fft2 48 times")
    watch = case_study._Watch()
    watch.run(torch.fft.fft2, batch)
    assert case_study._loop_message(watch, len(batch)) is None


def test_the_lu_batch_has_row_swaps_and_a_singular_matrix():
    a = case_study.lu_batch()
    _, pivots, info = torch.linalg.lu_factor_ex(a)
    steps = torch.arange(1, a.shape[-1] + 1, dtype=pivots.dtype, device=a.device)
    swaps = (pivots != steps).sum(dim=-1) % 2
    assert swaps.min() == 0 and swaps.max() == 1, "some factorisations must swap rows an odd number of times"
    assert info[case_study.LU_SINGULAR] > 0
    assert torch.linalg.det(a.cpu().to(torch.complex128))[case_study.LU_SINGULAR] == 0


def test_chunks_joined_with_numpy_slices_of_any_kind_pass():
    def in_chunks(batch, chunk, work):
        starts = range(0, len(batch), chunk)
        return torch.cat([work(torch.as_tensor(batch[s:s + chunk], device=device)).to("cpu") for s in starts])

    result = check("ex-case-chunks", in_chunks)
    assert result, result.message


def test_the_fraction_timed_by_hand_passes():
    def by_hand(n):
        a = torch.randn(n, n, device=device)
        a @ a  # warm-up
        times = []
        for _ in range(5):
            if device.startswith("cuda"):
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            a @ a
            if device.startswith("cuda"):
                torch.cuda.synchronize(device)
            times.append(time.perf_counter() - start)
        return 2 * n**3 / sorted(times)[2] / peak_flops()

    result = check("ex-bench-matmul-fraction", by_hand)
    assert result, result.message


def test_the_check_times_each_product_it_sees():
    n = 64

    def two_products(size):
        a = torch.ones(size, size, device=device)
        torch.matmul(a, a)
        time.sleep(0.3)  # between the products: part of neither
        return a @ a

    _, products = benchmarks._run_timing_each_product(two_products, n, device)
    assert len(products) == 2
    assert all(tuple(o.shape) == (n, n) for operands, _ in products for o in operands)
    assert all(0 < seconds < 0.3 for _, seconds in products), products
