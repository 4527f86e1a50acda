"""``{gpu-headline}``: the newest GPU measurement of the book in two sentences, for a reader who wants a GPU's
number first (intro.md). The sentences are made from the newest file of ``data/benchmarks/`` that holds a GPU
(:func:`gpukit.measuring.benchmark_records.gpu_headline` and ``headline_sentence``), when the book is built: no
figure is typed into the page, and a new GPU file changes it. A link to the appendix that shows every file follows.
"""

from __future__ import annotations

import sys
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # gpukit from this clone, installed or not, as gpu_runs.py
APPENDIX = "chapters/13-benchmarks"


class GpuHeadline(SphinxDirective):
    """The headline as a paragraph, then "Every measurement: {doc} of the appendix"."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from gpukit.measuring.benchmark_records import gpu_headline, headline_sentence, read_benchmark_folder

        folder = Path(self.env.srcdir) / "data" / "benchmarks"
        self.env.note_dependency(str(folder))
        for path in sorted(folder.glob("*.json")):  # a new or changed file rebuilds the page
            self.env.note_dependency(str(path))
        text = headline_sentence(gpu_headline(read_benchmark_folder(folder)))
        source = StringList([f"{text} Every measurement, and how it was made: {{doc}}`/{APPENDIX}`.", ""],
                            source=self.env.docname)
        container = nodes.container(classes=["gpu-headline"])
        self.state.nested_parse(source, self.content_offset, container)
        return [container]


def setup(app):
    app.add_directive("gpu-headline", GpuHeadline)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
