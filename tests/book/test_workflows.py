"""The CI workflows, read as data: what runs where, with which rights, and which build gets published.

.github/workflows/*.yml are parsed with PyYAML and checked for what a workflow linter looks at (zizmor runs in
``make lint`` too) and for what only this book knows:
- every action is pinned to a full commit, with its release in a comment (a tag can be moved to other code);
- every checkout leaves no token behind (``persist-credentials: false``);
- no workflow grants rights at its top, and every job names the least it needs: ``contents: read``, and Pages'
  two rights for the deploy job alone;
- no workflow with a job on the self-hosted GPU runner runs on pull requests, so no fork's code reaches it;
- one setting, the repository variable GPU_RUNNER, chooses which build the site is published from: the
  self-hosted GPU runner's (which must require a GPU) or the hosted CPU runner's, exactly one of them each time;
- the drift workflow reports broken cells, and still summarises and fails when the notebooks break;
- the GPU workflow runs `make gpu-check` (the GPU tests come from its one list, booktools.gpu_check.GPU_TESTS,
  not a
  second list here) and uploads its report's folder even when the check fails.

The ``if:`` expressions are evaluated by a tiny evaluator of the few forms of GitHub's expression syntax the
workflows use (contexts, string literals, ``==``, ``!=``, ``!``, ``&&``, ``||``, parentheses and the status
functions); anything else is reported as not understood, so a workflow cannot slip past it by being clever.
Each check is also run on a planted mistake and must catch it.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import yaml

from tests.support.booktoc import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
# The rights each job needs beyond none; every job not named here needs to read the repository and nothing more.
LEAST_PERMISSIONS = {("deploy.yml", "deploy"): {"pages": "write", "id-token": "write"}}
TOP_LEVEL_PERMISSIONS = ({}, {"contents": "read"})
# The events that never run code from a fork: what a workflow with a job on our own (self-hosted) runner may use.
TRUSTED_EVENTS = {"push", "workflow_dispatch", "schedule"}
PINNED = re.compile(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}")
VERSION_COMMENT = re.compile(r"#\s*v\d+(?:\.\d+){1,2}")
USES_LINE = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>\S+)(?P<rest>.*)$")


@dataclass
class Workflow:
    text: str
    data: dict


def load() -> dict[str, Workflow]:
    return {path.name: Workflow(path.read_text(encoding="utf-8"), yaml.safe_load(path.read_text(encoding="utf-8")))
            for path in sorted(WORKFLOWS.glob("*.yml"))}


def triggers(workflow: Workflow) -> dict:
    """The workflow's events. PyYAML follows YAML 1.1, where a bare ``on`` is the boolean true."""
    events = workflow.data.get("on", workflow.data.get(True))
    if isinstance(events, str):
        return {events: None}
    if isinstance(events, list):
        return dict.fromkeys(events)
    return events or {}


def steps(workflow: Workflow):
    """(job name, job, step) for every step of every job."""
    for name, job in workflow.data["jobs"].items():
        for step in job.get("steps", []):
            yield name, job, step


def uses(step: dict, action: str) -> bool:
    return step.get("uses", "").startswith(f"{action}@")


def runs_on(job: dict) -> list[str]:
    labels = job.get("runs-on", [])
    return [labels] if isinstance(labels, str) else list(labels)


# A tiny evaluator of GitHub's expression syntax: only the forms these workflows use, anything else refused.
TOKEN = re.compile(r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||!|\(|\))|(?P<call>[A-Za-z_][\w-]*)\(\)"
                   r"|(?P<name>[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*))")
STATUS_FUNCTIONS = ("success", "failure", "cancelled", "always")
ALL_WELL = {"success": True, "failure": False, "cancelled": False, "always": True}  # no step failed


class NotUnderstood(ValueError):
    pass


def tokens(expression: str) -> list[tuple[str, str]]:
    found, position = [], 0
    while position < len(expression.rstrip()):
        match = TOKEN.match(expression, position)
        if not match or match.end() == position:
            raise NotUnderstood(f"not understood at {expression[position:]!r} in {expression!r}")
        kind = match.lastgroup
        found.append((kind, match[kind]))
        position = match.end()
    return found


def equal(left, right) -> bool:
    """GitHub compares strings ignoring case. null against a string: GitHub turns both into numbers, which makes
    them unequal for every non-numeric string; these workflows compare with no numeric one."""
    if isinstance(left, str) and isinstance(right, str):
        return left.casefold() == right.casefold()
    return left == right


def evaluate(expression: str, contexts: dict[str, dict], status: dict[str, bool]):
    """The value of ``expression`` (with or without ``${{ }}``). ``contexts`` maps a context name (vars, steps)
    to its values; ``status`` gives success(), failure(), cancelled() and always()."""
    expression = expression.strip()
    if expression.startswith("${{") and expression.endswith("}}"):
        expression = expression[3:-2]
    stream = tokens(expression)
    position = 0

    def peek():
        return stream[position] if position < len(stream) else (None, None)

    def take():
        nonlocal position
        position += 1
        return stream[position - 1]

    def primary():
        kind, text = take() if position < len(stream) else (None, None)
        if kind == "string":
            return text[1:-1].replace("''", "'")
        if kind == "call":
            if text not in STATUS_FUNCTIONS:
                raise NotUnderstood(f"function {text}() in {expression!r}")
            return status[text]
        if kind == "name":
            literals = {"true": True, "false": False, "null": None}
            if text in literals:
                return literals[text]
            head, *path = text.split(".")
            if head not in contexts:
                raise NotUnderstood(f"context {head!r} in {expression!r}")
            value = contexts[head]
            for part in path:  # a missing property is null, as in GitHub
                value = value.get(part) if isinstance(value, dict) else None
            return value
        if (kind, text) == ("op", "("):
            value = disjunction()
            if take() != ("op", ")"):
                raise NotUnderstood(f"unbalanced parentheses in {expression!r}")
            return value
        raise NotUnderstood(f"unexpected {text!r} in {expression!r}")

    def unary():
        if peek() == ("op", "!"):
            take()
            return not unary()
        return comparison()

    def comparison():
        left = primary()
        if peek() in (("op", "=="), ("op", "!=")):
            _, operator = take()
            right = primary()
            return equal(left, right) == (operator == "==")
        return left

    def chain(operator, operand):  # && or ||, left to right; each operand is read (parsed) either way
        value = operand()
        while peek() == ("op", operator):
            take()
            right = operand()
            value = (value and right) if operator == "&&" else (value or right)
        return value

    def disjunction():
        return chain("||", lambda: chain("&&", unary))

    value = disjunction()
    if position != len(stream):
        raise NotUnderstood(f"trailing {stream[position][1]!r} in {expression!r}")
    return value


def condition(entry: dict) -> str:
    """A job's or step's ``if:``. Without a status function, GitHub adds ``success() &&`` in front of it."""
    expression = str(entry.get("if", "success()")).strip()
    if expression.startswith("${{") and expression.endswith("}}"):
        expression = expression[3:-2].strip()
    if not any(re.search(rf"\b{name}\(\)", expression) for name in STATUS_FUNCTIONS):
        expression = f"success() && ({expression})"
    return expression


def needs(job: dict) -> list[str]:
    value = job.get("needs", [])
    return [value] if isinstance(value, str) else list(value)


def run_jobs(workflow: Workflow, variables: dict[str, str], failing: frozenset[str] = frozenset()) -> dict[str, str]:
    """{job: 'success' | 'failure' | 'skipped'} of one run with these repository variables, the jobs in
    ``failing`` failing when they run."""
    jobs, results = workflow.data["jobs"], {}
    while len(results) < len(jobs):
        ready = [name for name, job in jobs.items() if name not in results and set(needs(job)) <= results.keys()]
        assert ready, f"the jobs' needs form a cycle: {set(jobs) - results.keys()}"
        for name in ready:
            before = [results[need] for need in needs(jobs[name])]
            status = {"success": all(result == "success" for result in before),
                      "failure": any(result == "failure" for result in before),
                      "cancelled": False, "always": True}
            ran = evaluate(condition(jobs[name]), {"vars": variables}, status)
            results[name] = ("failure" if name in failing else "success") if ran else "skipped"
    return results


def run_steps(job: dict, outcomes: dict[str, str]) -> list[tuple[dict, str]]:
    """[(step, outcome)] of one run of a job whose steps with these ids end so (the others succeed)."""
    seen, job_failed, done = {}, False, []
    for step in job["steps"]:
        status = {"success": not job_failed, "failure": job_failed, "cancelled": False, "always": True}
        ran = evaluate(condition(step), {"steps": seen, "vars": {}}, status)
        outcome = outcomes.get(step.get("id"), "success") if ran else "skipped"
        if "id" in step:
            seen[step["id"]] = {"outcome": outcome}
        job_failed |= outcome == "failure" and not step.get("continue-on-error", False)
        done.append((step, outcome))
    return done


# The checks. Each returns the problems it finds: none in the real workflows, some in every planted mistake.
def unpinned_actions(workflows: dict[str, Workflow]) -> list[str]:
    problems, pins = [], {}
    for file, workflow in workflows.items():
        in_text = []
        for number, line in enumerate(workflow.text.splitlines(), 1):
            match = USES_LINE.match(line)
            if not match:
                continue
            ref, rest = match["ref"], match["rest"].strip()
            in_text.append(ref)
            if not PINNED.fullmatch(ref):
                problems.append(f"{file}:{number}: {ref} is not pinned to a full commit")
            elif not VERSION_COMMENT.fullmatch(rest):
                problems.append(f"{file}:{number}: {ref} has no release in a comment ('# v1.2.3'): {rest!r}")
            else:
                pins.setdefault(ref.split("@")[0], set()).add((ref.split("@")[1], rest.lstrip("# ")))
        in_data = [step["uses"] for _, _, step in steps(workflow) if "uses" in step]
        if sorted(in_data) != sorted(in_text):  # a `uses:` the line scan missed (flow style, say), or a stray line
            problems.append(f"{file}: the steps use {sorted(in_data)} but its lines say {sorted(in_text)}")
    for action, versions in pins.items():
        if len(versions) > 1:
            problems.append(f"{action} is pinned differently across the workflows: {sorted(versions)}")
    return problems


def kept_credentials(workflows: dict[str, Workflow]) -> list[str]:
    return [f"{file}: job {name}'s checkout keeps the token in .git/config (persist-credentials: false is missing)"
            for file, workflow in workflows.items() for name, _, step in steps(workflow)
            if uses(step, "actions/checkout") and (step.get("with") or {}).get("persist-credentials") not in (False,
                                                                                                             "false")]


def broad_permissions(workflows: dict[str, Workflow]) -> list[str]:
    problems = []
    for file, workflow in workflows.items():
        top = workflow.data.get("permissions", "default (broad)")
        if top not in TOP_LEVEL_PERMISSIONS:
            problems.append(f"{file}: the workflow grants {top} to every job; grant rights per job")
        for name, job in workflow.data["jobs"].items():
            least = LEAST_PERMISSIONS.get((file, name), {"contents": "read"})
            if job.get("permissions") != least:
                problems.append(f"{file}: job {name} has permissions {job.get('permissions', 'default (broad)')}; "
                                f"it needs {least}")
    return problems


def forks_on_our_runner(workflows: dict[str, Workflow]) -> list[str]:
    problems = []
    for file, workflow in workflows.items():
        events = triggers(workflow)
        if "pull_request_target" in events:
            problems.append(f"{file}: pull_request_target runs a fork's code with this repository's token")
        self_hosted = [name for name, job in workflow.data["jobs"].items() if "self-hosted" in runs_on(job)]
        if self_hosted and set(events) - TRUSTED_EVENTS:
            problems.append(f"{file}: jobs {self_hosted} run on the self-hosted runner, and the workflow also runs on "
                            f"{sorted(set(events) - TRUSTED_EVENTS)}, which can bring a fork's code to it")
        if self_hosted and "push" in events and (events["push"] or {}).get("branches") != ["main"]:
            problems.append(f"{file}: the self-hosted runner takes pushes to {events['push']}, not only to main")
    if set(triggers(workflows["gpu.yml"])) != {"push", "workflow_dispatch"}:
        problems.append(f"gpu.yml runs on {sorted(triggers(workflows['gpu.yml']))}: push to main and by hand only")
    return problems


# The values of GPU_RUNNER to try, and which build each must publish. Unset is what a repository without a GPU
# runner has. GitHub compares strings ignoring case, so TRUE is true too.
SETTINGS = {"true": "gpu", "TRUE": "gpu", None: "cpu", "": "cpu", "false": "cpu", "1": "cpu"}


def publishing(workflows: dict[str, Workflow]) -> list[str]:
    workflow, problems = workflows["deploy.yml"], []
    jobs = workflow.data["jobs"]
    builders = sorted({name for name, _, step in steps(workflow) if uses(step, "actions/upload-pages-artifact")})
    deployers = sorted({name for name, _, step in steps(workflow) if uses(step, "actions/deploy-pages")})
    if len(deployers) != 1:
        return [f"deploy.yml: {len(deployers)} jobs deploy to Pages: {deployers}"]
    (deployer,) = deployers
    unawaited = set(builders) - set(needs(jobs[deployer]))
    if unawaited:
        problems.append(f"deploy.yml: {deployer} does not wait for the builds {sorted(unawaited)}")
    for value, kind in SETTINGS.items():
        variables = {} if value is None else {"GPU_RUNNER": value}
        try:
            results = run_jobs(workflow, variables)
        except NotUnderstood as error:
            return problems + [f"deploy.yml: an `if:` the test cannot evaluate: {error}"]
        built = [name for name in builders if results[name] == "success"]
        if len(built) != 1 or results[deployer] != "success":
            problems.append(f"GPU_RUNNER={value!r}: {len(built)} builds ran ({built}) and {deployer} "
                            f"{results[deployer]}; exactly one build must feed the deploy job")
            continue
        (build,) = built
        job, env = jobs[build], jobs[build].get("env", {})
        commands = " ".join(str(step.get("run", "")) for step in job["steps"])
        if kind == "gpu":
            if not {"self-hosted", "gpu"} <= set(runs_on(job)):
                problems.append(f"GPU_RUNNER={value!r}: {build} runs on {runs_on(job)}, not the GPU runner")
            if str(env.get("GPUKIT_REQUIRE_GPU")) != "1":
                problems.append(f"{build} does not set GPUKIT_REQUIRE_GPU=1: a runner without its GPU would publish")
            if not re.search(r"make book GPU=\S", commands):
                problems.append(f"{build} does not build with a CUDA stack (make book GPU=...)")
        else:
            if "self-hosted" in runs_on(job) or not all(label.startswith("ubuntu-") for label in runs_on(job)):
                problems.append(f"GPU_RUNNER={value!r}: {build} runs on {runs_on(job)}, not a hosted runner")
            if "GPU=" in commands or env.get("GPUKIT_REQUIRE_GPU"):
                problems.append(f"GPU_RUNNER={value!r}: the CPU build {build} asks for a GPU")
        if env.get("STAMPED_ON") != {"gpu": "cuda", "cpu": "cpu"}[kind]:
            problems.append(f"{build} checks its pages for a stamp of {env.get('STAMPED_ON')!r}")
        # The build that ran fails: nothing may be published.
        failed = run_jobs(workflow, variables, failing=frozenset({build}))
        if failed[deployer] != "skipped":
            problems.append(f"GPU_RUNNER={value!r}: when {build} fails, {deployer} still runs")
    # The GPU tests follow the same setting, instead of waiting a day for a runner that does not exist.
    for value, kind in SETTINGS.items():
        gpu_results = run_jobs(workflows["gpu.yml"], {} if value is None else {"GPU_RUNNER": value})
        if set(gpu_results.values()) != {"success" if kind == "gpu" else "skipped"}:
            problems.append(f"gpu.yml with GPU_RUNNER={value!r}: {gpu_results}")
    return problems


def drift_reporting(workflows: dict[str, Workflow]) -> list[str]:
    workflow, problems = workflows["drift.yml"], []
    if set(triggers(workflow)) != {"schedule", "workflow_dispatch"}:
        problems.append(f"drift.yml runs on {sorted(triggers(workflow))}: it must run on a schedule and by hand only")
    (job,) = workflow.data["jobs"].values()
    text = " ".join(str(step.get("run", "")) for step in job["steps"])
    for needed in ("scripts/drift.py relax", "-m pytest notebooks --junitxml=", "scripts/drift.py summary",
                   '>> "$GITHUB_STEP_SUMMARY"'):
        if needed not in text:
            problems.append(f"drift.yml never runs {needed!r}")
    for broken in ({"notebooks": "failure"}, {"install": "failure"}, {"book": "failure"}, {}):
        try:
            done = run_steps(job, broken)
        except NotUnderstood as error:
            return problems + [f"drift.yml: a step's `if:` the test cannot evaluate: {error}"]
        ran = {step.get("name") or step.get("uses", ""): outcome for step, outcome in done}
        for name, outcome in ran.items():
            if ("Summary" in name or "upload-artifact" in name or name.startswith("Fail")) and outcome == "skipped":
                problems.append(f"drift.yml: when {broken or 'nothing'} breaks, step {name!r} does not run")
        (last, _), outcomes = done[-1], {step.get("id"): outcome for step, outcome in done if "id" in step}
        script_env = {key: str(evaluate(value, {"steps": {k: {"outcome": v} for k, v in outcomes.items()}}, ALL_WELL))
                      for key, value in last.get("env", {}).items()}
        verdict = subprocess.run(["bash", "-e", "-c", last["run"]], env={"PATH": "/usr/bin:/bin", **script_env},
                                 capture_output=True, text=True)
        if (verdict.returncode == 0) != (not broken):
            problems.append(f"drift.yml: with {broken or 'nothing'} broken, the last step exits {verdict.returncode}")
    return problems


def gpu_check_run(workflows: dict[str, Workflow]) -> list[str]:
    workflow, problems = workflows["gpu.yml"], []
    (job,) = workflow.data["jobs"].values()
    checks = [step for step in job["steps"] if re.search(r"\bmake gpu-check\b", str(step.get("run", "")))]
    if len(checks) != 1:
        return [f"gpu.yml runs make gpu-check {len(checks)} times, not once"]
    (check,) = checks
    out = re.search(r"--out (\S+?)[\"']?(?:\s|$)", check["run"])
    if not out or "id" not in check:
        return ["gpu.yml's make gpu-check step needs an id and --out FOLDER, the folder it uploads"]
    folder = out[1].rstrip("/")
    uploads = [step for step in job["steps"] if uses(step, "actions/upload-artifact")]
    if not any(str((step.get("with") or {}).get("path", "")).rstrip("/") == folder for step in uploads):
        problems.append(f"gpu.yml does not upload {folder}, the folder make gpu-check writes")
    try:
        done = run_steps(job, {check["id"]: "failure"})
    except NotUnderstood as error:
        return problems + [f"gpu.yml: a step's `if:` the test cannot evaluate: {error}"]
    for step, outcome in done:
        if step in uploads and outcome == "skipped":
            problems.append("gpu.yml: when make gpu-check fails, its report is not uploaded")
    if any("pytest" in str(step.get("run", "")) for step in job["steps"]):
        problems.append("gpu.yml runs pytest itself: the GPU tests are booktools.gpu_check.GPU_TESTS, run by "
                        "gpu-check")
    if str((job.get("env") or {}).get("GPUKIT_REQUIRE_GPU")) != "1":
        problems.append("gpu.yml does not set GPUKIT_REQUIRE_GPU=1")
    return problems


CHECKS: dict[str, Callable[[dict[str, Workflow]], list[str]]] = {
    "pinned": unpinned_actions, "credentials": kept_credentials, "permissions": broad_permissions,
    "forks": forks_on_our_runner, "publishing": publishing, "drift": drift_reporting, "gpu-check": gpu_check_run,
}


@pytest.fixture(scope="module")
def workflows() -> dict[str, Workflow]:
    return load()


def test_the_workflows_are_the_four_this_file_knows(workflows):
    assert set(workflows) == {"book.yml", "deploy.yml", "gpu.yml", "drift.yml"}


@pytest.mark.parametrize("check", CHECKS)
def test_each_check_passes_on_the_workflows(workflows, check):
    assert CHECKS[check](workflows) == []


def test_the_evaluator_reads_the_forms_the_workflows_use():
    status = ALL_WELL
    assert evaluate("vars.GPU_RUNNER == 'true'", {"vars": {"GPU_RUNNER": "True"}}, status) is True
    assert evaluate("vars.GPU_RUNNER != 'true'", {"vars": {}}, status) is True
    assert evaluate("${{ !cancelled() && !failure() }}", {}, status) is True
    failed_install = {"steps": {"install": {"outcome": "failure"}}}
    assert evaluate("steps.install.outcome == 'success'", failed_install, status) is False
    assert evaluate("(vars.A == 'x' || vars.B == 'it''s') && !false", {"vars": {"B": "IT'S"}}, status) is True
    for unknown in ("contains(vars.GPU_RUNNER, 'true')", "secrets.TOKEN == 'x'", "vars.A == 1", "vars.A =="):
        with pytest.raises(NotUnderstood):
            evaluate(unknown, {"vars": {}}, status)


def test_every_job_and_step_if_is_one_the_evaluator_understands(workflows):
    for workflow in workflows.values():
        for job in workflow.data["jobs"].values():
            for entry in [job, *job.get("steps", [])]:
                if "if" in entry:
                    evaluate(condition(entry), {"vars": {}, "steps": {}}, ALL_WELL)


# The page check the two builds run before publishing, run here on planted pages in the markup Sphinx writes.
def stamp_page(device: str) -> str:
    words = "".join(f' <span class="pre">{word}</span>' for word in device.split())
    return (f"<html><body><h1>A lesson</h1><p><strong>This page needs:</strong> one GPU.<br />"
            f"<strong>Last executed:</strong> 2026-11-25 on <code class=\"docutils literal notranslate\">"
            f"{words.strip()}</code>, with PyTorch 2.13.0.</p></body></html>")


def stamp_checks(workflows) -> dict[str, str]:
    return {name: step["run"] for name, _, step in steps(workflows["deploy.yml"])
            if step.get("name", "").startswith("Every lesson page is stamped")}


@pytest.mark.parametrize(("expected", "pages", "passes"), [
    ("cuda", {"01-a.html": "cuda:0 (NVIDIA H100 80GB HBM3, 79.2 GiB)", "02-b.html": "cuda:1 (Tesla V100-SXM2, 16 GiB)"},
     True),
    ("cuda", {"01-a.html": "cuda:0 (NVIDIA H100 80GB HBM3, 79.2 GiB)", "02-b.html": "cpu (AMD EPYC 7763, 4 cores)"},
     False),  # one page ran on the CPU: a GPU book must not be published with it
    ("cpu", {"01-a.html": "cpu (AMD EPYC 7763 64-Core Processor, 4 logical cores)"}, True),
    ("cpu", {"01-a.html": "mps (Apple GPU on arm64, 14.5)"}, False),
    ("cuda", {}, False),  # no lesson pages at all
])
def test_the_builds_check_every_page_stamp_before_publishing(workflows, tmp_path, expected, pages, passes):
    checks = stamp_checks(workflows)
    assert set(checks) == {"build-cpu", "build-gpu"}
    assert set(checks.values()) == {'python3 scripts/check_stamps.py "$STAMPED_ON"'}, "one check, in both builds"
    folder = tmp_path / "notebooks"
    folder.mkdir(parents=True)
    for name, device in pages.items():
        (folder / name).write_text(stamp_page(device), encoding="utf-8")
    # The runners' python3 is a plain interpreter: the script must need nothing installed.
    done = subprocess.run(["/usr/bin/python3", "-I", str(ROOT / "scripts" / "check_stamps.py"), expected,
                           str(tmp_path)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert (done.returncode == 0) == passes, done.stdout + done.stderr
    if pages:
        assert "01-a.html: " in done.stdout  # each page is named with the device its stamp shows


RUN = "2026-11-30-h100-80gb-hbm3-cuda13"
H100 = "cuda:0 (NVIDIA H100 80GB HBM3, 79.2 GiB)"


def run_page(device: str, run: str = RUN, title: str = "Run on a GPU") -> str:
    """A page built from a kept GPU run: its stamp, and the note under it naming the run (_ext/gpu_runs.py)."""
    note = (f'<div class="note gpu-run admonition">\n<p class="admonition-title">{title}</p>\n<p>This page shows '
            f'the lesson as it ran on ... which the book keeps in <code class="docutils literal notranslate"><span '
            f'class="pre">data/gpu-runs/{run}</span></code>.</p>\n</div>')
    return stamp_page(device).replace("</p></body>", f"</p>{note}</body>")


@pytest.mark.parametrize(("pages", "kept", "passes"), [
    ({"01-a.html": run_page(H100), "02-b.html": stamp_page("cpu (AMD EPYC 7763, 4 cores)")}, H100, True),
    ({"01-a.html": run_page(H100)}, "cuda:0 (NVIDIA A100-SXM4-40GB, 39.4 GiB)", False),  # not its run's stamp
    ({"01-a.html": run_page(H100, run="2026-12-01-gone")}, H100, False),  # a run the book does not hold
    ({"01-a.html": run_page(H100, title="GPU run out of date")}, H100, False),  # executed here: must say cpu
    ({"01-a.html": stamp_page(H100)}, H100, False),  # a GPU stamp and no run: not this CPU build's
])
def test_a_cpu_build_publishes_the_pages_of_kept_gpu_runs_each_with_its_runs_stamp(workflows, tmp_path, pages, kept,
                                                                                  passes):
    """The hosted CPU build holds pages built from kept GPU runs (data/gpu-runs): deploy.yml's own check step passes
    each whose stamp is the one its run's manifest records for the lesson, and every other page stamped cpu."""
    site = tmp_path / "_build" / "html" / "notebooks"
    site.mkdir(parents=True)
    for name, html in pages.items():
        (site / name).write_text(html, encoding="utf-8")
    manifest = {"lessons": {"01-a": {"stamp": {"date": "2026-11-25", "device": kept, "torch": "PyTorch 2.13.0"}}}}
    (tmp_path / "data" / "gpu-runs" / RUN).mkdir(parents=True)
    (tmp_path / "data" / "gpu-runs" / RUN / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    (tmp_path / "scripts").mkdir()  # the clone's layout, where the workflow's step runs
    shutil.copy(ROOT / "scripts" / "check_stamps.py", tmp_path / "scripts")
    job = workflows["deploy.yml"].data["jobs"]["build-cpu"]
    check = stamp_checks(workflows)["build-cpu"]
    done = subprocess.run(["/bin/sh", "-c", check], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "STAMPED_ON": job["env"]["STAMPED_ON"]})
    assert (done.returncode == 0) == passes, done.stdout + done.stderr
    assert f"01-a.html: {H100}" in done.stdout


# Planted mistakes: each must be caught by the check named beside it.
def plant_unpinned(workflows):
    workflow = workflows["book.yml"]
    sha = re.search(r"actions/checkout@([0-9a-f]{40})", workflow.text)[1]
    workflow.text = workflow.text.replace(f"actions/checkout@{sha} # v4.4.0", "actions/checkout@v4")
    for _, _, step in steps(workflow):
        if uses(step, "actions/checkout"):
            step["uses"] = "actions/checkout@v4"


def plant_no_version_comment(workflows):
    workflows["gpu.yml"].text = workflows["gpu.yml"].text.replace(" # v4.4.0", "")


def plant_a_uses_the_lines_miss(workflows):
    workflows["drift.yml"].data["jobs"]["newest-releases"]["steps"].append({"uses": "someone/action@main"})


def plant_kept_credentials(workflows):
    for _, _, step in steps(workflows["deploy.yml"]):
        if uses(step, "actions/checkout"):
            del step["with"]["persist-credentials"]
            return


def plant_job_without_permissions(workflows):
    del workflows["book.yml"].data["jobs"]["test"]["permissions"]


def plant_rights_at_the_top(workflows):
    workflows["deploy.yml"].data["permissions"] = {"contents": "read", "pages": "write", "id-token": "write"}


def plant_write_for_a_build(workflows):
    workflows["deploy.yml"].data["jobs"]["build-gpu"]["permissions"] = {"contents": "write"}


def plant_gpu_tests_on_pull_requests(workflows):
    workflows["gpu.yml"].data[True]["pull_request"] = None


def plant_gpu_build_on_pull_requests(workflows):
    workflows["deploy.yml"].data[True]["pull_request"] = None


def plant_deploy_fed_by_both_builds(workflows):
    del workflows["deploy.yml"].data["jobs"]["build-gpu"]["if"]


def plant_deploy_without_if(workflows):
    del workflows["deploy.yml"].data["jobs"]["deploy"]["if"]


def plant_deploy_always(workflows):
    workflows["deploy.yml"].data["jobs"]["deploy"]["if"] = "${{ always() }}"


def plant_gpu_build_without_require_gpu(workflows):
    del workflows["deploy.yml"].data["jobs"]["build-gpu"]["env"]["GPUKIT_REQUIRE_GPU"]


def plant_gpu_build_on_a_hosted_runner(workflows):
    workflows["deploy.yml"].data["jobs"]["build-gpu"]["runs-on"] = "ubuntu-24.04"


def plant_switch_the_test_cannot_read(workflows):
    workflows["deploy.yml"].data["jobs"]["build-gpu"]["if"] = "contains(vars.GPU_RUNNER, 'true')"


def plant_swapped_switch(workflows):
    jobs = workflows["deploy.yml"].data["jobs"]
    jobs["build-gpu"]["if"], jobs["build-cpu"]["if"] = jobs["build-cpu"]["if"], jobs["build-gpu"]["if"]


def plant_drift_on_push(workflows):
    workflows["drift.yml"].data[True]["push"] = {"branches": ["main"]}


def plant_drift_summary_skipped_on_failure(workflows):
    for _, _, step in steps(workflows["drift.yml"]):
        if step.get("name", "").startswith("Summary"):
            step["if"] = "steps.notebooks.outcome == 'success'"


def plant_drift_that_never_fails(workflows):
    last = workflows["drift.yml"].data["jobs"]["newest-releases"]["steps"][-1]
    last["run"] = last["run"].replace("test ", "echo ")


def gpu_steps(workflows) -> list[dict]:
    return workflows["gpu.yml"].data["jobs"]["gpu-check"]["steps"]


def plant_gpu_report_uploaded_only_on_success(workflows):
    for step in gpu_steps(workflows):
        if uses(step, "actions/upload-artifact"):
            del step["if"]


def plant_gpu_report_uploaded_from_elsewhere(workflows):
    for step in gpu_steps(workflows):
        if uses(step, "actions/upload-artifact"):
            step["with"]["path"] = "_build/gpu-check/"


def plant_a_second_list_of_gpu_tests(workflows):
    gpu_steps(workflows).append({"run": ".venv/bin/python -m pytest -n 0 tests/unit/core/test_gpu_only.py"})


def plant_no_gpu_check(workflows):
    for step in gpu_steps(workflows):
        if "make gpu-check" in str(step.get("run", "")):
            step["run"] = ".venv/bin/python -m pytest -n 0 notebooks"


@pytest.mark.parametrize(("plant", "check", "words"), [
    (plant_unpinned, "pinned", "not pinned to a full commit"),
    (plant_no_version_comment, "pinned", "no release in a comment"),
    (plant_a_uses_the_lines_miss, "pinned", "the steps use"),
    (plant_kept_credentials, "credentials", "persist-credentials"),
    (plant_job_without_permissions, "permissions", "job test has permissions default"),
    (plant_rights_at_the_top, "permissions", "the workflow grants"),
    (plant_write_for_a_build, "permissions", "job build-gpu"),
    (plant_gpu_tests_on_pull_requests, "forks", "pull_request"),
    (plant_gpu_build_on_pull_requests, "forks", "can bring a fork's code"),
    (plant_deploy_fed_by_both_builds, "publishing", "2 builds ran"),
    (plant_deploy_without_if, "publishing", "deploy skipped"),
    (plant_deploy_always, "publishing", "still runs"),
    (plant_gpu_build_without_require_gpu, "publishing", "GPUKIT_REQUIRE_GPU"),
    (plant_gpu_build_on_a_hosted_runner, "publishing", "not the GPU runner"),
    (plant_switch_the_test_cannot_read, "publishing", "cannot evaluate"),
    (plant_swapped_switch, "publishing", "not the GPU runner"),
    (plant_drift_on_push, "drift", "schedule and by hand only"),
    (plant_drift_summary_skipped_on_failure, "drift", "does not run"),
    (plant_drift_that_never_fails, "drift", "the last step exits 0"),
    (plant_gpu_report_uploaded_only_on_success, "gpu-check", "its report is not uploaded"),
    (plant_gpu_report_uploaded_from_elsewhere, "gpu-check", "does not upload _build/gpu-check/ci"),
    (plant_a_second_list_of_gpu_tests, "gpu-check", "runs pytest itself"),
    (plant_no_gpu_check, "gpu-check", "runs make gpu-check 0 times"),
], ids=lambda value: value.__name__.removeprefix("plant_") if callable(value) else None)
def test_each_check_catches_its_planted_mistake(workflows, plant, check, words):
    planted = copy.deepcopy(workflows)
    plant(planted)
    problems = CHECKS[check](planted)
    assert any(words in problem for problem in problems), problems
