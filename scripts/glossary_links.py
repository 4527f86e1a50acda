"""Each lesson links the first use of each glossary term to its entry, with Sphinx's ``{term}`` role.

The glossary (chapters/glossary.md) is Sphinx's glossary directive, so ``{term}`warp` `` or ``{term}`warps <warp>` ``
links to an entry (Sphinx matches the target in any case). This script finds, in each lesson's Markdown cells
(notebooks/*.ipynb) in order, the first use of each glossary term in the prose and says whether it is linked.

A use is one of the entry's names (its term lines) as whole words, in any case, a line break standing for a space,
with a plural "s" or "es" added: the rule tests/book/test_glossary.py uses for "a lesson uses a term". Where names
overlap, the longest wins ("CUDA stream" is a use of stream, not of CUDA; "kernel launch" is not a use of kernel).
Prose is what is left of a cell once these are taken out: code spans, code fences and math (``$...$``, ``$$``
blocks), headings, roles (``{term}`...` `` among them) and links, HTML tags, directive option lines (``:class:``),
and the first line of a directive (an ``{exercise}``'s, ``{solution}``'s or ``{hint}``'s label). The prose inside a
directive (an exercise's text, a solution's explanation) counts. A use inside an existing ``{term}`` role is a
linked use of the role's target.

Some glossary words have an everyday sense as well (a code "block", a with-block, "scale" up): :data:`ONLY_IN`
links a term only in the lessons that use it in the glossary's sense, :data:`SKIP` skips a lesson's first uses of
a term that are in the everyday sense (the use after them is linked), :data:`UNMATCHED_NAMES` are names whose
everyday sense is the lessons' usual one, :data:`CASE_SENSITIVE` names count in their own case only, and
:data:`SENSE` sends a lesson's uses of a word to another entry (lesson 0's "kernel" is the Jupyter kernel).

    python scripts/glossary_links.py --check   # exit status 1, listing each lesson and term not linked
    python scripts/glossary_links.py --write   # link every first use, in every notebooks/*.ipynb
    python scripts/glossary_links.py --uses    # print each first use with 60 characters of context

After ``--write``, run ``python scripts/prose_values.py --write``. Notebooks are written as the repository stores
them (JSON with an indent of 1, a final newline); only Markdown cells' sources change.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
GLOSSARY = ROOT / "chapters" / "glossary.md"

# Names that do not count as uses of their entry: their everyday sense is the usual one in the lessons ("the
# guard" of a kernel or of a cell, not a torch.compile guard; recompilation is linked by its own name).
UNMATCHED_NAMES = {"guard"}

# Names matched in their own case only: "zero" and "zeros" are not ZeRO.
CASE_SENSITIVE = {"ZeRO"}

# Terms in the glossary's sense only in these lessons; in the others their word is an everyday one.
ONLY_IN = {
    "scale": {"15"},  # FP8's per-tensor scale; elsewhere "scales a column", "scale the problem", "scales to GPUs"
}

# (lesson number, term): (how many first uses to skip, why); None skips every use in that lesson. The use after
# the skipped ones is the first in the glossary's sense, and is linked.
SKIP: dict[tuple[str, str], tuple[int | None, str]] = {
    ("02", "block"): (None, "`with` blocks"),
    ("02", "stream"): (None, "random-number streams"),
    ("03", "block"): (1, "blocks of freed memory in CuPy's pools"),
    ("05", "node"): (None, "a node of autograd's computation graph"),
    ("06", "block"): (None, "the caching allocator's blocks of memory"),
    ("08", "block"): (None, "a block of code, a device's block of an array"),
    ("08", "grid"): (None, "a device mesh arranged in a grid, a drawn grid"),
    ("08", "stream"): (None, "random-number streams (chapter 2)"),
    ("11", "device"): (None, "device files"),
    ("11", "grid"): (None, "a sweep's grid of parameters"),
    ("13", "grid"): (None, "a grid of matrix shapes"),
    ("14", "block"): (None, "`with` blocks"),
    ("15", "block"): (1, "a block of 32 or 128 values with its own scale"),
    ("17", "block"): (None, "a transformer's MLP blocks"),
    ("17", "lane"): (None, "a PCIe lane"),
}

# (lesson number, term): the entry the lesson's uses of that term's names go to instead.
SENSE = {
    ("00", "kernel"): "Jupyter kernel",  # the process that runs the notebook's code ("restart the kernel")
    ("11", "kernel"): "Jupyter kernel",  # JupyterLab on the cluster: "the kernel sees the same modules"
}


def notebook_text(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def source(cell: dict) -> str:
    text = cell.get("source", "")
    return text if isinstance(text, str) else "".join(text)


_GLOSSARY_FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{glossary\}[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                             re.MULTILINE | re.DOTALL)


def glossary_terms(text: str) -> dict[str, tuple[str, ...]]:
    """``{term: names}``: each entry of the glossary directives in ``text``, its first term line and all of them."""
    entries: dict[str, tuple[str, ...]] = {}
    for fence in _GLOSSARY_FENCE.finditer(text):
        names: list[str] = []
        defined = False
        for line in fence["body"].splitlines():
            if line.strip() and not line[0].isspace():
                if defined:
                    names, defined = [], False
                names.append(line.strip().replace("`", ""))
                entries[names[0]] = tuple(names)
            elif line.strip():
                defined = True
    return entries


def name_pattern(names) -> re.Pattern[str]:
    """Any of ``names`` as whole words, any case (but :data:`CASE_SENSITIVE`'s), a space matching any white space,
    a plural "s" or "es"; the longest name first, so that it wins where names overlap."""
    alternatives = []
    for name in sorted(names, key=len, reverse=True):
        words = r"\s+".join(re.escape(word) for word in name.split())
        alternatives.append(f"(?-i:{words})" if name in CASE_SENSITIVE else words)
    return re.compile(rf"(?<!\w)(?:{'|'.join(alternatives)})(?:e?s)?(?!\w)", re.IGNORECASE)


# --- what is not prose ---------------------------------------------------------------------------------------------

_FENCE = re.compile(r"^[ \t]*(?P<marks>`{3,}|~{3,}|:{3,})[ \t]*(?P<info>[^\n]*)$")
_OPTION = re.compile(r"^[ \t]*:[\w-]+:")
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}(?:[ \t]|$)")
_INLINE = re.compile(
    r"(?P<role>\{[\w:-]+\}(?P<ticks>`+)(?P<content>.*?)(?P=ticks))"  # a role, its content included
    r"|(?P<code>(?P<codeticks>`+).*?(?P=codeticks))"  # a code span
    r"|\$\$.*?\$\$|(?<![\\$\w])\$[^$\n]+?\$(?!\w)"  # math
    r"|!?\[[^\]\n]*\]\([^)\n]*\)|<https?://[^>\n]*>|https?://\S+"  # links
    r"|<!--.*?-->|</?[A-Za-z][^>\n]*>",  # HTML
    re.DOTALL)
_TERM_ROLE = re.compile(r"^(?:(?P<text>.*?)\s*<(?P<target>[^<>]+)>|(?P<plain>.*))$", re.DOTALL)


def masked(text: str) -> tuple[str, list[tuple[int, str]]]:
    """``text`` with everything but prose blanked (same length, line breaks kept), and the ``{term}`` roles in it,
    ``(offset, target)``."""
    chars = list(text)
    roles = []

    def blank(start: int, end: int) -> None:
        for i in range(start, end):
            if chars[i] != "\n":
                chars[i] = " "

    # Line by line: fences, option lines, headings, a directive's first line.
    stack: list[tuple[str, int, bool]] = []  # (mark character, length, is a directive)
    offset = 0
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\n")
        fence = _FENCE.match(bare)
        in_code = bool(stack) and not stack[-1][2]
        if fence:
            marks, info = fence["marks"], fence["info"].strip()
            top = stack[-1] if stack else None
            if top and not info and marks[0] == top[0] and len(marks) >= top[1]:
                stack.pop()
                blank(offset, offset + len(bare))
            elif not in_code:
                stack.append((marks[0], len(marks), info.startswith("{")))
                blank(offset, offset + len(bare))
            else:
                blank(offset, offset + len(bare))
        elif in_code or _OPTION.match(bare) or _HEADING.match(bare):
            blank(offset, offset + len(bare))
        offset += len(line)
    # Inline: roles, code spans, math, links, HTML, over what is left.
    partial = "".join(chars)
    for match in _INLINE.finditer(partial):
        if match["role"] and partial.startswith("{term}", match.start()):
            role = _TERM_ROLE.match(match["content"])
            roles.append((match.start(), (role["target"] or role["plain"]).strip()))
        blank(match.start(), match.end())
    return "".join(chars), roles


# --- first uses ----------------------------------------------------------------------------------------------------

@dataclass
class Use:
    lesson: str      # the notebook's file name
    term: str        # the glossary entry
    cell: int        # the cell's index in the notebook
    start: int       # offset in the cell's source
    end: int
    text: str        # the words as they stand in the source
    linked: bool     # inside a {term} role already
    context: str = ""


def lesson_number(path: Path) -> str:
    return path.name[:2]


def first_uses(nb: dict, lesson: str, entries: dict[str, tuple[str, ...]]) -> dict[str, Use]:
    """``{term: its first use}`` in the lesson's prose, after the uses :data:`SKIP` skips, for each term of
    ``entries`` the lesson uses (in :data:`ONLY_IN`'s lessons only)."""
    number = lesson[:2]
    by_name = {name.lower(): term for term, names in entries.items() for name in names}
    pattern = name_pattern([name for names in entries.values() for name in names if name not in UNMATCHED_NAMES])
    lowered = set(by_name)
    skipped: dict[str, int] = {}
    found: dict[str, Use] = {}
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        text = source(cell)
        prose, roles = masked(text)
        events = [(offset, "role", target) for offset, target in roles]
        events += [(m.start(), "use", m) for m in pattern.finditer(prose)]
        for offset, kind, what in sorted(events, key=lambda event: event[0]):
            if kind == "role":
                term = by_name.get(what.lower())
                if term and term not in found:
                    found[term] = Use(lesson, term, index, offset, offset, what, True)
                continue
            words = re.sub(r"\s+", " ", what.group()).lower()
            name = words if words in lowered else next(n for n in (words[:-2], words[:-1]) if n in lowered)
            term = SENSE.get((number, by_name[name]), by_name[name])
            if term in found or number not in ONLY_IN.get(term, {number}):
                continue
            count, _ = SKIP.get((number, term), (0, ""))
            if count is None or skipped.get(term, 0) < count:
                skipped[term] = skipped.get(term, 0) + 1
                continue
            context = text[max(0, what.start() - 60):what.end() + 60].replace("\n", " ")
            found[term] = Use(lesson, term, index, what.start(), what.end(), text[what.start():what.end()], False,
                              context)
    return found


def role(use: Use, entries: dict[str, tuple[str, ...]]) -> str:
    """The ``{term}`` role for an unlinked use: its words as they stand, pointing at the entry where needed."""
    words = re.sub(r"\s+", " ", use.text)
    names = {name.lower() for name in entries[use.term]}
    if words.lower() in names:
        return f"{{term}}`{words}`"
    return f"{{term}}`{words} <{use.term}>`"


def lessons() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))


def unlinked(paths=None, glossary_text: str | None = None) -> list[Use]:
    """Each lesson's first uses that are not linked, in order."""
    entries = glossary_terms(glossary_text if glossary_text is not None else GLOSSARY.read_text(encoding="utf-8"))
    missing = []
    for path in paths or lessons():
        nb = json.loads(path.read_text(encoding="utf-8"))
        uses = first_uses(nb, path.name, entries)
        missing += sorted((use for use in uses.values() if not use.linked), key=lambda u: (u.cell, u.start))
    return missing


LIMIT = 110  # the longest line a link may make; longer ones are rewrapped (tables and math are left as they are)
_NEW_BLOCK = re.compile(r"^[ \t]*(?:[-*+] |\d+[.)] |#|>|\||: |`{3}|~{3}|:{3}|\$\$|:[\w-]+:)")
_LIST_ITEM = re.compile(r"^([ \t]*(?:[-*+]|\d+[.)]) )")


def _break_at(line: str) -> int | None:
    """The position of the last space at which ``line`` may break, within :data:`LIMIT`: not inside a role, a code
    span, math or a link, and not before something that would start a new block."""
    protected = set()
    for match in _INLINE.finditer(line):
        protected.update(range(match.start(), match.end()))
    indent = len(line) - len(line.lstrip())
    for i in range(min(LIMIT, len(line) - 1), indent, -1):
        if line[i] == " " and i not in protected and line[i - 1] != " " and not _NEW_BLOCK.match(line[i + 1:]):
            return i
    return None


def rewrap(text: str, before: str) -> str:
    """``text`` with each line longer than :data:`LIMIT` that is not a line of ``before`` broken, the rest carried
    into the paragraph's next line (or a new one), as far as needed."""
    old = set(before.splitlines())
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if len(line) <= LIMIT or line in old or line.lstrip().startswith(("|", "$$")):
            i += 1
            continue
        at = _break_at(line)
        if at is None:
            i += 1
            continue
        head, rest = line[:at], line[at + 1:]
        item = _LIST_ITEM.match(line)
        indent = " " * len(item[1]) if item else line[:len(line) - len(line.lstrip())]
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if following.strip() and not _NEW_BLOCK.match(following) and following.startswith(indent):
            lines[i + 1] = following[:len(following) - len(following.lstrip())] + rest + " " + following.lstrip()
            lines[i] = head
        else:
            lines[i:i + 1] = [head, indent + rest]
        old.discard(lines[i + 1])
        i += 1
    return "\n".join(lines)


def link(nb: dict, lesson: str, entries: dict[str, tuple[str, ...]]) -> int:
    """Link every unlinked first use in ``nb`` (in place), rewrapping the lines made too long; the number of links
    added."""
    uses = [use for use in first_uses(nb, lesson, entries).values() if not use.linked]
    before = {use.cell: source(nb["cells"][use.cell]) for use in uses}
    for use in sorted(uses, key=lambda u: (u.cell, u.start), reverse=True):
        cell = nb["cells"][use.cell]
        text = source(cell)
        text = text[:use.start] + role(use, entries) + text[use.end:]
        cell["source"] = text.splitlines(keepends=True) if isinstance(cell["source"], list) else text
    for index, text in before.items():
        cell = nb["cells"][index]
        wrapped = rewrap(source(cell), text)
        cell["source"] = wrapped.splitlines(keepends=True) if isinstance(cell["source"], list) else wrapped
    return len(uses)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="list the first uses not linked; exit 1 if any")
    action.add_argument("--write", action="store_true", help="link the first uses in notebooks/*.ipynb")
    action.add_argument("--uses", action="store_true", help="print each first use with its context")
    args = parser.parse_args(argv)
    entries = glossary_terms(GLOSSARY.read_text(encoding="utf-8"))
    if args.check:
        missing = unlinked()
        for use in missing:
            print(f"{use.lesson}: {use.term!r} first used unlinked in cell {use.cell}: ...{use.context}...")
        return 1 if missing else 0
    for path in lessons():
        nb = json.loads(path.read_text(encoding="utf-8"))
        if args.uses:
            for use in sorted(first_uses(nb, path.name, entries).values(), key=lambda u: (u.cell, u.start)):
                state = "linked" if use.linked else "UNLINKED"
                print(f"{path.name[:2]} {use.term!r:32} {state:8} {use.context!r}")
            continue
        added = link(nb, path.name, entries)
        if added:
            path.write_text(notebook_text(nb), encoding="utf-8")
        print(f"{path.name}: {added} links added")
    return 0


if __name__ == "__main__":
    sys.exit(main())
