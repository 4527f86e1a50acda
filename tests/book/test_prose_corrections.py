"""Facts the prose had wrong or imprecise, corrected against the libraries' files and docs (issue 26, section 5).

Each claim names the page, what the old text said that must not come back, and what the corrected text must
say. The sources the corrections rest on:

- CuPy's wheel: `cupy-cuda13x` 14.2.0 (the pinned one) links the CUDA runtime statically (`cudaMalloc` and the
  other runtime functions are local symbols of `cupy_backends/cuda/api/runtime*.so`, and no module needs
  `libcudart`), while its modules need `libcublas.so.13`, `libcufft.so.12`, `libcurand.so.10`,
  `libcusolver.so.12`, `libcusparse.so.12` and `libnvrtc.so.13`, which the wheel does not carry; its `ctk` extra
  requires `cuda-toolkit[cublas,cudart,cufft,curand,cusolver,cusparse,nvrtc]==13.*` (the wheel's METADATA).
- Two CUDA majors in one environment: unsupported, and where they fail depends on the packages and their load
  order (at import, at the first library call, or two cuDNNs loaded at once): not "at the first call".
- A V100 or P100 under the book's stacks: PyTorch 2.13's table (`PYTORCH_RELEASES_CODE_CC`) has no kernels
  of its own for them, so its own kernels fail with "no kernel image"; cuBLAS 12.9 has code for both, and
  CUDA 13 dropped Maxwell, Pascal and Volta.
- PTX: the driver compiles it when it loads the kernel, which under lazy loading (CUDA 12.2 on Linux, 12.3
  everywhere; CUDA programming guide, "Lazy Loading") is the kernel's first use, not the program's start.
- FP64 tensor cores: A100, A30, H100, H200, GH200, B200 (NVIDIA's datasheets).
- JAX: one process per node or one per GPU; under Slurm or Open MPI `jax.distributed.initialize()` gives each
  process the GPU of its local rank (`jax/_src/clusters/cluster.py`: "single process per device").
- `np.from_dlpack` imports arrays from the CPU only (NumPy's documentation: `device` "must be 'cpu'").
- Python 3.14 starts multiprocessing workers by forkserver on Linux (Python 3.14's "What's new").
- Chapter 5: a signed 32-bit index overflows at 2³¹.
- Kernel launches in a profile: `cudaLaunchKernel`, and `cudaLaunchKernelExC` and `cuLaunchKernel` too
  (pytorch/pytorch pull request #99571); current Triton launches with the driver's `cuLaunchKernelEx`
  (`triton/backends/nvidia/driver.c` of the pinned Triton 3.7.1).
Issue 35, section 1, checked against the pinned PyTorch 2.13 and Triton 3.7.1 in the virtual environment:

- Chapter 17: NVLink 4's 450 GB/s is 7-9 times PCIe 5.0 x16's 63 and NDR InfiniBand's 50, which are about 1.3
  times apart; nccl#1264's figure is a peer-to-peer copy test, and NVLS reduces in the switch.
- Bytes per parameter: 16 with Adam in float32 or mixed precision, 8 in pure bfloat16 or float32 with SGD.
- Adam (`torch/optim/adam.py`): foreach's `_foreach_sqrt` makes a temporary of all the second moments, the
  per-tensor loop one tensor's at a time, the fused kernel none.
- `torchfrtrace -j` (`flight_recorder/components/builder.py`) prints the entries and exits before the analysis;
  gloo's work records into the flight recorder too (`ProcessGroupGloo.hpp`, `trace_id_`).
- NCCL's watchdog aborts by default (`TORCH_NCCL_ASYNC_ERROR_HANDLING`, `SkipCleanUp`); an exception comes
  only with `TORCH_NCCL_BLOCKING_WAIT`.
- FSDP2 shards with `_chunk_with_empty` (`torch.chunk`); `checkpoint` without `use_reentrant` warns and runs
  the reentrant variant (`torch/utils/checkpoint.py`).
- Chapter 16: an LU of an m x m complex matrix is about m³/3 complex multiply-adds, 8 m³/3 real FLOPs;
  tile and wave quantization (NVIDIA's "Matrix Multiplication Background User's Guide"); `max-autotune`
  sets `triton.cudagraphs` (`torch._inductor.list_mode_options`); a GPU's ceilings are the datasheet's.
- Outside the tensor cores the A10, A40, L4, L40 and L40S run float16 at the float32 rate.
- Slurm: `--gres=gpu:N` counts per node, `--gpus=N` per job; `nvidia-smi` shows only the job's GPUs under
  `ConstrainDevices=yes`. The driver caps CUDA's major version (minor-version compatibility).
- Chapter 6: the ~305 MiB left in the Clemson workshop's readings is the CUDA context that the first
  `.to(device)` created (its first `nvidia-smi` lists no process of its own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import nbformat
import pytest

from tests.support.booktoc import ROOT


@dataclass(frozen=True)
class Claim:
    page: str  # a path under the book's root
    what: str
    wrong: tuple[str, ...] = ()  # regular expressions the page must not match (the old wording)
    right: tuple[str, ...] = ()  # regular expressions the page must match (the corrected fact)


CLAIMS = (
    Claim("chapters/troubleshooting.md", "CuPy's wheel carries the runtime, linked in, and no other library",
          wrong=(r"CuPy's wheels? holds? no CUDA libraries",),
          right=(r"links the CUDA runtime into itself", r"cuBLAS, cuFFT, cuRAND, cuSOLVER, cuSPARSE, NVRTC")),
    Claim("chapters/00-setup.md", "CuPy's wheel carries the runtime, linked in, and no other library",
          wrong=(r"which hold none",), right=(r"links only the CUDA runtime into itself",)),
    Claim("chapters/glossary.md", "pip's CuPy brings its libraries only with the ctk extra",
          wrong=(r"PyTorch and CuPy bring the libraries",), right=(r"only with its `ctk` extra",)),
    Claim("notebooks/11-slurm.ipynb", "CuPy's wheel carries the runtime, linked in, and no other library",
          wrong=(r"CuPy's wheel holds none",), right=(r"links only the CUDA runtime into itself",)),
    Claim("chapters/00-setup.md", "two CUDA majors fail typically at import or the first library call",
          wrong=(r"cuDNN and fail at the first call",), right=(r"typically fails at import or at the first call",)),
    Claim("chapters/which-library.md", "two CUDA majors fail typically at import or the first library call",
          wrong=(r"copies of cuBLAS and fail at the first call",), right=(r"typically fails at import",)),
    Claim("chapters/troubleshooting.md", "two CUDA majors fail where the load order decides",
          wrong=(r"one: expect an error naming a library",), right=(r"support no such mix",)),
    Claim("chapters/00-setup.md", "on a V100 only PyTorch's own kernels fail with 'no kernel image'",
          wrong=(r"its first CUDA operation fails with \"no kernel image",),
          right=(r"one of PyTorch's own kernels",)),
    Claim("chapters/troubleshooting.md", "on a V100 only PyTorch's own kernels fail with 'no kernel image'",
          right=(r"Only PyTorch's own kernels\s+fail this way",)),
    Claim("chapters/troubleshooting.md", "PTX is compiled at the kernel's first use under lazy loading",
          wrong=(r"compiles, when the program\s+starts",), right=(r"lazy loading", r"first use")),
    Claim("chapters/glossary.md", "PTX is compiled at the kernel's first use under lazy loading",
          right=(r"lazy loading,\s+the default since CUDA 12\.2, at the kernel's first use",)),
    Claim("notebooks/05-autograd-custom-ops.ipynb", "PTX is compiled when the kernel is first used",
          right=(r"when the kernel is first used",)),
    Claim("chapters/glossary.md", "FP64 tensor cores on the A100, A30, H100, H200, GH200 and B200",
          wrong=(r"A100, H100 and H200\) float64",), right=(r"A100, A30, H100, H200, GH200 and B200\) float64",)),
    Claim("chapters/which-library.md", "JAX runs one process per node or one per GPU",
          wrong=(r"one process drives all the GPUs of a node:", r"JAX runs one process per node that drives"),
          right=(r"or one process per GPU",)),
    Claim("notebooks/10-multi-gpu.ipynb", "JAX runs one process per node or one per GPU",
          wrong=(r"JAX too runs one\s+process per node",), right=(r"one process per GPU",)),
    Claim("chapters/10-multi-gpu.md", "JAX runs one process per node or one per GPU",
          wrong=(r"JAX's other route: one process that drives",), right=(r"JAX also runs one process per GPU",)),
    Claim("chapters/which-library.md", "np.from_dlpack takes arrays from the CPU only",
          wrong=(r"and `np\.from_dlpack\(x\)` view another library's array in place, on the CPU\s+and on the GPU",),
          right=(r"`np\.from_dlpack\(x\)` only arrays on the CPU",)),
    Claim("chapters/instructor-notes.md", "Python 3.14 on Linux starts workers by forkserver",
          wrong=(r"On macOS and Windows, `DataLoader`\s+workers start by spawn",),
          right=(r"forkserver, the default on Linux from Python 3\.14",)),
    Claim("notebooks/05-autograd-custom-ops.ipynb", "a signed 32-bit index overflows at 2^31",
          wrong=(r"about two billion elements",), right=(r"2³¹ = 2,147,483,648",)),
    Claim("chapters/instructor-notes.md", "launches appear as cudaLaunchKernelExC, Triton's as cuLaunchKernelEx",
          wrong=(r"`cuLaunchKernel`, the driver API's, for Triton's",),
          right=(r"`cudaLaunchKernelExC`", r"`cuLaunchKernelEx`, the driver API's, for current Triton's")),
    Claim("notebooks/06-vram-and-errors.ipynb", "what stays after empty_cache is the CUDA context of .to(device)",
          wrong=(r"random-number kernels behind `randn` stay loaded",),
          right=(r"\*\*CUDA context\*\* that the first\s+`\.to\(device\)` created", r"came back in full")),
    # Issue 35, section 1.
    Claim("notebooks/17-training-at-scale.ipynb", "NVLink is 7-9 times PCIe and InfiniBand, 1.3 times apart",
          wrong=(r"each an order of magnitude apart", r"each about ten times apart"),
          right=(r"7 to 9 times as\s+fast as either of the others", r"only about 1\.3 times\s+apart",
                 r"7 to 9 times PCIe's or InfiniBand's, which are about 1\.3 times apart")),
    Claim("notebooks/17-training-at-scale.ipynb", "nccl#1264 is a peer-to-peer copy test; NVLS reduces in the switch",
          wrong=(r"measured bus bandwidths reach about 80 %",),
          right=(r"peer-to-peer copy test, not as NCCL's bus bandwidth", r"NVLink SHARP, `NVLS`",
                 r"the formula overstates the traffic")),
    Claim("notebooks/17-training-at-scale.ipynb", "8 bytes per parameter recipes need 56 GB",
          wrong=(r"whichever of the common recipes",),
          right=(r"pure bfloat16 with Adam or `float32` with plain SGD, bring it down to 56 GB",)),
    Claim("chapters/17-training-at-scale.md", "16 bytes per parameter is not every recipe's count",
          wrong=(r"whatever mixed-precision\s+recipe is used",), right=(r"8 in pure bfloat16",)),
    Claim("notebooks/17-training-at-scale.ipynb", "Adam: foreach makes a model-sized temporary, fused none",
          wrong=(r"without the temporary copies of the per-tensor loop",),
          right=(r"`torch\._foreach_sqrt` of all the second moments", r"the size\s+of one tensor at a time",
                 r"without those temporaries")),
    Claim("notebooks/17-training-at-scale.ipynb", "torchfrtrace -j skips the analysis; the recorder is not NCCL only",
          wrong=(r"\(NCCL only\)", r"keeps NCCL's last collectives"),
          right=(r"on gloo too", r"its `-j` only prints the entries, and skips that analysis")),
    Claim("notebooks/17-training-at-scale.ipynb", "NCCL's watchdog aborts; blocking wait raises; py-spy pauses",
          wrong=(r"waiting ranks raise instead of hanging", r"stack without\s+stopping it"),
          right=(r"the watchdog aborts the process by default", r"`TORCH_NCCL_BLOCKING_WAIT=1`",
                 r"pausing it\s+only for a moment", r"`--native`")),
    Claim("notebooks/17-training-at-scale.ipynb", "FSDP2 shards as torch.chunk does",
          wrong=(r"split evenly over the ranks",), right=(r"as `torch\.chunk` splits them", r"86, 86 and 84")),
    Claim("chapters/glossary.md", "FSDP2 shards as torch.chunk does",
          wrong=(r"rows split evenly",), right=(r"rows split as `torch\.chunk` splits them",)),
    Claim("notebooks/17-training-at-scale.ipynb", "kept leaves out block 0's input, which saved_bytes counts",
          right=(r"less one of them, block 0's\s+input `x`", r"so `saved_bytes` counts it")),
    Claim("notebooks/17-training-at-scale.ipynb", "reentrant checkpointing runs when use_reentrant is not passed",
          wrong=(r"default in some versions",), right=(r"when `use_reentrant` is not passed, with a warning",)),
    Claim("notebooks/16-performance-engineering.ipynb", "tile and wave quantization, from NVIDIA's matrix guide",
          wrong=(r"cuBLAS`? documentation asks", r"multiples of 64 or 128 fill the tensor cores' tiles and the waves"),
          right=(r"\"Matrix Multiplication Background User's Guide\"", r"\*\*Tile quantization\*\*",
                 r"7\.76 waves")),
    Claim("notebooks/16-performance-engineering.ipynb", "where 4104 lands is the measurement's to say",
          right=(r"Where a size such as 4104 \(a multiple of 8, not of 64\)\s+lands is the measurement's",)),
    Claim("notebooks/16-performance-engineering.ipynb", "a GPU's ceilings are the datasheet's",
          wrong=(r"the fastest copy each device reached \(or, for a GPU",),
          right=(r"For a GPU both\s+are its datasheet's",)),
    Claim("notebooks/16-performance-engineering.ipynb", "max-autotune also turns on CUDA graphs",
          right=(r"`max-autotune-no-cudagraphs`", r"both the tuning and the fewer launches")),
    Claim("notebooks/15-precision-and-data.ipynb", "A10, A40, L4, L40 and L40S run float16 at the float32 rate",
          wrong=(r"the rest of NVIDIA's data-centre GPUs too",),
          right=(r"A10, A40, L4, L40 and L40S compute it at the `float32` rate",)),
    Claim("notebooks/11-slurm.ipynb", "--gres counts per node, --gpus per job",
          wrong=(r"`--gpus=N` \(or `--gres=gpu:N`\)",), right=(r"N GPUs on each node of the job, not N in all",)),
    Claim("notebooks/11-slurm.ipynb", "nvidia-smi shows the job's GPUs only under ConstrainDevices=yes",
          wrong=(r"shows only the job's GPUs\. ",), right=(r"`ConstrainDevices=yes` in `cgroup\.conf`",)),
    Claim("chapters/glossary.md", "the driver caps the CUDA major version, not the minor",
          wrong=(r"caps the\s+newest CUDA a program can use",),
          right=(r"The cap is on the major version", r"minor-version compatibility")),
    Claim("notebooks/03-cupy.ipynb", "np.from_dlpack takes arrays from the CPU only",
          wrong=(r"It works on the CPU as on the GPU", r"on CPU and GPU alike"),
          right=(r"`np\.from_dlpack\(x\)` takes only arrays on the CPU", r"`np\.from_dlpack` takes only arrays")),
    Claim("notebooks/14-profiling.ipynb", "current Triton launches with cuLaunchKernelEx",
          wrong=(r"as \{term\}`Triton`'s are",),
          right=(r"current \{term\}`Triton` launches its kernels with `cuLaunchKernelEx`",)),
)


def page_text(page: str) -> str:
    """A chapter page's text, or a lesson's Markdown cells joined."""
    path = ROOT / page
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        return "\n\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    return path.read_text(encoding="utf-8")


def problems(text: str, claim: Claim) -> list[str]:
    found = [f"{claim.page} still says {pattern!r} ({claim.what})" for pattern in claim.wrong
             if re.search(pattern, text)]
    found += [f"{claim.page} does not say {pattern!r} ({claim.what})" for pattern in claim.right
              if not re.search(pattern, text)]
    return found


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda claim: f"{claim.page}: {claim.what}")
def test_the_page_states_the_corrected_fact(claim):
    assert problems(page_text(claim.page), claim) == []


def test_the_old_wording_is_caught():
    # Sentences of the pages as they were before the corrections.
    old = {
        "chapters/troubleshooting.md": "remove. CuPy's wheels hold no CUDA libraries at all: install them",
        "chapters/which-library.md": "CUDA 12 and CUDA 13 libraries side by side\n  load two copies of cuBLAS "
                                     "and fail at the first call.",
        "chapters/glossary.md": "(on the\n  A100, H100 and H200) float64.",
        "notebooks/17-training-at-scale.ipynb": "Between GPUs the bytes cross one of three kinds of link, each an "
                                                "order of magnitude apart:",
        "notebooks/03-cupy.ipynb": "`jax.numpy.from_dlpack(x)`.\nIt works on the CPU as on the GPU, so it runs here.",
        "notebooks/15-precision-and-data.ipynb": "the V100; `bfloat16` and TF32 since the A100); the rest of "
                                                 "NVIDIA's data-centre GPUs too,",
    }
    for page, text in old.items():
        claims = [claim for claim in CLAIMS if claim.page == page]
        assert any("still says" in line for claim in claims for line in problems(text, claim)), page
