"""Lesson 17's GPU branches and failure paths, run on the CPU: the cells a GPU node or a failure would take,
with what they need forced or stood in for.

- the allocator cell, with CUDA faked (tests/support/fake_cuda.py) and the allocator's counters stood in for by a
  count of the bytes of live tensors, prints the memory kept after the forward pass and the step's peak, plain
  and checkpointed, and the checkpointed run keeps less;
- fits.py, the largest-model check, run on a stand-in GPU (:class:`GpuMemory`: a caching allocator's memory, with
  neighbours that hold some of it, and an out-of-memory error at the size chosen, whatever else runs here): each
  try is sized from what the GPU has free when it starts and the cell says so; with so little free that even 0.9
  times the prediction fails, the script reports the error for both sizes instead of crashing; the hidden cell's
  sentence follows every outcome (both as predicted, both fit, none fit); and the lesson runs alone, saying why;
- the notebook's ``outputs`` stops a rank that overruns its time (by its pid), so a hang cannot hang the page, and
  gloo's ranks are shown no GPU;
- the flight-recorder cell on NCCL (forced: two GPUs, the ranks stood in for by processes that print NCCL's lines
  and write a dump file) runs to its end and hands the dump folder to torchfrtrace;
- the CUBLAS_WORKSPACE_CONFIG cell on a GPU prints the last line of the child's error, or says that there was
  none;
- the FSDP2 job's cells on a simulated GPU node (tests/support/gpu_node, with torch's accelerator API answering as
  a CUDA build does): its gloo ranks train, and none of them touches the GPU;
- the MFU cells (the step's FLOPs, the achievable rate of the block's product, the plain and checkpointed steps)
  on a stand-in H100, where every timing waits for the device and the MFU is set against the datasheet's peak; the
  hidden sentences on MFU, on checkpointing's time and on the alpha-beta fit follow every outcome;
- the hang on NCCL, where a barrier is an all-reduce of one value matched by order without a size check: a model
  of that matching over the calls that hang.py's ``step`` makes shows that the rank which skipped the all-reduce
  finishes its step silently while the other waits, and the hang's cells, run with stand-in ranks that behave so,
  say it (and keep what a rank printed right after the line the notebook waited for);
- the FSDP2 script's ``train`` on a rank's GPU (stand-in counters) resets the allocator's peak before its first step
  and reports the maximum after its last, per rank; on gloo's CPU ranks it reports none.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import subprocess
import sys
import time
import types
import weakref
from pathlib import Path

import pytest
import torch

from tests.support.gpu_node import gpu_node_env
from tests.support.lesson_code import ROOT, Glued, code_cell, gluing, lesson, notebook, run, run_cell

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
class GpuMemory:
    """A stand-in for one GPU's memory as PyTorch's caching allocator and CUDA report it, for fits.py run on the CPU
    (:func:`run_fits`): every storage an operation makes takes its bytes from the GPU while it lives, and an
    allocation that would take this process past ``capacity`` less what the neighbours (other programs on the GPU)
    hold raises ``error`` (``torch.OutOfMemoryError``, as the allocator does once it has emptied its cache); a freed
    storage's bytes stay reserved in this process's cache until ``empty_cache`` hands them back; ``mem_get_info``
    answers (free, total): the capacity less what this process has reserved and what the neighbours hold. The
    neighbours hold ``neighbours[n]`` bytes once the process has made n optimizer steps (a step ends fits.py's
    warm-up and each of its tries), the last entry from then on. Nothing depends on what else runs on the machine."""

    def __init__(self, capacity, neighbours=(0,), error=torch.OutOfMemoryError):
        self.capacity, self.neighbours, self.error = capacity, list(neighbours), error
        self.sizes: dict[int, int] = {}  # the live storages: address -> bytes
        self.reserved = 0
        self.steps = 0
        self.readings: list[int] = []

    def live(self) -> int:
        return sum(self.sizes.values())

    def neighbour(self) -> int:
        return self.neighbours[min(self.steps, len(self.neighbours) - 1)]

    def made(self, tensor):
        if not isinstance(tensor, torch.Tensor):
            return
        storage = tensor.untyped_storage()
        address, size = storage.data_ptr(), storage.nbytes()
        if not size or address in self.sizes:  # empty, a view, or an operation in place
            return
        if self.live() + size > self.capacity - self.neighbour():
            free = self.capacity - self.neighbour() - self.live()
            raise self.error(f"CUDA out of memory. Tried to allocate {size} bytes ({free} bytes free)")
        self.sizes[address] = size
        self.reserved = max(self.reserved, self.live())
        weakref.finalize(storage, self.sizes.pop, address, None)

    def mem_get_info(self, device=None):
        free = self.capacity - self.neighbour() - max(self.reserved, self.live())
        self.readings.append(free)
        return free, self.capacity

    def empty_cache(self):
        self.reserved = self.live()


@contextlib.contextmanager
def on_the_gpu(memory):
    """While it lasts: tensors asked for on "cuda" are made on the CPU, each taking its bytes from ``memory``."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class OnTheCpu(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if kwargs.get("device") is not None and torch.device(kwargs["device"]).type == "cuda":
                kwargs["device"] = "cpu"
            return func(*args, **kwargs)

    class Allocating(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for leaf in tree_leaves(out):
                memory.made(leaf)
            if "adam" in str(func):  # the optimizer's step (fused: one operation for every parameter)
                memory.steps += 1
            return out

    with OnTheCpu(), Allocating():
        yield


def run_fits(tmp_path: Path, monkeypatch, memory: GpuMemory, width: int = 256) -> list[dict]:
    """fits.py (the lesson's %%writefile cell) run as ``python fits.py cuda WIDTH 0`` in this process, on the stand-in
    GPU ``memory``: what it printed, one record per try."""
    path = tmp_path / "fits.py"
    path.write_text(cell('%%writefile "{scripts}/fits.py"').split("\n", 1)[1], encoding="utf-8")
    monkeypatch.setattr(torch.cuda, "mem_get_info", memory.mem_get_info)
    monkeypatch.setattr(torch.cuda, "empty_cache", memory.empty_cache)
    monkeypatch.setattr(sys, "argv", [str(path), "cuda", str(width), "0"])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), on_the_gpu(memory):
        runpy.run_path(str(path), run_name="__main__")
    return [json.loads(line) for line in printed.getvalue().splitlines()]


@pytest.mark.parametrize("error", [torch.OutOfMemoryError, MemoryError])
def test_fits_reports_an_out_of_memory_error_for_each_size_that_fails(tmp_path, monkeypatch, error):
    # 64 KiB free: the smallest model it tries, one layer of 256 x 256 (1 MiB with Adam), needs more.
    memory = GpuMemory(64 * 1024, error=error)
    tries = run_fits(tmp_path, monkeypatch, memory)
    assert [t["share"] for t in tries] == [0.9, 1.1], tries
    assert [t["budget"] for t in tries] == memory.readings[-2:], (tries, memory.readings)
    assert all(t["predicted"] == t["budget"] / 16 and t["total"] == 64 * 1024 for t in tries), tries
    assert all(t["parameters"] == 256**2 and t["error"].startswith(f"{error.__name__}: CUDA out of memory")
               for t in tries), tries


def test_fits_tries_fewer_parameters_than_predicted_then_more(tmp_path, monkeypatch):
    # About 4 MiB free (the neighbours hold the rest): 262,144 parameters predicted, four layers of 256 x 256.
    # Rounding both shares to the nearest layer would try four layers twice; the script takes whole layers below
    # 0.9 and above 1.1 times the prediction.
    under, over = run_fits(tmp_path, monkeypatch, GpuMemory(64 * 2**20, neighbours=[60 * 2**20]))
    assert under["parameters"] <= 0.9 * under["predicted"] < 1.1 * over["predicted"] <= over["parameters"]
    assert 0.99 < over["predicted"] / under["predicted"] <= 1


def test_fits_sizes_each_try_from_what_the_gpu_has_free_when_it_starts_and_says_so(tmp_path, monkeypatch):
    """A neighbour (another lesson on the same GPU) holds 40 of the GPU's 80 MiB while fits.py warms up and makes its
    first try, then ends. Each try must be sized from what is free when it starts, with what fits.py's own first try
    left in PyTorch's cache handed back: sized from the first reading, the 1.1 try would fit in the memory the
    neighbour left, and the check would contradict a prediction it never made; sized from a reading with the first
    try's memory still cached, too."""
    mib = 2**20
    memory = GpuMemory(80 * mib, neighbours=[40 * mib, 40 * mib, 0])
    tries = run_fits(tmp_path, monkeypatch, memory)
    first, second = tries
    assert 39 * mib < first["budget"] <= 40 * mib and "error" not in first, tries
    assert 79 * mib < second["budget"] <= 80 * mib, tries  # the neighbour gone, the first try's cache handed back
    assert second["error"].startswith("OutOfMemoryError"), tries
    assert [t["total"] for t in tries] == [80 * mib] * 2
    # The lesson's cell says what each try was sized from: the memory free, of the GPU's total.
    done = types.SimpleNamespace(stdout="".join(json.dumps(t) + "\n" for t in tries))
    namespace = {"device": "cuda:0", "on_gpu": True, "scripts": tmp_path, "sys": sys,
                 "skip_unless": lambda condition, why: condition}
    run("import json, subprocess\n", namespace)
    monkeypatch.setattr(subprocess, "run", lambda *args, **kwargs: done)
    printed = run_cell(cell('scripts / "fits.py", fits_on'), namespace).splitlines()
    assert printed[0].startswith("0.9 x the prediction for 40 MiB free of 80 MiB: "), printed
    assert printed[1].startswith("1.1 x the prediction for 80 MiB free of 80 MiB: "), printed
    assert "OutOfMemoryError" in printed[1], printed
    glued = Glued()
    run(gluing(lesson(LESSON), "fits_story"), {**namespace, "glue": glued})
    assert glued["fits_story"].startswith("Both ran as predicted"), glued


def test_the_lesson_runs_alone_because_fits_takes_most_of_the_gpus_free_memory():
    """make gpu-check runs the lessons side by side on one GPU; fits.py's tries take nearly all of its free memory,
    which another lesson's allocations would then miss (and the reverse): the lesson runs alone, and says why."""
    metadata = notebook(LESSON)["metadata"]["gpukit"]
    assert metadata["run_alone"] is True
    assert metadata["run_alone_why"] == "fits.py takes most of the GPU's free memory"
    assert metadata["gpus"] == 2  # the keys it had are kept


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
def the_plan(monkeypatch, gpus: int) -> dict:
    """The names the lesson's plan cell binds (backend, ranks, the ranks' environment) where the kernel runs on a GPU
    and torch counts ``gpus`` of them."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    namespace = {"torch": torch, "on_gpu": True}
    run_cell(cell('backend = "nccl" if gpus >= 2 else "gloo"'), namespace)
    return {name: value for name, value in namespace.items() if name not in ("torch", "on_gpu", "__builtins__")}


def test_outputs_stops_a_rank_that_overruns_by_its_pid(tmp_path, monkeypatch):
    namespace = {"scripts": tmp_path, **the_plan(monkeypatch, gpus=1)}  # gloo's CPU ranks on a one-GPU node
    run("import os, subprocess, sys, time\nfrom gpukit.topics.distributed import worker_env\n", namespace)
    run(cell("def start_ranks(script, n, **env):"), namespace)
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import os, sys, time\nprint('rank', sys.argv[1], 'GPUs', repr(os.environ.get("
                       "'CUDA_VISIBLE_DEVICES')), flush=True)\ntime.sleep(600)\n")
    started = time.monotonic()
    processes = namespace["start_ranks"](sleeper, 2)
    texts = namespace["outputs"](processes, 3)
    assert time.monotonic() - started < 30
    assert all(p.returncode is not None for p in processes)
    assert all("[stopped by the notebook]" in text for text in texts), texts
    assert all("GPUs ''" in text for text in texts), texts  # gloo's ranks are shown no GPU


# ------------------------------------------------------------------------------------------ NCCL's cells
STAND_IN_RANK = """
import os, sys
rank = int(sys.argv[1])
print(f"vm:1:1 [{rank}] NCCL INFO Channel 00/02 : 0[0] -> 1[1] via P2P/IPC", flush=True)
prefix = os.environ["TORCH_FR_DUMP_TEMP_FILE"]
open(prefix + str(rank), "wb").write(b"not a real dump")
sys.exit(1)
"""


def test_the_flight_recorder_cell_runs_on_nccl(tmp_path, monkeypatch):
    namespace = {"scripts": tmp_path, **the_plan(monkeypatch, gpus=2), "skip_unless": lambda condition, why: condition}
    assert namespace["backend"] == "nccl" and namespace["ranks_env"] == {}  # NCCL's ranks keep their GPUs
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


# ------------------------------------------------------------------------------------------ FSDP2's ranks on a GPU node
# torch's accelerator API as a CUDA build of torch answers it on the GPU node, added to the simulated node's torch.cuda
# (tests/support/gpu_node fakes torch.cuda and NCCL only): torch._C._get_accelerator() is CUDA, the accelerator torch
# was built for, whatever CUDA_VISIBLE_DEVICES hides; torch.accelerator.is_available(), device_count() and
# current_accelerator(check_available=True) follow torch.cuda, which honours CUDA_VISIBLE_DEVICES. What would use the
# GPU (its current stream or device, a synchronisation) is noted in the file GPUKIT_TEST_GPU_TOUCHED names and
# raises, as a tensor on "cuda" does on the simulated node. Python runs it as the sitecustomize after the simulated
# node's (which runs the next one on the path).
GPU_NODE_ACCELERATOR = """
import os
import sys


def _as_on_the_gpu_node(torch):
    cuda = torch.device("cuda")

    def touched(name):
        def call(*args, **kwargs):
            with open(os.environ["GPUKIT_TEST_GPU_TOUCHED"], "a") as log:
                log.write(f"pid {os.getpid()}: torch.accelerator.{name}\\n")
            raise RuntimeError(f"a CPU process used the GPU: torch.accelerator.{name}")
        return call

    def current_accelerator(check_available=False):
        return None if check_available and not torch.cuda.is_available() else cuda

    torch._C._get_accelerator = lambda: cuda
    torch.accelerator.is_available = lambda: torch.cuda.is_available()
    torch.accelerator.device_count = lambda: torch.cuda.device_count()
    torch.accelerator.current_accelerator = current_accelerator
    for name in ("current_stream", "current_device_index", "set_device_index", "synchronize"):
        setattr(torch.accelerator, name, touched(name))


class AfterTorch:
    busy = False

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "torch" or cls.busy:
            return None
        cls.busy = True  # the other finders (the simulated node's among them) look for torch themselves
        try:
            spec = next(filter(None, (finder.find_spec(name, path, target) for finder in sys.meta_path
                                      if finder is not cls and hasattr(finder, "find_spec"))), None)
        finally:
            cls.busy = False
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _as_on_the_gpu_node(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, AfterTorch)
"""


# A rank of the job, started without torchrun (whose rendezvous store would listen on every interface where no
# loopback-only namespace can be made): a plain process, given torchrun's variables, that meets the others through a
# file and runs the script as __main__.
RANK = """
import os, runpy, sys

import torch.distributed as dist

store, script = sys.argv[1], sys.argv[2]
init = dist.init_process_group


def init_process_group(backend=None, **options):  # the rendezvous: a file, not torchrun's store
    options.setdefault("init_method", f"file://{store}")
    options.setdefault("rank", int(os.environ["RANK"]))
    options.setdefault("world_size", int(os.environ["WORLD_SIZE"]))
    return init(backend, **options)


dist.init_process_group = init_process_group
sys.argv = sys.argv[2:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
runpy.run_path(script, run_name="__main__")
"""


def torchrun_on(node_env: dict[str, str], rank_script: Path):
    """A stand-in for gpukit's run_torchrun: ``nproc`` processes of :data:`RANK` in the environment a node gives
    (``node_env``), with what run_torchrun adds to it (worker_env, then the cell's ``env``); each one still running
    after ``timeout`` is stopped by its pid."""
    from gpukit.topics.distributed import DistributedRun, worker_env

    def run_torchrun(script, *args, nproc, timeout=120, threads=1, env=None, isolate=True):
        store = rank_script.with_name(f"store-{time.time_ns()}")
        started = time.perf_counter()
        ranks = [subprocess.Popen([sys.executable, str(rank_script), str(store), str(script), *map(str, args)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env={**os.environ, **node_env, **worker_env(threads), **(env or {}),
                                       "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(nproc)})
                 for rank in range(nproc)]
        outs, errs = {}, {}
        for rank, process in enumerate(ranks):
            try:
                outs[rank], errs[rank] = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                outs[rank], errs[rank] = process.communicate()
        status = next((p.returncode for p in ranks if p.returncode), 0)
        return DistributedRun(status, outs, errs, "", time.perf_counter() - started, "here")

    return run_torchrun


def test_the_fsdp2_job_on_a_gpu_node_keeps_its_gloo_ranks_off_the_gpu(tmp_path, monkeypatch):
    """On a node with one GPU the lesson's FSDP2 job runs its ranks on the CPU, over gloo. There torch still turns to
    the GPU from them unless told otherwise: Adam's step asks the accelerator's current stream whether a CUDA graph is
    being captured (torch/optim/optimizer.py, _accelerator_graph_capture_health_check), DeviceMesh makes a group of
    its own where CUDA is available beside a gloo group (torch/distributed/device_mesh.py, _init_one_process_group),
    and fully_shard without a mesh takes the accelerator (_fsdp_init.py, _init_default_mesh). The lesson's own cells
    (the plan as the node's torch makes it, the job, the losses), the ranks in the node's environment (simulated,
    with torch's accelerator API answering as a CUDA build does): the job must run, and no rank may touch the GPU.
    Two ranks, not the lesson's three: the question is the same, at less cost."""
    import gpukit.topics.distributed

    site, scripts = tmp_path / "accelerator", tmp_path / "scripts"
    site.mkdir()
    scripts.mkdir()
    (site / "sitecustomize.py").write_text(GPU_NODE_ACCELERATOR, encoding="utf-8")
    (scripts / "rank.py").write_text(RANK, encoding="utf-8")
    for name in ("collectives.py", "fsdp_vs_ddp.py"):
        (scripts / name).write_text(cell(f'%%writefile "{{scripts}}/{name}"').split("\n", 1)[1], encoding="utf-8")
    touched = tmp_path / "touched.txt"
    node_env = gpu_node_env({"PYTHONPATH": str(ROOT)}, parts=("torch",), cxx=None)
    node_env.update(PYTHONPATH=node_env["PYTHONPATH"] + os.pathsep + str(site), GPUKIT_TEST_GPU_TOUCHED=str(touched))
    monkeypatch.setattr(gpukit.topics.distributed, "run_torchrun", torchrun_on(node_env, scripts / "rank.py"))
    namespace = {"scripts": scripts, **the_plan(monkeypatch, gpus=1), "ranks": 2}  # the node has one GPU
    assert namespace["backend"] == "gloo"
    try:
        printed = run_cell(cell('run_torchrun(scripts / "fsdp_vs_ddp.py"'), namespace)
    finally:  # what a rank touched, before whatever the job's failure says
        used = touched.read_text() if touched.exists() else ""
        assert not used, f"CPU ranks used the GPU:\n{used}"
    assert printed.startswith("2 processes ran here"), printed
    run_cell(cell("np.testing.assert_allclose(fsdp_losses"), namespace)  # DDP's losses, and FSDP2's


# -------------------------------------------------------------------------------- MFU and checkpointing's time
def test_the_mfu_and_checkpoint_time_cells_run_on_cuda(fake_cuda):
    """The step's FLOPs, the product's achievable rate, the plain and checkpointed steps and the hidden MFU sentence,
    on a stand-in H100 at the CPU's reduced scale: every timing waits for the device, and the MFU is set against the
    datasheet's float32 peak."""
    namespace = {"device": "cuda", "glue": Glued()}
    run(cell("class Block(nn.Module):").replace("(1024, 8192, 8) if on_gpu else ", ""), namespace)
    namespace.update(width=32, tokens=64, depth=2)
    namespace["blocks"] = torch.nn.ModuleList(namespace["Block"](32) for _ in range(2))
    namespace["x"] = torch.randn(64, 32)
    for marker in ("def run_blocks(blocks, x):", "def run_checkpointed(blocks, x):"):
        run(cell(marker), namespace)
    printed = "".join(run_cell(cell(marker), namespace) for marker in (
        "step_flops = 6 * n_params * tokens", "product = benchmark(torch.matmul", "def train_step(forward):"))
    assert "parameters x 64 tokens" in printed and "of the achievable rate" in printed, printed
    assert ("synchronize", "cuda") in fake_cuda.log or any(entry[0] == "synchronize" for entry in fake_cuda.log)
    run(gluing(lesson(LESSON), "mfu_story"), namespace)
    story = namespace["glue"]["mfu_story"]
    assert story.startswith("an MFU of") and "datasheet float32 peak of 67,000 GFLOP/s" in story, story
    printed = run_cell(cell("ckpt_step = benchmark("), namespace)
    assert "x the plain step (predicted 1.33)" in printed
    run(gluing(lesson(LESSON), "ckpt_story"), namespace)
    assert namespace["glue"]["ckpt_story"]


@pytest.mark.parametrize("peak, achievable, words", [
    (None, 1e9, "knows no peak"),
    (types.SimpleNamespace(flops_per_s=5e8), 1e9, "faster than the peak estimated"),
    (types.SimpleNamespace(flops_per_s=2e9), 1e9, "an MFU of 25% against the estimated float32 peak of 2 GFLOP/s"),
])
def test_the_mfu_sentence_follows_every_outcome(monkeypatch, peak, achievable, words):
    from gpukit.core import peaks

    monkeypatch.setattr(peaks, "device_peak", lambda device, dtype, operation: peak)
    glued = Glued()
    namespace = {"glue": glued, "device": "cpu", "step_flops": 1e8, "predicted_step": 0.1,
                 "achievable": achievable, "plain_step": types.SimpleNamespace(median=0.2, flops_per_s=5e8)}
    run(gluing(lesson(LESSON), "mfu_story"), namespace)
    assert words in glued["mfu_story"], glued["mfu_story"]
    assert glued["of_achievable"] == format(100 * 5e8 / achievable, ".0f")


@pytest.mark.parametrize("ratio, words", [(0.5, "faster than the plain step"), (1.0, "no slower"),
                                          (1.1, "less than predicted"), (1.3, "close to the prediction"),
                                          (2.0, "more than one more forward")])
def test_the_checkpoint_time_sentence_follows_every_outcome(ratio, words):
    glued = Glued()
    namespace = {"glue": glued, "plain_step": types.SimpleNamespace(median=0.1),
                 "ckpt_step": types.SimpleNamespace(median=0.1 * ratio)}
    run(gluing(lesson(LESSON), "ckpt_story"), namespace)
    assert words in glued["ckpt_story"]


@pytest.mark.parametrize("times, words", [([1e-4, 3e-4, 2e-3], "Below about"), ([1e-5, 1e-4, 2e-3], "no positive")])
def test_the_latency_sentence_follows_every_fit(times, words):
    import pandas as pd

    glued = Glued()
    namespace = {"glue": glued, "costs": pd.DataFrame({
        "ranks": [2, 2, 2], "op": ["all_reduce"] * 3, "bytes": [2**16, 2**19, 2**22],
        "sent per rank": [2**16, 2**19, 2**22], "seconds": times})}
    run_cell(cell('pair = costs.query("ranks == 2 and op == \'all_reduce\'")'), namespace)
    run(gluing(lesson(LESSON), "latency_story"), namespace)
    assert glued["latency_story"].startswith("The fit") == (words == "no positive")
    assert words in glued["latency_story"]


# ------------------------------------------------------------------------------------------ a hang on NCCL
def hang_script() -> str:
    return cell('%%writefile "{scripts}/hang.py"').split("\n", 1)[1]


def calls_of_the_step(rank: int) -> list[tuple[str, int]]:
    """The collectives hang.py's ``step`` makes on ``rank`` in the job's own group: (operation, values sent)."""
    import ast

    tree = ast.parse(hang_script())
    step = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "step")
    calls: list[tuple[str, int]] = []
    recorder = types.SimpleNamespace(all_reduce=lambda tensor, group=None: calls.append(("all_reduce", tensor.numel())),
                                     barrier=lambda group=None: calls.append(("barrier", 0)))
    namespace = {"rank": rank, "grads": torch.ones(1000), "dist": recorder}
    run(ast.unparse(step), namespace)
    namespace["step"]("the job's group")
    return calls


def matched(calls: dict[int, list[tuple[str, int]]], *, barrier_is_all_reduce: bool, compare_sizes: bool):
    """Which ranks finish their step, as a backend that matches collectives by their order would have it: the i-th
    collective of every rank is one collective. NCCL's barrier is an all-reduce of one value, and NCCL compares no
    sizes; a rank finishes when each of its calls found a partner on every rank (and, where compared, the same)."""
    as_sent = {rank: [("all_reduce", 1) if barrier_is_all_reduce and op == "barrier" else (op, n) for op, n in made]
               for rank, made in calls.items()}
    finished = set()
    for rank, made in as_sent.items():
        ok = True
        for i, (op, n) in enumerate(made):
            partners = [others[i] if i < len(others) else None for others in as_sent.values()]
            if any(p is None or p[0] != op or (compare_sizes and p[1] != n) for p in partners):
                ok = False
                break
        if ok:
            finished.add(rank)
    return finished


def test_on_nccl_the_rank_that_skips_the_all_reduce_may_pass_silently():
    """A barrier on NCCL is an all-reduce of one value, matched by order without a size check: rank 1's barrier
    partners rank 0's all-reduce, rank 1 finishes its step, and rank 0 waits in its barrier for nobody. On gloo (and
    in the checked group) the operations differ, and neither rank finishes."""
    calls = {rank: calls_of_the_step(rank) for rank in (0, 1)}
    assert calls == {0: [("all_reduce", 1000), ("barrier", 0)], 1: [("barrier", 0)]}
    assert matched(calls, barrier_is_all_reduce=True, compare_sizes=False) == {1}
    assert matched(calls, barrier_is_all_reduce=True, compare_sizes=True) == set()
    assert matched(calls, barrier_is_all_reduce=False, compare_sizes=False) == set()


STAND_IN_NCCL_HANG = """
import sys, time
rank = int(sys.argv[1])
print(f"rank {rank}, checked: Detected mismatch between collectives on ranks.", flush=True)
print(f"rank {rank} pid 1: in the step", flush=True)
if rank == 1:  # its barrier was taken as the partner of rank 0's all-reduce
    print("rank 1: done", flush=True)
    sys.exit(0)
time.sleep(0.5)
print('  File "hang.py", line 25 in step', flush=True)
print("RuntimeError: Watchdog caught collective operation timeout", flush=True)
sys.exit(1)
"""


def test_the_hang_cells_say_when_one_rank_passed_silently_as_on_nccl(tmp_path, monkeypatch):
    """The hang's cells with ranks that behave as NCCL's may (the model above): rank 1 finishes, rank 0 times out.
    The hidden sentence says so instead of 'Both ranks ended with an error'."""
    namespace = {"scripts": tmp_path, **the_plan(monkeypatch, gpus=2), "glue": Glued()}
    run("import os, re, subprocess, sys, textwrap, time\nfrom gpukit.topics.distributed import worker_env\n",
        namespace)
    run(cell("def start_ranks(script, n, **env):"), namespace)
    (tmp_path / "hang.py").write_text(STAND_IN_NCCL_HANG + "\n" * 20)
    printed = run_cell(cell('hung = start_ranks(scripts / "hang.py", 2)'), namespace)
    assert printed.count(", checked:") == 2, printed
    assert run_cell(cell("for line in reached:"), namespace).count(": in the step") == 2
    printed = run_cell(cell("texts = outputs(hung, 60)"), namespace)
    assert "rank 0 waited at line 25" in printed, printed
    run(gluing(lesson(LESSON), "hang_ended"), namespace)
    assert namespace["glue"]["hang_ended"].startswith("Rank 1 finished its step as if nothing were wrong, while "
                                                      "rank 0 ended with an error")


# -------------------------------------------------------------------------------- the allocator's peak per rank
def test_the_fsdp2_script_reports_each_ranks_allocator_peak_on_cuda(tmp_path, monkeypatch):
    """``train`` on a rank's GPU (a stand-in: torch.cuda's peak counters, in a one-process gloo group) resets the
    allocator's peak before the first step and reports its maximum after training; on the CPU it reports none."""
    from gpukit.exercises.training_at_scale import _process_group

    script = script_module(tmp_path, '%%writefile "{scripts}/fsdp_vs_ddp.py"', "fsdp_module")
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(f"synchronize {device}"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: calls.append(f"reset {device}"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: calls.append(f"peak {device}") or 4096)
    real_step = torch.optim.Adam.step

    def step(self, *args, **kwargs):
        calls.append("step")
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", step)
    x = torch.randn(script.TOKENS, script.WIDTH)
    with _process_group("cpu"):
        on_gpu = script.train(script.make_model("cpu"), x, torch.device("cuda", 1))
        on_cpu = script.train(script.make_model("cpu"), x, torch.device("cpu"))
    assert on_gpu["peak bytes"] == 4096 and on_cpu["peak bytes"] is None
    first_step = calls.index("step")
    assert calls[:first_step] == ["synchronize cuda:1", "reset cuda:1"], calls
    assert calls.count("peak cuda:1") == 1 and calls.index("peak cuda:1") == first_step + script.STEPS, calls
    assert calls[first_step + script.STEPS + 1:] == ["step"] * script.STEPS  # the CPU's: no counter at all
    assert json.dumps(on_gpu)  # printed as JSON by the rank
