import subprocess
import sys

from gpukit import report as rep
from gpukit.report import PROBLEM, Finding, Report, environment_report, pinned_requirement


def test_report_covers_machine_and_every_core_library():
    result = environment_report()
    topics = {f.topic for f in result.findings}
    assert {"device", "python", "machine", "memory", "nvidia-smi"} <= topics
    assert {name for name, _, _ in rep.CORE_LIBRARIES} <= topics
    assert result.device != "no usable device"


def test_missing_library_is_a_problem_with_the_pinned_install_command(monkeypatch):
    real = rep.library_version
    monkeypatch.setattr(rep, "library_version", lambda name: None if name == "tqdm" else real(name))
    result = environment_report()
    (problem,) = [f for f in result.problems if f.topic == "tqdm"]
    assert problem.fix.endswith('-m pip install "tqdm==4.70.1"')
    assert not result.ready
    assert "FIX" in result.to_text() and "1 problem(s)" in result.to_text()


def test_gpu_seen_by_nvidia_smi_but_not_by_torch_is_flagged(monkeypatch):
    monkeypatch.setattr(rep, "nvidia_smi_gpus", lambda: ["NVIDIA A100-SXM4-40GB, 40960 MiB"])
    monkeypatch.setattr(rep._device, "cuda_available", lambda: False)
    result = environment_report()
    topics = {f.topic for f in result.problems}
    assert "torch + GPU" in topics
    assert "jax" in topics  # JAX on the CPU while a GPU is visible


def test_required_gpu_missing_is_reported_not_raised(monkeypatch):
    monkeypatch.setattr(rep._device, "cuda_available", lambda: False)
    monkeypatch.setattr(rep._device, "mps_available", lambda: False)
    monkeypatch.setenv("GPUKIT_REQUIRE_GPU", "1")
    result = environment_report()
    assert result.device == "no usable device"
    assert any(f.topic == "device" for f in result.problems)


def test_pinned_requirement_reads_requirements_files():
    assert pinned_requirement("torch") == "torch==2.13.0"
    assert pinned_requirement("cupy-cuda12x") == "cupy-cuda12x==14.2.0"
    assert pinned_requirement("not-a-package") == "not-a-package"


def test_markdown_escapes_table_separators():
    table = Report("cpu", [Finding("x", PROBLEM, "a | b", "pip install x")]).to_markdown()
    assert "a \\| b" in table and "`pip install x`" in table


def test_doctor_command_prints_report_and_sets_exit_status():
    done = subprocess.run([sys.executable, "-m", "gpukit", "doctor"], capture_output=True, text=True, timeout=120)
    assert "Lessons will run on:" in done.stdout
    assert done.returncode == (0 if "Ready: nothing to fix." in done.stdout else 1)
    bad = subprocess.run([sys.executable, "-m", "gpukit", "cure"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "invalid choice: 'cure'" in bad.stderr
