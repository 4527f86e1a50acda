"""A learner's function run on PyTorch's ``meta`` device, where a tensor made on the host, or moved there, shows.

On a CPU-only machine the lesson's device is the CPU, so a tensor made without ``device=`` (or brought to the host
with ``.cpu()``, ``.item()``, ``.numpy()``) is where it should be, and the check sees nothing; on a GPU the same
code fails or returns the result on the wrong device. The meta device stands in for the GPU: its tensors have a
shape, a dtype and a device but no values, and PyTorch refuses to mix them with host tensors as it refuses to mix
host and GPU tensors. An operation that has no meta version says nothing about devices and is not held against
the answer.
"""

from __future__ import annotations

from collections.abc import Callable

from gpukit.base.errors import error_line


def _tensors(value) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    return []


def host_use_on_meta(call: Callable[[], object]) -> str | None:
    """Run ``call()``, the learner's function given tensors on the meta device. What shows that it makes or moves a
    tensor on the host ("raised ...", "returned a tensor on cpu"), as the end of a sentence; None where nothing
    does."""
    try:
        result = call()
    except Exception as error:  # the reader's code: an error that names the device, or meta, is the answer's
        text = str(error)
        if "autocast" not in text and ("meta" in text or "device" in text):
            return f"raised {error_line(error).split('. ')[0].rstrip(' .!:;')}"
        return None
    off = sorted({t.device.type for t in _tensors(result) if t.device.type != "meta"})
    return f"returned a tensor on {off[0]}" if off else None
