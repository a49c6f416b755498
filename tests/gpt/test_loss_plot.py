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
