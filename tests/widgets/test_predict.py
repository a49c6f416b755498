"""predict(...)/check(...): forgiving reading, one comparison, "not answered yet", recording."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from llmfs.course import CourseError
from llmfs.widgets import (
    Prediction,
    PredictionError,
    after,
    check,
    compare,
    hint,
    model_answer,
    normalize,
    predict,
    run,
)
from llmfs.widgets.examples import seed_fixture
from llmfs.widgets.predict import UnreadableEntry


@pytest.mark.parametrize(
    ("field", "entry", "expected"),
    [
        ("shape", "[3, 2]", (3, 2)),
        ("shape", "(3,2)", (3, 2)),
        ("shape", "3,2", (3, 2)),
        ("shape", " 3 2 ", (3, 2)),
        ("shape", "[]", ()),
        ("shape", [3, 2], (3, 2)),
        ("strides", (1, 3), (1, 3)),
        ("offsets", "[[0, 3], [1, 4]]", (0, 3, 1, 4)),
        ("base offset", "1", 1),
        ("base_offset", [1], 1),
        ("values", "[[10, 11], [12, 20]]", [[10.0, 11.0], [12.0, 20.0]]),
        ("values", "10 11", [10.0, 11.0]),
        ("contiguous", "Yes", True),
        ("contiguous", "false", False),
        ("contiguous", True, True),
        ("owner", "Shared", "shared"),
        ("owner", "copy", "new"),
        ("owner", "new owner", "new"),
        ("error", "none", "none"),
        ("error", "llmfs.tensor.NonContiguousReshapeError", "NonContiguousReshapeError"),
        ("stride", "2,1", (2, 1)),
    ],
)
def test_entries_are_read_forgivingly(field, entry, expected) -> None:
    assert normalize(field, entry) == expected


@pytest.mark.parametrize("entry", [None, "", "   "])
def test_blank_entries_are_not_answered(entry) -> None:
    assert normalize("shape", entry) is None


@pytest.mark.parametrize(
    ("field", "entry", "message"),
    [
        ("shape", "three by two", "could not read"),
        ("shape", "[3.5, 2]", "whole numbers"),
        ("shape", "[[3], [2]]", "one flat list"),
        ("base_offset", "[1, 2]", "one whole number"),
        ("contiguous", "maybe", "expected yes or no"),
        ("owner", "both", "expected shared or new"),
        ("owner", "owner", "expected shared or new"),
        ("error", "it fails!", "error class name"),
        ("values", "['a']", "numbers"),
    ],
)
def test_unreadable_entries_get_a_message(field, entry, message) -> None:
    with pytest.raises(UnreadableEntry, match=message):
        normalize(field, entry)


def test_unknown_fields_are_an_authors_mistake() -> None:
    with pytest.raises(PredictionError, match="unknown prediction field 'colour'"):
        predict("base.view()", colour="red")


def test_compare_gives_one_verdict_per_field_in_a_fixed_order() -> None:
    outcome = run("base.transpose(0, 1)", {"base": seed_fixture()})
    verdicts = compare(
        {"strides": "1, 3", "shape": "(2, 3)", "offsets": None, "owner": "shred"},
        outcome,
        ["shape", "strides", "offsets", "owner", "contiguous"],
    )
    assert [(v.field, v.status) for v in verdicts] == [
        ("shape", "wrong"),
        ("strides", "right"),
        ("offsets", "unanswered"),
        ("contiguous", "unanswered"),
        ("owner", "unreadable"),
    ]
    assert [v.verdict_text for v in verdicts][:3] == ["✗ wrong", "✓ right", "not answered yet"]
    assert verdicts[2].truth == "[0, 3, 1, 4, 2, 5]"
    assert "expected shared or new" in verdicts[4].verdict_text


def test_a_rejected_request_is_an_outcome_to_predict() -> None:
    outcome = run("base.transpose(0, 1).reshape([2, 3])", {"base": seed_fixture()})
    right = compare({"error": "NonContiguousReshapeError", "shape": "2,3"}, outcome)
    assert [(v.field, v.status) for v in right] == [("shape", "wrong"), ("error", "right")]
    assert right[0].truth == "— (rejected)"
    for spelling in ("NonContiguousReshape", "noncontiguousreshapeerror"):
        assert compare({"error": spelling}, outcome)[0].status == "right"
    assert compare({"error": "none"}, outcome)[0].status == "wrong"
    ok = run("base.reshape([3, 2])", {"base": seed_fixture()})
    assert compare({"error": "none"}, ok)[0].status == "right"
    assert compare({"error": "NonContiguousReshapeError"}, ok)[0].status == "wrong"


def test_a_parent_error_class_counts_as_right() -> None:
    outcome = run("base.reshape([4, 2])", {"base": seed_fixture()})
    assert compare({"error": "ElementCountMismatchError"}, outcome)[0].status == "right"
    assert compare({"error": "TensorError"}, outcome)[0].status == "wrong"


def test_owner_is_shared_for_views_and_new_for_materialize() -> None:
    scope = {"base": seed_fixture()}
    assert run("base.slice(1, 1, 3)", scope).truth("owner") == "shared"
    assert run("base.slice(1, 1, 3).materialize()", scope).truth("owner") == "new"


def test_values_compare_numerically_and_accept_a_flat_list() -> None:
    outcome = run("base.reshape([3, 2])", {"base": seed_fixture()})
    assert compare({"values": "[[10, 11], [12, 20], [21, 22]]"}, outcome)[0].status == "right"
    flat = compare({"values": "10, 11, 12, 20, 21, 22"}, outcome)[0]
    assert (flat.status, flat.verdict_text) == ("right", "✓ right (flattened)")
    assert compare({"values": "[[10, 20], [11, 21], [12, 22]]"}, outcome)[0].status == "wrong"


def test_a_complete_check_marks_each_field_and_hides_the_truth_of_wrong_ones() -> None:
    base = seed_fixture()
    prediction = predict(
        "base.reshape([3, 2])", shape=[3, 2], strides=[1, 3], offsets="0 1 2 3 4 5"
    )
    text = repr(check(prediction, {"base": base}))
    lines = text.splitlines()
    assert lines[0] == "predict shape, strides, logical offsets of base.reshape([3, 2])"
    assert lines[3].split() == ["shape", "[3,", "2]", "[3,", "2]", "✓", "right"]
    assert lines[4].split() == ["strides", "[1,", "3]", "hidden", "✗", "wrong"]
    assert "[2, 1]" not in text
    assert "strides: the entries at positions 0, 1 differ" in text
    assert "coordinate  offset  value" not in text  # the result would give the answer away
    right = check(predict("base.reshape([3, 2])", strides=[2, 1]), {"base": base})
    assert "coordinate  offset  value" in repr(right)


def test_a_partly_answered_check_shows_the_question_and_nothing_of_the_truth() -> None:
    prediction = predict("base.transpose(0, 1)", shape=[3, 2], strides=None, offsets="")
    comparison = check(prediction, {"base": seed_fixture()})
    text = repr(comparison)
    assert not comparison.complete and not comparison.recorded
    assert text.splitlines() == [
        "predict shape, strides, logical offsets of base.transpose(0, 1)",
        "still to answer:",
        "  strides: not answered yet",
        "  logical offsets: not answered yet",
        "(nothing is checked until every field has an answer)",
    ]
    html = comparison._repr_html_()
    for truth in ("[1, 3]", "[0, 3, 1, 4, 2, 5]", "✓", "✗", "coordinate"):
        assert truth not in text and truth not in html


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


def test_check_shows_the_mapping_of_a_copy() -> None:
    prediction = predict("base.slice(1, 1, 3).materialize()", owner="new")
    text = repr(check(prediction, {"base": seed_fixture()}))
    assert "new offsets [0, 1, 2, 3] -> source offsets [1, 2, 4, 5]" in text


def test_check_takes_only_a_prediction() -> None:
    with pytest.raises(PredictionError, match="check\\(\\) takes what predict"):
        check({"shape": [3, 2]})  # type: ignore[arg-type]


def test_callables_work_as_expressions() -> None:
    base = seed_fixture()
    prediction = predict(lambda: base.transpose(0, 1), label="base.transpose(0, 1)", owner="shared")
    assert isinstance(prediction, Prediction)
    comparison = check(prediction)
    assert comparison.all_right
    assert repr(comparison).startswith("predict owner of base.transpose(0, 1)")


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


WRONG = {"shape": [3, 2], "strides": [2, 1], "offsets": [0, 1, 2, 3, 4, 5]}
RIGHT = {"shape": [3, 2], "strides": [1, 3], "offsets": [0, 3, 1, 4, 2, 5]}


def test_wrong_fields_can_be_retried_and_are_revealed_after_three_wrong_tries(
    attempts_log: Path,
) -> None:
    scope = {"base": seed_fixture()}
    for attempt in (1, 2):
        comparison = check(predict("base.transpose(0, 1)", exercise_id="ch02.q1", **WRONG), scope)
        text = repr(comparison)
        assert "[1, 3]" not in text and "hidden" in text
        assert f"{3 - attempt} more wrong tr" in text
    third = check(predict("base.transpose(0, 1)", exercise_id="ch02.q1", **WRONG), scope)
    assert "strides: answer: [1, 3]" in repr(third)
    assert "logical offsets: answer: [0, 3, 1, 4, 2, 5]" in repr(third)
    assert "coordinate  offset  value" in repr(third)  # every field right or revealed
    final = check(predict("base.transpose(0, 1)", exercise_id="ch02.q1", **RIGHT), scope)
    assert final.all_right
    lines = [json.loads(line) for line in attempts_log.read_text().splitlines()]
    assert lines[3] == {
        "event": "reveal",
        "exercise": "ch02.q1",
        "fields": ["offsets", "strides"],
        "format": 1,
    }  # logged when the third wrong try shows the answers
    records = [line for line in lines if "event" not in line]
    assert [r["attempt"] for r in records] == [1, 2, 3, 4]
    assert [r["first"] for r in records] == [True, False, False, False]
    assert [r["correct"] for r in records] == [False, False, False, True]
    assert records[3]["revealed"] == ["offsets", "strides"]


def test_max_tries_is_configurable(attempts_log: Path) -> None:
    scope = {"base": seed_fixture()}
    prediction = predict("base.transpose(0, 1)", exercise_id="ch02.q1", **WRONG)
    assert "strides: answer: [1, 3]" in repr(check(prediction, scope, max_tries=1))


def test_reveal_shows_the_answers_of_the_fields_not_yet_right_and_logs_it(
    attempts_log: Path,
) -> None:
    scope = {"base": seed_fixture()}
    empty = predict("base.transpose(0, 1)", exercise_id="ch02.q1", shape=[3, 2])
    text = repr(check(empty, scope, reveal=True))
    assert "strides (revealed): [1, 3]" in text and "shape (revealed)" not in text
    events = [json.loads(line) for line in attempts_log.read_text().splitlines()]
    assert events == [
        {"event": "reveal", "exercise": "ch02.q1", "fields": ["offsets", "strides"], "format": 1}
    ]


def test_hints_come_one_at_a_time_and_are_logged(attempts_log: Path) -> None:
    first, second, again = hint("ch02.q1"), hint("ch02.q1"), hint("ch02.q1")
    assert repr(first) == "hint 1 of 2 for ch02.q1: A transpose swaps sizes and strides."
    assert repr(second).startswith("hint 2 of 2 for ch02.q1 (that was the last hint)")
    assert again.number == 2
    events = [json.loads(line) for line in attempts_log.read_text().splitlines()]
    assert [e["number"] for e in events] == [1, 2]
    check(predict("base.transpose(0, 1)", exercise_id="ch02.q1", **RIGHT), {"base": seed_fixture()})
    assert json.loads(attempts_log.read_text().splitlines()[-1])["hints"] == 2
    assert repr(hint("ch02.q2")) == "ch02.q2 has no hints"


def test_the_state_survives_a_new_kernel(attempts_log: Path) -> None:
    predict_module = importlib.import_module("llmfs.widgets.predict")

    scope = {"base": seed_fixture()}
    for _ in range(2):
        check(predict("base.transpose(0, 1)", exercise_id="ch02.q1", **WRONG), scope)
    predict_module._STATES.clear()  # what a kernel restart forgets
    third = check(predict("base.transpose(0, 1)", exercise_id="ch02.q1", **WRONG), scope)
    assert "strides: answer: [1, 3]" in repr(third)


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


def test_long_truths_are_shown_with_their_first_and_last_entries() -> None:
    from llmfs.tensor import Tensor

    outcome = run("big.reshape([100, 100]).transpose(0, 1)", {"big": Tensor.arange(10_000)})
    (verdict,) = compare({"offsets": "0, 100"}, outcome)
    assert verdict.status == "wrong"
    assert (
        verdict.truth
        == "[0, 100, 200, 300, 400, 500, 600, 700, … 9988 more …, 9699, 9799, 9899, 9999]"
    )


# --------------------------------------------------------------------------------------------
# The misconception catalogue: a typical wrong answer produces its message
# --------------------------------------------------------------------------------------------


def _wrong(expression: str, scope: dict, **fields: object) -> dict[str, tuple[str, ...]]:
    verdicts = compare(fields, run(expression, scope))
    assert all(v.status == "wrong" for v in verdicts), [(v.field, v.status) for v in verdicts]
    return {v.field: v.mistakes for v in verdicts}


def _says(messages: tuple[str, ...], text: str) -> bool:
    return any(text in message for message in messages)


def test_row_major_strides_for_a_transpose_or_permute() -> None:
    scope = {"base": seed_fixture()}
    found = _wrong("base.transpose(0, 1)", scope, strides=[2, 1])
    assert _says(found["strides"], "row-major strides of shape [3, 2], what a reshape would give")
    from llmfs.tensor import Tensor

    cube = {"cube": Tensor.from_vec([2, 3, 4], list(range(24)))}
    found = _wrong("cube.permute([2, 0, 1])", cube, strides=[6, 3, 1])
    assert _says(found["strides"], "a transpose or permute keeps each axis's own stride")


def test_the_reshape_offsets_given_for_a_transpose() -> None:
    found = _wrong("base.transpose(0, 1)", {"base": seed_fixture()}, offsets=[0, 1, 2, 3, 4, 5])
    assert _says(found["offsets"], "the offsets in the source's own order")


def test_the_base_offset_without_start_times_stride() -> None:
    scope = {"base": seed_fixture()}
    found = _wrong("base.slice(0, 1, 2)", scope, base_offset=1)
    assert _says(found["base_offset"], "moves by start × stride = 1 × 3")
    from llmfs.tensor import Tensor

    x = {"x": Tensor.from_vec([2, 3, 4], list(range(24)))}
    assert _says(_wrong("x[1]", x, base_offset=1)["base_offset"], "1 × 12")


def test_a_slice_treated_as_contiguous() -> None:
    scope = {"base": seed_fixture()}
    found = _wrong(
        "base.slice(1, 1, 3)", scope, strides=[2, 1], offsets=[1, 2, 3, 4], contiguous=True
    )
    assert _says(found["strides"], "as if the slice were a contiguous block")
    assert _says(found["offsets"], "one gap-free run, as if the slice were contiguous")
    assert _says(found["contiguous"], "leaves gaps between its rows")


def test_floor_instead_of_ceil_for_a_step() -> None:
    from llmfs.tensor import Tensor

    row = {"row": Tensor.arange(10)}
    found = _wrong("row.slice(0, 0, 10, 3)", row, shape=[3])
    assert _says(found["shape"], "the size is ceil((10 - 0) / 3)")


def test_the_shape_given_where_strides_are_asked() -> None:
    found = _wrong("base.reshape([3, 2])", {"base": seed_fixture()}, strides=[3, 2])
    assert _says(found["strides"], "That is the shape")


def test_a_count_mismatch_across_fields() -> None:
    scope = {"base": seed_fixture()}
    found = _wrong("base.reshape([3, 2])", scope, shape=[2, 2], offsets=[0, 1, 2, 3, 4])
    assert _says(found["offsets"], "5 entries for you predicted shape [2, 2], which holds 4")
    found = _wrong("base.view()", scope, offsets=[0, 1, 2, 3])
    assert _says(found["offsets"], "4 entries for the result has shape [2, 3], which holds 6")


def test_offsets_given_for_values() -> None:
    from llmfs.tensor import Tensor

    x = {"x": Tensor.from_vec([2, 2], [100, 101, 102, 103])}
    assert _says(_wrong("x.view()", x, values=[0, 1, 2, 3])["values"], "the storage offsets")


@pytest.mark.parametrize("spelling", ["NonContiguous", "noncontiguousreshapeerror", "NONCONT"])
def test_an_error_name_by_a_unique_prefix_or_in_another_case_is_accepted(spelling: str) -> None:
    outcome = run("base.transpose(0, 1).reshape([6])", {"base": seed_fixture()})
    (verdict,) = compare({"error": spelling}, outcome)
    assert verdict.status == "right"
    assert verdict.verdict_text == "✓ right (full name: NonContiguousReshapeError)"


def test_an_ambiguous_prefix_is_not_accepted() -> None:
    outcome = run("base.slice(1, 2, 1)", {"base": seed_fixture()})
    # Two errors start with "Slice": SliceStartAfterEndError and SliceEndOutOfBoundsError.
    assert compare({"error": "Slice"}, outcome)[0].status == "wrong"
    assert compare({"error": "slicestart"}, outcome)[0].status == "right"


def test_every_catalogued_misconception_is_tested_above() -> None:
    from llmfs.widgets.predict import MISCONCEPTIONS

    tested = {
        "row-major strides for a transpose or permute",
        "reshape offsets for a transpose",
        "base offset without start*stride",
        "slice treated as contiguous (strides)",
        "slice treated as contiguous (offsets)",
        "slice treated as contiguous",
        "floor instead of ceil for a step",
        "shape given for strides",
        "count mismatch across fields",
        "offsets given for values",
    }
    assert {m.name for m in MISCONCEPTIONS} == tested


def test_an_exercise_can_declare_its_own_expected_mistakes(attempts_log: Path) -> None:
    prediction = predict(
        "base.transpose(0, 1)", exercise_id="ch02.q1", **{**RIGHT, "offsets": [0, 1, 2, 3, 4, 5]}
    )
    text = repr(check(prediction, {"base": seed_fixture()}))
    assert "Course-specific: that is the source's walk." in text


def test_a_correct_answer_never_gets_a_misconception_message() -> None:
    verdicts = compare(RIGHT, run("base.transpose(0, 1)", {"base": seed_fixture()}))
    assert all(v.status == "right" and not v.mistakes for v in verdicts)


def test_a_plain_answer_may_be_a_bare_name_but_other_text_must_be_a_literal() -> None:
    from llmfs.widgets.predict import _plain

    assert _plain("KernelMemoryError") == "KernelMemoryError"
    assert _plain(" none ") == "none"
    assert _plain("[6, 7]") == [6, 7]
    assert _plain("yes") is True
    with pytest.raises(UnreadableEntry, match="could not read"):
        _plain("six and seven")


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
