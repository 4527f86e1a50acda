"""What an attendee sees of a lesson in JupyterLab, measured in the page: for tests/support/hub_session.py.

A lesson opened from its launch link must read as the page does: every Markdown cell rendered by
jupyterlab-myst with no MyST source showing through (directive fences, roles, options, "Unknown Directive"),
every solution closed (a ``{solution}`` with ``:class: dropdown`` is a closed ``<details>``; nothing of its
code shows), the setup cell collapsed to its first line and every other cell the page removes collapsed (their
``jupyter.source_hidden`` metadata: no line of the code the page hides shows), and no
measured value shown as its expression: jupyterlab-myst shows ``{eval}`glued.name``` as ``glued.name`` in code
type until the Markdown cell has a result for it in its ``user_expressions`` metadata, which the kernel writes
when the cell runs and scripts/prose_values.py writes beforehand (a placeholder saying which cell computes the
value). The measurement counts each kind of problem, so that a failing lesson says how far it is from that, and
counts the placeholders and the expressions shown as errors.

Two control notebooks prove that the measurement can tell: :func:`converted_control` is a lesson written
by hand in the lessons' format (``{eval}`` roles with the placeholders scripts/prose_values.py writes, an
exercise with a dropdown hint, the learner's code cell, one dropdown solution cell, the setup cell hidden),
which must measure clean; :func:`unconverted_control` has one of each problem, and each must be counted.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))  # scripts/ is not a package
from prose_values import KEY, PLACEHOLDER, with_entries  # noqa: E402

# MyST source that rendered text must not show. Rendered directives and roles leave none of it; what is left
# is a directive jupyterlab-myst does not know ("Unknown Directive"), an option it took for text (":label:"
# after a blank line), a fence it did not close.
RAW_MYST = (r"\{(?:exercise|solution|hint|glue|eval|doc|ref|numref|admonition|figure|code-cell|margin|dropdown"
            r"|note|warning|tip|term|math)\b[^}\n]*\}|`{3,}|:{3,}|:(?:label|class|name|tags):"
            r"|Unknown (?:Directive|Role)")

# Runs in the page. Cells are found by their index in the notebook (JupyterLab's windowed list writes it on
# each cell), so that the setup cell and the old format's solution code cells can be named from the file.
_MEASURE = r"""([setupIndex, solutionCodeIndexes, pattern, placeholderPattern, removedIndexes]) => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  if (!panel) return null;
  const cells = [...panel.querySelectorAll('.jp-Cell')];
  const byIndex = new Map(cells.map((cell, i) => [Number(cell.dataset.windowedListIndex ?? i), cell]));
  const markdown = cells.filter(cell => cell.classList.contains('jp-MarkdownCell'));
  const raw = [];
  let unrendered = 0;
  for (const cell of markdown) {
    const view = cell.querySelector('.myst, .jp-RenderedMarkdown');
    if (!view) { unrendered += 1; continue; }
    for (const match of view.textContent.matchAll(new RegExp(pattern, 'g'))) {
      raw.push(`cell ${cell.dataset.windowedListIndex}: ${match[0]}`);
    }
  }
  const solutions = [...panel.querySelectorAll('.myst-exercise')].filter(
    block => (block.querySelector('.myst-exercise-title')?.textContent ?? '').trim().startsWith('Solution'));
  const open = solutions.filter(block => block.tagName !== 'DETAILS' || block.open);
  let solutionCode = open.reduce((n, block) => n + block.querySelectorAll('pre').length, 0);
  for (const index of solutionCodeIndexes) {
    const cell = byIndex.get(index);
    if (cell && !cell.querySelector('.jp-InputPlaceholder')) solutionCode += 1;
  }
  // A value JupyterLab has no result for shows as its expression, in code type (jupyterlab-myst's InlineExpression
  // renders <code>glued.name</code>); a result in the cell's user_expressions shows as text, an error in red.
  const bare = [];
  let placeholders = 0, expressionErrors = 0;
  for (const cell of markdown) {
    const view = cell.querySelector('.myst, .jp-RenderedMarkdown');
    if (!view) continue;
    for (const code of view.querySelectorAll('code')) {
      if (/^glued\.[A-Za-z_][A-Za-z0-9_]*$/.test(code.textContent.trim())) {
        bare.push(`cell ${cell.dataset.windowedListIndex}: ${code.textContent.trim()}`);
      }
    }
    placeholders += (view.textContent.match(new RegExp(placeholderPattern, 'g')) || []).length;
    expressionErrors += view.querySelectorAll('[data-mime-type="application/vnd.jupyter.stderr"]').length;
  }
  const setup = byIndex.get(setupIndex);
  let setupLines = -1;
  if (setup) {
    setupLines = setup.querySelector('.jp-InputPlaceholder') ? 1
      : setup.querySelectorAll('.jp-InputArea-editor:not(.lm-mod-hidden) .cm-line').length;
  }
  // The code the page removes (tag remove-cell): a collapsed input shows a placeholder and no code line.
  const removedShown = [];
  for (const index of removedIndexes) {
    const cell = byIndex.get(index);
    if (!cell || cell.querySelector('.jp-InputPlaceholder')) continue;
    const lines = cell.querySelectorAll('.jp-InputArea-editor:not(.lm-mod-hidden) .cm-line').length;
    if (lines) removedShown.push([index, lines]);
  }
  return {cells: cells.length, markdown: markdown.length, unrendered, raw_myst: raw, solutions: solutions.length,
          open_solutions: open.length, visible_solution_code: solutionCode, setup_lines_visible: setupLines,
          bare_expressions: bare, placeholders, expression_errors: expressionErrors,
          removed_lines_visible: removedShown.reduce((n, [, lines]) => n + lines, 0),
          removed_cells_open: removedShown.map(([index]) => index)};
}"""


def _markdown_source(cell: dict) -> str:
    source = cell.get("source", "")
    return source if isinstance(source, str) else "".join(source)


def notebook_landmarks(notebook: dict) -> tuple[int | None, list[int]]:
    """The index of the setup cell (tagged setup-gpukit), and of the code cells that are solutions in the old
    format (tagged solution, or between a {solution-start} and a {solution-end})."""
    setup, solution_code, inside = None, [], False
    for index, cell in enumerate(notebook["cells"]):
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "markdown":
            text = _markdown_source(cell)
            inside = ("{solution-start}" in text or inside) and "{solution-end}" not in text
        elif "setup-gpukit" in tags:
            setup = index
        elif inside or "solution" in tags:
            solution_code.append(index)
    return setup, solution_code


def removed_cells(notebook: dict) -> list[int]:
    """The indices of the code cells the page removes (tag remove-cell), the setup cell left out (it is measured
    on its own: collapsed, it shows its first line)."""
    return [index for index, cell in enumerate(notebook["cells"]) if cell["cell_type"] == "code"
            and "remove-cell" in cell.get("metadata", {}).get("tags", [])
            and "setup-gpukit" not in cell["metadata"]["tags"]]


def measure_lesson(page, notebook: dict, timeout_s: float = 30, after_run: bool = False) -> dict:
    """Wait until JupyterLab shows every cell of ``notebook`` (the file as opened) with its Markdown rendered,
    or ``timeout_s``; then count what an attendee should not see. ``complete`` says whether it got there.
    ``page`` is a Playwright page (its synchronous API). Once the notebook has run (``after_run``), it waits too
    until no placeholder or expression is left (``settled``): JupyterLab evaluates a Markdown cell's expressions
    after it runs the cell."""
    setup, solution_code = notebook_landmarks(notebook)
    expected = len(notebook["cells"])
    started = time.monotonic()
    while True:
        counts = page.evaluate(_MEASURE, [setup, solution_code, RAW_MYST, PLACEHOLDER.pattern,
                                          removed_cells(notebook)])
        complete = bool(counts) and counts["cells"] == expected and counts["unrendered"] == 0
        settled = complete and not counts["placeholders"] and not counts["bare_expressions"]
        if (settled if after_run else complete) or time.monotonic() - started > timeout_s:
            break
        time.sleep(0.25)
    return {**(counts or {}), "expected_cells": expected, "complete": complete,
            "seconds": round(time.monotonic() - started, 1), **({"settled": settled} if after_run else {})}


def problems(counts: dict) -> list[str]:
    """What is wrong in a measurement, one phrase each; empty when the lesson reads as the page does."""
    if not counts.get("complete"):
        found = []
        if counts.get("cells") != counts.get("expected_cells"):
            found.append(f"{counts.get('cells')} of {counts.get('expected_cells')} cells shown")
        if counts.get("unrendered"):
            found.append(f"{counts['unrendered']} Markdown cells not rendered")
        return found or ["the notebook did not appear"]
    found = []
    if counts["raw_myst"]:
        found.append(f"{len(counts['raw_myst'])} raw MyST markers ({'; '.join(counts['raw_myst'][:5])})")
    if counts["open_solutions"]:
        found.append(f"{counts['open_solutions']} of {counts['solutions']} solutions open")
    if counts["visible_solution_code"]:
        found.append(f"{counts['visible_solution_code']} solution code blocks or cells visible")
    if counts["setup_lines_visible"] < 0:
        found.append("no setup cell (tag setup-gpukit)")
    elif counts["setup_lines_visible"] > 1:
        found.append(f"the setup cell shows {counts['setup_lines_visible']} lines (collapsed, it shows its first)")
    if counts["removed_lines_visible"]:
        found.append(f"{counts['removed_lines_visible']} lines of code the page hides are shown, in cells "
                     f"{counts['removed_cells_open']} (collapse them: \"jupyter\": {{\"source_hidden\": true}})")
    if counts["bare_expressions"]:
        found.append(f"{len(counts['bare_expressions'])} values shown as their expression "
                     f"({'; '.join(counts['bare_expressions'][:5])}; scripts/prose_values.py --write)")
    if counts["expression_errors"]:
        found.append(f"{counts['expression_errors']} values shown as an error")
    return found


# ---------------------------------------------------------------------------------------------- controls
def _markdown(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def _code(text: str, metadata: dict | None = None) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": metadata or {}, "outputs": [], "source": text}


def _notebook(cells: list[dict]) -> dict:
    for index, cell in enumerate(cells):
        cell["id"] = f"control-{index}"
    kernel = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return {"cells": cells, "metadata": {"kernelspec": kernel}, "nbformat": 4, "nbformat_minor": 5}


def _setup(lesson: dict, hidden: bool) -> dict:
    cell = next(c for c in lesson["cells"] if "setup-gpukit" in c.get("metadata", {}).get("tags", []))
    metadata = {"tags": list(cell["metadata"]["tags"]), **({"jupyter": {"source_hidden": True}} if hidden else {})}
    return _code(_markdown_source(cell), metadata)


_STAMP = 'from gpukit import announce_device, lesson_stamp\n\ndevice = announce_device()\nlesson_stamp("cpu", device)'
_INTRO = ("```{admonition} In this lesson\n:class: tip\n**Objectives:** count the bytes a transfer moves.\n\n"
          "**Prerequisites:** {doc}`01-cpu-vs-gpu`.\n\n**Time:** about 5 minutes.\n```")
_MEASURED = "from gpukit import glue\n\nn = 512\nglue(\"mm_n\", n, display=False)"


def _removed(text: str, collapsed: bool) -> dict:
    """A code cell the page removes (it glues a value for the prose), collapsed in JupyterLab or not."""
    return _code(text, {**({"jupyter": {"source_hidden": True}} if collapsed else {}), "tags": ["remove-cell"]})


def converted_control(lesson: dict) -> dict:
    """A lesson in the lessons' format, written by hand around ``lesson``'s setup cell, with the placeholders
    scripts/prose_values.py writes: it must measure clean, and show 2 placeholders."""
    return with_entries(_notebook([
        _markdown("# Control: a lesson in the lessons' format"), _setup(lesson, hidden=True), _code(_STAMP),
        _markdown(_INTRO), _removed(_MEASURED, collapsed=True),
        _markdown("NumPy multiplied two {eval}`glued.mm_n` × {eval}`glued.mm_n` matrices; see {ref}`ex-control`."),
        _markdown("## Exercise\n\n```{exercise}\n:label: ex-control\nHow many bytes does a 7000 × 7000 "
                  "`float32` matrix hold?\n```\n\n```{hint}\n:class: dropdown\nFour bytes per number.\n```"),
        _code("answer = None  # replace None by your answer\nanswer"),
        _markdown("````{solution} ex-control\n:class: dropdown\n\nMultiply the numbers by their size:\n\n"
                  "```python\nanswer = 7000 * 7000 * 4\nanswer\n```\n````"),
    ]))


def unconverted_control(lesson: dict) -> dict:
    """The same lesson with one of each problem the measurement counts: the setup cell shown, a cell the page
    removes shown in full, an option
    after a blank line (shown as text), a directive jupyterlab-myst does not know, a solution that is not a
    dropdown, a solution in the old format's code cell, three ``{eval}`` expressions with no result (no
    ``user_expressions``: shown as their source), and one whose saved result is the error a kernel gives when the
    Markdown cell ran before the cell that glues the value. (Its glue roles, which jupyterlab-myst does not
    know either, render as nothing at all: no source shows, so the measurement cannot count them.)"""
    ran_too_early = _markdown("The product took {eval}`glued.mm_ms` ms.")
    ran_too_early["metadata"][KEY] = [{"expression": "glued.mm_ms", "result": {
        "status": "error", "ename": "AttributeError", "evalue": "'Glued' object has no attribute 'mm_ms'",
        "traceback": []}}]
    return _notebook([
        _markdown("# Control: a lesson with every problem"), _setup(lesson, hidden=False), _code(_STAMP),
        _markdown(_INTRO), _removed(_MEASURED, collapsed=False),
        _markdown("NumPy multiplied two {glue:text}`mm_n` × {glue:text}`mm_n` matrices.\n\n"
                  "```{glue:figure} mm_plot\n```"),
        _markdown("```{exercise}\n\n:label: ex-control\nHow many bytes does a 7000 × 7000 `float32` matrix "
                  "hold?\n```"),
        _code("answer = None  # replace None by your answer\nanswer"),
        _markdown("````{solution} ex-control\n\nMultiply:\n\n```python\nanswer = 7000 * 7000 * 4\n```\n````"),
        _markdown("```{solution-start} ex-control\n:class: dropdown\n```"),
        _code("answer = 7000 * 7000 * 4"),
        _markdown("```{solution-end}\n```"),
        _markdown("For the {eval}`glued.mm_n` × {eval}`glued.mm_n` product NumPy took {eval}`glued.mm_ms` ms."),
        ran_too_early,
    ])
