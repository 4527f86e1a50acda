"""A lesson's prose comes in paragraphs a reader takes in at once: none over MAX_WORDS words.

The test writes _build/paragraph-lengths.md (each lesson's paragraph count and its longest paragraph), which
the end of a pytest run prints (conftest.py), and fails naming every paragraph over the limit. How a paragraph
is found and counted: tests/support/paragraphs.py, whose rules the first tests pin down.
"""

from __future__ import annotations

import json

from tests.support.booktoc import ROOT
from tests.support.paragraphs import notebook_paragraphs, paragraphs, words_in

MAX_WORDS = 120
REPORT = ROOT / "_build" / "paragraph-lengths.md"


def test_a_role_counts_as_the_words_it_shows():
    # took, the value, s, on, a, GPU, fast
    assert words_in("took {eval}`glued.start_s` s on a {term}`GPU <graphics processing unit>` -- fast") == 7


def test_list_items_are_paragraphs_and_code_math_tables_and_options_are_not_prose():
    source = "\n".join([
        "One two three.", "Four five.", "", "- first item", "  goes on", "- second", "",
        "```python", "x = 1 + 2 + 3 + 4", "```", "| a | b |", "|---|---|", "$$", "a + b", "$$",
        "````{solution} ex-one", ":class: dropdown", "", "Inside the solution, prose.", "",
        "```python", "not = counted", "```", "````", "After."])
    assert [(p.words, p.text) for p in paragraphs(source)] == [
        (5, "One two three. Four five."), (4, "- first item goes on"), (1, "- second"),
        (4, "Inside the solution, prose."), (1, "After.")]


def test_no_lesson_paragraph_is_over_the_limit():
    rows, over = [], []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        found = notebook_paragraphs(json.loads(path.read_text(encoding="utf-8")))
        longest = max(found, key=lambda p: p.words)
        rows.append(f"| {path.stem} | {len(found)} | {sum(p.words for p in found)} | {longest.words} "
                    f"(cell {longest.cell}) |")
        over += [f"{path.stem}, cell {p.cell}: {p.words} words: {p.opening()}" for p in found
                 if p.words > MAX_WORDS]
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text("| lesson | paragraphs | words | longest paragraph, words |\n|---|---|---|---|\n"
                      + "\n".join(rows) + "\n", encoding="utf-8")
    assert not over, f"{len(over)} paragraph(s) over {MAX_WORDS} words:\n" + "\n".join(over)
