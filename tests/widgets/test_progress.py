"""The progress bar of a cell that runs for seconds: one output redrawn in place, the time left
while it runs, and a text form that never changes (what notebook validation compares)."""

from __future__ import annotations

from typing import Any

import pytest

from llmfs.widgets import progress as module
from llmfs.widgets.progress import Progress, time_left_text


class Handle:
    """Stands in for IPython's display handle: records every redraw."""

    def __init__(self) -> None:
        self.drawn: list[tuple[str, str]] = []

    def update(self, obj: Any) -> None:
        self.drawn.append((repr(obj), obj._repr_html_()))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: now[0])
    return now


def test_each_step_redraws_one_output_with_the_time_left_and_the_text_never_changes(
    clock: list[float],
) -> None:
    bar = Progress(4, "the GPT on your kernel", "batches")
    handle = Handle()
    bar._handle = handle
    assert "0 of 4 batches: started" in bar._repr_html_()
    clock[0] += 30.0
    bar.advance()  # 30 s per batch, 3 to go
    clock[0] += 30.0
    bar.advance()
    clock[0] += 30.0
    bar.advance()
    clock[0] += 30.0
    bar.advance()
    texts = {text for text, _ in handle.drawn}
    assert texts == {"the GPT on your kernel: 4 batches"}
    htmls = [html for _, html in handle.drawn]
    assert "1 of 4 batches, about 90 s left" in htmls[0]
    assert "2 of 4 batches, about 60 s left" in htmls[1]
    assert 'value="3" max="4"' in htmls[2] and "about 30 s left" in htmls[2]
    assert "4 of 4 batches: done" in htmls[3] and "left" not in htmls[3]


def test_over_counts_an_item_once_the_work_on_it_is_done(clock: list[float]) -> None:
    bar = Progress(3, "work")
    seen = []
    for item in bar.over(["a", "b", "c"]):
        seen.append((item, bar.done))  # the step is counted after its body ran
    assert seen == [("a", 0), ("b", 1), ("c", 2)] and bar.done == 3
    with pytest.raises(ValueError, match="past the total of 3"):
        bar.advance()


@pytest.mark.parametrize("total", [0, -1, True, 2.5])
def test_a_total_below_one_step_is_refused(total: object) -> None:
    with pytest.raises(ValueError, match="at least 1 step"):
        Progress(total, "work")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.5, "a few seconds left"), (9.9, "a few seconds left"), (12, "about 10 s left"),
     (88, "about 90 s left"), (95, "about 95 s left"), (130, "about 2 min left"),
     (600, "about 10 min left")],
)  # fmt: skip
def test_the_time_left_is_rounded_never_falsely_precise(seconds: float, text: str) -> None:
    assert time_left_text(seconds) == text


def test_without_a_notebook_nothing_is_drawn() -> None:
    bar = Progress(2, "work")
    bar.advance(2)  # no handle: counts only
    assert bar.status() == "2 of 2 steps: done"


def test_a_restarted_clock_estimates_from_the_steps_after_it(clock: list[float]) -> None:
    bar = Progress(5, "a check", "cases")
    clock[0] += 40.0  # the first step pays for a compiler run
    bar.advance()
    bar.restart_clock()
    assert bar.status() == "1 of 5 cases: started"
    clock[0] += 2.0
    bar.advance()  # 2 s per later step, 3 to go: not the 40 s of the first
    assert bar.status() == "2 of 5 cases, a few seconds left"


def test_a_check_run_through_checked_counts_its_cases_and_returns_its_own_report(
    monkeypatch: pytest.MonkeyPatch, clock: list[float]
) -> None:
    from llmfs.course.exercise_checks import CHECKS, SPECS

    handles: list[Handle] = []

    def display(obj: Any, display_id: bool = False) -> Handle:
        handles.append(Handle())
        handles[-1].update(obj)
        return handles[-1]

    monkeypatch.setattr("IPython.display.display", display)
    exercise = "ch01.compute_strides"
    check = CHECKS[exercise]
    total = SPECS[exercise].cases

    def strides(shape: list[int]) -> list[int]:
        out, step = [], 1
        for size in reversed(shape):
            out.append(step)
            step *= max(size, 1)
        return out[::-1]

    report = module.checked(lambda fn: check(fn, record_attempt=False), strides, "your strides")
    assert report.passed and report.total == total
    assert len(handles) == 1  # one bar, redrawn in place
    drawn = [html for _, html in handles[0].drawn]
    assert f'value="0" max="{total}"' in drawn[0]
    assert f"{total} of {total} cases: done" in drawn[-1]
    assert {text for text, _ in handles[0].drawn} == {f"your strides: {total} cases"}
    # Outside checked() a check draws nothing.
    check(strides, record_attempt=False)
    assert len(handles) == 1
