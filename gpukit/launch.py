"""Launch configurations: how many blocks a grid needs, how much of a warp and of an SM a block fills, and a
picture of which threads of a grid do work.

A CUDA kernel is launched on a **grid** of **blocks** of **threads**. The hardware runs threads in **warps**
of 32 that execute together, and a streaming multiprocessor (SM) holds at most a fixed number of blocks,
warps and threads at once. Those limits come from NVIDIA's CUDA C++ Programming Guide ("Technical
Specifications per Compute Capability"); :data:`SM_LIMITS` holds them for the usual compute capabilities.

:func:`sm_fill` is the simplest occupancy estimate: how many threads of a given block size an SM can hold,
counting only the block, warp and thread limits (registers and shared memory can lower it further).
:func:`draw_launch` draws a small launch: a box per thread, coloured by block, crossed where the thread's
global index is past the end of the data and the bounds guard sends it home.
"""

from __future__ import annotations

from dataclasses import dataclass

from .arguments import require_whole_number

WARP_SIZE = 32  # threads per warp on every NVIDIA GPU so far
LIMITS_SOURCE = ('NVIDIA CUDA C++ Programming Guide, "Technical Specifications per Compute Capability" '
                 "(maximum resident blocks, warps and threads per SM)")


@dataclass(frozen=True)
class SMLimits:
    """What one SM can hold at once, for one compute capability."""

    blocks: int  # resident blocks
    warps: int  # resident warps
    threads: int  # resident threads (warps * 32)
    example: str  # a GPU of that compute capability


SM_LIMITS: dict[str, SMLimits] = {
    "7.0": SMLimits(32, 64, 2048, "V100"),
    "7.5": SMLimits(16, 32, 1024, "T4"),
    "8.0": SMLimits(32, 64, 2048, "A100"),
    "8.6": SMLimits(16, 48, 1536, "RTX 3090, A40"),
    "8.9": SMLimits(24, 48, 1536, "RTX 4090, L40S"),
    "9.0": SMLimits(32, 64, 2048, "H100, H200"),
}


def blocks_for(n: int, threads_per_block: int) -> int:
    """The number of blocks whose threads cover ``n`` items, one item per thread: n / threads, rounded up."""
    n = require_whole_number("n", n, 0)
    threads_per_block = require_whole_number("threads_per_block", threads_per_block, 1)
    return (n + threads_per_block - 1) // threads_per_block


def warps_per_block(threads_per_block: int) -> int:
    """Warps a block occupies: a block of 1 thread still takes a whole warp."""
    return blocks_for(threads_per_block, WARP_SIZE)


def lanes_used(threads_per_block: int) -> float:
    """The share of its warps' 32 lanes that a block's threads fill (1.0 for a multiple of 32)."""
    return threads_per_block / (warps_per_block(threads_per_block) * WARP_SIZE)


@dataclass(frozen=True)
class SMFill:
    """How full one SM gets with blocks of one size, by the block, warp and thread limits alone."""

    threads_per_block: int
    blocks: int  # resident blocks
    threads: int  # resident threads that do work
    share: float  # threads / the SM's maximum resident threads
    limited_by: str  # "blocks" or "warps"


def sm_fill(threads_per_block: int, capability: str = "8.0") -> SMFill:
    """How many blocks of ``threads_per_block`` threads fit on one SM of ``capability`` and how full it is."""
    threads_per_block = require_whole_number("threads_per_block", threads_per_block, 1)
    if threads_per_block > 1024:
        raise ValueError(f"a block has at most 1024 threads, not {threads_per_block}")
    if capability not in SM_LIMITS:
        raise ValueError(f"no SM limits for compute capability {capability!r}; known: {sorted(SM_LIMITS)}")
    limits = SM_LIMITS[capability]
    by_warps = limits.warps // warps_per_block(threads_per_block)
    blocks = min(limits.blocks, by_warps)
    threads = blocks * threads_per_block
    return SMFill(threads_per_block, blocks, threads, threads / limits.threads,
                  "blocks" if limits.blocks < by_warps else "warps")


def draw_launch(n: int, threads_per_block: int, ax=None):
    """Draw a launch covering ``n`` items: one box per thread, a colour per block, a cross on each thread whose
    global index ``i = block * threads_per_block + thread`` is ``>= n`` (the bounds guard stops it).

    Returns the Matplotlib axes. Meant for small launches (at most 256 threads in all).
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    blocks = blocks_for(n, threads_per_block)
    if blocks * threads_per_block > 256:
        raise ValueError(f"{blocks} blocks of {threads_per_block} threads are too many boxes to draw; keep "
                         "the launch at 256 threads or fewer")
    if ax is None:
        _, ax = plt.subplots(figsize=(min(12, 0.4 * blocks * threads_per_block + 1.5), 1.9))
    colours = plt.get_cmap("tab10")
    for b in range(blocks):
        for t in range(threads_per_block):
            i = b * threads_per_block + t
            idle = i >= n
            ax.add_patch(Rectangle((i, 0), 0.9, 0.9, facecolor="white" if idle else colours(b % 10),
                                   edgecolor=colours(b % 10), alpha=0.85))
            ax.text(i + 0.45, 0.45, "×" if idle else str(i), ha="center", va="center", fontsize=7)
        ax.text(b * threads_per_block + threads_per_block / 2 - 0.05, 1.15, f"block {b}", ha="center",
                fontsize=8)
    ax.set_xlim(-0.2, blocks * threads_per_block + 0.1)
    ax.set_ylim(-0.2, 1.45)
    ax.set_axis_off()
    ax.set_title(f"n = {n} items, {blocks} blocks × {threads_per_block} threads: "
                 f"{blocks * threads_per_block - n} threads past the end (×) do nothing", fontsize=9)
    return ax
