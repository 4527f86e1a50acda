"""Chapter 10, multi-GPU and distributed: what its exercises expect, and how a wrong answer is told apart.

Two exercises run the learner's code in several processes, started with torchrun through
:func:`gpukit.topics.distributed.run_torchrun` as the lesson starts its own scripts (rendezvous on 127.0.0.1, a
loopback-only
network namespace where Linux allows one, a timeout that stops every process):

- ``ex-dist-allreduce-by-hand``: the learner's function (its source, read with :mod:`inspect`) goes into a worker
  script that runs it on every rank of a group of :data:`HAND_WORLD_SIZE` processes (NCCL on one GPU per process
  where there are enough CUDA GPUs, else gloo on CPU processes) and reports what each rank's tensor holds, next to
  what ``dist.all_reduce`` gives. Every send and receive refuses a tensor that is not where ``t`` is, or that a
  factory made without ``device=`` (and nothing moved since): such a buffer is on the CPU, where ``t`` is on CPU
  ranks by chance, and NCCL refuses it on GPU ranks;
- ``ex-dist-ddp-script``: the learner's script runs on :data:`DDP_WORLD_SIZE` CPU processes over gloo, and rank 0's
  parameter checksum is compared with one process trained on the whole data set with batches of N x BATCH, which
  is what DDP over N ranks with a DistributedSampler computes. The classic mistakes give other checksums that the
  check computes too (no DDP, the same shuffle every epoch, every rank on all the data), so it can name them.

``ex-dist-predict-ring`` asks for a prediction instead: ``predicted_ms(peak_flops, bandwidth)`` of one rank's part
of the lesson's ring all-reduce (the bytes it sends and receives, the additions of its reduce-scatter), checked by
:mod:`._predicting` on two made-up devices and on the device the ring ran on.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

from gpukit.base.paths import state_dir
from gpukit.topics.distributed import DistributedRun, DistributedTimeout, plan_processes, run_torchrun

from ._predicting import Work, function_exercise
from .checking import Exercise, register, script_text

HAND_WORLD_SIZE = 3  # three ranks: a function that only works with two (rank 0 and "the other") is caught
DDP_WORLD_SIZE = 2
RUN_TIMEOUT_S = 90  # the whole torchrun run, start-up included
GROUP_TIMEOUT_S = 20  # a rank that waits this long for a message gives up (a send without its recv)
# train_one.py of the lesson, which the learner turns into a DDP script: its data, model and training loop.
DDP_SETUP = {"samples": 96, "features": 8, "hidden": 16, "epochs": 3, "batch": 8, "lr": 0.1}
COLLECTIVES = {"all_reduce", "reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
               "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather", "scatter"}


def _script_beside_the_lesson(text: str, prefix: str) -> Path:
    """Write ``text`` to a new ``<repo>/_build/cache/distributed/<prefix>_<random>.py``: in the folder where the
    lesson writes its scripts (so that a learner's script can import train_one), under a name no other check has.
    Two checks of the same text can run at once (a lesson's kernel beside the tests, or two test processes), and
    each deletes its script when its run ends: a name made from the text alone let the first to finish delete
    the other's script before torchrun had opened it."""
    descriptor, name = tempfile.mkstemp(prefix=f"{prefix}_", suffix=".py", dir=state_dir("distributed"))
    with os.fdopen(descriptor, "w", encoding="utf-8") as script:
        script.write(text)
    return Path(name)


def _python_error(run, ranks=None) -> str | None:
    """The exception line of the first of ``ranks`` (default: all) that raised one (``rank 1: NameError: ...``)."""
    for rank in sorted(run.stderr if ranks is None else ranks):
        # torch prefixes a rank's traceback lines with "[rank1]: ".
        found = re.findall(r"^(?:\[rank\d+\]:)?\s*(\w+(?:\.\w+)*(?:Error|Exception|Exit)\b.*)$",
                           run.stderr.get(rank, ""), re.M)
        if found:
            return f"rank {rank}: {found[-1].strip()[:300]}"
    return None


def _crashed(run) -> bool:
    """The first rank to fail raised nothing and was ended by a signal (torchrun gives minus its number): a crash,
    such as the one PyTorch can have while a process shuts down, not an error in the script's code."""
    cause = run.first_failure()
    return cause is not None and (cause[1] or 0) < 0 and _python_error(run, [cause[0]]) is None


def _first_error(run) -> str:
    """The first rank to fail: its exception line, else torchrun's account of it (exit code or signal) and the
    last line it wrote. Without torchrun's account, the first exception of any rank, else the launcher's line."""
    cause = run.first_failure()
    if cause is not None:
        rank, _, account = cause
        error = _python_error(run, [rank])
        if error:
            return error
        last = run.stderr.get(rank, "").strip().splitlines()[-1:]
        return account + (f"; its last line: {last[0][:200]}" if last else "")
    error = _python_error(run)
    if error:
        return error
    tail = run.launcher_output.strip().splitlines()[-1:] or [f"exit status {run.returncode}"]
    return tail[0][:300]


def _ran(script: Path, *args, nproc: int, finished: Callable[[DistributedRun], bool]):
    """(the run, whether it counts, None), or (None, False, what went wrong) when the processes had to be stopped.

    A run counts where every process succeeded, or where one crashed (:func:`_crashed`) after ``finished(run)``
    (its output holds the script's whole result): that is a crash in shutting down (PyTorch's gloo can end a rank
    with "terminate called without an active exception" as it exits), which changes no result. A crash before
    that runs the script once more: a learner's script is judged by what it does, and a crash that comes again is
    reported as it came."""
    try:
        for attempt in (1, 2):
            run = run_torchrun(script, *args, nproc=nproc, timeout=RUN_TIMEOUT_S)
            crashed = _crashed(run)
            whole = crashed and finished(run)
            if not crashed or whole or attempt == 2:
                return run, run.ok or whole, None
    except DistributedTimeout:
        return None, False, (f"the {nproc} processes did not finish within {RUN_TIMEOUT_S} s and were stopped: a "
                             "rank probably waits for a message that no rank sends (every send needs a matching "
                             "recv on the other rank, and two ranks that both receive first wait for each other).")


# ------------------------------------------------------------------------------------------ all-reduce by hand
_HAND_WORKER = '''\
"""The check of ex-dist-allreduce-by-hand: runs the learner's function on every rank."""
import datetime
import json
import os
import sys
import weakref

import torch
import torch.distributed as dist
from torch.overrides import TorchFunctionMode

FACTORIES = {{"empty", "zeros", "ones", "full", "rand", "randn", "randint", "arange", "linspace", "eye", "tensor"}}

{source}

if __name__ == "__main__":
    backend = sys.argv[1]
    rank = int(os.environ["RANK"])
    on = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if backend == "nccl" else torch.device("cpu")
    if on.type == "cuda":
        torch.cuda.set_device(on)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds={timeout}))
    t = torch.arange(1.0, 6.0, device=on) * (rank + 1)  # whole numbers: sums in any order are exact
    own = t.clone()
    reference = t.clone()
    dist.all_reduce(reference)
    # A tensor a factory made without device= (and nothing moved since) is on the CPU: where t is on CPU ranks, by
    # chance, but not on GPU ranks, where NCCL refuses it. Every send and receive refuses it at once, on any rank,
    # rather than leaving the other ranks to wait for it.
    made_without_device = {{}}

    class Factories(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {{}}
            out = func(*args, **kwargs)
            short = getattr(func, "__name__", "")
            if short in FACTORIES and "device" not in kwargs and torch.is_tensor(out):
                made_without_device[id(out)] = weakref.ref(out)
            elif short in ("to", "cuda") and torch.is_tensor(out):
                made_without_device.pop(id(out), None)
            return out

    def where_t_is(send_or_recv):
        def checked(tensor, *args, **kwargs):
            made = made_without_device.get(id(tensor))
            if tensor.device != t.device or (made is not None and made() is tensor):
                raise RuntimeError(f"dist.{{send_or_recv.__name__}} was given a tensor on {{tensor.device.type}} "
                                   f"(t is on {{t.device.type}}): made without device=")
            return send_or_recv(tensor, *args, **kwargs)
        return checked

    for message in ("send", "recv", "isend", "irecv"):
        setattr(dist, message, where_t_is(getattr(dist, message)))
    with Factories():
        returned = {name}(t)
    new = torch.is_tensor(returned) and returned.data_ptr() != t.data_ptr()
    print(json.dumps({{"t": t.tolist(), "own": own.tolist(), "reference": reference.tolist(),
                      "returned a new tensor": bool(new), "device": t.device.type}}), flush=True)
    dist.destroy_process_group()
'''
_HAND_RUNS: dict[str, list[dict]] = {}


def _function_source(answer) -> tuple[str | None, str | None]:
    if inspect.isfunction(answer) and answer.__name__ == "<lambda>":
        return None, "that is a lambda: write the function with def, so that the check can read its source."
    if not inspect.isfunction(answer):
        return None, (f"expected a function written with def, such as def all_reduce_by_hand(t): ..., got "
                      f"{type(answer).__name__}: pass the function itself, not its result.")
    if len(inspect.signature(answer).parameters) != 1:
        return None, "the function takes one argument, the tensor t, and changes it in place."
    try:
        source = textwrap.dedent(inspect.getsource(answer))
    except (OSError, TypeError):
        return None, "the check cannot read your function's source: define it with def in a notebook cell."
    return source, None


def _hand_records(source: str, name: str) -> tuple[list[dict] | None, str | None]:
    if source in _HAND_RUNS:
        return _HAND_RUNS[source], None

    worker = _HAND_WORKER.format(source=source, name=name, timeout=GROUP_TIMEOUT_S)
    script = _script_beside_the_lesson(worker, "check_all_reduce")
    plan = plan_processes(HAND_WORLD_SIZE)

    def every_rank_reported(run) -> bool:
        return len(run.records()) == plan.world_size

    try:
        run, counts, stopped = _ran(script, plan.backend, nproc=plan.world_size, finished=every_rank_reported)
    finally:
        script.unlink(missing_ok=True)
    if stopped:
        return None, stopped
    if not counts:
        error = _first_error(run)
        why = f"your function failed in the processes ({error})"
        if "NameError" in error:
            why += (": the check runs the function alone in a script that imports torch and torch.distributed as "
                    "dist, so define every other name it uses inside it.")
        elif "made without device=" in error:
            why += (": a tensor made without device= is on the CPU, not on the rank's GPU where t is (on CPU ranks "
                    "it is where t is by chance, which the check does not count on). Make each buffer where t is "
                    "(device=t.device)")
        elif "imeout" in error or "timed out" in error:
            why += (": a rank waited for a message that no rank sent. Every send needs a matching recv on the "
                    "other rank.")
        return None, why + ("" if why.endswith(".") else ".")
    records = run.records()
    if len(records) != plan.world_size:
        return None, f"{len(records)} of the {plan.world_size} ranks reported back: do not end the processes."
    _HAND_RUNS[source] = records
    return records, None


def _all_reduces_by_hand(answer) -> str | None:
    """What is wrong with the learner's all-reduce from sends and receives, run on HAND_WORLD_SIZE ranks."""
    source, wrong = _function_source(answer)
    if wrong:
        return wrong
    called = _calls(ast.parse(source))
    if called & COLLECTIVES:
        return (f"your function calls {', '.join(sorted(called & COLLECTIVES))}: build the all-reduce from "
                "point-to-point messages (dist.send and dist.recv, or isend and irecv) alone.")
    records, wrong = _hand_records(source, answer.__name__)
    if wrong:
        return wrong
    bad = [r for r in records if r["t"] != r["reference"]]
    if not bad:
        return None
    ranks = ", ".join(str(r["rank"]) for r in bad)
    n = len(records)
    if all(r["t"] == [v / n for v in r["reference"]] for r in records):
        return ("every rank holds the mean: all_reduce's default operation is the sum (DDP divides the sum by the "
                "world size itself).")
    if any(r["returned a new tensor"] and r["t"] == r["own"] for r in bad):
        return (f"t is unchanged on rank(s) {ranks}, and your function returned a new tensor: all_reduce works in "
                "place, so put the sum into t itself (t += incoming, t.copy_(total)); `t = t + incoming` only "
                "rebinds the name.")
    zero = records[0]
    if zero["t"] == [total - mine for total, mine in zip(zero["reference"], zero["own"], strict=True)]:
        return "rank 0's result leaves out rank 0's own tensor: add what arrives to t instead of replacing it."
    if zero["t"] == zero["reference"] and all(r["t"] == r["own"] for r in bad):
        return (f"rank 0 holds the sum, but rank(s) {ranks} kept their own tensors: send the sum back from rank 0 "
                "to every other rank, and receive it into t there.")
    return f"on rank(s) {ranks}, t differs from what dist.all_reduce leaves there (the sum over all ranks)."


def _hand_result(answer):
    import torch

    source, _ = _function_source(answer)
    return torch.tensor(_HAND_RUNS[source][0]["t"], dtype=torch.float32)


def _hand_expected():
    """What every rank holds after all_reduce of arange(1, 6) * (rank + 1) over HAND_WORLD_SIZE ranks."""
    import torch

    return torch.arange(1.0, 6.0) * sum(rank + 1 for rank in range(HAND_WORLD_SIZE))


# ------------------------------------------------------------------------------------------ the DDP script
def ddp_dataset():
    """train_one.py's data: ``samples`` rows of ``features`` standard-normal values and a target."""
    import torch

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(DDP_SETUP["samples"], DDP_SETUP["features"], generator=gen)
    return x, torch.sin(x.sum(dim=1, keepdim=True))


def ddp_model():
    """train_one.py's model, from the same seed on every rank."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(DDP_SETUP["features"], DDP_SETUP["hidden"]), nn.Tanh(),
                         nn.Linear(DDP_SETUP["hidden"], 1))


def _checksum_after(order, batch: int, rank: int | None = None) -> float:
    """train_one.py's loop (SGD, mean-squared error) in one process, on the samples ``order(epoch)`` lists (the part
    of ``rank`` only, as a DistributedSampler deals them, if given), in batches of ``batch``: the sum of the
    parameters afterwards."""
    import torch
    from torch import nn

    x, y = ddp_dataset()
    model = ddp_model()
    optimiser = torch.optim.SGD(model.parameters(), lr=DDP_SETUP["lr"])
    for epoch in range(DDP_SETUP["epochs"]):
        order_now = order(epoch)
        if rank is not None:
            order_now = order_now[rank::DDP_WORLD_SIZE]
        for start in range(0, len(order_now), batch):
            rows = order_now[start:start + batch]
            optimiser.zero_grad()
            nn.functional.mse_loss(model(x[rows]), y[rows]).backward()
            optimiser.step()
    return sum(p.detach().double().sum().item() for p in model.parameters())


def _shuffled(epoch: int):
    """DistributedSampler's order in ``epoch``: a permutation from its seed (0) plus the epoch set_epoch gave."""
    import torch

    return torch.randperm(DDP_SETUP["samples"], generator=torch.Generator().manual_seed(epoch))


def _in_order(epoch: int):
    import torch

    return torch.arange(DDP_SETUP["samples"])


def _ddp_expected() -> float:
    """Rank 0's checksum after DDP on DDP_WORLD_SIZE ranks, each with its DistributedSampler's part (shuffled anew
    every epoch) in batches of BATCH: one process on the whole data, batches of DDP_WORLD_SIZE x BATCH."""
    return _checksum_after(_shuffled, DDP_WORLD_SIZE * DDP_SETUP["batch"])


# The classic mistakes and rank 0's checksum after each: (message, how it trains).
_DDP_MISTAKES = (
    ("the ranks' parts are not shuffled: train_one.py shuffles, and so does DistributedSampler unless told "
     "shuffle=False: keep its default.", lambda: _checksum_after(_in_order, DDP_WORLD_SIZE * DDP_SETUP["batch"])),
    ("every epoch the ranks see their samples in the same order: call sampler.set_epoch(epoch) at the start of each "
     "epoch, from which DistributedSampler seeds its shuffle.",
     lambda: _checksum_after(lambda epoch: _shuffled(0), DDP_WORLD_SIZE * DDP_SETUP["batch"])),
    ("rank 0's model learned from rank 0's part of the data alone: wrap the model in DistributedDataParallel, so "
     "that backward() averages the gradients over the ranks.",
     lambda: _checksum_after(_shuffled, DDP_SETUP["batch"], rank=0)),
    ("every rank trained on the whole data set, so the ranks computed the same gradients: give the DataLoader a "
     "DistributedSampler(dataset), which deals each rank its own part.",
     lambda: _checksum_after(_in_order, DDP_SETUP["batch"])),
)
_DDP_RUNS: dict[str, float] = {}
_DDP_SCRIPT = "the script as text (a str)"  # what the check asks for, in the words of script_text's message


def _calls(tree) -> set[str]:
    return {node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            for node in ast.walk(tree) if isinstance(node, ast.Call)}


def _rank_0_checksums(run: DistributedRun) -> list[dict]:
    """The lines ``{"checksum": ...}`` that rank 0 printed (the script should print one, after training)."""
    return [record for record in run.records() if record["rank"] == 0 and "checksum" in record]


def _checksum_printed(run: DistributedRun) -> bool:
    """Rank 0 printed its checksum: DDP's last all-reduce, which every rank joins, came before it."""
    return bool(_rank_0_checksums(run))


def _ddp_script_runs_as_ddp(answer) -> str | None:
    """What is wrong with the learner's DDP version of train_one.py, run with torchrun on DDP_WORLD_SIZE ranks."""
    import math

    text, path, wrong = script_text(answer, _DDP_SCRIPT)
    if wrong:
        return wrong
    try:
        tree = ast.parse(text)
    except SyntaxError as error:
        return f"the script is not valid Python: line {error.lineno}: {error.msg}."
    if text not in _DDP_RUNS:
        script = path or _script_beside_the_lesson(text, "check_ddp")
        try:
            run, counts, stopped = _ran(script, nproc=DDP_WORLD_SIZE, finished=_checksum_printed)
        finally:
            if path is None:
                script.unlink(missing_ok=True)
        if stopped:
            return stopped
        if not counts:
            error = _first_error(run)
            hint = "."
            if "not been initialized" in error:
                hint = ": call dist.init_process_group(\"gloo\") before anything else uses the group."
            elif "No module named 'train_one'" in error:
                hint = (": the script imports train_one, which lies in the lesson's scripts folder: write your "
                        "script there, or pass its text.")
            return f"the script failed under torchrun ({error}){hint}"
        printed = [rank for rank in sorted(run.stdout) if rank != 0 and run.stdout[rank].strip()]
        if printed:
            return (f"rank(s) {', '.join(map(str, printed))} printed too: with N processes every print comes N "
                    "times, so print from rank 0 only (if dist.get_rank() == 0:).")
        results = _rank_0_checksums(run)
        if len(results) != 1:
            return ('rank 0 printed no line {"checksum": ...} (or several): print json.dumps({"checksum": '
                    "checksum(model)}) once, after training.")
        _DDP_RUNS[text] = float(results[0]["checksum"])
    checksum = _DDP_RUNS[text]
    if math.isclose(checksum, _ddp_expected(), rel_tol=1e-5, abs_tol=1e-6):
        return None
    for message, trained in _DDP_MISTAKES:
        if math.isclose(checksum, trained(), rel_tol=1e-5, abs_tol=1e-6):
            return message
    calls = _calls(tree)
    if "DistributedSampler" not in calls:
        return _DDP_MISTAKES[3][0]
    if "DistributedDataParallel" not in calls:
        return _DDP_MISTAKES[2][0]
    return ("rank 0's parameters differ from one process trained on all the data in batches of "
            f"{DDP_WORLD_SIZE} x BATCH, which is what DDP computes: keep train_one.py's data, model, loop and "
            "EPOCHS, BATCH and LR, and change only what DDP needs.")


def _ddp_result(answer) -> float:
    return _DDP_RUNS[script_text(answer, _DDP_SCRIPT)[0]]


register(
    Exercise("ex-dist-ring-time", lambda: 2 * (8 - 1) / 8 * 2e9 / 50e9, rtol=1e-3, writes="a number"),
    Exercise("ex-dist-allreduce-by-hand", _hand_expected, rtol=0.0, method=_all_reduces_by_hand, result=_hand_result,
             writes="device code"),
    Exercise("ex-dist-ddp-script", _ddp_expected, rtol=1e-5, atol=1e-6, method=_ddp_script_runs_as_ddp,
             result=_ddp_result, writes="a script"),
)


# ------------------------------------------------------------------ ex-dist-predict-ring
def _ring_share(n_values: int, world_size: int, **_) -> Work:
    # a rank sends 2 (N - 1) / N of the float32 tensor and receives as much (each byte read from or written to its
    # memory), and adds N - 1 chunks of n_values / N values in the reduce-scatter
    share = (world_size - 1) / world_size
    return Work(share * n_values, 2 * 2 * share * 4 * n_values)


def _ring_share_mistakes(n_values: int, world_size: int, **_) -> list[tuple[str, Work]]:
    share, n = (world_size - 1) / world_size, world_size
    return [("counting what the rank sends without what it receives", Work(share * n_values, 2 * share * 4 * n_values)),
            ("counting the reduce-scatter's steps only (the all-gather sends as much again)",
             Work(share * n_values, 2 * share * 4 * n_values)),
            ("counting the whole tensor at every step, not one chunk of it",
             Work((n - 1) * n_values, 2 * 2 * (n - 1) * 4 * n_values)),
            ("counting 8 bytes per value (float32 has 4)", Work(share * n_values, 2 * 2 * share * 8 * n_values)),
            ("counting an addition for every value of the tensor", Work(n_values, 2 * 2 * share * 4 * n_values))]


register(function_exercise("ex-dist-predict-ring", _ring_share, _ring_share_mistakes, operation="elementwise",
                           needs=("device", "n_values", "world_size")))
