"""torch.matmul and the clock stood in for the bench's tests (tests/booktools/test_bench*.py): products recorded,
a clock that moves a fixed step per reading, a device that cannot multiply in bfloat16."""

from types import SimpleNamespace

import torch

from gpukit.core import timing


def recorded_matmuls(monkeypatch, fake=None) -> list[dict]:
    """torch.matmul, recording each call's size ``n`` (its first operand's rows), ``shape`` (m, n, k), dtype,
    output tensor, operands, float32 matmul precision and (with the stand-in GPU ``fake``) its position in the
    stand-in's log."""
    calls, original = [], torch.matmul

    def matmul(a, b, *, out=None):
        calls.append({"n": a.shape[0], "shape": (a.shape[0], b.shape[1], a.shape[1]), "a": a, "b": b, "out": out,
                      "dtype": str(a.dtype).removeprefix("torch."), "precision": torch.get_float32_matmul_precision(),
                      "at": len(fake.log) if fake else None})
        return original(a, b, out=out)

    monkeypatch.setattr(torch, "matmul", matmul)
    return calls


def steady_clock(monkeypatch, seconds_per_reading: float) -> None:
    """Every reading of the clock (the host's, and the stand-in CUDA events', which read it) is
    ``seconds_per_reading`` later than the one before: each product timed between two readings takes exactly that."""
    clock = SimpleNamespace(now=0.0)

    def perf_counter():
        clock.now += seconds_per_reading
        return clock.now

    monkeypatch.setattr(timing.time, "perf_counter", perf_counter)


def no_bfloat16_products(monkeypatch, message: str) -> None:
    """torch.matmul on a device that cannot multiply in bfloat16: it raises RuntimeError(``message``) there."""
    original = torch.matmul

    def matmul(a, b, *, out=None):
        if a.dtype == torch.bfloat16:
            raise RuntimeError(message)
        return original(a, b, out=out)

    monkeypatch.setattr(torch, "matmul", matmul)
