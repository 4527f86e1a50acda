"""A few steps of data-parallel training with DistributedDataParallel, started by torchrun.

torchrun sets RANK, LOCAL_RANK and WORLD_SIZE and the rendezvous; each process takes the GPU numbered
LOCAL_RANK and talks to the others over NCCL. Without GPUs (a CPU-only PyTorch, a test cluster) every
process runs on the CPU over gloo instead, which is how the tests run it.
"""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device, backend = torch.device("cuda", local_rank), "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same starting model everywhere (DDP also broadcasts rank 0's)
    model = DistributedDataParallel(torch.nn.Linear(16, 1).to(device),
                                    device_ids=[local_rank] if device.type == "cuda" else None)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(rank)  # each rank its own share of the data
    for _ in range(5):
        x = torch.randn(64, 16, generator=generator).to(device)
        loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
        optimiser.zero_grad()
        loss.backward()  # gradients are averaged over all ranks here
        optimiser.step()
    # After the same averaged steps, every rank holds the same weights: check it across ranks.
    weights = model.module.weight.detach().clone()
    reference = weights.clone()
    dist.broadcast(reference, src=0)
    same = torch.equal(weights, reference)
    print(f"rank {rank}/{world} on {os.uname().nodename} ({device}, {backend}): loss {loss.item():.3f}, "
          f"weights equal rank 0's: {same}")
    dist.barrier()
    if rank == 0:
        print(f"ddp done: world size {world}, backend {backend}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
