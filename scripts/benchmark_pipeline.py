"""Time the book's pipeline: clean build, unchanged rebuild, rebuild after editing one notebook, tests.

Run with `make bench` (the environment must be installed). It deletes _build first, edits one notebook for a
moment (restored afterwards, whatever happens) and writes the figures to _build/bench.json.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
# The notebooks a step executed: scripts/execute_notebooks.py lists each with its time; the build names any
# it had to execute itself.
EXECUTED = re.compile(r"(\S+\.ipynb)(?:: Executing notebook|: \d+\.\d s$)", re.MULTILINE)


def run(label: str, command: list[str]) -> dict:
    print(f"-> {label}: {' '.join(command)}", flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{label} failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    executed = sorted({Path(p).name for p in EXECUTED.findall(done.stdout + done.stderr)})
    print(f"   {seconds:.1f} s; notebooks executed: {executed or 'none'}", flush=True)
    return {"step": label, "seconds": round(seconds, 1), "executed": executed}


def main() -> None:
    make = shutil.which("make") or "make"
    shutil.rmtree(BUILD, ignore_errors=True)
    results = [run("make book from a clean _build", [make, "book"])]
    results.append(run("make book, nothing changed", [make, "book"]))

    notebook = sorted((ROOT / "notebooks").glob("*.ipynb"))[0]
    original = notebook.read_text(encoding="utf-8")
    try:
        nb = json.loads(original)
        last_code = [c for c in nb["cells"] if c["cell_type"] == "code"][-1]
        last_code["source"] = [*last_code["source"], "\n# edited by scripts/benchmark_pipeline.py"]
        notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        results.append(run(f"make book after editing {notebook.name}", [make, "book"]))
    finally:
        notebook.write_text(original, encoding="utf-8")

    results.append(run("make test", [make, "test"]))
    (BUILD / "bench.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print("\n| step | seconds | notebooks executed |\n|---|---|---|")
    for r in results:
        print(f"| {r['step']} | {r['seconds']} | {', '.join(r['executed']) or 'none'} |")


if __name__ == "__main__":
    main()
