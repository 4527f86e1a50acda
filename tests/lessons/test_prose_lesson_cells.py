"""Lesson cells run on the CPU as they would run on a GPU node, for what the first H100 run found (issue 26).

Each test takes cells of a lesson as they are stored (found by a line of their code), runs them in a child
Python with what the test forces (a GPU-sized setting, a pretend device, a slow scheduler), and reads what
they print and what reaches stderr, which the book's pages would show:

- 02: closing the Dask client and cluster prints no worker's heartbeat traceback, even where every worker
  has a heartbeat in flight when the cluster closes (the scheduler answers heartbeats slowly here);
- 04: the batched products' cell prints no rate that rounds to zero, fed the H100's times;
- 05 and 07: the warnings the prose discusses (Dynamo's about a pybind function, Inductor's about complex
  operators) are printed by the cell, without the folders of the machine that built the page, and nothing
  reaches stderr;
- 06: the memory snapshot's size is written in units that fit it (the H100 run printed it as "0.0 MiB").

:func:`lesson_code.lesson_cells` and :func:`lesson_code.run_cells` are the helpers.
"""

from __future__ import annotations

import re

import pytest

from tests.support.lesson_code import lesson_cells, run_cells


def test_run_cells_keeps_each_cells_output_and_stderr_apart(tmp_path):
    run = run_cells(["print('one')", "import sys\nprint('two')\nprint('oops', file=sys.stderr)"], tmp_path)
    assert run.returncode == 0, run.failed()
    assert [output.strip() for output in run.outputs] == ["one", "two"]
    assert run.stderr.strip() == "oops"
    with pytest.raises(LookupError, match="0 code cells"):
        lesson_cells("02-parallel-cpu.ipynb", "no cell has this line")


# The scheduler answers a worker's heartbeat only once that worker is gone, so that every worker has one in flight
# when the cluster closes (the race that printed a worker's traceback under chapter 2's closing cell on the H100),
# and the scheduler then meets a heartbeat from a worker it no longer knows (its warning reached stderr on a loaded
# machine): both races of the closing, made certain.
SLOW_HEARTBEATS = """
import asyncio
import time

from distributed.scheduler import Scheduler

from gpukit import optional_import

_start = Scheduler.__init__


def start_answering_heartbeats_late(self, *args, **kwargs):
    _start(self, *args, **kwargs)
    answer = self.handlers["heartbeat_worker"]

    async def late(*args, **kwargs):
        for _ in range(200):  # at most 10 s
            if kwargs.get("address") not in self.workers:
                break
            await asyncio.sleep(0.05)
        return answer(*args, **kwargs)

    self.handlers["heartbeat_worker"] = late


Scheduler.__init__ = start_answering_heartbeats_late
n_workers = 2
"""


def test_closing_the_dask_cluster_prints_nothing_on_stderr(tmp_path):
    pytest.importorskip("distributed")
    start, close = lesson_cells("02-parallel-cpu.ipynb", "dask_workers = dask_cluster(", "dask_workers.close()")
    run = run_cells([SLOW_HEARTBEATS, start, "time.sleep(2)  # every worker's heartbeat is now in flight",
                     close], tmp_path)
    assert run.returncode == 0, run.failed()
    assert "2 workers ready" in run.outputs[1]
    assert run.stderr.strip() == "", run.stderr[-3000:]


# Chapter 4's batched products on the H100: the loop's median was 264 ms, bmm's 68 µs. A stand-in benchmark
# returns those times for the cell's calls (with the work each call was given), so that what the cell prints
# is what it printed there.
H100_PRODUCTS = """
import torch

from gpukit import benchmark as measure
from gpukit.core.timing import Timing

H100_SECONDS = {"Python loop": 0.264, "one bmm": 68e-6}


def benchmark(fn, *args, flops=None, label=None, **kwargs):
    (seconds,) = [value for key, value in H100_SECONDS.items() if key in label]
    return Timing(label=label, samples=(seconds,), flops=flops)


device, dev = "cpu", torch.device("cpu")
batch, k = 10_000, 8
a, b = torch.randn(batch, k, k), torch.randn(batch, k, k)
"""
# A rate or a size that prints as zero: "0.0 GFLOP/s", "0 GB/s", "0.0 MiB".
ZERO_FIGURE = re.compile(r"(?<![\d.])0(?:\.0+)? (?:[kMGTP]?FLOP/s|[kMGT]?B/s|[KMGT]iB)\b")


def test_the_batched_products_print_no_rate_that_rounds_to_zero(tmp_path):
    (products,) = lesson_cells("04-pytorch-gpu.ipynb", "def products_in_a_loop")
    run = run_cells([H100_PRODUCTS, products], tmp_path)
    assert run.returncode == 0, run.failed()
    printed = run.outputs[1]
    assert "10,000 products, one bmm: median 68 µs" in printed and "GFLOP/s" in printed
    assert not ZERO_FIGURE.findall(printed), printed


def test_zero_figures_are_found():
    assert ZERO_FIGURE.findall("loop: median 264 ms | 0.0 GFLOP/s; snapshot (0.0 MiB); 0 GB/s")
    assert not ZERO_FIGURE.findall("bmm: 150.5 GFLOP/s | 10.0 GB/s; 68.37 KiB; 3.0 MiB")


# Where a page must not show the machine that built it: a site-packages path, or any absolute path to a .py file.
BUILDER_PATH = re.compile(r"site-packages|(?:^|\s)/\S+\.py\b")

# Chapter 5's C++ extension, stood in for by another builtin that Dynamo cannot trace (zlib's, not pybind's):
# the same branch of torch/_dynamo/variables/functions.py warns, naming the builtin and the remedy.
STAND_IN_EXTENSION = """
import types
import zlib

import torch

from gpukit import skip_unless

linear_cpp = types.SimpleNamespace(linear_forward=zlib.adler32, linear_backward=zlib.adler32)
torch.manual_seed(0)
inputs = tuple(torch.randn(*shape, dtype=torch.float64, requires_grad=True)
               for shape in [(4, 5), (3, 5), (3,)])
"""


def test_the_dynamo_warning_is_printed_without_the_builders_folders(tmp_path):
    function, refused = lesson_cells("05-autograd-custom-ops.ipynb", "class DenseSigmoidCpp",
                                     "strict = torch.compile(DenseSigmoidCpp.apply")
    run = run_cells([STAND_IN_EXTENSION, function, refused], tmp_path)
    assert run.returncode == 0, run.failed()
    printed = run.outputs[2]
    assert "Unsupported: " in printed
    assert "UserWarning: Dynamo does not know how to trace the builtin `zlib.adler32.`" in printed
    assert "custom operator" in printed  # the remedy the prose points to
    assert not BUILDER_PATH.findall(printed), printed
    assert run.stderr.strip() == "", run.stderr


def test_the_inductor_warning_is_printed_without_the_builders_folders(tmp_path):
    cells = lesson_cells("07-apple-mps.ipynb", "on_mps = device ==", "def lu_determinant(a):",
                         "cache = use_inductor_cache()", "batch, k = (8192 if on_gpu else 512), 6",
                         "def relative_errors(dets, matrices):",
                         'complex_dev = where_supported("linalg.lu_factor (complex64)")')
    prelude = 'device = "cpu"'
    # What the support table's cells give on a CPU.
    stand_ins = ("from gpukit import benchmark\n"
                 "real_dev = torch.device('cpu')\n"
                 "where_supported = lambda operation: torch.device('cpu')")
    # A cache of its own, empty: a compilation found in the cache would not warn.
    run = run_cells([prelude, *cells[:3], stand_ins, *cells[3:]], tmp_path,
                    env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")})
    assert run.returncode == 0, run.failed()
    printed = run.outputs[-1]
    assert "UserWarning: Torchinductor does not support code generation for complex operators" in printed
    assert "largest relative error, complex64 on cpu" in printed
    assert not BUILDER_PATH.findall(printed), printed
    assert run.stderr.strip() == "", run.stderr


def test_builder_paths_are_found():
    assert BUILDER_PATH.findall("/opt/torch/.venv/lib/python3.12/site-packages/torch/_inductor/lowering.py:2212:")
    assert BUILDER_PATH.findall("in /home/me/book/gpukit/core/timing.py line 3")
    assert not BUILDER_PATH.findall("UserWarning: Dynamo does not know how to trace the builtin `zlib.adler32.`")


# Chapter 6's memory snapshot on the H100 printed as "0.0 MiB": under 52 KB. A stand-in torch.cuda.memory writes
# a file of 40 KB where the cell asks for the snapshot; the data and the work are stand-ins, run_in_chunks is
# gpukit's.
SMALL_SNAPSHOT = """
import os
import types

from gpukit import skip_unless
from gpukit.topics.chunking import run_in_chunks


def dump_snapshot(path):
    with open(path, "wb") as file:
        file.write(bytes(40_000))


memory = types.SimpleNamespace(_record_memory_history=lambda *args, **kwargs: None,
                               _dump_snapshot=dump_snapshot)
torch = types.SimpleNamespace(cuda=types.SimpleNamespace(memory=memory))
on_cuda, device, scripts, MiB = True, "cuda", os.environ["SNAPSHOT_FOLDER"], 2**20
nearest = {"make_data": lambda device: (list(range(4096)), None),
           "nearest_distance": lambda points, centres: len(points)}
"""


def test_the_memory_snapshots_size_is_written_in_a_unit_that_fits_it(tmp_path):
    (snapshot,) = lesson_cells("06-vram-and-errors.ipynb", "torch.cuda.memory._dump_snapshot(snapshot)")
    run = run_cells([SMALL_SNAPSHOT, snapshot], tmp_path, env={"SNAPSHOT_FOLDER": str(tmp_path)})
    assert run.returncode == 0, run.failed()
    printed = run.outputs[1]
    assert printed.strip().endswith("snapshot.pickle (39.1 KiB)"), printed
    assert not ZERO_FIGURE.findall(printed)
