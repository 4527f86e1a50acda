"""The appendix "Benchmarks across hardware": what its exercises expect, and how a wrong answer is told apart.

Fraction of peak (``ex-bench-matmul-fraction``). The learner writes ``matmul_fraction(n)``: the suite's
float32 matrix product of two n x n matrices on the chosen device, timed correctly, as a fraction of the
device's float32 matmul peak (:func:`gpukit.core.peaks.device_peak`). The check calls it at a size of its own and
watches the torch calls it makes (a ``TorchFunctionMode``): the products must be of n x n float32 matrices on
the device, and there must be more than one (a single product is a timed first call, with its one-off costs).
The check also times every one of those products itself, as they run (CUDA events recorded around each on a
GPU, which do not make the host wait; the host's clock on the CPU, where a product has finished when it
returns), and compares the learner's fraction with the one the median of its own timings gives: the same
products at the same moment, so the two agree closely when the learner's timing is right. A clock stopped
before the device finished gives a fraction several times too large; n^3 instead of 2 n^3 FLOPs, or a timing of
several products, one too small. Where the lesson's device is the CPU, it also notes the tensors that a factory
(``torch.randn``, ``torch.zeros``...) made without ``device=`` and that nothing moved since: multiplied, they are
matrices that on a GPU machine stay on the CPU, though on a CPU-only run they are on the lesson's device by chance.
"""

from __future__ import annotations

import math
import statistics
import time
import weakref
from numbers import Real

from gpukit.base.errors import error_line
from gpukit.core.peaks import device_peak

from .checking import Exercise, answer_device, keep_output, kept_output, register, torch_function_name

# ------------------------------------------------------------------------------------------- fraction of peak
_PRODUCTS = {"TensorBase.__matmul__", "TensorBase.__rmatmul__", "TensorBase.matmul", "TensorBase.mm", "matmul",
             "mm", "_VariableFunctionsClass.matmul", "_VariableFunctionsClass.mm"}
# Tensor factories that take device=, and the methods that move a tensor to a device (after which it is where the
# learner put it).
_FACTORIES = {"randn", "rand", "randint", "empty", "zeros", "ones", "full", "arange", "linspace", "eye", "tensor"}
_MOVES = {"to", "cuda"}
FRACTION_RTOL = 0.4  # the learner's fraction may differ from the check's by 40 %; n^3 FLOPs is off by 50 %


def matmul_size(device: str) -> int:
    """The size the check multiplies at: a few milliseconds per product on each kind of device."""
    return {"cpu": 384, "mps": 2048}.get(device.split(":")[0], 4096)


def _run_timing_each_product(answer, n: int, device: str):
    """Call answer(n), recording each matrix product it makes: (its operands, the seconds it took). Each product
    is timed where its operands are (the learner's device, which need not be ``device``, the lesson's default)."""
    import torch
    from torch.overrides import TorchFunctionMode

    products = []  # (operands, start, end): events on CUDA, clock readings elsewhere
    # The tensors a factory made without device= and nothing moved since: on the CPU they are on the lesson's device
    # by chance, on a GPU machine they stay on the CPU. By id, with a weak reference to tell a reused id apart.
    where_made: dict[int, weakref.ref] = {}
    on_the_host = torch.device(device).type == "cpu"  # elsewhere, the device comparison shows them

    def made_without_device(tensor) -> bool:
        ref = where_made.get(id(tensor))
        return ref is not None and ref() is tensor

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if torch_function_name(func) not in _PRODUCTS:
                out = func(*args, **kwargs)
                short = torch_function_name(func).rsplit(".", 1)[-1]
                if short in _FACTORIES and "device" not in kwargs and isinstance(out, torch.Tensor):
                    where_made[id(out)] = weakref.ref(out)
                elif short in _MOVES and isinstance(out, torch.Tensor):
                    where_made.pop(id(out), None)
                return out
            operands = [a for a in args if isinstance(a, torch.Tensor)]
            if on_the_host and any(made_without_device(o) for o in operands):
                products.append(("made without device=", 0.0, 0.0))
                return func(*args, **kwargs)
            where = answer_device(*operands) if any(o.device.type != "cpu" for o in operands) else "cpu"
            if where.startswith("cuda"):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                out = func(*args, **kwargs)
                end.record()
            else:
                if where == "mps":
                    torch.mps.synchronize()
                start = time.perf_counter()
                out = func(*args, **kwargs)
                if where == "mps":
                    torch.mps.synchronize()
                end = time.perf_counter()
            products.append((operands, start, end))
            return out

    with Mode():
        fraction = answer(n)
    if any(operands == "made without device=" for operands, _, _ in products):
        return fraction, None
    seconds = []
    for _, start, end in products:
        if isinstance(start, float):
            seconds.append(end - start)
        else:  # CUDA events: wait for the end of the last one first
            end.synchronize()
            seconds.append(start.elapsed_time(end) / 1e3)
    return fraction, [(operands, s) for (operands, _, _), s in zip(products, seconds, strict=True)]


def _times_the_product_correctly(answer) -> str | None:
    import torch

    if not callable(answer):
        return (f"expected your function matmul_fraction (a function of n), got {type(answer).__name__}: pass the "
                "function itself, not the fraction it returned.")
    device = answer_device()  # before the run, the lesson's default: the size, and where made-without-device shows
    n = matmul_size(device)
    try:
        fraction, products = _run_timing_each_product(answer, n, device)
    except Exception as error:  # the reader's code: report whatever it raised
        return f"matmul_fraction({n}) raised {error_line(error)}"
    if products is None:
        return (f"your matrices were made without device= (torch.randn(n, n)): here they are on the lesson's "
                f"{device} by chance, but on a GPU machine they stay on the CPU, which then does the product and is "
                "measured against the GPU's peak. Create them on the device (device=device).")
    if fraction is None:
        return f"matmul_fraction({n}) returned None: return the fraction of the peak that the product reached."
    square = [(operands, s) for operands, s in products
              if len(operands) == 2 and all(tuple(o.shape) == (n, n) for o in operands)]
    if not square:
        return (f"matmul_fraction({n}) multiplied no two {n} x {n} matrices with torch (a @ b or torch.matmul): "
                "make them with the n it is given.")
    operands = square[0][0]
    device = answer_device(*operands)  # the learner's GPU where the matrices are on one, else the default
    peak = device_peak(device, "float32", operation="matmul")
    if peak is None or peak.flops_per_s is None:
        return (f"no float32 matmul peak is known for {device} (gpukit.core.peaks.device_peak gives none), so there "
                "is nothing to take a fraction of on this machine.")
    if any(o.dtype != torch.float32 for o in operands):
        return (f"your product ran in {operands[0].dtype}: the suite's product, and the peak you divide by, are "
                "float32's.")
    if any(o.device.type != torch.device(device).type for o in operands):
        return (f"your matrices are on {operands[0].device.type}, expected {device}: create them on the device "
                "(device=device), so that the device does the product.")
    if len(square) < 2:
        return ("your function multiplied once: a first call pays one-off costs (loading and choosing kernels), so "
                "call the product once to warm up, then time it (gpukit.benchmark does both).")
    if not isinstance(fraction, Real) or isinstance(fraction, bool) or not math.isfinite(fraction):
        return f"matmul_fraction({n}) returned a {type(fraction).__name__}; return the fraction, a number."
    measured = statistics.median(s for _, s in square[1:])
    expected = 2 * n**3 / measured / peak.flops_per_s
    if fraction > 3 * expected:
        return (f"matmul_fraction({n}) is several times larger than the time the products took gives: the clock "
                "stopped before the device had finished (wait for it before reading the clock).")
    keep_output(answer, (float(fraction), expected))  # the learner's fraction and the check's, compared
    return None


register(
    Exercise("ex-bench-matmul-fraction", lambda: (kept_output() or (math.nan, math.nan))[1],
             method=_times_the_product_correctly,
             result=lambda answer: kept_output(answer)[0], rtol=FRACTION_RTOL, writes="device code"),
)


# ------------------------------------------------------------------------------------------- from the files
def _best_cpu_matmul_rate(results):
    """The highest float32 matmul rate (GFLOP/s) of any CPU in the benchmark files' results table."""
    chosen = results[(results["kind"] == "cpu") & (results["benchmark"] == "matmul")
                     & (results["dtype"] == "float32")]
    return float(chosen["rate"].max())


register(
    # The Clemson V100 figure (10000 x 10000 float32 product in 0.144 s) against the V100's
    # published FP32 peak of 15.7 TFLOP/s; and the best CPU rate in the files.
    Exercise("ex-bench-v100-fraction", lambda: 2 * 10_000**3 / 0.144 / 15.7e12, rtol=1e-3, writes="a number"),
    Exercise("ex-bench-best-cpu-rate", _best_cpu_matmul_rate, needs=("results",), rtol=1e-9, writes="CPU code"),
)
