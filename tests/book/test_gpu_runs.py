"""GPU runs kept and used (booktools/gpu_check.py's --save-run, scripts/execute_notebooks.py, _ext/gpu_runs.py).

The mechanism end to end on the CPU, with a run made by ``make gpu-check`` itself: on the simulated GPU node of
tests/support/gpu_node (torch reports the H100 of the book's first GPU run; a tensor sent to it would still fail) with
``GPUKIT_DEVICE=cuda:0``, so that the lessons' device choice names that GPU, over a small book of one lesson that
sends no work to the device. The run is kept, the book's scripts build the lesson's page from it, and the page's
stamp and note say so; when the lesson's code changes the page is executed on the CPU and says its GPU run is out
of date. The parts are checked one by one too: the code hash, the choice of run, the notebook a page is built
from, what is kept and what is left out.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
import yaml

from booktools import gpu_check as g
from booktools import gpu_runs as store
from gpukit.core.stamp import LessonStamp, notebook_stamp, read_stamp
from tests.support.booktoc import ROOT
from tests.support.device_probe import force_the_cpu
from tests.support.gpu_node import DRIVER, GPU_NAME, gpu_node_env
from tests.support.site_build import note_problem, page_text, stamp_problem

sys.path.insert(0, str(ROOT / "scripts"))
import execute_notebooks  # noqa: E402  (scripts/ is not a package)

LESSON = "50-tiny"
STAMP_CELL = ('from gpukit import announce_device, lesson_stamp\n\ndevice = announce_device()\n'
              'lesson_stamp("gpu", device)')
H100 = "cuda:0 (NVIDIA H100 80GB HBM3, 79.2 GiB)"


def code(source, outputs=(), count=None, tags=()):
    cell = nbformat.v4.new_code_cell(source, outputs=list(outputs), execution_count=count)
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def lesson(last="print(sum(range(10)))", prose="Some prose.", setup="print('setup')"):
    """A lesson as the book stores one: title, setup cell, stamp cell, prose, one more code cell; no outputs."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# A tiny lesson"),
        code(setup, tags=["remove-cell", "setup-gpukit"]),
        code(STAMP_CELL),
        nbformat.v4.new_markdown_cell(prose),
        code(last),
    ])
    for index, cell in enumerate(nb.cells):
        cell["id"] = str(index)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def ran_on(nb, device=H100, date="2026-11-26", printed="45\n"):
    """``nb`` with the outputs a run on ``device`` gives it."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    stamp = LessonStamp("gpu", device, "2.11.0+cu130", datetime.date.fromisoformat(date))
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="gpukit: using the book's copy\n")]
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", text=f"Running on {device}\n"),
                           nbformat.v4.new_output("execute_result", {"text/markdown": stamp._repr_markdown_(),
                                                                     "text/plain": stamp.text()}, execution_count=2)]
    nb.cells[4].outputs = [nbformat.v4.new_output("stream", text=printed)]
    for count, index in enumerate((1, 2, 4), 1):
        nb.cells[index].execution_count = count
    return nb


def facts(**changes):
    return {"usable_gpu": True, "device": H100, "gpu_name": GPU_NAME, "gpu_memory_gib": 79.2, "driver": DRIVER,
            "torch_cuda": "13.0", "commit": "ba075f4ff845", "versions": {"torch": "2.11.0+cu130", "jax": "0.11.2",
                                                                         "numpy": "2.5.2", "pandas": "3.1.1"},
            **changes}


def keep(root: Path, executed, name=LESSON, date="2026-11-26", status=g.OK, run_facts=None) -> dict:
    """Keep ``executed`` as a GPU run of ``root``'s book, through gpu-check's own writer."""
    check = root / "_build" / "gpu-check" / date
    (check / "notebooks").mkdir(parents=True, exist_ok=True)
    nbformat.write(executed, check / "notebooks" / f"{name}.ipynb")
    run = g.Run(run_facts or facts(), None, [g.Result("lesson", name, status, 3.0)], 480.0)
    return g.save_gpu_run(run, check, root / store.GPU_RUNS, root, time.strptime(date, "%Y-%m-%d"))


# ------------------------------------------------------------------------------------------ the code hash
def test_the_code_hash_changes_exactly_when_the_lessons_code_changes():
    base = store.lesson_code_hash(lesson())
    assert base.startswith("sha256:") and len(base) == len("sha256:") + 64
    same = [ran_on(lesson()), lesson(prose="Other prose, *emphasised*."), lesson(setup="print('a fork's URL')")]
    tagged = lesson()
    tagged.cells[4].metadata["tags"] = ["hide-input"]
    tagged.cells[4]["id"] = "renumbered"
    tagged.metadata["mystnb"] = {"execution_timeout": 60}
    assert all(store.lesson_code_hash(nb) == base for nb in [*same, tagged])
    changed = [lesson(last="print(sum(range(11)))"), lesson(last="print(sum(range(10))) ")]
    added = lesson()
    added.cells.append(code("x = 1"))
    moved = lesson()
    moved.cells[2], moved.cells[4] = moved.cells[4], moved.cells[2]
    hashes = {store.lesson_code_hash(nb) for nb in [*changed, added, moved]}
    assert base not in hashes and len(hashes) == 4


def test_the_newest_run_of_the_lessons_code_is_current_else_the_newest_run_is_out_of_date(tmp_path):
    old = keep(tmp_path, ran_on(lesson()), date="2026-11-20")
    new = keep(tmp_path, ran_on(lesson()), date="2026-11-26")
    other = keep(tmp_path, ran_on(lesson(last="print(1)")), date="2026-11-28")
    runs = store.load_gpu_runs(tmp_path)
    assert [run.name for run in runs] == [Path(f).name for f in (other["folder"], new["folder"], old["folder"])]
    current, outdated = store.runs_of_lesson(runs, LESSON, store.lesson_code_hash(lesson()))
    assert current.name == Path(new["folder"]).name and outdated is None
    current, outdated = store.runs_of_lesson(runs, LESSON, store.lesson_code_hash(lesson(last="print(2)")))
    assert current is None and outdated.name == Path(other["folder"]).name
    assert store.runs_of_lesson(runs, "51-other", store.lesson_code_hash(lesson())) == (None, None)


def test_no_runs_kept_is_no_runs_and_a_broken_run_is_an_error(tmp_path):
    assert store.load_gpu_runs(tmp_path) == []
    (tmp_path / store.GPU_RUNS).mkdir(parents=True)
    (tmp_path / store.GPU_RUNS / "README.md").write_text("GPU runs")
    assert store.load_gpu_runs(tmp_path) == []
    (tmp_path / store.GPU_RUNS / "2026-11-26-half").mkdir()
    with pytest.raises(ValueError, match="is not a GPU run: its manifest.json cannot be read"):
        store.load_gpu_runs(tmp_path)
    (tmp_path / store.GPU_RUNS / "2026-11-26-half").rmdir()
    kept = keep(tmp_path, ran_on(lesson()))
    (Path(kept["folder"]) / "notebooks" / f"{LESSON}.ipynb").unlink()
    with pytest.raises(ValueError, match="notebooks are not in the folder"):
        store.load_gpu_runs(tmp_path)


# ------------------------------------------------------------------------------------------ what is kept
def test_a_run_keeps_each_lesson_that_passed_with_its_hash_stamp_and_the_nodes_facts(tmp_path):
    kept = keep(tmp_path, ran_on(lesson()))
    folder = Path(kept["folder"])
    assert folder.parent == tmp_path / "data" / "gpu-runs" and folder.name == "2026-11-26-h100-80gb-hbm3-cuda13"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["schema"] == store.RUN_SCHEMA and manifest["date"] == "2026-11-26" and manifest["stack"] == "cuda13"
    assert manifest["device"] == H100 and manifest["driver"] == DRIVER and manifest["cuda"] == "13.0"
    assert manifest["commit"] == "ba075f4ff845" and manifest["versions"]["torch"] == "2.11.0+cu130"
    entry = manifest["lessons"][LESSON]
    assert entry["code_hash"] == store.lesson_code_hash(lesson()) and entry["seconds"] == 3.0
    assert entry["stamp"] == {"date": "2026-11-26", "device": H100, "torch": "PyTorch 2.11.0+cu130"}
    assert nbformat.read(folder / entry["notebook"], as_version=4) == ran_on(lesson())
    # CUDA 12's torch makes a cuda12 run; Apple's GPU (no CUDA) names none.
    assert store.cuda_stack(facts(torch_cuda="12.9")) == "cuda12" and store.cuda_stack(facts(torch_cuda=None)) is None


def test_a_lesson_that_failed_or_would_stop_the_build_with_stderr_is_left_out(tmp_path):
    assert keep(tmp_path, ran_on(lesson()), status=g.FAILED) == {
        "folder": None, "lessons": [], "left_out": {LESSON: "FAILED"}}
    noisy = ran_on(lesson())
    noisy.cells[4].outputs.append(nbformat.v4.new_output("stream", name="stderr", text="UserWarning: slow\n"))
    kept = keep(tmp_path, noisy)
    assert kept["folder"] is None and "stderr in cell(s) 4" in kept["left_out"][LESSON]
    noisy.cells[4].metadata["mystnb"] = {"output_stderr": "show"}  # the page shows it on purpose: it builds
    assert keep(tmp_path, noisy)["lessons"] == [LESSON]
    assert not (tmp_path / store.GPU_RUNS).exists() or len(list((tmp_path / store.GPU_RUNS).iterdir())) == 1


def test_a_page_is_built_from_the_lesson_as_it_is_now_with_the_runs_outputs():
    """Prose and tags from the lesson today (the cache's cell metadata is what the page renders), outputs from the
    run; a run of other code is refused."""
    now = lesson(prose="Prose written after the run.", setup="print('a fork')")
    now.cells[4].metadata["tags"] = ["hide-output"]
    page = store.with_run_outputs(now, ran_on(lesson()))
    assert page.cells[3].source == "Prose written after the run." and page.cells[1].source == "print('a fork')"
    assert page.cells[4].metadata["tags"] == ["hide-output"] and page.cells[4].outputs[0]["text"] == "45\n"
    assert notebook_stamp(page)["device"] == H100 and page.cells[1].outputs[0]["text"].startswith("gpukit:")
    assert not now.cells[4].outputs  # the lesson itself is left as it was
    with pytest.raises(ValueError, match="code hashes differ"):
        store.with_run_outputs(lesson(last="print(0)"), ran_on(lesson()))


def test_the_stamp_is_read_back_as_the_page_and_the_notebook_show_it():
    stamp = LessonStamp("gpu", H100, "2.11.0+cu130", datetime.date(2026, 11, 26))
    expected = {"date": "2026-11-26", "device": H100, "torch": "PyTorch 2.11.0+cu130"}
    assert read_stamp(stamp._repr_markdown_()) == read_stamp(stamp.text()) == expected
    assert read_stamp(LessonStamp("cpu", "cpu (AMD EPYC, 2 logical cores)", None, datetime.date(2026, 11, 26))
                      .text())["torch"] == "no PyTorch"
    assert notebook_stamp(ran_on(lesson())) == expected and notebook_stamp(lesson()) is None


# ------------------------------------------------------------------------------------------ end to end
# scripts/execute_notebooks.py runs here in the test's process, whose pytest worker may have imported JAX for an
# earlier test: its process pool's fork then warns, though the forked child only starts a kernel (make book runs
# the script in a process of its own, without JAX).
FORK_BESIDE_JAX = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")


def tiny_book(root: Path, glued: bool = False) -> Path:
    """A book of one lesson, configured as the book is where it matters here (the execution cache, stderr fails
    the strict build, only the toc's files are built, ``{eval}`glued.<name>``` in the prose), with the GPU-run
    note's extension from this clone. ``glued``: the lesson ends by gluing a value that its last sentence shows."""
    (root / "notebooks").mkdir(parents=True)
    (root / "intro.md").write_text("# Tiny book\n")
    (root / "_toc.yml").write_text(yaml.safe_dump({"format": "jb-book", "root": "intro",
                                                   "chapters": [{"file": f"notebooks/{LESSON}"}]}))
    config = {"title": "Tiny", "only_build_toc_files": True, "exclude_patterns": ["_build"],
              "execute": {"execute_notebooks": "cache", "timeout": 120, "cache": str(root / "_build" / "cache")},
              "sphinx": {"local_extensions": {"gpu_runs": str(ROOT / "_ext"), "glued_eval": str(ROOT / "_ext")},
                         "config": {"nb_output_stderr": "warn", "nb_merge_streams": True,
                                    "nb_eval_name_regex": r"^glued\.[A-Za-z_][A-Za-z0-9_]*$"}}}
    (root / "_config.yml").write_text(yaml.safe_dump(config))
    nb = lesson()
    if glued:
        nb.cells += [code('from gpukit import glue\n\nglue("total", f"{sum(range(10)):,}")'),
                     nbformat.v4.new_markdown_cell("The sum, glued: {eval}`glued.total`.")]
        nb.cells[-2]["id"], nb.cells[-1]["id"] = "5", "6"
    nbformat.write(nb, root / "notebooks" / f"{LESSON}.ipynb")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "a tiny book"]):
        subprocess.run([*git, *command], check=True, capture_output=True)
    return root


def make_gpu_check_on_the_simulated_node(book: Path, out: Path) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(gpu_node_env(env, parts=("torch",)))
    env.update({"GPUKIT_DEVICE": "cuda:0", "GPUKIT_PROJECT_ROOT": str(book)})
    flags = f"--lessons {LESSON[:2]} --no-tests --no-bench --budget 300 --out {out} --save-run"
    command = ["make", "-C", str(ROOT), "gpu-check", f"GPU_CHECK_FLAGS={flags}", f"PYTHON={sys.executable}"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=400)


def execute(book: Path, monkeypatch, capsys) -> str:
    """make book's execution step over ``book``; a lesson it executes runs on the CPU on any machine (on a GPU node,
    or the simulated one, the kernel would otherwise take the GPU the machine reports)."""
    force_the_cpu(monkeypatch)
    monkeypatch.setattr(execute_notebooks, "ROOT", book)
    assert execute_notebooks.main(["--cache", str(book / "_build" / "cache"), "--jobs", "1"]) == 0
    return capsys.readouterr().out


def build(book: Path) -> subprocess.CompletedProcess:
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    return subprocess.run([str(jupyter_book), "build", str(book), "--all", "-W", "-n", "--keep-going"],
                          capture_output=True, text=True, timeout=600, cwd=book)


def page(book: Path) -> str:
    return (book / "_build" / "html" / "notebooks" / f"{LESSON}.html").read_text(encoding="utf-8")


def cached(book: Path):
    """The build's cached execution of the lesson: (its record's data, its notebook)."""
    from jupyter_cache import get_cache

    cache = get_cache(str(book / "_build" / "cache"))
    record = cache.match_cache_notebook(nbformat.read(book / "notebooks" / f"{LESSON}.ipynb", as_version=4))
    return record.data, cache.get_cache_bundle(record.pk).nb


@FORK_BESIDE_JAX
def test_make_book_takes_a_kept_run_in_place_of_executing_and_runs_the_cpu_again_once_it_is_gone(
        tmp_path, monkeypatch, capsys):
    book = tiny_book(tmp_path / "book")
    # No run kept: as before GPU runs were kept, the lesson is executed, and nothing else is said.
    printed = execute(book, monkeypatch, capsys).splitlines()
    assert printed[0].startswith("Executing 1 notebook(s)") and len(printed) == 2, printed
    data, nb = cached(book)
    assert "gpu_run" not in data and notebook_stamp(nb)["device"].startswith("cpu (")
    kept = keep(book, ran_on(lesson()))
    name = Path(kept["folder"]).name
    assert execute(book, monkeypatch, capsys) == (f"  notebooks/{LESSON}.ipynb: from the GPU run data/gpu-runs/"
                                                  f"{name} ({H100}, 2026-11-26)\nEvery notebook has an up-to-date "
                                                  f"cached run.\n")
    data, nb = cached(book)
    assert data == {"execution_seconds": 3.0, "gpu_run": name} and notebook_stamp(nb)["device"] == H100
    assert nb.cells[-1].outputs[0]["text"] == "45\n"  # the cache keeps the code cells only
    # The run removed, the same code: its outputs no longer stand, and the lesson runs on the CPU again.
    for path in sorted(Path(kept["folder"]).rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    Path(kept["folder"]).rmdir()
    assert execute(book, monkeypatch, capsys).startswith("Executing 1 notebook(s)")
    data, nb = cached(book)
    assert "gpu_run" not in data and notebook_stamp(nb)["device"].startswith("cpu (")


@FORK_BESIDE_JAX
def test_a_run_made_by_make_gpu_check_is_what_the_page_shows_until_the_lessons_code_changes(tmp_path, monkeypatch,
                                                                                            capsys):
    book = tiny_book(tmp_path / "book", glued=True)
    done = make_gpu_check_on_the_simulated_node(book, tmp_path / "check")
    assert "Kept 1 lesson(s) as a GPU run" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    (run,) = store.load_gpu_runs(book)
    assert run.name == f"{time.strftime('%Y-%m-%d')}-h100-80gb-hbm3-cuda13" and run.manifest["stack"] == "cuda13"
    assert run.manifest["driver"] == DRIVER and run.manifest["device"].startswith(f"cuda:0 ({GPU_NAME}, ")
    head = subprocess.run(["git", "-C", str(book), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    assert run.manifest["commit"] == head.stdout.strip()
    kept = run.lessons[LESSON]
    assert kept["code_hash"] == store.lesson_code_hash(nbformat.read(book / "notebooks" / f"{LESSON}.ipynb", 4))
    assert kept["stamp"]["device"] == run.manifest["device"] and kept["stamp"]["date"] == run.date
    gpu = {"source": f"the GPU run data/gpu-runs/{run.name}", "stamp": kept["stamp"], "gpu_run": run.name,
           "outdated_run": None}

    # A build that skips scripts/execute_notebooks.py executes the lesson on the CPU: the strict build stops.
    skipped = build(book)
    assert skipped.returncode != 0 and f"though the GPU run data/gpu-runs/{run.name} ran" in skipped.stderr

    # make book's way: the lesson is not executed, its page is built from the run.
    printed = execute(book, monkeypatch, capsys)
    assert f"notebooks/{LESSON}.ipynb: from the GPU run data/gpu-runs/{run.name}" in printed
    assert "Executing" not in printed
    built = build(book)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert stamp_problem(page(book), gpu) is None and note_problem(page(book), gpu) is None
    assert "Running on cuda:0 (NVIDIA H100 80GB HBM3" in page(book) and f"driver {DRIVER}" in page(book)
    assert "The sum, glued: 45." in page_text(page(book))  # the run's glued values reach the prose
    # The hosted CPU build publishes it: deploy.yml's stamp check takes the run's stamp on the run's page.
    published = check_stamps(book, "cpu")
    assert published.returncode == 0 and f"from the GPU run {run.name}" in published.stdout, published.stderr

    # New prose, same code: still the run, without executing anything.
    nb = nbformat.read(book / "notebooks" / f"{LESSON}.ipynb", as_version=4)
    nb.cells[3].source = "Prose rewritten after the run."
    nbformat.write(nb, book / "notebooks" / f"{LESSON}.ipynb")
    assert execute(book, monkeypatch, capsys) == "Every notebook has an up-to-date cached run.\n"

    # New code: executed on the CPU; the page says the run is out of date, and the stamp check fails it against
    # the run it no longer shows.
    nb.cells[4].source = "print(sum(range(11)))"
    nbformat.write(nb, book / "notebooks" / f"{LESSON}.ipynb")
    printed = execute(book, monkeypatch, capsys)
    assert f"its GPU run data/gpu-runs/{run.name} is out of date" in printed and "Executing 1 notebook(s)" in printed
    built = build(book)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    cpu = {"source": "executed for the site", "stamp": read_stamp(page_text(page(book))), "gpu_run": None,
           "outdated_run": run.name}
    assert cpu["stamp"]["device"].startswith("cpu (") and "Prose rewritten after the run." in page(book)
    assert note_problem(page(book), cpu) is None and "GPU run out of date" in page(book)
    problem = stamp_problem(page(book), gpu)
    assert problem and "the page's stamp says" in problem and run.manifest["device"] in problem
    assert check_stamps(book, "cpu").returncode == 0  # executed here, on the CPU: stamped cpu
    assert "not stamped as run on cuda" in check_stamps(book, "cuda").stderr


def check_stamps(book: Path, expected: str) -> subprocess.CompletedProcess:
    """deploy.yml's own check step before publishing (the command its build jobs run, with STAMPED_ON set to
    ``expected``) over the book's site and kept runs."""
    import yaml

    deploy = yaml.safe_load((ROOT / ".github" / "workflows" / "deploy.yml").read_text(encoding="utf-8"))
    (command,) = {step["run"] for job in deploy["jobs"].values() for step in job.get("steps", [])
                  if step.get("name", "").startswith("Every lesson page is stamped")}
    # The runner's checkout, beside the book: the script, and the book's site and kept runs where it looks.
    checkout = book.parent / "deploy-checkout"
    (checkout / "scripts").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "scripts" / "check_stamps.py", checkout / "scripts")
    for name in ("_build", "data"):
        if not (checkout / name).exists():
            (checkout / name).symlink_to(book / name)
    return subprocess.run(["/bin/sh", "-c", command], cwd=checkout, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "STAMPED_ON": expected})


def test_the_commit_hooks_leave_a_kept_run_as_written():
    """pre-commit strips the lessons' outputs and lets ruff fix their code: a GPU run's notebooks must keep both
    (their outputs are what the pages show, their code is hashed), so the hooks skip data/gpu-runs/."""
    import re

    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    excluded = re.compile(config.get("exclude", "^$"))
    assert excluded.search(f"{store.GPU_RUNS}/2026-11-26-h100-80gb-hbm3-cuda13/notebooks/01-cpu-vs-gpu.ipynb")
    assert not excluded.search("notebooks/01-cpu-vs-gpu.ipynb")
    hooks = {hook["id"] for repo in config["repos"] for hook in repo["hooks"]}
    assert {"nbstripout", "ruff"} <= hooks
