"""The book's exercises and their checks: ``check("<exercise label>", answer)``.

The expected answer of every exercise lives here, out of the reader's sight, as a function that computes it
(from the run's values where the answer depends on them: those are passed by name, e.g.
``check("ex-par-dask-mean", task, serial_errors=serial_errors)``). Where an exercise is about a method, the
check looks at the method too (a Dask task graph was built, not a finished array). A wrong answer gets a
message that names what is wrong (kind, library, shape, dtype, device, value or method) and never shows
the expected value.

Not to be confused with :mod:`gpukit.arguments`, which checks the arguments of gpukit's own functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral, Number

import numpy as np

from .arrays import device_kind, is_array, library_of, to_numpy


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
    check_device: bool = True


def _number(value) -> str:
    """Whole numbers in full with thousands separators, others to six significant digits."""
    if isinstance(value, Integral) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return f"{int(value):,}"
    return f"{value:.6g}"


def compare(answer, expected, *, rtol: float = 1e-5, atol: float = 0.0, check_device: bool = True) -> CheckResult:
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
    if check_device and device_kind(answer) != device_kind(expected):
        return CheckResult(False, f"the array is on {device_kind(answer)}, expected it on {device_kind(expected)}.")
    got, want = to_numpy(answer), to_numpy(expected)
    close = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    if not close.all():
        bad = np.argwhere(~close)
        first = tuple(int(i) for i in bad[0])
        return CheckResult(False, f"{len(bad)} of {close.size} values differ; the first at index {first} is "
                                  f"{got[first]!r}.")
    return CheckResult(True, f"shape {tuple(answer.shape)}, dtype {answer.dtype} and all values match.")


# ------------------------------------------------------------------------------------------ exercises
def _zeros_on_the_chosen_device():
    import torch

    from .device import pick_device

    return torch.zeros(2, 3, dtype=torch.float32, device=pick_device())


def _torch_threads_now():
    import torch

    return torch.get_num_threads()


def _first_draws_of_jumped_generators():
    from .random_streams import first_draws, jumped_generators

    return first_draws(jumped_generators(2026, 4))


def _mean_of_folds(serial_errors):
    return np.asarray(serial_errors).mean(axis=0)


def _is_a_dask_graph_over_folds(answer, serial_errors) -> str | None:
    if library_of(answer) != "dask" or not hasattr(answer, "dask") or not hasattr(answer, "compute"):
        return (f"expected a Dask delayed task (not yet computed), got {type(answer).__name__}: build the "
                "graph with dask.delayed and pass its last task, without calling .compute().")
    n_tasks, n_folds = len(answer.dask), len(serial_errors)
    if n_tasks < n_folds + 1:
        return (f"the task graph has {n_tasks} task(s); it needs one task per fold ({n_folds}) and one more "
                "that averages them.")
    return None


def _computed(answer):
    return answer.compute()


EXERCISES: dict[str, Exercise] = {}


def register(*exercises: Exercise) -> None:
    """Add exercises to the book's registry; a label may be used once only."""
    for exercise in exercises:
        if exercise.label in EXERCISES:
            raise ValueError(f"the exercise label {exercise.label!r} is registered twice")
        EXERCISES[exercise.label] = exercise


# Chapter 0, environment check
register(
    Exercise("ex-env-batch-bytes", lambda: 64 * 3 * 224 * 224 * np.dtype("float16").itemsize),
    Exercise("ex-env-zeros-on-device", _zeros_on_the_chosen_device),
)
# Chapter 1, CPU versus GPU
register(
    Exercise("ex-cpu-gpu-matmul-flops", lambda: 2 * 3000**3),
    Exercise("ex-cpu-gpu-transfer-share", lambda: (2 + 1) * 60 / ((2 + 1) * 60 + 70), rtol=1e-3),
    Exercise("ex-cpu-gpu-ew-bytes", lambda: (4 + 4) * 10_000_000),
)
# Chapter 2, parallel Python on the CPU
register(
    Exercise("ex-par-torch-threads", _torch_threads_now),
    Exercise("ex-par-dask-mean", _mean_of_folds, needs=("serial_errors",), rtol=1e-9,
             method=_is_a_dask_graph_over_folds, result=_computed),
    Exercise("ex-par-jumped", _first_draws_of_jumped_generators),
)


# Chapter 3, CuPy
_SOFTMAX_VALUES = ((1.0, 2.0, 3.0), (-1.0, 0.5, 4.0))


def _softmax_inputs() -> dict[str, object]:
    """The arrays a reader's array-API softmax is tried on: NumPy float64 and torch float32."""
    import torch

    return {"a NumPy array": np.array(_SOFTMAX_VALUES),
            "a torch tensor": torch.tensor(_SOFTMAX_VALUES, dtype=torch.float32)}


def _softmax_expected(x):
    """softmax over the last axis, in the library and dtype of ``x``."""
    if library_of(x) == "torch":
        import torch

        return torch.softmax(x, dim=-1)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_on_torch():
    return _softmax_expected(_softmax_inputs()["a torch tensor"])


def _runs_on_numpy_and_torch(answer) -> str | None:
    if not callable(answer):
        return f"expected a function (def softmax(x): ...), got {type(answer).__name__}."
    for what, x in _softmax_inputs().items():
        try:
            out = answer(x)
        except Exception as error:  # the reader's code: any error is the answer to report
            first_line = (str(error).strip().splitlines() or [""])[0][:200]
            return f"on {what} your function raised {type(error).__name__}: {first_line}"
        verdict = compare(out, _softmax_expected(x))
        if not verdict:
            return f"on {what}: {verdict.message}"
    return None


def _called_on_a_torch_tensor(answer):
    return answer(_softmax_inputs()["a torch tensor"])


register(
    Exercise("ex-cupy-softmax", _softmax_on_torch, method=_runs_on_numpy_and_torch,
             result=_called_on_a_torch_tensor),
    Exercise("ex-cupy-transfer-bytes", lambda: 3 * 7000 * 7000 * np.dtype("float32").itemsize),
)


# Chapter 4, PyTorch on the GPU
def _ramp_in_half_precision(device):
    """Five evenly spaced values from 0 to 1, float16, made on the run's device."""
    import torch

    return torch.linspace(0, 1, 5, dtype=torch.float16, device=device)


def _scaled_on_the_readings_device(readings, scale):
    """``readings * scale`` with the host tensor ``scale`` moved to where ``readings`` live."""
    return readings * scale.to(readings.device)


register(
    Exercise("ex-torch-on-device", _ramp_in_half_precision, needs=("device",), rtol=1e-3),
    Exercise("ex-torch-bmm-flops", lambda: 2 * 1000 * 64 * 16 * 32),
    Exercise("ex-torch-fix-mismatch", _scaled_on_the_readings_device, needs=("readings", "scale")),
)


# Chapter 5, autograd and custom operations
def _gradient_of_the_mean_cubic():
    """d/dx of mean(x**3 - 2x) = x**2 - 2/3, at x = (1, 2, 3), as PyTorch's default float32 on the CPU."""
    import torch

    x = torch.tensor([1.0, 2.0, 3.0])
    return x**2 - 2 / 3


def _tanh_exercise_inputs():
    """Where the reader's Tanh is tried: seven points, and an incoming gradient that is not all ones (a
    backward that forgets ``grad_y`` would pass with ones)."""
    import torch

    x = torch.linspace(-2.0, 2.0, 7, dtype=torch.float64, requires_grad=True)
    grad_y = torch.linspace(0.5, 2.0, 7, dtype=torch.float64)
    return x, grad_y


def _tanh_gradient_by_autograd():
    import torch

    x, grad_y = _tanh_exercise_inputs()
    (grad,) = torch.autograd.grad(torch.tanh(x), x, grad_y)
    return grad


def _tanh_gradient_of(function):
    import torch

    x, grad_y = _tanh_exercise_inputs()
    (grad,) = torch.autograd.grad(function.apply(x), x, grad_y)
    return grad


def _is_a_working_tanh_function(answer) -> str | None:
    import torch

    if not (isinstance(answer, type) and issubclass(answer, torch.autograd.Function)):
        return (f"expected your Function class itself (a subclass of torch.autograd.Function, such as Tanh), "
                f"got {type(answer).__name__}.")
    x, grad_y = _tanh_exercise_inputs()
    try:
        y = answer.apply(x)
    except Exception as error:  # the reader's code: report whatever it raised
        return f"{answer.__name__}.apply(x) raised {type(error).__name__}: {error}"
    if not (isinstance(y, torch.Tensor) and y.shape == x.shape and torch.allclose(y, torch.tanh(x))):
        return f"{answer.__name__}'s forward no longer computes tanh(x): keep the forward as given."
    try:
        (grad,) = torch.autograd.grad(y, x, grad_y, allow_unused=True)
    except Exception as error:
        return f"{answer.__name__}'s backward raised {type(error).__name__}: {error}"
    if grad is None:
        return (f"{answer.__name__}'s backward returned None: return the gradient with respect to x, a tensor "
                "shaped like x.")
    return None


register(
    Exercise("ex-autograd-grad-by-hand", _gradient_of_the_mean_cubic),
    Exercise("ex-autograd-tanh-backward", _tanh_gradient_by_autograd, rtol=1e-7, atol=1e-12,
             method=_is_a_working_tanh_function, result=_tanh_gradient_of),
    Exercise("ex-autograd-broken-coverage", lambda: 64 + 32 - 1),
)


# Chapter 8, JAX
# JAX is optional: it is imported inside these functions only, so that gpukit imports without it. The
# lesson's exercise cells run only where JAX is installed. Every expected value is float32 or int32 whatever
# the state of jax_enable_x64, as the exercises' inputs are.
_PAIRWISE_TRIALS = (((0.0, 0.0), (3.0, 4.0), (1.0, -1.0)), ((1.0, 0.0), (0.0, 2.0), (-1.0, 3.0), (2.0, 2.0))), (
    ((1.0, 2.0, 2.0), (0.0, 0.0, 0.0), (2.0, -1.0, 0.5), (4.0, 0.0, 3.0), (-2.0, 1.0, 1.0)),
    ((0.0, 0.0, 1.0), (3.0, 0.0, 4.0)))


def _pairwise_inputs() -> list:
    """Pairs of point sets (m x d and n x d, m != n so that a mix-up of the axes shows) for a pairwise answer."""
    import jax.numpy as jnp

    return [(jnp.asarray(a, dtype=jnp.float32), jnp.asarray(b, dtype=jnp.float32)) for a, b in _PAIRWISE_TRIALS]


def _pairwise_direct(a, b):
    """Every distance between a row of ``a`` and a row of ``b``, by broadcasting: shape (m, n)."""
    import jax.numpy as jnp

    return jnp.sqrt(jnp.sum((a[:, None, :] - b[None, :, :]) ** 2, axis=-1))


def _pairwise_on_the_last_trial():
    return _pairwise_direct(*_pairwise_inputs()[-1])


def _is_a_working_pairwise_function(answer) -> str | None:
    if not callable(answer):
        return (f"expected a function of two point sets (pairwise = jax.vmap(...)), got {type(answer).__name__}: "
                "pass the vmapped function itself, not its result.")
    for a, b in _pairwise_inputs():
        try:
            out = answer(a, b)
        except Exception as error:  # the reader's code: any error is the answer to report
            first_line = (str(error).strip().splitlines() or [""])[0][:200]
            return (f"on points of shapes {tuple(a.shape)} and {tuple(b.shape)} your function raised "
                    f"{type(error).__name__}: {first_line}")
        verdict = compare(out, _pairwise_direct(a, b))
        if not verdict:
            return f"on points of shapes {tuple(a.shape)} and {tuple(b.shape)}: {verdict.message}"
    return None


def _called_on_the_last_trial(answer):
    return answer(*_pairwise_inputs()[-1])


def _gradient_of_x2_sin_x():
    """jax.grad of sum(x**2 sin x) at x = linspace(0, 2, 5) in float32: what the hand-made gradient must match."""
    import jax
    import jax.numpy as jnp

    x = jnp.linspace(0.0, 2.0, 5, dtype=jnp.float32)
    return jax.grad(lambda v: jnp.sum(v**2 * jnp.sin(v)))(x)


def _counts_after_the_hits():
    """Five int32 counters after the hits 0, 2, 2 and 4: a repeated index counts twice."""
    import jax.numpy as jnp

    counts = jnp.zeros(5, dtype=jnp.int32)
    for hit in (0, 2, 2, 4):
        counts = counts.at[hit].add(1)
    return counts


register(
    Exercise("ex-jax-vmap-pairwise", _pairwise_on_the_last_trial, method=_is_a_working_pairwise_function,
             result=_called_on_the_last_trial),
    Exercise("ex-jax-grad-by-hand", _gradient_of_x2_sin_x, rtol=1e-5, atol=1e-6),
    Exercise("ex-jax-at-add", _counts_after_the_hits),
)


# Chapter 7, Apple MPS
MPS_PIVOTS = (3, 3, 4, 4)  # the 1-indexed pivots of ex-mps-pivot-sign, as torch.linalg.lu_factor returns them
MPS_LU_MATRIX = ((4.0, 1.0, 3.0), (2.0, -1.0, 0.0), (-2.0, 5.0, 1.0))  # the matrix of ex-mps-lu-det


def _sign_of_the_pivots():
    """(-1) to the number of steps i whose pivot is not row i itself."""
    swaps = sum(pivot != step for step, pivot in enumerate(MPS_PIVOTS, start=1))
    return (-1) ** swaps


def _complex64_operations_that_work(support):
    """How many ``(complex64)`` rows of the live probe table are ``"ok"`` on its first (best) device."""
    best = support.columns[0]
    return sum(support.loc[op, best] == "ok" for op in support.index if str(op).endswith("(complex64)"))


register(
    Exercise("ex-mps-pivot-sign", _sign_of_the_pivots),
    Exercise("ex-mps-lu-det", lambda: float(np.linalg.det(np.array(MPS_LU_MATRIX))), rtol=1e-9),
    Exercise("ex-mps-complex-ops", _complex64_operations_that_work, needs=("support",)),
)


# Chapter 6, VRAM and device errors
def _halving_settles_on(start=10_000, min_chunk=100, row_bytes=4 * 2**20, free_bytes=3 * 2**30):
    """The first size in start, start // 2, ... whose rows fit in ``free_bytes`` (as run_in_chunks halves)."""
    size = start
    while size * row_bytes > free_bytes:
        size //= 2
    return size if size >= min_chunk else None


register(
    Exercise("ex-mem-tensor-bytes", lambda: 2048 * 2048 * 16 * np.dtype("complex64").itemsize),
    Exercise("ex-mem-largest-batch", lambda: (5 * 2**30) // (4 * 3 * 512 * 512 * np.dtype("float32").itemsize),
             rtol=0.0),
    Exercise("ex-mem-halving-chunk", _halving_settles_on, rtol=0.0),
)


# Chapter 9, writing GPU kernels
# The kernel exercises take the reader's kernel itself and launch it on small inputs of their own: on the GPU
# where there is a CUDA GPU, else on Numba's CUDA simulator or in Triton's interpreter. numba and triton are
# optional and imported inside these functions only. Before importing numba the check switches its simulator
# on where there is no GPU (gpukit.simulators.use_cuda_simulator), which works only if nothing has imported
# numba yet; a Triton kernel must have been decorated with TRITON_INTERPRET=1 already set (the lesson sets it
# at the top), and the check says so when it was not. Every array is padded past its end with a sentinel, so
# a kernel with no bounds guard or mask writes into the padding, not into someone else's memory: the
# simulator raises IndexError, and on a GPU or in the interpreter the check sees the sentinel overwritten.
KERNEL_N, KERNEL_THREADS, KERNEL_BLOCK = 100, 32, 256  # the exercises' sizes: n is not a multiple of either
_SENTINEL = -123.0


def _saxpy_inputs():
    """a, x, y of the SAXPY exercise (float32; n = 100 items)."""
    x = np.linspace(-1.0, 1.0, KERNEL_N, dtype=np.float32)
    y = np.arange(KERNEL_N, dtype=np.float32) / 8
    return np.float32(2.5), x, y


def _saxpy_expected():
    a, x, y = _saxpy_inputs()
    return a * x + y


def _launch_numba_saxpy(kernel):
    """Launch the reader's kernel on 4 blocks of 32 threads (128 threads for 100 items); return the output
    and whether anything was written past its end."""
    from .simulators import use_cuda_simulator

    use_cuda_simulator()
    from numba import cuda

    a, x, y = _saxpy_inputs()
    blocks = -(-KERNEL_N // KERNEL_THREADS)
    padded = blocks * KERNEL_THREADS
    buffers = [np.full(padded, _SENTINEL, dtype=np.float32) for _ in range(3)]
    buffers[0][:KERNEL_N], buffers[1][:KERNEL_N] = x, y
    d_x, d_y, d_out = (cuda.to_device(b) for b in buffers)
    kernel[blocks, KERNEL_THREADS](a, d_x[:KERNEL_N], d_y[:KERNEL_N], d_out[:KERNEL_N])
    cuda.synchronize()
    out = d_out.copy_to_host()
    return out[:KERNEL_N], bool((out[KERNEL_N:] != _SENTINEL).any())


def _first_line(error) -> str:
    return (str(error).strip().splitlines() or [""])[0][:200]


def _is_a_guarded_numba_saxpy(answer) -> str | None:
    from .simulators import is_numba_cuda_kernel, numba_simulating, use_cuda_simulator

    if not is_numba_cuda_kernel(answer):
        return (f"expected a Numba CUDA kernel (a function decorated with @cuda.jit), got "
                f"{type(answer).__name__}: pass the kernel itself, not its result.")
    if numba_simulating() is False:
        from .device import cuda_available

        if not cuda_available():
            return use_cuda_simulator()
    try:
        _, overflow = _launch_numba_saxpy(answer)
    except IndexError as error:
        return (f"a thread indexed past the end of an array ({_first_line(error)}): the last block has threads "
                "with i >= n; add the bounds guard `if i < out.size:` around the work.")
    except Exception as error:  # the reader's kernel: any error is the answer to report
        return f"launching your kernel raised {type(error).__name__}: {_first_line(error)}"
    if overflow:
        return ("threads with i >= n wrote past the end of out (the GPU does not stop them): add the bounds "
                "guard `if i < out.size:` around the work.")
    return None


def _numba_saxpy_output(answer):
    return _launch_numba_saxpy(answer)[0]


def _relu_input(device):
    import torch

    generator = torch.Generator().manual_seed(9)
    return torch.randn(1000, generator=generator, dtype=torch.float32).to(device)


def _triton_device() -> str:
    from .device import cuda_available

    return "cuda" if cuda_available() else "cpu"


def _relu_expected():
    import torch

    return torch.relu(_relu_input(_triton_device()))


def _launch_triton_relu(kernel):
    """Launch the reader's kernel on blocks of 256 for 1000 items (4 programs); return the output and whether
    anything was stored past its end."""
    import torch

    device = _triton_device()
    x = _relu_input(device)
    n = x.numel()
    programs = -(-n // KERNEL_BLOCK)
    x_buffer = torch.full((programs * KERNEL_BLOCK,), 7.0, dtype=torch.float32, device=device)
    x_buffer[:n] = x
    out_buffer = torch.full_like(x_buffer, _SENTINEL)
    kernel[(programs,)](x_buffer[:n], out_buffer[:n], n, BLOCK=KERNEL_BLOCK)
    return out_buffer[:n], bool((out_buffer[n:] != _SENTINEL).any())


def _is_a_masked_triton_relu(answer) -> str | None:
    from .simulators import triton_interpreting

    if type(answer).__name__ not in ("JITFunction", "InterpretedFunction"):
        return (f"expected a Triton kernel (a function decorated with @triton.jit), got {type(answer).__name__}: "
                "pass the kernel itself.")
    gpu = _triton_device() == "cuda"
    if not gpu and not triton_interpreting(answer):
        return ("your kernel was decorated without TRITON_INTERPRET=1 and there is no CUDA GPU to compile it "
                "for: run the lesson's cell that sets it, then the cell that defines your kernel again.")
    if gpu and triton_interpreting(answer):
        return ("your kernel was made for Triton's CPU interpreter (TRITON_INTERPRET=1) on a machine with a "
                "GPU: unset TRITON_INTERPRET and define the kernel again.")
    try:
        _, overflow = _launch_triton_relu(answer)
    except Exception as error:  # the reader's kernel: any error is the answer to report
        return f"launching your kernel raised {type(error).__name__}: {_first_line(error)}"
    if overflow:
        return ("your kernel stored values past the end of out (the last program's offsets go beyond n): "
                "give tl.store (and tl.load) the mask offsets < n.")
    return None


def _triton_relu_output(answer):
    return _launch_triton_relu(answer)[0]


register(
    Exercise("ex-kernels-grid-size", lambda: (1_000_003 + 255) // 256, rtol=0.0),
    Exercise("ex-kernels-numba-saxpy", _saxpy_expected, rtol=1e-6, method=_is_a_guarded_numba_saxpy,
             result=_numba_saxpy_output),
    Exercise("ex-kernels-triton-relu", _relu_expected, rtol=0.0, method=_is_a_masked_triton_relu,
             result=_triton_relu_output),
)


# Chapter 12, case study (and the appendix "Benchmarks across hardware")
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


def _best_cpu_matmul_rate(results):
    """The highest float32 matmul rate (GFLOP/s) of any CPU in the benchmark files' results table."""
    chosen = results[(results["kind"] == "cpu") & (results["benchmark"] == "matmul")
                     & (results["dtype"] == "float32")]
    return float(chosen["rate"].max())


register(
    Exercise("ex-case-batch-bytes", lambda: 2 * 4096 * 64 * 64 * np.dtype("complex64").itemsize),
    Exercise("ex-case-lu-det", _determinants_of_the_case_study_batch, rtol=1e-9,
             method=_det_without_linalg_det, result=_called_on_the_case_study_batch),
    Exercise("ex-case-chunk-calls", _chunked_calls, rtol=0.0),
    # The appendix: the Clemson V100 figure (10000 x 10000 float32 product in 0.144 s) against the V100's
    # published FP32 peak of 15.7 TFLOP/s; and the best CPU rate in the files.
    Exercise("ex-bench-v100-fraction", lambda: 2 * 10_000**3 / 0.144 / 15.7e12, rtol=1e-3),
    Exercise("ex-bench-best-cpu-rate", _best_cpu_matmul_rate, needs=("results",), rtol=1e-9),
)


# Chapter 10, multi-GPU and distributed
def _after_the_all_reduce():
    """What every rank holds after all_reduce (a sum) of [1, 2] * (r + 1) over ranks r = 0..3: float32."""
    import torch

    return sum(torch.tensor([1.0, 2.0]) * (r + 1) for r in range(4))


register(
    Exercise("ex-dist-ring-bytes", lambda: 2 * (8 - 1) / 8 * (4 * 25_000_000)),
    Exercise("ex-dist-allreduce-sum", _after_the_all_reduce),
    Exercise("ex-dist-ring-time", lambda: 2 * (8 - 1) / 8 * 2e9 / 50e9, rtol=1e-3),
)


# Chapter 11, running on a SLURM cluster
SLURM_SWEEP = {"learning_rates": 5, "seeds": 4, "at_once": 6}  # the grid and queue limit of ex-slurm-array


def _an_array_spec_for_the_sweep(answer) -> str | None:
    """What is wrong with an --array value for SLURM_SWEEP's grid, counted from 0 as sweep_task.py counts."""
    from .slurm import array_indices

    if not isinstance(answer, str):
        return f"expected the --array value as a string such as '0-9%2', got {type(answer).__name__}."
    try:
        indices, limit = array_indices(answer)
    except ValueError as error:
        return f"sbatch would refuse {answer!r}: {error}."
    points = SLURM_SWEEP["learning_rates"] * SLURM_SWEEP["seeds"]
    if indices and indices[0] != 0:
        return (f"the first task id is {indices[0]}: the task script uses SLURM_ARRAY_TASK_ID as an index into "
                "the grid, which starts at 0.")
    if indices != list(range(len(indices))):
        return "the task ids have gaps: every point of the grid needs its own task."
    if len(indices) != points:
        return f"{answer!r} makes {len(indices)} tasks, but the grid has {points} points."
    if limit is None:
        return "every task may run at once: add a limit after a % sign."
    if limit != SLURM_SWEEP["at_once"]:
        return f"{answer!r} lets {limit} tasks run at once, not the number the exercise allows."
    return None


def _array_task_ids(answer):
    from .slurm import array_indices

    return np.array(array_indices(answer)[0])


register(
    Exercise("ex-slurm-cpus-per-task", lambda: 4 * (1 + 5), rtol=0.0),
    Exercise("ex-slurm-array", lambda: np.arange(SLURM_SWEEP["learning_rates"] * SLURM_SWEEP["seeds"]),
             method=_an_array_spec_for_the_sweep, result=_array_task_ids),
)


def check(label: str, answer, **context) -> CheckResult:
    """Check ``answer`` to the exercise called ``label`` and say what, if anything, is wrong with it.

    ``context`` carries the run's values that the exercise's answer is computed from (the exercise text says
    which); they are inputs, never the answer itself.
    """
    if label not in EXERCISES:
        raise ValueError(f"no exercise is labelled {label!r}; the labels are {sorted(EXERCISES)}")
    exercise = EXERCISES[label]
    missing = [name for name in exercise.needs if name not in context]
    unexpected = sorted(set(context) - set(exercise.needs))
    if missing or unexpected:
        raise TypeError(f"check({label!r}, answer, ...) needs the values {list(exercise.needs)} by name; "
                        f"missing {missing}, not expected {unexpected}")
    if answer is None or answer is Ellipsis:
        return compare(answer, None)
    if exercise.method is not None:
        wrong_method = exercise.method(answer, **context)
        if wrong_method:
            return CheckResult(False, wrong_method)
    if exercise.result is not None:
        answer = exercise.result(answer)
    return compare(answer, exercise.expected(**context), rtol=exercise.rtol, atol=exercise.atol,
                   check_device=exercise.check_device)
