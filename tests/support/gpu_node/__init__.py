"""A GPU node, simulated on a machine without a GPU, for the tests.

The book's first GPU run (2026-11-26, one H100, ../shared/gpu-runs/2026-11-26-h100/) failed 11 tests that had
assumed the machine has no GPU: its Python had what a GPU node has (torch that sees a device, NCCL in torch, CuPy,
JAX's CUDA plugin, an nvidia-smi that answers, ``CXX`` set). :func:`gpu_node_env` returns the environment
variables that give a Python on this machine the same, so that the suite can be run under them and each test
shown to force what it tests:

- ``PATH`` starts with ``bin/``, whose ``nvidia-smi`` answers as that node's did;
- ``PYTHONPATH`` starts with ``site/``, whose ``sitecustomize.py`` makes torch report the H100 (and NCCL), JAX
  a gpu backend and numba-cuda an available GPU, right after each is imported (``GPUKIT_FAKE_GPU_NODE`` says which);
- ``tests/support/stand_ins/cupy_on_numpy`` (CuPy's interface computing with NumPy, seen as the distribution
  cupy-cuda13x)
  and ``jax_plugin/`` (the distribution jax-cuda13-plugin) are on ``PYTHONPATH`` too;
- ``CXX=/usr/bin/g++``, as that node's compiler was named.

Only the answers to "is there a GPU?" are faked: work sent to torch's device still fails (CuPy's stand-in computes,
with NumPy). Use it, e.g.::

    env $(python -c "from tests.support.gpu_node import shell_assignments; print(shell_assignments())") \\
          python -m pytest tests/unit/commands/test_preflight.py tests/unit/topics/test_extensions.py

The whole suite runs there too (12-15 minutes on 2 cores; not in `make test`, which runs the GPU tests there,
tests/booktools/test_gpu_node_suite.py)::

    env $(.venv/bin/python -c "from tests.support.gpu_node import shell_assignments; print(shell_assignments())") \
          nice -n 10 .venv/bin/python -m pytest -n 2 tests -p no:cacheprovider -q -rfEs

Each test forces the device it tests (``GPUKIT_DEVICE=cpu`` for the exercise checks, JAX on the CPU, a kernel's
torch without CUDA) or, where it needs real work on the GPU that torch or numba-cuda reports, skips with
tests/support/device_probe.py's reason: "torch reports a CUDA GPU but cannot make a tensor on it (Torch not compiled
with
CUDA enabled)", and what it needs. There that is the site and JupyterHub tests (the site is built from runs of the
lessons; the probe runs before the build), the thin-kernel runs of the lessons, the GPU tests of
tests/unit/core/test_gpu_only.py, and the checks that compile (Dynamo saves the CUDA random state wherever torch
reports a
GPU) or launch kernels. On a real GPU node the probe passes and they run.

:func:`forcing_env` returns the variables that force a condition in a child Python whatever the machine has
(a library missing, torch without NCCL or without CUDA, NumPy 2.5's missing ``np.row_stack``, the GPU hidden).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path

FOLDER = Path(__file__).resolve().parent
BIN = FOLDER / "bin"
SITE = FOLDER / "site"
CUPY = FOLDER.parent / "stand_ins" / "cupy_on_numpy"
JAX_PLUGIN = FOLDER / "jax_plugin"
PARTS = ("torch", "jax", "numba", "cupy")
CXX = "/usr/bin/g++"

# What the simulated node's GPU answers (tests/support/gpu_node/bin/nvidia-smi, site/sitecustomize.py).
GPU_NAME = "NVIDIA H100 80GB HBM3"
DRIVER = "580.159.04"
SMI_LINE = f"{GPU_NAME}, 81559 MiB, {DRIVER}"


def _joined(*folders, rest: str | None = None) -> str:
    return os.pathsep.join([*map(str, folders), *([rest] if rest else [])])


def gpu_node_env(environ: Mapping[str, str] | None = None, *, parts: Iterable[str] = PARTS,
                 cxx: str | None = CXX) -> dict[str, str]:
    """The variables that make a Python (and its children) on this machine look like the GPU node: ``PATH``,
    ``PYTHONPATH`` and ``GPUKIT_FAKE_GPU_NODE`` for ``parts`` (some of "torch", "jax", "numba", "cupy"), and ``CXX``
    unless ``cxx`` is None. ``environ`` (default ``os.environ``) is the environment they extend."""
    environ = os.environ if environ is None else environ
    parts = tuple(parts)
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise ValueError(f"unknown parts {sorted(unknown)}; choose from {PARTS}")
    folders = [SITE, *([CUPY] if "cupy" in parts else []), *([JAX_PLUGIN] if "jax" in parts else [])]
    found = {"PATH": _joined(BIN, rest=environ.get("PATH")),
             "PYTHONPATH": _joined(*folders, rest=environ.get("PYTHONPATH")),
             "GPUKIT_FAKE_GPU_NODE": ",".join(parts)}
    if cxx is not None:
        found["CXX"] = cxx
    return found


def shell_assignments(environ: Mapping[str, str] | None = None, **options) -> str:
    """:func:`gpu_node_env` as ``NAME=value`` words for ``env`` in a shell."""
    return " ".join(f"{name}={shlex.quote(value)}" for name, value in gpu_node_env(environ, **options).items())


def forcing_env(environ: Mapping[str, str] | None = None, *, hide: Iterable[str] = (), hide_gpu: bool = False,
                no_nvidia_smi: bool = False, torch_without_nccl: bool = False, torch_without_cuda: bool = False,
                numpy_2_5: bool = False) -> dict[str, str]:
    """The variables that force a condition in a child Python, whatever this machine has: ``hide`` (import
    names that cannot be imported), ``hide_gpu`` (``CUDA_VISIBLE_DEVICES=""``: CUDA, and so torch, numba-cuda,
    CuPy and JAX, see no GPU), ``no_nvidia_smi`` (an nvidia-smi first on ``PATH`` that fails as on a node whose
    driver is not loaded, so it lists no GPU), ``torch_without_nccl``, ``torch_without_cuda`` (torch reports no CUDA
    device, as a CPU build, whatever ``CUDA_VISIBLE_DEVICES`` says), ``numpy_2_5`` (no ``np.row_stack``).
    ``PYTHONPATH`` gets site/ in front where the sitecustomize is needed; ``environ`` (default ``os.environ``)
    is extended."""
    environ = os.environ if environ is None else environ
    found: dict[str, str] = {}
    if hide_gpu:
        found["CUDA_VISIBLE_DEVICES"] = ""
    if no_nvidia_smi:
        found["PATH"] = _joined(BIN, rest=environ.get("PATH"))
        found["GPUKIT_FAKE_NVIDIA_SMI"] = "fail"
    hidden = [name for name in hide if name]
    if hidden:
        found["GPUKIT_TEST_HIDE"] = ",".join(hidden)
    if torch_without_nccl:
        found["GPUKIT_TEST_TORCH_WITHOUT_NCCL"] = "1"
    if torch_without_cuda:
        found["GPUKIT_TEST_TORCH_WITHOUT_CUDA"] = "1"
    if numpy_2_5:
        found["GPUKIT_TEST_NUMPY_2_5"] = "1"
    if set(found) - {"CUDA_VISIBLE_DEVICES", "PATH", "GPUKIT_FAKE_NVIDIA_SMI"}:
        found["PYTHONPATH"] = _joined(SITE, rest=environ.get("PYTHONPATH"))
    return found
