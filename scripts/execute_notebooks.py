"""Execute the book's notebooks in parallel, one per core, into the execution cache that `jupyter-book build`
reads, so the build itself executes nothing that is already up to date. Notebooks whose metadata says
`"gpukit": {"run_alone": true}` (the lessons that publish speed measurements) run afterwards, one at a time,
so that no other notebook competes for their cores.

Jupyter Book 1 executes the notebooks of a build one after another. This script runs before it (`make book`,
and the offline rebuild in `make test`): every toc notebook whose code has no cached run is executed with
jupyter-cache's own single-notebook executor, in the notebook's folder, with the notebook's own
`mystnb.execution_timeout`, exactly as the build would, and the result is cached with its run time (the
execution-statistics page shows it). A notebook that fails is left uncached and reported; the build then
runs it again and fails on it with the full error, as without this script.

A lesson with a GPU run kept in data/gpu-runs/ (`make gpu-check GPU_CHECK_FLAGS=--save-run`;
booktools/gpu_check.py)
whose code hash is the lesson's own is not executed: the newest such run's outputs go into the cache in its place,
so that its page shows that run (and the note _ext/gpu_runs.py puts under its stamp says so). A lesson whose
cached outputs came from a run that no longer applies (its code changed, or the run was removed) runs on the CPU
again. With no GPU run kept, this script does what it did before GPU runs were kept.

    python scripts/execute_notebooks.py [--jobs N] [--cache FOLDER]

(The test site of `make test` has a cache of its own: tests/support/site_build.py passes --cache.)
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import nbformat
import yaml
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn
from jupyter_cache.executors.utils import single_nb_execution
from traitlets.config import Config

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # gpukit from this clone, installed or not
# Shared with `make gpu-check` (booktools/gpu_check.py), which runs the same lessons on a GPU node: the kernels'
# settings (encrypted messages, or every kernel logs a warning that its TCP traffic is plain text, which buried the
# build log's real news), the tries a kernel gets to start, and which lessons must run alone.
from booktools.gpu_check import ANSI_ESCAPE, KERNEL_SETTINGS, KERNEL_STARTS, runs_alone  # noqa: E402
from booktools.gpu_runs import GpuRun, lesson_code_hash, load_gpu_runs, runs_of_lesson, with_run_outputs  # noqa: E402

CACHE = ROOT / "_build" / ".jupyter_cache"
KERNEL_CONFIG = Config(KERNEL_SETTINGS)


def toc_notebooks() -> list[Path]:
    """The .ipynb files the table of contents lists, in toc order."""
    def walk(entries):
        for entry in entries:
            if "file" in entry:
                yield entry["file"]
            for key in ("parts", "chapters", "sections"):
                yield from walk(entry.get(key, []))

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"], *walk(toc.get("parts", []) + toc.get("chapters", []))]
    return [ROOT / f"{name}.ipynb" for name in files if (ROOT / f"{name}.ipynb").is_file()]


def default_timeout() -> int:
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return int(config.get("execute", {}).get("timeout", 300))


def execute(path: Path, timeout: int, cache_folder: Path = CACHE) -> tuple[Path, float | None, str | None]:
    """Run one notebook and cache it; returns (path, seconds, error)."""
    for attempt in range(1, KERNEL_STARTS + 1):
        nb = nbformat.read(path, as_version=4)
        timeout = nb.metadata.get("mystnb", {}).get("execution_timeout", timeout)
        try:
            result = single_nb_execution(nb, cwd=str(path.parent), timeout=timeout, allow_errors=False,
                                         config=KERNEL_CONFIG)
            break
        # jupyter-cache returns a cell's error; anything it raises happened before the first cell, while the
        # kernel started. The usual cause is a race no notebook can help: the kernel manager picks free ports
        # in this process, and a kernel started at the same moment by another one may bind the same port
        # first ("Address already in use"). A new start picks new ports.
        except Exception as error:  # noqa: BLE001 - reported as the notebook's failure, not raised
            if attempt == KERNEL_STARTS:
                return path, None, (f"the kernel did not start ({KERNEL_STARTS} tries): "
                                    f"{error.__class__.__name__}: {error}")
            print(f"  {path.relative_to(ROOT)}: the kernel did not start ({error}); starting another", flush=True)
    if result.err is not None:
        return path, None, ANSI_ESCAPE.sub("", f"{result.err.__class__.__name__}: {str(result.err)[-1500:]}")
    cache = get_cache(str(cache_folder))
    cache.cache_notebook_bundle(CacheBundleIn(nb, str(path), data={"execution_seconds": result.time}),
                                check_validity=False, overwrite=True)
    return path, result.time, None


def lesson_name(path: Path) -> str | None:
    """The name GPU runs know a lesson by ("04-pytorch-gpu"), for a notebook in notebooks/; None for others."""
    return path.stem if path.parent == ROOT / "notebooks" else None


def gpu_runs_of(path: Path, notebook, runs: list[GpuRun]) -> tuple[GpuRun | None, GpuRun | None]:
    """(the kept GPU run of this very code, the newest out-of-date one where there is none) for a toc notebook."""
    name = lesson_name(path)
    if not runs or name is None:
        return None, None
    return runs_of_lesson(runs, name, lesson_code_hash(notebook))


def cache_gpu_run(path: Path, notebook, run: GpuRun, cache_folder: Path = CACHE) -> None:
    """Put the lesson, with the outputs of its run in ``run``, into the cache as the lesson's execution."""
    name = lesson_name(path)
    executed = nbformat.read(run.notebook(name), as_version=4)
    data = {"execution_seconds": run.lessons[name].get("seconds"), "gpu_run": run.name}
    get_cache(str(cache_folder)).cache_notebook_bundle(CacheBundleIn(with_run_outputs(notebook, executed), str(path),
                                                                     data=data), check_validity=False, overwrite=True)
    print(f"  {path.relative_to(ROOT)}: from the GPU run data/gpu-runs/{run.name} ({run.manifest.get('device')}, "
          f"{run.date})", flush=True)


def report(path: Path, seconds: float | None, error: str | None) -> None:
    name = path.relative_to(ROOT)
    if error is None:
        print(f"  {name}: {seconds:.1f} s", flush=True)
    else:
        print(f"  {name}: FAILED ({error.splitlines()[-1]}); the build will run it again and show the error",
              flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="notebooks run at once")
    parser.add_argument("--cache", type=Path, default=CACHE, help="the execution cache to fill")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, not {args.jobs}")

    cache = get_cache(str(args.cache))
    runs = load_gpu_runs(ROOT)
    stale = []
    for path in toc_notebooks():
        notebook = nbformat.read(path, as_version=4)
        try:
            shown = (cache.match_cache_notebook(notebook).data or {}).get("gpu_run", "")
        except KeyError:
            shown = None  # no cached run
        current, outdated = gpu_runs_of(path, notebook, runs)
        if current is not None:
            if shown != current.name:
                cache_gpu_run(path, notebook, current, args.cache)
        elif shown is None or shown:  # not cached, or cached from a GPU run that no longer applies
            stale.append(path)
            if outdated is not None:
                print(f"  {path.relative_to(ROOT)}: its GPU run data/gpu-runs/{outdated.name} is out of date (the "
                      f"lesson's code changed since): it runs on the CPU", flush=True)
    if not stale:
        print("Every notebook has an up-to-date cached run.")
        return 0
    # A lesson that measures speed must not share the cores with another notebook, or its published timings
    # measure the contention: such notebooks say "gpukit": {"run_alone": true} and run one after another.
    alone = [p for p in stale if runs_alone(nbformat.read(p, as_version=4))]
    together = [p for p in stale if p not in alone]
    print(f"Executing {len(stale)} notebook(s): {len(together)} side by side ({min(args.jobs, len(together) or 1)} "
          f"at a time), then {len(alone)} that measure speed, one at a time ...", flush=True)
    for batch, jobs in ((together, args.jobs), (alone, 1)):
        if not batch:
            continue
        with ProcessPoolExecutor(max_workers=min(jobs, len(batch))) as pool:
            runs = [pool.submit(execute, path, default_timeout(), args.cache) for path in batch]
            for run in as_completed(runs):
                report(*run.result())
    # Failures are not this script's to report in full: the build runs them again and shows the traceback.
    return 0


if __name__ == "__main__":
    sys.exit(main())
