"""Looking at a training run: a plot of how the loss fell.

The training loop itself belongs in the lesson, where the reader sees every step (forward pass, loss,
``backward``, optimiser step), and so does reading its first and last loss. What is left is the plot. Losses
may be a list of numbers (``loss.item()`` at each step), a list of one-element tensors, a NumPy array, or a
torch tensor on any device (a loop that keeps ``loss.detach()`` and stacks the results at the end never waits
for the GPU inside the loop, as ``loss.item()`` does).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .arrays import is_array, to_numpy

__all__ = ["plot_losses"]

DASHES = ("-", "--", ":", "-.")


def _as_curve(losses, name: str = "losses") -> np.ndarray:
    """One float per step, on the host: from an array of any library and device, or a sequence of numbers or
    of one-element arrays (a list of ``loss.detach()``)."""
    if is_array(losses):
        values = to_numpy(losses)
    else:
        values = [to_numpy(item).reshape(-1) if is_array(item) else item for item in losses]
        if any(is_array(v) and v.size != 1 for v in values):
            raise ValueError(f"{name} must hold one loss per step; an element has several values")
        values = [v.item() if is_array(v) else v for v in values]
    values = np.asarray(values, dtype=float)
    if values.ndim != 1:
        raise ValueError(f"{name} must be one loss per step (a 1-D sequence), not shape {values.shape}")
    if values.size < 2:
        raise ValueError(f"{name} needs at least two steps to show a trend, got {values.size}")
    if not np.isfinite(values).all():
        raise ValueError(f"{name} contains NaN or infinite values: the training diverged (try a smaller "
                         "learning rate)")
    return values


def plot_losses(curves: Mapping[str, object], *, title: str = "training loss", log: bool = True):
    """One line per run, loss against step, on a log scale by default. Returns the figure."""
    import matplotlib.pyplot as plt

    from .plots import LINE, style_axes

    if not isinstance(curves, Mapping) or not curves:
        raise ValueError(f"expected a non-empty dict of label -> losses, not {curves!r}")
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for i, (label, losses) in enumerate(curves.items()):
        values = _as_curve(losses, f"the losses of {label!r}")
        # Runs of the same computation on two devices overlap: a different dash keeps both visible.
        ax.plot(np.arange(1, values.size + 1), values, label=label, linestyle=DASHES[i % len(DASHES)], **LINE)
    if log:
        ax.set_yscale("log")
    ax.set(xlabel="step", ylabel="loss" + (" (log scale)" if log else ""), title=title)
    ax.legend(frameon=False)
    style_axes(ax)
    fig.tight_layout()
    return fig
