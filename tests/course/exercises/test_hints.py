"""hint(...) one at a time, model_answer(...) only after the learner wrote one; both logged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from exercisekit import RIGHT, seed_fixture

from llmfs.course import CourseError
from llmfs.course.exercises.api import check, predict
from llmfs.course.exercises.hints import hint, model_answer


def test_a_hint_is_asked_for_by_its_number_and_each_is_counted_once(attempts_log: Path) -> None:
    first, again, second, past = (
        hint("ch02.q1"),
        hint("ch02.q1"),  # the same cell run again (a re-run, Run All): the same hint
        hint("ch02.q1", 2),
        hint("ch02.q1", 5),
    )
    assert repr(first) == (
        'hint 1 of 2 for ch02.q1 (for the next, run hint("ch02.q1", 2)): '
        "A transpose swaps sizes and strides."
    )
    assert again == first
    assert repr(second).startswith("hint 2 of 2 for ch02.q1 (that was the last hint)")
    assert past.number == 2
    assert hint("ch02.q1").number == 1  # asking for the first again never goes back a count
    events = [json.loads(line) for line in attempts_log.read_text().splitlines()]
    assert [e["number"] for e in events] == [1, 2]
    check(predict("base.transpose(0, 1)", exercise_id="ch02.q1", **RIGHT), {"base": seed_fixture()})
    assert json.loads(attempts_log.read_text().splitlines()[-1])["hints"] == 2
    assert repr(hint("ch02.q2")) == "ch02.q2 has no hints"
    for bad in (0, -1, True, 1.5):
        with pytest.raises(CourseError, match="number is 1 for the first hint"):
            hint("ch02.q1", bad)  # type: ignore[arg-type]


def test_a_model_answer_is_shown_only_after_the_learner_wrote_one(
    attempts_log: Path, tmp_path: Path
) -> None:
    short = model_answer("ch02.why", "strides differ")
    assert not short.shown and "2 of at least 15 words" in repr(short)
    written = model_answer(
        "ch02.why",
        "A reshape keeps the row-major order of the offsets while a transpose keeps every "
        "axis with its own stride, so the walks differ.",
    )
    assert written.shown and written.rubric == ("first point", "second point", "third point")
    assert "[ ] first point" in repr(written)
    assert json.loads(attempts_log.read_text())["fields"] == ["answer"]
    with pytest.raises(CourseError, match="not an explain exercise"):
        model_answer("ch02.q1", "x")
