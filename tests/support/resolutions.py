"""Each case of scripts/platforms.py (a stack, a platform, a Python) resolved once by uv, for
tests/book/test_platforms.py (the pins, as of the lock's date) and tests/book/test_drift.py (the newest releases
the pins allow), which import scripts/platforms.py and scripts/drift.py from here (scripts/ is not a package)."""

import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.booktoc import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import drift  # noqa: E402, F401  (scripts/ is not a package)
import platforms  # noqa: E402


def case_id(case, prefix: str = "") -> str:
    stack, platform, python = case
    return f"{prefix}{stack.name}-{platform.name}-py{python}"


def resolve_each(cases, exclude_newer: str | None, prefix: str = "") -> dict:
    """{case id: what the case resolves to, or its ResolutionError}, eight at a time (the resolver mostly waits on
    the registry); the calling test skips where the registry cannot be reached."""
    problem = platforms.registry_problem()
    if problem:
        pytest.skip(f"cannot ask the resolver: {problem}")
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = pool.map(lambda case: platforms.resolve_or_error(case, exclude_newer), cases)
        return dict(zip((case_id(case, prefix) for case in cases), results, strict=True))


def resolved_or_fail(resolutions: dict, case, prefix: str = "") -> dict:
    """The case's resolution; the test fails with the resolver's account where it did not resolve."""
    resolved = resolutions[case_id(case, prefix)]
    if isinstance(resolved, Exception):
        pytest.fail(str(resolved))
    return resolved
