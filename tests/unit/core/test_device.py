import platform
import sys

import pytest
import torch

from gpukit.core import device as dev


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    monkeypatch.delenv(dev.DEVICE_ENV, raising=False)
    monkeypatch.delenv(dev.REQUIRE_GPU_ENV, raising=False)


def fake_hardware(monkeypatch, cuda=False, mps=False, cuda_count=1):
    monkeypatch.setattr(dev, "cuda_available", lambda: cuda)
    monkeypatch.setattr(dev, "mps_available", lambda: mps)

    class FakeCuda:
        @staticmethod
        def device_count():
            return cuda_count if cuda else 0

    class FakeTorch:
        cuda = FakeCuda

    monkeypatch.setattr(dev, "_torch", lambda: FakeTorch)


@pytest.mark.parametrize(
    ("cuda", "mps", "expected"),
    [(True, True, "cuda"), (True, False, "cuda"), (False, True, "mps"), (False, False, "cpu")],
)
def test_preference_order_is_cuda_then_mps_then_cpu(monkeypatch, cuda, mps, expected):
    fake_hardware(monkeypatch, cuda=cuda, mps=mps)
    assert dev.pick_device() == expected


def test_environment_variable_overrides_the_automatic_choice(monkeypatch):
    fake_hardware(monkeypatch, cuda=True)
    monkeypatch.setenv(dev.DEVICE_ENV, "CPU")
    assert dev.pick_device() == "cpu"


def test_argument_overrides_environment_variable(monkeypatch):
    fake_hardware(monkeypatch, cuda=True, cuda_count=2)
    monkeypatch.setenv(dev.DEVICE_ENV, "cpu")
    assert dev.pick_device("cuda:1") == "cuda:1"


def test_unknown_device_string_is_named_in_the_error(monkeypatch):
    fake_hardware(monkeypatch)
    with pytest.raises(ValueError, match="'gpu0'"):
        dev.pick_device("gpu0")
    monkeypatch.setenv(dev.DEVICE_ENV, "tpu")
    with pytest.raises(ValueError, match="'tpu'"):
        dev.pick_device()


def test_non_string_device_is_a_type_error():
    with pytest.raises(TypeError, match="int 0"):
        dev.validate_device(0)


def test_requesting_an_absent_device_fails_instead_of_falling_back(monkeypatch):
    fake_hardware(monkeypatch, cuda=True, cuda_count=1)
    with pytest.raises(RuntimeError, match="'cuda:3'.*not available.*cuda:0, cpu"):
        dev.pick_device("cuda:3")
    with pytest.raises(RuntimeError, match="'mps'"):
        dev.pick_device("mps")


def test_require_gpu_turns_a_cpu_choice_into_an_error(monkeypatch):
    fake_hardware(monkeypatch)
    monkeypatch.setenv(dev.REQUIRE_GPU_ENV, "1")
    with pytest.raises(dev.NoGPUError, match="GPUKIT_REQUIRE_GPU"):
        dev.pick_device()
    with pytest.raises(dev.NoGPUError):
        dev.announce_device()


def test_require_gpu_passes_when_a_gpu_is_there(monkeypatch):
    fake_hardware(monkeypatch, mps=True)
    monkeypatch.setenv(dev.REQUIRE_GPU_ENV, "yes")
    assert dev.pick_device() == "mps"


@pytest.mark.parametrize("value", ["0", "false", "", "no"])
def test_require_gpu_off_values(monkeypatch, value):
    fake_hardware(monkeypatch)
    monkeypatch.setenv(dev.REQUIRE_GPU_ENV, value)
    assert dev.pick_device() == "cpu"


def test_unreadable_require_gpu_value_is_an_error(monkeypatch):
    monkeypatch.setenv(dev.REQUIRE_GPU_ENV, "maybe")
    with pytest.raises(ValueError, match="'maybe'"):
        dev.gpu_required()


def test_available_devices_always_ends_with_the_cpu(monkeypatch):
    fake_hardware(monkeypatch, cuda=True, cuda_count=2, mps=False)
    assert dev.available_devices() == ["cuda:0", "cuda:1", "cpu"]


def test_announce_device_prints_the_real_choice(capsys):
    chosen = dev.announce_device()
    printed = capsys.readouterr().out
    assert printed.startswith(f"Running on {chosen}")


def test_skip_unless_prints_the_reason_only_when_skipping(capsys):
    assert dev.skip_unless(True, "not shown") is True
    assert capsys.readouterr().out == ""
    assert dev.skip_unless(False, "pinned memory needs CUDA") is False
    assert capsys.readouterr().out == "Skipped: pinned memory needs CUDA\n"


# --- the GPU branches, through the real torch with its CUDA and MPS queries patched ---------------------


class FakeProperties:
    def __init__(self, name, total_memory):
        self.name, self.total_memory = name, total_memory


def fake_torch(monkeypatch, *, cuda_count=0, mps=False, current=0):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda_count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: cuda_count)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda index: FakeProperties(f"Fake GPU {index}", (index + 1) * 40 << 30)
    )
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)


def test_availability_is_read_from_torch(monkeypatch):
    fake_torch(monkeypatch, cuda_count=2, mps=True)
    assert dev.cuda_available() and dev.mps_available()
    assert dev.available_devices() == ["cuda:0", "cuda:1", "mps", "cpu"]
    assert dev.device_available("cuda") and dev.device_available("cuda:1") and not dev.device_available("cuda:2")


def test_without_torch_only_the_cpu_is_available(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    assert not dev.cuda_available() and not dev.mps_available()
    assert dev.available_devices() == ["cpu"]
    assert dev.pick_device() == "cpu"


def test_describe_cuda_device_names_the_card_and_its_memory(monkeypatch):
    fake_torch(monkeypatch, cuda_count=2, current=1)
    assert dev.describe_device("cuda:0") == "cuda:0 (Fake GPU 0, 40.00 GiB)"
    assert dev.describe_device("cuda") == "cuda:1 (Fake GPU 1, 80.00 GiB)"  # plain "cuda" is the current device


def test_describe_mps_device(monkeypatch):
    fake_torch(monkeypatch, mps=True)
    monkeypatch.setattr(platform, "machine", lambda: "arm64")
    monkeypatch.setattr(platform, "mac_ver", lambda: ("14.5", ("", "", ""), "arm64"))
    assert dev.describe_device("mps") == "mps (Apple GPU on arm64, 14.5)"


def test_describe_absent_device_is_an_error(monkeypatch):
    fake_torch(monkeypatch, cuda_count=1)
    with pytest.raises(RuntimeError, match="'cuda:1' is not available here; available: cuda:0, cpu"):
        dev.describe_device("cuda:1")
    with pytest.raises(RuntimeError, match="'mps'"):
        dev.describe_device("mps")


def test_describe_cpu():
    assert dev.describe_device("cpu").startswith("cpu (")


def test_environment_picks_a_fake_second_gpu_and_announces_it(monkeypatch, capsys):
    fake_torch(monkeypatch, cuda_count=2)
    monkeypatch.setenv(dev.DEVICE_ENV, "cuda:1")
    monkeypatch.setenv(dev.REQUIRE_GPU_ENV, "1")
    assert dev.announce_device() == "cuda:1"
    assert capsys.readouterr().out == "Running on cuda:1 (Fake GPU 1, 80.00 GiB)\n"


def test_automatic_choice_with_real_torch_queries(monkeypatch):
    fake_torch(monkeypatch, cuda_count=1, mps=True)
    assert dev.pick_device() == "cuda"
    fake_torch(monkeypatch, mps=True)
    monkeypatch.setenv(dev.REQUIRE_GPU_ENV, "true")
    assert dev.pick_device() == "mps"


def test_require_gpu_rejects_a_forced_cpu(monkeypatch):
    fake_torch(monkeypatch, cuda_count=1)
    monkeypatch.setenv(dev.DEVICE_ENV, "cpu")
    monkeypatch.setenv(dev.REQUIRE_GPU_ENV, "1")
    with pytest.raises(dev.NoGPUError, match="available: cuda:0, cpu"):
        dev.pick_device()


def test_devices_to_run_checks_each_name_once(monkeypatch):
    monkeypatch.setattr(dev, "available_devices", lambda: ["cuda:0", "cpu"])
    monkeypatch.setattr(dev, "device_available", lambda d: d in ("cuda", "cuda:0", "cpu"))
    assert dev.devices_to_run() == ["cuda:0", "cpu"]
    assert dev.devices_to_run(["CPU", "cpu", "cuda"]) == ["cpu", "cuda"]
    assert dev.devices_to_run("cpu") == ["cpu"]
    with pytest.raises(ValueError, match=r"\['mps'\] are not present here; present: cuda:0, cpu"):
        dev.devices_to_run(["cpu", "mps"])
    with pytest.raises(ValueError, match="no devices to measure"):
        dev.devices_to_run([], what="measure")


def torch_probes(root) -> list[str]:
    """Each call of torch.cuda.is_available() or torch.backends.mps.is_available() in gpukit's code (not its
    docstrings) outside gpukit/core/device.py and the diagnostic commands (doctor, preflight), which report what
    each probe says on its own."""
    import ast

    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative == "core/device.py" or relative.startswith("commands/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "is_available"
                    and ast.unparse(node.func.value) in ("torch.cuda", "torch.backends.mps")):
                found.append(f"{relative}, line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_device_probes_live_in_core_device(tmp_path):
    """gpukit asks whether CUDA or MPS is usable through cuda_available() and mps_available(): one place to read,
    and one to fake."""
    from pathlib import Path

    import gpukit

    probes = torch_probes(Path(gpukit.__file__).parent)
    assert not probes, "use gpukit.core.device's cuda_available() or mps_available() instead of:\n" + "\n".join(probes)
    (tmp_path / "topic.py").write_text('"""torch.cuda.is_available() in prose"""\nimport torch\n\n'
                                       "ok = torch.backends.mps.is_available()\n")
    assert torch_probes(tmp_path) == ["topic.py, line 4: torch.backends.mps.is_available()"]
