"""A few steps of sharded data-parallel training with FSDP2 (fully_shard), started by torchrun.

torchrun sets RANK, LOCAL_RANK and WORLD_SIZE and the rendezvous; each process takes the GPU numbered
LOCAL_RANK and talks to the others over NCCL. Without GPUs (a CPU-only PyTorch, a test cluster) every
process runs on the CPU over gloo instead, which is how the tests run it. Each block of the model is an FSDP
unit of its own, then the root: every rank keeps 1/N of the parameters and of Adam's states (chapter 17).
"""

import datetime
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

WIDTH, DEPTH = 256, 4


def main() -> None:
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device, backend = torch.device("cuda", local_rank), "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    timeout = datetime.timedelta(seconds=int(os.environ.get("TORCH_DIST_TIMEOUT_S", "300")))
    dist.init_process_group(backend, timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same starting model on every rank: FSDP2 does not broadcast it
    model = nn.Sequential(*(nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))
                            for _ in range(DEPTH))).to(device)
    whole = sum(p.nbytes for p in model.parameters())
    for block in model:
        fully_shard(block)  # each block: gathered before it computes, freed after
    fully_shard(model)
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-3)  # built after fully_shard: states per shard
    generator = torch.Generator().manual_seed(1000 + rank)  # each rank its own share of the data
    for _ in range(5):
        x = torch.randn(64, WIDTH, generator=generator).to(device)
        loss = model(x).square().mean()
        optimiser.zero_grad()
        loss.backward()  # gradients reduce-scattered: each rank gets its shard's sum
        optimiser.step()
    held = sum(p.to_local().nbytes for p in model.parameters() if isinstance(p, DTensor))
    print(f"rank {rank}/{world} on {os.uname().nodename} ({device}, {backend}): loss {loss.item():.5f}, "
          f"parameter bytes held {held:,} of {whole:,}")
    dist.barrier()
    if rank == 0:
        print(f"fsdp2 done: world size {world}, backend {backend}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
