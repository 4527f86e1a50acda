"""The stamp under a lesson's title: what the page needs, and where and with what it last ran.

The stamp is printed by the run itself, so on the website it describes the run the page shows (device, PyTorch
version, date) and in a reader's notebook it describes the reader's own run. A page built from a kept GPU run
(data/gpu-runs) shows that run's stamp, and the site build puts a note under it saying whose run it is, or that
the lesson's GPU run is out of date (the book's machinery, ``booktools.gpu_runs``). :func:`read_stamp` reads a
stamp back, from a page's text or a notebook's outputs.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass

from gpukit.core.device import describe_device
from gpukit.core.optional import installed_version

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
    if needs not in NEEDS:
        raise ValueError(f"needs must be one of {sorted(NEEDS)}, not {needs!r}")
    return LessonStamp(needs, describe_device(device), installed_version("torch"), today or datetime.date.today())


# The stamp's last sentence as text: "Last executed: 2026-11-26 on cuda:0 (NVIDIA H100 80GB HBM3, 79.2 GiB), with
# PyTorch 2.11.0+cu130." (the Markdown's form, its ** and ` gone, or a page's text), or "Last executed on ..." (the
# plain form).
_STAMP = re.compile(r"Last executed(?::| on) (?P<date>\d{4}-\d{2}-\d{2}) on (?P<device>.+?), "
                    r"with (?P<torch>no PyTorch|PyTorch \S+?)\.(?=\s|$)")


def read_stamp(text: str) -> dict[str, str] | None:
    """The ``date``, ``device`` and ``torch`` of the first stamp in ``text`` (a page's text with its tags
    removed, or a stamp's Markdown), or None where it has none."""
    found = _STAMP.search(" ".join(text.replace("**", "").replace("`", "").split()))
    return {key: found[key] for key in ("date", "device", "torch")} if found else None


def notebook_stamp(notebook: Mapping) -> dict[str, str] | None:
    """The stamp an executed notebook shows (the Markdown output of its stamp cell), as :func:`read_stamp`."""
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            markdown = output.get("data", {}).get("text/markdown")
            text = "".join(markdown) if isinstance(markdown, list) else markdown or ""
            if "Last executed" in text:
                return read_stamp(text)
    return None
