"""The glossary (chapters/glossary.md) defines the GPU terms the lessons use.

A lesson may use a term before the chapter that explains it (chapter 5 speaks of warps, chapter 9 explains
them), so the glossary must have it. These tests read the glossary's terms and the lessons' prose (the
Markdown cells of notebooks/*.ipynb and the pages chapters/*.md other than the glossary) and check that

- every term of :data:`REQUIRED_TERMS` (issue 18, item 9) is in the glossary;
- every term of :data:`LESSON_TERMS` that a lesson uses is in the glossary; the failure names the missing terms
  and the lessons that use them;

and they write _build/glossary-usage.md, the lessons that use each glossary term, with the terms no lesson uses
(printed too, for information: a glossary may define a term for readers of other books).

The glossary is a MyST definition list: a term on a line of its own, its definition on the next lines, the first
starting with ": ". Other names of a term follow it in parentheses, separated by commas:
"SM (streaming multiprocessor)", "stream (CUDA stream)". A lesson uses a term where one of its names appears,
in any case, as whole words (a line break may stand for a space), or with a plural "s" or "es" added.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.booktoc import ROOT

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
    term: str                # the term line as written, without backticks
    names: tuple[str, ...]   # the term and its other names
    definition: str


_TERM_AND_NAMES = re.compile(r"^(?P<term>.*?)\s*\((?P<others>[^()]*)\)$")


def glossary_entries(text: str) -> list[Entry]:
    """The entries of a glossary written as a MyST definition list, in the order of the text."""
    lines = text.splitlines()
    entries = []
    for i, line in enumerate(lines[:-1]):
        if not line.strip() or line[0] in " \t:#%" or not lines[i + 1].startswith(": "):
            continue
        body = [lines[i + 1][2:]]
        for following in lines[i + 2:]:
            if not following.startswith((" ", "\t")) or not following.strip():
                break
            body.append(following.strip())
        term = line.strip().replace("`", "")
        match = _TERM_AND_NAMES.match(term)
        names = (match["term"], *(n.strip() for n in match["others"].split(","))) if match else (term,)
        entries.append(Entry(term, tuple(n for n in names if n), " ".join(body).strip()))
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
    """``text`` with the entry whose term line is ``term`` taken out (its term line and its definition)."""
    return re.sub(rf"(?m)^{re.escape(term)}\n: .*\n(?:[ \t]+\S.*\n)*\n?", "", text)


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
    assert "streaming multiprocessor" not in glossary_names(_without_entry(glossary_text,
                                                                          "SM (streaming multiprocessor)"))


def test_how_terms_are_parsed_and_matched():
    text = ("# Glossary\n\n"
            "SM (streaming multiprocessor)\n: One of the processors of a GPU.\n\n"
            "`CUDA_VISIBLE_DEVICES`\n: The GPUs a process sees,\n  numbered from 0.\n\n"
            "kernel launch\n: Starting a kernel.\n\n"
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
    assert "| SM (streaming multiprocessor) | 2 | a.md, d.md |" in report
    assert unused == ["CUDA_VISIBLE_DEVICES"]
