"""The site the tests build: once per test run, shared by the browser test and the JupyterHub test.

It is built as a real site would be, from the book's own _config.yml with two settings changed: the
JupyterHub URL points at the hub that tests/test_jupyterhub.py starts, and the repository URL (and branch)
at the git server it starts beside it. Everything else is the book's configuration, so the launch links on
the pages are the ones Jupyter Book and its theme write for a real site. The build goes to
``_build/site-test`` and leaves ``_build/html`` (what `make book` built) alone.

Notebooks are not executed again: the test site has an execution cache of its own, filled with the book's
cached run of each lesson where `make book` made one, else with this test run's nbval run of it
(tests/lesson_runs.py; the build waits for those), and only a lesson that has neither (a test of the site run
alone) is executed, by scripts/execute_notebooks.py, offline.

pytest-xdist runs the two test files in different processes: a lock file lets the first build and the
other wait for it; the record of the build says which test run made it, so each run builds anew.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import yaml
from booktoc import ROOT, toc_files
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn
from lesson_runs import current_test_run, executed_path, wait_for
from netns import loopback_namespace_prefix

from gpukit.distributed import free_port

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

# The branch the test site launches: not the repository's default, because a launch link that loses its
# branch (a known Jupyter Book bug) would still pull the default and look right.
LAUNCH_BRANCH = "workshop-hub-test"
# The served repository's path, org/name as on a real forge; nbgitpuller clones it into ~/gpu-python.
REPOSITORY_PATH = "gpu-python/gpu-python"
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
        if found is not None:
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


def _build(record: dict, run_here: set[Path]) -> dict:
    for stale in (HTML, SITE / "_build" / ".doctrees", SITE / "_build" / "jupyter_execute"):
        shutil.rmtree(stale, ignore_errors=True)
    record = {**record, "outputs_from": seed_cache(run_here)}
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
