"""The live training plot of chapter 10: it keeps every loss, measures the held-out accuracy at
its period and at the last step, redraws one display in place, and says the run in numbers."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("matplotlib")

from llmfs.gpt.errors import ConfigError
from llmfs.gpt.plot import LiveTrainingPlot


class Handle:
    """A display handle that remembers what it was updated with."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    def update(self, obj: Any) -> None:
        self.updates.append(obj)


def test_it_evaluates_at_its_period_and_at_the_last_step_and_summarizes_in_numbers() -> None:
    seen: list[Any] = []

    def evaluate(params: Any) -> float:
        seen.append(params)
        return len(seen) / 4

    plot = LiveTrainingPlot(7, evaluate, eval_every=3)
    for step in range(7):
        plot(step, 3.0 - step, {"step": step})
    assert plot.losses == [3.0, 2.0, 1.0, 0.0, -1.0, -2.0, -3.0]
    assert plot.accuracy == [(3, 0.25), (6, 0.5), (7, 0.75)]
    assert [p["step"] for p in seen] == [2, 5, 6]
    assert plot.summary().splitlines() == [
        "steps      mean loss   held-out right",
        "   1-3        2.0000     25.0%",
        "   4-6       -1.0000     50.0%",
        "   7-7       -3.0000     75.0%",
    ]


def test_without_a_notebook_it_draws_nothing_and_with_one_it_redraws_in_place() -> None:
    quiet = LiveTrainingPlot(4, lambda p: 0.0, eval_every=2)
    for step in range(4):
        quiet(step, 1.0, None)  # no show(): no handle, nothing drawn, numbers kept
    assert len(quiet.losses) == 4
    shown = LiveTrainingPlot(5, lambda p: 0.0, eval_every=2, draw_every=5)
    handle = Handle()
    shown._handle = handle
    for step in range(5):
        shown(step, 1.0, None)
    # Redrawn at each evaluation (steps 2, 4 and the last, 5), as PNG images of 900 pixels.
    assert len(handle.updates) == 3
    png = handle.updates[-1].data
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(png[16:20], "big")
    assert width == 900


def test_the_figure_has_both_panels_with_the_steps_so_far() -> None:
    plot = LiveTrainingPlot(10, lambda p: 0.5, eval_every=5)
    for step in range(6):
        plot(step, 2.0, None)
    figure = plot.figure()
    left, right = figure.axes
    assert "step 6 of 10" in left.get_title()
    assert list(left.lines[0].get_xdata()) == [1, 2, 3, 4, 5, 6]
    assert list(right.lines[0].get_ydata()) == [50.0]


@pytest.mark.parametrize("bad", [dict(steps=0), dict(eval_every=0), dict(draw_every=0)])
def test_sizes_below_one_are_refused(bad: dict[str, int]) -> None:
    arguments = {"steps": 5, **bad}
    steps = arguments.pop("steps")
    with pytest.raises(ConfigError, match="must be at least 1"):
        LiveTrainingPlot(steps, lambda p: 0.0, **arguments)


def test_while_it_runs_the_title_says_the_time_left_and_the_finished_figure_holds_no_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from llmfs.gpt import plot as module

    now = [50.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: now[0])
    plot = LiveTrainingPlot(10, lambda p: 0.5, eval_every=5)
    assert plot.time_left() == ""  # nothing measured yet
    for step in range(4):
        plot(step, 2.0, None)
        now[0] += 5.0  # 5 s per step: after 4 steps, 6 to go
    assert plot.time_left() == ", about 30 s left"
    assert "step 4 of 10, about 30 s left" in plot.figure().axes[0].get_title()
    for step in range(4, 10):
        plot(step, 2.0, None)
    assert plot.time_left() == ""
    assert plot.figure().axes[0].get_title().endswith("(step 10 of 10)")
