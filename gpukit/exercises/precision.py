"""Chapter 15, Precision, the data pipeline and CUDA graphs: what its exercises expect, and how a wrong answer is
told apart.

Each exercise asks for a function, and the check runs it on data of its own on the lesson's device (``device``,
passed by name), never with the reader's random stream:

- ``ex-prec-fp16-scaled``: ``scaled_fp16_matmul(a, b)``, the product of two float32 matrices computed in
  float16 on their device, each input first scaled by a power of two so that nothing overflows, the scales
  undone in float32 afterwards. The check's matrices hold multiples of 256 and of 64 whose product reaches tens
  of millions, far above float16's largest value (65504); scaled by powers of two, every step is exact, so the
  result must equal the float64 product. The check watches the matrix products that PyTorch dispatches (after
  autocast, so ``torch.autocast`` with float16 counts as float16) and rejects a product made in another dtype;
  a result holding ``inf`` is an overflow; last, it runs the function on matrices on PyTorch's ``meta`` device,
  where scales read on the host (``.item()``), which on a GPU wait for it, fail (:mod:`._on_meta`);
- ``ex-prec-autocast-step``: ``autocast_step(model, optimiser, x, y)``, one training step whose forward pass and
  loss run under ``torch.autocast`` with bfloat16 and whose backward pass and optimiser step run after it. The
  check trains a small model of its own for a few steps with it and watches: the output dtype of every
  ``nn.Linear`` (bfloat16, not float32 or float16), whether autocast was still on during the backward pass (a
  hook on each parameter's gradient), the parameters' dtype afterwards (float32: autocast keeps the weights in
  float32) and what the step returned (the loss as a float32 tensor without its graph). Then it compares the
  trained parameters with the same training done by the book;
- ``ex-prec-loader``: ``make_loader(dataset, device)``, a ``DataLoader`` over the given dataset that loads in
  two worker processes or more, each keeping ``prefetch_factor=4`` batches ready, in shuffled batches of 32
  that cover every sample, with pinned memory where the device is CUDA and only there. The check reads the
  loader's settings, then runs one epoch, copying each batch to the device with ``non_blocking=True``, and
  compares the sample numbers it saw with the dataset's.
- ``ex-prec-fp8-rows``: ``to_fp8_rows(t)``, a float32 matrix stored in ``float8_e4m3fn`` with one float32 scale
  per row, ``(q, scales)`` with ``q * scales`` close to ``t``. The check draws a fresh matrix at each call (rows
  from about 1e-5 to 1e5 in size, so that no single scale serves them all and a hard-coded answer cannot pass) on
  the lesson's device (the CPU where that is Apple's MPS, which has no FP8 dtypes), and grades the scales as well
  as the values: each row's largest magnitude divided by its scale must land in (224, 448], the top octave of
  e4m3 (above 448 the cast saturates; below 224 the scale wastes range, and the smallest values lose digits or
  fall to zero); then each row read back must lie within 7 % of the row (3 mantissa bits keep each value within
  2**-4, 6.25 %); last, it runs the function on a matrix on PyTorch's ``meta`` device, where scales made on the
  host (a loop over rows with ``.item()``) fail as they would on a GPU (:mod:`._on_meta`);
- ``ex-prec-predict-bf16``: ``predicted_ms(peak_flops, bandwidth)``, the least time of the ``size`` x ``size``
  bfloat16 product, written before the formats are timed; tried on a compute-bound and a memory-bound device and
  on the run's own where gpukit knows its bfloat16 peak (:mod:`._predicting`).

The checks run the learner's function once, in the ``method`` step, and hand what it returned (or trained) to
the comparison (``result``) through :func:`.checking.keep_output`.
"""

from __future__ import annotations

from ._on_meta import host_use_on_meta
from ._predicting import Work, function_exercise
from .checking import Exercise, flat_parameters, register, seeded_regression
from .checking import keep_output as _kept
from .checking import kept_output as _output_of
from .checking import not_a_function as _a_function
from .checking import raised as _raised

# The PyTorch operations that multiply matrices, as a TorchDispatchMode sees them: below autocast, which has cast
# their operands by then, and below composite functions (matmul, linear, einsum), which call these.
_PRODUCTS = ("mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot")


class _WatchProducts:
    """Within ``with``: the dtypes of the operands of every matrix product PyTorch dispatches."""

    def __enter__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        watch = self

        class Products(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = func.overloadpacket.__name__
                if name in _PRODUCTS:
                    watch.dtypes.append(tuple(str(a.dtype).removeprefix("torch.") for a in args
                                              if hasattr(a, "dtype") and a.dim() > 0))
                return func(*args, **(kwargs or {}))

        self.dtypes: list[tuple[str, ...]] = []
        self._mode = Products()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)


# ------------------------------------------------------------------------------------------ ex-prec-fp16-scaled
_ROWS, _INNER, _COLUMNS = 48, 32, 40


def _large_matrices(device):
    """Two float32 matrices whose product overflows float16: multiples of 256 (up to 2048) and of 64 (up to
    512). Every entry of the product is a multiple of 2**14 below 2**25, so float32 holds it exactly; scaled by
    powers of two, each input and each product fits float16 exactly too."""
    import torch

    generator = torch.Generator().manual_seed(15)
    a = 256 * torch.randint(-8, 9, (_ROWS, _INNER), generator=generator).float()
    b = 64 * torch.randint(-8, 9, (_INNER, _COLUMNS), generator=generator).float()
    return a.to(device), b.to(device)


def _exact_product(device):
    a, b = _large_matrices("cpu")
    return (a.double() @ b.double()).float().to(device)


def _multiplies_in_float16(answer, device) -> str | None:
    import torch

    wrong = _a_function(answer, "scaled_fp16_matmul", "a, b")
    if wrong:
        return wrong
    a, b = _large_matrices(device)
    try:
        with _WatchProducts() as products:
            result = answer(a.clone(), b.clone())
    except Exception as error:  # the reader's code: report whatever it raised
        return _raised(f"on two float32 matrices on {a.device.type} your function", error) + "."
    if not products.dtypes:
        return ("your function multiplied no matrices (no mm, addmm or bmm ran): compute the product with @ or "
                "torch.matmul, in float16.")
    others = sorted({dtype for operands in products.dtypes for dtype in operands if dtype != "float16"})
    if others:
        return (f"your function multiplied matrices in {', '.join(others)}: the exercise is to make the product "
                "work in float16, so convert the scaled inputs with .half() (or multiply under "
                "torch.autocast with dtype=torch.float16).")
    if isinstance(result, torch.Tensor) and result.is_floating_point() and not torch.isfinite(result).all():
        bad = int((~torch.isfinite(result)).sum())
        return (f"{bad} of {result.numel()} values of your product are inf or nan: float16 overflowed (its largest "
                "value is 65504). Scale each input down by a power of two before the product.")
    on_the_host = host_use_on_meta(lambda: answer(torch.empty(a.shape, device="meta"),
                                                  torch.empty(b.shape, device="meta")))
    if on_the_host:
        return (f"on two matrices on PyTorch's meta device (no values; it stands for a GPU) your function "
                f"{on_the_host}: it reads a value on the host (.item(), float(), math on a tensor) or makes a "
                "tensor there, and on a GPU each such read waits for the device. Keep the scales as tensors on the "
                "matrices' device.")
    _kept(answer, result)
    return None


# ---------------------------------------------------------------------------------------- ex-prec-autocast-step
_STEPS = 4  # after one step outside the watch
_LR = 0.05


def _regression(device):
    """A small model (float32), its SGD optimiser and data of the check's own, on ``device``; the same on every
    run."""
    import torch
    from torch import nn

    def labels(x, generator):
        return torch.sin(x[:, :1]) + 0.1 * torch.randn(128, 1, generator=generator)

    return seeded_regression(device, seed=16, samples=128, hidden=32, activation=nn.ReLU, init_scale=0.3, lr=_LR,
                             labels=labels)


def _parameters(model):
    """Every parameter, flattened, as float32 (a wrong answer may have cast the model)."""
    return flat_parameters(model).float()


def _autocast_reference(model, optimiser, x, y):
    import torch
    from torch import nn

    optimiser.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.bfloat16):
        loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimiser.step()
    return loss.detach()


def _autocast_parameters(device):
    model, optimiser, x, y = _regression(device)
    for _ in range(1 + _STEPS):
        _autocast_reference(model, optimiser, x, y)
    return _parameters(model)


class _WatchTraining:
    """Within ``with``: the output dtypes of the model's ``nn.Linear`` layers, and whether autocast was on for
    the device type while the backward pass computed each parameter's gradient."""

    def __init__(self, model, device_type: str):
        self.model, self.device_type = model, device_type

    def __enter__(self):
        import torch
        from torch import nn

        self.outputs: list[str] = []
        self.backward_under_autocast = False

        def record_output(module, inputs, output):
            self.outputs.append(str(output.dtype).removeprefix("torch."))

        def record_backward(grad):
            if torch.is_autocast_enabled(self.device_type):
                self.backward_under_autocast = True

        self._handles = [m.register_forward_hook(record_output) for m in self.model.modules()
                         if isinstance(m, nn.Linear)]
        self._handles += [p.register_hook(record_backward) for p in self.model.parameters()]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()


def _steps_under_autocast(answer, device) -> str | None:
    import torch

    wrong = _a_function(answer, "autocast_step", "model, optimiser, x, y")
    if wrong:
        return wrong
    model, optimiser, x, y = _regression(device)
    before = _parameters(model).clone()
    kind = x.device.type
    try:
        answer(model, optimiser, x, y)
        with _WatchTraining(model, kind) as watch:
            returned = [answer(model, optimiser, x, y) for _ in range(_STEPS)]
    except Exception as error:  # the reader's code: report whatever it raised
        return _raised(f"training on {kind}, your step", error) + "."
    dtypes = {p.dtype for p in model.parameters()}
    if dtypes != {torch.float32}:
        names = ", ".join(sorted(str(d).removeprefix("torch.") for d in dtypes))
        return (f"after your steps the model's parameters are {names}: autocast keeps the weights in float32 and "
                "casts each operation's inputs as it runs. Leave the model as it is (no model.to(dtype), .half() or "
                ".bfloat16()).")
    if torch.equal(_parameters(model), before):
        return ("your step left the model's parameters as they were: it trains nothing yet. Write the whole step, "
                "optimiser.step() included.")
    layers = sorted(set(watch.outputs))
    if layers != ["bfloat16"]:
        hint = ("name the device type of the tensors: torch.autocast(x.device.type, dtype=torch.bfloat16)"
                if "float32" in layers else "ask for dtype=torch.bfloat16")
        return (f"the model's Linear layers computed in {', '.join(layers) or 'nothing'} during your steps, not "
                f"bfloat16: run the forward pass and the loss inside torch.autocast, and {hint}.")
    if watch.backward_under_autocast:
        return ("loss.backward() ran while autocast was still on: end the with block after the loss. The backward "
                "pass runs each operation in the dtype its forward operation used, and PyTorch's documentation "
                "advises against backward passes under autocast.")
    last = returned[-1]
    if not isinstance(last, torch.Tensor):
        return (f"your step returned {type(last).__name__}, not the loss as a tensor: return loss.detach(), which "
                "stays on the device (.item() or float() would make the host wait for it).")
    if last.requires_grad:
        return "your step returned the loss with its graph: return loss.detach()."
    if last.dtype != torch.float32:
        return (f"your step returned a {str(last.dtype).removeprefix('torch.')} loss: under autocast mse_loss "
                "computes in float32; return that loss, detached, without converting it.")
    _kept(answer, _parameters(model))
    return None


# ------------------------------------------------------------------------------------------------ ex-prec-loader
_SAMPLES, _BATCH, _PREFETCH, _LEAST_WORKERS = 100, 32, 4, 2  # 100: the last batch is short


class NumberedSamples:
    """The check's dataset: sample ``i`` is a row of 6 values made from ``i``, and ``i`` itself.

    A map-style dataset (``__len__`` and ``__getitem__``), defined in a module so that worker processes started
    by spawn (macOS, Windows) can import it."""

    def __len__(self) -> int:
        return _SAMPLES

    def __getitem__(self, index: int):
        import torch

        return torch.full((6,), float(index)), torch.tensor(index)


def _every_sample(device):
    import torch

    return torch.arange(_SAMPLES).to(device)


def _loads_ahead(answer, device) -> str | None:
    import torch
    from torch.utils.data import DataLoader, RandomSampler

    wrong = _a_function(answer, "make_loader", "dataset, device")
    if wrong:
        return wrong
    dataset = NumberedSamples()
    try:
        loader = answer(dataset, device)
    except Exception as error:  # the reader's code: report whatever it raised
        return _raised("your function", error) + "."
    if not isinstance(loader, DataLoader):
        return (f"your function returned {type(loader).__name__}, not a torch.utils.data.DataLoader: return the "
                "loader itself, not its batches.")
    if loader.dataset is not dataset:
        return "your loader reads another dataset: build it from the dataset your function is given."
    if loader.num_workers < _LEAST_WORKERS:
        return (f"your loader has num_workers={loader.num_workers}: the main process would load every batch "
                f"itself, between steps, so loading never overlaps the step. Ask for {_LEAST_WORKERS} workers.")
    if loader.prefetch_factor != _PREFETCH:
        return (f"each worker keeps {loader.prefetch_factor} batches ready (prefetch_factor): the exercise asks "
                f"for {_PREFETCH}.")
    if loader.batch_size != _BATCH:
        return f"your loader makes batches of {loader.batch_size} samples: the exercise asks for {_BATCH}."
    if not isinstance(loader.sampler, RandomSampler):
        return ("your loader gives the samples in the same order every epoch: ask for shuffle=True, as training "
                "does.")
    if loader.drop_last:
        return ("your loader drops the last, shorter batch (drop_last=True): an epoch of training should see every "
                "sample.")
    on_cuda = torch.device(device).type == "cuda"
    if loader.pin_memory != on_cuda:
        return ("your loader pins its batches on a device that is not CUDA: pinned (page-locked) memory speeds up "
                "copies to an NVIDIA GPU only; elsewhere PyTorch warns and pins nothing. Pin where the device is "
                "CUDA: pin_memory=(torch.device(device).type == 'cuda')." if loader.pin_memory else
                "on CUDA your loader should pin its batches (pin_memory=True), so that .to(device, "
                "non_blocking=True) can copy them while the host goes on.")
    seen = []
    try:
        # A shuffling loader draws its seeds from torch's global generator: the reader's random numbers must
        # come out as they would have without the check.
        with torch.random.fork_rng(devices=[]):
            for _, numbers in loader:
                seen.append(numbers.to(device, non_blocking=True))
    except Exception as error:
        return _raised("one epoch of your loader", error) + "."
    finally:
        del loader  # its persistent workers, if any, end with it
    if not seen:
        return "one epoch of your loader gave no batch at all."
    _kept(answer, torch.sort(torch.cat(seen)).values)
    return None


register(
    Exercise("ex-prec-fp16-scaled", _exact_product, needs=("device",), rtol=1e-3, atol=2.0**13,
             method=_multiplies_in_float16, result=_output_of, writes="device code"),
    Exercise("ex-prec-autocast-step", _autocast_parameters, needs=("device",), rtol=1e-4, atol=1e-6,
             method=_steps_under_autocast, result=_output_of, writes="device code"),
    Exercise("ex-prec-loader", _every_sample, needs=("device",), method=_loads_ahead, result=_output_of,
             writes="device code"),
)


# ------------------------------------------------------------------------------------------------ ex-prec-fp8-rows
_FP8_ROWS, _FP8_COLUMNS = 12, 256
_E4M3_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max
_ROW_ERROR = 0.07  # what 3 mantissa bits allow a row (each value within 2**-4), with a margin


def _fp8_device(device):
    """Where the check's FP8 runs: the lesson's device, but the CPU for MPS, which has no FP8 dtypes."""
    import torch

    chosen = torch.device(device)
    return torch.device("cpu") if chosen.type == "mps" else chosen


def _rows_of_many_sizes(device):
    """A fresh float32 matrix, drawn from the operating system's randomness: row i is normal values times 10**e_i,
    the e_i spread evenly over [-5, 5], each moved by up to 0.4 at random, in a random order. So the rows' sizes
    always span ten orders of magnitude: some rows lie wholly below e4m3's smallest value, others far above 448."""
    import os

    import torch

    generator = torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little") % 2**63)
    exponents = torch.linspace(-5.0, 5.0, _FP8_ROWS) + torch.empty(_FP8_ROWS).uniform_(-0.4, 0.4, generator=generator)
    exponents = exponents[torch.randperm(_FP8_ROWS, generator=generator)].unsqueeze(1)
    rows = torch.randn(_FP8_ROWS, _FP8_COLUMNS, generator=generator) * 10.0**exponents
    return rows.to(_fp8_device(device))


def _no_row_error(device):
    import torch

    return torch.zeros(_FP8_ROWS, device=_fp8_device(device))


def _scales_each_row(answer, device) -> str | None:
    import torch

    wrong = _a_function(answer, "to_fp8_rows", "t")
    if wrong:
        return wrong
    t = _rows_of_many_sizes(device)
    try:
        returned = answer(t.clone())
    except Exception as error:  # the reader's code: report whatever it raised
        return _raised(f"on a float32 matrix on {t.device.type}, your function", error) + "."
    if not (isinstance(returned, tuple) and len(returned) == 2):
        return (f"your function returned {type(returned).__name__}, not a pair: return q, scales (the FP8 values and "
                "the scales that multiply them back).")
    q, scales = returned
    if not isinstance(q, torch.Tensor) or q.dtype != torch.float8_e4m3fn:
        kind = str(q.dtype).removeprefix("torch.") if isinstance(q, torch.Tensor) else type(q).__name__
        return f"q is {kind}: store the scaled values in torch.float8_e4m3fn, with .to(torch.float8_e4m3fn)."
    if tuple(q.shape) != tuple(t.shape):
        return f"q has shape {tuple(q.shape)}, not the matrix's {tuple(t.shape)}."
    if not isinstance(scales, torch.Tensor) or not scales.is_floating_point():
        return (f"scales is {type(scales).__name__}: return the scales as a float32 tensor, one per row, on the "
                "matrix's device.")
    if tuple(scales.shape) != (_FP8_ROWS, 1):
        return (f"scales has shape {tuple(scales.shape)}: the exercise asks for one scale per row, shape "
                f"({_FP8_ROWS}, 1), so that q * scales broadcasts along each row (amax over dim=1 with "
                "keepdim=True).")
    if scales.dtype != torch.float32:
        return (f"the scales are {str(scales.dtype).removeprefix('torch.')}: keep them in float32, as "
                "torch._scaled_mm takes them.")
    if q.device != t.device or scales.device != t.device:
        return f"q is on {q.device} and the scales on {scales.device}: keep both on the matrix's device, {t.device}."
    largest = t.abs().amax(dim=1, keepdim=True)
    landing = (largest / scales.abs()).squeeze(1)  # where each row's largest magnitude lands in e4m3
    if not torch.isfinite(landing).all() or (scales <= 0).any():
        return "some scales are zero, negative or not finite: each scale is the row's largest magnitude over 448."
    over = int((landing > _E4M3_MAX * (1 + 1e-3)).sum())
    if over:
        return (f"in {over} of {_FP8_ROWS} rows the largest value divided by its scale lies above 448, where the "
                "cast to float8_e4m3fn saturates: each such value comes back as 448 times the scale. The scale "
                "is too small: make it the row's largest magnitude over 448.")
    under = int((landing <= _E4M3_MAX / 2).sum())
    if under:
        return (f"in {under} of {_FP8_ROWS} rows the largest value divided by its scale lies at or below 224, "
                "less than half of 448: the scale wastes the top of e4m3's range, and the row's smallest values "
                "lose digits or fall to zero. Send each row's largest magnitude to 448 (or to a power of two "
                "just below it).")
    back = q.float() * scales
    row_errors = (back - t).norm(dim=1) / t.norm(dim=1)
    off = int((row_errors > _ROW_ERROR).sum())
    if off:
        return (f"{off} of {_FP8_ROWS} rows read back (q.float() * scales) lie more than {_ROW_ERROR:.0%} from the "
                "matrix's rows, the worst by {:.0%}: divide each row by the very scale you return for it.".format(
                    row_errors.max().item()))
    on_the_host = host_use_on_meta(lambda: answer(torch.empty(t.shape, device="meta")))
    if on_the_host:
        return (f"on a matrix on PyTorch's meta device (no values; it stands for a GPU) your function {on_the_host}: "
                "it makes the scales on the host (a loop over rows with .item(), torch.tensor of Python numbers, "
                ".cpu()), which on a GPU waits for every row and leaves the scales off the matrix's device. Compute "
                "them with tensor operations on the whole matrix.")
    _kept(answer, row_errors)
    return None


# Each row read back, against the row: within _ROW_ERROR of it (the kept output is each row's relative error).
register(Exercise("ex-prec-fp8-rows", _no_row_error, needs=("device",), rtol=0.0, atol=_ROW_ERROR,
                  method=_scales_each_row, result=_output_of, writes="device code"))


# ------------------------------------------------------------------ ex-prec-predict-bf16
def _bf16_product(size: int, **_) -> Work:
    """size x size bfloat16 matrices multiplied: 2 size³ FLOPs (a multiply and an add per term); two matrices read
    and one written, 2 bytes a value."""
    return Work(2 * size**3, 3 * 2 * size**2)


def _bf16_mistakes(size: int, **_) -> list[tuple[str, Work]]:
    right = _bf16_product(size)
    return [("counting a multiply-add as one FLOP", Work(right.flops / 2, right.bytes_moved)),
            ("counting 4 bytes per value (float32's; bfloat16 has 2)", Work(right.flops, 2 * right.bytes_moved)),
            ("counting one matrix's bytes (the product reads two and writes a third)",
             Work(right.flops, right.bytes_moved / 3))]


register(function_exercise("ex-prec-predict-bf16", _bf16_product, _bf16_mistakes, dtype="bfloat16",
                           needs=("device", "size")))
