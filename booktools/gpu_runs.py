"""The GPU runs the book keeps (``data/gpu-runs/``): one folder per run of ``make gpu-check
GPU_CHECK_FLAGS=--save-run``, its manifest and each lesson it kept, executed on a GPU.

:mod:`booktools.gpu_check` writes them (its ``Keeper``); ``make book`` (``scripts/execute_notebooks.py``) builds a
lesson's page from the newest run of the lesson's current code (:func:`runs_of_lesson`, :func:`with_run_outputs`),
and the site build (``_ext/gpu_runs.py``) puts a note under the page's stamp saying whose run it shows
(:func:`gpu_run_note`) or that the lesson's run is out of date (:func:`outdated_run_note`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpukit.base.cuda_stacks import stack_for_cuda


def cell_source(cell: Mapping) -> str:
    """A notebook cell's source as one string (nbformat allows a list of lines)."""
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def read_or_empty(path: Path) -> str:
    """A text file's contents, "" where it does not exist."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


# A GPU run: the lessons one run of this command executed on a GPU, kept with their outputs and a manifest, one
# folder per run under data/gpu-runs/ (`--save-run`). `make book` (scripts/execute_notebooks.py) builds a lesson's
# page from the newest kept run whose code hash is the lesson's own (:func:`lesson_code_hash`); the page's note
# (_ext/gpu_runs.py) says whose run it shows.
GPU_RUNS = Path("data") / "gpu-runs"
MANIFEST = "manifest.json"
RUN_SCHEMA = "gpukit.gpu-run/1"
# The setup cell (scripts/setup_cell.py) is generated from _config.yml's repository, removed from the page, and
# makes gpukit importable: it is left out of the code hash, so that a fork pointing the book at its own repository
# keeps the runs it inherited.
SETUP_TAG = "setup-gpukit"
# How myst-nb treats a cell's stderr (its nb_output_stderr, or the cell's "mystnb": {"output_stderr": ...}): only
# these let a page with stderr build under -W; the book's own setting is "warn", which fails the build.
STDERR_ALLOWED = ("show", "remove")
# The libraries a GPU run's note names, in this order, with the names readers know them by.
NOTED_LIBRARIES = {"torch": "PyTorch", "jax": "JAX", "cupy-cuda13x": "CuPy", "cupy-cuda12x": "CuPy",
                   "numba-cuda": "numba-cuda", "triton": "Triton", "numpy": "NumPy"}


def _code_cells(notebook: Mapping) -> list[Mapping]:
    """The code cells that make the lesson's code: every code cell but the generated setup cell."""
    return [cell for cell in notebook["cells"] if cell.get("cell_type") == "code"
            and SETUP_TAG not in cell.get("metadata", {}).get("tags", [])]


def lesson_code_hash(notebook: Mapping) -> str:
    """``sha256:<hex>`` over the sources of the lesson's code cells, in order (:data:`SETUP_TAG`'s cell left out).

    It changes exactly when a code cell's source changes, or a code cell is added, removed or moved; not with
    the prose, outputs, execution counts, cell ids or metadata (tags included). It does not cover gpukit or the
    libraries: the lessons' outputs can change with them while the lesson's code stands still, and the manifest
    records the commit and every version for that reason. They are left out because a GPU run cannot be made
    again on the CPU: were every change to gpukit (nearly every commit touches it) to retire the kept runs, the
    book would show none. gpukit's behaviour is held by its tests, the CPU runs of every lesson, and gpu-check."""
    sources = [cell_source(cell) for cell in _code_cells(notebook)]
    return "sha256:" + hashlib.sha256(json.dumps(sources, ensure_ascii=False).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class GpuRun:
    """A kept GPU run: its folder (``data/gpu-runs/<name>``) and its manifest (``manifest.json``)."""

    folder: Path
    manifest: dict

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def date(self) -> str:
        return str(self.manifest.get("date", ""))

    @property
    def lessons(self) -> dict[str, dict]:
        return self.manifest.get("lessons", {})

    def notebook(self, lesson: str) -> Path:
        """The executed lesson ``lesson`` (a name such as "04-pytorch-gpu") of this run."""
        return self.folder / self.lessons[lesson]["notebook"]

    def versions(self) -> str:
        """The libraries that made its outputs, e.g. "PyTorch 2.11.0+cu130, JAX 0.11.2, NumPy 2.5.2"."""
        found = self.manifest.get("versions") or {}
        return ", ".join(f"{label} {found[name]}" for name, label in NOTED_LIBRARIES.items() if found.get(name))


def load_gpu_runs(root: Path, parent: Path | None = None) -> list[GpuRun]:
    """The GPU runs kept under ``root``/data/gpu-runs (or ``parent``), newest first (by date, time, folder name). A
    folder there without a readable manifest, or a manifest naming a notebook it lacks, is an error: a committed run
    never disappears from the book in silence."""
    parent = Path(parent) if parent is not None else Path(root) / GPU_RUNS
    runs = []
    for folder in sorted(p for p in parent.glob("*") if p.is_dir()) if parent.is_dir() else []:
        manifest_file = folder / MANIFEST
        try:
            manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as error:
            raise ValueError(f"{folder} is not a GPU run: its {MANIFEST} cannot be read ({error})") from None
        if manifest.get("schema") != RUN_SCHEMA:
            raise ValueError(f"{manifest_file}: schema {manifest.get('schema')!r}, not {RUN_SCHEMA!r}")
        run = GpuRun(folder, manifest)
        missing = [name for name in run.lessons if not run.notebook(name).is_file()]
        if missing:
            raise ValueError(f"{manifest_file} lists lessons whose notebooks are not in the folder: {missing}")
        runs.append(run)
    return sorted(runs, key=lambda run: (run.date, str(run.manifest.get("time", "")), run.name), reverse=True)


def runs_of_lesson(runs: Sequence[GpuRun], lesson: str, code_hash: str) -> tuple[GpuRun | None, GpuRun | None]:
    """(current, out of date) for the lesson named ``lesson`` whose code hash is now ``code_hash``: the newest run
    of ``runs`` (newest first) that ran this very code, else None; and, where none did, the newest run of the
    lesson's older code, else None."""
    having = [run for run in runs if lesson in run.lessons]
    current = next((run for run in having if run.lessons[lesson].get("code_hash") == code_hash), None)
    return current, (None if current else next(iter(having), None))


def with_run_outputs(lesson: Mapping, executed: Mapping):
    """The lesson ``lesson`` as it is now (prose, metadata, tags), each code cell with the outputs and count of
    the same cell in ``executed``, a run of the same code (equal :func:`lesson_code_hash`); the setup cell gets
    the run's where it has one. What the build's cache holds for a page built from a GPU run."""
    import copy

    import nbformat

    merged = nbformat.from_dict(copy.deepcopy(dict(lesson)))
    ran, now = _code_cells(executed), _code_cells(merged)
    if [cell_source(c) for c in ran] != [cell_source(c) for c in now]:
        raise ValueError("the run's code cells are not the lesson's: their code hashes differ")
    setups = [c for c in executed["cells"] if c.get("cell_type") == "code" and not any(c is r for r in ran)]
    pairs = list(zip(ran, now, strict=True))
    pairs += [(setups[0] if setups else {}, c) for c in merged.cells
              if c.cell_type == "code" and not any(c is n for n in now)]
    for before, cell in pairs:
        cell.outputs = nbformat.from_dict(copy.deepcopy(list(before.get("outputs", []))))
        cell.execution_count = before.get("execution_count")
    return merged


def book_stderr_setting(root: Path) -> str:
    """The book's nb_output_stderr (_config.yml), "warn" where it is not set."""
    found = re.search(r"^\s*nb_output_stderr:\s*['\"]?([\w-]+)", read_or_empty(Path(root) / "_config.yml"), re.M)
    return found[1] if found else "warn"


def page_stderr(notebook: Mapping, default: str = "warn") -> list[int]:
    """The indices of the code cells whose stderr would stop the book's build (-W) on this notebook's page."""
    cells = []
    for index, cell in enumerate(notebook["cells"]):
        metadata = cell.get("metadata", {})
        setting = metadata.get("mystnb", {}).get("output_stderr", default)
        if "remove-stderr" in metadata.get("tags", []) or setting in STDERR_ALLOWED:
            continue
        if any(o.get("output_type") == "stream" and o.get("name") == "stderr" for o in cell.get("outputs", [])):
            cells.append(index)
    return cells


def cuda_stack(facts: Mapping) -> str | None:
    """Which of the book's CUDA stacks made a run: "cuda13" or "cuda12", from the CUDA torch was built for
    (``torch.version.cuda``); None for a torch without CUDA (Apple's GPU)."""
    version = str(facts.get("torch_cuda") or "")
    found = re.match(r"(\d+)", version)
    stack = stack_for_cuda(int(found[1])) if found else None
    return stack.extra if stack else (f"cuda{found[1]}" if found else None)


def gpu_run_note(run) -> tuple[str, str]:
    """The title and text of the note under the stamp of a page built from the GPU run ``run``
    (:class:`GpuRun`): whose run the page shows, on what, when and with what. Text in
    backticks
    is code."""
    m = run.manifest
    cuda = f"CUDA {m['cuda']}" if m.get("cuda") else "no CUDA"
    if m.get("stack"):
        cuda += f" (the book's {m['stack']} stack)"
    details = [f"NVIDIA driver {m['driver']}" if m.get("driver") else "", cuda, run.versions(),
               f"commit {m.get('commit') or 'unknown'}"]
    return ("Run on a GPU",
            f"This page shows the lesson as it ran on `{m.get('device')}` on {run.date}, in `make gpu-check` "
            f"({'; '.join(part for part in details if part)}). The lesson's code is unchanged since that run, which "
            f"the book keeps in `data/gpu-runs/{run.name}`. The book's tests still run the lesson on the CPU.")


def outdated_run_note(run) -> tuple[str, str]:
    """The title and text of the note under the stamp of a page executed on the CPU while the lesson's newest
    GPU run, ``run``, ran older code than the lesson's."""
    m = run.manifest
    return ("GPU run out of date",
            f"This page was executed on the CPU when the book was built. The lesson's GPU run (`{m.get('device')}`, "
            f"{run.date}, kept in `data/gpu-runs/{run.name}`) is out of date: the lesson's code has changed since, "
            f"so the page does not show it. `make gpu-check GPU_CHECK_FLAGS=--save-run` on a GPU node makes a new one.")
