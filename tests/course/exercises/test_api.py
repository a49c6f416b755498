"""predict(...), check(...) and after(...): the manifest decides the fields, complete attempts
are recorded, and the state survives a restarted kernel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from exercisekit import WRONG, WRONGS, seed_fixture

from llmfs.course import CourseError
from llmfs.course.exercises import state
from llmfs.course.exercises.api import Prediction, after, check, predict
from llmfs.course.exercises.entries import PredictionError


def test_unknown_fields_are_an_authors_mistake() -> None:
    with pytest.raises(PredictionError, match="unknown prediction field 'colour'"):
        predict("base.view()", colour="red")


def test_check_reads_names_from_the_callers_globals() -> None:
    global base
    base = seed_fixture()
    try:
        comparison = check(predict("base.slice(1, 1, 3)", base_offset=1))
    finally:
        del base
    assert comparison.all_right and comparison.score == {"base_offset": True}


def test_an_untouched_student_prediction_runs_without_failing() -> None:
    prediction = predict("base.view()", shape=None, strides=None)
    comparison = check(prediction, {"base": seed_fixture()})
    assert [v.status for v in comparison.verdicts] == ["unanswered", "unanswered"]
    assert "still to answer:" in repr(comparison)


def test_check_takes_only_a_prediction() -> None:
    with pytest.raises(PredictionError, match="check\\(\\) takes what predict"):
        check({"shape": [3, 2]})  # type: ignore[arg-type]


def test_callables_work_as_expressions() -> None:
    base = seed_fixture()
    prediction = predict(lambda: base.transpose(0, 1), label="base.transpose(0, 1)", owner="shared")
    assert isinstance(prediction, Prediction)
    comparison = check(prediction)
    assert comparison.all_right
    assert repr(comparison).splitlines()[:2] == ["✓ right", "predict owner of base.transpose(0, 1)"]


def test_an_exercise_id_records_the_attempt(attempts_log: Path) -> None:
    base = seed_fixture()
    prediction = predict(
        "base.transpose(0, 1)", exercise_id="ch02.q1", shape="3,2", strides="2,1", offsets=[0, 3]
    )
    comparison = check(prediction, {"base": base})
    assert comparison.recorded
    (line,) = attempts_log.read_text().splitlines()
    record = json.loads(line)
    assert record["exercise"] == "ch02.q1" and record["first"] is True
    assert record["fields"] == {"shape": True, "strides": False, "offsets": False}
    assert record["answers"] == {"shape": "[3, 2]", "strides": "[2, 1]", "offsets": "[0, 3]"}
    assert (record["hints"], record["revealed"]) == (0, [])


def test_the_manifest_decides_the_expression_and_the_fields(attempts_log: Path) -> None:
    with pytest.raises(CourseError, match=r"does not ask for 'values': predict its fields shape"):
        predict("base.transpose(0, 1)", exercise_id="ch02.q1", values=[1])
    with pytest.raises(CourseError, match=r"asks about 'base.transpose\(0, 1\)'"):
        predict("base.reshape([3, 2])", exercise_id="ch02.q1", shape=[3, 2])
    # Spacing is not a different expression; the fields come in the manifest's order.
    prediction = predict("base.transpose(0,1)", exercise_id="ch02.q1", offsets=None, shape=[3, 2])
    assert list(prediction.fields) == ["shape", "strides", "offsets"]
    assert prediction.fields["strides"] is None


def test_an_incomplete_exercise_check_records_nothing(attempts_log: Path) -> None:
    prediction = predict("base.transpose(0, 1)", exercise_id="ch02.q1", shape=[3, 2])
    assert not check(prediction, {"base": seed_fixture()}).recorded
    assert not attempts_log.exists()


def test_an_unknown_exercise_id_is_a_course_error(attempts_log: Path) -> None:
    with pytest.raises(CourseError, match=r"ch02\.nope"):
        predict("base.view()", exercise_id="ch02.nope", shape="2,3")


def test_the_state_survives_a_new_kernel(attempts_log: Path) -> None:
    scope = {"base": seed_fixture()}
    for wrong in WRONGS[:2]:
        check(predict("base.transpose(0, 1)", exercise_id="ch02.q1", **wrong), scope)
    state._STATES.clear()  # what a kernel restart forgets
    third = check(predict("base.transpose(0, 1)", exercise_id="ch02.q1", **WRONGS[2]), scope)
    strides = next(v for v in third.verdicts if v.field == "strides")
    assert strides.revealed and strides.shown_truth == "[1, 3]"  # the third wrong try, counted


def test_after_holds_back_a_cells_output_until_its_exercise_is_finished(
    attempts_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scope = {"base": seed_fixture()}
    assert after("ch02.q1") is False
    assert capsys.readouterr().out == (
        "This output shows the answer to ch02.q1: it appears once that exercise is finished "
        "(every field right, or its answer shown). Run the check, then this cell.\n"
    )
    check(predict("base.transpose(0, 1)", exercise_id="ch02.q1", **WRONG), scope)
    assert after("ch02.q1") is False  # a wrong attempt does not finish it
    capsys.readouterr()
    check(predict("base.transpose(0, 1)", exercise_id="ch02.q1", shape=[3, 2]), scope, reveal=True)
    assert after("ch02.q1") is True and capsys.readouterr().out == ""
    with pytest.raises(CourseError, match=r"after\(\) needs the exercise ids"):
        after()
    assert after("ch02.q1", "ch02.q2") is False  # every named exercise must be finished
    assert "ch02.q2: it appears once that exercise is" in capsys.readouterr().out
    with pytest.raises(CourseError):
        after("ch99.nope")
