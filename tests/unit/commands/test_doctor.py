import importlib.metadata
import re
import subprocess
import sys

import pytest

from gpukit.commands import doctor as rep
from gpukit.commands.doctor import OK, PROBLEM, WARNING, Finding, Report, environment_report
from gpukit.core.optional import pinned_requirement


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
    assert problem.fix.endswith("-m pip install tqdm==4.70.1")
    assert not result.ready
    assert "FIX" in result.to_text() and "1 problem(s)" in result.to_text()


def test_gpu_seen_by_nvidia_smi_but_not_by_torch_is_flagged(monkeypatch):
    monkeypatch.setattr(rep, "nvidia_smi_gpus", lambda: ["NVIDIA A100-SXM4-40GB, 40960 MiB"])
    monkeypatch.setattr(rep._device, "cuda_available", lambda: False)
    jax = pytest.importorskip("jax")
    # JAX on the CPU while a GPU is visible, whatever this machine's JAX really uses.
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    result = environment_report()
    topics = {f.topic for f in result.problems}
    assert "torch + GPU" in topics
    (jax_problem,) = [f for f in result.problems if f.topic == "jax"]
    # This torch is a CPU build, so the fix is the stack of PyPI's torch: CUDA 13.
    assert jax_problem.fix.endswith("-c requirements/lock.txt -e '.[lessons,cuda13]'")


@pytest.mark.parametrize(("driver", "torch_cuda", "status", "says"), [
    ("580.95.05", 13, rep.OK, "runs CUDA 13"),
    ("550.54.15", 12, rep.OK, "runs CUDA 12"),
    ("550.54.15", None, rep.OK, "runs CUDA 12"),  # a CPU torch: nothing to mismatch yet
    ("535.104.05", 13, PROBLEM, "torch is built for CUDA 13, which driver 535.104.05 cannot run"),
    ("470.82.01", 12, PROBLEM, "older than any stack"),
])
def test_the_driver_decides_which_cuda_stack_fits(monkeypatch, driver, torch_cuda, status, says):
    monkeypatch.setattr(rep, "nvidia_smi_gpus", lambda: [f"NVIDIA A100-SXM4-40GB, 40960 MiB, {driver}"])
    monkeypatch.setattr(rep.cuda_stacks, "torch_cuda_major", lambda: torch_cuda)
    (stack,) = [f for f in environment_report().findings if f.topic == "CUDA stack"]
    assert stack.status == status and says in stack.detail
    if "torch is built" in says:  # the fix installs the CUDA 12 stack, from PyTorch's CUDA 12 index
        assert "--extra-index-url https://download.pytorch.org/whl/cu129" in stack.fix and "cuda12]" in stack.fix


def test_required_gpu_missing_is_reported_not_raised(monkeypatch):
    monkeypatch.setattr(rep._device, "cuda_available", lambda: False)
    monkeypatch.setattr(rep._device, "mps_available", lambda: False)
    monkeypatch.setenv("GPUKIT_REQUIRE_GPU", "1")
    result = environment_report()
    assert result.device == "no usable device"
    assert any(f.topic == "device" for f in result.problems)


def test_pinned_requirement_reads_the_books_pins_from_gpukits_metadata():
    assert pinned_requirement("torch") == "torch==2.13.0"
    assert pinned_requirement("cupy-cuda12x") == "cupy-cuda12x[ctk]==14.2.0"
    assert pinned_requirement("not-a-package") == "not-a-package"


def test_a_ready_report_without_a_gpu_says_what_that_means_in_a_gpu_workshop():
    cpu = Report("cpu (AMD EPYC 7763, 2 logical cores)", [Finding("torch", OK, "2.13.0")])
    assert cpu.verdict().startswith("Ready: nothing to fix. No GPU here, only the CPU: the lessons' GPU cells will "
                                    "skip") and "start one with a GPU" in cpu.verdict()
    gpu = Report("cuda:0 (NVIDIA H100 80GB HBM3, 79.2 GiB)", [Finding("torch", OK, "2.13.0")])
    assert gpu.verdict() == "Ready: nothing to fix."
    warned = Report("cpu", [Finding("numpy", WARNING, "2.5.2")]).verdict()
    assert warned.startswith("Ready, with 1 warning(s)") and warned.endswith(rep.NO_GPU_NOTE)
    assert Report("cpu", [Finding("x", PROBLEM, "missing", "pip install x")]).verdict().startswith("1 problem(s)")


def test_markdown_escapes_table_separators():
    table = Report("cpu", [Finding("x", PROBLEM, "a | b", "pip install x")]).to_markdown()
    assert "a \\| b" in table and "`pip install x`" in table


def test_doctor_command_prints_report_and_sets_exit_status():
    done = subprocess.run([sys.executable, "-m", "gpukit", "doctor"], capture_output=True, text=True, timeout=120)
    assert "Lessons will run on:" in done.stdout
    verdict = done.stdout.splitlines()[-1]
    assert verdict.startswith(("Ready: nothing to fix.", "Ready, with ", f"{verdict.split()[0]} problem(s) to fix"))
    assert done.returncode == (1 if "[FIX ]" in done.stdout else 0)  # warnings (drift) alone exit 0
    bad = subprocess.run([sys.executable, "-m", "gpukit", "cure"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "invalid choice: 'cure'" in bad.stderr


def test_the_report_shows_paths_relative_to_the_book_or_the_environment(monkeypatch, tmp_path):
    from gpukit.base.paths import project_root

    inside = project_root() / ".venv" / "bin" / "python"
    assert rep.shown_path(str(inside)) == ".venv/bin/python in the book's folder"
    monkeypatch.setattr(rep.sys, "prefix", str(tmp_path / "envs" / "gpu"))
    elsewhere = tmp_path / "envs" / "gpu" / "bin" / "python3"
    assert rep.shown_path(str(elsewhere)) == "bin/python3 in the environment 'gpu'"
    python_line = [f for f in environment_report().findings if f.topic == "python"][0]
    assert str(project_root()) not in python_line.detail


def test_cupy_without_a_usable_gpu_is_a_note_not_a_problem(monkeypatch):
    import types

    fake_cupy = types.ModuleType("cupy")
    fake_cupy.cuda = types.SimpleNamespace(is_available=lambda: False)
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    real = rep.library_version
    monkeypatch.setattr(rep, "library_version", lambda name: "14.2.0" if name == "cupy" else real(name))
    monkeypatch.setattr(rep, "nvidia_smi_gpus", lambda: None)
    (cupy,) = [f for f in environment_report().findings if f.topic == "cupy"]
    assert cupy.status == rep.NOTE and "no usable GPU" in cupy.detail


def test_each_cuda_device_torch_sees_is_listed(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(rep._device, "cuda_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(rep._device, "describe_device", lambda d: f"{d} (NVIDIA H100 80GB HBM3, 79.2 GiB)")
    monkeypatch.setattr(rep._device, "pick_device", lambda: "cuda")
    monkeypatch.setattr(rep, "nvidia_smi_gpus", lambda: ["NVIDIA H100 80GB HBM3, 81559 MiB"] * 2)
    result = environment_report()
    listed = [f for f in result.findings if f.topic.startswith("torch cuda:")]
    assert [f.topic for f in listed] == ["torch cuda:0", "torch cuda:1"]
    assert all(f.status == rep.OK and "H100" in f.detail for f in listed)
    assert result.device.startswith("cuda (NVIDIA H100")


# ------------------------------------------------------------------------------------------ drift against the lock
# What the first H100 run's Python had, where `doctor` said "Ready: nothing to fix".
H100_VERSIONS = {"numpy": "2.5.2", "jax": "0.11.2", "jaxlib": "0.11.2", "torch": "2.11.0+cu130", "numba": "0.68.0",
                 "triton": "3.6.0", "pandas": "3.0.6"}


def installed_as(monkeypatch, versions):
    """importlib.metadata reports ``versions`` for those distributions, the real ones for the others."""
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: versions[rep.canonical(name)] if rep.canonical(name) in versions else real(name))


def test_versions_that_differ_from_the_lock_are_warnings_naming_the_lessons(monkeypatch):
    installed_as(monkeypatch, H100_VERSIONS)
    result = environment_report()
    warned = {f.topic: f for f in result.warnings}
    assert {"numpy", "jax", "jaxlib", "torch", "numba", "triton", "pandas"} <= set(warned)
    numpy = warned["numpy"].detail
    assert numpy.startswith("2.5.2 installed, the book's lock pins 2.4.6: can break lesson(s) ")
    # 09 (and 16) fail inside numba-cuda, not numpy
    assert re.search(r"(; |\) )(\d\d, )*09(, \d\d)* through numba \(numba-cuda needs the pinned NumPy", numpy), numpy
    assert "08" in warned["jax"].detail and "jaxlib" in warned and "through jax" in warned["jaxlib"].detail
    assert warned["torch"].detail.startswith("2.11.0+cu130 installed, the book's lock pins 2.13.0")
    assert warned["numpy"].fix.endswith("-m pip install numpy==2.4.6")
    text = result.to_text()
    assert "[warn] numpy" in text and "Ready: nothing to fix." not in text
    assert text.splitlines()[-1].startswith(f"Ready, with {len(result.warnings)} warning(s)")
    assert result.ready  # a warning is not a problem: the command still exits 0
    assert "⚠️ | numpy |" in result.to_markdown()


def test_the_same_release_of_another_build_is_no_drift(monkeypatch):
    installed_as(monkeypatch, {"torch": "2.13.0+cu130", "numpy": "2.4.6"})
    assert not [d for d in rep.version_drift() if d.distribution in ("torch", "numpy")]
    assert not [f for f in environment_report().warnings if f.topic in ("torch", "numpy")]


def test_the_lock_is_read_with_its_markers_for_the_platform_and_python():
    linux_311 = {"sys_platform": "linux", "platform_machine": "x86_64", "python_full_version": "3.11.7",
                 "python_version": "3.11", "implementation_name": "cpython", "os_name": "posix",
                 "platform_system": "Linux", "platform_release": "", "platform_version": "",
                 "platform_python_implementation": "CPython", "implementation_version": "3.11.7"}
    pins = rep.locked_versions(environment=linux_311)
    assert pins["numpy"] == "2.4.6" and pins["contourpy"] == "1.3.3" and pins["cupy-cuda13x"] == "14.2.0"
    assert "appnope" not in pins
    mac_312 = {**linux_311, "sys_platform": "darwin", "platform_machine": "arm64", "python_full_version": "3.12.3",
               "python_version": "3.12", "platform_system": "Darwin"}
    pins = rep.locked_versions(environment=mac_312)
    assert pins["contourpy"] == "1.4.0" and "cupy-cuda13x" not in pins and "appnope" in pins


def test_a_lessons_imports_are_read_from_its_code():
    code = ("%matplotlib inline\nimport numpy as np, torch.nn as nn\nfrom numba import cuda\n"
            "cupy = optional_import('cupy', 'the CuPy cells')\njax = importlib.import_module(\"jax\")\n"
            "from . import local\n!nvidia-smi\n")
    assert rep.imports_of(code) == {"numpy", "torch", "numba", "cupy", "jax"}  # not the relative import
    assert rep.imports_of("%%time\nimport triton\nx = optional_import('ray', 'Ray')") == {"triton", "ray"}
    lessons = rep.lesson_imports()
    assert "09-writing-kernels" in lessons["numba"] and "03-cupy" in lessons["cupy"]
