"""Graded work turns reveals off: checks say right or wrong per field and never show an answer;
a check that shows one leaves a note in its saved output, which revealed_in reads back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from exercisekit import RIGHT, WRONG, seed_fixture
from hypothesis import given
from hypothesis import strategies as st

from llmfs.course import CourseError
from llmfs.course.exercises import state
from llmfs.course.exercises.api import MAX_WRONG_TRIES, after, check, predict
from llmfs.course.exercises.hints import hint, model_answer
from llmfs.course.exercises.reveals import (
    REVEAL_MIME,
    REVEALS_OFF,
    REVEALS_OFF_SOURCE,
    allow_reveals,
    revealed_in,
    reveals_allowed,
)

EXPRESSION = "base.transpose(0, 1)"
WRITTEN = (
    "A reshape keeps the row-major order of the offsets while a transpose keeps every "
    "axis with its own stride, so the walks differ."
)


@pytest.fixture
def graded() -> Iterator[None]:
    """A kernel that ran the assignment notebook's first cell (and is put back afterwards)."""
    exec(REVEALS_OFF_SOURCE, {})
    assert not reveals_allowed()
    try:
        yield
    finally:
        allow_reveals(True)


def _wrong(scope: dict[str, Any], **options: Any) -> Any:
    return check(predict(EXPRESSION, exercise_id="ch02.q1", **WRONG), scope, **options)


def _events(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [r for r in map(json.loads, log.read_text().splitlines()) if "event" in r]


def test_no_answer_is_revealed_after_any_number_of_wrong_tries(
    attempts_log: Path, graded: None
) -> None:
    scope = {"base": seed_fixture()}
    for _ in range(MAX_WRONG_TRIES + 2):
        comparison = _wrong(scope)
    strides = next(v for v in comparison.verdicts if v.field == "strides")
    assert strides.status == "wrong" and not strides.revealed
    assert strides.shown_truth == "hidden" and not comparison.finished
    text = repr(comparison)
    assert "[1, 3]" not in text and "answer:" not in text  # the truth of the strides
    assert f"{REVEALS_OFF}: no answer is shown" in text
    assert "more wrong tr" not in text  # no countdown to a reveal that never comes
    assert comparison._repr_mimebundle_() == {}
    assert _events(attempts_log) == []  # nothing was shown, so no reveal is logged
    assert after("ch02.q1") is False


def test_reveal_on_request_is_refused_with_a_course_error(attempts_log: Path, graded: None) -> None:
    scope = {"base": seed_fixture()}
    with pytest.raises(CourseError, match=f"^{REVEALS_OFF}: reveal=True shows no answer"):
        _wrong(scope, reveal=True)
    assert not attempts_log.exists()  # refused before anything was recorded
    # Right answers are still right, and finish the exercise.
    comparison = check(predict(EXPRESSION, exercise_id="ch02.q1", **RIGHT), scope)
    assert comparison.all_right and comparison.finished and after("ch02.q1")


def test_answers_shown_in_practice_stay_hidden_in_graded_work(attempts_log: Path) -> None:
    # Practice work in the same folder revealed the strides; the graded notebook shows none.
    scope = {"base": seed_fixture()}
    assert _wrong(scope, reveal=True).finished
    assert after("ch02.q1")
    state._STATES.clear()  # the assignment notebook runs in a new kernel
    exec(REVEALS_OFF_SOURCE, {})
    try:
        assert after("ch02.q1") is False  # a revealed field no longer counts as done
        comparison = _wrong(scope)
        assert not any(v.revealed for v in comparison.verdicts)
        assert "[1, 3]" not in repr(comparison)
    finally:
        allow_reveals(True)


def test_hints_still_come_but_no_model_answer(attempts_log: Path, graded: None) -> None:
    assert hint("ch02.q1").number == 1
    shown = model_answer("ch02.why", WRITTEN)
    assert not shown.shown and shown.answer == "" and shown.rubric == ()
    assert repr(shown) == (
        f"ch02.why: {REVEALS_OFF}: no model answer is shown; your written answer is read by "
        "the instructor against the exercise's rubric"
    )
    assert [e["event"] for e in _events(attempts_log)] == ["hint"]


def test_a_shown_answer_leaves_a_note_in_the_output_that_revealed_in_reads(
    attempts_log: Path,
) -> None:
    scope = {"base": seed_fixture()}
    right = check(predict(EXPRESSION, exercise_id="ch02.q1", **RIGHT), scope)
    assert right._repr_mimebundle_() == {}  # nothing shown: the output is as before
    shown = _wrong(scope, reveal=True)
    bundle = shown._repr_mimebundle_()
    assert bundle == {REVEAL_MIME: {"exercise": "ch02.q1", "fields": ["offsets", "strides"]}}
    answer = model_answer("ch02.why", WRITTEN)
    notebook = {
        "cells": [
            {"cell_type": "code", "outputs": [_output(right)]},
            {"cell_type": "code", "outputs": [_output(shown)]},
            {"cell_type": "markdown", "source": "no outputs here"},
            {"cell_type": "code", "outputs": [{"data": {"text/plain": repr(answer)}}]},
        ]
    }
    assert revealed_in(notebook) == {"ch02.q1": ("offsets", "strides"), "ch02.why": ("answer",)}


def _output(comparison: Any) -> dict[str, Any]:
    """What Jupyter saves of a displayed comparison: its reprs and its mime bundle."""
    data = {"text/plain": repr(comparison).splitlines(keepends=True)}
    data.update(comparison._repr_mimebundle_())
    return {"output_type": "execute_result", "data": data, "metadata": {}}


def test_an_unshown_model_answer_and_other_outputs_read_as_nothing_revealed(
    attempts_log: Path,
) -> None:
    short = model_answer("ch02.why", "strides differ")
    notebook = {
        "cells": [
            {"cell_type": "code", "outputs": [{"data": {"text/plain": repr(short)}}]},
            {"cell_type": "code", "outputs": [{"output_type": "stream", "text": "ch02.why: x"}]},
        ]
    }
    assert revealed_in(notebook) == {}


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@given(
    st.dictionaries(
        st.sampled_from(["cells", "metadata", "x"]),
        st.lists(
            st.dictionaries(
                st.sampled_from(["outputs", "data", "cell_type"]),
                _JSONISH
                | st.lists(st.dictionaries(st.sampled_from(["data", REVEAL_MIME]), _JSONISH)),
            ),
            max_size=3,
        )
        | _JSONISH,
    )
)
def test_revealed_in_never_raises_on_a_hostile_notebook(notebook: dict[str, Any]) -> None:
    found = revealed_in(notebook)
    assert all(isinstance(k, str) and isinstance(v, tuple) for k, v in found.items())
