"""Chapter 4, PyTorch on the GPU: what its exercises expect, and how a wrong answer is told apart.

Each exercise asks for a function, and the check runs it on the lesson's device (``device``, passed by name):

- ``ex-torch-fix-mismatch``: a function whose constants must be made where its input lives. It also runs on
  PyTorch's ``meta`` device, whose tensors have a shape and a dtype but no values and whose device is checked
  like any other's: a constant made on the host fails there even where the lesson's device is the CPU, on
  which the host-made constant would otherwise pass unnoticed;
- ``ex-torch-no-item``: a training loop that never reads a tensor's value on the host. The check counts every
  such read while the loop runs (``.item()``, ``float()``, ``print``, ``.cpu()``, ``.tolist()``, an ``if`` on a
  tensor: each makes the host wait for the device), on a small regression of its own, and compares the losses
  with the same training done the usual way;
- ``ex-torch-compile-break``: a function that ``torch.compile`` must capture as one graph. The check asks
  ``torch._dynamo.explain`` for the graph breaks (it traces without compiling, in well under a second) and
  compares the values on inputs that take either side of the original ``if``;
- ``ex-torch-batched-fit``: many small least-squares fits in one batch of calls. The check counts the PyTorch
  operations the function dispatches for 6 and for 48 problems (a Python loop over the problems runs more
  operations for more problems; a batched version does not), runs it on ``meta`` for host-made tensors, and
  compares the fits with a ``float64`` reference.

One more asks for a prediction, not for device code: ``ex-torch-predict-bmm``, ``predicted_ms(peak_flops,
bandwidth)``, the least time of ``torch.bmm`` on the lesson's ``batch`` of ``k`` x ``k`` float32 matrices, written
before the lesson times it; the check tries it on a compute-bound and a memory-bound device and on the run's own
(:mod:`._predicting`).

The checks run the learner's function once, in the ``method`` step, and hand what it returned to the
comparison (``result``) through :func:`.checking.keep_output`.
"""

from __future__ import annotations

import logging

from gpukit.base.errors import first_line

from ._predicting import Work, function_exercise
from .checking import CountTensorCalls, Exercise, register
from .checking import keep_output as _kept
from .checking import kept_output as _output_of
from .checking import not_a_function as _a_function
from .checking import raised as _raised


def _plain(function):
    """The Python function behind ``torch.compile(function)``: the check compiles it itself."""
    return getattr(function, "_torchdynamo_orig_callable", function)


# ----------------------------------------------------------------------------------- ex-torch-fix-mismatch
_OFFSET = (0.5, -1.0, 2.0)
_SCALE = (0.1, 0.2, 0.4)


def _standardise_reference(batch):
    """The lesson's ``standardise``, with its constants made where ``batch`` lives."""
    import torch

    offset = torch.tensor(_OFFSET, device=batch.device)
    scale = torch.tensor(_SCALE, device=batch.device)
    return (batch - offset) / scale


def _sensor_batch(device):
    import torch

    generator = torch.Generator().manual_seed(7)
    return torch.randn(5, 3, generator=generator).to(device)


def _standardised(device):
    return _standardise_reference(_sensor_batch(device))


def _works_on_any_device(answer, device) -> str | None:
    import torch

    wrong = _a_function(answer, "standardise_anywhere", "a batch")
    if wrong:
        return wrong
    meta = torch.empty(5, 3, device="meta")
    try:
        on_meta = answer(meta)
    except Exception as error:  # the reader's code: report whatever it raised
        return (_raised("on a batch on PyTorch's meta device (no values; it stands for any device that is not the "
                        "CPU) your function", error)
                + ". A tensor it uses was made on a fixed device, or the batch was moved: make each constant on "
                  "the device the batch is on, whichever that is.")
    if isinstance(on_meta, torch.Tensor) and on_meta.device.type != "meta":
        return (f"for a batch on the meta device your function returned a tensor on {on_meta.device.type}: compute "
                "on the batch's device and leave the result there.")
    batch = _sensor_batch(device)
    try:
        result = answer(batch)
    except Exception as error:
        return _raised(f"on a batch on {batch.device.type} your function", error) + "."
    _kept(answer, result)
    return None


# ----------------------------------------------------------------------------------------- ex-torch-no-item
_NO_ITEM_STEPS = 12
# Every Tensor method through which Python reads a tensor's value on the host. Each waits for the device to
# finish the work queued before it: the synchronisation the exercise removes.
_HOST_READS = ("item", "tolist", "cpu", "numpy", "__float__", "__int__", "__index__", "__bool__", "__format__",
               "__repr__")


class _CountHostReads(CountTensorCalls):
    """Within ``with``: count calls of the Tensor methods that read a value on the host (:data:`_HOST_READS`)."""

    def __init__(self):
        super().__init__(_HOST_READS)

    def __str__(self) -> str:
        shown = {"__float__": "float()", "__int__": "int()", "__index__": "use as an index", "__bool__": "if/bool()",
                 "__format__": "f-string or print", "__repr__": "print"}
        return ", ".join(f"{shown.get(name, '.' + name + '()')} x{count}" for name, count in self.counts.items())


def _small_regression(device):
    """A linear model and data of its own, on ``device``: the same starting weights on every run and device."""
    import torch
    from torch import nn

    generator = torch.Generator().manual_seed(4)
    x = torch.randn(256, 8, generator=generator)
    y = x @ torch.randn(8, 1, generator=generator) + 0.5 + 0.1 * torch.randn(256, 1, generator=generator)
    # Made without nn.Linear's random initialisation, then given weights from the check's own generator: a check
    # must leave the reader's random numbers (torch.manual_seed's stream) as they were.
    model = nn.utils.skip_init(nn.Linear, 8, 1)
    with torch.no_grad():
        model.weight.copy_(0.3 * torch.randn(1, 8, generator=generator))
        model.bias.zero_()
    model.to(torch.device(device))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.05)
    return model, optimiser, x.to(device), y.to(device)


def _losses_of_the_usual_loop(device):
    """The losses of the lesson's training loop, on the check's regression, as one tensor on ``device``."""
    import torch
    from torch import nn

    model, optimiser, x, y = _small_regression(device)
    losses = []
    for _ in range(_NO_ITEM_STEPS):
        optimiser.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    return torch.tensor(losses, dtype=torch.float32, device=torch.device(device))


def _never_waits_for_the_device(answer, device) -> str | None:
    import torch

    wrong = _a_function(answer, "train_without_waiting", "model, optimiser, x, y, steps")
    if wrong:
        return wrong
    model, optimiser, x, y = _small_regression(device)
    try:
        with _CountHostReads() as reads:
            losses = answer(model, optimiser, x, y, _NO_ITEM_STEPS)
    except Exception as error:
        return _raised(f"training {_NO_ITEM_STEPS} steps on {x.device.type}, your function", error) + "."
    if losses is None:
        return "your function returned None: return the losses, one tensor on the device (torch.stack them)."
    if reads.total:
        return (f"in {_NO_ITEM_STEPS} steps your loop read a tensor's value on the host {reads.total} time(s) "
                f"({reads}); each read waits for the device to finish everything queued before it. Keep each loss "
                "as a tensor and stack them after the loop.")
    if not isinstance(losses, torch.Tensor):
        return (f"your function returned a {type(losses).__name__}: return the losses as one tensor "
                "(torch.stack the list after the loop), on the device.")
    if losses.requires_grad:
        return ("the losses still carry their computation graphs (requires_grad is True), which keeps every step's "
                "intermediate tensors in memory: keep loss.detach().")
    _kept(answer, losses)
    return None


# ---------------------------------------------------------------------------------- ex-torch-compile-break
def _rescaled(x):
    """The exercise's function, with its graph break: divide by the largest |x| when it exceeds 1."""
    import torch

    peak = x.abs().max()
    if peak > 1:
        x = x / peak
    return torch.exp(x) + 3 * torch.sin(x)


def _either_side_of_the_if(device):
    """Inputs whose largest magnitude is below 1 and above it."""
    import torch

    small = torch.linspace(-0.9, 0.6, 33)
    return small.to(device), (4 * small).to(device)


def _rescaled_values(device):
    import torch

    return torch.cat([_rescaled(x) for x in _either_side_of_the_if(device)])


def _graph_breaks(function, x) -> tuple[int, str]:
    """How many times torch.compile would break ``function``'s graph on ``x``, and the first reason."""
    import torch._dynamo

    quiet = logging.getLogger("torch._dynamo")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # dynamo logs a warning for each break; the check's message says it instead
    try:
        explained = torch._dynamo.explain(function)(x)
    finally:
        quiet.setLevel(level)
    reasons = [first_line(str(getattr(b, "reason", b))) for b in explained.break_reasons]
    return explained.graph_break_count, (reasons[0] if reasons else "")


def _compiles_as_one_graph(answer, device) -> str | None:
    import torch

    wrong = _a_function(answer, "rescaled_in_one_graph", "a tensor x")
    if wrong:
        return wrong
    function = _plain(answer)
    outputs = []
    for x in _either_side_of_the_if(device):
        peak = "above 1" if float(x.abs().max()) > 1 else "below 1"
        try:
            out = function(x)
        except Exception as error:
            return _raised(f"on an x whose largest magnitude is {peak}, your function", error) + "."
        if out is None:
            return ("your function returned None: replace the placeholder (None) with your answer and run the cell "
                    "again.")
        if not isinstance(out, torch.Tensor):
            return (f"on an x whose largest magnitude is {peak} your function returned {type(out).__name__}: return "
                    "the tensor of values.")
        if out.shape != x.shape:
            return (f"on an x of shape {tuple(x.shape)} your function returned shape {tuple(out.shape)}: one value "
                    "per element of x, as rescaled gives.")
        outputs.append(out)
        try:
            breaks, reason = _graph_breaks(function, x)
        except Exception as error:
            return _raised("torch._dynamo.explain, tracing your function,", error) + "."
        if breaks:
            return (f"torch.compile breaks your function's graph {breaks} time(s) (on an x whose largest magnitude "
                    f"is {peak}; dynamo's reason: {reason}). A Python if on a tensor's value, .item() or print "
                    "need the value on the host: choose with tensor operations instead.")
    _kept(answer, torch.cat(outputs))
    return None


# ------------------------------------------------------------------------------------ ex-torch-batched-fit
_FIT_DEGREE = 2
_FIT_SAMPLES = 16
_FEW, _MANY = 6, 48


def _fit_problems(n: int, device):
    """``n`` small data sets of a noisy quadratic, sampled at times in [-1, 1], on ``device``."""
    import torch

    generator = torch.Generator().manual_seed(n)
    times = 2 * torch.rand(n, _FIT_SAMPLES, generator=generator) - 1
    coefficients = torch.randn(n, 1, _FIT_DEGREE + 1, generator=generator)
    powers = times.unsqueeze(-1) ** torch.arange(_FIT_DEGREE + 1)
    values = (powers * coefficients).sum(-1) + 0.05 * torch.randn(n, _FIT_SAMPLES, generator=generator)
    return times.to(device), values.to(device)


def _fits_in_float64(device):
    """The least-squares quadratic of each of the check's ``_MANY`` data sets, solved in float64 on the CPU."""
    import torch

    times, values = (t.cpu().double() for t in _fit_problems(_MANY, "cpu"))
    vander = times.unsqueeze(-1) ** torch.arange(_FIT_DEGREE + 1, dtype=torch.float64)
    fits = torch.linalg.lstsq(vander, values.unsqueeze(-1)).solution.squeeze(-1)
    return fits.float().to(device)


class _CountOperations:
    """Within ``with``: count the PyTorch operations dispatched (what runs, whatever the Python around it)."""

    def __enter__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self

        class Counting(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                counter.count += 1
                return func(*args, **(kwargs or {}))

        self.count = 0
        self._mode = Counting()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)


def _fits_in_one_batch(answer, device) -> str | None:
    wrong = _a_function(answer, "fit_batched", "times and values")
    if wrong:
        return wrong
    try:
        answer(*_fit_problems(_FEW, "meta"))
    except RuntimeError as error:
        if "device" in str(error):
            return (_raised("on data sets on PyTorch's meta device (no values; it stands for any device that is not "
                            "the CPU) your function", error)
                    + ". A tensor it uses was made on the host: make it where times is (device=times.device).")
    except Exception:  # noqa: S110 - an operation without a meta version tells nothing about devices
        pass
    counted, fits = {}, None
    for n in (_FEW, _MANY):
        times, values = _fit_problems(n, device)
        try:
            with _CountOperations() as operations:
                fits = answer(times, values)
        except Exception as error:
            return _raised(f"on {n} data sets on {times.device.type} your function", error) + "."
        counted[n] = operations.count
    if counted[_MANY] - counted[_FEW] >= (_MANY - _FEW) // 2:
        return (f"your function ran {counted[_FEW]} PyTorch operations for {_FEW} data sets and {counted[_MANY]} for "
                f"{_MANY}: it still works one data set at a time. Build every matrix V at once and solve the whole "
                "stack in one call.")
    _kept(answer, fits)
    return None


register(
    Exercise("ex-torch-fix-mismatch", _standardised, needs=("device",), method=_works_on_any_device,
             result=_output_of, writes="device code"),
    Exercise("ex-torch-no-item", _losses_of_the_usual_loop, needs=("device",), rtol=1e-4, atol=1e-6,
             method=_never_waits_for_the_device, result=_output_of, writes="device code"),
    Exercise("ex-torch-compile-break", _rescaled_values, needs=("device",), rtol=1e-5, atol=1e-6,
             method=_compiles_as_one_graph, result=_output_of, writes="device code"),
    Exercise("ex-torch-batched-fit", _fits_in_float64, needs=("device",), rtol=1e-3, atol=1e-4,
             method=_fits_in_one_batch, result=_output_of, writes="device code"),
)


# ------------------------------------------------------------------ ex-torch-predict-bmm
def _batched_products(batch: int, k: int, **_) -> Work:
    # batch products of k x k matrices: k * k results of k multiply-adds each; three float32 stacks moved
    return Work(2 * batch * k**3, 3 * 4 * batch * k * k)


def _batched_product_mistakes(batch: int, k: int, **_) -> list[tuple[str, Work]]:
    return [("counting a multiply-add as one FLOP", Work(batch * k**3, 12 * batch * k * k)),
            ("counting one matrix's work and bytes, not the whole batch's", Work(2 * k**3, 12 * k * k)),
            ("counting the bytes of one stack only (a and b are read, the products written)",
             Work(2 * batch * k**3, 4 * batch * k * k)),
            ("counting 8 bytes per element (float32 has 4)", Work(2 * batch * k**3, 24 * batch * k * k))]


register(function_exercise("ex-torch-predict-bmm", _batched_products, _batched_product_mistakes,
                           needs=("device", "batch", "k")))
