"""Chapter 1, CPU versus GPU: what its exercises expect, and how a wrong answer is told apart.

Timing by hand (``ex-cpu-gpu-time-by-hand``). The learner writes ``timed(f, *args, sync=...)``, which must
return the seconds of one call of ``f`` once it is warmed up, waiting for the device with ``sync()``. The check
runs that function on work whose duration it knows, on a model of a GPU's stream: a worker thread that runs the
work submitted to it in order, while the call that submitted it returns at once, as a kernel launch does. The
model's ``sync`` waits until the worker has run everything submitted, as ``torch.cuda.synchronize()`` does. So
the classic mistakes give the times they give on a GPU, on any machine: a clock stopped without waiting
measures the launch only; a clock around the first call includes its one-off cost (compilation, loading a
library); a clock started while earlier work is still queued includes that work. The check then runs the
function with its own default ``sync`` on the chosen device, on a matrix product it also times itself, which shows
a default that does not wait for a GPU.

Creating on the device (``ex-cpu-gpu-create-on-device``). The learner's ``make_wave(n)`` must create its values
on the chosen device; the check watches the torch functions it calls (a ``TorchFunctionMode``) and rejects a
copy (``.to(device)``, ``.cuda()``, ``copy_``, ``torch.tensor``) whatever the device, so that the mistake shows on
a machine without a GPU too, where a copy to the "device" is a copy within RAM.

Predicting the float64 product (``ex-cpu-gpu-predict-float64``). Before the lesson times the product of two
``n`` x ``n`` float64 matrices, the learner predicts its time in milliseconds from the device's limits: the
float64 matrix-product peak (``device_peak``) and the bandwidth (the datasheet's, or the copy the lesson measured,
passed as ``bandwidth``). The check compares it with gpukit's own prediction (:mod:`gpukit.measuring.roofline`) and
names
the classic mistakes: a multiply-add counted as one FLOP, the float32 peak, float32's 4-byte elements, the bytes
of one matrix only.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from numbers import Real

from gpukit.base.errors import error_line
from gpukit.core import timing
from gpukit.measuring import roofline

from ._predicting import RTOL, judge_number
from .checking import Exercise, answer_device, keep_output, kept_output, register, torch_function_name

# --------------------------------------------------------------------------------------- timing by hand
WORK_SECONDS = 0.04  # what one call keeps the modelled device busy for
FIRST_CALL_SECONDS = 0.6  # what the first call costs on the host besides (compilation, loading a library)
QUEUED_BEFORE_SECONDS = 0.2  # work still queued when the learner's function is called, in the first run
# A time is right within these bounds: wide for the sleeps of a busy machine, narrow enough that a mean of
# up to a few dozen calls that includes the first call is too long.
SHORTEST, LONGEST = 0.6 * WORK_SECONDS, 1.6 * WORK_SECONDS


class ModelStream:
    """A model of a GPU stream: ``submit(seconds)`` returns at once; a worker thread runs the work in order.

    ``synchronize()`` returns once everything submitted so far has run, as ``torch.cuda.synchronize()`` does.
    """

    def __init__(self):
        self._jobs: queue.Queue = queue.Queue()
        self._worker = threading.Thread(target=self._run, name="model GPU stream", daemon=True)
        self._worker.start()

    def _run(self) -> None:
        while True:
            seconds = self._jobs.get()
            try:
                if seconds is None:
                    return
                time.sleep(seconds)
            finally:
                self._jobs.task_done()

    def submit(self, seconds: float) -> None:
        self._jobs.put(seconds)

    def synchronize(self) -> None:
        self._jobs.join()

    def close(self) -> None:
        self._jobs.put(None)
        self._worker.join()


class ModelKernel:
    """Work for a :class:`ModelStream`: each call queues ``WORK_SECONDS`` and returns at once, like a launch;
    the first call also spends ``FIRST_CALL_SECONDS`` on the host before it returns (unless ``warm``)."""

    __name__ = "model_kernel"

    def __init__(self, stream: ModelStream, warm: bool = False):
        self.stream, self.warm, self.calls = stream, warm, 0

    def __call__(self, *args):
        if not self.warm:
            time.sleep(FIRST_CALL_SECONDS)
            self.warm = True
        self.calls += 1
        self.stream.submit(WORK_SECONDS)
        return args[0] if args else None


def _seconds(answer, kernel, stream) -> tuple[float | None, str | None, bool]:
    """What the learner's function reports for the kernel, or why it reports nothing usable, and whether it called
    the sync it was given."""
    waits = []

    def sync():
        waits.append(1)
        stream.synchronize()

    try:
        seconds = answer(kernel, "x", sync=sync)
    except TypeError as error:
        if "sync" in str(error):
            return None, ("your function must take the wait as a keyword argument: def timed(f, *args, "
                          "sync=lambda: wait_for(device)); the check passes a sync of its own."), False
        return None, f"your function raised TypeError: {str(error).strip()[:200]}", False
    except Exception as error:  # the reader's code: any error is the answer to report
        return None, f"your function raised {type(error).__name__}: {(str(error).strip() or '')[:200]}", False
    if not isinstance(seconds, Real) or isinstance(seconds, bool) or not math.isfinite(seconds):
        return None, (f"your function returned {type(seconds).__name__} {seconds!r}; return the time of one "
                      "call in seconds, a number (time.perf_counter() differences are seconds)."), False
    if kernel.calls == 0:
        return None, ("your function never called f: call f(*args) between reading the clock and reading it "
                      "again."), False
    return float(seconds), None, bool(waits)


def _too_short(waited: bool) -> str:
    told = ("your function reported less time than the work keeps the device busy: the clock stopped when the "
            "work was queued, not when it finished.")
    if not waited:
        # A wait written into the body (wait_for(device), torch.cuda.synchronize()) waits for the device, not for
        # the work of a caller that passes a sync of its own: here, the check's model stream.
        return (f"{told} Your function never called the sync it was given: wait through sync() (its default waits "
                "for the device), so that a caller can say what to wait for.")
    return f"{told} Call sync() after f(*args), before reading the clock again."


def _shortest_of_tries(answer, stream: ModelStream, warm: bool, tries: int = 3):
    """:func:`_seconds` for a fresh kernel (``warm``: called before, with earlier work queued; else never called),
    tried again while the time is too long, the shortest kept. A loaded machine wakes the stream's thread late now
    and then, which no mistake does three times running; the mistakes that make a time too long (a first call, work
    queued before) add a tenth of a second or more every time."""
    best = None
    for _ in range(tries):
        if warm:
            stream.submit(QUEUED_BEFORE_SECONDS)
        found = _seconds(answer, ModelKernel(stream, warm=warm), stream)
        stream.synchronize()  # nothing of this try is left to run into the next
        seconds, problem, _ = found
        if problem:
            return found
        best = found if best is None or seconds < best[0] else best
        if seconds <= LONGEST:
            break
    return best


def _in_milliseconds(seconds: float) -> bool:
    return SHORTEST * 1e3 <= seconds <= LONGEST * 1e3


def _times_one_warm_call_correctly(answer) -> str | None:
    """Run the learner's timed() on the model stream, twice, then on the chosen device; say what is wrong."""
    if not callable(answer):
        return (f"expected your function timed (def timed(f, *args, sync=...)), got {type(answer).__name__}: pass "
                "the function itself, not a time it returned.")
    stream = ModelStream()
    try:
        # First run: work called before (warm), with earlier work still queued when the function is called.
        seconds, problem, waited = _shortest_of_tries(answer, stream, warm=True)
        if problem:
            return problem
        if seconds < SHORTEST:
            return _too_short(waited)
        if _in_milliseconds(seconds):
            return f"your function returned {seconds:g}: that looks like milliseconds; return seconds."
        if seconds > LONGEST:
            return ("your function reported more time than one call keeps the device busy: work queued before the "
                    "clock started (earlier work, or your own warm-up call) finished inside your timing. Call "
                    "sync() before starting the clock.")
        # Second run: work never called before, nothing queued.
        seconds, problem, waited = _shortest_of_tries(answer, stream, warm=False)
        if problem:
            return problem
        if seconds < SHORTEST:
            return _too_short(waited)
        if seconds > LONGEST:
            return ("your function reported more time than one call keeps the device busy when f had not been "
                    "called before: it includes the first call, which pays one-off costs (compiling, loading a "
                    "library). Call f(*args) once and wait for it (a warm-up) before starting the clock.")
    finally:
        stream.synchronize()
        stream.close()
    # What it reported for the model's work called cold (its second run): the value compared with WORK_SECONDS.
    keep_output(answer, seconds)
    return _times_a_product_on_the_device(answer)


def _times_a_product_on_the_device(answer, device: str | None = None) -> str | None:
    """The learner's function with its own default sync, on a matrix product on the chosen device.

    On a GPU a default sync that does not wait shows: the reported time is a launch's, a small fraction of the
    fastest of the check's own timings of the product. On the CPU, where PyTorch does not queue work, the call
    only has to run and return seconds: a CPU's timings on a busy machine vary too much to bound one call.
    """
    import torch

    device = device or answer_device()  # the answer is a function, which carries no device: the lesson's
    n = {"cpu": 256, "mps": 2048}.get(device, 4096)
    p = torch.randn(n, n, device=device)
    try:
        seconds = answer(torch.matmul, p, p)
    except Exception as error:  # the reader's code: any error is the answer to report
        return (f"called as timed(torch.matmul, a, b) on {device}, with its default sync, your function raised "
                f"{error_line(error)}")
    if not isinstance(seconds, Real) or isinstance(seconds, bool) or not math.isfinite(seconds) or seconds <= 0:
        shown = f"{float(seconds):g}" if isinstance(seconds, Real) else repr(seconds)  # not np.float64(...)
        return f"called as timed(torch.matmul, a, b) on {device}, your function returned {shown}, not seconds."
    if device == "cpu":
        return None
    fastest = timing.benchmark(torch.matmul, p, p, repeats=5, device=device).best
    if seconds < 0.3 * fastest:
        return (f"called as timed(torch.matmul, a, b) on {device}, with its default sync, your function reported a "
                f"fraction of the product's time: its default sync does not wait for {device}. Use "
                "sync=lambda: wait_for(device).")
    return None


# ------------------------------------------------------------------------------------- creating on the device
WAVE_LENGTH = 1000
# Functions that move data that already exists onto a device, or build a tensor from data made elsewhere.
_COPIES = {"TensorBase.to": ".to(device)", "TensorBase.cuda": ".cuda()", "TensorBase.mps": ".mps()",
           "TensorBase.copy_": ".copy_()", "_VariableFunctionsClass.tensor": "torch.tensor(...)",
           "_VariableFunctionsClass.as_tensor": "torch.as_tensor(...)", "TensorBase.new_tensor": ".new_tensor(...)"}
# torch's own names for the functions that create tensors and take a device= argument.
_FACTORIES = {"linspace", "arange", "logspace", "zeros", "ones", "full", "empty", "rand", "randn", "randint",
              "normal", "eye", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like"}


def _names_a_device(args, kwargs) -> bool:
    import torch

    return kwargs.get("device") is not None or any(isinstance(a, (str, torch.device, torch.Tensor))
                                                    for a in args[1:])


def _calls_while_making(answer, n: int):
    """The torch functions ``answer(n)`` called, as (qualified name, args, kwargs), and what it returned."""
    from torch.overrides import TorchFunctionMode

    calls = []

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            calls.append((torch_function_name(func), args, kwargs))
            return func(*args, **kwargs)

    with Watch():
        made = answer(n)
    return calls, made


def _creates_on_the_device(answer) -> str | None:
    if not callable(answer):
        return (f"expected your function make_wave (a function of n), got {type(answer).__name__}: pass the "
                "function itself, not the tensor it returns.")
    try:
        calls, made = _calls_while_making(answer, WAVE_LENGTH)
    except Exception as error:  # the reader's code: any error is the answer to report
        return f"make_wave({WAVE_LENGTH}) raised {type(error).__name__}: {(str(error).strip() or '')[:200]}"
    if made is None:
        return "make_wave returned None: replace the placeholder (None) with the values, and run the cell again."
    # .to(torch.float32) changes the dtype where the tensor is; .to(device) or .to(other_tensor) moves it.
    copies = sorted({_COPIES[name] for name, args, kwargs in calls if name in _COPIES
                     and (name != "TensorBase.to" or _names_a_device(args, kwargs))})
    if copies:
        return (f"make_wave copies data onto the device ({', '.join(copies)}): make the values there instead, with "
                "device=device in the torch call that creates them.")
    made_there = [name for name, _, kwargs in calls
                  if name.rpartition(".")[2] in _FACTORIES and kwargs.get("device") is not None]
    if not made_there:
        return ("make_wave creates no tensor with device=...: build the values with torch on the device "
                "(torch.linspace(..., device=device)), not with NumPy or on the CPU.")
    return None


def _wave_on_the_chosen_device():
    """The wave on the learner's GPU where make_wave's is on one (the lesson chose it), else on the lesson's default
    device: a wave left on the CPU of a GPU machine is then told apart."""
    import torch

    return torch.sin(torch.linspace(0, 2 * math.pi, WAVE_LENGTH, dtype=torch.float32, device=answer_device()))


# ------------------------------------------------------------------------------ predicting the float64 product
def _float64_product(device: str, n: int, bandwidth: float, *, dtype: str = "float64", per_multiply_add: int = 2,
                     element: int = 8, operands: int = 3) -> float | None:
    """Milliseconds gpukit predicts for an n x n product in ``dtype`` (the keywords make the classic mistakes)."""
    limits = roofline.device_limits(device, dtype, operation="matmul", bandwidth=bandwidth)
    prediction = roofline.predict(per_multiply_add * n**3, operands * element * n * n, limits)
    return 1e3 * prediction.seconds if prediction.complete else None


def _predicts_the_float64_product(answer, device: str, n: int, bandwidth: float) -> str | None:
    right = _float64_product(device, n, bandwidth)
    if right is None:
        return (f"gpukit knows no float64 peak for {device}, so there is no prediction to compare yours with; on "
                "such a device the solution skips.")
    mistakes = [("counting a multiply-add as one FLOP (a product of n x n matrices does 2 n^3)",
                 _float64_product(device, n, bandwidth, per_multiply_add=1)),
                ("the float32 peak (the product is in float64)",
                 _float64_product(device, n, bandwidth, dtype="float32")),
                ("counting 4 bytes per element (float64 has 8)", _float64_product(device, n, bandwidth, element=4)),
                ("counting the bytes of one matrix only (two are read and one written)",
                 _float64_product(device, n, bandwidth, operands=1))]
    return judge_number(answer, right, [(why, ms) for why, ms in mistakes if ms is not None])


register(
    Exercise("ex-cpu-gpu-time-by-hand", lambda: WORK_SECONDS, method=_times_one_warm_call_correctly,
             result=kept_output, rtol=(LONGEST - WORK_SECONDS) / WORK_SECONDS, writes="device code",
             correct_means=f"the seconds your function gave for one call of the check's model work, which keeps "
                           f"its stream busy for {WORK_SECONDS:g} s"),
    Exercise("ex-cpu-gpu-transfer-share", lambda: (2 + 1) * 60 / ((2 + 1) * 60 + 70), rtol=1e-3, writes="a number"),
    Exercise("ex-cpu-gpu-create-on-device", _wave_on_the_chosen_device, method=_creates_on_the_device,
             result=lambda make_wave: make_wave(WAVE_LENGTH), rtol=1e-5, atol=1e-5, writes="device code"),
    Exercise("ex-cpu-gpu-predict-float64", _float64_product, needs=("device", "n", "bandwidth"),
             method=_predicts_the_float64_product, rtol=RTOL, writes="a number"),
)
