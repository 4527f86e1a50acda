"""Lesson 17's GPU branches and failure paths, run on the CPU: the cells a GPU node or a failure would take,
with what they need forced or stood in for.

- the allocator cell, with CUDA faked (tests/support/fake_cuda.py) and the allocator's counters stood in for by a
  count of the bytes of live tensors, prints the memory kept after the forward pass and the step's peak, plain
  and checkpointed, and the checkpointed run keeps less;
- fits.py, the largest-model check, with a budget so small that even 0.9 times the prediction fails: the
  script reports the error for both sizes instead of crashing, and the hidden cell's sentence follows every
  outcome (both as predicted, both fit, none fit);
- the notebook's ``outputs`` stops a rank that overruns its time (by its pid), so a hang cannot hang the page;
- the flight-recorder cell on NCCL (forced: ``backend = "nccl"``, the ranks stood in for by processes that print
  NCCL's lines and write a dump file) runs to its end and hands the dump folder to torchfrtrace;
- the CUBLAS_WORKSPACE_CONFIG cell on a GPU prints the last line of the child's error, or says that there was
  none.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import weakref
from pathlib import Path

import pytest
import torch

from tests.support.lesson_code import Glued, code_cell, gluing, lesson, run, run_cell

LESSON = "17-training-at-scale"


def cell(contains: str) -> str:
    return code_cell(LESSON, contains)


# ------------------------------------------------------------------------------------------ the allocator cell
class LiveBytes:
    """A stand-in for the caching allocator's counters: the bytes of the tensors made since it started that are
    still alive (a tensor's memory is freed when the tensor is), and their peak since the last reset."""

    def __init__(self):
        self.live = 0
        self.peak = 0

    def made(self, tensor):
        if isinstance(tensor, torch.Tensor) and tensor.untyped_storage().nbytes():
            size = tensor.untyped_storage().nbytes()
            self.live += size
            self.peak = max(self.peak, self.live)
            weakref.finalize(tensor.untyped_storage(), self.freed, size)

    def freed(self, size):
        self.live -= size

    def reset(self):
        self.peak = self.live


def watching(counter):
    """A dispatch mode that tells ``counter`` of every tensor an operation makes."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for leaf in tree_leaves(out):
                counter.made(leaf)
            return out

    return Watch()


def test_the_allocator_cell_measures_plain_and_checkpointed_steps_on_cuda(fake_cuda, monkeypatch):
    namespace = {"device": "cuda"}
    run(cell("class Block(nn.Module):").replace("(1024, 8192, 8) if on_gpu else ", ""), namespace)
    # The GPU sizes would take long here: the same cell at the CPU's sizes, on_gpu forced true.
    namespace.update(width=64, tokens=128, depth=4)
    namespace["blocks"] = torch.nn.ModuleList(namespace["Block"](64) for _ in range(4))
    namespace["x"] = torch.randn(128, 64)
    run(cell("def run_blocks(blocks, x):"), namespace)
    run(cell("def run_checkpointed(blocks, x):"), namespace)
    counter = LiveBytes()
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: counter.live)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: counter.peak)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: counter.reset())
    namespace["on_gpu"] = True
    code = cell("torch.cuda.reset_peak_memory_stats()")
    with watching(counter):
        printed = run_cell(code, namespace)
    kept = {line.split(":")[0].strip(): float(line.split("forward pass")[1].split("MiB")[0])
            for line in printed.splitlines()}
    assert set(kept) == {"plain", "checkpointed"}, printed
    assert 0 < kept["checkpointed"] < kept["plain"], printed
    assert "peak of the step" in printed


# ------------------------------------------------------------------------------------------ the largest model
def fits_script(tmp_path: Path) -> Path:
    text = cell('%%writefile "{scripts}/fits.py"')
    path = tmp_path / "fits.py"
    path.write_text(text.split("\n", 1)[1], encoding="utf-8")
    return path


# One child Python runs fits.py twice, as __main__ each time (each run sets RLIMIT_DATA from the data segment it
# finds, so the second run's limit is its own): one import of torch for both tests. The 64 KiB run goes first, while
# the segment holds no freed memory that the allocator could hand out again under the cap.
FITS_TWICE = """
import runpy, sys
fits, budgets = sys.argv[1], sys.argv[2:]
for budget in budgets:
    sys.argv = [fits, "cpu", "256", budget]
    runpy.run_path(fits, run_name="__main__")
    print("END", flush=True)
"""


@pytest.fixture(scope="module")
def fits_runs(tmp_path_factory):
    """What fits.py printed, one list of records per budget: 64 KiB, then 4 MiB."""
    script = fits_script(tmp_path_factory.mktemp("fits"))
    run = subprocess.run([sys.executable, "-c", FITS_TWICE, script, str(64 * 1024), str(4 * 2**20)],
                         capture_output=True, text=True, timeout=120, check=True)
    runs = [[json.loads(line) for line in part.strip().splitlines()] for part in run.stdout.split("END")[:-1]]
    assert len(runs) == 2, run.stdout
    return runs


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CPU check caps RLIMIT_DATA, Linux only")
def test_fits_reports_an_out_of_memory_error_for_each_size_that_fails(fits_runs):
    # A budget of 64 KiB: the smallest model it tries, one layer of 256 x 256 (1 MiB with Adam), needs more.
    budget, *tries = fits_runs[0]
    assert budget["predicted"] == 64 * 1024 / 16
    assert [t["share"] for t in tries] == [0.9, 1.1]
    assert all(t["parameters"] == 256**2 and "Error" in t["error"] for t in tries), tries


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CPU check caps RLIMIT_DATA, Linux only")
def test_fits_tries_fewer_parameters_than_predicted_then_more(fits_runs):
    # 4 MiB: 262,144 parameters predicted, four layers of 256 x 256. Rounding both shares to the nearest layer
    # would try four layers twice; the script takes whole layers below 0.9 and above 1.1 times the prediction.
    budget, under, over = fits_runs[1]
    assert budget["predicted"] == 4 * 2**20 / 16
    assert under["parameters"] <= 0.9 * budget["predicted"] < 1.1 * budget["predicted"] <= over["parameters"]


@pytest.mark.parametrize("tries, words", [
    ([{"share": 0.9}, {"share": 1.1, "error": "x"}], "Both ran as predicted"),
    ([{"share": 0.9}, {"share": 1.1}], "and so did 1.1 times it"),
    ([{"share": 0.9, "error": "x"}, {"share": 1.1, "error": "x"}], "Even 0.9 times"),
    ([], "did not run here"),
])
def test_the_sentence_on_the_largest_model_follows_every_outcome(tries, words):
    glued = Glued()
    namespace = {"on_gpu": True, "sys": sys, "tries": tries, "glue": glued}
    run(gluing(lesson(LESSON), "fits_story"), namespace)
    assert words in glued["fits_story"]
    assert glued["fits_where"] == "on this GPU"


# ------------------------------------------------------------------------------------------ stopping a hang
def test_outputs_stops_a_rank_that_overruns_by_its_pid(tmp_path):
    namespace = {"scripts": tmp_path, "backend": "gloo"}
    run("import os, subprocess, sys, time\nfrom gpukit.topics.distributed import worker_env\n", namespace)
    run(cell("def start_ranks(script, n, **env):"), namespace)
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import sys, time\nprint('rank', sys.argv[1], flush=True)\ntime.sleep(600)\n")
    started = time.monotonic()
    processes = namespace["start_ranks"](sleeper, 2)
    texts = namespace["outputs"](processes, 3)
    assert time.monotonic() - started < 30
    assert all(p.returncode is not None for p in processes)
    assert all("[stopped by the notebook]" in text for text in texts), texts


# ------------------------------------------------------------------------------------------ NCCL's cells
STAND_IN_RANK = """
import os, sys
rank = int(sys.argv[1])
print(f"vm:1:1 [{rank}] NCCL INFO Channel 00/02 : 0[0] -> 1[1] via P2P/IPC", flush=True)
prefix = os.environ["TORCH_FR_DUMP_TEMP_FILE"]
open(prefix + str(rank), "wb").write(b"not a real dump")
sys.exit(1)
"""


def test_the_flight_recorder_cell_runs_on_nccl(tmp_path):
    namespace = {"scripts": tmp_path, "backend": "nccl", "skip_unless": lambda condition, why: condition}
    run("import os, subprocess, sys, textwrap, time\nfrom gpukit.topics.distributed import worker_env\n", namespace)
    run(cell("def start_ranks(script, n, **env):"), namespace)
    (tmp_path / "hang.py").write_text(STAND_IN_RANK)  # the ranks: NCCL's line, a dump file, a failure
    printed = run_cell(cell("TORCH_NCCL_TRACE_BUFFER_SIZE"), namespace)
    assert "NCCL INFO Channel 00/02" in printed
    assert "['rank_0', 'rank_1']" in printed
    # torchfrtrace ran on that folder: whatever it made of the stand-in's files, it said something.
    assert printed.strip().splitlines()[-1], printed


def test_the_cublas_cell_prints_the_childs_last_error_line(tmp_path):
    namespace = {"scripts": tmp_path, "device": "cuda", "on_gpu": True,
                 "skip_unless": lambda condition, why: condition}
    run("import os, subprocess, sys, textwrap\n", namespace)
    (tmp_path / "repro.py").write_text("raise RuntimeError('Deterministic behavior was enabled ... "
                                       "CUBLAS_WORKSPACE_CONFIG=:4096:8')\n")
    printed = run_cell(cell("unset = {k: v"), namespace)
    assert printed.startswith("RuntimeError: Deterministic behavior") and "CUBLAS_WORKSPACE_CONFIG" in printed
    (tmp_path / "repro.py").write_text("print('fine')\n")
    assert run_cell(cell("unset = {k: v"), namespace).startswith("no error (exit status 0)")


# ------------------------------------------------------------------------------------------ made on the device
def script_module(tmp_path: Path, marker: str, name: str):
    """One of the lesson's scripts (its %%writefile cell), loaded as a module: its __main__ part does not run."""
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(cell(marker).split("\n", 1)[1], encoding="utf-8")
    (tmp_path / "collectives.py").write_text(cell('%%writefile "{scripts}/collectives.py"').split("\n", 1)[1],
                                             encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(tmp_path))
    return module


def test_fits_makes_its_layers_on_the_device(tmp_path, monkeypatch):
    """On a GPU, 5 billion parameters made on the host first would take minutes and 20 GB of host memory: the
    layers must be made where they train. The meta device shows where each weight was made."""
    fits = script_module(tmp_path, '%%writefile "{scripts}/fits.py"', "fits_module")
    made_on = []
    original = torch.nn.Linear.reset_parameters

    def recording(self):
        made_on.append(self.weight.device.type)
        return original(self)

    monkeypatch.setattr(torch.nn.Linear, "reset_parameters", recording)
    with pytest.raises(Exception):  # noqa: B017 - a step on the meta device fails somewhere; where does not matter
        fits.one_step(2, 8, torch.device("meta"))
    assert made_on == ["meta", "meta"]


def test_fsdp_shards_on_the_ranks_device_where_the_machine_has_a_gpu(tmp_path, monkeypatch):
    """On a machine with one GPU the lesson runs its FSDP2 job in CPU processes over gloo; fully_shard without a
    mesh takes the machine's accelerator (torch._C._get_accelerator) and moves the model there. The script's
    sharded_model must keep it on the ranks' own device: here the accelerator says CUDA, on a CPU-only torch."""
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    from gpukit.exercises.training_at_scale import _process_group

    script = script_module(tmp_path, '%%writefile "{scripts}/fsdp_vs_ddp.py"', "fsdp_module")
    monkeypatch.setattr(torch._C, "_get_accelerator", lambda: torch.device("cuda"))
    with _process_group("cpu"):
        assert dist.get_world_size() == 1
        model = script.sharded_model(torch.device("cpu"))
        params = list(model.parameters())
        assert all(isinstance(p, DTensor) and p.device.type == "cpu" for p in params)
        assert model(torch.randn(4, script.WIDTH)).device.type == "cpu"
