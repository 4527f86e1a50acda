"""Plots the lessons share, styled alike: timings against problem size on log axes, and fractions of peak."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import LogFormatter

# Styling is applied to each figure rather than through ``plt.rc_context``: leaving an rc_context restores
# ``rcParams["interactive"]`` too, which stops Jupyter's inline backend from showing later figures.
FIGSIZE = (10, 4)
LINE = {"linewidth": 1.8, "markersize": 5}
MARKERS = "osD^vP*X"


class PlainLogFormatter(LogFormatter):
    """Log-axis labels as plain numbers (0.5, 1, 20), on the ticks matplotlib would label anyway."""

    def __call__(self, value, pos=None):
        return f"{value:g}" if super().__call__(value, pos) else ""


def style_axes(ax) -> None:
    """The book's look: a light grid, no top or right frame."""
    ax.grid(True, alpha=0.3, which="major")
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)


def _check_columns(results: pd.DataFrame, needed: set[str]) -> None:
    if not isinstance(results, pd.DataFrame):
        raise TypeError(f"expected a pandas DataFrame from size_sweep, not {type(results).__name__}")
    missing = needed - set(results.columns)
    if missing:
        raise ValueError(f"the table lacks the columns {sorted(missing)}; it has {list(results.columns)}")


def plot_sweep(results: pd.DataFrame, *, baseline: str | None = None, xlabel: str = "problem size n",
               title: str | None = None):
    """Time per call against ``n`` for each case (log-log) and, given ``baseline``, the speed-up over it.

    ``results`` is a table from :func:`gpukit.sweep.size_sweep` (with ``speedup`` added by
    :func:`gpukit.sweep.add_speedup` when ``baseline`` is given). Returns the figure.
    """
    from .sweep import add_speedup

    _check_columns(results, {"case", "n", "median_s"})
    if baseline is not None:
        results = add_speedup(results, baseline)
    fig, axes = plt.subplots(1, 2 if baseline else 1, squeeze=False,
                             figsize=FIGSIZE if baseline else (FIGSIZE[0] / 2, FIGSIZE[1]))
    axes = axes[0]
    for i, (name, group) in enumerate(results.groupby("case", sort=False)):
        group = group.sort_values("n")
        marker = MARKERS[i % len(MARKERS)]
        axes[0].plot(group["n"], group["median_s"], marker=marker, label=name, **LINE)
        if baseline:
            axes[1].plot(group["n"], group["speedup"], marker=marker, label=name, **LINE)
    axes[0].set(xscale="log", yscale="log", xlabel=xlabel, ylabel="median time per call (s)",
                title="time (lower is faster)")
    axes[0].legend(frameon=False)
    if baseline:
        axes[1].axhline(1, color="grey", linestyle="--", linewidth=1)
        axes[1].set(xscale="log", yscale="log", xlabel=xlabel, ylabel=f"speed-up over {baseline}",
                    title="speed-up (above the dashed line: faster)")
        # Speed-ups read better as 0.5, 1, 2 than as 5x10^-1, 10^0, 2x10^0. Minor ticks are labelled only
        # when the axis spans few decades, as matplotlib would.
        axes[1].yaxis.set_major_formatter(PlainLogFormatter())
        axes[1].yaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    for ax in axes:
        style_axes(ax)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_fraction_of_peak(fractions: dict[str, float | None], *, title: str = "fraction of peak achieved"):
    """Horizontal bars, one per measurement, of the fraction of the hardware's peak (unknown peaks omitted)."""
    if not isinstance(fractions, dict) or not fractions:
        raise ValueError(f"expected a non-empty dict of label -> fraction, not {fractions!r}")
    known = {label: value for label, value in fractions.items() if value is not None}
    for label, value in known.items():
        if not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"fraction for {label!r} must be a number >= 0, not {value!r}")
    fig, ax = plt.subplots(figsize=(8, 1 + 0.5 * max(len(known), 1)))
    ax.barh(list(known), list(known.values()), color="tab:blue")
    ax.axvline(1, color="grey", linestyle="--", linewidth=1)
    ax.set(xlim=(0, max([1.05, *known.values()])), xlabel="fraction of peak (1 = peak)", title=title)
    ax.invert_yaxis()
    style_axes(ax)
    fig.tight_layout()
    return fig
