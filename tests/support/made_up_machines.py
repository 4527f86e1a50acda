"""The made-up machines the prediction tests (tests/lessons/test_predictions.py) run the lessons' prediction cells on,
so that every predicted figure in them can be worked out by hand.

- :data:`CPUINFO` and the fixture ``made_up_cpu``: a 4-core AVX2 CPU at 2 GHz, whose float32 peak gpukit estimates
  at 256 GFLOP/s (4 cores x 2 GHz x 32 FLOP per cycle), with a measured copy bandwidth of 20 GB/s;
- the fixture ``pcie5``: an nvidia-smi that reports a PCIe 5.0 x16 link, as the H100 node's did;
- :func:`timed`: a timing of five equal samples;
- :func:`cpuinfo`: /proc/cpuinfo's text for a CPU of the given cores, flags, clock and threads per core.

Registered in conftest.py's ``pytest_plugins``, beside ``fake_cuda``, which makes torch report the H100 itself.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpukit.core import machine, peaks
from gpukit.core.timing import Timing
from gpukit.measuring import roofline
from tests.support.fake_cuda import CUDA_UUID

CPUINFO = "".join(f"processor\t: {i}\nphysical id\t: 0\ncore id\t: {i}\ncpu MHz\t\t: 2000.000\n"
                  "flags\t\t: fpu sse2 avx avx2 fma\n\n" for i in range(4))
COPY_BYTES_PER_S = 20e9


@pytest.fixture
def made_up_cpu(monkeypatch):
    """gpukit estimates the CPU's peak from :data:`CPUINFO` at 2 GHz, and its copy measures 20 GB/s."""
    real = peaks.estimate_cpu_peak
    monkeypatch.setattr(peaks, "estimate_cpu_peak", lambda dtype="float32", cpuinfo=None, max_mhz=None,
                        cores=None: real(dtype, cpuinfo=CPUINFO, max_mhz=2000, cores=cores))
    monkeypatch.setattr(roofline, "_measured_copy_bandwidth", lambda device: COPY_BYTES_PER_S)


@pytest.fixture
def pcie5(monkeypatch):
    """nvidia-smi answers a PCIe 5.0 x16 link (uuid, pcie.link.gen.max, pcie.link.width.max) for fake_cuda's GPU."""
    monkeypatch.setattr(machine.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(machine.subprocess, "run",
                        lambda *args, **kwargs: SimpleNamespace(stdout=f"GPU-{CUDA_UUID}, 5, 16\n"))


def timed(seconds: float, label: str = "t") -> Timing:
    """A timing whose five samples all took ``seconds``."""
    return Timing(label, (seconds,) * 5)


def cpuinfo(cores=2, flags="fpu sse sse2 avx avx2 fma avx512f", mhz=2000.0, threads_per_core=1):
    """/proc/cpuinfo as Linux writes it for such a CPU (one block per logical core)."""
    blocks = []
    for i in range(cores * threads_per_core):
        blocks.append(
            f"processor\t: {i}\nmodel name\t: Test CPU\ncpu MHz\t\t: {mhz}\nphysical id\t: 0\n"
            f"core id\t\t: {i // threads_per_core}\nflags\t\t: {flags}\n"
        )
    return "\n".join(blocks)
