"""Chapter 12, the case study: what its exercises expect, and how a wrong answer is told apart.

Each check runs the learner's function on a batch of its own, on the chosen device, and watches the torch calls
the function makes (a ``TorchFunctionMode``). That shows the method on any machine, with a GPU or without: a
Python loop over the matrices calls an operation once per matrix; a copy to the host is a ``.cpu()``,
``.numpy()`` or ``.to("cpu")`` call even where the host is the device; a batch copied whole is a tensor of more
matrices than the chunk.

- ``ex-case-batched-power``: ``spectral_power(batch)``, the power of each matrix's 2-D spectrum for a stack of
  complex64 matrices, in batched calls (not one per matrix), in the batch's precision, on its device.
- ``ex-case-lu-det``: ``lu_det(a)``, determinants from ``torch.linalg.lu_factor_ex`` without any of torch's
  determinant functions, on a batch whose factorisations swap rows (a forgotten sign shows) and which holds a
  singular matrix (where ``lu_factor`` raises).
- ``ex-case-chunks``: ``in_chunks(batch, chunk, work)``: each slice of at most ``chunk`` matrices of a host array
  copied to the device, ``work`` called on it there, each result copied back to the host, the results joined
  in order.
- ``ex-case-predict-batch``: ``predicted_ms(peak_flops, bandwidth)``, the least time of the batched determinants
  and FFTs of ``count`` complex64 matrices of ``n`` x ``n``, written before "How fast is each version?" times them;
  tried on a compute-bound and a memory-bound device and on the run's own (:mod:`._predicting`).

Complex work is checked where it runs: on the chosen device, else on the CPU (MPS has no complex LU).
"""

from __future__ import annotations

import math
from collections import Counter

from gpukit.base.errors import first_line

from ._predicting import Work, function_exercise
from .checking import Exercise, answer_device, keep_output, kept_output, register, torch_function_name

# --------------------------------------------------------------------------------------------- shared
_HOST_COPIES = {"TensorBase.cpu": ".cpu()", "TensorBase.numpy": ".numpy()", "TensorBase.tolist": ".tolist()",
                "TensorBase.item": ".item()"}
_MOVES = {"TensorBase.to", "TensorBase.cuda", "TensorBase.mps", "_VariableFunctionsClass.as_tensor",
          "_VariableFunctionsClass.tensor"}
_ERRORS = (RuntimeError, NotImplementedError, TypeError)


def _target_device(name: str, args, kwargs):
    """The device a move (``.to``, ``.cuda``, ``torch.as_tensor``) names, as torch.device, or ``None``."""
    import torch

    if name == "TensorBase.cuda":
        return torch.device("cuda")
    if name == "TensorBase.mps":
        return torch.device("mps")
    target = kwargs.get("device")
    if target is None and name == "TensorBase.to":
        target = next((a for a in args[1:] if isinstance(a, (str, torch.device))), None)
    if target is None:
        return None
    try:
        return torch.device(target)
    except (RuntimeError, TypeError):
        return None


class _Watch:
    """Run a function and record the torch calls it makes: (name, args, kwargs, result), in order.

    Calls made while ``quiet`` is set (the check's own ``work``) are not recorded.
    """

    def __init__(self):
        self.calls: list[tuple[str, tuple, dict, object]] = []
        self.quiet = False

    def run(self, fn, *args):
        from torch.overrides import TorchFunctionMode

        watch = self

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                out = func(*args, **kwargs)
                if not watch.quiet:
                    watch.calls.append((torch_function_name(func), args, kwargs, out))
                return out

        with Mode():
            return fn(*args)

    def counts(self) -> Counter:
        return Counter(name for name, *_ in self.calls)

    def host_copies(self) -> list[tuple[str, object]]:
        """(how, the tensor copied) for every copy to the host: .cpu(), .numpy(), .to("cpu"), ..."""
        found = []
        for name, args, kwargs, _ in self.calls:
            if name in _HOST_COPIES:
                found.append((_HOST_COPIES[name], args[0] if args else None))
            elif name == "TensorBase.to":
                target = _target_device(name, args, kwargs)
                if target is not None and target.type == "cpu":
                    found.append((".to('cpu')", args[0] if args else None))
        return found


def _raised(what: str, error: Exception) -> str:
    """What the learner's code raised: the first sentence of its message (at most 200 characters)."""
    sentence = first_line(error).split(". ")[0].rstrip(".")
    return f"{what} raised {type(error).__name__}: {first_line(sentence, limit=200)}"


def _runs_here(device: str, dtype) -> bool:
    """Whether an LU factorisation and a 2-D FFT of ``dtype`` run on ``device`` (MPS has no complex LU)."""
    import torch

    try:
        a = torch.eye(3, dtype=dtype, device=device)[None]
        torch.linalg.lu_factor_ex(a)
        if dtype.is_complex:
            torch.fft.fft2(a)
    except _ERRORS:
        return False
    return True


# Each answer here is a function, which carries no device: the check's inputs go to the lesson's device
# (answer_device's default), and what the function does with them there is judged.
def complex_device() -> str:
    """The chosen device where complex64 LU factorisations and FFTs run there, else the CPU."""
    import torch

    device = answer_device()
    return device if device == "cpu" or _runs_here(device, torch.complex64) else "cpu"


# ----------------------------------------------------------------------------- batching a loop of FFTs
POWER_SHAPE = (48, 8, 8)  # the check's stack: 48 matrices of 8 x 8


def power_batch():
    """The check's stack of complex64 matrices, on the device where complex FFTs run."""
    import torch

    g = torch.Generator().manual_seed(1212)
    real, imag = torch.randn(2, *POWER_SHAPE, generator=g)
    return torch.complex(real, imag).to(complex_device())


def _spectral_power_expected():
    """The power of each matrix's spectrum, computed in complex128 on the CPU, as float32 on the batch's device."""
    import torch

    batch = power_batch()
    exact = torch.fft.fft2(batch.cpu().to(torch.complex128)).abs().square().sum(dim=(-2, -1))
    return exact.to(torch.float32).to(batch.device)


_INTROSPECTION = {"TensorBase.dim", "TensorBase.size", "TensorBase.__len__", "TensorBase.numel"}


def _shown(name: str) -> str:
    """torch's internal name of a function as a reader writes it: fft_fft2 -> torch.fft.fft2."""
    if name.startswith(("fft_", "linalg_")):
        return "torch." + name.replace("_", ".", 1)
    if name.startswith("TensorBase."):
        return "Tensor." + name.removeprefix("TensorBase.")
    if name.startswith("_VariableFunctionsClass."):
        return "torch." + name.removeprefix("_VariableFunctionsClass.")
    return name


def _loop_message(watch: _Watch, count: int) -> str | None:
    """A torch function called about once per matrix (or more) is a Python loop over the matrices."""
    looped = [(name, n) for name, n in watch.counts().most_common()
              if n >= count // 2 and name not in _INTROSPECTION]
    if not looped:
        return None
    # Name the computation rather than the indexing that feeds it, where both repeat.
    name, n = min(looped, key=lambda found: (".__" in found[0], -found[1]))
    shown = _shown(name)
    return (f"your function called {shown} {n} times for a stack of {count} matrices: that is a Python loop over "
            "the matrices. Call each operation once on the whole stack (torch.fft.fft2 transforms the last two "
            "axes of every matrix at once).")


def _batches_the_power(answer) -> str | None:
    if not callable(answer):
        return (f"expected your function spectral_power (a function of a batch), got {type(answer).__name__}: pass "
                "the function itself, not what it returned.")
    batch = power_batch()
    watch = _Watch()
    try:
        out = watch.run(answer, batch)
    except Exception as error:  # the reader's code: report whatever it raised
        return _raised(f"on a stack of shape {tuple(batch.shape)} (complex64), your function", error)
    if out is None:
        return "your function returned None: return one power per matrix."
    looped = _loop_message(watch, POWER_SHAPE[0])
    if looped:
        return looped
    copies = sorted({how for how, _ in watch.host_copies()})
    if copies:
        return (f"your function copies data to the host ({', '.join(copies)}): keep the work on the batch's "
                "device, in torch, so that a GPU does it.")
    keep_output(answer, out)  # what the value check compares
    return None


# ----------------------------------------------------------------------------- the determinant from LU
LU_SIZE, LU_COUNT, LU_SINGULAR = 4, 6, 3  # six 4 x 4 matrices; the fourth has a row of zeros


def lu_place():
    """Where and in what the LU exercise is checked: complex64 on the chosen device where complex LU runs there,
    else float32 on it where real LU runs, else complex64 on the CPU."""
    import torch

    device = answer_device()
    for dtype in (torch.complex64, torch.float32):
        if device == "cpu" or _runs_here(device, dtype):
            return device, dtype
    return "cpu", torch.complex64


def lu_batch():
    """The check's batch: entries of size about 1, whose LU factorisations swap rows, and a singular matrix (a
    row of zeros, which stays exactly zero through the elimination), where ``lu_factor`` raises and the
    determinant is 0."""
    import torch

    device, dtype = lu_place()
    g = torch.Generator().manual_seed(12)
    shape = (LU_COUNT, LU_SIZE, LU_SIZE)
    real, imag = torch.randn(2, *shape, generator=g)
    a = torch.complex(real, imag) if dtype.is_complex else real
    a = a.to(dtype)
    a[LU_SINGULAR, 2] = 0
    return a.to(device)


def _determinants_expected():
    """torch.linalg.det of the check's batch in double precision on the CPU, in the batch's dtype and device."""
    import torch

    a = lu_batch()
    wide = torch.complex128 if a.dtype.is_complex else torch.float64
    return torch.linalg.det(a.cpu().to(wide)).to(a.dtype).to(a.device)


_DETERMINANTS = {"det", "slogdet", "logdet"}


def _builds_det_from_lu(answer) -> str | None:
    """The learner's function must build the determinants from lu_factor_ex: none of torch's determinant
    functions may run (as where they are missing, on MPS), and a singular matrix must not make it raise."""
    import torch

    if answer is torch.linalg.det or answer is torch.det:
        return "that is torch's det itself: build the determinants from torch.linalg.lu_factor_ex."
    if not callable(answer):
        return f"expected your function itself (lu_det), got {type(answer).__name__}."
    batch = lu_batch()
    watch = _Watch()
    try:
        out = watch.run(answer, batch)
    except Exception as error:  # the reader's code: report whatever it raised
        said = _raised(f"on a batch of shape {tuple(batch.shape)} ({batch.dtype}), your function", error)
        text = str(error).lower()
        if "singular" in text or "is zero" in text or "LinAlgError" in type(error).__name__:
            said += (". One matrix of the batch is singular: lu_factor raises for it, lu_factor_ex reports it in "
                     "info and gives a U with a zero on its diagonal, whose product is the determinant 0.")
        return said
    used = sorted({name.rpartition(".")[2].removeprefix("linalg_") for name, *_ in watch.calls}
                  & _DETERMINANTS)
    if used:
        return (f"your function calls torch's {', '.join(used)}: build the determinants from "
                "torch.linalg.lu_factor_ex, as on a backend where det is missing.")
    copies = sorted({how for how, _ in watch.host_copies()})
    if copies:
        return (f"your function copies data to the host ({', '.join(copies)}): keep the work on the batch's "
                "device, in torch.")
    if out is None:
        return "your function returned None: return one determinant per matrix."
    if "linalg_lu_factor_ex" not in watch.counts():
        return "your function never calls torch.linalg.lu_factor_ex: build the determinants from its LU factors."
    keep_output(answer, out)  # what the value check compares
    return None


# ----------------------------------------------------------------------------- chunks
CHUNK_SHAPE, CHUNK = (100, 6, 6), 32  # 100 matrices in slices of at most 32: three full slices and one of 4


def chunk_batch():
    """The check's host array: float32 (every device has it), numbered so that the order of results shows."""
    import numpy as np

    rng = np.random.default_rng(1200)
    return rng.standard_normal(CHUNK_SHAPE).astype(np.float32)


def _chunks_expected():
    import torch

    return torch.from_numpy(chunk_batch()).square().sum(dim=(-2, -1))


def _wrong_parts(parts, device) -> str | None:
    """What is wrong with the slices work was given: not torch tensors, not on the device, too many matrices."""
    import torch

    for part in parts:
        if not isinstance(part, torch.Tensor):
            return (f"work received a {type(part).__module__}.{type(part).__name__}, not a torch tensor on the "
                    "device: make each slice a torch tensor and copy it to the device before work gets it.")
        if part.device.type != device.type:
            return (f"work received a slice on {part.device.type}; copy each slice to the device ({device}) "
                    "before calling work on it.")
        if len(part) > CHUNK:
            return (f"work received {len(part)} matrices at once, more than chunk={CHUNK}: give it one slice of "
                    "at most chunk matrices at a time.")
    return None


def _works_in_chunks(answer) -> str | None:
    """Run the learner's in_chunks with a work function of the check's, which records what it was given."""
    import torch

    if not callable(answer):
        return (f"expected your function in_chunks (of batch, chunk and work), got {type(answer).__name__}: pass "
                "the function itself, not what it returned.")
    batch, total = chunk_batch(), CHUNK_SHAPE[0]
    watch = _Watch()
    parts, outputs = [], []

    def work(part):
        watch.quiet = True
        try:
            parts.append(part)
            out = part.square().sum(dim=(-2, -1)) if isinstance(part, torch.Tensor) else None
            outputs.append(out)
            return out
        finally:
            watch.quiet = False

    try:
        result = watch.run(answer, batch, CHUNK, work)
    except Exception as error:  # the reader's code: what work was given says more, else report the error
        return (_wrong_parts(parts, torch.device(answer_device(*parts)))
                or _raised(f"in_chunks(batch, {CHUNK}, work) on {total} matrices", error))
    # The device the slices should be on: the GPU the learner's function copied them to (the lesson's), else the
    # default, where a slice left on the host of a GPU machine shows.
    device = torch.device(answer_device(*parts))
    if not parts:
        return "your function never called work: call work(part) on each slice, once it is on the device."
    wrong = _wrong_parts(parts, device)
    if wrong:
        return wrong
    for name, args, kwargs, moved in watch.calls:
        target = _target_device(name, args, kwargs)
        if (name in _MOVES and target is not None and target.type == device.type
                and isinstance(moved, torch.Tensor) and moved.dim() == 3 and len(moved) > CHUNK):
            return (f"your function copied {len(moved)} matrices to the device at once: copy one slice at a "
                    "time, so that the device never holds more than chunk matrices of the batch.")
    # Where the device is the CPU a slice made with torch.from_numpy is on it already, so the test above cannot
    # see a missing copy: every slice work gets must come out of a move to the device (.to, .cuda, as_tensor
    # with device=), which returns the tensor itself when it is there already.
    moved_here = {id(out) for name, args, kwargs, out in watch.calls
                  if name in _MOVES and getattr(_target_device(name, args, kwargs), "type", None) == device.type}
    if any(id(part) not in moved_here for part in parts):
        return ("work received a slice that your function never copied to the device. Here the device is the "
                f"{device.type.upper()}, where that goes unnoticed; on a GPU work would get a host tensor. Copy each "
                "slice to the chosen device before calling work on it.")
    seen = sum(len(part) for part in parts)
    if seen != total:
        return (f"work saw {seen} matrices in all, but the batch has {total}: the slices must cover every matrix "
                "once; look at the first and the last slice.")
    if len(parts) > math.ceil(total / CHUNK):
        return (f"your function called work {len(parts)} times for {total} matrices in chunks of {CHUNK}: fill "
                "each slice with chunk matrices (the last may be shorter).")
    if result is None:
        return "your function returned None: return the results of every slice, joined in order (torch.cat)."
    copied = {id(tensor) for _, tensor in watch.host_copies()}
    if any(id(out) not in copied for out in outputs):
        return ("your function keeps the results of work on the device until the end: copy each slice's "
                "result to the host (.cpu()) as it comes, so that the device holds one slice at a time.")
    keep_output(answer, result)  # what the value check compares
    return None


register(
    Exercise("ex-case-batched-power", _spectral_power_expected, rtol=1e-4, method=_batches_the_power,
             result=kept_output, writes="device code"),
    Exercise("ex-case-lu-det", _determinants_expected, rtol=1e-4, atol=1e-5, method=_builds_det_from_lu,
             result=kept_output, writes="device code"),
    Exercise("ex-case-chunks", _chunks_expected, rtol=1e-5, method=_works_in_chunks,
             result=kept_output, writes="device code"),
)


# ------------------------------------------------------------------ ex-case-predict-batch
def _det_fft(count: int, n: int, **_) -> Work:
    """Per matrix: the LU factorisation behind det, 8 n³ / 3 real FLOPs on complex values (n³ / 3 complex
    multiply-adds of 8 real FLOPs each), and the 2-D FFT, 5 n² log2(n²) real FLOPs (the usual count of a complex FFT
    of n² points); det reads each matrix once, fft2 reads it and writes its spectrum: 3 x 8 n² bytes of complex64."""
    return Work(count * (8 * n**3 / 3 + 5 * n**2 * math.log2(n**2)), count * 3 * 8 * n**2)


def _det_fft_mistakes(count: int, n: int, **_) -> list[tuple[str, Work]]:
    right = _det_fft(count, n)
    fft_flops = count * 5 * n**2 * math.log2(n**2)
    return [("counting the LU's complex multiply-adds as 2 real FLOPs each (a complex one takes 8)",
             Work(fft_flops + (right.flops - fft_flops) / 4, right.bytes_moved)),
            ("counting 4 bytes per complex64 value (it holds two float32: 8 bytes)",
             Work(right.flops, right.bytes_moved / 2)),
            ("counting each matrix's bytes once (det reads it, fft2 reads it again and writes its spectrum)",
             Work(right.flops, right.bytes_moved / 3)),
            ("counting 16 bytes per value (complex128's; the batch is complex64)",
             Work(right.flops, 2 * right.bytes_moved)),
            ("counting one matrix instead of the whole batch", _det_fft(1, n))]


register(function_exercise("ex-case-predict-batch", _det_fft, _det_fft_mistakes, needs=("device", "count", "n")))
