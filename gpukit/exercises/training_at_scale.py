"""Chapter 17, Training at scale: what its exercises expect, and how a wrong or wasteful answer is told apart.

- ``ex-scale-bytes-per-param`` (a number): the bytes a training step keeps per parameter with bfloat16 weights
  for compute, ``float32`` master weights, ``float32`` gradients and Adam's two ``float32`` states: 18. The
  sums that leave out one part, or count the gradients in bfloat16, are named.
- ``ex-scale-checkpoint`` (device code): ``checkpointed_forward(blocks, x)``, run on blocks and data of the
  check's own on the lesson's ``device``. The check counts the bytes autograd saves for the backward pass with
  ``torch.autograd.graph.saved_tensors_hooks`` (parameters left out, each storage once, as the lesson counts
  them), which must fall to at most a third of the plain run's; the loss and every gradient must match the plain
  run's; and a forward hook on each block records the order in which blocks run again during the backward pass,
  which must be the reverse of the forward order, one block at a time (one checkpoint around the whole stack
  saves as little but brings every block's activations back at once: wasteful). Then the answer runs once more
  on the meta device (shapes, no data, on any machine), where what a CPU alone would hide shows: a tensor made
  on the host beside the device's (``torch.zeros(x.shape)`` without ``device=``) raises, and so does a value
  brought back to the host (``.cpu()``, ``.item()``, ``float()``), which on a GPU waits for the device.
- ``ex-scale-fully-shard`` (device code): ``shard_model(model, mesh)``, run on a model of the check's own (blocks in
  ``model.blocks``, a final ``model.head``) inside a process group: the one that exists, else a one-process group that
  the check makes (gloo, or NCCL bound to the lesson's GPU for a CUDA device; rendezvous through a file, both backends
  on the loopback interface) and destroys, with a device mesh of the lesson's device type over it, its one dimension
  named ``"shard"``. Every parameter must be a DTensor sharded on dim 0 over that mesh, told by its device type and
  its dimension's name (without ``mesh=``, fully_shard makes a mesh of its own, of the machine's accelerator, which
  is not the lesson's device where a GPU machine runs the lesson on its CPU; that mesh's dimension has no name, so
  the mistake shows on a CPU-only machine too); every block and the
  root must be FSDP units; gathering one unit (``unshard``) must bring back exactly that unit's parameters (a block's
  own, or for the root only the head's), so that no unit gathers the whole model; after a forward pass the blocks'
  parameters must be sharded again (``reshard_after_forward=False`` keeps them whole: wasteful); and the output must
  equal the unsharded model's.
- ``ex-scale-ring-bytes`` (a number): the bytes each of 16 ranks sends in one FSDP2 step of a 1.3e9-parameter
  model in bfloat16: two all-gathers and one reduce-scatter, 3 x 15/16 x 2.6e9. DDP's all-reduce, the whole
  tensor, and forgetting a collective are named.
- ``ex-scale-step-flops`` (a number): the FLOPs of one training step of a 1.3e9-parameter transformer (24 layers of
  width 2048) on 16 sequences of 2048 tokens, by PaLM's count: (6 N + 12 L d s) per token, times every token of
  the batch. The forward pass alone, the backward pass alone, the attention left out, and the count per token, per
  sequence or per batch row (tokens, sequence length or batch forgotten) are named.
- ``ex-scale-comm-tokens`` (a number): the tokens per GPU at which an FSDP2 step's communication (two all-gathers
  and a reduce-scatter of bfloat16 parameters, (N - 1) / N of them each, over a 400 Gb/s link each way) takes as
  long as its arithmetic (6 P T at 400 TFLOP/s), on 8 ranks: (N - 1) / N x R / W = 7000. The answers that forget
  (N - 1) / N, count DDP's two collectives or one, count the forward pass only, take float32, read 400 Gb/s as
  bytes or add both directions are named.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

from gpukit.topics.distributed import loopback_interface

from .checking import Exercise, register
from .checking import keep_output as _kept
from .checking import kept_output as _output_of
from .checking import not_a_function as _a_function
from .checking import raised as _raised


def _named_mistake(mistakes: dict[float, str], rtol: float = 1e-6):
    """A method that names a known wrong number: ``mistakes`` maps the number to what it means."""

    def method(answer, **context) -> str | None:
        if isinstance(answer, (int, float)) and not isinstance(answer, bool):
            for value, why in mistakes.items():
                if abs(answer - value) <= rtol * abs(value):
                    return why
        return None

    return method


# --------------------------------------------------------------------------------------- ex-scale-bytes-per-param
BF16, FP32 = 2, 4
BYTES_PER_PARAM = BF16 + FP32 + FP32 + 2 * FP32  # compute weights, fp32 grads, master weights, Adam's two states

_BYTES_MISTAKES = {
    16.0: ("16 is the recipe of the table with bfloat16 gradients; here the gradients are kept in float32 "
           "(4 bytes, not 2)."),
    14.0: "14 leaves out the bfloat16 weights used for compute (2 bytes): the model holds them beside the master.",
    10.0: "10 counts only one of Adam's two states (first and second moments, 4 bytes each).",
    12.0: "12 leaves out the float32 master weights (4 bytes) that the optimizer updates.",
}


# --------------------------------------------------------------------------------------------- ex-scale-checkpoint
_WIDTH, _TOKENS, _DEPTH = 32, 64, 4
_MOST_SHARE = 1 / 3


def _blocks_and_data(device):
    """Blocks like the lesson's (x + W2 gelu(W1 x)) and data of the check's own, the same on every run, drawn from
    a generator of the check's (never from the reader's random stream)."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.Linear(_WIDTH, 4 * _WIDTH)
            self.down = nn.Linear(4 * _WIDTH, _WIDTH)

        def forward(self, x):
            return x + self.down(nn.functional.gelu(self.up(x)))

    generator = torch.Generator().manual_seed(17)
    blocks = nn.ModuleList(Block() for _ in range(_DEPTH))
    with torch.no_grad():
        for parameter in blocks.parameters():
            parameter.copy_(0.2 * torch.randn(parameter.shape, generator=generator))
    x = torch.randn(_TOKENS, _WIDTH, generator=generator)
    target = torch.device(device)
    return blocks.to(target), x.to(target)


def _step(forward, blocks, x, *, watch_backward: bool = False):
    """Run ``forward(blocks, x)``, its loss and backward pass. Returns (output, loss, saved bytes, gradients, the
    block numbers that ran during the backward pass)."""
    import torch

    params = {p.untyped_storage().data_ptr() for p in blocks.parameters()}
    saved: dict[int, int] = {}
    again: list[int] = []
    in_backward = [False]

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    def ran(number):
        # A pre-hook: checkpoint's recomputation stops a block's forward pass early, once it has what the backward
        # pass needs (torch.utils.checkpoint's early stop), so a hook after the forward pass may never run.
        def hook(module, inputs):
            if in_backward[0]:
                again.append(number)
        return hook

    handles = [block.register_forward_pre_hook(ran(i)) for i, block in enumerate(blocks)] if watch_backward else []
    blocks.zero_grad(set_to_none=True)
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            out = forward(blocks, x)
        if not isinstance(out, torch.Tensor) or not out.requires_grad:
            return out, None, None, None, None
        loss = out.square().mean()
        in_backward[0] = True
        loss.backward()
    finally:
        for handle in handles:
            handle.remove()
    grads = [None if p.grad is None else p.grad.detach().clone() for p in blocks.parameters()]
    return out.detach(), loss.detach(), sum(saved.values()), grads, again


def _plain(blocks, x):
    for block in blocks:
        x = block(x)
    return x


def _checkpoints_each_block(answer, device) -> str | None:
    import torch

    wrong = _a_function(answer, "checkpointed_forward", "blocks, x")
    if wrong:
        return wrong
    blocks, x = _blocks_and_data(device)
    _, plain_loss, plain_bytes, plain_grads, _ = _step(_plain, blocks, x)
    try:
        out, loss, saved, grads, again = _step(answer, blocks, x, watch_backward=True)
    except Exception as error:  # the reader's code: report whatever it raised
        return _raised(f"on {_DEPTH} blocks on {x.device.type} your function", error) + "."
    if not isinstance(out, torch.Tensor):
        return (f"your function returned {type(out).__name__}, not the output tensor of the last block: return x "
                "after the loop.")
    if saved is None:
        return ("the output does not require grad, so nothing can be trained: with use_reentrant=True a checkpointed "
                "block whose input does not require grad is cut off from autograd (and torch.no_grad cuts "
                "everything). Use checkpoint(block, x, use_reentrant=False).")
    if any(g is None for g in grads):
        return ("after the backward pass some parameters have no gradient: with use_reentrant=True (or under "
                "torch.no_grad) the checkpointed blocks are cut off from autograd. Use "
                "checkpoint(block, x, use_reentrant=False).")
    if not torch.allclose(loss, plain_loss, rtol=1e-5, atol=1e-7) or not all(
            torch.allclose(g, p, rtol=1e-4, atol=1e-6) for g, p in zip(grads, plain_grads, strict=True)):
        return ("the loss or the gradients differ from those of the blocks run in turn without checkpointing: run "
                "every block once, in order, on the previous block's output.")
    if saved > _MOST_SHARE * plain_bytes:
        return (f"autograd saved {saved / plain_bytes:.0%} of the plain run's bytes for the backward pass, more than "
                f"a third: too wasteful. Checkpoint every block, so that each keeps only its input.")
    if not again:
        return ("no block ran again during the backward pass: nothing was recomputed, so the activations must have "
                "been kept some other way. Use torch.utils.checkpoint.checkpoint.")
    if again != list(reversed(range(_DEPTH))):
        return (f"during the backward pass the blocks ran again in the order {again}: several blocks are recomputed "
                "together (one checkpoint around more than one block), so their activations all come back at "
                "once and the peak is not lowered. Checkpoint each block on its own.")
    off = _off_the_device(answer)
    if off:
        return off
    _kept(answer, out)
    return None


def _off_the_device(answer) -> str | None:
    """The answer run once on the meta device, where a tensor made on the host, or a value brought back to it,
    raises on any machine (on a CPU-only one the host and the device are one, so nothing else would show them)."""
    import torch

    blocks, x = _blocks_and_data("cpu")
    blocks, x = blocks.to("meta"), x.to("meta")
    try:
        out = answer(blocks, x)
    except Exception as error:  # the reader's code: say which kind of mistake, by what the meta device refused
        text = str(error)
        if "Cannot copy out of meta" in text or "item()" in text or "numpy" in text:
            return ("your function brings a value back to the host (.cpu(), .item(), float(), .numpy() or a print "
                    "of a tensor): on a GPU each such call waits for the device, and a tensor moved to the host "
                    "leaves the device's computation. Keep every tensor on x's device.")
        if "device" in text:
            return ("your function mixes the device's tensors with one made on the host (a torch.zeros, "
                    "torch.ones or torch.tensor without device=...): on a GPU that is a device mismatch. Make "
                    "every new tensor on x.device, or leave it out.")
        return _raised("on the meta device (shapes only) your function", error) + "."
    if isinstance(out, torch.Tensor) and out.device.type != "meta":
        return (f"for x on the meta device your function returned a tensor on {out.device.type}: the output "
                "must stay on x's device.")
    return None


def _plain_output(device):
    """The output of the check's blocks run in turn, without checkpointing."""
    import torch

    blocks, x = _blocks_and_data(device)
    with torch.no_grad():
        return _plain(blocks, x)


# -------------------------------------------------------------------------------------------- ex-scale-fully-shard
_SHARD_WIDTH, _SHARD_DEPTH = 16, 3
_MESH_NAMES = ("shard",)


def _shardable_model(device):
    import torch
    from torch import nn

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(_SHARD_WIDTH, 2 * _SHARD_WIDTH), nn.GELU(),
                                                      nn.Linear(2 * _SHARD_WIDTH, _SHARD_WIDTH))
                                        for _ in range(_SHARD_DEPTH))
            self.head = nn.Linear(_SHARD_WIDTH, 4)

        def forward(self, x):
            for block in self.blocks:
                x = x + block(x)
            return self.head(x)

    generator = torch.Generator().manual_seed(1717)
    model = Stack()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(0.3 * torch.randn(parameter.shape, generator=generator))
    x = torch.randn(8, _SHARD_WIDTH, generator=generator)
    return model.to(torch.device(device)), x.to(torch.device(device))


@contextlib.contextmanager
def _process_group(device):
    """The process group that exists, else a one-process group made here and ended after (destroyed, so that a later
    check, or the solution's run after the learner's, can make its own): gloo for the CPU, NCCL for a CUDA device
    (gloo where this torch has no NCCL).

    What NCCL needs here, by construction (torch/distributed/distributed_c10d.py, init_process_group): a rendezvous,
    a file store (so no MASTER_ADDR or MASTER_PORT); ``device_id``, the lesson's GPU with its index (a bare "cuda"
    means the current device), which binds the group to it and forms NCCL's communicator at once; and that GPU made
    the current device for the while (torch.cuda.set_device), because FSDP2 puts a CUDA mesh's shards on the
    current device (torch/distributed/fsdp/_fully_shard/_fsdp_init.py, _get_device_from_mesh). Before the group
    is destroyed the GPU finishes its work; then the current device is put back. Both backends are told to use
    the loopback interface for the while (gloo reads GLOO_SOCKET_IFNAME when a group is made, NCCL its bootstrap's
    NCCL_SOCKET_IFNAME), and the variables are put back afterwards."""
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        yield
        return
    on = torch.device(device)
    nccl = on.type == "cuda" and dist.is_nccl_available()
    names = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
    before = {name: os.environ.get(name) for name in names}
    previous = None  # the kernel's current CUDA device, put back afterwards
    with tempfile.TemporaryDirectory() as folder:
        os.environ.update(dict.fromkeys(names, loopback_interface()))
        try:
            bound = {}
            if nccl:
                previous = torch.cuda.current_device()
                on = torch.device("cuda", previous if on.index is None else on.index)
                torch.cuda.set_device(on)
                bound["device_id"] = on
            dist.init_process_group("nccl" if nccl else "gloo", init_method=f"file://{folder}/store", rank=0,
                                    world_size=1, **bound)
            try:
                yield
            finally:
                try:
                    if nccl:
                        torch.cuda.synchronize(on)  # nothing of the check's left running on the group
                finally:
                    dist.destroy_process_group()
        finally:
            if previous is not None:
                torch.cuda.set_device(previous)
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def _sharded_per_block(answer, device) -> str | None:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.tensor import DTensor, Shard

    wrong = _a_function(answer, "shard_model", "model, mesh")
    if wrong:
        return wrong
    model, x = _shardable_model(device)
    with torch.no_grad():
        expected = model(x)
    with _process_group(device):
        # Its dimension named: a mesh that fully_shard makes by itself (no mesh=) has none, on any machine.
        mesh = init_device_mesh(torch.device(device).type, (dist.get_world_size(),), mesh_dim_names=_MESH_NAMES)
        try:
            returned = answer(model, mesh)
        except Exception as error:  # the reader's code: report whatever it raised
            return _raised("on the check's model your function", error) + "."
        if returned is None:
            return "your function returned None: return the model, sharded."
        if returned is not model:
            return "return the model you were given, sharded in place (fully_shard changes the module itself)."
        plain = [name for name, p in model.named_parameters() if not isinstance(p, DTensor)]
        if plain:
            return (f"{len(plain)} parameters are plain tensors, not DTensors (e.g. {plain[0]}): every parameter "
                    "must be in a unit of fully_shard; call fully_shard on the root too.")
        if any(p.placements != (Shard(0),) for p in model.parameters()):
            return "every parameter should be sharded on its first dimension (Shard(0)), as fully_shard does."
        # Compared by device type: FSDP2 and DTensor may hand back an equal mesh made earlier, not the same object.
        given = (mesh.device_type, mesh.mesh_dim_names)
        others = sorted({p.device_mesh.device_type for p in model.parameters()
                         if (p.device_mesh.device_type, p.device_mesh.mesh_dim_names) != given})
        if others:
            return (f"some parameters are sharded over a mesh of fully_shard's own making ({others[0]} devices), not "
                    "the mesh you were given: pass mesh=mesh to every fully_shard call (without it, fully_shard "
                    "takes the machine's accelerator, which need not be the device the lesson runs on).")
        if not isinstance(model, FSDPModule):
            return "the root is not an FSDP unit: call fully_shard(model) after the blocks."
        units = [m for m in model.blocks if isinstance(m, FSDPModule)]
        if len(units) != len(model.blocks):
            return (f"{len(model.blocks) - len(units)} of the {len(model.blocks)} blocks are not FSDP units of their "
                    "own: the root's unit then gathers their parameters all at once (the whole model in memory, as "
                    "with DDP). Call fully_shard(block) for each block in model.blocks, before the root.")
        # Gathering a unit swaps its parameters for whole tensors (new objects), so they are told apart by name.
        units = [(block, f"blocks.{i}.") for i, block in enumerate(model.blocks)] + [(model, "head.")]
        for unit, own in units:
            unit.unshard()
            gathered = {name for name, p in model.named_parameters() if not isinstance(p, DTensor)}
            unit.reshard()
            if not gathered or any(not name.startswith(own) for name in gathered):
                extra = sorted(name for name in gathered if not name.startswith(own))
                return (f"gathering one unit brought back {len(gathered)} parameters ({', '.join(extra[:3])} among "
                        "them) where it should bring back its own only: shard each block first, then the root.")
        try:
            with torch.no_grad():
                output = model(x)
        except Exception as error:  # the reader's code: report whatever it raised
            return _raised("a forward pass of your sharded model", error) + "."
        still_whole = [f"blocks.{name}" for name, p in model.blocks.named_parameters() if not isinstance(p, DTensor)]
        if still_whole:
            return ("after the forward pass the blocks' parameters are still whole (e.g. "
                    f"{still_whole[0]}): reshard_after_forward=False keeps every block gathered until the backward "
                    "pass, which wastes the memory sharding saves. Leave it at its default.")
        output = output.full_tensor() if isinstance(output, DTensor) else output
        if not torch.allclose(output.detach(), expected, rtol=1e-5, atol=1e-6):
            return "the sharded model's output differs from the model's before sharding."
        # The bytes this rank holds, times the ranks: the model's bytes whatever the group's size (the check's
        # model splits evenly over 1, 2 or 4 ranks).
        world = dist.get_world_size()
        model.reshard()  # the root keeps its own parameters gathered after the forward pass, by default
        _kept(answer, world * sum(p.to_local().nbytes for p in model.parameters()))
    return None


def _bytes_per_rank(device) -> int:
    """The bytes of the check's model's parameters, over all ranks."""
    model, _ = _shardable_model(device)
    return sum(p.nbytes for p in model.parameters())


# -------------------------------------------------------------------------------------------- ex-scale-ring-bytes
_PARAMETERS, _RANKS = 1.3e9, 16
_WHOLE = BF16 * _PARAMETERS
SENT_PER_RANK = 3 * (_RANKS - 1) / _RANKS * _WHOLE

_RING_MISTAKES = {
    2 * (_RANKS - 1) / _RANKS * _WHOLE: ("that is one all-reduce (DDP's step); FSDP2 all-gathers the parameters "
                                         "twice (forward and backward) and reduce-scatters the gradients."),
    3 * _WHOLE: ("that sends the whole tensor three times; in a ring each rank sends (N - 1) / N of it per "
                 "collective, its own chunk never leaves it."),
    (_RANKS - 1) / _RANKS * _WHOLE: "that is one collective; a step makes three.",
    3 * (_RANKS - 1) / _RANKS * FP32 * _PARAMETERS: "the parameters and gradients are in bfloat16: 2 bytes each.",
}


# -------------------------------------------------------------------------------------------- ex-scale-step-flops
_N, _LAYERS, _D_MODEL, _SEQUENCE, _BATCH = 1.3e9, 24, 2048, 2048, 16
_ATTENTION = 12 * _LAYERS * _D_MODEL * _SEQUENCE  # per token: scores, and their use on the values, forward and back
_BATCH_TOKENS = _BATCH * _SEQUENCE
STEP_FLOPS = (6 * _N + _ATTENTION) * _BATCH_TOKENS

_FLOPS_MISTAKES = {
    6 * _N * _BATCH_TOKENS: ("that is 6 x parameters x tokens without attention: the products of queries with keys "
                             "and of the scores with values have no parameters, and add 12 x layers x width x "
                             "sequence length per token."),
    STEP_FLOPS / 3: ("that is the forward pass alone (2 FLOPs per parameter and token): the backward pass computes "
                     "two gradients per product, twice the forward's work."),
    2 * STEP_FLOPS / 3: "that is the backward pass alone: add the forward pass (a third of the step).",
    2 * _N * _BATCH_TOKENS: ("that is the forward pass alone, and without attention: the backward pass does twice the "
                             "forward's work."),
    6 * _N + _ATTENTION: "that is the count per token: multiply by every token of the batch.",
    (6 * _N + _ATTENTION) * _BATCH: ("that counts one token per sequence: each of the 16 sequences has 2048 tokens "
                                     "(the batch's tokens are batch x sequence length)."),
    (6 * _N + _ATTENTION) * _SEQUENCE: ("that is one sequence's tokens: the batch holds 16 sequences (tokens are "
                                        "batch x sequence length)."),
    6 * _N * _BATCH: "that counts one token per sequence, and no attention: tokens are batch x sequence length.",
}


# ------------------------------------------------------------------------------------------- ex-scale-comm-tokens
_COMM_RANKS, _COMM_RATE, _COMM_LINK = 8, 400e12, 400e9 / 8  # ranks, FLOP/s, bytes/s each way (400 Gb/s)
# Communication 3 (N - 1)/N x 2 P / W equals compute 6 P T / R where T = (N - 1)/N x R / W.
TOKENS_TO_HIDE = (_COMM_RANKS - 1) / _COMM_RANKS * BF16 * _COMM_RATE / (2 * _COMM_LINK)

_TOKENS_MISTAKES = {
    _COMM_RATE / _COMM_LINK: ("that leaves out (N - 1) / N: in a ring each rank sends (N - 1) / N of the tensor per "
                              "collective, its own chunk never leaves it."),
    2 / 3 * TOKENS_TO_HIDE: ("that counts two collectives (DDP's all-reduce); FSDP2 all-gathers the parameters twice "
                             "(forward and backward) and reduce-scatters the gradients: three."),
    1 / 3 * TOKENS_TO_HIDE: "that counts one collective; an FSDP2 step makes three.",
    3 * TOKENS_TO_HIDE: ("that sets the communication against the forward pass alone (2 P T FLOPs): the step's "
                         "arithmetic, backward pass included, is 6 P T."),
    2 * TOKENS_TO_HIDE: "the parameters and gradients travel in bfloat16: 2 bytes each, not 4.",
    TOKENS_TO_HIDE / 8: "400 Gb/s is in bits: 50 GB/s, eight times fewer bytes per second.",
    TOKENS_TO_HIDE / 2: ("the link's 400 Gb/s is each way, and a ring sends and receives at once: the time is the "
                         "bytes sent over one direction's bandwidth, not over both added."),
}


register(
    Exercise("ex-scale-bytes-per-param", lambda: float(BYTES_PER_PARAM), method=_named_mistake(_BYTES_MISTAKES),
             rtol=1e-9, writes="a number"),
    Exercise("ex-scale-checkpoint", _plain_output, needs=("device",), method=_checkpoints_each_block,
             result=_output_of, rtol=1e-5, atol=1e-6, writes="device code"),
    Exercise("ex-scale-fully-shard", _bytes_per_rank, needs=("device",), method=_sharded_per_block,
             result=_output_of, writes="device code"),
    Exercise("ex-scale-ring-bytes", lambda: SENT_PER_RANK, method=_named_mistake(_RING_MISTAKES), rtol=1e-3,
             writes="a number"),
    Exercise("ex-scale-step-flops", lambda: STEP_FLOPS, method=_named_mistake(_FLOPS_MISTAKES, rtol=1e-3), rtol=1e-3,
             writes="a number"),
    Exercise("ex-scale-comm-tokens", lambda: TOKENS_TO_HIDE, method=_named_mistake(_TOKENS_MISTAKES, rtol=1e-3),
             rtol=1e-3, writes="a number"),
)
