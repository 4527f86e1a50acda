"""Chapter 3, CuPy: what its exercises expect, and how a wrong answer is told apart.

- ``ex-cupy-softmax``: a softmax written against the array API, run on a NumPy array and on a torch tensor on
  the lesson's device; the result must stay in the library, dtype and device of its input.
- ``ex-cupy-rawkernel``: the source of a raw CUDA kernel. nvcc compiles it where it is installed; then it runs
  with more threads than elements, through CuPy on a GPU where there is one, else on the CPU, thread after
  thread (:mod:`gpukit.topics.host_kernels`), with guard zones around the output that catch a write past its end.
- ``ex-cupy-launch``: the launch of a given kernel (grid, block, argument types), run the same two ways.
- ``ex-cupy-predict-matmul``: ``predicted_ms(peak_flops, bandwidth)``, the least time of the lesson's ``n`` x ``n``
  float32 product on a device with those limits, written before NumPy's product is timed; tried on a
  compute-bound device, a memory-bound one and the run's own (:mod:`._predicting`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpukit.base.errors import error_line
from gpukit.base.nvcc import CudaCompileError, compile_cuda, find_nvcc, ptx_entries
from gpukit.core.arrays import library_of
from gpukit.topics.host_kernels import HostCompileError, HostKernel, HostLaunchError, Param, check_kernel_arguments

from ._predicting import Work, function_exercise
from .checking import Exercise, answer_device, compare, keep_output, kept_output, not_a_function, register

# ------------------------------------------------------------------ ex-cupy-softmax
_SOFTMAX_VALUES = ((1.0, 2.0, 3.0), (-1.0, 0.5, 4.0))


def _softmax_inputs() -> dict[str, object]:
    """The arrays a learner's softmax is tried on: NumPy float64, and torch float32 on the lesson's device (the
    answer is a function, which carries none: answer_device's default)."""
    import torch

    device = answer_device()
    return {"a NumPy array": np.array(_SOFTMAX_VALUES),
            f"a torch tensor on {device}": torch.tensor(_SOFTMAX_VALUES, dtype=torch.float32, device=device)}


def _softmax_expected(x):
    """softmax over the last axis, in the library, dtype and device of ``x``."""
    if library_of(x) == "torch":
        import torch

        return torch.softmax(x, dim=-1)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _on_torch(inputs: dict[str, object]):
    return next(x for what, x in inputs.items() if what.startswith("a torch tensor"))


def _softmax_on_torch():
    return _softmax_expected(_on_torch(_softmax_inputs()))


def _runs_on_numpy_and_torch(answer) -> str | None:
    if not callable(answer):
        return f"expected a function (def softmax(x): ...), got {type(answer).__name__}."
    for what, x in _softmax_inputs().items():
        try:
            out = answer(x)
        except Exception as error:  # the learner's code: any error is the answer to report
            return f"on {what} your function raised {error_line(error)}"
        verdict = compare(out, _softmax_expected(x))
        if not verdict:
            return f"on {what}: {verdict.message}"
    return None


def _called_on_a_torch_tensor(answer):
    return answer(_on_torch(_softmax_inputs()))


# ------------------------------------------------------------------ running a kernel: on the GPU, else on the CPU
N = 1000  # elements: not a multiple of the block
THREADS = 128
BLOCKS = (N + THREADS - 1) // THREADS  # 8 blocks: 1024 threads, 24 more than elements
GUARD = 1024  # elements of guard zone on each side of an array on the GPU
SEED = 2026


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(SEED)
    return rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)


def cupy_gpu():
    """The cupy module where CuPy can use a GPU here, else ``None``."""
    try:
        import cupy
    except ImportError:
        return None
    try:
        return cupy if cupy.cuda.is_available() else None
    except Exception:  # a CuPy that cannot talk to a driver
        return None


@dataclass(frozen=True)
class KernelRun:
    """What one run of a learner's kernel or launch showed: a problem to report, or the output."""

    problem: str | None = None
    out: np.ndarray | None = None


class GuardedArrays:
    """CuPy arrays with guard zones on both sides, to see writes outside an array on a GPU.

    An output's guards hold NaN, and a write there shows as a number; an input's guards hold a number
    (``INPUT_GUARD``), so that a thread reading past an input's end computes a number too, not a NaN that
    would hide its write."""

    INPUT_GUARD = 0.5

    def __init__(self, cupy):
        self.cupy, self.fulls, self.fills = cupy, [], []

    def array(self, values: np.ndarray, *, output: bool = False):
        fill = np.nan if output else self.INPUT_GUARD
        full = self.cupy.full(values.size + 2 * GUARD, fill, dtype=values.dtype)
        full[GUARD:GUARD + values.size] = self.cupy.asarray(values)
        self.fulls.append(full)
        self.fills.append(fill)
        return full[GUARD:GUARD + values.size]

    def outside_writes(self, index: int, size: int) -> tuple[int, int]:
        full, fill = self.cupy.asnumpy(self.fulls[index]), self.fills[index]

        def changed(zone):
            return int((~np.isnan(zone)).sum() if np.isnan(fill) else (zone != fill).sum())

        return changed(full[:GUARD]), changed(full[GUARD + size:])


def _unwritten(out: np.ndarray, threads: str) -> str | None:
    missing = np.flatnonzero(np.isnan(out))
    if missing.size:
        return (f"{missing.size} of {out.size} elements of out were never written (the first at index "
                f"{missing[0]}) by {threads}")
    return None


# ------------------------------------------------------------------ ex-cupy-rawkernel
KERNEL_NAME = "squared_diff"
KERNEL_PARAMS = "(const float* x, const float* y, float* out, int n)"
_SOURCE_RUNS: dict[str, KernelRun] = {}


def _squared_diff_expected():
    x, y = _inputs()
    return (x - y) * (x - y)


def _compiled_by_nvcc(source: str) -> str | None:
    """nvcc's objection to the source, if nvcc is installed and has one."""
    if find_nvcc() is None:
        return None
    try:
        ptx = compile_cuda(source)
    except CudaCompileError as error:
        lines = [line for line in str(error).splitlines() if "error" in line][:4]
        return "nvcc rejected the source:\n" + "\n".join(lines or str(error).splitlines()[:4])
    entries = ptx_entries(ptx)
    if KERNEL_NAME not in entries:
        return (f"nvcc compiled the source, but it holds no kernel that CuPy can find as {KERNEL_NAME!r} (it "
                f"defines {entries or 'no kernel'}): declare it extern \"C\" __global__ void {KERNEL_NAME}"
                f"{KERNEL_PARAMS}.")
    return None


ARRAY_NAMES = ("x", "y", "out")


def _writes(name: str, before: int, after: int) -> list[str]:
    return ([f"wrote {after} element(s) past the end of {name}"] if after else []) + (
        [f"wrote {before} element(s) before the start of {name}"] if before else [])


def _outside(writes: list[str]) -> str:
    return (f"launched with {BLOCKS} blocks of {THREADS} threads ({BLOCKS * THREADS} threads) for n = {N} "
            f"elements, your kernel {'; '.join(writes)}. A thread whose index is n or more must not touch the "
            "arrays: compare the index with n before reading and writing (and mind < against <=).")


def _squared_diff_on_host(source: str) -> KernelRun:
    try:
        kernel = HostKernel(source, KERNEL_NAME)
    except HostCompileError as error:
        if f"{KERNEL_NAME}" in str(error) and "not declared" in str(error):
            return KernelRun(f"the source defines no kernel named {KERNEL_NAME}: write extern \"C\" __global__ "
                             f"void {KERNEL_NAME}{KERNEL_PARAMS}.")
        return KernelRun(f"the kernel did not compile for the CPU run of this check:\n{error}")
    except LookupError as error:
        return KernelRun(str(error))
    takes = [p.ctype.replace("const ", "") for p in kernel.params]
    if takes != ["float*", "float*", "float*", "int"]:
        return KernelRun(f"your kernel takes ({', '.join(p.ctype for p in kernel.params)}); the check passes three "
                         f"float32 arrays and an np.int32, as CuPy would to {KERNEL_PARAMS}, and a kernel reads "
                         "exactly the bytes it is given.")
    x, y = _inputs()
    out = np.full(N, np.nan, dtype=np.float32)
    try:
        kernel((BLOCKS,), (THREADS,), (x, y, out, np.int32(N)))
    except HostLaunchError as error:
        return KernelRun(str(error))
    if kernel.outside_writes:
        return KernelRun(_outside([write for w in kernel.outside_writes
                                   for write in _writes(ARRAY_NAMES[w.argument], w.before, w.after)]))
    return KernelRun(_unwritten(out, f"{BLOCKS * THREADS} threads: does each thread's index include "
                                     "blockIdx.x * blockDim.x?"), out)


def _squared_diff_on_gpu(cupy, source: str) -> KernelRun:
    x, y = _inputs()
    arrays = GuardedArrays(cupy)
    x_gpu, y_gpu = arrays.array(x), arrays.array(y)
    out = arrays.array(np.full(N, np.nan, dtype=np.float32), output=True)
    try:
        kernel = cupy.RawKernel(source, KERNEL_NAME)
        kernel((BLOCKS,), (THREADS,), (x_gpu, y_gpu, out, np.int32(N)))
        cupy.cuda.Device().synchronize()
    except Exception as error:  # CuPy's compile and launch errors: the answer to report
        return KernelRun(f"CuPy could not run the kernel: {error_line(error)}")
    writes = [write for index, name in enumerate(ARRAY_NAMES)
              for write in _writes(name, *arrays.outside_writes(index, N))]
    if writes:
        return KernelRun(_outside(writes))
    out_host = cupy.asnumpy(out)
    return KernelRun(_unwritten(out_host, f"{BLOCKS * THREADS} threads: does each thread's index include "
                                          "blockIdx.x * blockDim.x?"), out_host)


def _run_squared_diff(source: str) -> KernelRun:
    """nvcc first (where installed); then the CPU run where a C++ compiler is (it reads the kernel's parameter
    types, and a kernel that writes out of bounds there never reaches the GPU); then the GPU where there is
    one, whose output is the answer."""
    if source not in _SOURCE_RUNS:
        cupy, run = cupy_gpu(), KernelRun(_compiled_by_nvcc(source))
        if run.problem is None and HostKernel.can_compile():
            run = _squared_diff_on_host(source)
        if run.problem is None and cupy is not None:
            run = _squared_diff_on_gpu(cupy, source)
        if run.problem is None and run.out is None:
            run = KernelRun("this machine has no GPU for CuPy and no C++ compiler to run the kernel on the CPU, "
                            "so the check cannot run it (nvcc, where installed, has compiled it).")
        _SOURCE_RUNS[source] = run
    return _SOURCE_RUNS[source]


def _squared_diff_problems(answer) -> str | None:
    if not isinstance(answer, str):
        return f"expected the kernel's source as a string (r\"\"\"...\"\"\"), got {type(answer).__name__}."
    if "__global__" not in answer:
        return f"the source has no __global__ function: write extern \"C\" __global__ void {KERNEL_NAME}(...)."
    return _run_squared_diff(answer).problem


def _squared_diff_output(answer):
    return _run_squared_diff(answer).out


# ------------------------------------------------------------------ ex-cupy-launch
SAXPY_SOURCE = r"""
extern "C" __global__
void saxpy(float alpha, const float* x, const float* y, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = alpha * x[i] + y[i];
    }
}
"""
SAXPY_PARAMS = [Param("float"), Param("const float*"), Param("const float*"), Param("float*"), Param("int")]
ALPHA = 2.5  # a Python float, as the learner's function receives it


class RecordedKernel:
    """A kernel (``cupy.RawKernel`` or :class:`HostKernel`) that refuses arguments that would garble its work
    (as :func:`check_kernel_arguments` says), remembers each launch's grid and block, and then launches."""

    def __init__(self, kernel, array_type, library: str):
        self.kernel, self.array_type, self.library = kernel, array_type, library
        self.launches: list[tuple[object, object]] = []
        self.arguments: list[tuple] = []
        self.notes: list[str] = []

    def __call__(self, grid, block, args, **options):
        self.launches.append((grid, block))
        self.arguments.append(tuple(args) if isinstance(args, tuple | list) else ())
        if not isinstance(args, tuple | list):
            raise TypeError(f"args must be a tuple of the kernel's arguments, not {type(args).__name__}")
        self.notes = check_kernel_arguments(SAXPY_PARAMS, args, array_type=self.array_type, library=self.library)
        return self.kernel(grid, block, args, **options)


def _launch_expected():
    x, y = _inputs()
    return np.float32(ALPHA) * x + y


def _threads_of(grid, block) -> str:
    try:
        blocks, threads = int(np.prod(grid)), int(np.prod(block))
    except (TypeError, ValueError):
        return f"grid {grid!r} and block {block!r}"
    return f"{blocks} block(s) of {threads} threads ({blocks * threads} threads)"


def _run_launch(answer) -> KernelRun:
    x, y = _inputs()
    cupy = cupy_gpu()
    if cupy is not None:
        arrays = GuardedArrays(cupy)
        x_in, y_in = arrays.array(x), arrays.array(y)
        out = arrays.array(np.full(N, np.nan, dtype=np.float32), output=True)
        kernel = RecordedKernel(cupy.RawKernel(SAXPY_SOURCE, "saxpy"), cupy.ndarray, "CuPy")
    elif HostKernel.can_compile():
        x_in, y_in, out = x.copy(), y.copy(), np.full(N, np.nan, dtype=np.float32)
        kernel = RecordedKernel(HostKernel(SAXPY_SOURCE, "saxpy"), np.ndarray, "NumPy")
    else:
        return KernelRun("this machine has no GPU for CuPy and no C++ compiler to run the kernel on the CPU, so "
                         "the check cannot run your launch.")
    try:
        answer(kernel, ALPHA, x_in, y_in, out)
        if cupy is not None:
            cupy.cuda.Device().synchronize()
    except Exception as error:  # the learner's code: any error is the answer to report
        return KernelRun(f"your function raised {error_line(error)}")
    if not kernel.launches:
        return KernelRun("your function never launched the kernel: call kernel((blocks,), (threads,), args).")
    out_host = cupy.asnumpy(out) if cupy is not None else out
    grid, block = kernel.launches[-1]
    try:
        blocks, threads = int(np.prod(grid)), int(np.prod(block))
    except (TypeError, ValueError):
        blocks = threads = 0
    if threads and threads != THREADS:
        return KernelRun(f"your launch has {threads} threads per block; the exercise asks for {THREADS}, and the "
                         "number of blocks follows from it.")
    if not any(len(args) > 3 and args[3] is out for args in kernel.arguments):
        return KernelRun("the kernel never wrote into the out array your function was given: the check reads "
                         "that array, so launch the kernel on it rather than on an array of your own.")
    covered = blocks * threads >= N
    unwritten = _unwritten(out_host, f"the launch of {_threads_of(grid, block)}" + (
        ": the grid must cover every element, so round the number of blocks up" if not covered else
        ", which covers every element: look at the arguments (the length n passed to the kernel)"))
    if unwritten:
        return KernelRun(unwritten)
    if kernel.notes and not np.allclose(out_host, _launch_expected(), rtol=1e-5):
        return KernelRun("the values are wrong: " + " ".join(kernel.notes))
    idle = _idle_blocks(answer, cupy)
    if idle:
        return KernelRun(idle)
    return KernelRun(None, out_host)


def _idle_blocks(answer, cupy) -> str | None:
    """The book's grid rule, as chapter 9 checks it: no block without an element. With n a multiple of 128 (N is
    not), ``n // 128 + 1`` launches a block of threads that all find i >= n."""
    n = 8 * THREADS
    arrays = [np.zeros(n, dtype=np.float32) for _ in range(3)]
    if cupy is not None:
        arrays = [cupy.asarray(a) for a in arrays]
        kernel = RecordedKernel(cupy.RawKernel(SAXPY_SOURCE, "saxpy"), cupy.ndarray, "CuPy")
    else:
        kernel = RecordedKernel(HostKernel(SAXPY_SOURCE, "saxpy"), np.ndarray, "NumPy")
    try:
        answer(kernel, ALPHA, *arrays)
    except Exception:  # noqa: BLE001 - the launch on N elements passed; this one only counts blocks
        return None
    if not kernel.launches:
        return None
    grid, _ = kernel.launches[-1]
    blocks = int(np.prod(grid))
    if (blocks - 1) * THREADS >= n:
        return (f"for {n} elements in blocks of {THREADS}, your launch has {blocks} blocks, one at least with no "
                f"element at all (n // {THREADS} + 1 adds a block when n is a multiple of {THREADS}): round "
                f"n / {THREADS} up instead.")
    return None


def _launch_problems(answer) -> str | None:
    wrong = not_a_function(answer, "run_saxpy", "kernel, alpha, x, y, out")
    if wrong:
        return wrong
    run = _run_launch(answer)
    keep_output(answer, run.out)
    return run.problem


register(
    Exercise("ex-cupy-softmax", _softmax_on_torch, method=_runs_on_numpy_and_torch,
             result=_called_on_a_torch_tensor, writes="device code"),
    Exercise("ex-cupy-rawkernel", _squared_diff_expected, method=_squared_diff_problems,
             result=_squared_diff_output, writes="device code"),
    Exercise("ex-cupy-launch", _launch_expected, method=_launch_problems, result=kept_output,
             writes="device code"),
)


# ------------------------------------------------------------------ ex-cupy-predict-matmul
def _product(n: int, **_) -> Work:
    return Work(2 * n**3, 3 * 4 * n * n)  # n*n results of n multiply-adds; two float32 matrices read, one written


def _product_mistakes(n: int, **_) -> list[tuple[str, Work]]:
    return [("counting a multiply-add as one FLOP (n x n results of n multiply-adds are 2 n^3 FLOPs)",
             Work(n**3, 3 * 4 * n * n)),
            ("counting the bytes of one matrix only (two are read and one written)", Work(2 * n**3, 4 * n * n)),
            ("counting the inputs' bytes only (the product is written too)", Work(2 * n**3, 2 * 4 * n * n)),
            ("counting 8 bytes per element (float32 has 4)", Work(2 * n**3, 3 * 8 * n * n))]


register(function_exercise("ex-cupy-predict-matmul", _product, _product_mistakes, needs=("device", "n")))
