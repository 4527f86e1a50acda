"""Every platform the book promises installs its stack, with one CUDA major: asked of a real resolver (uv).

scripts/platforms.py resolves requirements/*.txt for Linux x86_64 and aarch64 and macOS 14 on Apple silicon,
under Python 3.11, 3.12 and 3.13, against the package registry (as of requirements/lock.txt's date, so that a
new release upstream cannot change the answer). Where the registry cannot be reached, these tests skip and
say so. PyTorch's own wheel index is out of reach from the machines the tests run on, so the CUDA 12 stack is
resolved without torch, and its torch pin is checked by name: it must be a CUDA 12 build (``+cu12x``).
"""

import re

import pytest

from tests.support.booktoc import ROOT
from tests.support.resolutions import case_id, drift, platforms, resolve_each, resolved_or_fail

CASES = platforms.cases()


@pytest.fixture(scope="module")
def resolutions():
    return resolve_each(CASES, platforms.lock_date())


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_each_stack_resolves_with_one_cuda_major(resolutions, case):
    stack, platform, _ = case
    resolved = resolved_or_fail(resolutions, case)
    assert {"torch", "numpy", "jax", "matplotlib"} <= resolved.keys() or stack.torch_from_pytorch_index
    majors = platforms.cuda_majors(resolved)
    if not platform.linux:
        # Apple silicon: no CUDA at all, and the Linux-only kernel libraries are left out by their markers.
        assert majors == {} and not {"numba-cuda", "triton"} & resolved.keys()
        return
    expected = stack.cuda or 13  # on Linux, PyPI's torch is a CUDA 13 build even in the CPU lessons' set
    wrong = {name: major for name, major in majors.items() if major != expected}
    assert not wrong, f"{stack.name} on {platform.name} mixes CUDA {expected} with: {wrong}"
    assert {"numba-cuda", "triton"} <= resolved.keys()
    if stack.cuda:  # the GPU additions are there, built for that CUDA
        assert {f"jax-cuda{stack.cuda}-plugin", f"cupy-cuda{stack.cuda}x", "cuda-toolkit"} <= resolved.keys()
        assert majors["cuda-toolkit"] == stack.cuda  # what numba-cuda's [cuNN] extra brings


@pytest.mark.parametrize("case", [case for case in CASES if case[0].installed_from], ids=case_id)
def test_requirements_txt_installs_its_stack_at_the_pins(resolutions, case):
    """The stack resolved from the file at the top (requirements.txt, as Binder and a hub image build install it),
    not from its lines: every pin of its files that applies on the platform comes in at the pinned version."""
    stack, platform, _ = case
    resolved = resolved_or_fail(resolutions, case)
    assert {"torch", "ipykernel", "jupyterlab", "jupyterlab-myst", "nbgitpuller"} <= resolved.keys()
    pinned = drift.pins(platforms.REQUIREMENTS / name for name in stack.files)
    absent = {name for name in pinned if name not in resolved}
    assert absent <= ({"numba-cuda", "triton"} if not platform.linux else set()), absent  # Linux-only markers
    wrong = {name: (pin, resolved[name]) for name, pin in pinned.items()
             if name in resolved and not drift.same_release(pin, resolved[name])}
    assert not wrong, f"requirements.txt installs other versions than the pins on {platform.name}: {wrong}"


def test_requirements_txt_is_gpukits_extras_within_the_lock():
    """One source of truth: requirements.txt adds no pin, it installs gpukit's extras (requirements/<extra>.txt)
    under the lock's constraints, with paths from the repository's root, where Binder runs it."""
    (stack,) = [stack for stack in platforms.STACKS if stack.installed_from]
    top = ROOT / stack.installed_from
    lines = [line.strip() for line in top.read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.strip().startswith("#")]
    assert lines[0] == f"-c {platforms.LOCK.relative_to(ROOT)}", lines
    editable = re.fullmatch(r"-e \.\[([a-z0-9,]+)\]", lines[1])
    assert editable and len(lines) == 2, lines
    assert [f"{extra}.txt" for extra in editable[1].split(",")] == list(stack.files)


def test_torch_is_the_cuda_build_each_stack_names():
    stacks = {stack.name: stack for stack in platforms.STACKS}
    lessons, cuda13, cuda12 = stacks["lessons"], stacks["cuda13"], stacks["cuda12"]
    lessons_torch = platforms.torch_pin(lessons).split(";")[0].strip()
    assert re.fullmatch(r"torch==\d+\.\d+\.\d+", lessons_torch), "the lessons take torch from PyPI, unlabelled"
    assert platforms.torch_pin(cuda13) == platforms.torch_pin(lessons)  # PyPI's Linux torch is the CUDA 13 build
    # PyTorch's index cannot be reached here: the CUDA 12 set was resolved without torch, so its pin is checked by
    # its local label, which names the CUDA build of PyTorch's wheel (cu129 = CUDA 12.9).
    cuda12_torch = platforms.torch_pin(cuda12).split(";")[0].strip()
    assert re.fullmatch(rf"{re.escape(lessons_torch)}\+cu12\d", cuda12_torch), cuda12_torch


def test_the_lock_holds_exactly_what_the_requirements_need():
    problem = platforms.registry_problem()
    if problem:
        pytest.skip(f"cannot ask the resolver: {problem}")
    problems = platforms.lock_problems()
    assert not problems, "\n".join(problems + [f"requirements/lock.txt is out of date: run {platforms.LOCK_COMMAND}"])


def test_the_lock_check_finds_a_stale_lock(tmp_path, monkeypatch):
    """The check on planted locks: one that lacks a package the requirements need, one with a version they
    exclude, one with an entry nothing needs."""
    if platforms.registry_problem():
        pytest.skip("cannot ask the resolver")
    real = platforms.LOCK.read_text(encoding="utf-8")
    stale = tmp_path / "lock.txt"
    monkeypatch.setattr(platforms, "LOCK", stale)
    # cloudpickle is only a dependency (of dask), so the lock alone pins it: dropped, it resolves unpinned
    stale.write_text(re.sub(r"(?m)^cloudpickle==.*\n", "", real), encoding="utf-8")
    assert any(p.startswith("cloudpickle==") and "lacks" in p for p in platforms.lock_problems())
    stale.write_text(re.sub(r"(?m)^numpy==\S+", "numpy==1.26.4", real), encoding="utf-8")
    assert any("do not resolve" in p for p in platforms.lock_problems())
    stale.write_text(real + "left-pad==1.0.0\n", encoding="utf-8")
    assert platforms.lock_problems() == ["left-pad==1.0.0 is in the lock but nothing needs it"]


def test_gpukits_extras_are_the_requirements_files():
    """pyproject.toml reads requirements/<extra>.txt into gpukit's extras; a file added or renamed must follow."""
    import importlib.metadata

    extras = importlib.metadata.metadata("gpukit").get_all("Provides-Extra")
    files = {path.stem for path in platforms.REQUIREMENTS.glob("*.txt") if path != platforms.LOCK}
    assert set(extras) == files
    named = {name for stack in platforms.STACKS for name in stack.files} | set(platforms.LOCKED_FILES)
    assert named <= {f"{stem}.txt" for stem in files}


# The checker itself, on planted resolutions: it must catch a second CUDA major, whatever names it hides under.
@pytest.mark.parametrize(("resolved", "expected"), [
    ({"nvidia-cudnn-cu13": "9.20.0.48", "cuda-toolkit": "13.0.3.0", "nvidia-cufft": "12.0.0.61"},
     {"nvidia-cudnn-cu13": 13, "cuda-toolkit": 13}),  # cuFFT numbers itself: 12.0 ships with CUDA 13
    ({"cupy-cuda12x": "14.2.0", "jax-cuda13-plugin": "0.10.2", "jax-cuda13-pjrt": "0.10.2"},
     {"cupy-cuda12x": 12, "jax-cuda13-plugin": 13, "jax-cuda13-pjrt": 13}),
    ({"nvidia-cuda-runtime": "13.0.96", "nvidia-cuda-runtime-cu12": "12.9.79", "cuda-bindings": "12.9.4"},
     {"nvidia-cuda-runtime": 13, "nvidia-cuda-runtime-cu12": 12, "cuda-bindings": 12}),
    ({"numpy": "2.4.6", "torch": "2.13.0", "nvidia-cudnn-cu12": "9.28.0.42"}, {"nvidia-cudnn-cu12": 12}),
])
def test_cuda_majors_are_read_from_names_and_toolkit_versions(resolved, expected):
    assert platforms.cuda_majors(resolved) == expected


def test_distribution_names_are_normalised_as_pip_does():
    assert platforms.distribution('cupy-cuda13x[ctk]==14.2.0; sys_platform == "linux"') == "cupy-cuda13x"
    assert platforms.distribution("Numba_CUDA==0.30.4") == "numba-cuda"


def test_only_exact_pins_are_read_from_a_requirements_text():
    """The lock and the resolver's answers are read as requirements (packaging), not split at the first ``==``:
    an unpinned line with a marker (``==`` inside the marker) is no pin, and a universal lock may pin one
    distribution twice, under two markers."""
    text = """foo ; sys_platform == "linux"
numpy==2.2.6 ; python_version < '3.12'
numpy==2.4.6 ; python_version >= '3.12'
    # via torch
Torch==2.13.0+cu129
-c requirements/lock.txt
"""
    assert platforms.pinned(text) == {("numpy", "2.2.6"), ("numpy", "2.4.6"), ("torch", "2.13.0+cu129")}
