"""The book's JupyterHub (hub/jupyterhub_config.py) on 127.0.0.1 for tests/book/test_jupyterhub.py, and the browser
session that follows the site's launch links through it.

The pieces, all real: JupyterHub, JupyterLab and nbgitpuller from PyPI; the configurable-http-proxy from npm
(installed into ``_build/cache/jupyterhub-test/node``); ``git daemon`` serving a bare copy of the book's
repository with a branch that is not its default; the shipped hub configuration, with the site's values for
loopback in the hub's environment and the test's own few settings (the dummy authenticator for the users below,
which the shipped file allows only on loopback with its test-only switch) in the file a site names for its own.
Each user's server is a Slurm job started by batchspawner from the hub's profile form when the test's one-node
Slurm cluster can run, else a local process (JupyterHub's SimpleLocalProcessSpawner), as the session's plan says.

The users' servers and kernels run in the **user environment**: a virtual environment that sees every
package of the book's .venv (NumPy, PyTorch, Matplotlib, pandas, JupyterLab, ...) except gpukit, as a hub's
kernel does before anyone installs this book's package. The notebooks' setup cell must make gpukit
importable there on its own.

Run as a script (``python hub_session.py PLAN.json``) it does the whole session inside whatever network
namespace it was started in: start the git server and the hub, log in in Chromium, open every launch link,
run the notebooks it is asked to, edit a notebook and click its link again after the repository changed, let
a second attendee try the first one's server and hub records, write a report, stop everything it started.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # gpukit and tests.support, when this file runs as a script
sys.path.insert(0, str(ROOT / "scripts"))  # prose_values: scripts/ is not a package

from prose_values import PLACEHOLDER  # noqa: E402

from gpukit.base.paths import build_dir  # noqa: E402
from tests.support.hub_lesson_checks import (  # noqa: E402
    converted_control,
    measure_lesson,
    unconverted_control,
)

# _build/cache/jupyterhub-test, or a private folder where the clone's path has spaces: the user environment's
# commands name their Python in a #! line, which cannot hold a space.
STATE = build_dir("jupyterhub-test")
HOME, SESSION = STATE / "home", STATE / "session"  # the attendees' home folders; the session's plan and report
REPORT = SESSION / "report.json"
# The served repository: in a git daemon's folder, at a path org/name as on a real forge; nbgitpuller clones it into
# the user's home as REPOSITORY_FOLDER.
GIT_ROOT, REPOSITORY_PATH = STATE / "git", "gpu-python/gpu-python"
REPOSITORY_FOLDER = REPOSITORY_PATH.rsplit("/", 1)[-1]
NODE_PREFIX = STATE / "node"
CHP_VERSION = "5.3.0"
CHP = NODE_PREFIX / "node_modules" / ".bin" / "configurable-http-proxy"
USER_ENV = STATE / "user-env"
USERS = ("ada", "grace")
# Run to the end in the user's kernel: the environment check, and a lesson that draws plots.
EXECUTED = ["notebooks/00-environment-check", "notebooks/13-benchmarks"]
# How long a launch link may take the first time (it starts the user's server) and after that, and a run of a lesson.
FIRST_TIMEOUT_S, PAGE_TIMEOUT_S, RUN_TIMEOUT_S = 180, 90, 240
# An exercise as an attendee sees it in JupyterLab, for people to look at (the browser test's pictures are beside it).
EXERCISE_SCREENSHOT = ROOT / "_build" / "site-test" / "screenshots" / "jupyterlab-exercise.png"
PLACEHOLDER_SCREENSHOT = EXERCISE_SCREENSHOT.with_name("jupyterlab-placeholder.png")
PASSWORD = "launch-button-test"
# The commands a hub runs in the user environment, and the modules whose main() they are.
USER_COMMANDS = {
    "jupyterhub-singleuser": "jupyterhub.singleuser",
    "batchspawner-singleuser": "batchspawner.singleuser",
}


# git as the test commits with it: an identity of its own, and main as a new repository's branch.
GIT = ("git", "-c", "user.name=Hub test", "-c", "user.email=hub-test@127.0.0.1", "-c", "init.defaultBranch=main")


# ---------------------------------------------------------------------------------------------- set-up steps
def install_proxy() -> str:
    """Install the configurable-http-proxy from npm unless it is there; returns "" or why it cannot be."""
    if CHP.is_file() and (NODE_PREFIX / "version").read_text(errors="replace").strip() == CHP_VERSION:
        return ""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return "Node.js and npm are not installed (Debian packages nodejs and npm; scripts/system-packages.sh)"
    NODE_PREFIX.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([npm, "install", "--prefix", str(NODE_PREFIX), "--no-audit", "--no-fund",
                           f"configurable-http-proxy@{CHP_VERSION}"], capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not CHP.is_file():
        return f"npm could not install configurable-http-proxy: {done.stderr.strip()[-800:]}"
    (NODE_PREFIX / "version").write_text(CHP_VERSION)
    return ""


def make_user_environment() -> Path:
    """A virtual environment whose Python sees .venv's packages but not gpukit's own; returns its Python.

    The packages are linked, not installed again: a folder of symbolic links to every entry of .venv's
    site-packages but gpukit's, added as a site directory (so the packages' own .pth files still run).
    JupyterLab's assets and the server extensions' switches (.venv/share/jupyter, .venv/etc/jupyter) are
    linked in too, because Jupyter looks for them under the running Python's prefix.
    """
    venv_root = Path(sys.executable).parent.parent
    site_packages = next((venv_root / "lib").glob("python3*/site-packages"))
    shutil.rmtree(USER_ENV, ignore_errors=True)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(USER_ENV)], check=True, capture_output=True)
    libraries = USER_ENV / "book-libraries"
    libraries.mkdir()
    for entry in site_packages.iterdir():
        if "gpukit" not in entry.name:
            (libraries / entry.name).symlink_to(entry)
    own_site = next((USER_ENV / "lib").glob("python3*/site-packages"))
    (own_site / "book-libraries.pth").write_text(f"import site; site.addsitedir({str(libraries)!r})\n")
    for shared in ("share/jupyter", "etc/jupyter"):
        (USER_ENV / shared).parent.mkdir(parents=True, exist_ok=True)
        (USER_ENV / shared).symlink_to(venv_root / shared)
    python = USER_ENV / "bin" / "python"
    for command, module in USER_COMMANDS.items():
        script = USER_ENV / "bin" / command
        script.write_text(f"#!{python}\nimport sys\nfrom {module} import main\nsys.exit(main())\n")
        script.chmod(0o755)
    return python


def git(folder: Path, *args: str) -> str:
    """``git -C folder args`` as the test commits with it (GIT); returns what it printed."""
    done = subprocess.run([*GIT, "-C", str(folder), *args], stdout=subprocess.PIPE, text=True, check=True)
    return done.stdout.strip()


def push_from(work: Path, branch: str, message: str) -> str:
    """Commit everything in the clone ``work`` on ``branch`` and push it; the clone goes. Returns the commit."""
    git(work, "add", "-A")
    git(work, "commit", "--quiet", "--allow-empty", "-m", message)
    git(work, "push", "--quiet", "origin", branch)
    commit = git(work, "rev-parse", "HEAD")
    shutil.rmtree(work)
    return commit


def serve_repository(branch: str) -> dict:
    """A bare copy of the book's repository for the git server: its default branch is this clone's
    commit, and ``branch`` adds one commit holding the working tree's tracked files as they are now (so
    the notebooks served are the ones under test). Returns both commits."""
    shutil.rmtree(GIT_ROOT, ignore_errors=True)
    bare, work = GIT_ROOT / REPOSITORY_PATH, GIT_ROOT / "work"
    bare.parent.mkdir(parents=True)
    git(GIT_ROOT, "clone", "--quiet", "--bare", "--no-local", str(ROOT), str(bare))
    git(bare, "symbolic-ref", "HEAD", "refs/heads/main")
    head = git(ROOT, "rev-parse", "HEAD")
    git(bare, "update-ref", "refs/heads/main", head)
    git(GIT_ROOT, "clone", "--quiet", str(bare), str(work))
    # The working tree's files as git would commit them (untracked ones too): a change is tested before its commit.
    for name in filter(None, git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")):
        if (ROOT / name).is_file():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, work / name)
    git(work, "checkout", "--quiet", "-b", branch)
    commit = push_from(work, branch, "The branch a workshop site launches (made by the JupyterHub test)")
    return {"main_commit": head, "branch_commit": commit}


# ---------------------------------------------------------------------------------------------- the servers
# The hub the test starts is the one the book ships, with the site's values given as a hub's service file would give
# them (GPU_PYTHON_* in its environment; `hub_environment` below) and the test's own few settings in the file a site
# names for its own (GPU_PYTHON_HUB_EXTRA_CONFIG; `write_test_overrides`).
SHIPPED_CONFIG = ROOT / "hub" / "jupyterhub_config.py"
# hub/jupyterhub_config.py lets a test authenticator in only with this variable set to this value, on loopback alone.
TEST_ONLY = ("GPU_PYTHON_HUB_TEST_ONLY_LOGIN_WITHOUT_PASSWORD", "a test hub on 127.0.0.1 that nobody else can reach")
TEST_OVERRIDES = """\
# Written by tests/support/hub_session.py: the hub test's own settings, which hub/jupyterhub_config.py loads last, as
# it loads
# a site's GPU_PYTHON_HUB_EXTRA_CONFIG.
c = get_config()  # noqa: F821
# One shared password for the test's attendees (the dummy authenticator, let in on loopback only).
c.DummyAuthenticator.password = {password!r}
# The servers run as root here (the test runs as root, or inside `unshare -r`); Jupyter refuses that without this.
c.Spawner.args = ["--allow-root"]
{spawner}"""
SLURM_OVERRIDES = """\
# The test's attendees have no accounts on this machine: sbatch runs as the hub's user, not through sudo as the
# attendee (batchspawner's default, which a site keeps).
c.SlurmSpawner.exec_prefix = ""
# The test's cluster is named by SLURM_CONF (a site's is in /etc/slurm): sbatch, squeue and the job's srun need it.
c.SlurmSpawner.env_keep.append("SLURM_CONF")
"""
LOCAL_OVERRIDES = """\
# No Slurm cluster here: the servers are local processes in the same user environment (the session's plan says why).
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {home!r}
c.Spawner.ip = "127.0.0.1"
"""


def hub_environment(hub_url: str, ports: dict, slurm: dict | None) -> dict[str, str]:
    """The hub process's environment: the site's values for a hub on 127.0.0.1 with the test's users, state, user
    environment and (``slurm``: partition, GPU types, SLURM_CONF) cluster; nothing inherited from this process."""
    settings = {
        "HUB_AUTHENTICATOR": "dummy", "HUB_USERS": " ".join(USERS), "HUB_ADMINS": "",
        "HUB_BIND_URL": hub_url, "HUB_API_IP": "127.0.0.1", "HUB_API_PORT": str(ports["hub_api"]),
        "HUB_CONNECT_IP": "127.0.0.1", "HUB_PROXY": str(CHP), "HUB_PROXY_API_PORT": str(ports["proxy_api"]),
        "HUB_STATE": str(STATE / "hub"), "HUB_USER_ENV": str(USER_ENV),
        "HUB_HOME_TEMPLATE": str(HOME / "{username}"),
        # The test cluster's partition allows an hour (the shipped default asks for four).
        "HUB_RUNTIME": "00:30:00", "HUB_EXTRA_CONFIG": str(STATE / "test_overrides.py"),
        "ACCOUNT": "", "MODULES": "", "HUB_RESERVATION": "",
        **({"PARTITION": slurm["partition"], "GPU_TYPES": " ".join(slurm["gpu_types"])} if slurm else {}),
    }
    return {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
            TEST_ONLY[0]: TEST_ONLY[1], **{f"GPU_PYTHON_{name}": value for name, value in settings.items()},
            **({"SLURM_CONF": slurm["conf"]} if slurm else {})}


def write_test_overrides(slurm: bool) -> None:
    spawner = SLURM_OVERRIDES if slurm else LOCAL_OVERRIDES.format(home=str(HOME / "{username}"))
    (STATE / "test_overrides.py").write_text(TEST_OVERRIDES.format(password=PASSWORD, spawner=spawner))


def wait_for_port(port: int, process: subprocess.Popen, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before listening on {port}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} was not listening on {port} after {timeout} s")
        time.sleep(0.2)


def stop(process: subprocess.Popen | None, grace: float = 20) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def processes_using(marker: str) -> list[str]:
    """``pid (state, parent): command line`` of every process whose command line mentions ``marker``, but this one.
    The state and the parent say why a process is left: a zombie, an orphan of a Slurm step, a server still stopping."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            status = dict(line.split(":\t", 1) for line in (entry / "status").read_text().splitlines() if ":\t" in line)
        except OSError:  # it has just exited
            continue
        if marker in command:
            found.append(f"{entry.name} ({status.get('State', '?').strip()}, parent {status.get('PPid', '?').strip()}):"
                         f" {command[:200]}")
    return found


# ---------------------------------------------------------------------------------------------- in Chromium
def log_in(page, hub_url: str, user: str) -> None:
    page.goto(f"{hub_url}/hub/login", wait_until="domcontentloaded")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", PASSWORD)
    page.click("[type=submit]")
    page.wait_for_url(lambda url: "/hub/login" not in url, timeout=30_000)


def open_launch_link(page, link: str, user: str, notebook: str, timeout_s: float) -> dict:
    """Follow a page's launch link as the logged-in user; wait for JupyterLab to show ``notebook`` (a file
    name) as its current tab. Returns the URL JupyterLab ended at and its current tab when it stopped waiting."""
    started = time.monotonic()
    page.goto(link, wait_until="domcontentloaded")
    # A user with no server running gets the hub's form (the site's profiles: a GPU type, or the CPU only) and starts
    # one with its first choice, as an attendee who accepts the default would.
    profile = None
    form = page.locator("#spawn_form")
    if "/hub/spawn" in page.url and form.count():
        chosen = form.locator("input[name=profile]:checked")
        profile = chosen.get_attribute("value") if chosen.count() else None
        form.locator("[type=submit]").click()
    # Then the hub's progress page, then nbgitpuller's; both move on by themselves.
    page.wait_for_url(lambda url: f"/user/{user}/lab/tree/" in url, timeout=timeout_s * 1000)
    tab = page.locator("#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel")
    tab.wait_for(timeout=timeout_s * 1000)
    # JupyterLab may show a tab it restored first and open the linked notebook a moment later.
    deadline = time.monotonic() + timeout_s
    while (current := tab.inner_text().strip()) != notebook and time.monotonic() < deadline:
        time.sleep(0.25)
    if current == notebook:
        page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").first.wait_for(timeout=timeout_s * 1000)
    return {"url": page.url, "tab": current, "seconds": round(time.monotonic() - started, 1),
            **({"profile": profile} if profile else {})}


def saved_counts(path: Path) -> list:
    """The execution counts of the code cells of the notebook file at ``path``, as saved."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return []
    return [cell.get("execution_count") for cell in cells if cell.get("cell_type") == "code"]


def run_all_cells(page, saved_file: Path, timeout_s: float) -> float:
    """Run every cell of the open notebook from JupyterLab's Run menu, wait for the kernel to finish, save
    from the File menu, and wait until the file on disk holds the run."""
    started = time.monotonic()
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    # Asked before its kernel is connected, JupyterLab may run nothing: wait for the status bar's "Idle".
    page.locator(".jp-StatusBar-Item", has_text="| Idle").first.wait_for(timeout=timeout_s * 1000)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel").get_by_text("Run All Cells", exact=True).click()
    code_cells = panel.locator(".jp-CodeCell")
    deadline = time.monotonic() + timeout_s
    while True:
        # Text content, not inner text: JupyterLab leaves cells out of view unrendered, and their inner text empty.
        prompts = [p.strip() for p in code_cells.locator(".jp-InputArea-prompt").all_text_contents()]
        if prompts and all(p.startswith("[") and p[1:-2].isdigit() for p in prompts):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"cells still running or not run after {timeout_s} s: {prompts}")
        time.sleep(1)
    save_from_menu(page)
    deadline = time.monotonic() + 30
    while not all(counts := saved_counts(saved_file)) or not counts:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{saved_file.name} on disk does not hold the run 30 s after saving: counts "
                               f"{counts}; JupyterLab showed {prompts}")
        time.sleep(0.5)
    return round(time.monotonic() - started, 1)


def screenshot_a_markdown_cell(page, path: Path, **which) -> bool:
    """A picture of the open notebook's first Markdown cell that ``which`` (a Playwright locator filter: ``has``,
    ``has_text``) picks, if it has one."""
    cell = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownCell", **which).first
    if not cell.count():
        return False
    cell.scroll_into_view_if_needed()
    path.parent.mkdir(parents=True, exist_ok=True)
    cell.screenshot(path=str(path))
    return True


# fetch() from the page, as the logged-in user, with the XSRF token that Jupyter's and the hub's APIs ask of a request
# authenticated by a cookie. Returns the status and the start of the body.
FETCH = """async ([url, method]) => {
    const xsrf = (document.cookie.match(/(?:^|; )_xsrf=([^;]*)/) || [])[1];
    const reply = await fetch(url, {method, credentials: "same-origin", redirect: "manual",
                                    headers: xsrf ? {"X-XSRFToken": decodeURIComponent(xsrf)} : {}});
    return {status: reply.status, body: (await reply.text()).slice(0, 4000)};
}"""


def fetch(page, url: str, method: str = "GET") -> dict:
    return page.evaluate(FETCH, [url, method])


def fetch_kernels(page, url: str, tries: int = 6) -> dict:
    """GET a server's kernel list. jupyter_server answers 500 to a list made while a kernel is starting (the new
    kernel's last_activity is not set yet: a TraitError in kernel_model; jupyter-server/enterprise_gateway#1395,
    jupyter/notebook#5345, seen here in a fresh-clone make test): asked again half a second later, it answers."""
    for _ in range(tries - 1):
        found = fetch(page, url)
        if found.get("status") != 500:
            return found
        page.wait_for_timeout(500)
    return fetch(page, url)


NEWS_PLUGIN = "@jupyterlab/apputils-extension:announcements"


def news_prompt(page) -> dict:
    """Whether JupyterLab's news plugin is switched off in the page's configuration (jupyter-config/labconfig, which
    the shipped hub names in JUPYTER_CONFIG_PATH), and whether its question is on screen."""
    config = page.evaluate("() => document.getElementById('jupyter-config-data').textContent")
    disabled = json.loads(config).get("disabledExtensions", [])  # a list of names, or a name: true|false map
    off = disabled.get(NEWS_PLUGIN) is True if isinstance(disabled, dict) else NEWS_PLUGIN in disabled
    return {"plugin_disabled": off,
            "question_shown": page.get_by_text("official Jupyter news").count()}


def open_fresh(page, home: Path) -> None:
    """Shut the open notebook's kernels down (on a 2-core machine twenty idle kernels slow everything else), leave
    it, and forget JupyterLab's saved layout, so that the next notebook opens alone."""
    server = urlparse(page.url).path.split("/lab", 1)[0]
    if server.startswith("/user/"):
        kernels = fetch_kernels(page, f"{server}/api/kernels")
        for kernel in json.loads(kernels["body"]) if kernels["status"] == 200 else []:
            fetch(page, f"{server}/api/kernels/{kernel['id']}", "DELETE")
    page.goto("about:blank")
    for workspace in home.glob(".jupyter/lab/workspaces/*"):
        workspace.unlink()


def measure_controls(page, plan: dict, user: str, home: Path) -> dict:
    """The measurement on the two control notebooks (tests/support/hub_lesson_checks.py), opened like the lessons."""
    lesson = json.loads((home / REPOSITORY_FOLDER / "notebooks" / "00-environment-check.ipynb")
                        .read_text(encoding="utf-8"))
    found = {}
    for name, control in (("converted", converted_control(lesson)), ("unconverted", unconverted_control(lesson))):
        path = home / "controls" / f"{name}.ipynb"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(control), encoding="utf-8")
        open_fresh(page, home)
        opened = open_launch_link(page, f"{plan['hub_url']}/user/{user}/lab/tree/controls/{name}.ipynb", user,
                                  path.name, PAGE_TIMEOUT_S)
        found[name] = {**opened, "view": measure_lesson(page, control)} if opened["tab"] == path.name else opened
    return found


PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
# The attendee's edit, and the notebook the repository then changes (one the attendee opened but did not change).
EDITED, UPDATED = "notebooks/00-environment-check", "notebooks/01-cpu-vs-gpu"
NOTE = "# my own note, typed in JupyterLab"
UPSTREAM = "This sentence reached the repository after the attendee's first pull."


def save_from_menu(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="File").first.click()
    page.locator(".lm-Menu-itemLabel").get_by_text("Save Notebook", exact=True).click()


def push_upstream_change(branch: str) -> str:
    """A new commit on the served branch that adds a sentence to UPDATED's first Markdown cell; returns it."""
    work = STATE / "upstream-work"
    shutil.rmtree(work, ignore_errors=True)
    git(STATE, "clone", "--quiet", "--branch", branch, str(GIT_ROOT / REPOSITORY_PATH), str(work))
    path = work / f"{UPDATED}.ipynb"
    notebook = json.loads(path.read_text(encoding="utf-8"))
    cell = next(cell for cell in notebook["cells"] if cell["cell_type"] == "markdown")
    cell["source"] = "".join(cell["source"]) + f"\n\n{UPSTREAM}"
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return push_from(work, branch, "A change upstream (made by the hub test)")


def edit_save_and_relaunch(page, plan: dict, user: str, home: Path) -> dict:
    """The attendee types a line into a code cell and saves; the repository gets a new commit; the attendee clicks
    the same launch link again. nbgitpuller's merge must keep the edit and bring the other notebook's change."""
    folder = home / REPOSITORY_FOLDER
    open_fresh(page, home)
    open_launch_link(page, plan["links"][EDITED], user, Path(EDITED).name + ".ipynb", PAGE_TIMEOUT_S)
    # The first code cell whose source shows (the setup cell's is collapsed), at the end of its last line.
    page.locator(f"{PANEL} .jp-CodeCell .jp-InputArea:visible .cm-content").first.click()
    page.keyboard.press("Control+End")
    page.keyboard.press("Enter")
    page.keyboard.type(NOTE)
    save_from_menu(page)
    deadline, edited = time.monotonic() + 30, folder / f"{EDITED}.ipynb"
    while NOTE not in (edited.read_text(encoding="utf-8") if edited.is_file() else "") and time.monotonic() < deadline:
        time.sleep(0.5)
    found: dict = {"saved": NOTE in edited.read_text(encoding="utf-8")}
    found["upstream_commit"] = push_upstream_change(plan["branch"])
    open_fresh(page, home)
    found["relaunch"] = open_launch_link(page, plan["links"][EDITED], user, Path(EDITED).name + ".ipynb",
                                         PAGE_TIMEOUT_S)
    try:  # the cell editors fill in a moment after the first cell shows
        page.locator(f"{PANEL} .cm-content", has_text=NOTE).first.wait_for(timeout=30_000)
        found["note_in_view"] = True
    except Exception:  # noqa: BLE001 - Playwright's timeout: not in view
        found["note_in_view"] = False
    found["note_on_disk"] = NOTE in edited.read_text(encoding="utf-8")
    found["other_updated"] = UPSTREAM in (folder / f"{UPDATED}.ipynb").read_text(encoding="utf-8")
    return found


def second_attendee(browser, plan: dict, first_page, outside: list[str]) -> dict:
    """A second attendee, at the same time, in a browser of her own: she starts her server from the same launch
    link, sees her own files, and is refused the first attendee's server, files, kernels and hub records."""
    first, other = USERS
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    watch_requests(page, outside)
    found: dict = {}
    try:
        log_in(page, plan["hub_url"], other)
        found["opened"] = open_launch_link(page, plan["links"][EDITED], other, Path(EDITED).name + ".ipynb",
                                           FIRST_TIMEOUT_S)
        notebook = f"api/contents/{REPOSITORY_FOLDER}/{EDITED}.ipynb"
        # Her own server's API, then the first attendee's, with her browser's cookies.
        for whose, user in (("own", other), ("their", first)):
            found[f"{whose}_listing"] = fetch(page, f"/user/{user}/api/contents/")
            found[f"{whose}_notebook"] = fetch(page, f"/user/{user}/{notebook}")
            found[f"{whose}_kernels"] = fetch_kernels(page, f"/user/{user}/api/kernels")
        open_fresh(page, HOME / other)  # her kernel shut down, as at the end of browse()
        response = page.goto(f"{plan['hub_url']}/user/{first}/lab", wait_until="domcontentloaded")
        found["their_lab"] = {"status": response.status if response else None, "url": page.url,
                              "text": page.inner_text("body")[:2000]}
        # The hub's API, from a hub page (its XSRF cookie): who she is; the first attendee's record, server, tokens.
        page.goto(f"{plan['hub_url']}/hub/home", wait_until="domcontentloaded")
        found["hub_self"] = fetch(page, "/hub/api/user")
        found["hub_their_record"] = fetch(page, f"/hub/api/users/{first}")
        found["hub_their_token"] = fetch(page, f"/hub/api/users/{first}/tokens", "POST")
        found["hub_stop_theirs"] = fetch(page, f"/hub/api/users/{first}/server", "DELETE")
        # The first attendee's server is still there, and still answers the first attendee.
        found["theirs_still_answers"] = fetch(first_page, f"/user/{first}/api/status")
    finally:
        context.close()
    return found


def watch_requests(page, outside: list[str]) -> None:
    """Note every request the page makes to an address other than this machine's."""
    page.on("request", lambda r: urlparse(r.url).hostname not in (None, "127.0.0.1", "localhost")
            and not r.url.startswith(("data:", "blob:")) and outside.append(r.url))


def browse(plan: dict, report: dict) -> None:
    from playwright.sync_api import sync_playwright

    user = USERS[0]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=plan["chromium"],
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-quic"],
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            outside: list[str] = []
            watch_requests(page, outside)
            log_in(page, plan["hub_url"], user)
            home = HOME / user
            for doc, link in plan["links"].items():
                entry: dict = {}
                report["pages"][doc] = entry
                try:
                    # JupyterLab reopens what the user had open; each page starts from an empty layout. The
                    # previous page is left first, so that it cannot save its layout again afterwards.
                    open_fresh(page, home)
                    # The first link also starts the user's server.
                    timeout = FIRST_TIMEOUT_S if len(report["pages"]) == 1 else PAGE_TIMEOUT_S
                    entry.update(open_launch_link(page, link, user, Path(doc).name + ".ipynb", timeout))
                    if entry["tab"] != Path(doc).name + ".ipynb":
                        continue
                    # What the attendee sees, before anything runs: the notebook as pulled.
                    pulled = home / REPOSITORY_FOLDER / f"{doc}.ipynb"
                    entry["view"] = measure_lesson(page, json.loads(pulled.read_text(encoding="utf-8")))
                    if "news_prompt" not in report:
                        report["news_prompt"] = news_prompt(page)
                    # An exercise (with its closed hint), and a value's placeholder: what a learner reads before
                    # running the cell that computes it.
                    shots = (("exercise_screenshot", EXERCISE_SCREENSHOT, {"has": page.locator(".myst-exercise")}),
                             ("placeholder_screenshot", PLACEHOLDER_SCREENSHOT, {"has_text": PLACEHOLDER}))
                    for key, shot, which in shots:
                        if key not in report and screenshot_a_markdown_cell(page, shot, **which):
                            report[key] = str(shot)
                    if doc in EXECUTED:
                        entry["run_seconds"] = run_all_cells(page, pulled, RUN_TIMEOUT_S)
                        # What the prose shows after the attendee's own run (the file as saved): the kernel's values.
                        ran = json.loads(pulled.read_text(encoding="utf-8"))
                        entry["view_after_run"] = measure_lesson(page, ran, 60, after_run=True)
                except Exception as error:  # noqa: BLE001 - recorded per page, the test names it
                    entry["error"] = f"{type(error).__name__}: {error}"
                    shot = SESSION / f"{Path(doc).name}.png"
                    page.screenshot(path=str(shot))
                    entry["screenshot"] = str(shot)
                    if len(report["pages"]) == 1:
                        report["errors"].append(f"the first launch link failed, so no other was tried: {error}")
                        break
            flows = {"controls": lambda: measure_controls(page, plan, user, home),
                     "relaunch": lambda: edit_save_and_relaunch(page, plan, user, home),
                     "second_attendee": lambda: second_attendee(browser, plan, page, outside)}
            for name, flow in flows.items() if not report["errors"] else ():
                try:
                    report[name] = flow()
                except Exception as error:  # noqa: BLE001 - the test names it
                    report[name] = {"error": f"{type(error).__name__}: {error}"}
            report["requests_leaving_loopback"] = outside
            # No kernel is left running when the hub stops the server. Slurm's TERM reaches a kernel as well as
            # the server, and the server's restarter started one again during its shutdown (seen in a run),
            # which kept the job COMPLETING after the hub had given up waiting for it.
            open_fresh(page, home)
        finally:
            browser.close()


# ---------------------------------------------------------------------------------------------- the session
def session(plan: dict) -> dict:
    report: dict = {"pages": {}, "spawner": plan["spawner"], "errors": []}
    ports = plan["ports"]
    daemon = hub = None
    logs = []
    try:
        git_log = open(STATE / "git-daemon.log", "w")
        logs.append(git_log)
        daemon = subprocess.Popen(["git", "daemon", "--listen=127.0.0.1", f"--port={ports['git']}", "--reuseaddr",
                                   "--export-all", f"--base-path={GIT_ROOT}", GIT_ROOT],
                                  stdout=git_log, stderr=subprocess.STDOUT)
        wait_for_port(ports["git"], daemon, 30, "git daemon")
        hub_log = open(STATE / "jupyterhub.log", "w")
        logs.append(hub_log)
        hub = subprocess.Popen([Path(sys.executable).with_name("jupyterhub"), "-f", SHIPPED_CONFIG], cwd=STATE,
                               stdout=hub_log, stderr=subprocess.STDOUT, env=plan["hub_env"])
        wait_for_port(ports["hub"], hub, 90, "JupyterHub's proxy")
        wait_for_port(ports["hub_api"], hub, 90, "JupyterHub")
        browse(plan, report)
    except Exception:  # noqa: BLE001 - the report carries it to the test
        report["errors"].append(traceback.format_exc())
    finally:
        stop(hub, grace=60)
        stop(daemon)
        for log in logs:
            log.close()
        # The hub stops each user's server as it stops; a server that is a Slurm job goes when Slurm has cancelled
        # it and its processes (the server, its kernels) have exited, which takes a moment on a busy machine.
        deadline = time.monotonic() + 60
        while (left := processes_using(str(STATE))) and time.monotonic() < deadline:
            time.sleep(1)
        report["left_running"] = left
    return report


if __name__ == "__main__":
    plan = json.loads(Path(sys.argv[1]).read_text())
    report = session(plan)
    REPORT.write_text(json.dumps(report, indent=1))
