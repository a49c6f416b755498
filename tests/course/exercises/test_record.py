"""The record: a predict exercise's answer is the text of its cell, and reading and judging it
gives the verdicts the notebook's own check gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from exercisekit import RIGHT, seed_fixture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmfs.course import CourseError
from llmfs.course.exercises.api import check, predict
from llmfs.course.exercises.record import (
    VERDICTS_ENV,
    Unreadable,
    judge_cell_source,
    judge_in_kernel,
    judge_record,
    read_verdicts,
    record_of,
)
from llmfs.course.exercises.verdict import Verdict

EXPRESSION = "base.transpose(0, 1)"

# What a learner may write for a field: right and wrong lists, typed text, nonsense, None.
entries = st.one_of(
    st.none(),
    st.sampled_from(
        [[3, 2], [2, 3], [1, 3], [2, 1], [0, 3, 1, 4, 2, 5], [0, 1, 2, 3, 4, 5], (3, 2)]
    ),
    st.sampled_from(["3, 2", "(1,3)", "0 3 1 4 2 5", "three", "", "[[0, 3], [1, 4], [2, 5]]"]),
    st.lists(st.integers(-3, 8), max_size=7),
    st.booleans(),
    # No NaN: it has no Python literal, so no cell can hold it as a written answer (a computed
    # value is unreadable to the grader by design).
    st.floats(allow_nan=False, allow_infinity=False, width=32),
)


def _cell(fields: dict[str, Any]) -> str:
    keywords = "".join(f"    {name}={value!r},  # PREDICTION\n" for name, value in fields.items())
    return f'q1 = predict(\n    "{EXPRESSION}",\n    exercise_id="ch02.q1",\n{keywords})\n'


def _seen(verdicts: Any) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(v.field, v.status, v.mistakes) for v in verdicts]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(shape=entries, strides=entries, offsets=entries)
def test_the_record_read_from_the_cell_is_judged_as_the_notebook_check_judges_it(
    attempts_log: Path, shape: Any, strides: Any, offsets: Any
) -> None:
    fields = {"shape": shape, "strides": strides, "offsets": offsets}
    scope = {"base": seed_fixture()}
    record, problem = record_of(_cell(fields), "ch02.q1")
    assert problem == "" and record == fields
    live = check(predict(EXPRESSION, exercise_id="ch02.q1", **fields), scope)
    assert _seen(judge_record("ch02.q1", record, scope)) == _seen(live.verdicts)


def test_a_field_that_is_not_a_literal_is_unreadable_never_computed(attempts_log: Path) -> None:
    source = _cell({"shape": [3, 2], "offsets": [0, 3, 1, 4, 2, 5]}).replace(
        "offsets=", "strides=base.transpose(0, 1).strides, offsets="
    )
    record, _ = record_of(source, "ch02.q1")
    assert record is not None and record["strides"] == Unreadable("base.transpose(0, 1).strides")
    verdicts = judge_record("ch02.q1", record, {"base": seed_fixture()})
    assert [v.status for v in verdicts] == ["right", "unreadable", "right"]


def test_a_cell_without_its_predict_call_has_no_record() -> None:
    assert record_of("x = 1", "ch02.q1") == (None, "the exercise cell has no predict(...) call")
    record, problem = record_of("q1 = predict(", "ch02.q1")
    assert record is None and "not valid Python" in problem


def test_only_a_predict_exercise_has_a_record_to_judge(attempts_log: Path) -> None:
    with pytest.raises(CourseError, match="explain exercise without an expression"):
        judge_record("ch02.why", {}, {})


def test_the_judge_cell_writes_one_line_and_records_no_attempt(
    attempts_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "verdicts.jsonl"
    monkeypatch.setenv(VERDICTS_ENV, str(target))
    hostile = {**RIGHT, "strides": 'x"); import os; os._exit(1) #\n'}
    namespace: dict[str, Any] = {"base": seed_fixture()}
    exec(judge_cell_source("ch02.q1", hostile), namespace)  # the cell as llmfs check runs it
    exec(judge_cell_source("ch02.q1", RIGHT), namespace)
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert len(lines) == 2 and set(lines[0]) == {"exercise", "verdict"}
    first = Verdict.from_json(lines[0]["verdict"])
    assert (first.exercise, first.status, first.wrong_fields) == (
        "ch02.q1",
        "partial",
        ("strides",),
    )
    assert Verdict.from_json(read_verdicts(target)["ch02.q1"]["verdict"]).status == "right"
    assert "_llmfs_judge" not in namespace  # the cell leaves no name behind
    assert not attempts_log.exists()  # history is not the record: nothing logged


def test_the_judge_never_raises_and_says_why_it_could_not_judge(
    attempts_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "verdicts.jsonl"
    monkeypatch.setenv(VERDICTS_ENV, str(target))
    judge_in_kernel("ch02.q1", json.dumps(RIGHT), {})  # no `base` in the notebook
    judge_in_kernel("ch02.q1", "not json", {"base": seed_fixture()})
    judge_in_kernel("ch99.nope", "{}", {})
    errors = [json.loads(line)["error"] for line in target.read_text().splitlines()]
    assert "NameError" in errors[0] and "JSONDecodeError" in errors[1] and "ch99" in errors[2]
    monkeypatch.delenv(VERDICTS_ENV)
    judge_in_kernel("ch02.q1", json.dumps(RIGHT), {"base": seed_fixture()})  # nowhere to write


def test_reading_verdicts_skips_what_is_not_a_verdict_line(tmp_path: Path) -> None:
    target = tmp_path / "verdicts.jsonl"
    target.write_text('{"exercise": "a", "fields": {}}\nnot json\n[1]\n{"exercise": 3}\n')
    assert read_verdicts(target) == {"a": {"exercise": "a", "fields": {}}}
    assert read_verdicts(tmp_path / "missing.jsonl") == {}
