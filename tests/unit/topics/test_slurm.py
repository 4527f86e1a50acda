"""gpukit.topics.slurm: reading the job templates, job-array specifications, job scripts as sbatch reads them, and Slurm
commands that may be absent; the job-script parser and the exercises' checks against a real one-node Slurm
(tests/support/slurm_cluster.py), which skip where it cannot start."""

import json
import subprocess
import sys

import pytest

from gpukit.exercises.slurm import JOB_SCRIPT_SOLUTION as JOB_SCRIPT
from gpukit.topics import slurm
from tests.support.booktoc import ROOT


def test_the_templates_folder_holds_job_scripts_submit_scripts_and_the_site_file():
    """What lesson 11 globs there (``*.sbatch``, and ``*.sh`` but the site file) and reads (``site.sh``)."""
    names = {p.name for p in slurm.templates_dir().iterdir()}
    assert {"one-gpu.sbatch", "bench-each-gpu-type.sh", "site.sh"} <= names


def test_header_and_options_of_a_template(tmp_path):
    job = tmp_path / "demo.sbatch"
    job.write_text("#!/bin/bash\n# What it is for.\n#   sbatch demo.sbatch\n#SBATCH --gpus=2\n"
                   "#SBATCH --exclusive\n#SBATCH --time=00:10:00  # ten minutes\n\nset -euo pipefail\n# later\n")
    assert slurm.template_header(job) == "What it is for.\n  sbatch demo.sbatch"
    assert slurm.sbatch_options(job) == {"gpus": "2", "exclusive": "", "time": "00:10:00"}


def test_a_real_template_by_name():
    assert slurm.sbatch_options("sweep-array.sbatch")["array"] == "0-11%4"
    assert "sweep" in slurm.template_header("sweep-array.sbatch")


@pytest.mark.parametrize("spec, indices, limit", [
    ("0-3", [0, 1, 2, 3], None), ("0-11%4", list(range(12)), 4), ("1,3,5-6", [1, 3, 5, 6], None),
    ("0-10:5%2", [0, 5, 10], 2), (" 7 ", [7], None)])
def test_array_indices(spec, indices, limit):
    assert slurm.array_indices(spec) == (indices, limit)


@pytest.mark.parametrize("spec", ["", "0..3", "3-1", "0-3%", "0-3%0", "a", "0-4:0"])
def test_array_indices_refuses_what_sbatch_refuses(spec):
    with pytest.raises(ValueError):
        slurm.array_indices(spec)
    with pytest.raises(TypeError):
        slurm.array_indices(3)


def test_slurm_command_when_absent(monkeypatch):
    monkeypatch.setattr(slurm.shutil, "which", lambda name: None)
    out, why = slurm.slurm_command("sinfo")
    assert out is None and "not installed" in why
    with pytest.raises(ValueError):
        slurm.slurm_command()


def test_slurm_command_failing_slow_and_answering(monkeypatch):
    monkeypatch.setattr(slurm.shutil, "which", lambda name: f"/usr/bin/{name}")

    def failing(*a, **k):
        return subprocess.CompletedProcess(a, 1, "", "sinfo: error: x\nUnable to contact slurm controller\n")

    monkeypatch.setattr(slurm.subprocess, "run", failing)
    assert slurm.slurm_command("sinfo") == (None, "sinfo failed: Unable to contact slurm controller")

    def slow(*a, **k):
        raise subprocess.TimeoutExpired(a, 1)

    monkeypatch.setattr(slurm.subprocess, "run", slow)
    assert "did not answer" in slurm.slurm_command("squeue")[1]
    monkeypatch.setattr(slurm.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, "gpu up\n", ""))
    assert slurm.slurm_command("sinfo", "-s") == ("gpu up\n", "")


# ------------------------------------------------------------------------------------------ reading job scripts
def test_directives_are_read_up_to_the_first_command():
    script = slurm.read_job_script(
        "#!/bin/bash\n# a comment\n\n#SBATCH --gpus=2 -c 8  # two GPUs\n#SBATCH --time 00:45:00\n"
        "  # an indented comment\nset -euo pipefail\n#SBATCH --mem=2000G\npython train.py\n")
    assert script.interpreter == "/bin/bash"
    assert script.options() == {"gpus": "2", "cpus-per-task": "8", "time": "00:45:00"}
    assert [(d.name, d.line) for d in script.ignored] == [("mem", 8)]
    assert script.first_command == 7
    assert script.commands() == ["set -euo pipefail", "python train.py"]


def test_look_alikes_quotes_flags_and_variables():
    script = slurm.read_job_script(
        '#!/bin/sh\n# SBATCH --gpus=1\n#sbatch --gpus=1\n  #SBATCH --gpus=1\n#SBATCH --exclusive --job-name "my job"\n'
        "#SBATCH --partition=$PARTITION --account=${ACCOUNT}\n#SBATCH -N2 -G 4\n")
    assert script.look_alikes == (2, 3, 4)
    assert script.options() == {"exclusive": "", "job-name": "my job", "partition": "$PARTITION",
                                "account": "${ACCOUNT}", "nodes": "2", "gpus": "4"}
    assert [d.name for d in script.with_variables()] == ["partition", "account"]
    assert script.first_command is None and script.commands() == []


def test_what_sbatch_cannot_read():
    assert slurm.read_job_script("#SBATCH --gpus=1\n").interpreter is None
    assert "unmatched" in slurm.read_job_script('#!/bin/bash\n#SBATCH --job-name="x\n').errors[0]
    assert "not an option" in slurm.read_job_script("#!/bin/bash\n#SBATCH gpus=1\n").errors[0]
    assert "needs a value" in slurm.read_job_script("#!/bin/bash\n#SBATCH -c\n").errors[0]
    with pytest.raises(TypeError):
        slurm.read_job_script(b"#!/bin/bash\n")


@pytest.mark.parametrize("value, minutes", [("45", 45), ("00:45:00", 45), ("00:45", 0.75), ("1:30", 1.5),
                                            ("2-0", 2880), ("1-02:03", 1563), ("0-00:00:30", 0.5)])
def test_time_minutes(value, minutes):
    assert slurm.time_minutes(value) == pytest.approx(minutes)


@pytest.mark.parametrize("value", ["", "45m", "1:2:3:4", "a-1", "1.5"])
def test_time_minutes_refuses_what_sbatch_refuses(value):
    with pytest.raises(ValueError):
        slurm.time_minutes(value)


@pytest.mark.parametrize("value, mb", [("32G", 32768), ("32g", 32768), ("32GB", 32768), ("512", 512),
                                       ("2048K", 2), ("1T", 1024 * 1024)])
def test_memory_mb(value, mb):
    assert slurm.memory_mb(value) == mb


@pytest.mark.parametrize("value", ["1.5G", "32 GiB", "lots", ""])
def test_memory_mb_refuses_what_sbatch_refuses(value):
    with pytest.raises(ValueError):
        slurm.memory_mb(value)


@pytest.mark.parametrize("options, gpus", [
    ({}, 0), ({"gpus": "2"}, 2), ({"gpus": "a100:3"}, 3), ({"gres": "gpu:2"}, 2), ({"gres": "gpu"}, 1),
    ({"gres": "gpu:a100:4", "nodes": "2"}, 8), ({"gpus-per-node": "4", "nodes": "2"}, 8),
    ({"gpus-per-task": "1", "ntasks": "3"}, 3), ({"gpus-per-task": "2", "nodes": "2", "ntasks-per-node": "2"}, 8),
    ({"gres": "shard:2"}, 0)])
def test_gpus_requested(options, gpus):
    assert slurm.gpus_requested(options) == gpus


def test_test_only_without_a_cluster_says_why(monkeypatch):
    monkeypatch.setattr(slurm, "slurm_command", lambda *a, **k: (None, "sinfo is not installed here"))
    assert slurm.sbatch_test_only("#!/bin/bash\ntrue\n") == (None, "sinfo is not installed here")


# ------------------------------------------------------------------------------------------ against a real Slurm
@pytest.fixture(scope="module")
def cluster():
    from tests.support.slurm_cluster import SlurmCluster, why_not_here

    why = why_not_here()
    if why:
        pytest.skip(f"no test Slurm cluster: {why}")
    started = SlurmCluster("slurm-exercise")  # a cluster of its own, beside test_slurm_templates.py's
    try:
        started.start()
    except Exception:
        started.stop()
        raise
    yield started
    started.stop()


def sbatch_reads(cluster, text: str) -> bool:
    """Whether sbatch --test-only accepts ``text`` on the test cluster (its partition from the site file)."""
    from tests.support.slurm_cluster import PARTITION

    path = cluster.state / "read.sbatch"
    path.write_text(text)
    done = cluster.run("bash", "-c", 'source slurm_templates/site.sh && exec sbatch --test-only "$1"', "test",
                       str(path), env=cluster.env(GPU_PYTHON_PARTITION=PARTITION), cwd=ROOT, check=False)
    return done.returncode == 0


TOO_MUCH = "#SBATCH --mem=2000G"  # more than the test node has: sbatch refuses it wherever it reads it


@pytest.mark.parametrize("lines", [
    ["#!/bin/bash", "python train.py", TOO_MUCH],  # after the first command
    ["#!/bin/bash", "  " + TOO_MUCH, "python train.py"],  # indented
    ["#!/bin/bash", TOO_MUCH.replace("#SBATCH", "# SBATCH"), "python train.py"],
    ["#!/bin/bash", "# a comment", "", TOO_MUCH, "python train.py"],  # comments and blanks may come first
])
def test_the_parser_reads_what_sbatch_reads(cluster, lines):
    text = "\n".join(lines) + "\n"
    script = slurm.read_job_script(text)
    assert ("mem" in script.options()) == (not sbatch_reads(cluster, text))


def test_the_checks_ask_a_real_slurm(cluster):
    """Run inside the cluster's namespace, the exercise's check consults sbatch --test-only: a script that the
    parser finds right but the cluster refuses (a node feature it does not have) fails there, with sbatch's words,
    and the solution passes."""
    from tests.support.slurm_cluster import PARTITION

    code = """if True:
        import json
        from gpukit.exercises import check
        from gpukit.exercises.slurm import ARRAY_SCRIPT_SOLUTION, JOB_SCRIPT_SOLUTION
        from gpukit.topics.slurm import sbatch_test_only
        unknown_feature = JOB_SCRIPT_SOLUTION.replace("#SBATCH --gpus=2", "#SBATCH --gpus=2 --constraint=nope")
        print(json.dumps({
            "asked": sbatch_test_only(JOB_SCRIPT_SOLUTION)[0],
            "solution": repr(check("ex-slurm-job-script", JOB_SCRIPT_SOLUTION)),
            "array": repr(check("ex-slurm-array", ARRAY_SCRIPT_SOLUTION)),
            "refused": repr(check("ex-slurm-job-script", unknown_feature)),
        }))
    """
    done = cluster.run(sys.executable, "-c", code, env=cluster.env(GPU_PYTHON_PARTITION=PARTITION), cwd=ROOT)
    verdicts = json.loads(done.stdout.strip().splitlines()[-1])
    assert verdicts["asked"] is True
    assert verdicts["solution"].startswith("Correct") and verdicts["array"].startswith("Correct"), verdicts
    assert verdicts["refused"].startswith("Not yet: sbatch --test-only on this cluster refuses"), verdicts
    assert "Invalid feature specification" in verdicts["refused"]
    # Without a cluster, the parser alone cannot tell: the same script passes.
    from gpukit.exercises import check

    assert check("ex-slurm-job-script", JOB_SCRIPT.replace("--gpus=2", "--gpus=2 --constraint=nope"))
