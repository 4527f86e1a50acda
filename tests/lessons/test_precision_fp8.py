"""Lesson 15's FP8 and reduced-precision cells, run on the CPU with their GPU branches taken.

- The scaled matrix product, ``torch._scaled_mm``, runs only on CUDA GPUs of compute capability 8.9 or more. The
  test forces that branch (``fake_cuda`` with an H100's capability, 9.0) and stands in for ``torch._scaled_mm``
  with :func:`checked_scaled_mm`, which first refuses what the CUDA kernel refuses and then computes with
  PyTorch's own CPU kernel. The refusals are PyTorch's: the stand-in calls the real ``torch._scaled_mm`` on
  ``meta`` copies of the arguments (same shapes, strides and dtypes), whose checks
  (``_check_scaled_mm_sizes`` in torch 2.13's ``torch/_meta_registrations.py``) are the CUDA ones for meta
  tensors (its ``device_hint`` takes a meta tensor for a CUDA one): a row-major first matrix, a column-major
  second one, sizes that are multiples of 16, ``float32`` scales of one value for per-tensor scaling. Before
  them, the capability check of the CUDA kernel (``_scaled_mm_allowed_device`` in ATen's ScaledBlas.cpp:
  "only supported on CUDA devices with compute capability >= 9.0 or 8.9"). The last tests prove the stand-in
  refuses the lesson's cell made wrong: a row-major ``b``, a size that is not a multiple of 16, a float64 scale.
- The exercise ``ex-prec-fp8-rows``: its check draws a fresh matrix at each call (a copied answer fails), leaves
  the reader's random stream alone, takes power-of-two scales as well, and runs on the CPU where the device is
  MPS (no FP8 dtypes there). Its wrong and wasteful answers are in tests/exercises/cases/precision.py.
- The reduced-precision switches (``torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction`` and
  ``allow_bf16_...``, on by default in PyTorch's CUDA notes and in torch 2.13): the cell must time each format
  with its switch on and off, and leave both switches as it found them, even when a product fails.
"""

from __future__ import annotations

import re

import pytest
import torch

from gpukit import skip_unless
from gpukit.core.timing import Timing
from gpukit.exercises import check
from gpukit.measuring.speed_sentences import speed_phrase
from tests.exercises.cases.precision import to_fp8_rows, to_fp8_rows_powers_of_two
from tests.support.lesson_code import Glued, code_cell, definition, lesson, run_cell

LESSON = "15-precision-and-data.ipynb"
SWITCHES = ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")
_real_scaled_mm = torch._scaled_mm


def cell(contains):
    return code_cell(LESSON, contains)


def on_meta(t):
    """A meta tensor with ``t``'s shape, strides and dtype: what torch's meta checks look at."""
    return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="meta")


class ScaledMatmul:
    """A stand-in for ``torch._scaled_mm`` on a CUDA GPU of a given capability; it logs each call."""

    def __init__(self, capability):
        self.capability, self.calls = capability, []

    def __call__(self, a, b, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False):
        if self.capability < (8, 9):
            raise RuntimeError("torch._scaled_mm is only supported on CUDA devices with compute capability >= 9.0 "
                               "or 8.9, or ROCm MI300+")
        # The CUDA kernel's checks, as torch 2.13 states them for its meta kernel.
        _real_scaled_mm(on_meta(a), on_meta(b), scale_a=on_meta(scale_a), scale_b=on_meta(scale_b),
                        out_dtype=out_dtype)
        self.calls.append(dict(a=(a.dtype, tuple(a.shape), a.stride()), b=(b.dtype, tuple(b.shape), b.stride()),
                               scales=(scale_a.dtype, scale_b.dtype), out_dtype=out_dtype,
                               largest=(a.float().abs().max().item(), b.float().abs().max().item())))
        return _real_scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype)


class Benchmarks(list):
    """A stand-in for gpukit's benchmark: one call of the function, the call's settings kept."""

    def __call__(self, fn, *args, device=None, timer="wall", repeats=7, flops=None, label=None, **kwargs):
        fn(*args, **kwargs)
        self.append(dict(fn=fn, device=device, timer=timer, label=label, flops=flops))
        return Timing(label=label, samples=(1e-3,) * repeats, flops=flops, timer=timer)


def fp8_namespace(size=64, n=48):
    """What the FP8 product cell finds bound by the cells before it, at a reduced size, on the (fake) device."""
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen)
    namespace = {"torch": torch, "dev": torch.device("cuda"), "device": "cuda", "a": a, "b": b,
                 "exact": a.double() @ b.double(), "a_dev": a.to("cuda"), "b_dev": b.to("cuda"),
                 "size": size, "square": torch.randn(size, size, device="cuda"), "benchmark": Benchmarks(),
                 "errors": {"bfloat16": 3e-3}, "glue": Glued(), "speed_phrase": speed_phrase}
    run_cell(definition(lesson(LESSON), "relative_error"), namespace)
    run_cell(cell("def round_trip(t, scale)"), namespace)  # E4M3, largest
    return namespace


def run_fp8_cell(namespace, monkeypatch, capability=(9, 0), source=None):
    scaled_mm = ScaledMatmul(capability)
    monkeypatch.setattr(torch, "_scaled_mm", scaled_mm)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    printed = run_cell(source or cell("def to_fp8(t)"), namespace)
    return scaled_mm, printed


def test_the_fp8_product_is_called_as_the_cuda_kernel_requires(fake_cuda, monkeypatch):
    namespace = fp8_namespace()
    scaled_mm, printed = run_fp8_cell(namespace, monkeypatch)
    assert "Skipped" not in printed
    assert len(scaled_mm.calls) == 2, scaled_mm.calls  # the error table's matrices, then the timed product
    for call in scaled_mm.calls:
        assert call["a"][0] == call["b"][0] == torch.float8_e4m3fn
        assert call["b"][2][0] == 1, "the second matrix must be column-major"
        assert call["scales"] == (torch.float32, torch.float32)
        assert call["out_dtype"] == torch.bfloat16
        # Each matrix scaled so that its largest magnitude is e4m3's largest, 448: a scale that divides by less
        # (448 / amax, the inverse) still gives the product back, but with its values low in the format's range.
        assert call["largest"] == (448.0, 448.0), call["largest"]
    # The scales are the dequantising ones (amax / 448, multiplied back by the product): the FP8 product lands
    # within what 3 mantissa bits allow of the float64 one, not orders of magnitude off.
    error = namespace["fp8_results"]["error"]
    assert 1e-3 < error < 0.1, error
    timed = namespace["benchmark"]
    assert [t["fn"] for t in timed] == [torch.mm, torch._scaled_mm]
    assert {t["timer"] for t in timed} == {"events"} and {t["flops"] for t in timed} == {2 * 64**3}
    run_cell(cell('glue("fp8_story"'), namespace)
    story = namespace["glue"]["fp8_story"]
    assert f"{error:.1e}" in story and "bfloat16" in story and "about as fast as" in story, story


@pytest.mark.parametrize("capability", [(8, 0), (8, 6)])
def test_the_fp8_product_skips_below_compute_capability_8_9(fake_cuda, monkeypatch, capability):
    namespace = fp8_namespace()
    scaled_mm, printed = run_fp8_cell(namespace, monkeypatch, capability=capability)
    assert scaled_mm.calls == [] and namespace["fp8_results"] == {}
    assert re.search(r"Skipped: FP8 products need an NVIDIA GPU of compute capability 8\.9", printed), printed
    run_cell(cell('glue("fp8_story"'), namespace)
    assert "no GPU of compute capability 8.9" in namespace["glue"]["fp8_story"]


def test_the_fp8_product_skips_on_the_cpu(fake_cuda):
    namespace = fp8_namespace()
    namespace.update(dev=torch.device("cpu"), device="cpu")
    printed = run_cell(cell("def to_fp8(t)"), namespace)
    assert "Skipped" in printed and "this run has cpu" in printed


@pytest.mark.parametrize("wrong, message", [
    (("column_major(b8)", "b8"), "mat2 must be col_major"),  # b left row-major
    (("column_major(s8)", "s8"), "mat2 must be col_major"),
    (("scale = (t.abs().max() / largest).float()", "scale = (t.abs().max() / largest).double()"),
     "float \\(fp32\\)"),
])
def test_the_stand_in_refuses_a_wrong_call(fake_cuda, monkeypatch, wrong, message):
    """The check above can fail: the lesson's cell, made wrong in one place, is refused as on a GPU."""
    source = cell("def to_fp8(t)")
    assert wrong[0] in source
    with pytest.raises(RuntimeError, match=message):
        run_fp8_cell(fp8_namespace(), monkeypatch, source=source.replace(wrong[0], wrong[1], 1))


def test_the_stand_in_refuses_sizes_that_are_not_multiples_of_16(fake_cuda, monkeypatch):
    with pytest.raises(RuntimeError, match="divisible by 16"):
        run_fp8_cell(fp8_namespace(n=40), monkeypatch)


# ------------------------------------------------------------------------------ reduced-precision reductions
def reduction_namespace():
    return {"torch": torch, "dev": torch.device("cuda"), "device": "cuda", "matmul": torch.backends.cuda.matmul,
            "benchmark": Benchmarks(), "skip_unless": skip_unless, "glue": Glued(),
            "speed_phrase": speed_phrase}


def reduction_cell(inner="1_024"):
    source = cell("allow_bf16_reduced_precision_reduction\"))")
    assert "65_536" in source
    return source.replace("65_536", inner, 1)  # the GPU's long inner size would take minutes here


@pytest.fixture
def switches():
    matmul = torch.backends.cuda.matmul
    before = {name: getattr(matmul, name) for name in SWITCHES}
    assert all(before.values()), "PyTorch's default: both on"
    yield matmul
    for name, value in before.items():
        setattr(matmul, name, value)


def test_the_reduction_cell_times_each_switch_on_and_off_and_restores_it(fake_cuda, monkeypatch, switches):
    seen, mm = [], torch.mm

    def watched_mm(x, w):
        seen.append((x.dtype, tuple(getattr(switches, name) for name in SWITCHES)))
        return mm(x, w)

    monkeypatch.setattr(torch, "mm", watched_mm)
    namespace = reduction_namespace()
    printed = run_cell(reduction_cell(), namespace)
    assert "Skipped" not in printed
    assert set(namespace["reductions"]) == {(d, a) for d in (torch.float16, torch.bfloat16) for a in (True, False)}
    # Every product ran with its own format's switch as labelled, the other format's left at its default.
    expected = {(torch.float16, (True, True)), (torch.float16, (False, True)),
                (torch.bfloat16, (True, True)), (torch.bfloat16, (True, False))}
    assert set(seen) == expected, seen
    assert all(getattr(switches, name) for name in SWITCHES), "the cell must restore PyTorch's defaults"
    assert [t["timer"] for t in namespace["benchmark"]] == ["events"] * 4
    run_cell(cell('glue("reduction_story"'), namespace)
    story = namespace["glue"]["reduction_story"]
    # On the CPU the switches change nothing, so the two results are the same bits: the story must say so.
    assert story.count("gave the same bits") == 2, story


def test_the_reduction_cell_restores_the_switches_when_a_product_fails(fake_cuda, monkeypatch, switches):
    def failing_mm(x, w):
        if not switches.allow_bf16_reduced_precision_reduction:
            raise RuntimeError("CUBLAS_STATUS_EXECUTION_FAILED")
        return x @ w

    monkeypatch.setattr(torch, "mm", failing_mm)
    with pytest.raises(RuntimeError, match="CUBLAS"):
        run_cell(reduction_cell(), reduction_namespace())
    assert all(getattr(switches, name) for name in SWITCHES)


def test_the_reduction_story_reports_a_difference():
    on, off = torch.ones(2), torch.full((2,), 1.5)
    namespace = reduction_namespace()
    namespace["reductions"] = {(d, a): (on if a else off, 2e-3 if a else 4e-4,
                                        Timing(label="", samples=(1e-3 if a else 2e-3,) * 5))
                               for d in (torch.float16, torch.bfloat16) for a in (True, False)}
    run_cell(cell('glue("reduction_story"'), namespace)
    story = namespace["glue"]["reduction_story"]
    assert "off by 2.0e-03, and forbidden by 4.0e-04" in story and "2.00 times slower than" in story, story


def test_the_reduction_cell_skips_where_there_is_no_cuda():
    namespace = reduction_namespace()
    namespace.update(dev=torch.device("cpu"), device="cpu")
    printed = run_cell(reduction_cell(), namespace)
    assert "Skipped: the switches steer cuBLAS" in printed and namespace["reductions"] == {}


def test_the_switches_are_on_by_default_in_the_pinned_torch():
    """What the lesson's checked cell prints, and the defaults the cell restores."""
    matmul = torch.backends.cuda.matmul
    assert matmul.allow_fp16_reduced_precision_reduction is True
    assert matmul.allow_bf16_reduced_precision_reduction is True
    assert matmul.allow_fp16_reduced_precision_reduction_split_k is True


# ------------------------------------------------------------------------------------------ ex-prec-fp8-rows
def test_the_fp8_rows_check_takes_power_of_two_scales_too():
    assert check("ex-prec-fp8-rows", to_fp8_rows_powers_of_two, device="cpu")


def test_the_fp8_rows_check_draws_a_fresh_matrix_each_time_and_leaves_the_random_stream_alone():
    """A hard-coded answer cannot pass: two checks see two different matrices, of rows from tiny to huge."""
    seen = []

    def watching(t):
        seen.append(t.clone())
        return to_fp8_rows(t)

    torch.manual_seed(321)
    expected = torch.rand(3)
    torch.manual_seed(321)
    assert check("ex-prec-fp8-rows", watching, device="cpu")
    assert check("ex-prec-fp8-rows", watching, device="cpu")
    assert torch.equal(torch.rand(3), expected)
    first, second = [t for t in seen if t.device.type != "meta"]  # each check also runs it on meta
    assert first.shape == second.shape and not torch.equal(first, second)
    largest = first.abs().amax(dim=1)
    assert largest.min() < 2.0**-10 and largest.max() > 448, "rows below e4m3's smallest and above its largest"

    def replayed(t):  # the first matrix's answer, whatever matrix the check draws
        return to_fp8_rows(first)

    result = check("ex-prec-fp8-rows", replayed, device="cpu")
    assert not result and re.search("saturates|wastes", result.message), result  # its scales fit another matrix


def test_the_fp8_rows_check_runs_on_the_cpu_for_mps(monkeypatch):
    """Apple's MPS has no FP8 dtypes: the check draws its matrix on the CPU there, and says nothing of MPS."""
    devices = []

    def watching(t):
        devices.append(t.device.type)
        return to_fp8_rows(t)

    assert check("ex-prec-fp8-rows", watching, device="mps")
    assert devices == ["cpu", "meta"]  # the values on the CPU; where it makes its tensors, on the meta device
