"""``cupyx`` of the NumPy stand-in (see ``cupy``): pinned host arrays are plain NumPy arrays here."""

from __future__ import annotations

import numpy as _np

from . import profiler  # noqa: F401


def empty_pinned(shape, dtype=float, order="C"):
    return _np.empty(shape, dtype=dtype, order=order)
