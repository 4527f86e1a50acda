"""The wheelhouse: ``make wheelhouse`` (scripts/wheelhouse.py) gathers, where there is network, what ``make
gpu-check WHEELHOUSE=DIR`` installs on a GPU node without it (booktools/node_packages.py).

The last test is the whole path on this machine: a wheelhouse made by the make target, a Python like a GPU node's
(torch, matplotlib and pandas, a NumPy other than the book's, no Jupyter, no pytest, no pip:
tests/support/node_python.py) on the simulated H100 node (tests/support/gpu_node), and gpu-check run from it in a
network namespace that has only loopback: it installs from the wheelhouse, probes, runs the preflight and two
lessons, and keeps them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from booktools import node_packages
from gpukit.topics.distributed import loopback_namespace
from tests.support.booktoc import ROOT
from tests.support.gpu_node import gpu_node_env
from tests.support.node_python import NODE_NUMPY, make_node_python, site_packages

sys.path.insert(0, str(ROOT / "scripts"))
import wheelhouse  # noqa: E402  (scripts/ is not a package)

LOCK = wheelhouse.for_target(wheelhouse.lock_entries(wheelhouse.LOCK.read_text(encoding="utf-8")),
                             wheelhouse.marker_environment("linux-x86_64", "3.12"))


def test_the_manifests_schema_and_name_are_the_same_on_both_sides():
    assert (wheelhouse.SCHEMA, wheelhouse.MANIFEST) == (node_packages.WHEELHOUSE_SCHEMA,
                                                        node_packages.WHEELHOUSE_MANIFEST)


@pytest.mark.parametrize("platform", sorted(wheelhouse.PLATFORMS))
@pytest.mark.parametrize("python", wheelhouse.PYTHONS)
def test_each_target_gets_what_a_lesson_and_the_tests_need_at_the_locks_versions_and_no_gpu_library(platform, python):
    packages = wheelhouse.for_target(wheelhouse.lock_entries(wheelhouse.LOCK.read_text(encoding="utf-8")),
                                     wheelhouse.marker_environment(platform, python))
    pins = wheelhouse.wheel_set(packages)
    for name in ("nbclient", "ipykernel", "jupyter-client", "pyzmq", "pytest", "pyyaml", "setuptools", "tqdm"):
        assert pins[name] == packages[name]["version"], name
    assert pins["numpy"] == packages["numpy"]["version"] == "2.4.6"  # the book's pin, which the node gets
    assert not set(pins) & {*wheelhouse.GPU_LIBRARIES, *wheelhouse.LEFT_OUT, "matplotlib", "pandas"}
    assert {"matplotlib", "pandas", "pillow"} <= set(wheelhouse.wheel_set(packages, ["matplotlib", "pandas"]))
    # Every package of the set has what it needs (the lock's graph) in the set, or it is the node's own.
    node = wheelhouse.closure(wheelhouse.GPU_LIBRARIES, packages)
    for name in pins:
        needs = [n for n, e in packages.items() if name in {canonicalize_name(v) for v in e["via"]}]
        assert set(needs) <= set(pins) | node | set(wheelhouse.LEFT_OUT), (name, set(needs) - set(pins) - node)


def test_the_lock_is_read_with_its_markers_and_its_graph():
    entries = wheelhouse.lock_entries("numpy==2.4.6\n    # via\n    #   -r requirements/lessons.txt\n    #   pandas\n"
                                      "contourpy==1.3.3 ; python_full_version < '3.12'\n    # via matplotlib\n"
                                      "contourpy==1.4.0 ; python_full_version >= '3.12'\n    # via matplotlib\n"
                                      "pandas==3.1.1\n    # via -r requirements/lessons.txt\n")
    for python, contourpy in (("3.11", "1.3.3"), ("3.12", "1.4.0")):
        chosen = wheelhouse.for_target(entries, wheelhouse.marker_environment("linux-aarch64", python))
        assert chosen["contourpy"]["version"] == contourpy
    chosen = wheelhouse.for_target(entries, wheelhouse.marker_environment("linux-x86_64", "3.12"))
    assert wheelhouse.closure(["pandas"], chosen) == {"pandas", "numpy"}
    assert wheelhouse.closure(["numpy"], chosen) == {"numpy"}


def manifest(**changes):
    found = {"schema": node_packages.WHEELHOUSE_SCHEMA, "platform": node_packages.this_platform(),
             "python": node_packages.this_python(), "needed": ["nbclient", "numpy", "tqdm"],
             "usually_on_the_node": ["matplotlib"], "pinned_on_the_node": ["numpy"],
             "wheels": [{"file": f"{n}-{v}-py3-none-any.whl", "name": n, "version": v, "bytes": 1}
                        for n, v in (("nbclient", "0.11.0"), ("numpy", "2.4.6"), ("tqdm", "4.70.1"),
                                     ("pip", "23.2.1"))]}
    return found | changes


def test_the_node_gets_what_it_lacks_and_the_books_numpy_and_keeps_the_rest_of_its_own():
    install, shadowed, lacking = node_packages.choose(manifest(), {"numpy": "2.5.2", "tqdm": "4.60.0"})
    assert [w["name"] for w in install] == ["nbclient", "numpy"]  # pip installs, it is not installed
    assert shadowed == [("numpy", "2.5.2", "2.4.6")] and lacking == ["matplotlib"]
    install, shadowed, lacking = node_packages.choose(manifest(), {"numpy": "2.4.6", "nbclient": "0.10.0",
                                                                   "tqdm": "4.70.1", "matplotlib": "3.9.0"})
    assert install == [] and shadowed == [] and lacking == []
    lines = node_packages.NodePackages("/w", "/f", ["numpy 2.4.6"], [("numpy", "2.5.2", "2.4.6")],
                                       ["matplotlib", "pandas"]).lines()
    assert lines[1] == "shadowed the node's numpy 2.5.2 with the book's 2.4.6"
    assert "lacks matplotlib, pandas" in lines[2] and 'WHEEL_WITH="matplotlib pandas"' in lines[2]


def test_a_wheelhouse_for_another_python_or_machine_is_refused_with_the_command_that_makes_the_right_one(tmp_path):
    with pytest.raises(node_packages.WheelhouseError, match="is not a wheelhouse"):
        node_packages.read_wheelhouse(tmp_path)
    (tmp_path / node_packages.WHEELHOUSE_MANIFEST).write_text(json.dumps(manifest(python="3.9")))
    with pytest.raises(node_packages.WheelhouseError, match=f"WHEEL_PYTHON={node_packages.this_python()}"):
        node_packages.read_wheelhouse(tmp_path)
    (tmp_path / node_packages.WHEELHOUSE_MANIFEST).write_text(json.dumps(manifest()))
    with pytest.raises(node_packages.WheelhouseError, match="lacks 4 of the wheels"):
        node_packages.read_wheelhouse(tmp_path)


def test_pip_runs_from_its_wheel_with_no_index_and_none_of_the_nodes_settings():
    env = node_packages.pip_environment({"PIP_INDEX_URL": "http://mirror", "PYTHONPATH": "/x", "HOME": "/h"})
    assert env["PIP_CONFIG_FILE"] == os.devnull and env["PIP_NO_INDEX"] == "1"
    assert "PIP_INDEX_URL" not in env and "PYTHONPATH" not in env and env["HOME"] == "/h"
    command = node_packages.install_command("/py", Path("/w"), manifest(), manifest()["wheels"][:1], Path("/t"))
    assert command[:3] == ["/py", "/w/pip-23.2.1-py3-none-any.whl/pip", "install"]
    assert {"--no-index", "--no-deps", "--target"} <= set(command)
    assert command[-1].endswith("nbclient-0.11.0-py3-none-any.whl")


def test_on_a_gpu_node_without_network_gpu_check_installs_from_the_wheelhouse_and_keeps_two_lessons(tmp_path):
    prefix, why = loopback_namespace()
    if prefix is None:
        pytest.skip(f"no loopback-only network namespace here: {why}")
    numpy_wheels = tmp_path / "node-numpy"
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--disable-pip-version-check", "--dest", str(numpy_wheels), f"numpy=={NODE_NUMPY}"], check=True)
    node = tmp_path / "node"
    python = make_node_python(node, next(numpy_wheels.glob("*.whl")))
    before = sorted(p.name for p in site_packages(node).iterdir())
    lacks = subprocess.run([python, "-c", "import nbclient"], capture_output=True, text=True)
    assert "No module named 'nbclient'" in lacks.stderr  # the node cannot run a notebook by itself

    house = tmp_path / "wheel house"
    made = subprocess.run(["make", "--no-print-directory", "wheelhouse", f"WHEELHOUSE={house}",
                           f"WHEEL_PYTHON={node_packages.this_python()}"], cwd=ROOT, capture_output=True, text=True)
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    size = sum(p.stat().st_size for p in house.glob("*.whl")) / 1e6
    assert size <= wheelhouse.MAX_MB, size

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PIP_", "VIRTUAL_ENV"))}
    env.update(gpu_node_env(env))
    env["GPUKIT_GPU_CHECK_DIR"] = str(tmp_path / "checks")
    env["PATH"] = os.pathsep.join([str(node / "bin"), env["PATH"]])
    runs, out = tmp_path / "runs", tmp_path / "check"
    done = subprocess.run([*prefix, str(python), "-m", "booktools", "gpu-check", "--wheelhouse", str(house),
                           "--lessons", "10", "11", "--no-tests", "--no-bench", "--save-run", str(runs),
                           "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    report = (out / "report.md").read_text(encoding="utf-8") if (out / "report.md").exists() else done.stdout
    assert f"shadowed the node's numpy {NODE_NUMPY} with the book's 2.4.6" in report, report[-3000:]
    facts = json.loads((out / "environment.json").read_text())
    assert facts["gpu_name"] == "NVIDIA H100 80GB HBM3" and facts["versions"]["numpy"] == "2.4.6"
    assert facts["versions"]["nbclient"] == wheelhouse.wheel_set(LOCK)["nbclient"]
    record = json.loads((out / "gpu-check.json").read_text())
    assert [r["name"] for r in record["results"]][0] == "preflight" and record["results"][0]["items"]
    (kept,) = runs.iterdir()
    lessons = json.loads((kept / "manifest.json").read_text())["lessons"]
    assert sorted(lessons) == ["10-multi-gpu", "11-slurm"], report[-3000:]
    assert report.splitlines()[2].startswith("Kept 2 lesson(s) as a GPU run")
    # The node's own packages are as they were; the run's came from a folder of its own.
    assert sorted(p.name for p in site_packages(node).iterdir()) == before
    assert facts["node_packages"]["folder"].startswith(str(tmp_path / "checks"))
    shutil.rmtree(node)
