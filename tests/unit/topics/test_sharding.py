import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from gpukit.topics import sharding
from gpukit.topics.sharding import describe_shards


def child_env() -> dict[str, str]:
    """This environment without a host device count of its own: the child's count is the test's."""
    return {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}


def run_child(script: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          env=child_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def fake_shard(device_name, device_id, index, shape):
    device = type("FakeDevice", (), {"id": device_id, "__str__": lambda self: device_name})()
    return SimpleNamespace(device=device, index=index, data=SimpleNamespace(shape=shape))


def test_shards_on_fake_gpus_are_listed_in_device_order():
    """What two CUDA devices would show, without a GPU: rows split in two, listed by device id."""
    array = SimpleNamespace(addressable_shards=[
        fake_shard("cuda:1", 1, (slice(4, 8), slice(None)), (4, 6)),
        fake_shard("cuda:0", 0, (slice(0, 4), slice(None)), (4, 6)),
    ])
    assert describe_shards(array, "data") == ["cuda:0 holds data[0:4, :], shape (4, 6)",
                                              "cuda:1 holds data[4:8, :], shape (4, 6)"]


def test_index_text_covers_steps_open_ends_and_scalars():
    assert sharding._format_index((slice(None, 3), slice(2, None), slice(0, 8, 2))) == ":3, 2:, 0:8:2"
    assert sharding._format_index((1, slice(None))) == "1, :"
    assert sharding._format_index(()) == "()"


def test_describe_shards_needs_a_jax_array():
    with pytest.raises(TypeError, match="needs a JAX array, not list"):
        describe_shards([1, 2, 3])


def test_four_host_devices_really_appear_and_hold_the_pieces():
    """The real thing, in a fresh process: the count has to be set before JAX starts."""
    pytest.importorskip("jax")
    lines = run_child("""
        import jax
        jax.config.update("jax_num_cpu_devices", 4)  # as notebook 08 does, before JAX starts
        import jax.numpy as jnp
        import numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        from gpukit.topics.sharding import describe_shards
        assert jax.device_count() == 4, jax.devices()
        mesh = Mesh(np.array(jax.devices()), ("rows",))
        x = jax.device_put(jnp.zeros((8, 3)), NamedSharding(mesh, PartitionSpec("rows")))
        print("\\n".join(describe_shards(x)))
        replicated = jax.device_put(jnp.zeros(5), NamedSharding(mesh, PartitionSpec()))
        print("\\n".join(describe_shards(replicated, "r")))
    """)
    assert lines[0:4] == [f"cpu:{i} holds x[{2 * i}:{2 * i + 2}, :], shape (2, 3)" for i in range(4)]
    assert lines[4:8] == [f"cpu:{i} holds r[:], shape (5,)" for i in range(4)]
