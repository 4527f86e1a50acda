"""The note under a lesson page's stamp that says whose run the page shows, where the book keeps GPU runs.

A GPU run is kept in data/gpu-runs/<name>/ (``make gpu-check GPU_CHECK_FLAGS=--save-run``,
booktools/gpu_check.py).
scripts/execute_notebooks.py puts the outputs of the newest run of a lesson's very code into the build's execution
cache, recording the run's name with them, and the page is built from them. This extension reads that record and
puts a note under the page's stamp:

- "Run on a GPU" (:func:`booktools.gpu_runs.gpu_run_note`) on a page built from a GPU run: the device, the date, the
  driver, CUDA and its stack, the libraries' versions, the commit, the run's folder;
- "GPU run out of date" (:func:`booktools.gpu_runs.outdated_run_note`) on a page executed on the CPU while the
  lesson's newest GPU run ran older code.

A page that shows no GPU run although one ran the lesson's code (the build executed it itself: ``jupyter-book
build`` without scripts/execute_notebooks.py), or shows a run that no longer applies, is a warning, which the strict
build (-W) stops on. With no GPU run kept, no page changes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from docutils import nodes
from sphinx.util import logging

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # gpukit from this clone, installed or not, as scripts/execute_notebooks.py

LOGGER = logging.getLogger(__name__)
LESSONS = "notebooks/"


def kept_runs(app) -> list:
    """The GPU runs of the book being built (its data/gpu-runs/), read once per build process."""
    if not hasattr(app, "_gpukit_gpu_runs"):
        from booktools.gpu_runs import load_gpu_runs

        app._gpukit_gpu_runs = load_gpu_runs(Path(app.srcdir))
    return app._gpukit_gpu_runs


def shown_run(app, notebook) -> str:
    """The name of the GPU run whose outputs the page shows, "" for a run of the build (on its CPU)."""
    config = app.env.mystnb_config
    if config.execution_mode != "cache":
        return ""
    from jupyter_cache import get_cache

    try:
        record = get_cache(str(config.execution_cache_path)).match_cache_notebook(notebook)
    except KeyError:
        return ""
    return (record.data or {}).get("gpu_run", "")


def note_node(title: str, text: str) -> nodes.admonition:
    """A titled note; text in backticks is set as code."""
    paragraph = nodes.paragraph()
    for index, part in enumerate(text.split("`")):
        paragraph += nodes.literal(part, part) if index % 2 else nodes.Text(part)
    note = nodes.admonition(classes=["note", "gpu-run"])
    note += nodes.title(title, title)
    note += paragraph
    return note


def place_under_stamp(doctree, note) -> None:
    """Put ``note`` right after the stamp cell (the code cell whose output says "Last executed"), else right under
    the page's title."""
    for cell in doctree.findall(nodes.container):
        if cell.get("nb_element") == "cell_code" and "Last executed" in cell.astext():
            cell.parent.insert(cell.parent.index(cell) + 1, note)
            return
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is not None:
        section.insert(1, note)


def add_note(app, doctree) -> None:
    docname = app.env.docname
    if not docname.startswith(LESSONS) or not kept_runs(app):
        return
    path = Path(app.env.doc2path(docname))
    if path.suffix != ".ipynb":
        return
    import nbformat

    from booktools.gpu_runs import gpu_run_note, lesson_code_hash, outdated_run_note, runs_of_lesson

    notebook = nbformat.read(path, as_version=4)
    current, outdated = runs_of_lesson(kept_runs(app), path.stem, lesson_code_hash(notebook))
    shown = shown_run(app, notebook)
    if current is not None and shown == current.name:
        note = gpu_run_note(current)
    elif current is not None:
        LOGGER.warning(f"the page was executed {'on the CPU' if not shown else f'from the GPU run {shown}'} though "
                       f"the GPU run data/gpu-runs/{current.name} ran the lesson's code: run "
                       "scripts/execute_notebooks.py before the build (make book does)", location=docname)
        return
    elif shown:
        LOGGER.warning(f"the page shows the GPU run {shown}, which did not run the lesson's code or is no longer "
                       "kept: run scripts/execute_notebooks.py before the build (make book does)", location=docname)
        return
    elif outdated is not None:
        note = outdated_run_note(outdated)
    else:
        return
    place_under_stamp(doctree, note_node(*note))


def setup(app):
    app.connect("doctree-read", add_note)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
