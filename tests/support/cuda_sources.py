"""CUDA sources for lesson 3: the strings given to CuPy's ``ElementwiseKernel`` and ``ReductionKernel``,
rendered into a CUDA source of the shape CuPy generates, so that nvcc (:mod:`gpukit.base.nvcc`) can check those
snippets on a machine without a GPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# ------------------------------------------------------------------ CuPy's ElementwiseKernel and ReductionKernel
# CuPy turns the strings given to ElementwiseKernel and ReductionKernel into a CUDA kernel at the first call,
# on a GPU. The functions below render the same strings into a standalone CUDA source of the same shape
# (the same parameter declarations, the loop with the index ``i``, the REDUCE and POST_MAP macros), so that
# nvcc can check a snippet on a machine without a GPU: a typo or an undeclared name fails here as it would
# there. The arrays are simplified to one dimension; CuPy's own CArray and CIndexer also handle strides.

# What CuPy's kernels can use that a bare nvcc source lacks: minimal CArray and CIndexer types.
_CUPY_LIKE_HEADER = """\
#include <cstddef>
template <typename T> class CArray {  // a one-dimensional stand-in for CuPy's CArray
 public:
  T* data_;
  ptrdiff_t size_;
  __device__ ptrdiff_t size() const { return size_; }
  __device__ T* data() { return data_; }
  __device__ const T* data() const { return data_; }
  __device__ T& operator[](ptrdiff_t k) { return data_[k]; }
  __device__ const T& operator[](ptrdiff_t k) const { return data_[k]; }
};
class CIndexer {  // the loop's position, as CuPy's _ind, _in_ind and _out_ind
 public:
  ptrdiff_t size_;
  ptrdiff_t index_;
  __device__ ptrdiff_t size() const { return size_; }
  __device__ void set(ptrdiff_t i) { index_ = i; }
  __device__ ptrdiff_t get() const { return index_; }
};
"""
_HALF_HEADER = "#include <cuda_fp16.h>\n"
_COMPLEX_HEADER = "#include <cuda/std/complex>\nusing cuda::std::complex;\n"
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")
REDUCTION_BLOCK_SIZE = 256  # threads per block that the rendered reduction assumes (a power of two)


@dataclass(frozen=True)
class KernelParam:
    """One parameter of a CuPy kernel, e.g. ``"raw T x"``: its name, type, and whether it is raw or const."""

    name: str
    type_name: str  # as written: a dtype name ("float32") or a one-letter placeholder ("T")
    ctype: str  # the C type it becomes ("float", or the placeholder, defined by a typedef)
    raw: bool
    const: bool

    @property
    def is_placeholder(self) -> bool:
        return len(self.type_name) == 1


def c_type_of(dtype) -> str:
    """The C type CuPy uses for a NumPy dtype: ``"float32"`` -> ``"float"``, ``"complex64"`` -> ``"complex<float>"``."""
    import numpy as np

    try:
        dt = np.dtype(dtype)
    except TypeError as error:
        raise ValueError(f"{dtype!r} is not a NumPy dtype name") from error
    kinds = {
        ("b", 1): "bool",
        ("i", 1): "signed char", ("i", 2): "short", ("i", 4): "int", ("i", 8): "long long",
        ("u", 1): "unsigned char", ("u", 2): "unsigned short", ("u", 4): "unsigned int",
        ("u", 8): "unsigned long long",
        ("f", 2): "__half", ("f", 4): "float", ("f", 8): "double",
        ("c", 8): "complex<float>", ("c", 16): "complex<double>",
    }
    if (dt.kind, dt.itemsize) not in kinds:
        raise ValueError(f"CuPy kernels have no C type for dtype {dt}")
    return kinds[(dt.kind, dt.itemsize)]


def parse_kernel_params(text: str, *, const: bool) -> list[KernelParam]:
    """Parse a CuPy parameter list such as ``"float32 x, raw T y"`` as CuPy does (``const`` for inputs)."""
    if not isinstance(text, str):
        raise TypeError(f"a parameter list is a string such as 'float32 x, T y', not {type(text).__name__}")
    params = []
    for item in (text.strip().split(",") if text.strip() else []):
        words = item.split()
        if len(words) < 2:
            raise ValueError(f"syntax error in the parameter {item.strip()!r}: expected '[raw] TYPE NAME'")
        type_name, name = words[-2:]
        raw, is_const = False, const
        for word in words[:-2]:
            if word == "raw":
                raw = True
            elif word == "_non_const":
                is_const = False
            else:
                raise ValueError(f"unknown keyword {word!r} in the parameter {item.strip()!r}")
        if not _IDENTIFIER.match(name):
            raise ValueError(f"{name!r} is not a valid parameter name")
        ctype = type_name if len(type_name) == 1 else c_type_of(type_name)
        params.append(KernelParam(name, type_name, ctype, raw, is_const))
    return params


def _check_kernel_name(name: str) -> None:
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise ValueError(f"invalid kernel name: {name!r}")


def _declarations(in_params, out_params, types) -> tuple[str, str]:
    """The headers and typedefs a kernel needs: one typedef per placeholder, ``float32`` unless ``types`` says."""
    types = dict(types or {})
    placeholders = sorted({p.type_name for p in in_params + out_params if p.is_placeholder})
    unknown = sorted(set(types) - set(placeholders))
    if unknown:
        raise ValueError(f"types names placeholders the kernel does not use: {unknown}")
    typedefs = "".join(f"typedef {c_type_of(types.get(t, 'float32'))} {t};\n" for t in placeholders)
    c_types = [p.ctype for p in in_params + out_params] + [c_type_of(types.get(t, "float32")) for t in placeholders]
    headers = _CUPY_LIKE_HEADER
    if any("__half" in c for c in c_types):
        headers += _HALF_HEADER
    if any("complex" in c for c in c_types):
        headers += _COMPLEX_HEADER
    return headers, typedefs


def _kernel_params(params: list[KernelParam]) -> list[str]:
    """Each parameter as the kernel declares it: every array is a CArray, named ``_raw_x`` unless raw."""
    return [f"{'const ' if p.const else ''}CArray<{p.ctype}> {p.name if p.raw else '_raw_' + p.name}"
            for p in params]


def elementwise_source(in_params: str, out_params: str, operation: str, name: str = "kernel", *,
                       preamble: str = "", loop_prep: str = "", after_loop: str = "",
                       types: dict[str, str] | None = None, **cupy_only) -> str:
    """A standalone CUDA source for ``cupy.ElementwiseKernel(in_params, out_params, operation, name, ...)``.

    Takes the same arguments as CuPy (``reduce_dims``, ``no_return``, ``return_tuple`` and ``options`` are
    accepted and change nothing here). ``types`` sets the dtype of one-letter type placeholders such as
    ``T`` (``float32`` by default), as the arrays passed at a call would.
    """
    unknown = sorted(set(cupy_only) - {"reduce_dims", "no_return", "return_tuple", "options"})
    if unknown:
        raise TypeError(f"ElementwiseKernel has no arguments {unknown}")
    _check_kernel_name(name)
    if not isinstance(operation, str):
        raise TypeError(f"operation must be a string of CUDA code, not {type(operation).__name__}")
    ins, outs = parse_kernel_params(in_params, const=True), parse_kernel_params(out_params, const=False)
    if "i" in [p.name for p in ins + outs]:
        raise ValueError("'i' cannot be a parameter name: it is the loop index")
    headers, typedefs = _declarations(ins, outs, types)
    body = [f"{'const ' if p.const else ''}{p.ctype} &{p.name} = _raw_{p.name}[_ind.get()];"
            for p in ins + outs if not p.raw]
    params = ", ".join(_kernel_params(ins + outs) + ["CIndexer _ind"])
    loop_body = "\n".join("    " + line for line in [*body, operation + ";"])
    return (f"// The kernel CuPy's ElementwiseKernel {name!r} becomes, in outline (tests.support.cuda_sources).\n"
            f"{headers}{typedefs}{preamble}\n"
            f'extern "C" __global__ void {name}({params}) {{\n'
            f"  {loop_prep};\n"
            f"  for (ptrdiff_t i = (ptrdiff_t)blockIdx.x * blockDim.x + threadIdx.x; i < _ind.size();\n"
            f"       i += (ptrdiff_t)blockDim.x * gridDim.x) {{\n"
            f"    _ind.set(i);\n{loop_body}\n  }}\n"
            f"  {after_loop};\n}}\n")


def reduction_source(in_params: str, out_params: str, map_expr: str, reduce_expr: str, post_map_expr: str,
                     identity, name: str = "reduce_kernel", *, reduce_type: str | None = None,
                     preamble: str = "", types: dict[str, str] | None = None, **cupy_only) -> str:
    """A standalone CUDA source for ``cupy.ReductionKernel(in_params, out_params, map_expr, reduce_expr,
    post_map_expr, identity, name, ...)``.

    As in CuPy, ``map_expr`` maps each input element, ``reduce_expr`` combines two values ``a`` and ``b``,
    ``post_map_expr`` writes the reduced value ``a`` to the outputs, and ``reduce_type`` (by default the
    first output's type) holds the running value. One block of :data:`REDUCTION_BLOCK_SIZE` threads reduces
    each output element, the reduced axes coming first in memory.
    """
    unknown = sorted(set(cupy_only) - {"reduce_dims", "options"})
    if unknown:
        raise TypeError(f"ReductionKernel has no arguments {unknown}")
    _check_kernel_name(name)
    for label, expr in (("map_expr", map_expr), ("reduce_expr", reduce_expr), ("post_map_expr", post_map_expr)):
        if not isinstance(expr, str):
            raise TypeError(f"{label} must be a string of CUDA code, not {type(expr).__name__}")
    ins, outs = parse_kernel_params(in_params, const=True), parse_kernel_params(out_params, const=False)
    if not outs:
        raise ValueError("a reduction needs at least one output parameter")
    headers, typedefs = _declarations(ins, outs, types)
    reduce_type = outs[0].ctype if reduce_type is None else reduce_type
    identity = "" if identity is None else str(identity)
    inputs = "\n".join(f"      const {p.ctype} {p.name} = _raw_{p.name}[_in_ind.get()];" for p in ins if not p.raw)
    outputs = "\n".join(f"      {p.ctype} &{p.name} = _raw_{p.name}[_out_ind.get()];" for p in outs if not p.raw)
    params = ", ".join(_kernel_params(ins + outs) + ["CIndexer _in_ind", "CIndexer _out_ind"])
    size = REDUCTION_BLOCK_SIZE
    return (f"// The kernel CuPy's ReductionKernel {name!r} becomes, in outline (tests.support.cuda_sources).\n"
            f"{headers}{typedefs}{preamble}\n"
            f"#define REDUCE(a, b) ({reduce_expr})\n"
            f"#define POST_MAP(a) ({post_map_expr})\n"
            f"typedef {reduce_type} _type_reduce;\n"
            f'extern "C" __global__ void {name}({params}) {{\n'
            f"  __shared__ char _sdata_raw[{size} * sizeof(_type_reduce)];\n"
            f"  _type_reduce *_sdata = reinterpret_cast<_type_reduce*>(_sdata_raw);\n"
            f"  unsigned int _tid = threadIdx.x;\n"
            f"  for (ptrdiff_t _i = blockIdx.x; _i < _out_ind.size(); _i += gridDim.x) {{\n"
            f"    _type_reduce _s = _type_reduce({identity});\n"
            f"    for (ptrdiff_t _j = _i + (ptrdiff_t)_tid * _out_ind.size(); _j < _in_ind.size();\n"
            f"         _j += (ptrdiff_t){size} * _out_ind.size()) {{\n"
            f"      _in_ind.set(_j);\n{inputs}\n"
            f"      _type_reduce _a = static_cast<_type_reduce>({map_expr});\n"
            f"      _s = REDUCE(_s, _a);\n"
            f"    }}\n"
            f"    _sdata[_tid] = _s;\n"
            f"    __syncthreads();\n"
            f"    for (unsigned int _block = {size} / 2; _block > 0; _block >>= 1) {{\n"
            f"      if (_tid < _block) {{\n"
            f"        _type_reduce _a = _sdata[_tid], _b = _sdata[_tid + _block];\n"
            f"        _sdata[_tid] = REDUCE(_a, _b);\n"
            f"      }}\n"
            f"      __syncthreads();\n"
            f"    }}\n"
            f"    if (_tid == 0) {{\n"
            f"      _s = _sdata[0];\n"
            f"      _out_ind.set(_i);\n{outputs}\n"
            f"      POST_MAP(_s);\n"
            f"    }}\n"
            f"    __syncthreads();\n"
            f"  }}\n}}\n")
