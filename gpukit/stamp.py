"""The stamp under a lesson's title: what the page needs, and where and with what it last ran.

The stamp is printed by the run itself, so on the website it describes the build that executed the page
(device, PyTorch version, date) and in a reader's notebook it describes the reader's own run.
"""

from __future__ import annotations

import datetime
import importlib.metadata
from dataclasses import dataclass

NEEDS = {
    "cpu": "CPU only",
    "gpu": "one GPU for its GPU parts; it runs on a CPU too, and says which cells it skipped",
    "gpus": "several GPUs for its multi-GPU parts; with fewer it runs on what there is, and says so",
}


@dataclass(frozen=True)
class LessonStamp:
    needs: str
    device: str
    torch_version: str | None
    date: datetime.date

    def text(self) -> str:
        torch = f"PyTorch {self.torch_version}" if self.torch_version else "no PyTorch"
        return (f"This page needs: {NEEDS[self.needs]}. "
                f"Last executed on {self.date.isoformat()} on {self.device}, with {torch}.")

    def __repr__(self) -> str:
        return self.text()

    def _repr_markdown_(self) -> str:
        torch = f"PyTorch {self.torch_version}" if self.torch_version else "no PyTorch"
        return (f"**This page needs:** {NEEDS[self.needs]}.  \n"
                f"**Last executed:** {self.date.isoformat()} on `{self.device}`, with {torch}.")


def lesson_stamp(needs: str, device: str, *, today: datetime.date | None = None) -> LessonStamp:
    """The stamp for a lesson that needs ``needs`` (``"cpu"``, ``"gpu"`` or ``"gpus"``), run on ``device``.

    The last expression of a cell, it shows as Markdown on the page and as one line of text elsewhere.
    """
    from .device import describe_device

    if needs not in NEEDS:
        raise ValueError(f"needs must be one of {sorted(NEEDS)}, not {needs!r}")
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = None
    return LessonStamp(needs, describe_device(device), torch_version, today or datetime.date.today())
