"""Start a new lesson: `make lesson NN=18 NAME=sparse-matrices TITLE="Sparse matrices on the GPU"`.

It writes every file a lesson needs, each following the book's conventions (CONTRIBUTING.md, "Lesson
conventions"), so that `make test LESSON=NN` passes at once:

- ``notebooks/<NN>-<name>.ipynb``: the title, the setup cell (scripts/setup_cell.py), the device and stamp cell, the
  "In this lesson" block, one section with one exercise (its hint, the learner's cell, its solution) and the key
  points;
- ``chapters/<NN>-<name>.md``, the prose page, and its entry with the notebook under it in ``_toc.yml``;
- ``gpukit/exercises/<name>.py``, the exercise's expected answer, and ``tests/exercises/cases/<name>.py``, its
  solution, its wrong answers and its planted device mistake;
- the lesson's section in ``chapters/instructor-notes.md`` and its row in the instructor guide's schedule
  (skipped in every plan until its author places it).

What it cannot know is left marked ``TODO`` for the author: what the lesson teaches, its exercise's real task,
its time. It refuses a number or a name that is taken, and writes nothing then.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def cell(kind: str, source: str, **metadata) -> dict:
    found = {"cell_type": kind, "metadata": metadata, "source": source.splitlines(keepends=True)}
    if kind == "code":
        found.update(execution_count=None, outputs=[])
    return found


def notebook(number: str, name: str, title: str, label: str) -> dict:
    stem = f"{number}-{name}"
    cells = [
        cell("markdown", f"# {title}"),
        cell("code", "from gpukit import announce_device, lesson_stamp\n\n"
                     "device = announce_device()\n"
                     'lesson_stamp("gpu", device)'),
        cell("markdown", "```{admonition} In this lesson\n:class: tip\n"
                         "**Objectives:** TODO: what the reader can do after this lesson.\n\n"
                         "**Prerequisites:** {doc}`04-pytorch-gpu`.\n\n"
                         "**Time:** about 20 minutes.\n```"),
        cell("markdown", "## A first step\n\n"
                         "TODO: the lesson's first idea. The exercise below is a placeholder to replace: it asks "
                         "for a tensor\nmade on the device the first cell chose."),
        cell("markdown", f"```{{exercise}}\n:label: {label}\n"
                         "Complete `squares(device)` so that it returns the squares of the whole numbers 0 to 9, as "
                         "`float32`,\n**made on the device it is given**. The check calls it on `device` and on a "
                         "device where\nevery tensor made elsewhere shows.\n```\n\n"
                         "```{hint}\n:class: dropdown\n"
                         "`torch.arange` takes `dtype=` and `device=`; square what it returns.\n```"),
        cell("code", "import torch\n\nfrom gpukit import check\n\n\n"
                     "def squares(device):\n"
                     "    return None  # replace None: the squares of 0 to 9, made on device\n\n\n"
                     f'check("{label}", squares, device=device)'),
        cell("markdown", f"````{{solution}} {label}\n:class: dropdown\n\n"
                         "Make the numbers on the device they are for, then square them there:\n\n"
                         "```python\n"
                         "def squares(device):\n"
                         "    return torch.arange(10, dtype=torch.float32, device=device) ** 2\n\n\n"
                         f'check("{label}", squares, device=device)\n'
                         "```\n\nWithout `device=`, the tensor is made on the CPU: on a GPU the next step "
                         "would copy it,\nor fail for a tensor on the wrong device.\n````"),
        cell("markdown", "```{admonition} Key points\n:class: important\n"
                         "- TODO: what the reader should remember.\n```"),
    ]
    template = json.loads((ROOT / "notebooks" / "00-environment-check.ipynb").read_text(encoding="utf-8"))
    metadata = {key: template["metadata"][key] for key in ("kernelspec", "language_info")}
    metadata.update(mystnb={"execution_timeout": 60}, gpukit={"gpus": 1})
    for index, each in enumerate(cells):
        each["id"] = f"{stem}-{index}"
    return {"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}


def exercise_module(name: str, title: str, label: str) -> str:
    return f'''"""{title}: the expected answers of the lesson's exercises (check("<label>", answer))."""

from __future__ import annotations

from .checking import Exercise, keep_output, kept_output, not_a_function, raised, register


def _squares(device):
    import torch

    return torch.arange(10, dtype=torch.float32, device=device) ** 2


def _made_on_the_device(answer, device):
    """Run the learner's squares on PyTorch's meta device, where a tensor made anywhere else shows, then on the
    lesson's device for the values."""
    import torch

    wrong = not_a_function(answer, "squares", "a device")
    if wrong:
        return wrong
    try:
        on_meta = answer(torch.device("meta"))
    except Exception as error:  # the learner's code: its error is the message
        return raised("squares(device)", error) + "."
    if on_meta is None:
        return "squares returned None: replace the placeholder with the tensor."
    if not isinstance(on_meta, torch.Tensor):
        return f"squares returned a {{type(on_meta).__name__}}, not a tensor."
    if on_meta.device.type != "meta":
        return (f"squares made its tensor on {{on_meta.device}}, not on the device it was given: on a GPU it would "
                "be made on the host and copied, or fail beside tensors on the GPU.")
    keep_output(answer, answer(device))
    return None


register(
    Exercise("{label}", _squares, needs=("device",), method=_made_on_the_device, result=kept_output,
             writes="device code"),
)
'''


def cases_module(title: str, module: str, label: str) -> str:
    return f'''"""{title}: each exercise's solution, wrong answers and planted device mistakes, for
tests/exercises/test_every_exercise.py and tests/exercises/test_planted_device_mistakes.py."""

import torch

from gpukit.core.device import pick_device


def squares_on_the_device(device):
    return torch.arange(10, dtype=torch.float32, device=device) ** 2


def squares_in_float64(device):
    return torch.arange(10, dtype=torch.float64, device=device) ** 2


def squares_from_one(device):
    return torch.arange(1, 11, dtype=torch.float32, device=device) ** 2


def squares_left_on_the_host(device):
    return torch.arange(10, dtype=torch.float32) ** 2


SOLUTIONS = {{"{label}": lambda: (squares_on_the_device, {{"device": pick_device()}})}}

WRONG_ANSWERS = {{
    "{label}": lambda: [(squares_in_float64, "dtype"), (squares_from_one, "differ"),
                        (squares_left_on_the_host, "not on the device it was given")],
}}

DEVICE_MISTAKES = {{
    "{label}": {{"squares_left_on_the_host": "made the tensor on the host, whatever device it was given"}},
}}
'''


def page(number: str, name: str, title: str) -> str:
    return (f"# {title}\n\n## Why this chapter\n\nTODO: why a scientist would want this, in a paragraph.\n\n"
            f"The lesson, {{doc}}`../notebooks/{number}-{name}`, TODO: what it does, in a sentence.\n\n"
            "## How it connects\n\n- **Chapter 4** makes tensors on the chosen device, as this lesson's exercise "
            "does.\n")


def notes_section(number: int, title: str, stem: str, label: str) -> str:
    return textwrap.dedent(f"""\
        ## {number}. {title}

        Lesson: {{doc}}`../notebooks/{stem}`; prose page: {{doc}}`{stem}`.

        - **Demonstrate live:** TODO: the cells to run in front of the room.
        - **Pause for:** `{label}` (about 3 minutes).
        - **Common errors:** TODO: what attendees get wrong, and what the check says.
        - **If short of time:** TODO: what to show instead of running, and what to leave as homework.
        - **On a GPU:** TODO: what differs on a GPU.

        """)


def add_to_toc(text: str, number: str, name: str) -> str:
    entry = (f"      - file: chapters/{number}-{name}\n        sections:\n"
             f"          - file: notebooks/{number}-{name}\n")
    marker = "  - caption: Appendices\n"
    if marker not in text:
        raise SystemExit("_toc.yml has no Appendices part to put the lesson before")
    return text.replace(marker, entry + marker, 1)


def add_to_notes(text: str, section: str) -> str:
    found = re.search(r"^## 13\. ", text, re.M)
    at = found.start() if found else len(text)
    return text[:at] + section + text[at:]


def add_to_schedule(text: str, number: int, title: str) -> str:
    row = f"| {number}. {title} | 20 min | 1 | skip | skip | | skip |\n"
    found = re.search(r"^\| 13\. Benchmarks \|", text, re.M)
    if not found:
        raise SystemExit("chapters/instructor-guide.md has no schedule row for lesson 13 to put the lesson before")
    return text[:found.start()] + row + text[found.start():]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("number", help="two digits, e.g. 18")
    parser.add_argument("name", help="lower case words joined by '-', e.g. sparse-matrices")
    parser.add_argument("--title", help="the lesson's title (default: from the name)")
    args = parser.parse_args(argv)
    number, name = args.number, args.name
    if not re.fullmatch(r"\d\d", number):
        parser.error(f"NN must be two digits, such as 18, not {number!r}")
    if not NAME.match(name):
        parser.error(f"NAME must be lower case words joined by '-', such as sparse-matrices, not {name!r}")
    taken = sorted(p.name for p in (ROOT / "notebooks").glob(f"{number}-*.ipynb"))
    module = name.replace("-", "_")
    if taken:
        parser.error(f"lesson {number} exists already: {', '.join(taken)}")
    if (ROOT / "gpukit" / "exercises" / f"{module}.py").exists():
        parser.error(f"gpukit/exercises/{module}.py exists already: choose another NAME")
    title = args.title or name.replace("-", " ").capitalize()
    stem, label = f"{number}-{name}", f"ex-{name}-squares"
    files = {
        ROOT / "notebooks" / f"{stem}.ipynb": json.dumps(notebook(number, name, title, label), indent=1,
                                                         ensure_ascii=False) + "\n",
        ROOT / "chapters" / f"{stem}.md": page(number, name, title),
        ROOT / "gpukit" / "exercises" / f"{module}.py": exercise_module(name, title, label),
        ROOT / "tests" / "exercises" / "cases" / f"{module}.py": cases_module(title, module, label),
    }
    edits = {
        ROOT / "_toc.yml": lambda text: add_to_toc(text, number, name),
        ROOT / "chapters" / "instructor-notes.md": lambda text: add_to_notes(
            text, notes_section(int(number), title, stem, label)),
        ROOT / "chapters" / "instructor-guide.md": lambda text: add_to_schedule(text, int(number), title),
    }
    edited = {path: edit(path.read_text(encoding="utf-8")) for path, edit in edits.items()}  # all or nothing
    for path, text in {**files, **edited}.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "setup_cell.py"), "--write"], check=True, cwd=ROOT)
    print(f"\nNext: fill in each TODO, then `make test LESSON={number}`; `make test` also asks for the lesson's "
          f"GPU estimate\n(booktools/gpu_check.py's ESTIMATES_S) and its glossary links "
          f"(python scripts/glossary_links.py --write).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
