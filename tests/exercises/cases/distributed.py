"""Chapter 10 (multi-GPU and distributed): each exercise's solution and wrong answers, for
tests/exercises/test_every_exercise.py.

The all-reduce functions and the DDP scripts run for real, in processes that torchrun starts on loopback (a few
seconds each). The DDP scripts import train_one.py, which the lesson writes: the cases write it from the
lesson's own cell, so that a lesson whose train_one.py drifted from what the check computes fails here.
"""

import inspect
import json
import linecache
import os
import textwrap
from functools import cache
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from gpukit.base.paths import state_dir
from tests.support.booktoc import ROOT
from tests.support.exercise_cases import prediction_slips, roofline_mistakes

LESSON = ROOT / "notebooks" / "10-multi-gpu.ipynb"


@cache
def train_one_written() -> Path:
    """The lesson's train_one.py, written where the lesson writes it (the check runs scripts beside it)."""
    cells = json.loads(LESSON.read_text(encoding="utf-8"))["cells"]
    (text,) = ["".join(c["source"]) for c in cells if c["cell_type"] == "code" and "train_one.py" in
               "".join(c["source"]).splitlines()[0]]
    path = state_dir("distributed") / "train_one.py"
    text = text.split("\n", 1)[1]  # without the %%writefile line
    # Ranks of other checks (the lesson's kernels run beside the tests) may be importing it: a file rewritten in
    # place is empty for a moment, so it is left alone where it is the same, and otherwise replaced whole.
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        written = path.with_name(f"train_one.{os.getpid()}.tmp")
        written.write_text(text, encoding="utf-8")
        os.replace(written, path)
    return path


# ------------------------------------------------------------------------------------------ all-reduce by hand
def all_reduce_by_hand(t):
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        incoming = torch.empty_like(t)
        for source in range(1, world):
            dist.recv(incoming, src=source)
            t += incoming
        for destination in range(1, world):
            dist.send(t, dst=destination)
    else:
        dist.send(t, dst=0)
        dist.recv(t, src=0)


def solution_changed(name: str, *changes: tuple[str, str]):
    """all_reduce_by_hand with each (old, new) replaced in its source, defined as ``name`` as a notebook cell defines
    a function: its source held by linecache, where the check reads it (it runs the source alone in each rank)."""
    source = textwrap.dedent(inspect.getsource(all_reduce_by_hand)).replace("all_reduce_by_hand(", f"{name}(")
    for old, new in changes:
        assert old in source, old
        source = source.replace(old, new)
    cell = f"<exercise case {name}>"
    linecache.cache[cell] = (len(source), None, source.splitlines(keepends=True), cell)
    namespace = {"torch": torch, "dist": dist}
    exec(compile(source, cell, "exec"), namespace)
    return namespace[name]


# Rank 0 sends the sum back, and each other rank receives it.
SEND_BACK = "        for destination in range(1, world):\n            dist.send(t, dst=destination)\n"
RECEIVE_BACK = "        dist.recv(t, src=0)\n"


def calls_a_notebook_function(t):
    all_reduce_by_hand(t)  # the check's script has torch and dist only: a NameError there


def with_the_library(t):
    dist.all_reduce(t)


# ------------------------------------------------------------------------------------------ DDP scripts
DDP_SCRIPT = textwrap.dedent("""\
    import json

    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler
    from train_one import BATCH, EPOCHS, LR, checksum, make_dataset, make_model

    dist.init_process_group("gloo")
    dataset = make_dataset()
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=BATCH, sampler=sampler)
    model = DistributedDataParallel(make_model())
    optimiser = torch.optim.SGD(model.parameters(), lr=LR)
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimiser.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimiser.step()
    if dist.get_rank() == 0:
        print(json.dumps({"checksum": checksum(model)}))
    dist.destroy_process_group()
    """)


def ddp_script(*changes: tuple[str, str]) -> str:
    """The solution with each (old, new) replaced; each old text must be in it."""
    text = DDP_SCRIPT
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new)
    return text


RING_VALUES, RING_RANKS = 10_000, 4


def ring_predicted_ms(peak_flops, bandwidth):
    """The lesson's solution of ex-dist-predict-ring."""
    share = (RING_RANKS - 1) / RING_RANKS
    return 1e3 * max(share * RING_VALUES / peak_flops, 2 * 2 * share * 4 * RING_VALUES / bandwidth)


SOLUTIONS = {
    "ex-dist-predict-ring": lambda: (ring_predicted_ms, {"device": "cpu", "n_values": RING_VALUES,
                                                         "world_size": RING_RANKS}),
    "ex-dist-ring-time": lambda: (2 * 7 / 8 * 2e9 / 50e9, {}),
    "ex-dist-allreduce-by-hand": lambda: (all_reduce_by_hand, {}),
    "ex-dist-ddp-script": lambda: (train_one_written() and DDP_SCRIPT, {}),
}

WRONG_ANSWERS = {
    "ex-dist-predict-ring": lambda: [
        *roofline_mistakes({"without what it receives": (0.75, 6), "the whole tensor at every step": (3, 96),
                            "8 bytes per value": (0.75, 24), "an addition for every value": (1, 12),
                            "too long": (0.75, 30)}, per=RING_VALUES),
        *prediction_slips(ring_predicted_ms, times=1e3, itself=True),
    ],
    "ex-dist-ring-time": lambda: [
        (2e9 / 50e9, "too small"),  # the data once
        (2 * 7 * 2e9 / 50e9, "too large"),  # every step sends the whole tensor
        (np.array([0.5, 0.5]), "expected a number"),
    ],
    "ex-dist-allreduce-by-hand": lambda: [
        (solution_changed("no_sum_sent_back", (SEND_BACK, ""), (RECEIVE_BACK, "")), "send the sum back"),
        # A new tensor: the caller's t is unchanged.
        (solution_changed("not_in_place", ("t += incoming", "t = t + incoming"),
                          (RECEIVE_BACK, RECEIVE_BACK + "    return t\n")), "in place"),
        (solution_changed("leaves_out_rank_0",
                          ("incoming =", "total, incoming = torch.zeros_like(t),"),
                          ("t += incoming\n", "total += incoming\n        t.copy_(total)\n")),
         "leaves out rank 0's own tensor"),
        (solution_changed("averages", ("t += incoming\n", "t += incoming\n        t /= world\n")), "the mean"),
        # No device=: on the CPU, while t is on this rank's GPU.
        (solution_changed("buffer_made_without_device", ("torch.empty_like(t)", "torch.zeros(t.shape)")),
         "made without device="),
        (calls_a_notebook_function, "NameError"),
        (with_the_library, "point-to-point"),
        (lambda t: t, "a lambda"),
        (torch.zeros(5), "pass the function itself"),
    ],
    "ex-dist-ddp-script": lambda: [
        # The classic mistakes: no DistributedSampler, so that every rank sees the same data ...
        (train_one_written() and ddp_script(
            ("sampler = DistributedSampler(dataset)\n", ""),
            ("batch_size=BATCH, sampler=sampler", "batch_size=BATCH, shuffle=True"),
            ("    sampler.set_epoch(epoch)\n", "")), "DistributedSampler(dataset)"),
        # ... the model not wrapped in DDP, so that each rank learns from its part alone ...
        (ddp_script(("DistributedDataParallel(make_model())", "make_model()")), "wrap the model"),
        # ... printing from every rank ...
        (ddp_script(("if dist.get_rank() == 0:\n    print", "if True:\n    print")), "printed too"),
        # ... the same shuffle every epoch, and the group never joined.
        (ddp_script(("    sampler.set_epoch(epoch)\n", "")), "set_epoch"),
        (ddp_script(('dist.init_process_group("gloo")\n', "")), "init_process_group"),
        (ddp_script(("import json\n", "import json\n  oops\n")), "not valid Python"),
        (state_dir("distributed") / "no_such_script.py", "no file"),
        (3, "expected the script as text"),
    ],
}


# The planted device mistakes (tests/exercises/test_planted_device_mistakes.py).
DEVICE_MISTAKES = {
    "ex-dist-allreduce-by-hand": {
        "buffer_made_without_device": "made rank 0's receive buffer with torch.zeros(t.shape), no device=: on the "
                                      "CPU, while t is on the rank's GPU, which NCCL refuses",
    },
}
