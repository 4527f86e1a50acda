"""Chapter 9, writing GPU kernels: what its exercises expect, and how a wrong answer is told apart."""

from __future__ import annotations

import ast
import inspect
import textwrap

import numpy as np

from gpukit.base.errors import error_line, first_line
from gpukit.core.device import cuda_available
from gpukit.topics.simulators import is_numba_cuda_kernel, numba_simulating, triton_interpreting, use_cuda_simulator

from ._predicting import Work, function_exercise
from .checking import Exercise, register

# The kernel exercises take the reader's kernel itself and launch it on small inputs of their own: on the GPU
# where there is a CUDA GPU, else on Numba's CUDA simulator or in Triton's interpreter. numba and triton are
# optional and imported inside these functions only. Before importing numba the check switches its simulator
# on where there is no GPU (gpukit.topics.simulators.use_cuda_simulator), which works only if nothing has imported
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


def _whole_array_code(kernel) -> str | None:
    """The first line of ``kernel`` (``saxpy(a, x, y, out)``) that works on whole arrays, as NumPy code for the host
    does: a slice of an array (``out[:] = ...``), arithmetic with an array itself (``a * x``), or an augmented
    assignment to one (``out += y``). Numba's simulator runs such a line in every thread, NumPy doing the work, and
    the values come out right; on a GPU, Numba compiles no arithmetic that makes a new array inside a kernel, and a
    kernel's thread does one item. None where the source cannot be read."""
    function = getattr(kernel, "py_func", None)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None
    definition = next((node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)), None)
    if definition is None:
        return None
    arrays = {argument.arg for argument in definition.args.args[1:]}

    def whole(node) -> bool:
        return isinstance(node, ast.Name) and node.id in arrays

    for node in ast.walk(definition):
        sliced = (isinstance(node, ast.Subscript) and whole(node.value)
                  and (isinstance(node.slice, ast.Slice)
                       or (isinstance(node.slice, ast.Constant) and node.slice.value is Ellipsis)))
        arithmetic = ((isinstance(node, ast.BinOp) and (whole(node.left) or whole(node.right)))
                      or (isinstance(node, ast.UnaryOp) and whole(node.operand))
                      or (isinstance(node, ast.AugAssign) and whole(node.target)))
        if sliced or arithmetic:
            return ast.get_source_segment(textwrap.dedent(inspect.getsource(function)), node) or ast.unparse(node)
    return None


def _is_a_guarded_numba_saxpy(answer) -> str | None:
    if not is_numba_cuda_kernel(answer):
        return (f"expected a Numba CUDA kernel (a function decorated with @cuda.jit), got "
                f"{type(answer).__name__}: pass the kernel itself, not its result.")
    whole = _whole_array_code(answer)
    if whole:
        return (f"your kernel works on whole arrays ({whole}): that is NumPy code for the host. Every thread would "
                "do all the items (the simulator lets NumPy do it), and on a GPU Numba cannot compile arithmetic "
                "that makes a new array inside a kernel. Give each thread one item: its index i from cuda.grid(1), "
                "then out[i] from x[i] and y[i].")
    if numba_simulating() is False and not cuda_available():
        return use_cuda_simulator()
    try:
        _, overflow = _launch_numba_saxpy(answer)
    except IndexError as error:
        return (f"a thread indexed past the end of an array ({first_line(error)}): the last block has threads "
                "with i >= n; give the work a bounds guard, so that those threads do nothing.")
    except Exception as error:  # the reader's kernel: any error is the answer to report
        return f"launching your kernel raised {error_line(error)}"
    if overflow:
        return ("threads with i >= n wrote past the end of out (the GPU does not stop them): give the work a "
                "bounds guard, so that only threads with an element of their own do it.")
    return None


def _numba_saxpy_output(answer):
    return _launch_numba_saxpy(answer)[0]


def _relu_input(device):
    import torch

    generator = torch.Generator().manual_seed(9)
    return torch.randn(1000, generator=generator, dtype=torch.float32).to(device)


def _triton_device() -> str:
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


# Libraries whose functions run on the host, never inside a Triton kernel.
_HOST_LIBRARIES = ("numpy", "torch", "math", "cupy", "jax", "scipy")


def _host_library_calls(kernel) -> str | None:
    """The first call in ``kernel``'s source of a function of a host library (``np.maximum(x, 0.0)``), found
    through the names of the kernel's module (so that any alias counts), or None."""
    function = getattr(kernel, "fn", None)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None
    names = getattr(function, "__globals__", {})
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        root = node.func
        while isinstance(root, ast.Attribute):
            root = root.value
        module = getattr(names.get(root.id), "__name__", "") if isinstance(root, ast.Name) else ""
        if isinstance(names.get(getattr(root, "id", None)), type(ast)) and module.split(".")[0] in _HOST_LIBRARIES:
            return ast.unparse(node.func)
    return None


def _is_a_masked_triton_relu(answer) -> str | None:
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
    host = _host_library_calls(answer)
    if host:
        return (f"your kernel calls {host}, a function that runs on the host: inside a Triton kernel only Triton's "
                "own operations (tl.load, tl.maximum, tl.where, tl.store...) run on the device. The interpreter "
                "may run it all the same, wrongly; on a GPU Triton cannot compile it.")
    try:
        out, overflow = _launch_triton_relu(answer)
    except Exception as error:  # the reader's kernel: any error is the answer to report
        return f"launching your kernel raised {error_line(error)}"
    if overflow:
        return ("your kernel stored values past the end of out (the last program's offsets go beyond n): "
                "give tl.store (and tl.load) a mask that leaves out the offsets at or past n.")
    # out was filled with a value no ReLU gives (it is never negative) before the launch.
    unwritten = (out == _SENTINEL).nonzero().flatten().tolist()
    if unwritten:
        return (f"{len(unwritten)} of the {len(out)} outputs were never written (the first at index {unwritten[0]}): "
                "each program must store every element of its block, at offsets that start from its program id.")
    return None


def _triton_relu_output(answer):
    return _launch_triton_relu(answer)[0]


# ------------------------------------------------------------------------------------------ launching with a grid
# ex-kernels-launch: the learner writes apply_kernel(kernel, x, threads), which copies x to the device, launches the
# kernel with one thread per item in blocks of `threads`, and returns the result as a NumPy array. The check hands it
# a kernel of its own (out = 2 x, with its bounds guard) wrapped so that it records the launch configuration, for
# sizes with a remainder, a multiple of the block and fewer items than one block.
LAUNCH_CASES = ((100, 32), (96, 32), (5, 64))  # (items, threads per block)


class _RecordingKernel:
    """Stands for a Numba kernel: ``kernel[blocks, threads](...)`` records (blocks, threads), then launches."""

    def __init__(self, kernel):
        self._kernel = kernel
        self.launches: list = []

    def __getitem__(self, configuration):
        self.launches.append(configuration)
        return self._kernel[configuration]

    def __getattr__(self, name):
        return getattr(self._kernel, name)


def _launch_input(n: int):
    return np.linspace(1.0, 2.0, n, dtype=np.float32)


def _sizes(configuration) -> tuple[int | None, int | None]:
    """(blocks, threads per block) of a launch configuration: ``[4, 32]``, ``[(4,), (32,)]``, ``[4, 32, stream]``."""
    if not isinstance(configuration, tuple) or len(configuration) < 2:
        return None, None

    def one(value):
        if isinstance(value, tuple) and len(value) >= 1 and all(v == 1 for v in value[1:]):
            value = value[0]
        return value if isinstance(value, (int, np.integer)) else None

    return one(configuration[0]), one(configuration[1])


def _launch_problem(answer, n: int, threads: int):
    """(the answer's output, None), or (None, what is wrong) for one size."""
    # lazy: it imports numba, which fixes its mode, so only once the simulator is switched on where there is no GPU
    from ._numba_launch import double

    kernel = _RecordingKernel(double)
    x = _launch_input(n)
    try:
        out = answer(kernel, x.copy(), threads)
    except Exception as error:  # the reader's function: any error is the answer to report
        return None, f"apply_kernel(kernel, x, {threads}) for {n} items raised {error_line(error)}"
    if not kernel.launches:
        return None, "your function never launched the kernel: kernel[blocks, threads](d_x, d_out)."
    if len(kernel.launches) > 1:
        return None, f"your function launched the kernel {len(kernel.launches)} times for one array: once is enough."
    blocks, per_block = _sizes(kernel.launches[0])
    if blocks is None or per_block is None:
        return None, f"the launch configuration {kernel.launches[0]!r} is not [blocks, threads] in whole numbers."
    if per_block != threads:
        if blocks == threads:
            return None, ("the launch configuration is kernel[blocks, threads_per_block], blocks first: yours launched "
                          f"blocks of {per_block} threads.")
        return None, f"your launch used blocks of {per_block} threads, not the `threads` your function was given."
    if blocks * threads < n:
        return None, (f"for {n} items in blocks of {threads}, your {blocks} block(s) hold {blocks * threads} threads: "
                      f"the last {n - blocks * threads} items get no thread. Round n / threads up, not down.")
    if (blocks - 1) * threads >= n:
        return None, (f"for {n} items in blocks of {threads}, your {blocks} blocks leave at least one block with no "
                      "item at all (n // threads + 1 adds a block when n is a multiple of threads): round n / threads "
                      "up instead.")
    if hasattr(out, "copy_to_host"):
        return None, (f"your function returned the result on the device ({type(out).__name__}): copy it back with "
                      ".copy_to_host() and return the NumPy array.")
    if not isinstance(out, np.ndarray):
        return None, f"expected your function to return a NumPy array, got {type(out).__name__}."
    return out, None


def _launches_a_right_grid(answer) -> str | None:
    if is_numba_cuda_kernel(answer):
        return ("that is a kernel: pass your function apply_kernel(kernel, x, threads), which launches the kernel "
                "it is given.")
    if not callable(answer):
        return f"expected a function apply_kernel(kernel, x, threads), got {type(answer).__name__}."
    if numba_simulating() is False and not cuda_available():
        return use_cuda_simulator()
    use_cuda_simulator()
    for n, threads in LAUNCH_CASES:
        _, wrong = _launch_problem(answer, n, threads)
        if wrong:
            return wrong
    return None


def _launch_output(answer):
    return _launch_problem(answer, *LAUNCH_CASES[0])[0]


def _launch_expected():
    return 2 * _launch_input(LAUNCH_CASES[0][0])


register(
    Exercise("ex-kernels-launch", _launch_expected, rtol=0.0, method=_launches_a_right_grid, result=_launch_output,
             writes="device code"),
    Exercise("ex-kernels-numba-saxpy", _saxpy_expected, rtol=1e-6, method=_is_a_guarded_numba_saxpy,
             result=_numba_saxpy_output, writes="device code"),
    Exercise("ex-kernels-triton-relu", _relu_expected, rtol=0.0, method=_is_a_masked_triton_relu,
             result=_triton_relu_output, writes="device code"),
)


# ------------------------------------------------------------------ ex-kernels-predict-add
def _vector_add(k: int, **_) -> Work:
    """out = x + y on k float32 values: one addition each; x and y read, out written, 4 bytes a value."""
    return Work(k, 3 * 4 * k)


def _vector_add_mistakes(k: int, **_) -> list[tuple[str, Work]]:
    return [("counting one vector's bytes (the kernel reads two and writes a third)", Work(k, 4 * k)),
            ("counting the inputs' bytes only (the output is written too)", Work(k, 8 * k)),
            ("counting 8 bytes per value (float32 has 4)", Work(k, 24 * k)),
            ("counting 2 FLOPs per value (an addition is one; a multiply-add would be two)", Work(2 * k, 12 * k))]


register(function_exercise("ex-kernels-predict-add", _vector_add, _vector_add_mistakes, operation="elementwise",
                           needs=("device", "k")))
