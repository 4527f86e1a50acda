import numpy as np
import pytest
import torch

from gpukit.core.memory import DeviceMemory, device_memory, human_bytes, nbytes


@pytest.mark.parametrize(
    ("shape", "dtype", "expected"),
    [
        ((10_000, 10_000), "float32", 400_000_000),
        ((1000, 1000, 1000), torch.float32, 4_000_000_000),
        (5, np.float64, 40),
        ((), "int8", 1),
        ((3, 0), "float32", 0),
        ((64, 3, 224, 224), torch.float16, 64 * 3 * 224 * 224 * 2),
    ],
)
def test_nbytes(shape, dtype, expected):
    assert nbytes(shape, dtype) == expected


def test_nbytes_agrees_with_numpy_and_torch():
    assert nbytes((7, 11), "complex64") == np.zeros((7, 11), np.complex64).nbytes
    tensor = torch.zeros(7, 11, dtype=torch.bfloat16)
    assert nbytes(tuple(tensor.shape), tensor.dtype) == tensor.element_size() * tensor.numel()


@pytest.mark.parametrize("shape", [(-1, 3), (2.5,), (True, 2), -4])
def test_nbytes_rejects_bad_dimensions_by_name(shape):
    with pytest.raises(ValueError, match="whole number >= 0"):
        nbytes(shape, "float32")


def test_nbytes_rejects_non_shape_and_unknown_dtype():
    with pytest.raises(TypeError, match="shape must be"):
        nbytes(None, "float32")
    with pytest.raises(TypeError, match="unknown dtype 'float33'"):
        nbytes((2, 2), "float33")


@pytest.mark.parametrize(
    ("count", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.00 KiB"), (1536, "1.50 KiB"), (400_000_000, "381.47 MiB"),
     (4 * 1024**3, "4.00 GiB"), (2 * 1024**6, "2048.00 PiB")],
)
def test_human_bytes(count, text):
    assert human_bytes(count) == text


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "12", None, True])
def test_human_bytes_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="byte count"):
        human_bytes(bad)


def test_cpu_memory_is_known_and_plausible():
    memory = device_memory("cpu")
    assert 0 < memory.free <= memory.total
    assert "free of" in str(memory)


def test_device_memory_rejects_unknown_and_absent_devices():
    with pytest.raises(ValueError, match="'ram'"):
        device_memory("ram")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="'cuda' is not available"):
            device_memory("cuda")


def test_cpu_memory_is_free_memory():
    assert device_memory("cpu").free_kind == "free"


def test_device_memory_keeps_its_three_field_form():
    memory = DeviceMemory("cuda:0", 1024, 2048)
    assert memory.free_kind == "free" and str(memory) == "cuda:0: 1.00 KiB free of 2.00 KiB"


def test_cuda_memory_comes_from_mem_get_info_for_that_device(monkeypatch):
    asked = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: asked.append(device) or (3 << 30, 80 << 30))
    memory = device_memory("cuda:1")
    assert asked == [torch.device("cuda:1")]
    assert (memory.device, memory.free, memory.total, memory.free_kind) == ("cuda:1", 3 << 30, 80 << 30, "free")
    assert str(memory) == "cuda:1: 3.00 GiB free of 80.00 GiB"
    with pytest.raises(RuntimeError, match="'cuda:2' is not available"):
        device_memory("cuda:2")


def fake_mps(monkeypatch, recommended, driver_allocated):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.mps, "recommended_max_memory", lambda: recommended)
    monkeypatch.setattr(torch.mps, "driver_allocated_memory", lambda: driver_allocated)


def test_mps_reports_headroom_not_free_memory(monkeypatch):
    fake_mps(monkeypatch, recommended=16 << 30, driver_allocated=4 << 30)
    memory = device_memory("mps")
    assert (memory.free, memory.total, memory.free_kind) == (12 << 30, 16 << 30, "headroom")
    text = str(memory)
    assert text.startswith("mps: 12.00 GiB headroom for this process")
    assert "recommended maximum 16.00 GiB" in text and "free of" not in text


def test_mps_headroom_is_never_negative(monkeypatch):
    fake_mps(monkeypatch, recommended=8 << 30, driver_allocated=9 << 30)
    assert device_memory("mps").free == 0


def test_absent_mps_is_an_error(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="'mps' is not available"):
        device_memory("mps")


# ------------------------------------------------------------------ process memory, PyTorch's CUDA allocator
def test_process_memory_sees_a_large_host_tensor():
    from gpukit.core.memory import process_memory

    before = process_memory()
    if before.resident is None:
        pytest.skip("this system reports no process memory")
    held = torch.ones(50_000_000)  # 200 MB, written
    during = process_memory()
    assert during.resident - before.resident > 150_000_000
    assert during.virtual >= during.resident
    del held
    assert "resident" in str(during) and "address space" in str(during)


def test_process_memory_reads_statm_without_psutil(monkeypatch):
    import builtins
    import io

    from gpukit.core import memory

    real_import, real_open = builtins.__import__, builtins.open

    def no_psutil(name, *args, **kwargs):
        if name == "psutil":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    def fake_open(path, *args, **kwargs):
        if path == "/proc/self/statm":
            return io.StringIO("300 100 10 1 0 50 0\n")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_psutil)
    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(memory.os, "sysconf", lambda name: 4096)
    assert memory.process_memory() == memory.ProcessMemory(100 * 4096, 300 * 4096)


def test_process_memory_unknown_is_none(monkeypatch):
    import builtins

    from gpukit.core import memory

    real_import = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *a, **k: (_ for _ in ()).throw(ImportError(name))
                        if name == "psutil" else real_import(name, *a, **k))
    monkeypatch.setattr(builtins, "open", lambda *a, **k: (_ for _ in ()).throw(OSError("no /proc")))
    result = memory.process_memory()
    assert result == memory.ProcessMemory(None, None) and str(result) == "resident unknown, address space unknown"
