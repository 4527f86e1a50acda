import datetime

import pytest

from gpukit.core.stamp import NEEDS, lesson_stamp


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


@pytest.mark.parametrize(("needs", "device", "message"), [
    ("GPU", "cpu", "needs must be one of"), ("", "cpu", "needs must be one of"), (None, "cpu", "needs must be one of"),
    ("tpu", "cpu", "needs must be one of"), ("cpu", "tpu", "unknown device"),
])
def test_stamp_rejects_unknown_needs_and_devices(needs, device, message):
    with pytest.raises(ValueError, match=message):
        lesson_stamp(needs, device)


def test_the_notes_say_whose_run_the_page_shows_and_when_it_is_out_of_date(tmp_path):
    from booktools.gpu_runs import GpuRun, gpu_run_note, outdated_run_note

    manifest = {"date": "2026-11-26", "device": "cuda:0 (NVIDIA H100 80GB HBM3, 79.2 GiB)", "driver": "580.159.04",
                "cuda": "13.0", "stack": "cuda13", "commit": "ba075f4ff845",
                "versions": {"torch": "2.11.0+cu130", "jax": "0.11.2", "cupy-cuda13x": "14.2.0", "pandas": "3.1.1"}}
    run = GpuRun(tmp_path / "2026-11-26-h100-80gb-hbm3-cuda13", manifest)
    title, text = gpu_run_note(run)
    assert title == "Run on a GPU"
    for words in ("`cuda:0 (NVIDIA H100 80GB HBM3, 79.2 GiB)` on 2026-11-26", "NVIDIA driver 580.159.04",
                  "CUDA 13.0 (the book's cuda13 stack)", "PyTorch 2.11.0+cu130, JAX 0.11.2, CuPy 14.2.0",
                  "commit ba075f4ff845", "`data/gpu-runs/2026-11-26-h100-80gb-hbm3-cuda13`", "unchanged"):
        assert words in text, words
    assert "pandas" not in text and text.count("`") % 2 == 0
    title, text = outdated_run_note(run)
    assert title == "GPU run out of date" and "executed on the CPU" in text and "out of date" in text
    assert "2026-11-26" in text and "`data/gpu-runs/2026-11-26-h100-80gb-hbm3-cuda13`" in text
