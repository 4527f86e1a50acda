import numpy as np
import pytest
import torch

from gpukit.memory import device_memory, human_bytes, nbytes


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
