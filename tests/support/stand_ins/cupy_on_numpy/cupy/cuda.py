"""``cupy.cuda`` of the NumPy stand-in: one "device", ready unless CUDA_VISIBLE_DEVICES hides it (as CUDA would);
streams that are always done."""

from __future__ import annotations

import os

NAME = "CuPy stand-in on NumPy (no GPU)"


def _visible() -> int:
    """The one "GPU", unless CUDA_VISIBLE_DEVICES hides it: CUDA stops at the first entry that names no device."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return 1
    first = listed.split(",")[0].strip()
    return 1 if first in ("0", "GPU-stand-in") else 0


def is_available() -> bool:
    return _visible() > 0


class runtime:  # noqa: N801 (CuPy's module name)
    @staticmethod
    def getDeviceCount() -> int:  # noqa: N802 (CUDA's name)
        return _visible()

    @staticmethod
    def getDeviceProperties(device: int) -> dict:  # noqa: N802
        return {"name": NAME.encode(), "totalGlobalMem": 0, "major": 0, "minor": 0}

    @staticmethod
    def runtimeGetVersion() -> int:  # noqa: N802
        return 13000  # CUDA 13.0, as the cupy-cuda13x this stands in for


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
