"""What one GPU job sees: the GPUs Slurm granted, the device PyTorch picks, and a matrix product on it.

Run by one-gpu.sbatch. Without a usable GPU (a CPU-only PyTorch, or a test cluster whose GPUs are only
device files) it says so and multiplies on the CPU, so the job still shows how it was placed.
"""

import os
import time

import torch


def main() -> None:
    granted = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    print(f"Slurm granted GPUs: {granted or 'none'}")
    if torch.cuda.is_available():
        device = torch.device("cuda")
        print(f"PyTorch sees {torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}")
    else:
        device = torch.device("cpu")
        print("PyTorch sees no usable GPU: computing on the CPU")
    n = 4096 if device.type == "cuda" else 512
    a = torch.randn(n, n, device=device)
    a @ a  # warm-up
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    c = a @ a
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    print(f"{n}x{n} matmul on {device.type}: {2 * n**3 / seconds / 1e9:.1f} GFLOP/s, checksum finite: "
          f"{bool(torch.isfinite(c).all())}")
    print(f"gpu-check done on {device.type}")


if __name__ == "__main__":
    main()
