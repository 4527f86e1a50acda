"""The launch buttons and the workshop hub, end to end: every lesson page's JupyterHub link, as the test site
(tests/support/site_build.py) wrote it, followed in Chromium on the hub the book ships (hub/jupyterhub_config.py) by
two attendees: tests/support/hub_session.py runs the session and says what it does, tests/support/hub_lesson_checks.py
measures what JupyterLab shows of each lesson.

The session runs inside a loopback-only network namespace where one can be made (nothing listens on or
reaches another address); where the test's one-node Slurm can run, the hub starts the users' servers as
Slurm jobs with batchspawner, as the shipped file does on a cluster, else as local processes; the tests below
say which.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from gpukit.topics.distributed import free_port
from tests.support.booktoc import ROOT, toc_files
from tests.support.hub_lesson_checks import problems
from tests.support.hub_session import (
    EDITED,
    EXECUTED,
    HOME,
    NOTE,
    REPORT,
    REPOSITORY_FOLDER,
    SESSION,
    STATE,
    UPDATED,
    UPSTREAM,
    USERS,
    git,
    hub_environment,
    install_proxy,
    make_user_environment,
    processes_using,
    serve_repository,
    write_test_overrides,
)
from tests.support.netns import loopback_namespace_prefix
from tests.support.site_build import the_test_site
from tests.support.slurm_cluster import GPU_TYPES, PARTITION, SlurmCluster, why_not_here

LESSONS = [doc for doc in toc_files() if doc.startswith("notebooks/")]
CLONE = HOME / USERS[0] / REPOSITORY_FOLDER  # the first attendee's, pulled by her launch links
LAUNCH_LINK = re.compile(r'href="([^"]*/hub/user-redirect/git-pull\?[^"]*)"')
EVAL_ROLE = re.compile(r"\{eval\}`[^`]+`")


def launch_link(site: dict, doc: str) -> str | None:
    page = Path(site["html"], f"{doc}.html").read_text(encoding="utf-8")
    found = LAUNCH_LINK.search(page)
    return html.unescape(found.group(1)) if found else None


@pytest.fixture(scope="module")
def site(request):
    return the_test_site(request.session)


@pytest.fixture(scope="module")
def hub(site):
    """Run the whole hub session once, in a child Python (inside the namespace); yields its report."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("Chromium is not installed: run `scripts/system-packages.sh` (make test runs it first)")
    why_not = install_proxy()
    if why_not:
        pytest.skip(f"no JupyterHub session: {why_not}")
    # Where the test's one-node Slurm can run, the user's server is a Slurm job, and the session runs in the
    # cluster's loopback-only namespace; else in a namespace of its own, where one can be made.
    cluster, slurm_why_not = None, why_not_here() if site["offline"] else "no loopback-only network namespace"
    if not slurm_why_not:
        cluster = SlurmCluster("slurm-hub")
        try:
            cluster.start()
        except RuntimeError as error:
            cluster.stop()
            cluster, slurm_why_not = None, f"the test's Slurm cluster did not start: {error}"
    prefix = cluster.prefix() if cluster else loopback_namespace_prefix()[0] if site["offline"] else None
    try:
        ports = {**site["ports"], **({"hub_api": 8081, "proxy_api": 8001} if prefix else
                                     {"hub_api": free_port(), "proxy_api": free_port()})}
        for stale in ("home", "hub", "session", "upstream-work"):
            shutil.rmtree(STATE / stale, ignore_errors=True)
        SESSION.mkdir(parents=True)
        for user in USERS:  # a site's attendees have home folders; the test's get theirs here
            (HOME / user).mkdir(parents=True)
        served = serve_repository(site["branch"])
        user_python = make_user_environment()
        slurm = {"partition": PARTITION, "gpu_types": GPU_TYPES, "conf": str(cluster.conf)} if cluster else None
        write_test_overrides(slurm=bool(cluster))
        plan = {"ports": ports, "hub_url": site["hub_url"], "branch": site["branch"], "chromium": chromium,
                "links": {doc: link for doc in LESSONS if (link := launch_link(site, doc))},
                "spawner": "slurm" if cluster else "local", "hub_env": hub_environment(site["hub_url"], ports, slurm)}
        (SESSION / "plan.json").write_text(json.dumps(plan, indent=1))
        command = [sys.executable, str(ROOT / "tests" / "support" / "hub_session.py"), str(SESSION / "plan.json")]
        done = subprocess.run(command if prefix is None else [*prefix, *command], capture_output=True, text=True,
                              timeout=1200)
        if cluster:
            # The hub cancels each attendee's job as it stops, and gives a job 10 s to end before it exits. A
            # cancelled job stays COMPLETING while its server shuts its kernels down and srun drains its step
            # (up to 32 s), so the jobs' end states are read once the jobs have left the queue.
            queued = cluster.run("squeue", "-h", "-o", "%i", check=False).stdout.split()
            try:
                if queued:
                    cluster.wait(queued, 120)
            except TimeoutError as stuck:
                print(stuck)  # test_users_server_ran_as_a_slurm_job then fails with each job's state
        if not REPORT.is_file():
            pytest.fail(f"the hub session wrote no report ({done.returncode}):\n{done.stdout[-3000:]}\n"
                        f"{done.stderr[-3000:]}")
        yield {"report": json.loads(REPORT.read_text()), "served": served, "user_python": user_python,
               "why_not_slurm": slurm_why_not,
               "slurm_jobs": cluster.run("scontrol", "show", "job", "-o", check=False).stdout if cluster else ""}
    finally:
        if cluster:
            cluster.stop()
        for leftover in processes_using(str(STATE)):  # a failed session's, so that no test run leaves any
            subprocess.run(["kill", "-9", leftover.split(" ", 1)[0]], check=False)


def hub_log() -> str:
    path = STATE / "jupyterhub.log"
    return "\n".join(path.read_text(errors="replace").splitlines()[-40:]) if path.is_file() else "(no hub log)"


def measured(hub, doc: str, key: str = "view") -> dict:
    """What the session measured of ``doc`` in JupyterLab: before anything ran (``view``), or after its run."""
    entry = hub["report"]["pages"].get(doc, {})
    assert entry.get(key), f"{doc} was not measured in JupyterLab ({key}): {entry.get('error', entry)}"
    return entry[key]


@pytest.mark.parametrize("doc", LESSONS)
def test_lesson_page_links_to_the_hub_with_repository_branch_and_notebook(site, doc):
    link = launch_link(site, doc)
    assert link, f"{doc}: no JupyterHub launch link on the page"
    parsed = urlparse(link)
    hub = urlparse(site["hub_url"])
    assert (parsed.scheme, parsed.netloc) == (hub.scheme, hub.netloc), link
    assert parsed.path == "/hub/user-redirect/git-pull", f"{doc}: {parsed.path} (a double slash gives a 404)"
    query = {key: values[0] for key, values in parse_qs(parsed.query).items()}
    assert query.get("repo") == site["repository_url"], link
    assert query.get("branch") == site["branch"], f"{doc}: the link does not carry the configured branch"
    assert query.get("urlpath") == f"lab/tree/{REPOSITORY_FOLDER}/{doc}.ipynb", link


def test_hub_session_ran_cleanly(hub):
    report = hub["report"]
    assert not report["errors"], "\n".join(report["errors"]) + "\n" + hub_log()
    assert not report["requests_leaving_loopback"], report["requests_leaving_loopback"]


def test_hub_session_left_no_process_running(hub):
    assert hub["report"]["left_running"] == [], hub["report"]["left_running"]
    assert processes_using(str(STATE)) == []


@pytest.mark.parametrize("doc", LESSONS)
def test_launch_link_opens_the_notebook_in_jupyterlab(hub, doc):
    entry = hub["report"]["pages"].get(doc)
    assert entry is not None, f"{doc}: the session did not get to this page\n{hub['report']['errors']}"
    assert "error" not in entry, f"{doc}: {entry['error']} (screenshot {entry.get('screenshot')})\n{hub_log()}"
    user = USERS[0]
    assert urlparse(entry["url"]).path == f"/user/{user}/lab/tree/{REPOSITORY_FOLDER}/{doc}.ipynb", entry["url"]
    assert entry["tab"] == Path(doc).name + ".ipynb", f"JupyterLab's open tab is {entry['tab']!r}"


@pytest.mark.parametrize("doc", LESSONS)
def test_the_lesson_reads_in_jupyterlab_as_on_the_page(hub, doc):
    """Opened from its launch link, before anything runs: every Markdown cell rendered by jupyterlab-myst with no
    MyST source showing, every solution closed, the setup cell collapsed to its first line."""
    view = measured(hub, doc)
    assert problems(view) == [], f"{doc} in JupyterLab: {view}"


def eval_roles(doc: str) -> int:
    """How many ``{eval}`` roles the lesson's Markdown holds, as committed (each is one value in the prose)."""
    cells = json.loads((ROOT / f"{doc}.ipynb").read_text(encoding="utf-8"))["cells"]
    return sum(len(EVAL_ROLE.findall("".join(cell["source"]))) for cell in cells if cell["cell_type"] == "markdown")


@pytest.mark.parametrize("doc", LESSONS)
def test_each_value_in_the_prose_says_which_cell_computes_it_before_the_lesson_runs(hub, doc):
    """Opened from its launch link, before anything runs, no value reads as its expression (``glued.name``):
    each shows the placeholder scripts/prose_values.py wrote, which says which cell computes it."""
    view = measured(hub, doc)
    assert view["bare_expressions"] == [], \
        f"{doc}: {len(view['bare_expressions'])} values shown as their expression: {view['bare_expressions']}"
    assert view["expression_errors"] == 0, view
    assert view["placeholders"] == eval_roles(doc), f"{doc}: placeholders shown, against {{eval}} roles: {view}"


@pytest.mark.parametrize("doc", EXECUTED)
def test_the_attendees_run_replaces_the_placeholders_with_its_values(hub, doc):
    """Run All in the user's kernel: each Markdown cell's expressions are evaluated there, and the prose then shows
    the run's values: no placeholder, no expression, no error left."""
    after = measured(hub, doc, "view_after_run")
    assert eval_roles(doc) > 0, f"{doc} has no {{eval}} role: choose a lesson that has one for this test"
    assert after["settled"] and after["placeholders"] == 0 and after["bare_expressions"] == [], after
    assert after["expression_errors"] == 0, after
    assert problems(after) == [], after


def test_the_jupyterlab_measurement_tells_a_lesson_in_the_format_from_one_with_every_problem(hub):
    """The control notebooks of tests/support/hub_lesson_checks.py, opened in the same JupyterLab: the one written in
    the lessons' format measures clean, and each problem planted in the other is counted."""
    controls = hub["report"].get("controls", {})
    assert "error" not in controls and {"converted", "unconverted"} <= set(controls), controls
    assert problems(controls["converted"]["view"]) == [], controls["converted"]
    bad = controls["unconverted"]["view"]
    assert bad["complete"], bad
    # Planted: a {glue:figure} directive and a :label: after a blank line. (Also two {glue:text} roles, which
    # jupyterlab-myst renders as nothing, leaving no source to count: tests/book/test_notebooks.py refuses glue roles
    # in the lessons' source instead.)
    raw = " ".join(bad["raw_myst"])
    assert "Unknown Directive" in raw and ":label:" in raw, bad["raw_myst"]
    assert bad["open_solutions"] >= 1 and bad["visible_solution_code"] >= 2, bad
    assert bad["setup_lines_visible"] > 1, bad
    # Planted: a cell the page removes (it glues a value), not collapsed: its 4 lines are counted; collapsed, none.
    assert bad["removed_lines_visible"] == 4 and bad["removed_cells_open"] == [4], bad
    assert controls["converted"]["view"]["removed_lines_visible"] == 0
    # Planted: three {eval} expressions with no result (shown as their source), one with a kernel's error.
    assert [shown.split(": ")[1] for shown in bad["bare_expressions"]] == ["glued.mm_n", "glued.mm_n", "glued.mm_ms"]
    assert bad["expression_errors"] == 1 and bad["placeholders"] == 0, bad
    # The converted control's two {eval} roles show the placeholder scripts/prose_values.py wrote.
    good = controls["converted"]["view"]
    assert good["placeholders"] == 2 and good["bare_expressions"] == [] and good["expression_errors"] == 0, good


@pytest.mark.parametrize("shown", ["exercise", "placeholder"])
def test_a_screenshot_shows_an_exercise_and_a_values_placeholder_in_jupyterlab(hub, shown):
    """Kept for a person to look at: an exercise, and what a learner reads where a value will be, before its cell
    runs (CONTRIBUTING item 4)."""
    shot = hub["report"].get(f"{shown}_screenshot")
    assert shot and Path(shot).is_file() and Path(shot).stat().st_size > 5_000, shot
    assert Path(shot).is_relative_to(ROOT / "_build")


def test_pulled_repository_is_on_the_configured_branch(hub, site):
    """nbgitpuller commits what the user changed (here: the notebooks run and saved) before it merges, so
    the clone's HEAD may be its own commit; what it pulled is the configured branch's commit."""
    assert (CLONE / ".git").is_dir(), f"nbgitpuller did not clone into {CLONE}"
    assert git(CLONE, "rev-parse", "--abbrev-ref", "HEAD") == site["branch"]
    assert hub["served"]["branch_commit"] != hub["served"]["main_commit"]
    # The branch's newest commit is the change pushed during the session (test_an_edit_survives_...).
    newest = hub["report"].get("relaunch", {}).get("upstream_commit", hub["served"]["branch_commit"])
    assert git(CLONE, "rev-parse", f"origin/{site['branch']}") == newest
    for commit in {hub["served"]["branch_commit"], newest}:
        ancestor = subprocess.run(["git", "-C", str(CLONE), "merge-base", "--is-ancestor", commit, "HEAD"])
        assert ancestor.returncode == 0, f"the clone does not hold the branch's commit {commit}"


def test_users_kernel_has_the_lesson_libraries_but_not_gpukit(hub):
    probe = ("import importlib.util as u, sys; "
             "print([m for m in ('numpy', 'torch', 'matplotlib', 'pandas') if u.find_spec(m) is None], "
             "u.find_spec('gpukit'))")
    done = subprocess.run([str(hub["user_python"]), "-c", probe], capture_output=True, text=True, cwd="/")
    assert done.stdout.strip() == "[] None", done.stdout + done.stderr


@pytest.mark.parametrize("doc", EXECUTED)
def test_pulled_notebook_runs_to_the_end_in_the_users_kernel(hub, doc):
    entry = hub["report"]["pages"].get(doc, {})
    assert "run_seconds" in entry, f"{doc} was not run: {entry.get('error')}\n{hub_log()}"
    notebook = json.loads((CLONE / f"{doc}.ipynb").read_text(encoding="utf-8"))
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert all(cell.get("execution_count") for cell in code), f"{doc}: some cells were not run"
    errors = [out for cell in code for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not errors, f"{doc}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
    setup_output = "".join("".join(out.get("text", "")) for out in code[0].get("outputs", []))
    assert str(CLONE) in setup_output, f"{doc}: the setup cell did not find gpukit in the pulled repository: " \
                                       f"{setup_output!r}"


def test_the_hub_is_the_shipped_configuration(hub):
    """hub/jupyterhub_config.py, started as a site starts it; its own state: the secrets it made, private."""
    log = (STATE / "jupyterhub.log").read_text(errors="replace")
    spawner = "WorkshopSlurmSpawner" if hub["report"]["spawner"] == "slurm" else "SimpleLocalProcessSpawner"
    assert "Using Spawner: " in log and spawner in log.split("Using Spawner: ", 1)[1].splitlines()[0], hub_log()
    assert "Using Authenticator: jupyterhub.auth.DummyAuthenticator" in log, hub_log()
    for secret in ("cookie_secret", "proxy_auth_token"):
        path = STATE / "hub" / secret
        assert path.is_file() and path.stat().st_mode & 0o777 == 0o600, f"{path}: made by the shipped file, 600"


def test_jupyterlab_does_not_ask_about_jupyter_news(hub):
    news = hub["report"].get("news_prompt")
    assert news == {"plugin_disabled": True, "question_shown": 0}, news


def test_an_edit_survives_a_relaunch_while_other_notebooks_update(hub):
    """An attendee types into a cell and saves; the repository gets a new commit; the same launch link, clicked
    again, opens the notebook with the edit in view, and the other notebook has the new commit's change."""
    relaunch = hub["report"].get("relaunch", {})
    assert "error" not in relaunch and relaunch, relaunch or hub["report"]["errors"]
    assert relaunch["saved"], f"JupyterLab did not save {NOTE!r} into {EDITED}"
    assert relaunch["relaunch"]["tab"] == Path(EDITED).name + ".ipynb", relaunch["relaunch"]
    assert relaunch["note_in_view"] and relaunch["note_on_disk"], f"the edit is lost after the relaunch: {relaunch}"
    assert relaunch["other_updated"], f"{UPDATED} did not get the upstream change ({UPSTREAM!r}) on relaunch"


def second(hub) -> dict:
    found = hub["report"].get("second_attendee", {})
    assert found and "error" not in found, found or hub["report"]["errors"]
    return found


def test_a_second_attendee_starts_her_own_server_and_sees_only_her_own_files(hub):
    found = second(hub)
    assert found["opened"]["tab"] == Path(EDITED).name + ".ipynb", found["opened"]
    listing, notebook = found["own_listing"], found["own_notebook"]
    assert listing["status"] == 200 and notebook["status"] == 200, (listing, notebook)
    names = {item["name"] for item in json.loads(listing["body"])["content"]}
    # The first attendee's home has her controls folder; this one has only what her own launch link pulled.
    assert REPOSITORY_FOLDER in names and "controls" not in names, names
    assert NOTE not in notebook["body"], "the second attendee's copy holds the first attendee's edit"


@pytest.mark.parametrize("what", ["listing", "notebook", "kernels"])
def test_an_attendee_cannot_use_another_attendees_server(hub, what):
    """Through the first attendee's server, with the second attendee's cookies: refused, and nothing of the
    first attendee's in the answer. Her own server answers the same request (so the refusal is not a broken
    request)."""
    found = second(hub)
    assert found[f"own_{what}"]["status"] == 200, found[f"own_{what}"]
    theirs = found[f"their_{what}"]
    assert theirs["status"] in (401, 403), theirs
    assert not any(leak in theirs["body"] for leak in (NOTE, "controls", "00-environment-check", '"id"')), theirs


def test_an_attendee_cannot_open_another_attendees_jupyterlab(hub):
    lab = second(hub)["their_lab"]
    first = USERS[0]
    assert lab["status"] == 403 and f"/user/{first}/lab" not in lab["url"], lab
    assert NOTE not in lab["text"] and "00-environment-check" not in lab["text"], lab


def test_an_attendee_cannot_read_or_change_another_attendee_in_the_hub(hub):
    """The hub's API with the second attendee's login: she is herself; the first attendee's record, a token in
    the first attendee's name, and stopping the first attendee's server are refused with the hub's error object
    and nothing else; the first attendee's server still answers the first attendee afterwards."""
    found = second(hub)
    other = USERS[1]
    assert found["hub_self"]["status"] == 200 and json.loads(found["hub_self"]["body"])["name"] == other, found
    for request in ("hub_their_record", "hub_their_token", "hub_stop_theirs"):
        reply = found[request]
        assert reply["status"] in (403, 404), (request, reply)
        assert set(json.loads(reply["body"])) <= {"status", "message"}, (request, reply)
    assert found["theirs_still_answers"]["status"] == 200, found["theirs_still_answers"]


def test_users_server_ran_as_a_slurm_job(hub):
    """As on a cluster's hub: batchspawner submitted the user's server with sbatch."""
    if hub["report"]["spawner"] != "slurm":
        pytest.skip("the hub started the user's server as a local process (SimpleLocalProcessSpawner), not as a "
                    f"Slurm job: {hub['why_not_slurm']}")
    jobs = [line for line in hub["slurm_jobs"].splitlines() if "JobName=spawner-jupyterhub" in line]
    assert len(jobs) == len(USERS), f"one spawner job per attendee:\n{hub['slurm_jobs']}"
    assert all("JobState=COMPLETED" in job or "JobState=CANCELLED" in job for job in jobs), jobs
    # Each started from the form's default profile: one GPU of the site's first type, on its partition.
    first_page = next(iter(hub["report"]["pages"].values()))
    assert first_page.get("profile") == f"gpu-{GPU_TYPES[0]}", first_page
    assert all(f"Partition={PARTITION} " in job and f"gpu:{GPU_TYPES[0]}:1" in job for job in jobs), jobs
