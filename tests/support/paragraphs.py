"""The paragraphs of a lesson's prose, and their lengths in words: for tests/book/test_readability.py.

A paragraph is what a reader takes in as one block: lines of a Markdown cell up to a blank line, a heading, a
list item's start or a fence. Each list item counts as a paragraph of its own, and the prose inside a directive
(an admonition, a hint, a solution's explanation) is read as prose too; code blocks, math blocks, tables,
directive options and headings are not prose. A MyST role (``{eval}`glued.speedup```, ``{term}`warp```) counts as
the words it shows, and a word is a run of characters with at least one letter or digit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^\s*(`{3,}|~{3,}|:{3,})\s*(\{[\w:-]+\})?")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_ROLE = re.compile(r"\{[\w:-]+\}`([^`]*)`")
_NOT_PROSE = re.compile(r"^\s*(?:#|\||<!--|\(\S+\)=|:[\w-]+:|\$\$|!\[)")
# Directives whose body is prose; any other fence (code, math, a figure's options) is skipped whole.
PROSE_DIRECTIVES = {"{note}", "{tip}", "{warning}", "{important}", "{caution}", "{admonition}", "{hint}",
                    "{solution}", "{exercise}", "{dropdown}", "{margin}", "{seealso}", "{attention}", "{danger}",
                    "{epigraph}", "{sidebar}", "{gpu-headline}"}


@dataclass(frozen=True)
class Paragraph:
    cell: int
    words: int
    text: str

    def opening(self, words: int = 12) -> str:
        return " ".join(self.text.split()[:words]) + " ..."


def words_in(text: str) -> int:
    shown = _ROLE.sub(lambda m: m.group(1).split("<")[0], text)
    return sum(1 for token in shown.split() if re.search(r"\w", token))


def paragraphs(source: str, cell: int = 0) -> list[Paragraph]:
    """The paragraphs of one Markdown cell's ``source``."""
    found: list[Paragraph] = []
    current: list[str] = []
    skipping: list[str] = []  # the fences of skipped blocks we are inside, innermost last
    prose_fences: list[str] = []

    def close() -> None:
        if current:
            text = " ".join(line.strip() for line in current)
            found.append(Paragraph(cell, words_in(text), text))
            current.clear()

    for line in source.splitlines():
        fence = _FENCE.match(line)
        if skipping:
            if skipping[-1] == "$$":
                if "$$" in line:
                    skipping.pop()
            elif fence and fence.group(1)[0] == skipping[-1][0] and len(fence.group(1)) >= len(skipping[-1]) \
                    and not fence.group(2) and not line.strip()[len(fence.group(1)):].strip():
                skipping.pop()
            continue
        if fence:
            close()
            marks, name = fence.group(1), fence.group(2)
            closing = name is None and not line.strip()[len(marks):].strip()
            if closing and prose_fences and prose_fences[-1][0] == marks[0] and len(marks) >= len(prose_fences[-1]):
                prose_fences.pop()
            elif name in PROSE_DIRECTIVES:
                prose_fences.append(marks)
            else:
                skipping.append(marks)
            continue
        if line.strip().startswith("$$"):
            close()
            if line.strip() == "$$" or not line.strip()[2:].rstrip().endswith("$$"):
                skipping.append("$$")  # a block of math, to the next $$
            continue
        if not line.strip() or _NOT_PROSE.match(line):
            close()
            continue
        if _LIST_ITEM.match(line):
            close()
        current.append(line)
    close()
    return found


def notebook_paragraphs(notebook: dict) -> list[Paragraph]:
    """Every paragraph of a notebook's Markdown cells, in order."""
    found = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] == "markdown":
            found.extend(paragraphs("".join(cell["source"]), index))
    return found
