"""Launch-configuration arithmetic and the launch picture (gpukit.launch)."""

import matplotlib
import pytest

from gpukit.launch import SM_LIMITS, blocks_for, draw_launch, lanes_used, sm_fill, warps_per_block

matplotlib.use("Agg")


@pytest.mark.parametrize(("n", "threads", "blocks"), [(0, 256, 0), (1, 256, 1), (256, 256, 1), (257, 256, 2),
                                                     (1000, 256, 4), (1_000_003, 256, 3907)])
def test_the_grid_is_rounded_up(n, threads, blocks):
    assert blocks_for(n, threads) == blocks


def test_a_block_of_one_thread_takes_a_whole_warp():
    assert warps_per_block(1) == 1 and lanes_used(1) == 1 / 32
    assert warps_per_block(33) == 2 and lanes_used(64) == 1.0


def test_sm_fill_follows_the_published_limits():
    one = sm_fill(1, "8.0")
    assert (one.blocks, one.threads, one.limited_by) == (32, 32, "blocks") and one.share == 32 / 2048
    full = sm_fill(256, "9.0")
    assert (full.blocks, full.threads, full.share, full.limited_by) == (8, 2048, 1.0, "warps")
    assert sm_fill(1024, "8.6").blocks == 1  # 48 warps hold one block of 32 warps
    assert all(limits.threads == 32 * limits.warps for limits in SM_LIMITS.values())


@pytest.mark.parametrize(("call", "message"), [
    (lambda: blocks_for(-1, 32), "n must be"), (lambda: blocks_for(10, 0), "threads_per_block must be"),
    (lambda: sm_fill(2048), "at most 1024"), (lambda: sm_fill(32, "6.1"), "no SM limits"),
    (lambda: draw_launch(1000, 256), "too many boxes"),
])
def test_bad_arguments_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_picture_crosses_the_threads_past_the_end():
    ax = draw_launch(10, 4)
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("×") == 2 and "9" in texts and "block 2" in texts
    assert len(ax.patches) == 12
