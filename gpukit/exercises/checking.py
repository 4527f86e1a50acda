"""The book's exercises and their checks: ``check("<exercise label>", answer)``.

The expected answer of every exercise lives here, out of the reader's sight, as a function that computes it
(from the run's values where the answer depends on them: those are passed by name, e.g.
``check("ex-par-dask-mean", task, serial_errors=serial_errors)``). Where an exercise is about a method, the
check looks at the method too (a Dask task graph was built, not a finished array). A wrong answer gets a
message that names what is wrong (kind, library, shape, dtype, device, value or method) and never shows
the expected value.

Not to be confused with :mod:`gpukit.base.arguments`, which checks the arguments of gpukit's own functions.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import math
import os
import pkgutil
from collections import Counter
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from numbers import Integral, Number
from pathlib import Path

import numpy as np

from gpukit.base.errors import error_line
from gpukit.core import device
from gpukit.core.arrays import device_index, device_kind, is_array, library_of, to_numpy


@dataclass(frozen=True)
class CheckResult:
    """The verdict on one answer. It is truthy when correct, so ``assert check(...)`` works in tests."""

    correct: bool
    message: str

    def __bool__(self) -> bool:
        return self.correct

    def __repr__(self) -> str:
        return ("Correct: " if self.correct else "Not yet: ") + self.message

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))


@dataclass(frozen=True)
class Exercise:
    """One exercise: how to compute its answer, how closely to compare, and what the method must be.

    ``expected(**context)`` computes the answer from the run's values named in ``needs``. ``method(answer,
    **context)`` returns what is wrong with how the answer was obtained (or ``None``), and ``result(answer)``
    turns a method-carrying answer (a Dask graph) into the value to compare.
    """

    label: str
    expected: Callable[..., object]
    needs: tuple[str, ...] = ()
    rtol: float = 1e-5
    atol: float = 0.0
    method: Callable[..., str | None] | None = None
    result: Callable[[object], object] | None = None
    writes: str = ""  # what the learner writes to answer: one of WRITES
    correct_means: str = ""  # what a correct number is, said after "Correct: ... matches" (what it measured)


def _number(value) -> str:
    """Whole numbers in full with thousands separators, others to six significant digits."""
    if isinstance(value, Integral) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return f"{int(value):,}"
    return f"{value:.6g}"


def compare(answer, expected, *, rtol: float = 1e-5, atol: float = 0.0) -> CheckResult:
    """Compare ``answer`` with ``expected`` and explain the first difference without revealing ``expected``.

    The checks go from coarse to fine: missing answer, kind (array or number), array library, shape,
    dtype, device, then values within ``rtol``/``atol``.
    """
    if answer is None or answer is Ellipsis:
        return CheckResult(False, "replace the placeholder (None) with your answer and run the cell again.")
    if not is_array(expected):
        if is_array(answer) and math.prod(answer.shape) == 1:
            answer = to_numpy(answer).item()
        if not isinstance(answer, Number) or isinstance(answer, bool):
            return CheckResult(False, f"expected a number, got {type(answer).__name__} {answer!r}.")
        if not np.isclose(answer, expected, rtol=rtol, atol=atol):
            direction = "too large" if answer > expected else "too small"
            return CheckResult(False, f"{_number(answer)} is {direction} (allowed relative error {rtol:g}).")
        return CheckResult(True, f"{_number(answer)} matches.")

    if not is_array(answer):
        return CheckResult(False, f"expected an array, got {type(answer).__name__}.")
    if library_of(answer) != library_of(expected):
        return CheckResult(False, f"expected a {library_of(expected)} array, got a {library_of(answer)} one.")
    if tuple(answer.shape) != tuple(expected.shape):
        return CheckResult(False, f"shape is {tuple(answer.shape)}, expected {tuple(expected.shape)}.")
    if str(answer.dtype) != str(expected.dtype):
        return CheckResult(False, f"dtype is {answer.dtype}, expected {expected.dtype}.")
    if device_kind(answer) != device_kind(expected):
        return CheckResult(False, f"the array is on {device_kind(answer)}, expected it on {device_kind(expected)}.")
    got, want = to_numpy(answer), to_numpy(expected)
    close = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    if not close.all():
        bad = np.argwhere(~close)
        first = tuple(int(i) for i in bad[0])
        value = got[first].item()  # a Python number: NumPy's repr would read np.float32(-123.0)
        shown = _number(value) if isinstance(value, Number) and not isinstance(value, bool) else repr(value)
        where = first[0] if len(first) == 1 else first
        return CheckResult(False, f"{len(bad)} of {close.size} values differ; the first at index {where} is "
                                  f"{shown}.")
    return CheckResult(True, f"shape {tuple(answer.shape)}, dtype {answer.dtype} and all values match.")


EXERCISES: dict[str, Exercise] = {}


# What an exercise makes the learner write. The book wants most exercises to be code that runs on the device the
# lesson chose (or a script that a tool runs on it: a job script, a DDP script); tests/book/test_lesson_counts.py
# counts them.
WRITES = {
    "device code": "code that runs on the chosen device (a GPU, MPS, or the CPU where there is none)",
    "a script": "a script that a tool runs: a Slurm job script, a DDP script under torchrun",
    "CPU code": "code that runs on the CPU by design (parallel Python, random streams)",
    "a number": "a number worked out by hand or read from the lesson",
}


# What a learner's function returned when a check's method step ran it, for the result step of the same check:
# the chapters' checks run an answer once and judge both the way and the result from that run. Then the value
# compared, for the expected step (answer_device). It lives as long as one call of check (a fresh dict each time,
# so nothing is carried from one check to the next, and nothing is keyed by an answer's id).
_ATTEMPT: ContextVar[dict | None] = ContextVar("gpukit_exercise_attempt", default=None)


def keep_output(answer, output) -> None:
    """In a check's method step: keep what ``answer`` returned for the result step."""
    attempt = _ATTEMPT.get()
    if attempt is None:
        raise RuntimeError("keep_output is for an exercise's method step, which check() runs")
    attempt["output"] = output


def kept_output(answer=None):
    """In a check's result step: what the method step kept (None if it kept nothing). It takes the learner's
    answer, as every result step does, so that it can be one (``Exercise(..., result=kept_output)``); what the
    method step kept is the check's own, not read from the answer."""
    attempt = _ATTEMPT.get()
    return None if attempt is None else attempt.get("output")


def answer_device(*found) -> str:
    """The device a check works on: the GPU the learner's tensors are on (``found``: the answer, what it returned,
    its generators; then, in the expected step, the value being compared and what the method step kept), else
    the lesson's default, :func:`gpukit.core.device.pick_device`.

    A learner's GPU is the device their lesson chose, which need not be pick_device()'s (MPS beside CUDA, cuda:1).
    A tensor on the CPU or on meta is not followed: on a GPU machine that is the mistake to tell (data left on the
    host). Where the answer carries no tensor (a function the check runs on inputs of its own), the default is
    all there is to go by."""
    attempt = _ATTEMPT.get() or {}
    for item in (*found, attempt.get("answer"), attempt.get("output")):
        where = getattr(item, "device", None)
        if where is None:
            continue
        kind, index = getattr(where, "type", None), getattr(where, "index", None)  # a torch.device
        if kind is None:  # another library's device (CuPy's)
            kind, index = device_kind(item), device_index(item)
        if kind == "cuda":
            return "cuda" if index is None else f"cuda:{index}"
        if kind == "mps":
            return "mps"
    return device.pick_device()


class CountTensorCalls:
    """Within ``with``: count the calls of some Tensor methods (``names``), e.g. those that read a value on the
    host; ``counts`` maps a method's name to its calls, ``total`` adds them up."""

    def __init__(self, names: tuple[str, ...]):
        self.names = names
        self.counts: Counter[str] = Counter()

    def __enter__(self):
        import torch

        self.counts.clear()
        self._own = {name: torch.Tensor.__dict__.get(name) for name in self.names}
        for name in self.names:
            setattr(torch.Tensor, name, self._counting(name, getattr(torch.Tensor, name)))
        return self

    def _counting(self, name: str, method: Callable) -> Callable:
        def counted(tensor, *args, **kwargs):
            self.counts[name] += 1
            return method(tensor, *args, **kwargs)

        return counted

    def __exit__(self, *exc) -> None:
        import torch

        for name, own in self._own.items():
            if own is None:
                delattr(torch.Tensor, name)  # the method was inherited from torch._C.TensorBase
            else:
                setattr(torch.Tensor, name, own)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def raised(what: str, error: BaseException) -> str:
    """``what raised TypeError: <first line of its message>``, without a closing stop, for a sentence to go on."""
    return f"{what} raised {error_line(error).rstrip(' .!:')}"


def not_a_function(answer, name: str, takes: str) -> str | None:
    """Why ``answer`` is not the learner's function, or None."""
    if callable(answer) and not isinstance(answer, type):
        return None
    return (f"expected your function itself ({name}, a def taking {takes}), got {type(answer).__name__}: pass the "
            "function, not what it returns.")


def script_text(answer, what: str) -> tuple[str | None, Path | None, str | None]:
    """(the script's text, its file if the answer is a path, None) from a str holding the script or a path to its
    file; else (None, None, what is wrong). ``what``: the script the exercise expects, as said to an answer of
    another type ("expected <what> or the path of its file, got int.")."""
    if isinstance(answer, (str, os.PathLike)):
        looks_like_a_path = isinstance(answer, os.PathLike) or ("\n" not in answer and Path(answer).is_file())
        if looks_like_a_path:
            path = Path(answer)
            if not path.is_file():
                return None, None, f"there is no file at {path.name}: pass the script's text, or the path of its file."
            return path.read_text(encoding="utf-8", errors="replace"), path, None
        return answer, None, None
    return None, None, f"expected {what} or the path of its file, got {type(answer).__name__}."


def torch_function_name(func) -> str:
    """The qualified name of a function that a ``TorchFunctionMode`` sees (``TensorBase.to``), else its name or
    repr."""
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)


def seeded_regression(device, *, seed: int, samples: int, hidden: int, activation, init_scale: float, lr: float,
                      labels: Callable):
    """A two-layer float32 model (8 inputs, ``hidden`` units, ``activation``, one output), its SGD optimiser and
    regression data of a check's own, on ``device``: the same on every run. Everything is drawn from one generator
    seeded with ``seed``, in this order: the inputs, the labels (``labels(x, generator)``), the weights. Never from
    ``torch.manual_seed``'s stream: a check must leave the reader's random numbers as they were."""
    import torch
    from torch import nn

    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, 8, generator=generator)
    y = labels(x, generator)
    # Made without nn.Linear's random initialisation, then given weights from the check's own generator.
    model = nn.Sequential(nn.utils.skip_init(nn.Linear, 8, hidden), activation(),
                          nn.utils.skip_init(nn.Linear, hidden, 1))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(init_scale * torch.randn(parameter.shape, generator=generator))
    target = torch.device(device)
    model.to(target)
    optimiser = torch.optim.SGD(model.parameters(), lr=lr)
    return model, optimiser, x.to(target), y.to(target)


def flat_parameters(model):
    """Every parameter of ``model``, detached and flattened into one tensor on the model's device."""
    import torch

    return torch.cat([p.detach().flatten() for p in model.parameters()])


def register(*exercises: Exercise) -> None:
    """Add exercises to the book's registry; a label may be used once only."""
    for exercise in exercises:
        if exercise.writes not in WRITES:
            raise ValueError(f"{exercise.label}: writes={exercise.writes!r} must say what the learner writes, one of "
                             f"{sorted(WRITES)}")
        if exercise.label in EXERCISES:
            raise ValueError(f"the exercise label {exercise.label!r} is registered twice")
        EXERCISES[exercise.label] = exercise


# The chapters' modules (gpukit/exercises/<chapter>.py), each registering its exercises when imported. They are
# imported at the first check, not with gpukit: a lesson's first cell imports `check` without paying for the
# eighteen chapters' imports, and a new chapter's module is found without a list to keep.
NOT_CHAPTERS = {"checking"}


def all_exercises() -> dict[str, Exercise]:
    """The registry, every chapter's module imported (once) so that each exercise is in it."""
    _import_the_chapters()
    return EXERCISES


@functools.cache
def _import_the_chapters() -> None:
    """Import each chapter's module, listed from this folder: once per process, not at every check."""
    for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if not module.name.startswith("_") and module.name not in NOT_CHAPTERS:
            importlib.import_module(f"{__package__}.{module.name}")


def check(label: str, answer, **context) -> CheckResult:
    """Check ``answer`` to the exercise called ``label`` and say what, if anything, is wrong with it.

    ``context`` carries the run's values that the exercise's answer is computed from (the exercise text says
    which); they are inputs, never the answer itself.
    """
    all_exercises()
    if not isinstance(label, str) or label not in EXERCISES:
        near = difflib.get_close_matches(str(label), EXERCISES, n=1, cutoff=0.6)
        return CheckResult(False, f"there is no exercise labelled {label!r}" +
                           (f": did you mean {near[0]!r}?" if near else
                            ": copy the label from the exercise's title, e.g. 'ex-env-batch-bytes'."))
    exercise = EXERCISES[label]
    missing = [name for name in exercise.needs if name not in context]
    unexpected = sorted(set(context) - set(exercise.needs))
    if missing or unexpected:
        # A misuse of check, not a wrong answer: say what to pass, as a verdict rather than a traceback.
        wanted = ", ".join(f"{name}={name}" for name in exercise.needs)
        call = f"check({label!r}, answer{', ' + wanted if wanted else ''})"
        if missing:
            why = (f"this check also needs {', '.join(missing)}: the answer is computed from this run's "
                   f"{' and '.join(missing)}, so pass {'them' if len(missing) > 1 else 'it'} by name")
        else:
            why = f"this check takes no {', '.join(unexpected)}"
        return CheckResult(False, f"{why}: {call}.")
    return _verdict(exercise, answer, context)


def _verdict(exercise: Exercise, answer, context: dict) -> CheckResult:
    if answer is None or answer is Ellipsis:
        return compare(answer, None)
    token = _ATTEMPT.set({})
    try:
        return _judged(exercise, answer, context)
    finally:
        _ATTEMPT.reset(token)


def _judged(exercise: Exercise, answer, context: dict) -> CheckResult:
    if exercise.method is not None:
        wrong_method = exercise.method(answer, **context)
        if wrong_method:
            return CheckResult(False, wrong_method)
    if exercise.result is not None:
        answer = exercise.result(answer)
    _ATTEMPT.get()["answer"] = answer  # for the expected step, which may ask where it is (answer_device)
    verdict = compare(answer, exercise.expected(**context), rtol=exercise.rtol, atol=exercise.atol)
    if verdict.correct and exercise.correct_means:
        return CheckResult(True, f"{verdict.message.rstrip('.')}: {exercise.correct_means}.")
    return verdict

