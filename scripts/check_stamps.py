"""Check, before the book is published, that every lesson page is stamped as run where it should have been
(deploy.yml runs it):

- a page built from a kept GPU run (its note "Run on a GPU" names the run, ``data/gpu-runs/<run>``) carries that
  run's own stamp, as the run's manifest records it for the lesson (its date, device and PyTorch);
- every other page is stamped as run on the device the build was meant for: `cuda` for the GPU runner's build,
  `cpu` for the hosted one.

    python3 scripts/check_stamps.py cuda|cpu|mps [SITE_FOLDER]    (default: _build/html; the runs: data/gpu-runs)

A GPU runner that silently lost its GPU would otherwise publish a CPU book labelled as the GPU one, and a page
built from a GPU run could show a stamp that is not its run's. Plain Python, no dependencies: the runners' python3
runs it before anything is installed into it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

RUNS = Path("data") / "gpu-runs"
# The page's stamp (gpukit/core/stamp.py's read_stamp, repeated here because this runs before gpukit's
# requirements are installed), e.g. "Last executed: 2026-11-25 on cuda:0 (NVIDIA H100 80GB HBM3, 79.2 GiB), with
# PyTorch 2.11.0+cu130.", once the HTML tags are gone.
STAMP = re.compile(r"Last executed(?::| on) (?P<date>\d{4}-\d{2}-\d{2}) on (?P<device>.+?), "
                   r"with (?P<torch>no PyTorch|PyTorch \S+?)\.(?=\s|$)")
# The note under the stamp of a page built from a GPU run (booktools/gpu_runs.py's gpu_run_note): its admonition's
# class, and the run it names.
RUN_NOTE = re.compile(r'<div class="[^"]*\bgpu-run\b[^"]*">\s*<p class="admonition-title">Run on a GPU</p>'
                      r'(?:(?!</div>).)*?data/gpu-runs/(?P<run>[\w.+-]+)(?=<)', re.S)


def page_text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", html).replace("**", "").replace("`", "").split())


def read_stamp(text: str) -> dict[str, str] | None:
    found = STAMP.search(text)
    return {key: found[key] for key in ("date", "device", "torch")} if found else None


def kind(device: str) -> str:
    """"cuda" of "cuda:0 (NVIDIA H100 ...)", "cpu" of "cpu (...)"."""
    return re.split(r"[:\s(]", device, maxsplit=1)[0]


def expected_stamp(runs: Path, run: str, lesson: str) -> dict | str:
    """The stamp the run's manifest records for the lesson, or why there is none."""
    manifest_file = runs / run / "manifest.json"
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        return f"its page names the GPU run {run}, whose manifest cannot be read ({error})"
    stamp = manifest.get("lessons", {}).get(lesson, {}).get("stamp")
    return stamp if stamp else f"its page names the GPU run {run}, which holds no stamp for {lesson}"


def check_page(page: Path, expected: str, runs: Path) -> tuple[str, str | None]:
    """(what the page shows, why it is wrong or None)."""
    html = page.read_text(encoding="utf-8")
    stamp = read_stamp(page_text(html))
    if stamp is None:
        return f"{page.name}: no stamp", "no stamp"
    note = RUN_NOTE.search(html)
    if note is None:
        shown = f"{page.name}: {stamp['device']}"
        return shown, None if kind(stamp["device"]) == expected else f"stamped as run on {kind(stamp['device'])}"
    run = note["run"]
    shown = f"{page.name}: {stamp['device']}, from the GPU run {run}"
    wanted = expected_stamp(runs, run, page.stem)
    if isinstance(wanted, str):
        return shown, wanted
    differ = [key for key in ("date", "device", "torch") if wanted.get(key) != stamp[key]]
    said = ", ".join(f"{key} {stamp[key]!r} where the run has {wanted.get(key)!r}" for key in differ)
    return shown, f"its stamp is not its GPU run's: {said}" if differ else None


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or argv[0] not in ("cuda", "cpu", "mps"):
        print(__doc__, file=sys.stderr)
        return 2
    expected, site = argv[0], Path(argv[1] if len(argv) == 2 else "_build/html")
    pages, wrong = sorted((site / "notebooks").glob("*.html")), []
    for page in pages:
        shown, problem = check_page(page, expected, RUNS)
        print(shown)
        if problem:
            wrong.append(f"{page.name} ({problem})")
    if not pages or wrong:
        print(f"not stamped as run on {expected} or as their GPU run: {'; '.join(wrong) or 'no lesson pages at all'}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
