"""Chapter 17 (Training at scale): each exercise's solution and wrong answers, for
tests/exercises/test_every_exercise.py.

The numbers' wrong answers are the sums that leave out a part or count it in the wrong dtype. The checkpointing
answers run on the chosen device: no checkpoint (wasteful), every other block (wasteful), one checkpoint around the
whole stack (saves as little but recomputes everything at once: wasteful), the reentrant checkpoint (the parameters
get no gradient), the blocks run out of order, and two that only a GPU would show (a tensor made on the host beside
the device's; a value brought back to the host in every block), which the check's run on the meta device shows on
any machine. The sharding answers run in a one-process gloo group that the check makes: the root alone, the blocks
alone, the root before the blocks, blocks that keep their parameters gathered after the forward pass (wasteful),
nothing returned, and the mesh left out (fully_shard's own mesh, of the machine's accelerator: told apart on any
machine by the name of the check's mesh dimension).

The FLOPs answers leave out the attention, the backward or the forward pass, or some of the tokens; the tokens per
GPU answers forget (N - 1) / N, count DDP's two collectives or one, the forward pass alone, float32, bits as bytes
or both directions of the link.

DEVICE_MISTAKES names, for each exercise whose learner writes device code, the wrong answers that are device
placement or synchronisation mistakes a CPU alone would not show (tests/exercises/test_training_at_scale.py shows
each one passes the CPU-only parts of its check and is still rejected)."""

import torch
from torch.distributed.fsdp import fully_shard
from torch.utils.checkpoint import checkpoint

from tests.support.exercise_cases import solved_on_the_lessons_device


# -------------------------------------------------------------------------------------------- ex-scale-checkpoint
def checkpointed_forward(blocks, x):
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=False)
    return x


def _plain(blocks, x):
    for block in blocks:
        x = block(x)
    return x


def _every_other(blocks, x):
    for i, block in enumerate(blocks):
        x = checkpoint(block, x, use_reentrant=False) if i % 2 else block(x)
    return x


def _around_everything(blocks, x):
    return checkpoint(_plain, blocks, x, use_reentrant=False)


def _in_pairs(blocks, x):
    for i in range(0, len(blocks), 2):
        x = checkpoint(_plain, blocks[i:i + 2], x, use_reentrant=False)
    return x


def _reentrant(blocks, x):
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=True)
    return x


def _reversed(blocks, x):
    for block in reversed(blocks):
        x = checkpoint(block, x, use_reentrant=False)
    return x


def _no_output(blocks, x):
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=False)


def _host_zeros(blocks, x):
    total = torch.zeros(x.shape)  # made on the host: no device=x.device
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=False)
    return x + total


def _item_per_block(blocks, x):
    scale = 1.0
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=False)
        scale *= 1.0 if float(x.detach().abs().max()) < 1e30 else 0.5  # the host waits
    return x * scale


def _via_the_host(blocks, x):
    for block in blocks:
        x = checkpoint(block, x.cpu(), use_reentrant=False)
    return x


# ------------------------------------------------------------------------------------------- ex-scale-fully-shard
def shard_model(model, mesh):
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def _root_only(model, mesh):
    fully_shard(model, mesh=mesh)
    return model


def _blocks_only(model, mesh):
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    return model


def _kept_gathered(model, mesh):
    for block in model.blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=False)
    fully_shard(model, mesh=mesh)
    return model


def _not_returned(model, mesh):
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)


def _no_mesh(model, mesh):
    for block in model.blocks:
        fully_shard(block)  # fully_shard's own mesh: the machine's accelerator
    fully_shard(model)
    return model


def _root_without_mesh(model, mesh):
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model)
    return model


SOLUTIONS = {
    "ex-scale-bytes-per-param": lambda: (2 + 4 + 4 + (4 + 4), {}),
    **solved_on_the_lessons_device({"ex-scale-checkpoint": checkpointed_forward, "ex-scale-fully-shard": shard_model}),
    "ex-scale-ring-bytes": lambda: ((2 * 15 / 16 + 15 / 16) * 2 * 1.3e9, {}),
    "ex-scale-step-flops": lambda: ((6 * 1.3e9 + 12 * 24 * 2048 * 2048) * 16 * 2048, {}),
    "ex-scale-comm-tokens": lambda: ((8 - 1) / 8 * 2 * 400e12 / (2 * 400e9 / 8), {}),
}

WRONG_ANSWERS = {
    "ex-scale-bytes-per-param": lambda: [(16, "float32"), (12, "master"), (14, "compute"), (10, "Adam"),
                                         (20, "too large")],
    "ex-scale-checkpoint": lambda: [(_plain, "wasteful"), (_every_other, "wasteful"),
                                    (_around_everything, "at once"), (_in_pairs, "together"),
                                    (_reentrant, "use_reentrant"), (_reversed, "differ"),
                                    (_no_output, "NoneType"), (None, "placeholder"),
                                    (_host_zeros, "made on the host"), (_item_per_block, "back to the host"),
                                    (_via_the_host, "back to the host")],
    "ex-scale-fully-shard": lambda: [(_root_only, "not FSDP units"), (_blocks_only, "DTensors"),
                                     (_kept_gathered, "wastes"), (_not_returned, "returned None"),
                                     (lambda model, mesh: model, "DTensors"), (_no_mesh, "mesh=mesh"),
                                     (_root_without_mesh, "mesh=mesh")],
    "ex-scale-ring-bytes": lambda: [(2 * 15 / 16 * 2.6e9, "all-reduce"), (3 * 2.6e9, "(N - 1) / N"),
                                    (15 / 16 * 2.6e9, "three"), (3 * 15 / 16 * 5.2e9, "bfloat16"),
                                    (1e9, "too small")],
    "ex-scale-step-flops": lambda: [(6 * 1.3e9 * 16 * 2048, "attention"),
                                    ((2 * 1.3e9 + 4 * 24 * 2048 * 2048) * 16 * 2048, "forward pass alone"),
                                    ((4 * 1.3e9 + 8 * 24 * 2048 * 2048) * 16 * 2048, "backward pass alone"),
                                    (2 * 1.3e9 * 16 * 2048, "forward pass alone"),
                                    (6 * 1.3e9 + 12 * 24 * 2048 * 2048, "every token"),
                                    ((6 * 1.3e9 + 12 * 24 * 2048 * 2048) * 16, "2048 tokens"),
                                    ((6 * 1.3e9 + 12 * 24 * 2048 * 2048) * 2048, "16 sequences"),
                                    (6 * 1.3e9 * 16, "batch x sequence length"), (1e20, "too large")],
    "ex-scale-comm-tokens": lambda: [(400e12 / 50e9, "(N - 1) / N"), (2 / 3 * 7000, "three"),
                                     (7000 / 3, "three"), (3 * 7000, "backward"), (2 * 7000, "bfloat16"),
                                     (7 / 8 * 400e12 / 400e9, "bits"), (7 / 8 * 400e12 / 100e9, "each way"),
                                     (1.0, "too small")],
}

# The wrong answers above that are device-placement or synchronisation mistakes (kind "device code" only): what
# the learner did, in their words. Each passes everything a CPU-only run of its check looks at, and the check
# still rejects it (tests/exercises/test_training_at_scale.py).
DEVICE_MISTAKES = {
    "ex-scale-checkpoint": {
        "_host_zeros": "made a tensor with torch.zeros(x.shape), without device=, and added it to the blocks' output",
        "_item_per_block": "asked the host for a value of x in every block (float(...)), which waits for the GPU",
        "_via_the_host": "passed x.cpu() to each block, moving the activations off the GPU",
    },
    "ex-scale-fully-shard": {
        "_no_mesh": "called fully_shard without mesh=mesh, so it made a mesh of the machine's accelerator",
        "_root_without_mesh": "passed mesh=mesh to the blocks but not to the root's fully_shard",
    },
}
