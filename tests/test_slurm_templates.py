"""The job templates in slurm_templates/: their form (header, strict mode, the site file, shellcheck), and
every one of them submitted with sbatch to a real one-node Slurm cluster (tests/slurm_cluster.py).

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
  the rendezvous and the Ray head are real, a second node is not;
- the book and benchmark templates run the site file's command, which the test points at a quick
  stand-in (the benchmark at `python -m gpukit bench --quick` when gpukit has that command): the job
  plumbing is tested, not a full book build or benchmark run;
- dask-jobqueue's workers are real Slurm jobs of their own, submitted from inside the driver job.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_cluster import PARTITION, SlurmCluster, why_not_here

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "slurm_templates"
SITE = TEMPLATES / "site.sh"
SCRIPTS = sorted(TEMPLATES.glob("*.sbatch")) + sorted(p for p in TEMPLATES.glob("*.sh") if p != SITE)
WAIT_S = 240

# Template -> (extra sbatch options, what its output must contain). Every template must be listed.
SUBMISSIONS = {
    "one-gpu.sbatch": ([], [r"Slurm granted GPUs: \d", r"gpu-check done on cpu"]),
    "multi-gpu-torchrun.sbatch": ([], [r"ddp done: world size 4, backend gloo",
                                       r"(weights equal rank 0's: True.*){4}"]),
    "multi-node-torchrun.sbatch": (["--nodes=1"], [r"rendezvous at 127\.0\.0\.1:\d+ for 1 node\(s\) x 4 GPU",
                                                   r"ddp done: world size 4, backend gloo"]),
    "sweep-array.sbatch": ([], [r"sweep task \d+: learning rate"]),
    "ipyparallel.sbatch": ([], [r"ipyparallel done: 4 engines"]),
    "dask-slurm.sbatch": ([], [r"dask-jobqueue done: 2 workers in Slurm jobs \d+ \d+, sum of squares 328350"]),
    "ray.sbatch": (["--nodes=1"], [r"ray done: 1 node\(s\), 8 CPUs"]),
    "build-book.sbatch": ([], [r"book command ran, GPUKIT_REQUIRE_GPU = 1"]),
    "bench.sbatch": ([], [r"benchmark on GPU type any", r"benchmark command ran"]),
    "bench-each-gpu-type.sh": ([], []),  # submits bench.sbatch per type: checked by its own test
}


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
    assert done.stdout.split() == ["gpu-long", "proj42", "gpu-long", "python", "-m", "gpukit", "bench"]
    unset = subprocess.run(["bash", "-c", f"set -u; source {shlex.quote(str(SITE))}; echo ${{SBATCH_PARTITION-unset}}"],
                           env={"PATH": os.environ["PATH"]}, capture_output=True, text=True, check=True)
    assert unset.stdout.strip() == "unset", "with no partition in the site file, sbatch must use its default"


# ------------------------------------------------------------------------------------------ on Slurm
def quick_bench_command() -> str:
    """``python -m gpukit bench --quick`` if gpukit has that command by now, else a stand-in that says so."""
    done = subprocess.run([sys.executable, "-m", "gpukit", "bench", "--help"], capture_output=True, text=True,
                          cwd=ROOT)
    if done.returncode == 0 and "--quick" in done.stdout:
        return "python -m gpukit bench --quick && echo benchmark command ran"
    return "python -c 'import gpukit; print(\"benchmark command ran\")'"


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
    return cluster.env(
        GPU_PYTHON_PARTITION=PARTITION, GPU_PYTHON_VENV=sys.prefix, GPU_PYTHON_HOST_IP="127.0.0.1",
        GPU_PYTHON_RESULTS=str(out / "results"), GPU_PYTHON_GPU_TYPES="fakea fakeb", GPU_PYTHON_MONITOR_SECONDS="1",
        GPU_PYTHON_BOOK_COMMAND="python -c 'import os, gpukit; print(\"book command ran, GPUKIT_REQUIRE_GPU =\", "
                                "os.environ[\"GPUKIT_REQUIRE_GPU\"])'",
        GPU_PYTHON_BENCH_COMMAND=quick_bench_command(),
        GLOO_SOCKET_IFNAME="lo",  # torchrun's gloo: the hostname resolves to no address inside the namespace
        OUT=str(out),
    )


def submit(cluster, env, script: str, *options: str) -> list[str]:
    """Submit as a reader does: source the site file in the shell, then sbatch (or the submit script)."""
    command = "exec sbatch --parsable" if script.endswith(".sbatch") else "exec bash"
    out = f"--output={env['OUT']}/%x-%j.out" if "array" not in script else f"--output={env['OUT']}/%x-%A_%a.out"
    done = cluster.run("bash", "-c", f'source slurm_templates/site.sh && {command} "$@"', "submit",
                       *([f"slurm_templates/{script}"] if script.endswith(".sh") else []), out, *options,
                       *([f"slurm_templates/{script}"] if script.endswith(".sbatch") else []), env=env, cwd=ROOT)
    return [line.split(";")[0] for line in done.stdout.split()]


@pytest.fixture(scope="module")
def jobs(cluster, job_env):
    """Every template submitted at once; waits for all; returns {template: [job id, ...]}."""
    submitted = {name: submit(cluster, job_env, name, *options) for name, (options, _) in SUBMISSIONS.items()}
    cluster.wait([i for ids in submitted.values() for i in ids], WAIT_S)
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
    else:
        assert fields.get("JobState") == "COMPLETED", f"{fields}\n{text[-3000:]}"
        assert fields.get("ExitCode") == "0:0"
    for pattern in SUBMISSIONS[name][1]:
        assert re.search(pattern, text, re.S), f"{pattern!r} not in the output of {name}:\n{text[-3000:]}"
    assert f"Partition={PARTITION}" in cluster.run("scontrol", "show", "job", job_id).stdout


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
        assert f"benchmark on GPU type {gpu_type}" in output_of(job_env, job_id)


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
