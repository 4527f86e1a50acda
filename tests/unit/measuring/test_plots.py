import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from gpukit.measuring.plots import figure_html, overlay_reference_curves, plot_sweep  # noqa: E402
from gpukit.measuring.sweep import add_speedup  # noqa: E402

SWEEP = pd.DataFrame({"case": ["cpu", "gpu", "cpu", "gpu"], "n": [10, 10, 100, 100],
                      "median_s": [1e-4, 1e-3, 1e-2, 1e-3]})
OVER_CPU = add_speedup(SWEEP, "cpu")  # plots draw the speed-up they are given; the sweep computes it


def test_plot_sweep_draws_time_and_speedup_on_log_axes():
    fig = plot_sweep(OVER_CPU, baseline="cpu", title="t")
    time_ax, speed_ax = fig.axes
    assert time_ax.get_xscale() == time_ax.get_yscale() == "log"
    assert speed_ax.get_yscale() == "log"
    assert [line.get_label() for line in time_ax.get_lines()] == ["cpu", "gpu"]
    gpu_speedup = next(line for line in speed_ax.get_lines() if line.get_label() == "gpu").get_ydata()
    assert list(gpu_speedup) == pytest.approx([0.1, 10.0])
    plt.close(fig)


def test_plot_sweep_without_baseline_has_one_panel():
    fig = plot_sweep(SWEEP)
    assert len(fig.axes) == 1
    plt.close(fig)


def test_plot_sweep_leaves_matplotlib_interactive_setting_alone():
    before = matplotlib.is_interactive()
    plt.close(plot_sweep(OVER_CPU, baseline="cpu"))
    assert matplotlib.is_interactive() == before


def test_plot_sweep_rejects_bad_tables():
    with pytest.raises(ValueError, match="median_s"):
        plot_sweep(pd.DataFrame({"case": ["a"], "n": [1]}))
    with pytest.raises(TypeError, match="DataFrame"):
        plot_sweep([1, 2])
    with pytest.raises(ValueError, match="'tpu'"):
        plot_sweep(OVER_CPU, baseline="tpu")


def test_plot_sweep_draws_the_speedup_it_is_given_and_computes_none():
    """plots import nothing of sweep: a speed-up panel needs the table's speedup column, over that baseline."""
    with pytest.raises(ValueError, match=r"no speedup column.*add_speedup"):
        plot_sweep(SWEEP, baseline="cpu")
    with pytest.raises(ValueError, match=r"not over 'cpu'"):
        plot_sweep(add_speedup(SWEEP, "gpu"), baseline="cpu")
    planted = OVER_CPU.assign(speedup=[1.0, 7.0, 1.0, 3.0])  # drawn as given, not recomputed from the times
    fig = plot_sweep(planted, baseline="cpu")
    gpu = next(line for line in fig.axes[1].get_lines() if line.get_label() == "gpu")
    assert list(gpu.get_ydata()) == [7.0, 3.0]
    plt.close(fig)


def test_speedup_axis_labels_are_plain_numbers():
    import pandas as pd

    from gpukit.measuring.plots import plot_sweep

    rows = [{"case": "a", "n": n, "median_s": 1.0} for n in (1, 10, 100)]
    rows += [{"case": "b", "n": n, "median_s": t} for n, t in ((1, 100.0), (10, 1.0), (100, 0.01))]
    fig = plot_sweep(add_speedup(pd.DataFrame(rows), "a"), baseline="a")
    fig.canvas.draw()
    labels = [t.get_text() for t in fig.axes[1].get_yticklabels() if t.get_text()]
    assert {"0.01", "1", "100"} <= set(labels)
    assert not any("e" in label or "^" in label for label in labels), labels


def test_overlay_reference_curves_draws_any_number_of_files_dashed():

    refs = pd.DataFrame({"curve": ["cpu, a.json", "cpu, a.json", "gpu, b.json", "gpu, b.json", "cpu, b.json"],
                         "file": ["a.json", "a.json", "b.json", "b.json", "b.json"],
                         "device": ["cpu", "cpu", "cuda:0", "cuda:0", "cpu"],
                         "kind": ["cpu", "cpu", "cuda", "cuda", "cpu"],
                         "size": [10, 100, 10, 100, 100], "median_s": [1e-4, 1e-2, 1e-3, 1e-3, 2e-2]})
    fig = plot_sweep(OVER_CPU, baseline="cpu")
    assert overlay_reference_curves(fig, refs) == ["cpu, a.json", "gpu, b.json", "cpu, b.json"]
    dashed = [line for line in fig.axes[0].get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 3
    gpu_speedup = [line for line in fig.axes[1].get_lines() if "gpu, b.json" in line.get_label()]
    assert len(gpu_speedup) == 1 and list(gpu_speedup[0].get_ydata()) == pytest.approx([20.0])
    with pytest.raises(ValueError, match="median_s"):
        overlay_reference_curves(fig, refs.drop(columns="median_s"))
    plt.close(fig)


def test_plot_sweep_draws_noisy_points_apart_and_leaves_them_out_of_the_speedup():
    from gpukit.measuring.plots import NOISY

    rows = pd.DataFrame({"case": ["cpu"] * 4 + ["gpu"] * 4, "n": [10, 20, 40, 80] * 2,
                         "median_s": [1e-3, 2e-3, 4e-3, 8e-3, 1e-3, 5.0, 1e-3, 1e-3]})
    rows["flagged"] = (rows["case"] == "gpu") & (rows["n"] == 20)
    fig = plot_sweep(add_speedup(rows, "cpu"), baseline="cpu")
    time_ax, speed_ax = fig.axes
    gpu_time = next(line for line in time_ax.get_lines() if line.get_label() == "gpu")
    assert list(gpu_time.get_xdata()) == [10, 40, 80]  # the noisy point is not on the case's line
    noisy = next(line for line in time_ax.get_lines() if line.get_label() == NOISY)
    assert list(noisy.get_xdata()) == [20] and list(noisy.get_ydata()) == [5.0]
    gpu_speedup = next(line for line in speed_ax.get_lines() if line.get_label() == "gpu").get_ydata()
    assert gpu_speedup[0] == pytest.approx(1.0) and pd.isna(gpu_speedup[1])
    assert gpu_speedup[2] == pytest.approx(4.0)
    notes = [text.get_text() for text in speed_ax.get_legend().get_texts()]
    assert any("stayed noisy" in note and "gpu at n = 20" in note for note in notes)
    assert not speed_ax.texts  # the note is a legend entry, not a text drawn over the curves
    plt.close(fig)


def test_no_speedup_is_drawn_over_a_flagged_baseline():
    # Lesson 1's elementwise sweep on the H100 node (2026-11-26): the all-threads baseline took about 1e-2 s at
    # n = 256, between about 1e-5 s at the sizes either side, and stayed so after re-measuring; NumPy's
    # speed-up over it read 85x there, above the GPU's own.
    rows = pd.DataFrame({"case": ["CPU, all threads"] * 3 + ["NumPy"] * 3, "n": [64, 256, 1024] * 2,
                         "median_s": [1.2e-5, 1.0e-2, 1.6e-5, 4e-6, 1.2e-4, 8e-6]})
    rows["flagged"] = (rows["case"] == "CPU, all threads") & (rows["n"] == 256)
    fig = plot_sweep(add_speedup(rows, "CPU, all threads"), baseline="CPU, all threads")
    numpy_speedup = next(line for line in fig.axes[1].get_lines() if line.get_label() == "NumPy").get_ydata()
    assert numpy_speedup[0] == pytest.approx(3.0) and pd.isna(numpy_speedup[1])
    assert numpy_speedup[2] == pytest.approx(2.0)
    notes = [text.get_text() for text in fig.axes[1].get_legend().get_texts()]
    assert any("NumPy at n = 256" in note for note in notes)
    refs = pd.DataFrame({"curve": ["gpu"] * 2 + ["cpu"] * 2, "file": ["b.json"] * 4,
                         "device": ["cuda:0", "cuda:0", "cpu", "cpu"], "kind": ["cuda", "cuda", "cpu", "cpu"],
                         "size": [64, 1024] * 2, "median_s": [1e-5, 1e-5, 1e-5, 1e-4]})
    overlay_reference_curves(fig, refs)  # relabels this build's curves, never the note
    notes = [text.get_text() for text in fig.axes[1].get_legend().get_texts()]
    assert any(note.startswith("left out, timing stayed noisy: CPU, 1 thread") or
               note.startswith("left out, timing stayed noisy: NumPy") for note in notes), notes
    plt.close(fig)


def test_plot_sweep_without_noisy_points_adds_no_marker_or_note():
    from gpukit.measuring.plots import NOISY

    rows = OVER_CPU.assign(flagged=False)
    fig = plot_sweep(add_speedup(rows, "cpu"), baseline="cpu")
    assert NOISY not in [line.get_label() for line in fig.axes[0].get_lines()]
    legend = fig.axes[1].get_legend()
    assert not fig.axes[1].texts and (legend is None or not any("noisy" in t.get_text() for t in legend.get_texts()))
    plt.close(fig)


def test_figure_html_holds_the_png_inline_with_its_alt_text():
    """The benchmarks appendix shows lesson 13's figures through myst-nb's cross-page glue, which pastes HTML but
    only links a PNG to a file the appendix's page never wrote: the figure travels inside the HTML."""
    import base64
    import re

    fig = plot_sweep(OVER_CPU, baseline="cpu")
    shown = figure_html(fig, alt='speed-up of "gpu" over cpu & more')
    plt.close(fig)
    page = shown._repr_html_()
    found = re.fullmatch(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]*)" style="[^"]*">', page)
    assert found, page[:200]
    assert base64.b64decode(found.group(1)).startswith(b"\x89PNG\r\n\x1a\n")
    assert found.group(2) == "speed-up of &quot;gpu&quot; over cpu &amp; more"
    with pytest.raises(ValueError, match="alt text"):
        figure_html(fig, alt=" ")

