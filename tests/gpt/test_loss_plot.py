"""The live loss plot of chapter 13 keeps the run's numbers, draws without a notebook, and
prints a summary without times."""

from __future__ import annotations

import pytest

from llmfs.gpt.errors import ConfigError
from llmfs.gpt.loss_plot import LiveLossPlot


def test_the_plot_keeps_every_step_and_measurement_and_summarises_them() -> None:
    plot = LiveLossPlot(4, {"unigram": 5.6, "uniform": 6.6}, draw_every=2, first=10)
    for step, loss in zip(range(10, 14), (6.0, 5.0, 4.0, 3.0), strict=True):
        plot.step(step, loss)
    plot.validation(12, 4.5)
    plot.validation(14, 3.5)
    assert plot.done == 4 and plot.losses[0] == (11, 6.0)
    assert plot.time_left() == ""  # finished: no time in the figure
    text = plot.summary(every=2)
    assert text.splitlines()[1:] == [
        "   11-12         5.5000       4.5000",
        "   13-14         3.5000       3.5000",
    ]
    figure = plot.figure()
    assert "step 14 of 14" in figure.axes[0].get_title()
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    assert "unigram 5.60" in labels and "validation loss (held-out blocks)" in labels


def test_a_plot_of_no_steps_is_refused() -> None:
    with pytest.raises(ConfigError, match="at least 1"):
        LiveLossPlot(0)


def test_a_resumed_run_carries_the_earlier_curves() -> None:
    first = LiveLossPlot(4, draw_every=1)
    first.step(0, 6.0)
    first.step(1, 5.0)
    first.validation(2, 5.5)
    resumed = LiveLossPlot(4, draw_every=1).carry(first)
    resumed.step(2, 4.0)
    assert resumed.done == 3 and resumed.validation_losses == [(2, 5.5)]
    assert resumed.losses == [(1, 6.0), (2, 5.0), (3, 4.0)]
    assert first.done == 2  # the earlier plot is not changed


def test_a_run_paused_half_way_says_so_instead_of_a_time_left_and_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from llmfs.gpt import loss_plot as module

    now = [50.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: now[0])
    plot = LiveLossPlot(10, draw_every=100)
    for step in range(4):
        plot.step(step, 2.0)
        now[0] += 5.0  # 5 s per step after the first: 6 steps to go
    assert plot.time_left() == ", about 30 s left"
    assert plot.pause() is plot
    # Stopped to resume from a checkpoint: no estimate left running down on screen.
    assert plot.time_left() == ""
    assert plot.figure().axes[0].get_title() == "training (step 4 of 10, paused)"
    plot.step(4, 2.0)
    assert plot.time_left().endswith("s left")
    assert "paused" not in plot.figure().axes[0].get_title()
    for step in range(5, 10):
        plot.step(step, 2.0)
    plot.pause()  # a finished run is finished, not paused
    assert plot.figure().axes[0].get_title() == "training (step 10 of 10)"


def test_the_legend_lies_under_the_axes_and_inside_the_figure() -> None:
    plot = LiveLossPlot(4, {"unigram": 5.6, "uniform": 6.6}, draw_every=1)
    for step, loss in enumerate((6.6, 6.5, 6.7, 6.6)):  # curves where an inner legend would sit
        plot.step(step, loss)
        plot.validation(step + 1, loss)
    figure = plot.figure()
    figure.canvas.draw()
    axes = figure.axes[0]
    legend = axes.get_legend().get_window_extent()
    assert legend.y1 <= axes.get_window_extent().y0
    assert legend.y0 >= 0 and legend.x0 >= 0 and legend.x1 <= figure.bbox.width
