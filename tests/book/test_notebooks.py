"""Every lesson notebook follows the conventions in CONTRIBUTING.md (nbval executes them separately)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.booktoc import ROOT, toc_files
from tests.support.lesson_solutions import solutions_in

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CHECKED = "nbval-check-output"
KEPT = "keep_output"


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def tags(cell):
    return cell.get("metadata", {}).get("tags", [])


def source(cell):
    return "".join(cell["source"])


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def markdown(nb):
    return "\n".join(source(c) for c in nb["cells"] if c["cell_type"] == "markdown")


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.fixture(params=NOTEBOOKS, ids=lambda p: p.name)
def notebook(request):
    return request.param, load(request.param)


def test_name_is_numbered_and_listed_in_the_toc(notebook):
    path, _ = notebook
    assert re.fullmatch(r"\d\d-[a-z0-9-]+\.ipynb", path.name)
    assert f"notebooks/{path.stem}" in toc_files()


def test_no_stray_outputs(notebook):
    path, nb = notebook
    stray = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code" and c.get("outputs")
             and KEPT not in tags(c)]
    assert not stray, f"{path.name}: cells {stray} carry outputs; strip them (pre-commit runs nbstripout)"


def test_stored_as_nbstripout_would_store_it(notebook):
    """No execution timestamps, stray counts or other run-to-run noise in git (the pre-commit hook's form)."""
    path, _ = notebook
    nbstripout = Path(sys.executable).with_name("nbstripout")
    done = subprocess.run([str(nbstripout), "--keep-count", "--verify", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, f"run `.venv/bin/nbstripout --keep-count {path.relative_to(ROOT)}`: {done.stdout}"


def test_has_checked_cells_with_reference_outputs(notebook):
    path, nb = notebook
    checked = [c for c in code_cells(nb) if CHECKED in tags(c)]
    assert checked, f"{path.name}: no cell tagged {CHECKED}"
    for cell in checked:
        assert KEPT in tags(cell), f"{path.name}: checked cell without {KEPT}: {source(cell)[:60]!r}"
        assert cell.get("outputs") and cell.get("execution_count"), (
            f"{path.name}: checked cell has no stored output or count: {source(cell)[:60]!r}"
        )


def test_kernel_and_time_limit(notebook):
    path, nb = notebook
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    timeout = nb["metadata"].get("mystnb", {}).get("execution_timeout")
    assert isinstance(timeout, int) and 0 < timeout <= 900, f"{path.name}: set mystnb.execution_timeout"


def test_lesson_frame(notebook):
    """Title, then the setup and stamp cells, then the lesson's objectives; key points at the end."""
    path, nb = notebook
    assert source(nb["cells"][0]).startswith("# "), f"{path.name}: the first cell must be the title"
    opening = "\n".join(source(c) for c in nb["cells"][:4] if c["cell_type"] == "markdown")
    for word in ("Objectives", "Prerequisites", "Time"):
        assert word in opening, f"{path.name}: the lesson admonition under the title must state {word}"
    assert "Key points" in source(nb["cells"][-1]), f"{path.name}: the last cell must list the key points"


def test_the_setup_cell_then_the_cell_that_picks_the_device_and_stamps_the_page(notebook):
    """Under the title: the setup cell (its exact text is tests/book/test_setup_cell.py's), then the stamp cell."""
    path, nb = notebook
    setup, under_setup = nb["cells"][1:3]
    assert setup["cell_type"] == "code" and "setup-gpukit" in tags(setup), (
        f"{path.name}: the cell under the title must be the setup cell; run `python scripts/setup_cell.py --write`")
    assert under_setup["cell_type"] == "code", f"{path.name}: the cell under the setup cell must be code"
    text = source(under_setup)
    assert "announce_device(" in text, f"{path.name}: the cell under the setup cell must call announce_device()"
    stamp = re.search(r'lesson_stamp\("(cpu|gpu|gpus)", device\)\s*$', text)
    assert stamp, f"{path.name}: the cell under the setup cell must end with lesson_stamp(<needs>, device)"


def test_every_cell_the_page_removes_is_collapsed_in_jupyterlab(notebook):
    """A code cell tagged remove-cell is not on the page (it glues values for the prose, or it is the setup cell);
    an attendee who opens the lesson in JupyterLab must not meet it as a wall of code either: its input is
    collapsed (``"jupyter": {"source_hidden": true}``, which JupyterLab reads when it opens the notebook)."""
    path, nb = notebook
    open_cells = [index for index, cell in enumerate(nb["cells"]) if cell["cell_type"] == "code"
                  and "remove-cell" in tags(cell) and not cell["metadata"].get("jupyter", {}).get("source_hidden")]
    lines = sum(len(source(nb["cells"][i]).splitlines()) for i in open_cells)
    assert not open_cells, (f"{path.name}: {lines} lines of code the page hides are open in JupyterLab, in cells "
                            f"{open_cells}: give each \"jupyter\": {{\"source_hidden\": true}} in its metadata")


EXERCISE = re.compile(r"```\{exercise\}[^\n]*\n:label: (\S+)")


def test_every_exercise_has_one_collapsed_solution_that_answers_it(notebook):
    """Each exercise: the learner's code cell calls check("<label>", ...); then one markdown {solution} cell,
    collapsed (dropdown) on the page and in JupyterLab, whose python code checks the same label. No solution
    is a code cell, so Run All keeps the learner's answer (conftest.py runs the solutions under nbval)."""
    path, nb = notebook
    assert "{solution-start}" not in markdown(nb), f"{path.name}: gated solutions put code cells in a solution"
    exercises = [(i, label) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"
                 for label in EXERCISE.findall(source(c))]
    assert exercises, f"{path.name}: a lesson needs at least one exercise"
    found = {label: (i, code) for i, c in enumerate(nb["cells"]) for label, code in solutions_in(c)}
    assert sorted(found) == sorted(label for _, label in exercises), f"{path.name}: exercises vs solutions"
    for at, label in exercises:
        where, code = found[label]
        assert where > at, f"{path.name}: the solution of {label} comes before its exercise"
        learner = [c for c in nb["cells"][at + 1:where] if c["cell_type"] == "code"]
        assert any(f'check("{label}"' in source(c) for c in learner), (
            f"{path.name}: no code cell between {label} and its solution calls check({label!r}, ...)")
        assert f'check("{label}"' in code, f"{path.name}: the solution of {label} does not call its check"
        assert ":class: dropdown" in source(nb["cells"][where]), f"{path.name}: collapse the solution of {label}"
        wide = [line for line in code.splitlines() if len(line) > 88]
        assert not wide, f"{path.name}: the solution of {label} has lines over 88 columns: {wide}"
        compile(code, f"{path.name}: solution of {label}", "exec")


def test_no_typed_speedups_in_prose(notebook):
    path, nb = notebook
    typed = re.findall(r"\b\d+(?:\.\d+)?\s*(?:x|×)\s+(?:faster|speed)", markdown(nb))
    assert not typed, f"{path.name}: speed-ups in prose must be glued from the run or quoted with a source: {typed}"


OPTIONAL = ("jax", "cupy", "ray", "dask", "distributed", "ipyparallel", "myst_nb", "numba", "triton",
            "threadpoolctl", "tqdm", "array_api_compat")


def test_optional_libraries_are_imported_only_behind_a_guard(notebook):
    """A thin kernel lacks them: an unguarded import would crash the notebook instead of skipping."""
    path, nb = notebook
    pattern = re.compile(rf"^(\s*)(?:import|from) ({'|'.join(OPTIONAL)})\b")
    for cell in code_cells(nb):
        for line in source(cell).splitlines():
            found = pattern.match(line)
            assert not found or found.group(1), (
                f"{path.name}: `{line.strip()}` imports an optional library at the top level of a cell; "
                "use gpukit.optional_import and import it only inside the block that checked it")


def test_code_lines_fit_the_page(notebook):
    """Code wider than 88 columns is cut off on the page (ruff checks this too, in `make lint`)."""
    path, nb = notebook
    wide = [(i, line) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
            for line in source(c).splitlines() if len(line) > 88]
    assert not wide, f"{path.name}: lines over 88 columns: {wide}"


def test_a_lesson_that_measures_speed_runs_alone_in_the_build(notebook):
    """scripts/execute_notebooks.py runs notebooks side by side, except those marked run_alone: a timing
    taken while another notebook shares the cores would be published as if it were the machine's."""
    path, nb = notebook
    code = "\n".join(source(c) for c in code_cells(nb))
    measures = re.search(r"\b(benchmark|size_sweep|time_overlap|\w+_matmul_scaling)\(", code)
    if measures:
        assert nb["metadata"].get("gpukit", {}).get("run_alone") is True, (
            f"{path.name} times work ({measures.group(1)}): set metadata gpukit.run_alone = true")


# ------------------------------------------------------------------------------------------ read in JupyterLab
# What jupyterlab-myst cannot render, and so must not be in a lesson's prose: myst-nb's glue roles and directives.
UNRENDERED_IN_JUPYTERLAB = re.compile(r"\{glue(:[a-z]+)?\}")
EVAL_ROLE = re.compile(r"\{eval\}`([^`]*)`")
GLUE_CALL = re.compile(r"""\bglue\(\s*["']([A-Za-z_]\w*)["']""")


def test_prose_values_read_the_same_in_jupyterlab_and_on_the_page(notebook):
    """Every {eval} role reads ``glued.<name>``, glued by an earlier code cell, in a kernel that imported ``glued``."""
    path, nb = notebook
    assert not UNRENDERED_IN_JUPYTERLAB.search(markdown(nb)), f"{path.name}: use {{eval}}`glued.<name>`, not glue roles"
    glued_so_far, imported = set(), False
    for index, cell in enumerate(nb["cells"]):
        text = source(cell)
        if cell["cell_type"] == "code":
            glued_so_far.update(GLUE_CALL.findall(text))
            imported = imported or bool(re.search(r"^from gpukit import [^\n]*\bglued\b", text, re.M))
            continue
        for expression in EVAL_ROLE.findall(text):
            name = expression.removeprefix("glued.")
            assert expression.startswith("glued.") and name.isidentifier(), f"{path.name} cell {index}: {expression}"
            assert name in glued_so_far, f"{path.name} cell {index}: {expression} is not glued by a cell before it"
            assert imported, f"{path.name} cell {index}: `glued` is not imported before {expression}"
