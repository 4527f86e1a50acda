import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from gpukit import training  # noqa: E402
from gpukit.training import LossSummary, loss_summary, plot_losses  # noqa: E402


def test_a_falling_loss_is_summarised():
    summary = loss_summary(torch.tensor([4.0, 2.0, 1.0, 0.5]))
    assert summary == LossSummary(first=4.0, last=0.5, steps=4)
    assert summary.fell and summary.factor == 8.0
    assert str(summary) == "loss 4 -> 0.5 over 4 steps: it fell by a factor of 8"


def test_a_loss_that_grew_says_so():
    summary = loss_summary([1.0, 3.0])
    assert not summary.fell and summary.factor == pytest.approx(1 / 3)
    assert "did NOT fall" in str(summary)


def test_a_loss_of_zero_has_an_infinite_factor():
    assert loss_summary([1.0, 0.0]).factor == float("inf")


def test_a_list_of_detached_losses_is_read_one_per_step():
    losses = [torch.tensor(3.0), torch.tensor(2.0), torch.tensor([1.0])]
    assert loss_summary(losses) == LossSummary(first=3.0, last=1.0, steps=3)


def test_losses_on_a_device_are_copied_to_the_host(monkeypatch):
    """A fake GPU tensor: the summary must go through gpukit.arrays.to_numpy, which copies off the device."""

    class FakeCudaLosses:
        __module__ = "torch"
        shape = (3,)
        dtype = torch.float32

    seen = []

    def fake_to_numpy(obj):
        seen.append(obj)
        return np.array([2.0, 1.0, 0.25], dtype=np.float32)

    monkeypatch.setattr(training, "to_numpy", fake_to_numpy)
    assert loss_summary(FakeCudaLosses()) == LossSummary(first=2.0, last=0.25, steps=3)
    assert len(seen) == 1


@pytest.mark.parametrize("bad, message", [
    ([1.0], "at least two steps"),
    (np.ones((2, 2)), "one loss per step"),
    ([torch.ones(2), torch.ones(2)], "several values"),
    ([1.0, float("nan")], "diverged"),
])
def test_unusable_losses_are_refused_with_a_reason(bad, message):
    with pytest.raises(ValueError, match=message):
        loss_summary(bad)


def test_plot_losses_draws_one_line_per_run_on_a_log_scale():
    fig = plot_losses({"cpu": [4.0, 2.0, 1.0], "cuda": torch.tensor([4.0, 1.0, 0.5])}, title="t")
    (ax,) = fig.axes
    assert ax.get_yscale() == "log" and ax.get_title() == "t"
    assert [line.get_label() for line in ax.get_lines()] == ["cpu", "cuda"]
    assert list(ax.get_lines()[1].get_xdata()) == [1, 2, 3]
    assert [line.get_linestyle() for line in ax.get_lines()] == ["-", "--"]
    plt.close(fig)


def test_plot_losses_linear_scale_and_bad_input():
    fig = plot_losses({"run": [2.0, 1.0]}, log=False)
    assert fig.axes[0].get_yscale() == "linear"
    plt.close(fig)
    with pytest.raises(ValueError, match="non-empty dict"):
        plot_losses({})
    with pytest.raises(ValueError, match="'bad'"):
        plot_losses({"bad": [1.0]})
