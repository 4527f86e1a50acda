"""The GPU tests pass on a machine that has what a GPU node has: the CPU's proof of what gpu.yml runs on a GPU.

The first H100 run failed 11 tests that had assumed the machine has no GPU, while every CPU run passed them. Here
the GPU tests (booktools.gpu_check.GPU_TESTS, the one list that `make gpu-check` and so gpu.yml run) run in a
child
pytest under tests/support/gpu_node: an nvidia-smi that answers as the H100 node's did, torch reporting its GPU and
NCCL,
JAX a gpu backend, numba-cuda a GPU, CuPy installed (its interface on NumPy) and CXX set. Each test must force what
it tests; a test that needs real GPU work skips here, since torch's tensors cannot go to the simulated GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

from booktools.gpu_check import GPU_TESTS
from tests.support.booktoc import ROOT
from tests.support.gpu_node import gpu_node_env

# GPU tests whose work reads nothing the simulated node changes, so that here they would repeat the main run's work
# exactly; a real GPU node still runs them (gpu-check). Compiling the CUDA extension sources against PyTorch's
# headers calls nvcc on fixed sources with torch's include paths (neither asks torch for a device) and costs 39
# core-seconds, a third of this test.
SAME_ON_THE_SIMULATED_NODE = (
    "tests/unit/topics/test_extensions.py::test_the_cuda_extension_sources_compile_against_pytorchs_headers",
)


def test_the_gpu_tests_pass_on_a_simulated_gpu_node(tmp_path):
    junit = tmp_path / "junit.xml"
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    env.update(gpu_node_env(env))
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider",
                           f"--junitxml={junit}", *GPU_TESTS,
                           *(f"--deselect={test}" for test in SAME_ON_THE_SIMULATED_NODE)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    failed = [f"{case.get('classname')}::{case.get('name')}" for case in cases
              if case.find("failure") is not None or case.find("error") is not None]
    assert done.returncode == 0 and not failed, (
        f"on the simulated GPU node {len(failed)} of {len(cases)} GPU tests failed: {failed}\n{done.stdout[-6000:]}")
    # The node was really simulated: the tests that need real CUDA work saw torch report a GPU it cannot use.
    skips = [case.find("skipped").get("message", "") for case in cases if case.find("skipped") is not None]
    assert any("torch reports a CUDA GPU but cannot make a tensor on it" in skip for skip in skips), skips
    assert len(cases) > 250, f"only {len(cases)} tests ran"
    # Each test left out was found (a renamed one would run here again, or be lost from the GPU node's list).
    assert f"{len(SAME_ON_THE_SIMULATED_NODE)} deselected" in done.stdout, done.stdout[-2000:]
