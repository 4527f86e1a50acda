"""``cupy.cuda`` of the NumPy stand-in: one "device", always ready; streams and events that keep the host's time."""

from __future__ import annotations

import time

NAME = "CuPy stand-in on NumPy (no GPU)"


def is_available() -> bool:
    return True


class runtime:  # noqa: N801 (CuPy's module name)
    @staticmethod
    def getDeviceCount() -> int:  # noqa: N802 (CUDA's name)
        return 1

    @staticmethod
    def getDeviceProperties(device: int) -> dict:  # noqa: N802
        return {"name": NAME.encode(), "totalGlobalMem": 0, "major": 0, "minor": 0}

    @staticmethod
    def runtimeGetVersion() -> int:  # noqa: N802
        return 0


class Device:
    def __init__(self, device=None):
        self.id = 0 if device is None else int(device)

    def synchronize(self) -> None:
        return None

    def use(self) -> None:
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class Stream:
    def __init__(self, null=False, non_blocking=False, ptds=False):
        self.null = null

    def synchronize(self) -> None:
        return None

    def use(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def get_current_stream(device_id=-1) -> Stream:
    return Stream(null=True)


class Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.time = None

    def record(self, stream=None) -> None:
        self.time = time.perf_counter()

    def synchronize(self) -> None:
        return None


def get_elapsed_time(start_event: Event, end_event: Event) -> float:
    """Milliseconds between two events, as CuPy's function returns them."""
    return (end_event.time - start_event.time) * 1e3
