"""Every CUDA kernel source in the book compiles with nvcc (where nvcc exists), and the compile helper says
clearly what went wrong."""

from __future__ import annotations

import ast
import json
import re

import pytest

from gpukit.base.nvcc import CudaCompileError, compile_cuda, find_nvcc, ptx_entries
from tests.support.booktoc import ROOT
from tests.support.cuda_sources import c_type_of, elementwise_source, reduction_source

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc (NVIDIA's CUDA toolkit) is not installed here")

ADD = 'extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {\n' \
      "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) c[i] = a[i] + b[i];\n}\n"


# A kernel's definition, not the word alone (lesson 16 looks for "Invalid __global__ write" in a tool's report).
KERNEL = re.compile(r"__global__\s+void\s+\w+\s*\(")


def cuda_sources_in_notebooks() -> list[tuple[str, str]]:
    """(where, source) for every string literal holding a ``__global__`` kernel in a notebook's code."""
    found = []
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text(encoding="utf-8"))
        for index, cell in enumerate(nb["cells"]):
            if cell["cell_type"] != "code":
                continue
            code = "".join(cell["source"])
            lines = [line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))]
            for node in ast.walk(ast.parse("\n".join(lines))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and KERNEL.search(node.value):
                    found.append((f"{path.name} cell {index}", node.value))
    return found


@needs_nvcc
def test_a_kernel_compiles_to_ptx_that_names_it():
    ptx = compile_cuda(ADD)
    assert ptx_entries(ptx) == ["add"]
    assert ".target sm_80" in ptx


@needs_nvcc
def test_a_broken_kernel_is_reported_with_nvccs_message():
    with pytest.raises(CudaCompileError, match=r"kernel\.cu.*error"):
        compile_cuda(ADD.replace("c[i] = a[i] + b[i];", "c[i] = a[i] + undefined_thing;"))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"source": ""}, "source must be"), ({"source": ADD, "arch": "80"}, "arch must"),
    ({"source": ADD, "output": "exe"}, "output must"),
])
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        compile_cuda(**kwargs)


def test_missing_nvcc_is_a_clear_error(monkeypatch):
    import gpukit.base.nvcc as nvcc

    monkeypatch.setattr(nvcc, "find_nvcc", lambda: None)
    with pytest.raises(FileNotFoundError, match="nvcc is not installed"):
        compile_cuda(ADD)


@needs_nvcc
@pytest.mark.parametrize(("where", "source"), cuda_sources_in_notebooks() or [("no notebook", None)])
def test_every_kernel_in_the_book_compiles(where, source):
    if source is None:
        pytest.skip("no notebook holds a CUDA kernel source yet")
    assert ptx_entries(compile_cuda(source)), f"{where}: the source compiled but defines no kernel"


# ------------------------------------------------------------------ CuPy's ElementwiseKernel and ReductionKernel
CUPY_KERNELS = {"ElementwiseKernel": elementwise_source, "ReductionKernel": reduction_source}


class NotLiteral(ValueError):
    """A kernel argument the test cannot read without running the notebook."""


def _code_of(cell) -> str:
    code = "".join(cell["source"])
    return "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))


def string_names(code: str) -> dict[str, str]:
    """Names bound to a string literal in ``code`` (``op = "z = x * 2"``)."""
    strings = {}
    for node in ast.walk(ast.parse(code)):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            strings[node.targets[0].id] = node.value.value
    return strings


def cupy_kernel_calls(code: str, where: str = "code", strings: dict[str, str] | None = None,
                      ) -> list[tuple[str, str, list, dict]]:
    """(where, "ElementwiseKernel" or "ReductionKernel", args, kwargs) for every such call in ``code``.

    Arguments must be literals, or names bound to a string literal in ``code`` (or in ``strings``, the rest
    of the notebook); anything else raises :class:`NotLiteral`, since a kernel the test cannot read is a
    kernel nvcc never checks.
    """
    tree = ast.parse(code)
    strings = {**(strings or {}), **string_names(code)}

    def literal(node, call):
        if isinstance(node, ast.Name) and node.id in strings:
            return strings[node.id]
        try:
            return ast.literal_eval(node)
        except ValueError:
            message = (f"{where}, line {node.lineno}: an argument of {call} is not a literal "
                       f"({ast.unparse(node)}): write the kernel's strings out so that nvcc checks them")
            raise NotLiteral(message) from None

    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        call = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if call not in CUPY_KERNELS:
            continue
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise NotLiteral(f"{where}, line {node.lineno}: {call} is called with *args or **kwargs")
        args = [literal(a, call) for a in node.args]
        kwargs = {k.arg: literal(k.value, call) for k in node.keywords}
        found.append((f"{where}, line {node.lineno}", call, args, kwargs))
    return found


def cupy_kernels_in_notebooks() -> list[tuple[str, str, list, dict]]:
    """Every ElementwiseKernel and ReductionKernel call in the notebooks, with its literal arguments."""
    found = []
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = {index: _code_of(c) for index, c in enumerate(nb["cells"]) if c["cell_type"] == "code"}
        strings = string_names("\n".join(cells.values()))
        for index, code in cells.items():
            found += cupy_kernel_calls(code, f"{path.name} cell {index}", strings)
    return found


SQUARED_DIFF = ("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)", "squared_diff")
L2NORM = ("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm")


def test_elementwise_source_declares_the_parameters_as_cupy_does():
    source = elementwise_source(*SQUARED_DIFF)
    assert 'extern "C" __global__ void squared_diff(const CArray<float> _raw_x, const CArray<float> _raw_y, ' \
           "CArray<float> _raw_z, CIndexer _ind)" in source
    assert "const float &x = _raw_x[_ind.get()];" in source and "float &z = _raw_z[_ind.get()];" in source
    assert "z = (x - y) * (x - y);" in source
    raw = elementwise_source("raw T x", "T y", "y = x[_ind.size() - i - 1]", "reverse", types={"T": "float64"})
    assert "typedef double T;" in raw and "const CArray<T> x," in raw and "_raw_x" not in raw


def test_reduction_source_has_cupys_macros_and_reduce_type():
    source = reduction_source(*L2NORM)
    assert "#define REDUCE(a, b) (a + b)" in source and "#define POST_MAP(a) (y = sqrt(a))" in source
    assert "typedef float T;" in source and "typedef T _type_reduce;" in source
    assert "_type_reduce _s = _type_reduce(0);" in source and "const T x = _raw_x[_in_ind.get()];" in source
    assert "typedef double _type_reduce;" in reduction_source(*L2NORM, reduce_type="double")


@pytest.mark.parametrize(("dtype", "ctype"), [("float32", "float"), ("float64", "double"), ("int64", "long long"),
                                              ("uint8", "unsigned char"), ("bool", "bool"), ("float16", "__half"),
                                              ("complex64", "complex<float>")])
def test_dtypes_become_cupys_c_types(dtype, ctype):
    assert c_type_of(dtype) == ctype


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda: elementwise_source("float32 i", "float32 z", "z = i", "k"), ValueError, "'i' cannot be"),
    (lambda: elementwise_source("x", "float32 z", "z = 1", "k"), ValueError, "syntax error"),
    (lambda: elementwise_source("const float32 x", "float32 z", "z = x", "k"), ValueError, "unknown keyword"),
    (lambda: elementwise_source("float32 x", "float32 z", "z = x", "my-kernel"), ValueError, "invalid kernel name"),
    (lambda: elementwise_source("float32 x", "float32 z", "z = x", "k", types={"T": "float64"}), ValueError,
     "placeholders the kernel does not use"),
    (lambda: elementwise_source("float32 x", "float32 z", "z = x", "k", loop=1), TypeError, "no arguments"),
    (lambda: elementwise_source("object x", "float32 z", "z = x", "k"), ValueError, "no C type"),
    (lambda: reduction_source("T x", "", "x", "a + b", "y = a", "0"), ValueError, "at least one output"),
    (lambda: reduction_source("T x", "T y", None, "a + b", "y = a", "0"), TypeError, "map_expr must be"),
])
def test_malformed_kernels_are_refused_as_cupy_refuses_them(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_kernel_calls_are_found_with_their_literal_arguments():
    code = ('op = "z = x * 2"\n'
            'double = cupy.ElementwiseKernel("float32 x", "float32 z", op, "double")\n'
            'if cupy:\n    norm = cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", '
            'name="l2", reduce_type="double")\n')
    found = cupy_kernel_calls(code)
    assert [(kind, args, kwargs) for _, kind, args, kwargs in found] == [
        ("ElementwiseKernel", ["float32 x", "float32 z", "z = x * 2", "double"], {}),
        ("ReductionKernel", ["T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0"],
         {"name": "l2", "reduce_type": "double"}),
    ]
    with pytest.raises(NotLiteral, match="not a literal"):
        cupy_kernel_calls('cupy.ElementwiseKernel("float32 x", "float32 z", f"z = x * {k}", "scale")')
    with pytest.raises(NotLiteral, match=r"\*args"):
        cupy_kernel_calls("cupy.ElementwiseKernel(*spec)")


@needs_nvcc
def test_cupy_kernel_snippets_compile():
    assert ptx_entries(compile_cuda(elementwise_source(*SQUARED_DIFF))) == ["squared_diff"]
    assert ptx_entries(compile_cuda(reduction_source(*L2NORM))) == ["l2norm"]
    reverse = elementwise_source("raw T x", "T y", "y = x[_ind.size() - i - 1]", "reverse")
    assert ptx_entries(compile_cuda(reverse)) == ["reverse"]
    assert ptx_entries(compile_cuda(elementwise_source("complex64 x", "float32 y", "y = abs(x)", "modulus")))


@needs_nvcc
@pytest.mark.parametrize(("source", "message"), [
    (elementwise_source("float32 x, float32 y", "float32 z", "z = x + undeclared_thing", "broken"),
     'identifier "undeclared_thing" is undefined'),
    (elementwise_source("float32 x", "float32 z", "x = z", "writes_its_input"), "modifiable lvalue"),
    (elementwise_source("float32 x", "float32 z", "z = x * 2 +", "unfinished"), "error"),
    (reduction_source("T x", "T y", "x * x", "a + c", "y = sqrt(a)", "0", "broken_sum"), 'identifier "c"'),
], ids=["undeclared-name", "writes-an-input", "syntax-error", "reduction-undeclared"])
def test_a_broken_cupy_snippet_is_caught_by_nvcc(source, message):
    with pytest.raises(CudaCompileError, match=message):
        compile_cuda(source)


@needs_nvcc
@pytest.mark.parametrize(("where", "kind", "args", "kwargs"),
                         cupy_kernels_in_notebooks() or [("no notebook", None, None, None)])
def test_every_cupy_kernel_in_the_book_compiles(where, kind, args, kwargs):
    if kind is None:
        pytest.skip("no notebook defines an ElementwiseKernel or ReductionKernel yet")
    source = CUPY_KERNELS[kind](*args, **kwargs)
    assert ptx_entries(compile_cuda(source)), f"{where}: the {kind} compiled but defines no kernel"
