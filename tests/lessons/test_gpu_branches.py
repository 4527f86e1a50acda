"""The lessons' GPU branches, run on the CPU: the GPU predicates true, real stand-ins behind them.

A branch that only a GPU takes is a branch that no CPU run of the book executes: on the first H100 the CuPy lesson
failed at every GPU cell, with a NameError that any run of those cells would have shown. Where a stand-in that
computes for real exists, the lesson runs here with it in place of the GPU library, every cell, solutions and
hidden cells as nbval runs them, and must reach its end without an error, having taken the GPU branches.

- CuPy: ``tests/support/stand_ins/cupy_on_numpy``, CuPy's interface computing with NumPy (raw kernels compiled for the
  CPU
  by gpukit's HostKernel), with ``cupy.cuda.is_available()`` true.

Sizes a lesson picks for a GPU (``n = 4096 if gpu_ready else 1024``) would take minutes here: the kernel runs
each such choice between two numeric literals at the smaller one (an IPython AST transformer, `SMALLER_SIZES`),
so the GPU branch runs at the CPU's scale. What no stand-in can run (a CUDA build of PyTorch: its tensors cannot
live anywhere but on a GPU) is checked by reading the code (tests/lessons/test_lesson_names.py) and by the tests of each
lesson's GPU settings; in the kernel torch reports no CUDA device (`TORCH_WITHOUT_CUDA`), so that the lesson
takes its CuPy branches on the stand-in and its torch branches on the CPU on any machine, a GPU node included.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.support import lesson_code
from tests.support.booktoc import ROOT
from tests.support.lesson_solutions import as_tested

CUPY_ON_NUMPY = ROOT / "tests" / "support" / "stand_ins" / "cupy_on_numpy"


# An IPython start-up file: `A if test else B`, where A and B are numbers (or tuples of numbers) and the test reads a
# device or a GPU, becomes the smaller of A and B (for tuples: the smaller product).
SMALLER_SIZES = """
import ast
import math


CONSTANT_ARITHMETIC = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.Tuple, ast.operator, ast.unaryop, ast.Load)


def _number(node):
    # Numbers, tuples of numbers and arithmetic on them (2**24), nothing that names or calls anything.
    if not all(isinstance(part, CONSTANT_ARITHMETIC) for part in ast.walk(node)):
        return None
    value = eval(compile(ast.Expression(node), "<size>", "eval"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, tuple) and value and all(isinstance(v, (int, float)) for v in value):
        return math.prod(value)
    return None


class SmallerSizes(ast.NodeTransformer):
    def visit_IfExp(self, node):
        self.generic_visit(node)
        test = ast.unparse(node.test).lower()
        sizes = _number(node.body), _number(node.orelse)
        if None in sizes or not any(word in test for word in ("gpu", "cuda", "cpu", "dev")):
            return node
        return node.body if sizes[0] <= sizes[1] else node.orelse


get_ipython().ast_transformers.append(SmallerSizes())
"""


# Another start-up file: PyTorch in the kernel has no usable CUDA, whatever this machine has. The stand-ins compute on
# the CPU, so a CUDA tensor cannot share their memory; on a GPU node (or the simulated one, tests/support/gpu_node,
# where
# torch reports a GPU it cannot use) the lesson's torch-on-CUDA branches would hand a stand-in's array to the GPU.
TORCH_WITHOUT_CUDA = """
import torch

torch.cuda.is_available = lambda: False
torch.cuda.device_count = lambda: 0
"""


@pytest.fixture(scope="module")
def ipython_dir(tmp_path_factory):
    return lesson_code.ipython_dir(tmp_path_factory.mktemp("gpu-branches-ipython"), {
        "00-smaller-sizes.py": SMALLER_SIZES, "01-torch-without-cuda.py": TORCH_WITHOUT_CUDA})


def printed(nb) -> str:
    return "".join(output.get("text", "") for cell in nb.cells for output in cell.get("outputs", [])
                   if output.get("output_type") == "stream" and output.get("name") == "stdout")


def errors(nb) -> list[str]:
    return [f"cell {index}: {output['ename']}: {output['evalue']}" for index, cell in enumerate(nb.cells)
            for output in cell.get("outputs", []) if output.get("output_type") == "error"]


def run_with_stand_in(lesson: str, stand_in: Path, ipython_dir: Path) -> nbformat.NotebookNode:
    path = ROOT / "notebooks" / lesson
    nb = as_tested(nbformat.read(path, as_version=4), path.name)
    python_path = os.pathsep.join(p for p in (str(stand_in), str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": python_path, "GPUKIT_DEVICE": "cpu", "IPYTHONDIR": str(ipython_dir)}
    client = NotebookClient(nb, timeout=nb.metadata.get("mystnb", {}).get("execution_timeout", 300),
                            kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute(cwd=str(path.parent), env=env)
    return nb


def test_the_kernel_imports_the_stand_in_and_runs_gpu_sizes_at_the_smaller_scale(ipython_dir):
    # Without the stand-in on the path the kernel would meet this machine's CuPy (or none) and test nothing new.
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(
        "import cupy\nprint(cupy.STAND_IN, cupy.cuda.is_available())\n"
        "gpu_ready = on_gpu = True\n"
        "print(4096 if gpu_ready else 1024, (65_536, 256) if on_gpu else (1024, 32), 2**24 if gpu_ready else 1000,"
        " 256 if not on_gpu else 8192, 0.5 if gpu_ready else 2, 'big' if gpu_ready else 'small')"))
    NotebookClient(nb, kernel_name="python3").execute(env={
        **os.environ, "IPYTHONDIR": str(ipython_dir),
        "PYTHONPATH": os.pathsep.join([str(CUPY_ON_NUMPY), os.environ.get("PYTHONPATH", "")])})
    first, second = printed(nb).splitlines()
    assert first.startswith("CuPy's interface on NumPy") and first.endswith("True")
    assert second == "1024 (1024, 32) 1000 256 0.5 big"


@pytest.fixture(scope="module")
def cupy_lesson_on_the_stand_in(ipython_dir):
    return run_with_stand_in("03-cupy.ipynb", CUPY_ON_NUMPY, ipython_dir)


def test_the_cupy_lesson_runs_every_gpu_cell_without_an_error(cupy_lesson_on_the_stand_in):
    nb = cupy_lesson_on_the_stand_in
    assert not errors(nb), "the CuPy lesson's GPU branches fail:\n" + "\n".join(errors(nb))


def test_the_cupy_lesson_took_its_gpu_branches(cupy_lesson_on_the_stand_in):
    text = printed(cupy_lesson_on_the_stand_in)
    assert "CuPy 14.2.0 on 1 GPU(s)" in text
    # The only skip left is the one that needs a CUDA build of PyTorch beside CuPy.
    skips = [line for line in text.splitlines() if line.startswith("Skipped:")]
    assert skips == ["Skipped: sharing GPU memory needs CuPy on a GPU and a CUDA build of PyTorch"], skips
    for line in ("CuPy matmul", "cupy.asnumpy into a pinned buffer", "cupy.asnumpy into a new array"):
        assert line in text, f"the GPU branch printing {line!r} did not run"
