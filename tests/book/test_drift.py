"""Early warning of drift: do the newest releases the pins allow still install together, on every platform?

requirements/*.txt pin the lesson set with ``==``; scripts/drift.py relaxes each pin to ``>=`` (Jupyter Book kept
at 1), and ``scripts/platforms.py --newest`` resolves that with uv, without the lock and without a date, for
Linux x86_64 and aarch64 and macOS on Apple silicon under Python 3.11, 3.12 and 3.13. Unlike
tests/book/test_platforms.py, these answers change when upstream releases: that is their point. A failure names the
stack, the platform, the Python and uv's account of the conflict. Where the registry cannot be reached, they skip
and say so. The scheduled workflow .github/workflows/drift.yml then runs the notebooks under those releases;
the rest of this file tests the relaxing and the workflow's summary on planted inputs.
"""

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from tests.support.booktoc import ROOT
from tests.support.resolutions import case_id, drift, platforms, resolve_each

NEWEST = platforms.newest_cases()


@pytest.fixture(scope="module")
def newest():
    return resolve_each(NEWEST, None)


@pytest.mark.parametrize("case", NEWEST, ids=lambda case: case_id(case, "newest-"))
def test_the_newest_releases_still_install_together(newest, case):
    stack, platform, python = case
    resolved = newest[case_id(case)]
    if isinstance(resolved, Exception):
        pytest.fail(f"Drift: {resolved}\nA reader who installs today's releases on {platform.name} with Python "
                    f"{python} meets this; the pins themselves are checked by tests/book/test_platforms.py.",
                    pytrace=False)
    print(platforms.describe_newest(stack, resolved))  # shown with -rP: what a reader gets today
    pinned = drift.pins(platforms.REQUIREMENTS / name for name in stack.files)
    assert {"torch", "numpy", "jax", "matplotlib"} <= resolved.keys()
    # Relaxed to >=: nothing may come out older than its pin (a sign the relaxing lost a line).
    older = {name: (pin, resolved[name]) for name, pin in pinned.items()
             if name in resolved and Version(resolved[name]) < Version(pin)}
    assert not older, f"resolved below the pins: {older}"
    majors = platforms.cuda_majors(resolved)
    if not platform.linux:
        assert majors == {}, f"CUDA packages on {platform.name}: {majors}"
        return
    assert len(set(majors.values())) == 1, \
        f"Drift: today's releases mix CUDA majors in {stack.name} on {platform.name} with Python {python}: {majors}"
    if stack.cuda:
        assert set(majors.values()) == {stack.cuda}, f"{stack.name} is no longer one CUDA {stack.cuda} stack: {majors}"


def test_the_drift_workflow_runs_a_python_that_gets_the_newest_jax(newest):
    """JAX 0.11 and later need Python 3.12: the book's lock (Python 3.11 and newer) holds JAX at 0.10.x, so the
    drift job must run on a Python whose newest JAX is the newest of all, or it would see nothing move."""
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "drift.yml").read_text(encoding="utf-8"))
    (setup,) = [step for job in workflow["jobs"].values() for step in job["steps"]
                if step.get("uses", "").startswith("actions/setup-python@")]
    drift_python = str(setup["with"]["python-version"])
    jax = {python: newest[case_id((platforms.NEWEST_STACKS[0], platforms.PLATFORMS[0], python))]
           for python in platforms.PYTHONS}
    jax = {python: Version(resolved["jax"]) for python, resolved in jax.items() if not isinstance(resolved, Exception)}
    assert drift_python in jax, f"the drift job's Python {drift_python} is not one the resolver was asked about"
    assert jax[drift_python] == max(jax.values()), jax


def test_a_set_that_no_longer_resolves_is_named_with_its_platform_and_conflict(newest, tmp_path):
    """The check's failure, planted: JAX 0.12 needs Python 3.12, so on 3.11 ``jax>=0.12.0.1`` cannot install."""
    planted = tmp_path / "planted.txt"
    planted.write_text("numpy==2.4.6\njax==0.12.0.1\n", encoding="utf-8")
    stack = platforms.Stack("planted", (str(planted),), cuda=None, linux_only=False, newest=True)
    with pytest.raises(platforms.ResolutionError) as raised:
        platforms.resolve(stack, platforms.PLATFORMS[0], "3.11", exclude_newer=None)
    message = str(raised.value)
    assert message.startswith("planted on linux-x86_64 with Python 3.11: the newest releases the pins allow no "
                              "longer install together:"), message
    assert "jax" in message and "3.12" in message  # uv's own account of the conflict follows


# The relaxing, on planted lines: extras, markers and local labels kept or dropped as pip would read them.
@pytest.mark.parametrize(("line", "relaxed"), [
    ("torch==2.13.0", "torch>=2.13.0"),
    ('triton==3.7.1; sys_platform == "linux"', 'triton>=3.7.1; sys_platform == "linux"'),
    ('jax[cuda13]==0.10.2; sys_platform == "linux"', 'jax[cuda13]>=0.10.2; sys_platform == "linux"'),
    ('torch==2.13.0+cu129; sys_platform == "linux"', 'torch>=2.13.0; sys_platform == "linux"'),
    ("jupyter-book==1.0.4.post1", "jupyter-book>=1.0.4.post1,<2"),  # a Jupyter Book 1 book
    ("Jupyter_Book==1.0.4", "Jupyter_Book>=1.0.4,<2"),
    ("numpy>=2", "numpy>=2"),  # pins nothing exactly: left alone
])
def test_relax_turns_exact_pins_into_lower_bounds(line, relaxed):
    assert drift.relax(line) == relaxed


# Lines PEP 508 and PEP 440 allow, which the regular expression the relaxing used before packaging misread:
# a space before the extras (the pin survived), a prefix match (relaxed to ``>=2.4.*``, which pip rejects), and
# a second specifier (read as part of the version).
@pytest.mark.parametrize(("line", "relaxed", "pinned"), [
    ('jax [cuda13] == 0.10.2 ; sys_platform == "linux"', 'jax[cuda13]>=0.10.2; sys_platform == "linux"',
     {"jax": "0.10.2"}),
    ("numpy==2.4.*", "numpy>=2.4", {}),
    ("numpy==2.4.6,<3", "numpy>=2.4.6,<3", {"numpy": "2.4.6"}),
])
def test_relax_reads_every_form_of_pin_as_pip_does(tmp_path, line, relaxed, pinned):
    assert drift.relax(line) == relaxed
    assert Requirement(drift.relax(line))  # pip can read it
    written = tmp_path / "pins.txt"
    written.write_text(line + "\n", encoding="utf-8")
    assert drift.pins([written]) == pinned


def test_a_release_is_compared_as_a_version_not_as_text():
    """2026.08.0 and 2026.8.0 are one release (PEP 440 normalisation); a local label does not move a pin."""
    assert drift.moved({"dask": "2026.08.0", "torch": "2.13.0"}, {"dask": "2026.8.0", "torch": "2.13.0+cu130"}) == {}
    assert drift.moved({"dask": "2026.8.0"}, {"dask": "2026.9.1"}) == {"dask": ("2026.8.0", "2026.9.1")}


def test_every_pin_of_the_lesson_set_is_relaxed():
    files = [platforms.REQUIREMENTS / name for name in ("lessons.txt", "book.txt", "cuda13.txt")]
    lines = drift.relaxed_lines(files)
    assert len(lines) == len(drift.requirement_lines(files))
    assert not [line for line in lines if "==" in line.split(";")[0]], "an exact pin survived"
    pinned = drift.pins(files)
    assert {platforms.distribution(line) for line in lines} == set(pinned)  # every line was a pin; none is lost
    for line in lines:  # each lower bound is the pin itself
        assert f">={pinned[platforms.distribution(line)]}" in line, line


def test_relax_writes_a_file_pip_can_read(tmp_path):
    out = tmp_path / "drift" / "newest.txt"
    assert drift.main(["relax", str(platforms.REQUIREMENTS / "book.txt"), "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8").splitlines()[0].startswith("jupyter-book>=")
    assert "<2" in out.read_text(encoding="utf-8")


# The workflow's summary, on a junit xml written as pytest writes nbval's results (colour codes included).
JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="1"
failures="1" skipped="0" tests="4"><testcase classname="notebooks.08-jax.ipynb" name="Cell 0" time="0.7" />
<testcase classname="notebooks.08-jax.ipynb" name="Cell 5" time="0.2"><failure message="Notebook cell execution
failed">#x1B[91mNotebook cell execution failed#x1B[0m
#x1B[94mCell 5: Cell execution caused an exception

Input:
#x1B[0mkey = jax.random.PRNGKey(0)
x = jax.random.normal(key, (3,))

#x1B[94mTraceback:#x1B[0m
#x1B[31m---------------------------------------------------------------------------#x1B[39m
#x1B[31mAttributeError#x1B[39m: module 'jax.random' has no attribute 'PRNGKey'
</failure></testcase>
<testcase classname="notebooks.03-cupy.ipynb" name="Cell 2" time="0.1"><error message="kernel died">Kernel died
DeadKernelError: Kernel died</error></testcase>
<testcase classname="notebooks.03-cupy.ipynb" name="Cell 3" time="0.1" /></testsuite></testsuites>
"""


def test_the_summary_names_each_broken_cell_its_code_and_its_error(tmp_path):
    junit = tmp_path / "notebooks.xml"
    junit.write_text(JUNIT, encoding="utf-8")
    ran, broken = drift.broken_cells(junit)
    assert ran == 4
    assert broken == [
        ("notebooks/08-jax.ipynb::Cell 5", "key = jax.random.PRNGKey(0)",
         "AttributeError: module 'jax.random' has no attribute 'PRNGKey'"),
        ("notebooks/03-cupy.ipynb::Cell 2", "", "DeadKernelError: Kernel died"),
    ]
    text = drift.summary(junit, [platforms.REQUIREMENTS / "lessons.txt"], {"notebooks under nbval": "failure"})
    assert "2 of 4 notebook cells broke" in text
    assert "| `notebooks/08-jax.ipynb::Cell 5` | `key = jax.random.PRNGKey(0)` |" in text
    assert "| notebooks under nbval | failure |" in text
    assert "#x1B" not in text and "\x1b" not in text


CLEAN_JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="0"
tests="2"><testcase classname="notebooks.00-environment-check.ipynb" name="Cell 0" time="0.7" />
<testcase classname="notebooks.00-environment-check.ipynb" name="Cell 1" time="0.2" /></testsuite></testsuites>
"""


def test_the_summary_of_a_clean_run_and_of_a_run_that_never_started(tmp_path):
    junit = tmp_path / "notebooks.xml"
    junit.write_text(CLEAN_JUNIT, encoding="utf-8")
    book = [platforms.REQUIREMENTS / "book.txt"]
    assert drift.broken_cells(junit) == (2, [])
    assert "All 2 notebook cells passed under nbval." in drift.summary(junit, book, {})
    assert "the notebooks did not run" in drift.summary(tmp_path / "absent.xml", book, {})


def test_the_summary_lists_what_is_installed_past_its_pin(tmp_path):
    pins = tmp_path / "pins.txt"
    pins.write_text(f"pytest==0.0.1\nyaml-not-installed==1.0\npyyaml=={yaml.__version__}\n", encoding="utf-8")
    text = drift.summary(None, [pins], {})
    assert "1 of 3 pinned libraries are installed at a newer release" in text
    assert f"| pytest | 0.0.1 | {pytest.__version__} |" in text
