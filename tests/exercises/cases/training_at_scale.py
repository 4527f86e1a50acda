"""Chapter 17 (Training at scale): each exercise's solution and wrong answers, for
tests/exercises/test_every_exercise.py.

The numbers' wrong answers are the sums that leave out a part or count it in the wrong dtype. The checkpointing
answers run on the chosen device: no checkpoint (wasteful), every other block (wasteful), one checkpoint around the
whole stack (saves as little but recomputes everything at once: wasteful), the reentrant checkpoint (the parameters
get no gradient), the blocks run out of order. The sharding answers run in a one-process gloo group that the check
makes: the root alone, the blocks alone, the root before the blocks, blocks that keep their parameters gathered
after the forward pass (wasteful), nothing returned. (A mesh left out is caught only where the machine's
accelerator is another device than the lesson's, which a CPU-only torch cannot show.)"""

from torch.distributed.fsdp import fully_shard
from torch.utils.checkpoint import checkpoint

from gpukit.core.device import pick_device


def _context():
    return {"device": pick_device()}


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


SOLUTIONS = {
    "ex-scale-bytes-per-param": lambda: (2 + 4 + 4 + (4 + 4), {}),
    "ex-scale-checkpoint": lambda: (checkpointed_forward, _context()),
    "ex-scale-fully-shard": lambda: (shard_model, _context()),
    "ex-scale-ring-bytes": lambda: ((2 * 15 / 16 + 15 / 16) * 2 * 1.3e9, {}),
}

WRONG_ANSWERS = {
    "ex-scale-bytes-per-param": lambda: [(16, "float32"), (12, "master"), (14, "compute"), (10, "Adam"),
                                         (20, "too large")],
    "ex-scale-checkpoint": lambda: [(_plain, "wasteful"), (_every_other, "wasteful"),
                                    (_around_everything, "at once"), (_in_pairs, "together"),
                                    (_reentrant, "use_reentrant"), (_reversed, "differ"),
                                    (_no_output, "NoneType"), (None, "placeholder")],
    "ex-scale-fully-shard": lambda: [(_root_only, "not FSDP units"), (_blocks_only, "DTensors"),
                                     (_kept_gathered, "wastes"), (_not_returned, "returned None"),
                                     (lambda model, mesh: model, "DTensors")],
    "ex-scale-ring-bytes": lambda: [(2 * 15 / 16 * 2.6e9, "all-reduce"), (3 * 2.6e9, "(N - 1) / N"),
                                    (15 / 16 * 2.6e9, "three"), (3 * 15 / 16 * 5.2e9, "bfloat16"),
                                    (1e9, "too small")],
}
