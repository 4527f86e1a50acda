"""Every CUDA kernel source in the book compiles with nvcc (where nvcc exists), and the compile helper says
clearly what went wrong."""

from __future__ import annotations

import ast
import json

import pytest
from booktoc import ROOT

from gpukit.kernels import CudaCompileError, compile_cuda, find_nvcc, ptx_entries

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc (NVIDIA's CUDA toolkit) is not installed here")

ADD = 'extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {\n' \
      "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) c[i] = a[i] + b[i];\n}\n"


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
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and "__global__" in node.value:
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
    import gpukit.kernels as kernels

    monkeypatch.setattr(kernels, "find_nvcc", lambda: None)
    with pytest.raises(FileNotFoundError, match="nvcc is not installed"):
        compile_cuda(ADD)


@needs_nvcc
@pytest.mark.parametrize(("where", "source"), cuda_sources_in_notebooks() or [("no notebook", None)])
def test_every_kernel_in_the_book_compiles(where, source):
    if source is None:
        pytest.skip("no notebook holds a CUDA kernel source yet")
    assert ptx_entries(compile_cuda(source)), f"{where}: the source compiled but defines no kernel"
