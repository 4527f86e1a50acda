"""gpukit.slurm: reading the job templates, job-array specifications, and Slurm commands that may be absent."""

import subprocess

import pytest

from gpukit import slurm


def test_templates_are_listed_without_the_site_file():
    names = [p.name for p in slurm.templates()]
    assert "one-gpu.sbatch" in names and "bench-each-gpu-type.sh" in names
    assert "site.sh" not in names
    assert names.index("one-gpu.sbatch") < names.index("bench-each-gpu-type.sh")  # job scripts first


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
