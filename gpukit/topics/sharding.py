"""Several JAX devices: simulating them on a CPU, and saying where each piece of a sharded array lives.

A machine without GPUs can still run multi-device JAX code: JAX's CPU platform splits itself into several
"host devices" when its option ``jax_num_cpu_devices`` is set: ``jax.config.update("jax_num_cpu_devices", N)``
after ``import jax``, or the variable ``JAX_NUM_CPU_DEVICES=N`` before it (JAX reads an option's variable when it
defines the option, at import). JAX reads the option once, when it starts its CPU backend (at the first operation,
or the first ``jax.devices()``), and refuses a new value after that with a ``RuntimeError`` (JAX 0.10.2,
``jax/_src/xla_bridge.py``: ``num_cpu_devices``, validated by ``_validate_backend_not_initialized``). It is
JAX's own option for what ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` asked of XLA, and wins over that
flag where both are set. It touches the CPU platform only: on a GPU machine JAX's devices are the GPUs, and the
host devices are ``jax.devices("cpu")``.

:func:`describe_shards` prints what ``jax.debug.visualize_array_sharding`` draws (that needs the ``rich``
package): one line per piece of an array, with the device that holds it and the part of the array it is.
"""

from __future__ import annotations


def _format_index(index: tuple) -> str:
    """A tuple of slices as array-index text: ``(slice(0, 4), slice(None))`` -> ``'0:4, :'``."""
    parts = []
    for item in index:
        if isinstance(item, slice):
            start = "" if item.start is None else str(item.start)
            stop = "" if item.stop is None else str(item.stop)
            parts.append(f"{start}:{stop}" if item.step in (None, 1) else f"{start}:{stop}:{item.step}")
        else:
            parts.append(str(item))
    return ", ".join(parts) if parts else "()"


def describe_shards(array, name: str = "x") -> list[str]:
    """One line per piece of the JAX ``array`` held by this process: device, part of the array, shape.

    Replicated arrays show every device holding the whole array (``x[:, :]``). Pieces are listed in the
    order of their devices' ids.
    """
    shards = getattr(array, "addressable_shards", None)
    if shards is None:
        raise TypeError(f"describe_shards needs a JAX array, not {type(array).__name__}")
    lines = []
    for shard in sorted(shards, key=lambda s: s.device.id):
        lines.append(f"{shard.device} holds {name}[{_format_index(shard.index)}], shape {tuple(shard.data.shape)}")
    return lines
