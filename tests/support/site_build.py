"""The site the tests build: once per test run, shared by the browser test and the JupyterHub test.

It is built as a real site would be, from the book's own _config.yml with two settings changed: the
JupyterHub URL points at the hub that tests/book/test_jupyterhub.py starts, and the repository URL (and branch)
at the git server it starts beside it. Everything else is the book's configuration, so the launch links on
the pages are the ones Jupyter Book and its theme write for a real site. The build goes to
``_build/site-test`` and leaves ``_build/html`` (what `make book` built) alone.

Notebooks are not executed again: the test site has an execution cache of its own, filled with the book's
cached run of each lesson where `make book` made one, else with this test run's nbval run of it
(tests/support/lesson_runs.py; the build waits for those), and only a lesson that has neither (a test of the site run
alone) is executed, by scripts/execute_notebooks.py, offline. A lesson with a GPU run kept in data/gpu-runs/ that
ran its code is built from that run, as `make book` builds it (scripts/execute_notebooks.py puts it in the cache).
The record says which run each lesson page was built from, with that run's stamp (``built_from``), and
:func:`stamp_problem` is the site check's comparison of a page's stamp with it.

pytest-xdist runs the two test files in different processes: a lock file lets the first build and the
other wait for it; the record of the build says which test run made it, so each run builds anew.
"""

from __future__ import annotations

import fcntl
import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn

from booktools.gpu_runs import lesson_code_hash, load_gpu_runs, runs_of_lesson
from gpukit.core.stamp import notebook_stamp, read_stamp
from gpukit.topics.distributed import free_port
from tests.support.booktoc import ROOT, toc_files
from tests.support.device_probe import skip_where_the_gpu_cannot_work
from tests.support.hub_session import REPOSITORY_PATH
from tests.support.lesson_runs import current_test_run, executed_path, run_in, wait_for
from tests.support.netns import loopback_namespace_prefix

SITE = ROOT / "_build" / "site-test"
HTML = SITE / "_build" / "html"
RECORD = SITE / "build.json"
CACHE = ROOT / "_build" / ".jupyter_cache"
SITE_CACHE = SITE / ".jupyter_cache"
# The longest the build waits for the lessons' nbval runs on the other pytest worker: about all of them, one
# after another, on a slow machine; and the longest it waits for the next one (more than any lesson takes).
LESSON_RUNS_WAIT_S = 1500
LESSON_RUNS_STALL_S = 240
JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")
EXECUTE_NOTEBOOKS = [sys.executable, str(ROOT / "scripts" / "execute_notebooks.py"), "--cache", str(SITE_CACHE)]

# Why the site (and so the hub test) cannot be built where torch reports a GPU it cannot use
# (tests/support/device_probe.py):
# the build executes the lessons, or takes their nbval runs, and a lesson puts its tensors on the GPU it is shown.
LESSONS_NEED_THE_GPU = "the test site is built from runs of the lessons, which put their tensors on that GPU"

# The branch the test site launches: not the repository's default, because a launch link that loses its
# branch (a known Jupyter Book bug) would still pull the default and look right.
LAUNCH_BRANCH = "workshop-hub-test"
# Inside a loopback-only namespace nothing else listens, so the ports can be fixed before the servers exist.
NAMESPACE_PORTS = {"hub": 8765, "git": 9418}


def site_config(hub_url: str, repository_url: str, branch: str) -> dict:
    """The book's _config.yml with the hub URL and the repository (URL and branch) changed, and the
    execution cache named by its absolute path, because the build's output folder is not the book's."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    config["launch_buttons"]["jupyterhub_url"] = hub_url
    config["repository"]["url"] = repository_url
    config["repository"]["branch"] = branch
    config["execute"]["cache"] = str(SITE_CACHE)
    # Jupyter Book resolves local extensions against the config file's folder, which is not the book's here.
    extensions = config["sphinx"]["local_extensions"]
    config["sphinx"]["local_extensions"] = {name: str(ROOT / folder) for name, folder in extensions.items()}
    return config


def lessons() -> list[Path]:
    return [ROOT / f"{doc}.ipynb" for doc in toc_files() if (ROOT / f"{doc}.ipynb").is_file()]


def seeded(sources: dict[str, str]) -> dict[str, dict | None]:
    """The stamp of each lesson's outputs :func:`seed_cache` put in the site's cache, read from the site's cache
    right after seeding (the book's cached run, or this test run's nbval run)."""
    site_cache, stamps = get_cache(str(SITE_CACHE)), {}
    for path in lessons():
        if path.name in sources:
            record = site_cache.match_cache_notebook(nbformat.read(path, as_version=4))
            stamps[path.name] = notebook_stamp(site_cache.get_cache_bundle(record.pk).nb)
    return stamps


def seed_cache(run_here: set[Path]) -> dict[str, str]:
    """A new cache for the test site, with each lesson's outputs from the book's cache, or else from this test
    run's nbval run of it (waiting for it); returns where each lesson's outputs came from."""
    shutil.rmtree(SITE_CACHE, ignore_errors=True)
    site_cache = get_cache(str(SITE_CACHE))
    book_cache = get_cache(str(CACHE)) if CACHE.is_dir() else None
    sources, waiting = {}, []
    for path in lessons():
        try:
            found = book_cache.match_cache_notebook(nbformat.read(path, as_version=4)) if book_cache else None
        except KeyError:
            found = None
        # Outputs the book's cache took from a GPU run are not seeded: the site takes the runs from data/gpu-runs.
        if found is not None and not (found.data or {}).get("gpu_run"):
            bundle = book_cache.get_cache_bundle(found.pk)
            site_cache.cache_notebook_bundle(CacheBundleIn(bundle.nb, str(path), data=found.data),
                                             check_validity=False, overwrite=True)
            sources[path.name] = "the book's cache"
        elif path.resolve() in run_here:
            waiting.append(path)
    for path, run in wait_for(waiting, LESSON_RUNS_WAIT_S, LESSON_RUNS_STALL_S).items():
        if run["usable"]:
            nb = nbformat.read(executed_path(path), as_version=4)
            site_cache.cache_notebook_bundle(CacheBundleIn(nb, str(path), data={"execution_seconds": run["seconds"]}),
                                             check_validity=False, overwrite=True)
            sources[path.name] = "this run's nbval run"
    return sources


def stamp_words(stamp: dict | None) -> str:
    return f"{stamp['date']} on {stamp['device']}, with {stamp['torch']}" if stamp else "no stamp"


def built_from(sources: dict[str, str], seeded_stamps: dict[str, dict | None]) -> dict[str, dict]:
    """Which run each lesson page is built from, after scripts/execute_notebooks.py filled the site's cache:
    ``source`` (in words), ``stamp`` (that run's, read from the run itself: the GPU run's notebook, the book's
    cached run, the nbval run), ``gpu_run`` (the GPU run's name, or None) and ``outdated_run`` (the lesson's newest
    GPU run where it is out of date, or None)."""
    runs, site_cache, found = load_gpu_runs(ROOT), get_cache(str(SITE_CACHE)), {}
    for path in lessons():
        notebook = nbformat.read(path, as_version=4)
        current, outdated = runs_of_lesson(runs, path.stem, lesson_code_hash(notebook))
        if current is not None:
            source = f"the GPU run data/gpu-runs/{current.name}"
            stamp = notebook_stamp(nbformat.read(current.notebook(path.stem), as_version=4))
            sources[path.name] = source
        elif path.name in seeded_stamps:
            source, stamp = sources[path.name], seeded_stamps[path.name]
        else:
            source = "executed for the site"
            try:
                stamp = notebook_stamp(site_cache.get_cache_bundle(site_cache.match_cache_notebook(notebook).pk).nb)
            except KeyError:
                stamp = None
        found[path.name] = {"source": source, "stamp": stamp, "gpu_run": current and current.name,
                            "outdated_run": outdated and outdated.name}
    return found


def page_text(page: str) -> str:
    """A built page's text: its tags removed (a stamp's device is split into spans), its entities read."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def stamp_problem(page: str, run: dict) -> str | None:
    """Why the stamp on a lesson page (its HTML) is not the stamp of the run it was built from (``run``, an entry
    of :func:`built_from`), or None when they agree: the date, the device and PyTorch's version."""
    shown = read_stamp(page_text(page))
    if run["stamp"] is None:
        return f"the run it was built from ({run['source']}) has no stamp"
    if shown != run["stamp"]:
        return (f"the page's stamp says {stamp_words(shown)}; the run it was built from ({run['source']}) says "
                f"{stamp_words(run['stamp'])}")
    return None


def note_problem(page: str, run: dict) -> str | None:
    """Why the note under a lesson page's stamp (_ext/gpu_runs.py) does not say whose run the page shows, or None:
    "Run on a GPU" naming the GPU run it was built from; "GPU run out of date" naming the lesson's out-of-date run;
    no such note where the lesson has no GPU run."""
    notes = re.findall(r'<div class="[^"]*\bgpu-run\b[^"]*">(.*?)</div>', page, flags=re.S)
    text = " ".join(page_text(note) for note in notes)
    if run["gpu_run"]:
        wanted = ("Run on a GPU", f"data/gpu-runs/{run['gpu_run']}")
    elif run["outdated_run"]:
        wanted = ("GPU run out of date", f"data/gpu-runs/{run['outdated_run']}")
    else:
        return f"a GPU-run note on a page with no GPU run: {text[:300]}" if notes else None
    if len(notes) != 1 or not all(words in text for words in wanted):
        return f"{len(notes)} GPU-run note(s) where one saying {' and '.join(wanted)} belongs: {text[:300]}"
    return None


def _build(record: dict, run_here: set[Path]) -> dict:
    for stale in (HTML, SITE / "_build" / ".doctrees", SITE / "_build" / "jupyter_execute"):
        shutil.rmtree(stale, ignore_errors=True)
    sources = seed_cache(run_here)
    seeded_stamps = seeded(sources)
    record = {**record, "outputs_from": sources}
    config_file = SITE / "_config.yml"
    config_file.write_text(yaml.safe_dump(site_config(record["hub_url"], record["repository_url"], LAUNCH_BRANCH)))
    prefix = loopback_namespace_prefix()[0] if record["offline"] else None
    build = [str(JUPYTER_BOOK), "build", str(ROOT), "--config", str(config_file), "--path-output", str(SITE),
             "-W", "-n", "--keep-going", "--all"]
    for step in (EXECUTE_NOTEBOOKS, build):
        command = step if prefix is None else [*prefix, *step]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            return {**record, "error": f"book build failed:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"}
        if step is EXECUTE_NOTEBOOKS:
            record["built_from"] = built_from(sources, seeded_stamps)
    if not (HTML / "index.html").is_file():
        return {**record, "error": f"the build wrote no {HTML / 'index.html'}"}
    return record


def built_site(run_here: set[Path] = frozenset()) -> dict:
    """Build the test site unless this test run already did; returns the build's record: ``html``,
    ``offline`` (built with no network), ``why_not`` (why not), ``hub_url``, ``repository_url``, ``branch``,
    ``ports``, ``outputs_from`` (each lesson's source of outputs, if not executed for the site) and ``error``
    (empty when the build worked). ``run_here``: the lessons nbval runs in this test run."""
    SITE.mkdir(parents=True, exist_ok=True)
    with open(SITE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if RECORD.is_file():
            record = json.loads(RECORD.read_text())
            if record.get("run") == current_test_run():
                return record
        prefix, why_not = loopback_namespace_prefix()
        ports = dict(NAMESPACE_PORTS) if prefix else {name: free_port() for name in NAMESPACE_PORTS}
        record = {
            "run": current_test_run(), "html": str(HTML), "offline": prefix is not None, "why_not": why_not,
            "ports": ports, "branch": LAUNCH_BRANCH,
            "hub_url": f"http://127.0.0.1:{ports['hub']}",
            "repository_url": f"git://127.0.0.1:{ports['git']}/{REPOSITORY_PATH}",
            "error": "",
        }
        record = _build(record, set(run_here))
        RECORD.write_text(json.dumps(record, indent=1))
        return record


def the_test_site(session) -> dict:
    """:func:`built_site` for a test module's fixture (``session``: pytest's): skipped before building where torch
    reports a GPU it cannot use (a build error never skips), failed on a build error."""
    skip_where_the_gpu_cannot_work(needs=LESSONS_NEED_THE_GPU)
    record = built_site(run_in(session))
    if record["error"]:
        pytest.fail(record["error"])
    return record
