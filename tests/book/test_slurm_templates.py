"""The job templates in slurm_templates/: their form (header, strict mode, the site file, shellcheck), and
every one of them submitted with sbatch to a real one-node Slurm cluster (tests/support/slurm_cluster.py).

The cluster runs on 127.0.0.1 inside a loopback-only network namespace, as root, from Debian's packages;
without root or the packages these tests skip and say why. Its sixteen fake GPUs are device files: requests
for GPUs are granted (and CUDA_VISIBLE_DEVICES set) but the jobs compute on the CPU, over gloo.

What the run proves, and what it does not:
- every template is accepted by sbatch as written, runs under `set -euo pipefail` with the real site file
  (values given through the environment: partition, the test run's virtualenv, 127.0.0.1 as the address
  other nodes reach) and ends COMPLETED with the output its script promises;
- the partition comes from the site file through SBATCH_PARTITION (the test partition is not the default:
  a template that ignored it would be refused);
- the multi-node and Ray templates run with --nodes=1 given on the command line (one node here): srun,
  the rendezvous and the Ray head are real, a second node is not; the Ray template also waits for the other
  jobs to end (a --dependency the test adds), so that its head starts on a node that is not busy;
- the book and benchmark templates run the site file's command, which the test points at a quick
  stand-in (the benchmark at `python -m booktools bench --quick`): the job
  plumbing is tested, not a full book build or benchmark run;
- every template that requests a GPU runs the GPU preflight (the site file's command, here a stand-in that
  prints a line: there is no GPU for `python -m gpukit doctor --gpu` to pass on) in its environment before
  its work, and a failing preflight ends the job FAILED before the work starts;
- the gpu-check template (make gpu-check as a job) runs booktools' real command, which finds no GPU on this node (the
  fake GPUs are device files; GPUKIT_DEVICE=cpu makes sure of it wherever the tests run): the job must fail fast
  and clearly, with the reason as the first line of its report, as on a node whose GPU is unusable;
- dask-jobqueue's workers are real Slurm jobs of their own, submitted from inside the driver job;
- the Nsight Systems template runs with a stand-in `nsys` (tests/support/stand_ins/nsys, named by GPU_PYTHON_NSYS):
  the test proves the arguments it passes to `nsys profile` and `nsys stats`, that the profiled script runs
  (on the CPU) and that the report's path is handed on, not what Nsight Systems records; and, without Slurm,
  that the template stops with a message naming what is missing when there is no nsys.
"""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.booktoc import ROOT
from tests.support.gpu_node import forcing_env
from tests.support.slurm_cluster import PARTITION, SlurmCluster, why_not_here

TEMPLATES = ROOT / "slurm_templates"
SITE = TEMPLATES / "site.sh"
SCRIPTS = sorted(TEMPLATES.glob("*.sbatch")) + sorted(p for p in TEMPLATES.glob("*.sh") if p != SITE)
# Every template is submitted at once, and the one-node cluster runs them a few at a time: the last may start
# minutes after the first, and Ray's steps drain for 30 s when the job ends. The Ray job, last, may need all of its
# tries (job_env), which took 25 to 100 s each in the fresh-clone runs.
WAIT_S = 1200

# A stand-in for NVIDIA's nsys, which these machines lack: it prints its arguments and runs the profiled program.
NSYS_STAND_IN = ROOT / "tests" / "support" / "stand_ins" / "nsys"
# Template -> (extra sbatch options, what its output must contain). Every template must be listed.
SUBMISSIONS = {
    "one-gpu.sbatch": ([], [r"Slurm granted GPUs: \d", r"gpu-check done on cpu"]),
    "multi-gpu-torchrun.sbatch": ([], [r"ddp done: world size 4, backend gloo",
                                       r"(weights equal rank 0's: True.*){4}"]),
    # Submitted for 2 of its 4 GPUs: its world size is what Slurm granted (SLURM_GPUS_ON_NODE), which this checks,
    # and two ranks cost about half of four (the job took 17 core-seconds at 4; the DDP templates run at 4).
    "fsdp2-torchrun.sbatch": (["--gpus-per-node=2"], [r"fsdp2 done: world size 2, backend gloo",
                                                      r"(parameter bytes held 4,204,544 of 8,409,088.*){2}"]),
    "multi-node-torchrun.sbatch": (["--nodes=1"], [r"rendezvous at 127\.0\.0\.1:\d+ for 1 node\(s\) x 4 GPU",
                                                   r"ddp done: world size 4, backend gloo"]),
    "sweep-array.sbatch": ([], [r"sweep task \d+: learning rate"]),
    "ipyparallel.sbatch": ([], [r"ipyparallel done: 4 engines"]),
    "dask-slurm.sbatch": ([], [r"dask-jobqueue done: 2 workers in Slurm jobs \d+ \d+, sum of squares 328350"]),
    "ray.sbatch": (["--nodes=1"], [r"ray done: 1 node\(s\), 8 CPUs"]),
    "build-book.sbatch": ([], [r"book command ran, GPUKIT_REQUIRE_GPU = 1"]),
    "bench.sbatch": ([], [r"benchmark on GPU type any", r"benchmark command ran"]),
    "bench-each-gpu-type.sh": ([], []),  # submits bench.sbatch per type: checked by its own test
    "gpu-check.sbatch": (["--export=ALL,GPUKIT_DEVICE=cpu"], [r"gpu-check FAILED: no usable GPU here \(",
                                                               r"Report: \S+/report\.md"]),
    "nsys-profile.sbatch": ([f"--export=ALL,GPU_PYTHON_NSYS={NSYS_STAND_IN}"], [
        r"nsys stand-in: profile --trace=cuda,nvtx,osrt .*--capture-range=cudaProfilerApi .*"
        r"--output=\S+/profile-step .*python slurm_templates/jobs/profile_step\.py",
        r"profile-step: 20 steps on cpu with \.item\(\) each",
        r"nsys stand-in: stats --report=cuda_api_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,nvtx_sum "
        r"\S+/profile-step\.nsys-rep",
        r"nsys report: \S+/profile-step\.nsys-rep"]),
}
# The templates that request a GPU, and so run the GPU preflight first. The others run CPU work (the sweep's
# NumPy, Dask's and ipyparallel's workers), where `python -m gpukit doctor --gpu` would fail for want of a GPU.
GPU_TEMPLATES = {"one-gpu.sbatch", "bench.sbatch", "build-book.sbatch", "multi-gpu-torchrun.sbatch",
                 "fsdp2-torchrun.sbatch", "multi-node-torchrun.sbatch", "ray.sbatch", "nsys-profile.sbatch",
                 "gpu-check.sbatch"}
# GPU templates whose work is the preflight and more (gpu-check runs it as its first step and keeps its lines in
# its report), so they do not run the site file's preflight before it. Without a GPU they must fail, and fast.
PREFLIGHT_IN_THE_WORK = {"gpu-check.sbatch"}
FAST_S = 120
# The preflight's stand-in in the jobs: a line that names the node and the Python environment it ran in.
PREFLIGHT_LINE = "preflight stand-in ran on"
PREFLIGHT_STAND_IN = ('python -c "import socket, sys; '
                      f"print('{PREFLIGHT_LINE}', socket.gethostname(), 'in', sys.prefix)\"")
PREFLIGHT_STOP = "The job stops here: the GPU preflight failed"


def sbatch_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.startswith("#SBATCH")]


# ------------------------------------------------------------------------------------------ form
def test_every_template_is_tested():
    assert {p.name for p in SCRIPTS} == set(SUBMISSIONS)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_template_header_strict_mode_and_site_file(path):
    lines = path.read_text().splitlines()
    assert lines[0] == "#!/bin/bash"
    assert lines[1].startswith("# ") and len(lines[1]) > 30, "line 2 must say what the template is for"
    assert "set -euo pipefail" in lines
    assert any("slurm_templates/site.sh" in line and line.lstrip().startswith("source") for line in lines)
    for line in sbatch_lines(path):
        assert not re.search(r"--partition|--account|\s-[pA]\b", line), f"site value in a template: {line}"
    if path.suffix == ".sbatch":  # sbatch stops reading #SBATCH lines at the first command
        first_command = next(i for i, line in enumerate(lines) if line.strip() and not line.startswith("#"))
        assert all(i < first_command for i, line in enumerate(lines) if line.startswith("#SBATCH"))


def requests_gpus(path: Path) -> bool:
    return any(re.search(r"--gpus|--gres=gpu", line) for line in sbatch_lines(path))


def commands(path: Path) -> list[str]:
    """The script's lines without comments and blank lines."""
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def test_gpu_templates_are_the_ones_that_request_gpus():
    assert {p.name for p in SCRIPTS if p.suffix == ".sbatch" and requests_gpus(p)} == GPU_TEMPLATES


@pytest.mark.parametrize("path", [p for p in SCRIPTS if p.suffix == ".sbatch"], ids=lambda p: p.name)
def test_gpu_templates_run_the_preflight_right_after_setup(path):
    lines = commands(path)
    setups = [i for i, line in enumerate(lines) if line == "gpu_python_setup"]
    assert setups, f"{path.name} does not call gpu_python_setup"
    if path.name in PREFLIGHT_IN_THE_WORK:
        assert "gpu_python_preflight" not in lines
        work = [line for line in lines if "booktools gpu-check" in line]
        assert work and lines.index(work[0]) > setups[-1], lines
    elif path.name in GPU_TEMPLATES:
        # Every path through the script (build-book.sbatch has two) checks the GPU before anything else.
        assert all(lines[i + 1] == "gpu_python_preflight" for i in setups), lines
        assert lines.count("gpu_python_preflight") == len(setups)
    else:
        assert "gpu_python_preflight" not in lines


def test_templates_are_clean_under_shellcheck():
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (Debian package shellcheck; scripts/system-packages.sh)")
    done = subprocess.run([shellcheck, "-x", *[str(p.relative_to(ROOT)) for p in [*SCRIPTS, SITE]]], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_site_file_turns_partition_and_account_into_sbatch_variables():
    env = {"PATH": os.environ["PATH"], "GPU_PYTHON_PARTITION": "gpu-long", "GPU_PYTHON_ACCOUNT": "proj42"}
    done = subprocess.run(["bash", "-c", f"set -euo pipefail; source {shlex.quote(str(SITE))}; "
                           'echo "$SBATCH_PARTITION $SBATCH_ACCOUNT $SALLOC_PARTITION $GPU_PYTHON_BENCH_COMMAND"'],
                          env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["gpu-long", "proj42", "gpu-long", "python", "-m", "booktools", "bench"]
    unset = subprocess.run(["bash", "-c", f"set -u; source {shlex.quote(str(SITE))}; echo ${{SBATCH_PARTITION-unset}}"],
                           env={"PATH": os.environ["PATH"]}, capture_output=True, text=True, check=True)
    assert unset.stdout.strip() == "unset", "with no partition in the site file, sbatch must use its default"


def test_site_file_exports_every_setting():
    names = re.findall(r'^: "\$\{(GPU_PYTHON_\w+?):?=', SITE.read_text(), re.M)
    assert {"GPU_PYTHON_STACK", "GPU_PYTHON_PREFLIGHT_COMMAND"} <= set(names)
    done = subprocess.run(["bash", "-c", f"set -euo pipefail; source {shlex.quote(str(SITE))}; exec env"],
                          env={"PATH": os.environ["PATH"]}, capture_output=True, text=True, check=True)
    exported = {line.split("=", 1)[0] for line in done.stdout.splitlines()}
    assert set(names) <= exported, f"set in site.sh but not exported to the jobs' commands: {set(names) - exported}"


def run_preflight(**env: str) -> subprocess.CompletedProcess:
    """site.sh's gpu_python_preflight in a strict shell, followed by the job's 'work'."""
    script = (f"set -euo pipefail; source {shlex.quote(str(SITE))}; "
              'echo "setting: [$GPU_PYTHON_PREFLIGHT_COMMAND]"; gpu_python_preflight; echo "the work ran"')
    return subprocess.run(["bash", "-c", script], env={"PATH": os.environ["PATH"], **env}, capture_output=True,
                          text=True)


def test_site_file_preflight_default_skip_pass_and_fail():
    # The default is read, not run: there is no GPU here for it to pass on.
    default = subprocess.run(["bash", "-c", f"set -u; source {shlex.quote(str(SITE))}; "
                              'printf "%s" "$GPU_PYTHON_PREFLIGHT_COMMAND"'],
                             env={"PATH": os.environ["PATH"]}, capture_output=True, text=True, check=True)
    assert default.stdout == "python -m gpukit doctor --gpu"

    passed = run_preflight(GPU_PYTHON_PREFLIGHT_COMMAND="echo 'ok torch: matmul'")
    assert passed.returncode == 0, passed.stderr
    assert passed.stdout.splitlines()[1].startswith("GPU preflight on ")
    assert passed.stdout.splitlines()[2:] == ["ok torch: matmul", "the work ran"]

    skipped = run_preflight(GPU_PYTHON_PREFLIGHT_COMMAND="")  # empty in the environment: not the default
    assert skipped.returncode == 0, skipped.stderr
    assert skipped.stdout.splitlines() == [
        "setting: []", "GPU preflight skipped: GPU_PYTHON_PREFLIGHT_COMMAND is empty in the site file",
        "the work ran"]

    failed = run_preflight(GPU_PYTHON_PREFLIGHT_COMMAND="echo 'FAIL torch: the fix'; exit 3")
    assert failed.returncode == 3, failed
    assert "FAIL torch: the fix" in failed.stdout and "the work ran" not in failed.stdout
    assert PREFLIGHT_STOP in failed.stderr and "exit status 3" in failed.stderr


def test_site_file_stops_the_processes_that_name_a_folder_and_no_others(tmp_path):
    """What ray.sbatch runs after a failed try: every process naming the folder stops, one that ignores TERM
    too (killed after 5 s); one naming a folder that differs only where an unescaped '.' or '+' would match
    keeps running."""
    folder = tmp_path / "ray-1.2+[3]" / "session_"
    look_alike = tmp_path / "ray-1x223" / "session_"  # what the unescaped name, read as a pattern, matches

    def start(named: Path, ignore_term: bool = False) -> subprocess.Popen:
        # bash's $0 puts the folder in the process's command line, as Ray's --session-dir=... does; "ready"
        # says that the TERM trap is set.
        loop = ("trap '' TERM; " if ignore_term else "") + "echo ready; while :; do sleep 0.1; done"
        process = subprocess.Popen(["bash", "-c", loop, f"stand-in --session-dir={named}1/logs"],
                                   stdout=subprocess.PIPE, text=True)
        assert process.stdout.readline() == "ready\n"
        return process

    named = [start(folder), start(folder, ignore_term=True)]
    other = start(look_alike)
    try:
        # The folder reaches the function through the environment: a command line naming it would match too.
        done = subprocess.run(["bash", "-c", f"set -euo pipefail; source {shlex.quote(str(SITE))}; "
                               'gpu_python_stop_processes_naming "$FOLDER"'],
                              env={"PATH": os.environ["PATH"], "FOLDER": str(folder)}, capture_output=True,
                              text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert [p.wait(timeout=5) for p in named] == [-signal.SIGTERM, -signal.SIGKILL]
        assert other.poll() is None, "a process naming another folder was stopped"
    finally:
        for process in [*named, other]:
            process.kill()
            process.wait()


def test_nsys_template_stops_and_says_what_is_missing_without_nsys(tmp_path):
    """Run as a job would, without Slurm: the site file's setup, no preflight, and no nsys to be found."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GPU_PYTHON_VENV": sys.prefix,
           "GPU_PYTHON_PREFLIGHT_COMMAND": "", "GPU_PYTHON_NSYS": str(tmp_path / "no-nsys-here"),
           "SLURM_SUBMIT_DIR": str(ROOT)}
    done = subprocess.run(["bash", str(TEMPLATES / "nsys-profile.sbatch")], env=env, capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 1, done
    assert "The job stops here" in done.stderr and "no-nsys-here" in done.stderr
    assert "GPU_PYTHON_MODULES" in done.stderr and "GPU_PYTHON_NSYS" in done.stderr
    assert "profile-step" not in done.stdout


@pytest.mark.parametrize("tries", ["three", "0", "-1", "2 "])  # empty means the default, 3
def test_ray_template_refuses_a_number_of_tries_that_is_not_one_or_more(tmp_path, tries):
    """Checked before anything starts, so it runs here without Slurm."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "SLURM_SUBMIT_DIR": str(ROOT),
           "GPU_PYTHON_RAY_HEAD_TRIES": tries}
    done = subprocess.run(["bash", str(TEMPLATES / "ray.sbatch")], env=env, capture_output=True, text=True,
                          cwd=tmp_path, timeout=30)
    assert done.returncode == 2, done
    assert f"GPU_PYTHON_RAY_HEAD_TRIES must be a whole number, 1 or more; it is '{tries}'" in done.stderr
    assert done.stdout == ""


def test_a_cluster_start_that_fails_is_stopped_and_tried_again_in_a_new_namespace(monkeypatch):
    """The retry of tests/support/slurm_cluster.py itself, without Slurm: each failed try is stopped before the next,
    and
    when every try fails the error gives each try's reason."""
    calls = []
    slurm = SlurmCluster()  # its start and stop are replaced: nothing starts or stops
    monkeypatch.setattr(slurm, "stop", lambda: calls.append("stop"))

    def fails_twice(timeout):
        calls.append("start")
        if calls.count("start") <= 2:
            raise RuntimeError(f"no address, start {calls.count('start')}")

    monkeypatch.setattr(slurm, "_start_once", fails_twice)
    with pytest.warns(RuntimeWarning, match=r"came up on try 3 of 3; try 2 of 3: no address, start 2"):
        slurm.start(timeout=1, tries=3)
    assert calls == ["start", "stop", "start", "stop", "start"]

    calls.clear()
    monkeypatch.setattr(slurm, "_start_once", lambda timeout: calls.append("start") or 1 / 0)
    with pytest.raises(ZeroDivisionError):  # only a failed start is tried again, not a bug of the harness
        slurm.start(timeout=1, tries=3)
    assert calls == ["start"]

    monkeypatch.setattr(slurm, "_start_once", lambda timeout: (_ for _ in ()).throw(RuntimeError("down")))
    with pytest.raises(RuntimeError, match=r"(?s)try 1 of 2: down.*try 2 of 2: down"):
        slurm.start(timeout=1, tries=2)


def test_nsys_stand_in_is_executable():
    assert os.access(NSYS_STAND_IN, os.X_OK), f"{NSYS_STAND_IN} must be executable (chmod +x)"


# ------------------------------------------------------------------------------------------ on Slurm
def quick_bench_command() -> str:
    """The benchmark suite at its quick size, run from the book's top folder as the template's job runs it."""
    return "python -m booktools bench --quick && echo benchmark command ran"


@pytest.fixture(scope="module")
def cluster():
    why = why_not_here()
    if why:
        pytest.skip(f"no test Slurm cluster: {why}")
    if not (Path(sys.prefix) / "bin" / "activate").exists():
        pytest.skip(f"the tests' Python ({sys.executable}) is not in a virtualenv the jobs could activate")
    slurm = SlurmCluster()
    try:
        slurm.start()
    except Exception:
        slurm.stop()
        raise
    yield slurm
    slurm.stop()


@pytest.fixture(scope="module")
def job_env(cluster):
    out = cluster.state / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    # The cluster's GPUs are device files: its jobs compute on the CPU (and gloo), and the patterns above say so.
    # Slurm sets CUDA_VISIBLE_DEVICES for them, so on a machine with a GPU (or the simulated GPU node) torch in the
    # jobs would report it: their Python gets torch without CUDA, forced (tests/support/gpu_node's forcing_env).
    return cluster.env(
        **forcing_env(cluster.env(), torch_without_cuda=True),
        GPU_PYTHON_PARTITION=PARTITION, GPU_PYTHON_VENV=sys.prefix, GPU_PYTHON_HOST_IP="127.0.0.1",
        GPU_PYTHON_RESULTS=str(out / "results"), GPU_PYTHON_GPU_TYPES="fakea fakeb", GPU_PYTHON_MONITOR_SECONDS="1",
        # This node runs the other test worker's notebooks and browser beside it: with 6 tries, the head started on
        # the 3rd, 4th and 3rd in three fresh-clone runs, so 10.
        GPU_PYTHON_RAY_HEAD_TRIES="10",
        GPU_PYTHON_BOOK_COMMAND="python -c 'import os, gpukit; print(\"book command ran, GPUKIT_REQUIRE_GPU =\", "
                                "os.environ[\"GPUKIT_REQUIRE_GPU\"])'",
        GPU_PYTHON_BENCH_COMMAND=quick_bench_command(),
        GPU_PYTHON_PREFLIGHT_COMMAND=PREFLIGHT_STAND_IN,
        GPUKIT_GPU_CHECK_DIR=str(out / "gpu-check"),  # the gpu-check job's report, here rather than in _build/
        GLOO_SOCKET_IFNAME="lo",  # torchrun's gloo: the hostname resolves to no address inside the namespace
        OUT=str(out),
    )


def submit(cluster, env, script: str, *options: str, nice: int = 0) -> list[str]:
    """Submit as a reader does: source the site file in the shell, then sbatch (or the submit script). ``nice``: the
    job's processes run at that nice value (tests/support/slurm_cluster.py's PropagatePrioProcess=1 passes sbatch's
    on)."""
    under_nice = f"nice -n {nice} " if nice else ""
    command = f"exec {under_nice}" + ("sbatch --parsable" if script.endswith(".sbatch") else "bash")
    out = f"--output={env['OUT']}/%x-%j.out" if "array" not in script else f"--output={env['OUT']}/%x-%A_%a.out"
    done = cluster.run("bash", "-c", f'source slurm_templates/site.sh && {command} "$@"', "submit",
                       *([f"slurm_templates/{script}"] if script.endswith(".sh") else []), out, *options,
                       *([f"slurm_templates/{script}"] if script.endswith(".sbatch") else []), env=env, cwd=ROOT)
    return [line.split(";")[0] for line in done.stdout.split()]


# Run after all the others: Ray gives its head node 30 s to register (a limit written into ray/_private/node.py),
# which the other templates' thirty-odd processes starting at once on 2 cores can use up three tries running.
LAST = "ray.sbatch"
# The nice value of LAST's processes: a cluster's job has its cores, while this node shares its 2 with the other
# pytest worker. At -5 the scheduler gives each of Ray's processes about three times the share of each of the other
# worker's on a contended core. It has not removed the retries: in a fresh-clone run with it the head still started
# on its 3rd try (on the 3rd and the 4th in two runs without it).
LAST_NICE = -5


@pytest.fixture(scope="module")
def jobs(cluster, job_env):
    """Every template submitted at once, but LAST, which waits for the others to end; waits for all; returns
    {template: [job id, ...]}."""
    started = time.time() - 1
    submitted = {name: submit(cluster, job_env, name, *options) for name, (options, _) in SUBMISSIONS.items()
                 if name != LAST}
    others = ":".join(i for ids in submitted.values() for i in ids)
    submitted[LAST] = submit(cluster, job_env, LAST, *SUBMISSIONS[LAST][0], f"--dependency=afterany:{others}",
                             nice=LAST_NICE)
    cluster.wait([i for ids in submitted.values() for i in ids], WAIT_S)
    # Where nvidia-smi answers (a GPU node, the simulated one), site.sh's monitor logs each GPU job's use to
    # gpu-usage-<job id>.csv in the folder the job was submitted from, as a reader wants it: here the book's own
    # folder. The test's logs go with its jobs' outputs instead of staying in the repository.
    for log in ROOT.glob("gpu-usage-*.csv"):
        if log.stat().st_mtime >= started:
            shutil.move(log, Path(job_env["OUT"]) / log.name)
    return submitted


def output_of(env, job_id: str) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(Path(env["OUT"]).glob(f"*-{job_id}*.out")))


@pytest.mark.parametrize("name", [n for n in SUBMISSIONS if n.endswith(".sbatch")])
def test_template_runs_on_slurm(name, cluster, job_env, jobs):
    (job_id,) = jobs[name]
    text = output_of(job_env, job_id)
    fields = cluster.job_fields(job_id)
    if name == "sweep-array.sbatch":
        states = cluster.array_states(job_id)
        assert sorted(int(task) for task, _ in states) == list(range(12)), states
        assert {state for _, state in states} == {"COMPLETED"}, f"{states}\n{text[-3000:]}"
        results = sorted((Path(job_env["OUT"]) / "results" / f"sweep-{job_id}").glob("task-*.json"))
        assert len(results) == 12
    elif name in PREFLIGHT_IN_THE_WORK:  # no GPU here: it fails, and the test says how
        assert fields.get("JobState") == "FAILED" and fields.get("ExitCode") == "1:0", f"{fields}\n{text[-3000:]}"
    else:
        assert fields.get("JobState") == "COMPLETED", f"{fields}\n{text[-3000:]}"
        assert fields.get("ExitCode") == "0:0"
    for pattern in SUBMISSIONS[name][1]:
        assert re.search(pattern, text, re.S), f"{pattern!r} not in the output of {name}:\n{text[-3000:]}"
    assert f"Partition={PARTITION}" in cluster.run("scontrol", "show", "job", job_id).stdout
    if name in PREFLIGHT_IN_THE_WORK:
        gpu_check_failed_fast_and_clearly(fields, text)
        return
    # The stand-in's own line (site.sh's "GPU preflight on ..." line before it quotes the command).
    ran = re.search(rf"^{PREFLIGHT_LINE} \S+ in (.+)$", text, re.M)
    if name not in GPU_TEMPLATES:
        assert ran is None and "GPU preflight" not in text, f"{name} requests no GPU but ran the GPU preflight"
        return
    assert ran, f"{name} did not run the GPU preflight:\n{text[-3000:]}"
    preflight = ran.start()
    # After gpu_python_setup, in the job's environment; before anything the template's work prints.
    assert re.search(r"^job \d+ on ", text[:preflight], re.M), text[:preflight]
    assert ran.group(1) == sys.prefix
    for pattern in SUBMISSIONS[name][1]:
        work = re.search(pattern, text, re.S).start()
        assert preflight < work, f"{name}: {pattern!r} came before the preflight:\n{text[-3000:]}"


def seconds_of(run_time: str) -> int:
    """Slurm's RunTime ([D-]HH:MM:SS) in seconds."""
    days, _, clock = run_time.rpartition("-")
    hours, minutes, seconds = (int(part) for part in clock.split(":"))
    return ((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds


def gpu_check_failed_fast_and_clearly(fields: dict, text: str) -> None:
    """A gpu-check job without a GPU: its report's first line says why, nothing but the preflight ran, within
    FAST_S of its start."""
    assert seconds_of(fields["RunTime"]) < FAST_S, fields
    report = Path(re.search(r"^Report: (\S+/report\.md)$", text, re.M)[1])
    first = report.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# gpu-check FAILED: no usable GPU here (") and first.removeprefix("# ") in text
    done = json.loads((report.parent / "gpu-check.json").read_text(encoding="utf-8"))
    assert [r["name"] for r in done["results"]] == ["preflight"], done["results"]
    assert "GPU preflight on" not in text  # the site file's preflight did not run: gpu-check's own did


def test_dask_workers_are_slurm_jobs(cluster, job_env, jobs):
    text = output_of(job_env, jobs["dask-slurm.sbatch"][0])
    worker_ids = re.search(r"in Slurm jobs (\d+) (\d+)", text).groups()
    for worker in worker_ids:
        fields = cluster.job_fields(worker)
        assert fields.get("JobName") == "dask-worker", fields
        assert fields.get("Partition") == PARTITION  # sbatch inside the job read SBATCH_PARTITION too
        assert fields.get("JobState") in {"CANCELLED", "COMPLETED"}, fields


def test_benchmark_is_submitted_once_per_gpu_type(cluster, job_env, jobs):
    ids = jobs["bench-each-gpu-type.sh"]
    assert len(ids) == 2
    for job_id, gpu_type in zip(ids, ("fakea", "fakeb"), strict=True):
        fields = cluster.job_fields(job_id)
        assert fields.get("JobState") == "COMPLETED", f"{fields}\n{output_of(job_env, job_id)[-3000:]}"
        assert fields.get("JobName") == f"bench-{gpu_type}"
        assert f"gpu:{gpu_type}:1" in cluster.run("scontrol", "show", "job", job_id).stdout
        text = output_of(job_env, job_id)
        ran = re.search(rf"^{PREFLIGHT_LINE} ", text, re.M)
        assert ran and ran.start() < text.find(f"benchmark on GPU type {gpu_type}"), text[-3000:]


def test_a_job_submitted_with_nice_runs_its_steps_at_that_nice_value(cluster, job_env):
    """What LAST_NICE relies on: the batch script and its srun steps inherit sbatch's nice value."""
    out = Path(job_env["OUT"]) / "nice-check.out"
    done = cluster.run("bash", "-c", f"exec nice -n {LAST_NICE} sbatch --parsable --partition={PARTITION} "
                       f"--output={out} --wrap 'echo batch $(nice); srun --ntasks=1 nice'", env=job_env)
    cluster.wait([done.stdout.strip().split(";")[0]], WAIT_S)
    assert out.read_text().split() == ["batch", str(LAST_NICE), str(LAST_NICE)]


def test_failing_preflight_stops_the_job_before_its_work(cluster, job_env):
    env = {**job_env, "GPU_PYTHON_PREFLIGHT_COMMAND":
           "python -c \"import sys; print('preflight says no'); sys.exit(1)\""}
    (job_id,) = submit(cluster, env, "one-gpu.sbatch")
    cluster.wait([job_id], WAIT_S)
    text = output_of(job_env, job_id)
    fields = cluster.job_fields(job_id)
    assert fields.get("JobState") == "FAILED" and fields.get("ExitCode") == "1:0", f"{fields}\n{text}"
    said_no = re.search(r"^preflight says no$", text, re.M)  # its own line, not the command quoted
    assert said_no and PREFLIGHT_STOP in text, text
    assert said_no.start() < text.find(PREFLIGHT_STOP)
    assert "gpu-check" not in text and "Slurm granted GPUs" not in text, f"the work ran:\n{text}"


def sbatch_test_only(cluster, env, *options: str) -> subprocess.CompletedProcess:
    return cluster.run("bash", "-c", 'source slurm_templates/site.sh && exec sbatch --test-only "$@"', "submit",
                       *options, "slurm_templates/one-gpu.sbatch", env=env, cwd=ROOT, check=False)


def test_impossible_request_is_refused_by_test_only(cluster, job_env):
    fits = sbatch_test_only(cluster, job_env)
    assert fits.returncode == 0, fits.stderr
    assert "to start at" in fits.stderr
    # More GPUs of one type, more memory or more CPUs than the node has: refused at once, never queued.
    for impossible in ("--gpus=fakea:9", "--mem=2000G", "--cpus-per-task=65"):
        refused = sbatch_test_only(cluster, job_env, impossible)
        assert refused.returncode != 0, f"{impossible} was accepted: {refused.stderr}"
        assert "Requested node configuration is not available" in refused.stderr, refused.stderr
