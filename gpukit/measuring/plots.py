"""Plots the lessons share, styled alike: timings against problem size on log axes, with curves measured elsewhere
beside them, and how a training run's loss fell. A plot draws the table it is given: what it shows (a speed-up, the
sizes that stayed noisy) is computed before, by :mod:`gpukit.measuring.sweep`, which imports this module."""

from __future__ import annotations

import base64
import html
import io
import textwrap
from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import LogFormatter

from gpukit.core.arrays import is_array, to_numpy

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


NOISY = "stayed noisy after re-measuring (not a result)"
LEFT_OUT = "left out, timing stayed noisy: "  # the speed-up panel's note of the sizes it leaves out
NOISY_STYLE = {"linestyle": "none", "marker": "X", "markersize": 9, "color": "tab:red", "zorder": 3}


def plot_sweep(results: pd.DataFrame, *, baseline: str | None = None, xlabel: str = "problem size n",
               title: str | None = None):
    """Time per call against ``n`` for each case (log-log) and, given ``baseline``, the speed-up over it.

    Draws the table it is given and computes nothing: ``results`` is a table from
    :func:`gpukit.measuring.sweep.size_sweep`, with, when ``baseline`` is given, the ``speedup`` column over that
    case that :func:`gpukit.measuring.sweep.add_speedup` adds. Points the sweep left ``flagged`` (still noisy after
    re-measuring) are not joined to their case's line: they are drawn apart, as red crosses, on the time panel,
    and left out of the speed-up panel (with a note naming them), as is every case's point at a size where the
    baseline was flagged, since a disturbed timing makes a speed-up that means nothing. Returns the figure.
    """
    _check_columns(results, {"case", "n", "median_s"})
    if baseline is not None:
        cases = list(dict.fromkeys(results["case"]))
        if baseline not in cases:
            raise ValueError(f"baseline {baseline!r} is not one of the cases {cases}")
        if "speedup" not in results:
            raise ValueError(f"the table has no speedup column: add the speed-up over {baseline!r} first, with "
                             "gpukit.measuring.sweep.add_speedup(results, baseline)")
        own = results.loc[results["case"] == baseline, "speedup"].dropna()
        if not np.allclose(own, 1.0):
            raise ValueError(f"the speedup column is not over {baseline!r}: that case's own speed-up is "
                             f"{sorted(set(own.round(3)))}, not 1")
    flagged = results["flagged"].astype(bool) if "flagged" in results else pd.Series(False, index=results.index)
    noisy_baseline = {int(n) for n in results["n"][(results["case"] == baseline) & flagged]}
    fig, axes = plt.subplots(1, 2 if baseline else 1, squeeze=False,
                             figsize=FIGSIZE if baseline else (FIGSIZE[0] / 2, FIGSIZE[1]))
    axes = axes[0]
    left_out = []
    for i, (name, group) in enumerate(results.groupby("case", sort=False)):
        group = group.sort_values("n")
        marker = MARKERS[i % len(MARKERS)]
        noisy = flagged[group.index]
        axes[0].plot(group["n"][~noisy], group["median_s"][~noisy], marker=marker, label=name, **LINE)
        if baseline:
            unreliable = {int(n) for n in group["n"][noisy]} | noisy_baseline
            speedup = group["speedup"].where(~group["n"].isin(unreliable))
            axes[1].plot(group["n"], speedup, marker=marker, label=name, **LINE)
            if name != baseline:
                left_out += [f"{name} at n = {n}" for n in sorted(unreliable)]
    if flagged.any():
        axes[0].plot(results["n"][flagged], results["median_s"][flagged], label=NOISY, **NOISY_STYLE)
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
        if left_out:
            # An entry of the panel's legend, not a text on the axes, where it covered curves and tick labels.
            note = LEFT_OUT + "; ".join(left_out)
            axes[1].plot([], [], linestyle="none", label=textwrap.fill(note, 48, subsequent_indent="  "))
            axes[1].legend(frameon=False, fontsize="small")
    for ax in axes:
        style_axes(ax)
        # Sizes read better as 20, 50, 100 than as 2x10^1: plain labels, on minor ticks only where the axis spans
        # few decades (where matplotlib's would crowd as 2x10^1 3x10^1 4x10^1).
        ax.xaxis.set_major_formatter(PlainLogFormatter())
        ax.xaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.4)))
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


REFERENCE_LINE = {"linewidth": 1.4, "markersize": 4, "linestyle": "--", "alpha": 0.85}
THIS_BUILD = "this build: "


def _short_name(device_name: str) -> str:
    """``"cuda:0 (NVIDIA H100 80GB HBM3, 79.18 GiB)"`` -> ``"cuda:0 (NVIDIA H100 80GB HBM3)"``."""
    head, comma, _ = device_name.partition(",")
    return head + ")" if comma and head.count("(") == head.count(")") + 1 else device_name


def _reference_label(group: pd.DataFrame, curve: str) -> str:
    """A curve's label: its device, shortened, and the date of its file (the note under the figure names the
    files); the whole ``curve`` where the table lacks those columns."""
    if {"device_name", "date"} <= set(group.columns):
        return f"{_short_name(group['device_name'].iloc[0])}, {group['date'].iloc[0]}"
    return curve


def overlay_reference_curves(fig, references: pd.DataFrame, *, note: bool = True) -> list[str]:
    """Draw reference curves measured elsewhere (files in ``data/benchmarks/``) on a figure of this build's run.

    ``fig`` comes from :func:`plot_sweep`; ``references`` from
    :func:`gpukit.measuring.benchmark_records.reference_curves`
    (columns ``curve``, ``file``, ``device``, ``kind``, ``size``, ``median_s``, and ``device_name`` and ``date``
    for short labels), any number of files and devices. Each curve is drawn dashed on the time panel, labelled
    with its device and date; where the figure has a speed-up panel, each GPU curve is also drawn there as its
    speed-up over the CPU of its own file at the same size, with a legend. This build's curves are relabelled
    ``this build: ...`` and, with ``note``, a line under the figure says which curves were measured where and
    names the files. Returns the ``curve`` of each curve drawn.
    """
    _check_columns(references, {"curve", "file", "device", "kind", "size", "median_s"})
    time_ax = fig.axes[0]
    speed_ax = fig.axes[1] if len(fig.axes) > 1 else None
    for ax in fig.axes:
        for line in ax.get_lines():
            label = line.get_label()
            if not label.startswith(("_", THIS_BUILD, LEFT_OUT)):
                line.set_label(THIS_BUILD + label)
    drawn, on_speed_ax = [], False
    colours = plt.get_cmap("tab10")
    for i, (curve, group) in enumerate(references.groupby("curve", sort=False)):
        group = group.sort_values("size")
        style = {**REFERENCE_LINE, "color": colours((i + 5) % 10), "marker": MARKERS[(i + 3) % len(MARKERS)]}
        short = _reference_label(group, curve)
        label = textwrap.fill(f"measured elsewhere: {short}", 48, subsequent_indent="  ")
        time_ax.plot(group["size"], group["median_s"], label=label, **style)
        drawn.append(curve)
        if speed_ax is not None and (group["kind"] != "cpu").all():
            cpu = references[(references["file"] == group["file"].iloc[0]) & (references["kind"] == "cpu")]
            twin = group.merge(cpu[["size", "median_s"]], on="size", suffixes=("", "_cpu"))
            if not twin.empty:
                speed_ax.plot(twin["size"], twin["median_s_cpu"] / twin["median_s"],
                              label=textwrap.fill(f"measured elsewhere: {short}, over its own machine's CPU", 48,
                                                  subsequent_indent="  "), **style)
                on_speed_ax = True
    time_ax.legend(frameon=False, fontsize="small")
    if speed_ax is not None and (on_speed_ax or speed_ax.get_legend() is not None):
        speed_ax.legend(frameon=False, fontsize="small")
    if note:
        files = ", ".join(dict.fromkeys(references["file"]))
        text = ("Solid lines: measured in this build, on this page. Dashed lines: measured elsewhere by python -m "
                f"booktools bench, read from data/benchmarks/ ({files})." if drawn else
                "No reference files in data/benchmarks/ record this measurement: only this build's curves are shown.")
        fig.text(0.01, 0.0, textwrap.fill(text, 150, break_on_hyphens=False, break_long_words=False),
                 fontsize="small", va="top")
    return drawn


def figure_html(fig, alt: str, *, dpi: int = 100):
    """``fig`` as an IPython ``HTML`` object holding the PNG inline (a ``data:`` URI) with ``alt`` as its text.

    For a figure glued on one page and shown on another: myst-nb pastes a glued output into another document
    (``{glue:any}`` with ``:doc:``) as raw HTML, but a glued PNG only as a link to an image file that the other page
    may never have written; an inline image needs no file. ``alt`` says what the figure shows, for a reader who
    cannot see it."""
    from IPython.display import HTML

    if not isinstance(alt, str) or not alt.strip():
        raise ValueError("a figure on a page needs alt text that says what it shows")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return HTML(f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt, quote=True)}" '
                'style="max-width: 100%; height: auto;">')


# ------------------------------------------------------------------ a training run's loss
# The training loop itself belongs in the lesson, where the reader sees every step (forward pass, loss,
# ``backward``, optimiser step), and so does reading its first and last loss. What is left is the plot. Losses
# may be a list of numbers (``loss.item()`` at each step), a list of one-element tensors, a NumPy array, or a
# torch tensor on any device (a loop that keeps ``loss.detach()`` and stacks the results at the end never waits
# for the GPU inside the loop, as ``loss.item()`` does).
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
