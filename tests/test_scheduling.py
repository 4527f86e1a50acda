"""How pytest-xdist hands out the tests (conftest.py): a file at a time, except the files spread test by test."""

import pytest

import conftest


@pytest.mark.skipif(conftest.LoadScopeScheduling is None, reason="pytest-xdist is not installed")
def test_a_file_is_one_unit_except_the_spread_ones():
    scope = conftest.ByFileButSpreadingSome._split_scope
    assert scope(None, "notebooks/01-cpu-vs-gpu.ipynb::Cell 3") == "notebooks/01-cpu-vs-gpu.ipynb"
    assert scope(None, "tests/test_site.py::test_page[notebooks/01-cpu-vs-gpu]") == "tests/test_site.py"
    spread = "tests/test_thin_kernel.py::test_notebook_runs_to_the_end_without_the_optional_libraries[00.ipynb]"
    assert scope(None, spread) == spread

