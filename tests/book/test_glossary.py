"""The glossary (chapters/glossary.md) defines the GPU terms the lessons use.

A lesson may use a term before the chapter that explains it (chapter 5 speaks of warps, chapter 9 explains
them), so the glossary must have it. These tests read the glossary's terms and the lessons' prose (the
Markdown cells of notebooks/*.ipynb and the pages chapters/*.md other than the glossary) and check that

- every term of :data:`REQUIRED_TERMS` (issue 18, item 9) is in the glossary;
- every term of :data:`LESSON_TERMS` that a lesson uses is in the glossary; the failure names the missing terms
  and the lessons that use them;
- each lesson links the first use of each glossary term to its entry with ``{term}`` (scripts/glossary_links.py
  says what a first use is), and every ``{term}`` of the lessons names a glossary term;

and they write _build/glossary-usage.md, the lessons that use each glossary term, with the terms no lesson uses
(printed too, for information: a glossary may define a term for readers of other books).

The glossary is Sphinx's glossary directive (```` ```{glossary} ````), so that a lesson can link a term with
``{term}`warp` ``: each entry is one or more term lines, not indented, then its definition, indented. The first
term line is the term; the others are its other names ("SM", then "streaming multiprocessor"). Backticks around
a term line ("`CUDA_VISIBLE_DEVICES`") are not part of the name. A lesson uses a term where one of its names
appears, in any case, as whole words (a line break may stand for a space), or with a plural "s" or "es" added.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.booktoc import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import glossary_links  # noqa: E402  (scripts/ is not a package)

GLOSSARY = ROOT / "chapters" / "glossary.md"
REPORT = ROOT / "_build" / "glossary-usage.md"

# Issue 18, item 9: the terms the glossary must define, used in the lessons or not.
REQUIRED_TERMS = ("warp", "SM", "occupancy", "stream", "pinned memory", "TF32", "bfloat16", "NCCL", "rank",
                  "world size", "kernel launch", "compute capability")

# GPU terms the lessons use. Each one a lesson uses must be in the glossary (as a term or one of its other
# names); one no lesson uses is not checked. To extend the list, add the term as a reader would look it up
# (singular, the name the glossary gives it) and a definition to chapters/glossary.md, in alphabetical order.
LESSON_TERMS = (
    # Threads and kernels
    "kernel", "kernel launch", "grid", "block", "thread block", "warp", "lane", "SM", "streaming multiprocessor",
    "occupancy", "shared memory", "bounds guard", "reduction", "elementwise", "fusion", "compute capability",
    "tensor core",
    # Memory, copies and timing
    "host", "device", "VRAM", "bandwidth", "memory bandwidth", "memory-bound", "latency", "throughput",
    "PCIe", "NVLink", "pinned memory", "page-locked memory", "stream", "CUDA stream", "CUDA event",
    "asynchronous launch", "synchronisation", "warm-up", "caching allocator", "memory pool", "CUDA context",
    "FLOP/s", "fraction of peak", "roofline", "CUDA graph",
    # Number formats
    "TF32", "TensorFloat-32", "bfloat16", "float16", "mixed precision", "autocast", "loss scaling",
    # Software stack and compilers
    "CUDA", "driver", "CUDA toolkit", "CUDA_VISIBLE_DEVICES", "nvidia-smi", "nvcc", "NVRTC", "PTX", "cuBLAS",
    "cuDNN", "BLAS", "ROCm", "MPS", "JIT", "JIT compilation", "XLA", "tracing", "graph break", "Triton", "Numba",
    "DLPack", "array API standard", "GIL",
    # Several GPUs and processes
    "rank", "world size", "collective", "all-reduce", "all-gather", "reduce-scatter", "NCCL", "gloo", "DDP",
    "DistributedDataParallel", "torchrun", "rendezvous", "sharding",
    # Clusters
    "SLURM", "node", "partition", "GRES", "job array", "environment module",
    # Profiling
    "Nsight Systems", "nsys", "NVTX",
    # Performance engineering on one GPU (16)
    "arithmetic intensity", "coalesced access", "bank conflict", "wave quantization", "Nsight Compute",
    "compute-sanitizer", "stall reason", "recompilation",
    # Reduced precision (15) and training at scale (17)
    "FP8", "scaled matrix product", "reduced-precision reduction", "split-K", "activation checkpointing", "FSDP",
    "DTensor", "optimizer state", "master weights", "flight recorder", "InfiniBand", "ZeRO",
)


@dataclass(frozen=True)
class Entry:
    term: str                # the first term line, without backticks
    names: tuple[str, ...]   # the term and its other names (the entry's other term lines)
    definition: str


_GLOSSARY_FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{glossary\}[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                             re.MULTILINE | re.DOTALL)


def glossary_entries(text: str) -> list[Entry]:
    """The entries of the glossary directives in ``text``, in the order of the text."""
    entries = []
    for fence in _GLOSSARY_FENCE.finditer(text):
        names: list[str] = []
        body: list[str] = []
        for line in fence["body"].splitlines() + [""]:
            if line.strip() and not line[0].isspace() and not line.startswith(":"):  # a term line
                if body:
                    entries.append(Entry(names[0], tuple(names), " ".join(body)))
                    names, body = [], []
                names.append(line.strip().replace("`", ""))
            elif line.strip() and names:
                body.append(line.strip())
        if names and body:
            entries.append(Entry(names[0], tuple(names), " ".join(body)))
    return entries


def glossary_names(text: str) -> set[str]:
    """Every name the glossary defines, in lower case."""
    return {name.lower() for entry in glossary_entries(text) for name in entry.names}


def lesson_texts(root: Path = ROOT) -> dict[str, str]:
    """``{path: prose}``: the Markdown cells of each notebook, and each page of chapters/ but the glossary."""
    texts = {}
    for notebook in sorted((root / "notebooks").glob("*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        texts[f"notebooks/{notebook.name}"] = "\n\n".join(
            "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            for cell in cells if cell["cell_type"] == "markdown")
    for page in sorted((root / "chapters").glob("*.md")):
        if page.name != "glossary.md":
            texts[f"chapters/{page.name}"] = page.read_text(encoding="utf-8")
    return texts


def term_pattern(term: str) -> re.Pattern[str]:
    """A term as whole words, in any case, a space matching any white space, with a plural "s" or "es"."""
    words = r"\s+".join(re.escape(word) for word in term.split())
    return re.compile(rf"(?<!\w){words}(?:e?s)?(?!\w)", re.IGNORECASE)


def lessons_using(names: tuple[str, ...] | str, lessons: dict[str, str]) -> list[str]:
    """The lessons in which one of ``names`` appears, in the order of ``lessons``."""
    patterns = [term_pattern(name) for name in ((names,) if isinstance(names, str) else names)]
    return [path for path, text in lessons.items() if any(p.search(text) for p in patterns)]


def missing_terms(terms, glossary_text: str, lessons: dict[str, str]) -> dict[str, list[str]]:
    """``{term: lessons using it}`` for each of ``terms`` that a lesson uses and the glossary does not define."""
    defined = glossary_names(glossary_text)
    missing = {}
    for term in terms:
        if term.lower() not in defined:
            users = lessons_using(term, lessons)
            if users:
                missing[term] = users
    return missing


def usage_report(glossary_text: str, lessons: dict[str, str]) -> tuple[str, list[str]]:
    """The Markdown report (a row per glossary entry: the lessons using it) and the terms no lesson uses."""
    rows, unused = [], []
    for entry in glossary_entries(glossary_text):
        users = lessons_using(entry.names, lessons)
        if not users:
            unused.append(entry.term)
        rows.append(f"| {entry.term} | {len(users)} | {', '.join(users) or '(none)'} |")
    lines = ["# Glossary terms and the lessons that use them", "",
             "Written by tests/book/test_glossary.py from chapters/glossary.md and the lessons' prose.", "",
             "| term | lessons | where |", "| --- | --- | --- |", *rows, "",
             f"Glossary terms no lesson uses ({len(unused)}): {', '.join(unused) or 'none'}.", ""]
    return "\n".join(lines), unused


def _without_entry(text: str, term: str) -> str:
    """``text`` with the entry whose first term line is ``term`` taken out (its term lines and its definition)."""
    return re.sub(rf"(?m)^{re.escape(term)}\n(?:\S.*\n)*(?:[ \t]+\S.*\n)+\n?", "", text)


@pytest.fixture(scope="module")
def glossary_text() -> str:
    return GLOSSARY.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def lessons() -> dict[str, str]:
    return lesson_texts()


def test_the_glossary_defines_the_required_terms(glossary_text):
    defined = glossary_names(glossary_text)
    missing = [term for term in REQUIRED_TERMS if term.lower() not in defined]
    assert not missing, f"chapters/glossary.md lacks these terms of issue 18: {', '.join(missing)}"


def test_every_gpu_term_the_lessons_use_is_in_the_glossary(glossary_text, lessons):
    missing = missing_terms(LESSON_TERMS, glossary_text, lessons)
    assert not missing, "chapters/glossary.md lacks terms the lessons use:\n" + "\n".join(
        f"  {term}: {', '.join(users)}" for term, users in missing.items())


def test_every_entry_has_a_definition_and_the_entries_are_in_alphabetical_order(glossary_text):
    entries = glossary_entries(glossary_text)
    assert len(entries) >= len(REQUIRED_TERMS)
    assert all(entry.definition for entry in entries)
    terms = [entry.term for entry in entries]
    assert terms == sorted(terms, key=str.lower), "keep chapters/glossary.md in alphabetical order (case ignored)"
    names = [name.lower() for entry in entries for name in entry.names]
    assert len(names) == len(set(names)), "a name is defined twice"


def test_usage_report(glossary_text, lessons, capsys):
    report, unused = usage_report(glossary_text, lessons)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(report, encoding="utf-8")
    rows = [line for line in report.splitlines() if line.startswith("| ")][2:]  # after the header and the rule
    assert [row.split(" | ")[0][2:] for row in rows] == [entry.term for entry in glossary_entries(glossary_text)]
    with capsys.disabled():
        print(f"\nglossary terms no lesson uses (information only; {REPORT.relative_to(ROOT)}): "
              f"{', '.join(unused) or 'none'}")


def test_a_term_taken_out_of_the_glossary_is_reported_missing(glossary_text, lessons):
    """Taken out of a copy of the glossary's text, a required term that the lessons use is reported, with the
    lessons that use it."""
    copy = _without_entry(glossary_text, "warp")
    assert len(glossary_entries(copy)) == len(glossary_entries(glossary_text)) - 1
    assert "warp" not in glossary_names(copy) and "occupancy" in glossary_names(copy)
    assert "notebooks/09-writing-kernels.ipynb" in lessons_using("warp", lessons)
    assert missing_terms(["warp", "occupancy"], copy, lessons) == {"warp": lessons_using("warp", lessons)}
    assert missing_terms(["warp"], glossary_text, lessons) == {}
    # Another name of an entry counts as defined; an entry taken out takes its other names with it.
    assert "streaming multiprocessor" in glossary_names(glossary_text)
    assert "streaming multiprocessor" not in glossary_names(_without_entry(glossary_text, "SM"))


def test_how_terms_are_parsed_and_matched():
    text = ("# Glossary\n\n```{glossary}\n"
            "SM\nstreaming multiprocessor\n  One of the processors of a GPU.\n\n"
            "`CUDA_VISIBLE_DEVICES`\n  The GPUs a process sees,\n  numbered from 0.\n\n"
            "kernel launch\n  Starting a kernel.\n```\n\n"
            "Not a term: a line of prose.\n\nSee also {doc}`troubleshooting`.\n")
    entries = glossary_entries(text)
    assert [e.names for e in entries] == [("SM", "streaming multiprocessor"), ("CUDA_VISIBLE_DEVICES",),
                                          ("kernel launch",)]
    assert entries[1].definition == "The GPUs a process sees, numbered from 0."
    lessons = {"a.md": "Two SMs.", "b.md": "LOCAL_RANK and smart", "c.md": "many kernel\nLaunches",
               "d.md": "a streaming multiprocessor", "e.md": "the rank of a process"}
    assert lessons_using("SM", lessons) == ["a.md"]
    assert lessons_using("kernel launch", lessons) == ["c.md"]
    assert lessons_using("rank", lessons) == ["e.md"]
    assert lessons_using(("SM", "streaming multiprocessor"), lessons) == ["a.md", "d.md"]
    assert lessons_using("stream", lessons) == []
    assert missing_terms(["SM", "rank", "warp"], text, lessons) == {"rank": ["e.md"]}
    report, unused = usage_report(text, lessons)
    assert "| SM | 2 | a.md, d.md |" in report
    assert unused == ["CUDA_VISIBLE_DEVICES"]


def test_each_lessons_first_use_of_a_term_links_to_the_glossary():
    missing = glossary_links.unlinked()
    assert not missing, ("first uses of glossary terms not linked with {term} (run `python scripts/glossary_links.py "
                         "--write`, then `python scripts/prose_values.py --write`):\n" + "\n".join(
                             f"  {use.lesson}: {use.term} (cell {use.cell}: ...{use.context}...)" for use in missing))


_ROLE = re.compile(r"\{term\}`([^`]*)`")


def test_every_term_role_of_the_lessons_names_a_glossary_term(glossary_text):
    defined = glossary_names(glossary_text)
    unknown = []
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                for content in _ROLE.findall("".join(cell["source"])):
                    target = re.fullmatch(r"(?s).*?<([^<>]+)>", content)
                    name = re.sub(r"\s+", " ", (target[1] if target else content).strip())
                    if name.lower() not in defined:
                        unknown.append(f"{notebook.name}: {{term}}`{content}`")
    assert not unknown, "{term} roles whose target is not in chapters/glossary.md:\n  " + "\n  ".join(unknown)


def test_the_script_reads_the_glossary_as_the_tests_do(glossary_text):
    assert glossary_links.glossary_terms(glossary_text) == {
        entry.term: entry.names for entry in glossary_entries(glossary_text)}


def test_an_unlinked_first_use_is_reported_and_written(tmp_path):
    glossary = ("```{glossary}\nwarp\n  32 threads.\n\nJupyter kernel\n  The process.\n\n"
                "kernel\n  A GPU function.\n```\n")
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# Warps\n", "\n", "A `warp` in code; two warps,\n",
                                                                  "then a warp."]},
             {"cell_type": "markdown", "metadata": {}, "source": ["```{exercise} warp\n", ":label: warp\n",
                                                                  "Restart the kernel.\n", "```"]}]
    lesson = tmp_path / "00-x.ipynb"
    lesson.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    missing = glossary_links.unlinked([lesson], glossary)
    assert [(use.term, use.cell, use.text) for use in missing] == [("warp", 0, "warps"),
                                                                    ("Jupyter kernel", 1, "kernel")]
    nb = json.loads(lesson.read_text(encoding="utf-8"))
    entries = glossary_links.glossary_terms(glossary)
    assert glossary_links.link(nb, lesson.name, entries) == 2
    assert nb["cells"][0]["source"][2] == "A `warp` in code; two {term}`warps <warp>`,\n"
    assert nb["cells"][1]["source"][2] == "Restart the {term}`kernel <Jupyter kernel>`.\n"
    lesson.write_text(json.dumps(nb), encoding="utf-8")
    assert glossary_links.unlinked([lesson], glossary) == []
