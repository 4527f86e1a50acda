"""The one place that knows the array libraries: NumPy, PyTorch, CuPy and JAX.

Everything else in gpukit asks this module which library an array comes from, where it lives, how to
get its values as NumPy, and how to wait for the work behind it. A library is only ever used here when
the reader's program has already imported it: looking at an array must not pull in CuPy or JAX, and
waiting for a device must not wake a library that has queued nothing on it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

import numpy as np

from gpukit.core.device import mps_available, validate_device

# Module names under which each library's arrays are defined, mapped to the name readers know.
_LIBRARY_ALIASES = {"jaxlib": "jax"}
# How JAX names platforms, mapped to the device kinds used across gpukit (torch's names).
_JAX_PLATFORMS = {"gpu": "cuda", "cuda": "cuda", "rocm": "cuda", "cpu": "cpu", "metal": "mps", "mps": "mps"}


def library_of(obj) -> str:
    """``"numpy"``, ``"torch"``, ``"cupy"`` or ``"jax"``, else the top-level module of ``obj``'s type."""
    module = type(obj).__module__.split(".", 1)[0]
    return _LIBRARY_ALIASES.get(module, module)


def is_array(obj) -> bool:
    """True for anything array-like enough to compare: it has a shape and a dtype."""
    return hasattr(obj, "shape") and hasattr(obj, "dtype")


def device_kind(obj) -> str:
    """Where ``obj`` lives: ``"cpu"``, ``"cuda"``, ``"mps"`` or ``"meta"`` (torch's names, for every library)."""
    library = library_of(obj)
    if library == "numpy" or not hasattr(obj, "device"):
        return "cpu"
    if library == "torch":
        return obj.device.type
    if library == "cupy":
        return "cuda"
    if library == "jax":
        platform = _jax_devices(obj)[0].platform.lower()
        return _JAX_PLATFORMS.get(platform, platform)
    # Other libraries: read the device's name, as the array API standard leaves its type open.
    text = str(obj.device).lower()
    for kind in ("cuda", "mps", "meta"):
        if kind in text:
            return kind
    return "cuda" if "gpu" in text else "cpu"


def device_index(obj) -> int | None:
    """The CUDA device number of ``obj``, or ``None`` where there is none (CPU, MPS, a sharded JAX array)."""
    library = library_of(obj)
    if library == "torch" and obj.device.type == "cuda":
        return obj.device.index
    if library == "cupy":
        return int(obj.device.id)
    if library == "jax" and device_kind(obj) == "cuda":
        devices = _jax_devices(obj)
        if len(devices) == 1:
            return _jax_hardware_id(devices[0])
    return None


def to_numpy(obj) -> np.ndarray:
    """The values of ``obj`` as a NumPy array on the host, copied off the device if need be.

    torch dtypes that NumPy lacks (bfloat16, the float8 types) come back as float32 and complex32 as
    complex64, since ``Tensor.numpy()`` refuses them. A CPU tensor or NumPy array may share memory with
    the result, as ``numpy.asarray`` does.
    """
    library = library_of(obj)
    if library == "torch":
        return _torch_to_numpy(obj)
    if library == "cupy":
        # Blocking by default (synchronous with respect to the host), so the values are final on return.
        return sys.modules["cupy"].asnumpy(obj)
    return np.asarray(obj)


def _torch_to_numpy(tensor) -> np.ndarray:
    import torch  # already imported: the tensor came from it

    if tensor.device.type == "meta":
        raise ValueError("a tensor on the meta device has a shape and dtype but no values to convert")
    tensor = tensor.detach()
    if tensor.dtype.is_complex and tensor.dtype not in (torch.complex64, torch.complex128):
        tensor = tensor.to(torch.complex64)
    elif tensor.dtype.is_floating_point and tensor.dtype not in (torch.float16, torch.float32, torch.float64):
        tensor = tensor.to(torch.float32)
    # force=True is detach().cpu().resolve_conj().resolve_neg(): a lazily conjugated tensor gets its values.
    return tensor.numpy(force=True)


def synchronize(result=None, device=None) -> None:
    """Wait until the work behind ``result``, and everything queued on ``device``, has finished.

    ``result`` may be a torch tensor, a CuPy or JAX array, or a list, tuple or dict of them; NumPy arrays
    and plain values are already complete. ``device`` (``"cuda"``, ``"cuda:N"``, ``"mps"``, ``"cpu"``) waits
    for every array library that is loaded and has work on that device, for ``fn``s that return nothing.
    """
    if device is not None:
        _synchronize_device(str(device))
    _wait_for(result)


def _wait_for(result) -> None:
    if result is None:
        return
    if isinstance(result, (list, tuple)):
        for item in result:
            _wait_for(item)
        return
    if isinstance(result, Mapping):
        for item in result.values():
            _wait_for(item)
        return
    library = library_of(result)
    if library == "torch" and hasattr(result, "device"):
        _wait_for_torch_tensor(result)
    elif library == "cupy" and hasattr(result, "device"):
        # The array's own device, which need not be the current one: cupy.cuda.Device.synchronize waits
        # for all of that device's streams.
        result.device.synchronize()
    elif library == "jax" and hasattr(result, "block_until_ready"):
        result.block_until_ready()


def _wait_for_torch_tensor(tensor) -> None:
    torch = sys.modules["torch"]
    kind = tensor.device.type
    if kind == "cuda":
        torch.cuda.synchronize(tensor.device)
    elif kind == "mps":
        torch.mps.synchronize()
    elif kind == "cpu":
        # tensor.to("cpu", non_blocking=True) returns before the copy into this tensor has finished;
        # nothing on the tensor says which GPU it came from, so drain every GPU torch has touched.
        _drain_torch_gpus(torch)


def _drain_torch_gpus(torch) -> None:
    # is_initialized() is False until torch first touches CUDA, and then nothing of torch's is queued there.
    if torch.cuda.is_initialized():
        current = torch.cuda.current_device()
        for index in range(torch.cuda.device_count()):
            if index == current or _torch_reserved(torch, index):
                torch.cuda.synchronize(index)
    if _torch_mps_in_use(torch):
        torch.mps.synchronize()


def _torch_reserved(torch, index: int) -> bool:
    # Synchronising a device torch never used would create a CUDA context there (hundreds of MiB), so only
    # devices where torch's allocator holds memory, which any tensor copied from them needs, are drained.
    try:
        return torch.cuda.memory_reserved(index) > 0
    except RuntimeError:
        return True  # an allocator backend without statistics: waiting is the safe side


def _torch_mps_in_use(torch) -> bool:
    # torch has no is_initialized() for MPS; memory held by its Metal driver shows that MPS has been used.
    return bool(mps_available() and torch.mps.driver_allocated_memory() > 0)


def _synchronize_device(name: str) -> None:
    device = validate_device(name)
    kind, _, index_text = device.partition(":")
    index = int(index_text) if index_text else None
    torch = sys.modules.get("torch")
    if kind == "cpu":
        if torch is not None:
            _drain_torch_gpus(torch)  # pending copies into host memory count as CPU work
        return
    if kind == "cuda":
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.synchronize(device)
        cupy = sys.modules.get("cupy")
        if cupy is not None:
            # Device(None) is CuPy's current device, as "cuda" is torch's.
            cupy.cuda.Device(index).synchronize()
        _synchronize_jax(("gpu",), index)
    elif kind == "mps":
        if torch is not None and mps_available():
            torch.mps.synchronize()
        _synchronize_jax(("METAL",), None)


def _synchronize_jax(platforms: tuple[str, ...], index: int | None) -> None:
    """Wait for every live JAX array on those platforms (and device ``index``): JAX has no device-wide wait."""
    jax = sys.modules.get("jax")
    if jax is None or not jax_backends_initialized():
        return
    # effects_barrier waits for side effects (callbacks, prints) of functions already dispatched; results
    # are only waited for through arrays, so every live array on the device is waited for too.
    jax.effects_barrier()
    for platform in platforms:
        try:
            live = jax.live_arrays(platform)
        except RuntimeError:  # JAX has no such platform here
            continue
        for array in live:
            if array.is_deleted():
                continue
            if index is None or any(_jax_hardware_id(d) == index for d in _jax_devices(array)):
                array.block_until_ready()


def jax_backends_initialized() -> bool:
    """Whether JAX has started its backends in this process (without starting them): ``False`` where jax was
    not imported, or where JAX no longer has the private probe this reads."""
    # Asking JAX for its GPU arrays before it has started its backends would start them, and JAX's GPU
    # client preallocates most of the GPU's memory: fatal for a torch notebook that merely imported jax.
    # Only this private function can tell without starting them; if it moves, JAX is left alone and its
    # results are still waited for through block_until_ready.
    xla_bridge = sys.modules.get("jax._src.xla_bridge")
    probe = getattr(xla_bridge, "backends_are_initialized", None)
    return bool(probe is not None and probe())


def _jax_devices(array) -> list:
    devices = array.devices()
    return sorted(devices, key=lambda d: d.id) if isinstance(devices, (set, frozenset)) else list(devices)


def _jax_hardware_id(jax_device) -> int:
    # JAX's id is global across processes; local_hardware_id is the CUDA ordinal in this one.
    hardware_id = getattr(jax_device, "local_hardware_id", None)
    return int(jax_device.id if hardware_id is None else hardware_id)
