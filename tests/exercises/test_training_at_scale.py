"""ex-scale-fully-shard's process group on a CUDA device, run on the CPU; and the chapter's planted device mistakes.

Where the lesson's device is a CUDA GPU the check makes a one-process NCCL group inside the learner's kernel, right
there in the notebook, and nbval (and `make gpu-check`) runs the solution's check right after the learner's, in the
same kernel. Here torch has no NCCL and no GPU, so the GPU branch runs with the predicate forced
(``dist.is_nccl_available``), a stand-in for the CUDA device that is current (``torch.cuda.current_device``,
``set_device``, ``synchronize``) and a stand-in for NCCL's group: ``init_process_group("nccl", ...)`` first checks
what torch's own init_process_group demands of ``device_id`` (torch/distributed/distributed_c10d.py: the
accelerator's type, an index, below the device count), notes what the process looked like at that moment, and
makes the group with gloo instead. The tests show that the group is NCCL, bound to the lesson's GPU (the current
device while it exists, as FSDP2 places a CUDA mesh's shards on the current device), on the loopback interface,
rendezvous through a file, and that it is gone afterwards with the kernel as it was: a later cell can make
another.

The planted device mistakes (``DEVICE_MISTAKES`` of tests/exercises/cases/training_at_scale.py): every device-code
exercise of the chapter has some; each is a wrong answer that computes the right thing on a CPU-only machine (the
checkpoint mistakes give the solution's output, gradients, saved bytes and recomputation order; a mesh left out
shards over CPU devices, as the given mesh does) and that the check still rejects there, by running the answer on
the meta device or by the name of its mesh's dimension (tests/exercises/test_planted_device_mistakes.py shows the
rejections)."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist

from gpukit.exercises import training_at_scale as scale
from gpukit.topics.distributed import loopback_interface
from tests.exercises.cases import training_at_scale as cases
from tests.exercises.cases import wrong_answer_named

GPUS = 2


class StandInGpus:
    """The CUDA devices a kernel on a two-GPU node has: which one is current, and the waits asked of each."""

    def __init__(self, monkeypatch):
        self.current = 0
        self.synchronized: list[torch.device] = []
        monkeypatch.setattr(torch.cuda, "current_device", lambda: self.current)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: GPUS)
        monkeypatch.setattr(torch.cuda, "set_device", self.set_device)
        monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: self.synchronized.append(device))

    def set_device(self, device):
        index = device if isinstance(device, int) else torch.device(device).index
        assert index is not None and 0 <= index < GPUS, f"set_device({device!r})"
        self.current = index


@pytest.fixture
def nccl_group(monkeypatch):
    """(the stand-in GPUs, the list of groups made: what each was asked and what the process looked like)."""
    gpus = StandInGpus(monkeypatch)
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    made: list[dict] = []
    real = dist.init_process_group

    def init_process_group(backend=None, **options):
        device_id = options.pop("device_id", None)
        if backend == "nccl" and device_id is not None:
            # What init_process_group checks of device_id (its "Sanity check device_id").
            assert isinstance(device_id, torch.device) and device_id.type == "cuda", device_id
            assert device_id.index is not None, "Please use a device_id with index."
            assert device_id.index < GPUS, f"device_id {device_id} is out of range"
        made.append({"backend": backend, "device_id": device_id, "current": gpus.current, **options,
                     **{name: os.environ.get(name) for name in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")}})
        real("gloo", **options)  # the stand-in for NCCL's group of one

    monkeypatch.setattr(dist, "init_process_group", init_process_group)
    for name in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        monkeypatch.delenv(name, raising=False)
    assert not dist.is_initialized()
    return gpus, made


@pytest.mark.parametrize("device, gpu", [("cuda:1", 1), ("cuda", 0)])
def test_on_a_gpu_the_checks_group_is_nccl_bound_to_the_lessons_gpu(nccl_group, device, gpu):
    gpus, made = nccl_group
    with scale._process_group(device):
        assert dist.is_initialized() and dist.get_world_size() == 1
        inside = gpus.current
    (group,) = made
    assert group["backend"] == "nccl"
    # Bound to the lesson's GPU ("cuda" is the current one): NCCL's communicator is formed on it at once.
    assert group["device_id"] == torch.device("cuda", gpu), group
    assert group["current"] == gpu and inside == gpu  # FSDP2 places a CUDA mesh's shards on the current device
    assert group["init_method"].startswith("file://") and (group["rank"], group["world_size"]) == (0, 1)
    assert group["NCCL_SOCKET_IFNAME"] == loopback_interface()  # NCCL's bootstrap listens on the loopback only
    # Afterwards: the GPU finished, the group is gone, the kernel's current device and environment are as they were.
    assert gpus.synchronized == [torch.device("cuda", gpu)]
    assert not dist.is_initialized()
    assert gpus.current == 0
    assert "NCCL_SOCKET_IFNAME" not in os.environ and "GLOO_SOCKET_IFNAME" not in os.environ


def test_the_solution_after_the_learners_answer_makes_a_group_of_its_own(nccl_group):
    """As nbval runs them: the learner's check fails in the middle (here: it raises), and the solution's check makes
    its group again in the same kernel."""
    gpus, made = nccl_group
    with pytest.raises(ValueError, match="the learner's answer"):
        with scale._process_group("cuda:1"):
            raise ValueError("the learner's answer")
    assert not dist.is_initialized() and gpus.current == 0
    with scale._process_group("cuda:1"):
        assert dist.is_initialized()
    assert [group["device_id"] for group in made] == [torch.device("cuda", 1)] * 2
    assert not dist.is_initialized()


def test_on_the_cpu_the_checks_group_is_gloo_and_leaves_the_gpus_alone(nccl_group):
    gpus, made = nccl_group
    with scale._process_group("cpu"):
        assert dist.is_initialized()
    (group,) = made
    assert group["backend"] == "gloo" and group["device_id"] is None
    assert group["GLOO_SOCKET_IFNAME"] == loopback_interface()
    assert gpus.current == 0 and gpus.synchronized == []
    assert not dist.is_initialized()


def test_a_gpu_error_at_the_end_still_ends_the_group_and_puts_the_device_back(nccl_group, monkeypatch):
    """A CUDA error surfaces at the next synchronisation, here the one before the group ends: the group must end all
    the same, or every later check in the kernel would find it and use it."""
    gpus, made = nccl_group

    def failing(device=None):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torch.cuda, "synchronize", failing)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        with scale._process_group("cuda:1"):
            pass
    assert not dist.is_initialized() and gpus.current == 0
    assert "NCCL_SOCKET_IFNAME" not in os.environ


# ------------------------------------------------------------------------------------------ planted device mistakes
# That the check rejects each planted mistake on the CPU is tests/exercises/test_planted_device_mistakes.py's to show;
# here: that a CPU alone would not have shown it.
@pytest.mark.parametrize("name", list(cases.DEVICE_MISTAKES["ex-scale-checkpoint"]))
def test_a_checkpoint_mistake_of_the_device_computes_the_right_thing_on_the_cpu(name):
    """What a CPU alone sees of each: the same output and gradients as the solution's, the same saved bytes, the
    blocks recomputed one at a time. Only the meta run tells it apart."""
    answer, _ = wrong_answer_named(cases, "ex-scale-checkpoint", name)
    blocks, x = scale._blocks_and_data("cpu")
    out, loss, saved, grads, again = scale._step(answer, blocks, x, watch_backward=True)
    right = scale._step(cases.checkpointed_forward, blocks, x, watch_backward=True)
    torch.testing.assert_close(out, right[0])
    torch.testing.assert_close(loss, right[1])
    for mine, theirs in zip(grads, right[3], strict=True):
        torch.testing.assert_close(mine, theirs)
    assert saved <= scale._MOST_SHARE * scale._step(scale._plain, blocks, x)[2]
    assert again == right[4] == list(reversed(range(scale._DEPTH)))
    assert scale._off_the_device(answer) is not None
    assert scale._off_the_device(cases.checkpointed_forward) is None


@pytest.mark.parametrize("name", list(cases.DEVICE_MISTAKES["ex-scale-fully-shard"]))
def test_a_mesh_left_out_shards_over_a_mesh_of_the_same_device_type_on_the_cpu(name):
    """On a CPU-only machine fully_shard's own mesh is of CPU devices, as the given one is: the device type cannot
    tell them apart, the name of the check's mesh dimension does."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    answer, _ = wrong_answer_named(cases, "ex-scale-fully-shard", name)
    model, _ = scale._shardable_model("cpu")
    with scale._process_group("cpu"):
        mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=scale._MESH_NAMES)
        answer(model, mesh)
        meshes = {(p.device_mesh.device_type, p.device_mesh.mesh_dim_names) for p in model.parameters()}
    assert {device_type for device_type, _ in meshes} == {"cpu"}
    assert ("cpu", scale._MESH_NAMES) in meshes or name == "_no_mesh"
    assert any(names != scale._MESH_NAMES for _, names in meshes)
