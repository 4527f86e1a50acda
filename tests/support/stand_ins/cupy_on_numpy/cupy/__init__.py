"""A stand-in for CuPy that computes with NumPy, so that the lessons' CuPy branches run on a machine without a GPU.

It emulates no GPU: arrays are NumPy arrays, "device" memory is host memory, a copy is a NumPy copy, and a timing
says nothing about a GPU. What it keeps is CuPy's interface as the lessons use it (names, arguments, what comes
back), so that a lesson's GPU branch runs, binds its names and reaches its end here. tests/lessons/test_gpu_branches.py
runs lessons with it on the path and looks for errors, never for speed.

Kernels: ``RawKernel`` compiles its CUDA source for the CPU with gpukit's ``HostKernel`` (the machine's C++
compiler) and runs every thread; ``ElementwiseKernel`` and ``ReductionKernel`` evaluate their bodies with NumPy
where the body is also a Python expression (``z = (x - y) * (x - y)``, ``a + b``), and refuse other bodies.
Anything of CuPy's that is not here is NumPy's function of the same name, or an AttributeError.
"""

from __future__ import annotations

import re

import numpy as _np

from . import cuda, random  # noqa: F401 (cupy.cuda and cupy.random, as CuPy has them)

# The CuPy whose interface this follows (cupy-cuda13x 14.2.0, as on the book's first GPU node), and what it is.
__version__ = "14.2.0"
STAND_IN = f"CuPy's interface on NumPy {_np.__version__}"
ndarray = _np.ndarray


def __getattr__(name: str):
    # CuPy mirrors NumPy's namespace (cupy.linspace, cupy.float32, cupy.allclose...): so does the stand-in.
    try:
        return getattr(_np, name)
    except AttributeError:
        raise AttributeError(f"the CuPy stand-in (on NumPy) has no {name!r}") from None


def asarray(a, dtype=None, order=None, *, copy=None, blocking=False):
    """To the "GPU": a copy, as CuPy makes one from host memory."""
    return _np.array(a, dtype=dtype, order=order or "K", copy=True)


array = asarray


def asnumpy(a, stream=None, order="C", out=None, *, blocking=True):
    """Back to the host: into ``out`` where given (CuPy checks its shape and dtype; so does NumPy's copyto)."""
    if out is not None:
        if out.shape != _np.shape(a) or out.dtype != _np.asarray(a).dtype:
            raise ValueError(f"out has shape {out.shape} and dtype {out.dtype}; the array has {_np.shape(a)}, "
                             f"{_np.asarray(a).dtype}")
        _np.copyto(out, a)
        return out
    return _np.array(a, order=order, copy=True)


def get_array_module(*args):
    return _np


from_dlpack = _np.from_dlpack


class _Pool:
    """A memory pool that holds nothing: the stand-in's arrays are NumPy's, freed as NumPy frees them."""

    def used_bytes(self) -> int:
        return 0

    def total_bytes(self) -> int:
        return 0

    def free_all_blocks(self) -> None:
        return None


_POOL, _PINNED_POOL = _Pool(), _Pool()


def get_default_memory_pool() -> _Pool:
    return _POOL


def get_default_pinned_memory_pool() -> _Pool:
    return _PINNED_POOL


class RawKernel:
    """``cupy.RawKernel(source, name)``: compiled for the CPU by gpukit's HostKernel, called the same way."""

    def __init__(self, code: str, name: str, options=(), backend="nvrtc", translate_cucomplex=False, **kwargs):
        from gpukit.topics.host_kernels import HostKernel

        self.code, self.name = code, name
        self._kernel = HostKernel(code, name)

    def __call__(self, grid, block, args, *, shared_mem=0):
        return self._kernel(grid, block, args, shared_mem=shared_mem)


# The functions a kernel body may call, by their CUDA names.
_BODY_FUNCTIONS = {name: getattr(_np, name) for name in ("sqrt", "exp", "log", "sin", "cos", "tan", "tanh", "abs",
                                                         "floor", "ceil")}
_BODY_FUNCTIONS.update(max=_np.maximum, min=_np.minimum, fabs=_np.abs, sqrtf=_np.sqrt, expf=_np.exp)
_REDUCTIONS = {"a + b": _np.add, "a * b": _np.multiply, "max(a, b)": _np.maximum, "min(a, b)": _np.minimum}


def _params(text: str) -> list[tuple[str, str]]:
    """``"float32 x, T y"`` -> ``[("float32", "x"), ("T", "y")]``."""
    found = []
    for part in text.split(","):
        words = part.split()
        if len(words) < 2:
            raise ValueError(f"a kernel parameter is a type and a name, not {part.strip()!r}")
        found.append((words[-2], words[-1]))
    return found


def _python_body(body: str) -> str:
    python = re.sub(r";\s*$", "", body.strip())
    if "{" in python or ";" in python:
        raise NotImplementedError(f"the CuPy stand-in evaluates only kernel bodies that are also Python: {body!r}")
    return python


def _dtype_of(type_name: str, placeholders: dict):
    return placeholders.get(type_name) or _np.dtype(type_name)


class ElementwiseKernel:
    """``cupy.ElementwiseKernel(in_params, out_params, operation, name)``: the body evaluated on whole arrays."""

    def __init__(self, in_params, out_params, operation, name="kernel", **kwargs):
        self.inputs, self.outputs = _params(in_params), _params(out_params)
        self.operation, self.name = _python_body(operation), name

    def __call__(self, *args, size=None):
        if len(args) != len(self.inputs):
            raise TypeError(f"{self.name} takes {len(self.inputs)} arguments, got {len(args)}")
        values = [_np.asarray(a) for a in args]
        placeholders = {t: v.dtype for (t, _), v in zip(self.inputs, values, strict=True) if len(t) == 1}
        scope = {**_BODY_FUNCTIONS, **{n: v for (_, n), v in zip(self.inputs, values, strict=True)}}
        exec(self.operation, {}, scope)
        shape = _np.broadcast_shapes(*(v.shape for v in values))
        results = [_np.broadcast_to(_np.asarray(scope[n], dtype=_dtype_of(t, placeholders)), shape).copy()
                   for t, n in self.outputs]
        return results[0] if len(results) == 1 else tuple(results)


class ReductionKernel:
    """``cupy.ReductionKernel(in, out, map, reduce, post_map, identity, name)``: map, NumPy's reduction, post-map."""

    def __init__(self, in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name="reduce",
                 **kwargs):
        self.inputs, self.outputs = _params(in_params), _params(out_params)
        self.map_expr, self.post_map = _python_body(map_expr), _python_body(post_map_expr)
        reduce_key = " ".join(reduce_expr.split())
        if reduce_key not in _REDUCTIONS:
            raise NotImplementedError(f"the CuPy stand-in reduces only with {sorted(_REDUCTIONS)}, not {reduce_expr!r}")
        self.reduction, self.name = _REDUCTIONS[reduce_key], name

    def __call__(self, *args, axis=None, keepdims=False):
        values = [_np.asarray(a) for a in args]
        placeholders = {t: v.dtype for (t, _), v in zip(self.inputs, values, strict=True) if len(t) == 1}
        scope = {**_BODY_FUNCTIONS, **{n: v for (_, n), v in zip(self.inputs, values, strict=True)}}
        mapped = eval(self.map_expr, {}, scope)
        scope["a"] = self.reduction.reduce(_np.asarray(mapped), axis=axis, keepdims=keepdims)
        exec(self.post_map, {}, scope)
        (out_type, out_name), = self.outputs
        return _np.asarray(scope[out_name], dtype=_dtype_of(out_type, placeholders))
