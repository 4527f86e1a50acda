"""What gpukit reads about this machine (gpukit.core.machine): /proc/cpuinfo, lscpu, nvidia-smi, torch's GPU UUIDs.

The GPUs' tests use a made-up nvidia-smi for a node with two GPUs: like the real one it lists them in PCI bus order
whatever ``CUDA_VISIBLE_DEVICES`` says, so a job given the node's second GPU (``CUDA_VISIBLE_DEVICES=1``) sees it as
torch's ``cuda:0`` while nvidia-smi's first line is the other GPU.
"""

import os
import stat
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch

from booktools import bench
from gpukit.core import machine
from gpukit.core.machine import parse_cpuinfo, parse_lscpu_max_mhz
from tests.support.made_up_machines import cpuinfo


def test_parse_cpuinfo_counts_physical_cores_and_reads_flags():
    info = parse_cpuinfo(cpuinfo(cores=4, threads_per_core=2, mhz=2500.5))
    assert info["cores"] == 4 and info["logical"] == 8
    assert info["mhz"] == 2500.5
    assert {"avx2", "fma"} <= info["flags"]


@pytest.mark.parametrize(
    ("text", "mhz"),
    [
        ("Architecture: x86_64\nCPU max MHz:                         3500.0000\nCPU min MHz: 400.0000\n", 3500.0),
        ("CPU max MHz: 2000.0000\nCPU max MHz: 3000.0000\n", 3000.0),  # two kinds of core
        ("cpu max mhz: 3100,5000\n", 3100.5),  # a decimal comma
        ("Architecture: x86_64\nBogoMIPS: 4890.80\n", None),  # a virtual machine reports none
        ("CPU max MHz: -\n", None),
        ("CPU max MHz: 0\n", None),
        ("", None),
    ],
)
def test_parse_lscpu_max_mhz(text, mhz):
    assert parse_lscpu_max_mhz(text) == mhz


def test_this_machines_lscpu_output_parses():
    text = machine._lscpu_text()
    if text is None:
        pytest.skip("no lscpu here")
    mhz = parse_lscpu_max_mhz(text)
    assert mhz is None or mhz > 100


def test_the_cpus_name_and_cores_come_from_cpuinfo(monkeypatch, tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(cpuinfo(cores=3, threads_per_core=2))
    monkeypatch.setattr(machine, "CPUINFO", path)
    assert machine.cpu_name() == "Test CPU" and machine.physical_cores() == 3
    monkeypatch.setattr(machine, "CPUINFO", tmp_path / "missing")  # macOS, Windows
    assert machine.physical_cores() is None and machine.cpu_name()


def test_the_driver_is_read_from_the_kernel_module_without_nvidia_smi(monkeypatch, tmp_path):
    version = tmp_path / "version"
    version.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs)\n"
                       "GCC version:  gcc version 13.3.0\n")
    monkeypatch.setattr(machine, "_nvidia_smi", lambda arguments: None)
    assert machine.kernel_module_driver(version) == "580.95.05"
    monkeypatch.setattr(machine, "DRIVER_FILE", version)
    assert machine.kernel_module_driver() == "580.95.05" and machine.driver_version() == "580.95.05"
    monkeypatch.setattr(machine, "DRIVER_FILE", tmp_path / "absent")
    assert machine.kernel_module_driver() is None and machine.driver_version() is None


# ------------------------------------------------------------------------------------------ two GPUs
# The node's GPUs in PCI bus order, as nvidia-smi lists them: (uuid, name, max SM clock, max memory clock).
NODE = (("GPU-11111111-aaaa-bbbb-cccc-000000000001", "NVIDIA A100-SXM4-40GB", "1410", "1215"),
        ("GPU-22222222-aaaa-bbbb-cccc-000000000002", "NVIDIA H100 80GB HBM3", "1980", "2619"))

NVIDIA_SMI = textwrap.dedent('''\
    #!{python}
    """A made-up nvidia-smi for a node with two GPUs: every GPU in PCI order, whatever CUDA_VISIBLE_DEVICES says."""
    import sys

    NODE = {node!r}
    FIELDS = {{"uuid": 0, "name": 1, "clocks.max.sm": 2, "clocks.max.memory": 3, "driver_version": None}}
    args = sys.argv[1:]
    query = next(a.split("=", 1)[1] for a in args if a.startswith("--query-gpu="))
    chosen = [a.split("=", 1)[1] for a in args if a.startswith("--id=")]
    gpus = [gpu for i, gpu in enumerate(NODE) if not chosen or chosen[0] in (str(i), gpu[0])]
    for gpu in gpus:
        print(", ".join("580.95.05" if FIELDS[f] is None else gpu[FIELDS[f]] for f in query.split(",")))
    ''')


class CUuuid:
    """torch._C._CUuuid as torch/csrc/cuda/Module.cpp binds it: str() is the 8-4-4-4-12 hex, without 'GPU-'."""

    def __init__(self, text):
        self.text = text

    def __str__(self):
        return self.text


@pytest.fixture
def second_gpu_of_two(fake_cuda, monkeypatch, tmp_path):
    """A job given the node's second GPU: CUDA_VISIBLE_DEVICES=1, so torch's cuda:0 is nvidia-smi's second line."""
    folder = tmp_path / "bin"
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text(NVIDIA_SMI.format(python=sys.executable, node=NODE))
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    visible = NODE[1]
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: visible[1])
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: SimpleNamespace(
        name=visible[1], total_memory=80 * 2**30, major=9, minor=0, multi_processor_count=132,
        uuid=CUuuid(visible[0].removeprefix("GPU-"))))
    return visible


def test_nvidia_smi_lists_the_node_in_pci_order_whatever_cuda_sees(second_gpu_of_two):
    assert [line.split(", ")[0] for line in machine.nvidia_smi_query("uuid")] == [gpu[0] for gpu in NODE]


def test_torchs_uuid_is_written_as_nvidia_smi_writes_it(second_gpu_of_two):
    assert machine.cuda_uuid(0) == second_gpu_of_two[0]


def test_clocks_are_those_of_the_gpu_torch_uses(second_gpu_of_two):
    clocks, how = machine.gpu_clocks(machine.cuda_uuid(0))
    assert clocks == {"sm_max_mhz": 1980.0, "memory_max_mhz": 2619.0}, how
    assert second_gpu_of_two[0] in how
    assert bench.device_clocks("cuda:0") == (clocks, None)


def test_a_bench_record_carries_its_own_gpus_clocks(second_gpu_of_two):
    """The record of `python -m booktools bench` on the job's GPU: the H100's clocks, not the A100's of the first
    line."""
    record = bench.run_suite(["cuda:0"], quick=True, progress=False, machine="the second GPU of two",
                             search_seconds=0.01)
    assert record["devices"]["cuda:0"]["clocks"] == {"sm_max_mhz": 1980.0, "memory_max_mhz": 2619.0}


@pytest.mark.parametrize(("uuid", "why"), [
    (None, "torch gives no UUID"),
    ("GPU-99999999-aaaa-bbbb-cccc-000000000009", "lists no GPU with the UUID GPU-99999999"),  # a MIG instance
])
def test_no_match_gives_no_clocks_and_says_why(second_gpu_of_two, uuid, why):
    clocks, how = machine.gpu_clocks(uuid)
    assert clocks is None and why in how


def test_without_a_uuid_from_torch_a_record_has_no_clocks_and_a_note(fake_cuda, monkeypatch):
    given = vars(torch.cuda.get_device_properties(0))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: SimpleNamespace(
        **{key: value for key, value in given.items() if key != "uuid"}))
    monkeypatch.setattr(machine, "_nvidia_smi", lambda arguments: ["GPU-11111111-aaaa-bbbb-cccc-000000000001, 1410, "
                                                                   "1215"])
    record = bench.run_suite(["cuda:0"], quick=True, progress=False, machine="a GPU torch gives no UUID for",
                             search_seconds=0.01)
    assert record["devices"]["cuda:0"]["clocks"] is None
    assert any(note.startswith("cuda:0: no clocks: torch gives no UUID") for note in record["notes"])


def test_a_uuid_torch_cannot_give_is_none(monkeypatch):
    for odd in (None, CUuuid(""), CUuuid("not a uuid")):
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None, odd=odd: SimpleNamespace(uuid=odd))
        assert machine.cuda_uuid(0) is None
