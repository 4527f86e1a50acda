"""A small training loop to profile with Nsight Systems: warm-up steps, then the measured steps in NVTX ranges.

Run by nsys-profile.sbatch under ``nsys profile --capture-range=cudaProfilerApi``: Nsight Systems records only
between ``torch.cuda.profiler.start()`` and ``stop()`` (cudaProfilerStart/Stop), so the warm-up steps (CUDA's
start-up, the caching allocator's first allocations, cuBLAS picking its kernels) stay out of the report.
Inside, every step is an NVTX range ``step k`` (``torch.cuda.nvtx.range_push``/``range_pop``), its phases are
``record_function`` ranges (``forward``, ``backward``, ``optimiser``), and ``emit_nvtx`` turns those and every
PyTorch operation into NVTX ranges too, so the report's NVTX rows name the code above each kernel.

``--item`` reads the loss with ``.item()`` at every step, as many training loops do: in the report each step
then ends with a device-to-host copy and a cudaStreamSynchronize, the host idle until the GPU has finished.
Without a usable GPU (a CPU-only PyTorch, or the book's test cluster, whose GPUs are only device files) the
same loop runs on the CPU without the CUDA calls, so that the job's plumbing can be tested.
"""

import argparse
import contextlib
import time

import torch
from torch import nn
from torch.profiler import record_function


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="measured steps (after 5 warm-up steps)")
    parser.add_argument("--item", action="store_true", help="read the loss with .item() at every step")
    args = parser.parse_args()

    on_gpu = torch.cuda.is_available()
    device = torch.device("cuda" if on_gpu else "cpu")
    n, width = (8192, 2048) if on_gpu else (512, 64)
    generator = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(n, width, device=device, generator=generator)
    y = torch.randn(n, 1, device=device, generator=generator)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1)).to(device)
    optimiser = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step() -> torch.Tensor:
        optimiser.zero_grad()
        with record_function("forward"):
            loss = nn.functional.mse_loss(model(x), y)
        with record_function("backward"):
            loss.backward()
        with record_function("optimiser"):
            optimiser.step()
        return loss.detach()

    for _ in range(5):  # warm-up, outside the capture range
        step()
    if on_gpu:
        torch.cuda.synchronize()
        torch.cuda.profiler.start()  # cudaProfilerStart: nsys starts recording here
    losses, logged = [], []
    start = time.perf_counter()
    with torch.autograd.profiler.emit_nvtx() if on_gpu else contextlib.nullcontext():
        for k in range(args.steps):
            if on_gpu:
                torch.cuda.nvtx.range_push(f"step {k}")
            loss = step()
            losses.append(loss)
            if args.item:
                logged.append(loss.item())  # the host waits for the GPU here, every step
            if on_gpu:
                torch.cuda.nvtx.range_pop()
    if on_gpu:
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()  # cudaProfilerStop: nsys stops recording here
    seconds = time.perf_counter() - start
    first, last = float(losses[0]), float(losses[-1])
    print(f"profile-step: {args.steps} steps on {device.type}{' with .item() each' if args.item else ''}, "
          f"{seconds / args.steps * 1e3:.2f} ms per step, loss {first:.4f} -> {last:.4f}")


if __name__ == "__main__":
    main()
