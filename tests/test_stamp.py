import datetime

import pytest

from gpukit.stamp import NEEDS, lesson_stamp


def test_stamp_says_what_the_page_needs_and_where_it_ran():
    stamp = lesson_stamp("gpu", "cpu", today=datetime.date(2026, 11, 22))
    text = stamp.text()
    assert text.startswith("This page needs: one GPU")
    assert "2026-11-22 on cpu (" in text and "PyTorch 2." in text
    assert "**This page needs:**" in stamp._repr_markdown_()
    assert repr(stamp) == text


@pytest.mark.parametrize("needs", sorted(NEEDS))
def test_every_kind_of_need_has_words(needs):
    assert NEEDS[needs] in lesson_stamp(needs, "cpu").text()


@pytest.mark.parametrize("bad", ["GPU", "", None, "tpu"])
def test_stamp_rejects_unknown_needs(bad):
    with pytest.raises(ValueError, match="needs must be one of"):
        lesson_stamp(bad, "cpu")


def test_stamp_rejects_an_unknown_device():
    with pytest.raises(ValueError, match="unknown device"):
        lesson_stamp("cpu", "tpu")
