"""predict(...)/check(...): forgiving reading, one comparison, "not answered yet", recording."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmfs.course import CourseError
from llmfs.widgets import Prediction, PredictionError, check, compare, normalize, predict, run
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
        ("owner", "copy", "copy"),
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
        ("owner", "both", "expected shared or copy"),
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
    assert "expected shared or copy" in verdicts[4].verdict_text


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


def test_owner_is_shared_for_views_and_copy_for_materialize() -> None:
    scope = {"base": seed_fixture()}
    assert run("base.slice(1, 1, 3)", scope).truth("owner") == "shared"
    assert run("base.slice(1, 1, 3).materialize()", scope).truth("owner") == "copy"


def test_values_compare_numerically_and_accept_a_flat_list() -> None:
    outcome = run("base.reshape([3, 2])", {"base": seed_fixture()})
    assert compare({"values": "[[10, 11], [12, 20], [21, 22]]"}, outcome)[0].status == "right"
    flat = compare({"values": "10, 11, 12, 20, 21, 22"}, outcome)[0]
    assert (flat.status, flat.verdict_text) == ("right", "✓ right (flattened)")
    assert compare({"values": "[[10, 20], [11, 21], [12, 22]]"}, outcome)[0].status == "wrong"


def test_check_prints_prediction_truth_and_verdict_and_waits_for_unanswered_fields() -> None:
    base = seed_fixture()
    prediction = predict("base.reshape([3, 2])", shape=[3, 2], strides=None, offsets=[0, 3, 1])
    text = repr(check(prediction, {"base": base}))
    lines = text.splitlines()
    assert lines[0] == "run: base.reshape([3, 2])"
    assert lines[3].split() == ["shape", "[3,", "2]", "[3,", "2]", "✓", "right"]
    assert lines[4].split()[-3:] == ["not", "answered", "yet"]
    assert lines[5].endswith("✗ wrong")
    assert lines[6] == "1 of 2 answered fields right; 1 not answered yet"
    assert "coordinate  offset  value" in text


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
    assert "nothing answered yet" in repr(comparison)


def test_check_shows_the_mapping_of_a_copy() -> None:
    text = repr(check(predict("base.slice(1, 1, 3).materialize()"), {"base": seed_fixture()}))
    assert "new offsets [0, 1, 2, 3] -> source offsets [1, 2, 4, 5]" in text


def test_check_takes_only_a_prediction() -> None:
    with pytest.raises(PredictionError, match="check\\(\\) takes what predict"):
        check({"shape": [3, 2]})  # type: ignore[arg-type]


def test_callables_work_as_expressions() -> None:
    base = seed_fixture()
    prediction = predict(lambda: base.transpose(0, 1), label="base.transpose(0, 1)", owner="shared")
    assert isinstance(prediction, Prediction)
    comparison = check(prediction)
    assert comparison.all_right and repr(comparison).startswith("run: base.transpose(0, 1)")


def test_an_exercise_id_records_the_attempt(attempts_log: Path) -> None:
    base = seed_fixture()
    prediction = predict(
        "base.transpose(0, 1)", exercise_id="ch02.q1", shape="3,2", strides="2,1", offsets=None
    )
    comparison = check(prediction, {"base": base})
    assert comparison.recorded
    (line,) = attempts_log.read_text().splitlines()
    record = json.loads(line)
    assert record["exercise"] == "ch02.q1"
    assert record["fields"] == {"shape": True, "strides": False}
    assert record["answers"] == {"shape": "[3, 2]", "strides": "[2, 1]"}


def test_nothing_answered_records_nothing(attempts_log: Path) -> None:
    prediction = predict("base.view()", exercise_id="ch02.q1", shape=None)
    assert not check(prediction, {"base": seed_fixture()}).recorded
    assert not attempts_log.exists()


def test_an_unknown_exercise_id_is_a_course_error(attempts_log: Path) -> None:
    prediction = predict("base.view()", exercise_id="ch02.nope", shape="2,3")
    with pytest.raises(CourseError, match=r"ch02\.nope"):
        check(prediction, {"base": seed_fixture()})


def test_long_truths_are_shown_with_their_first_and_last_entries() -> None:
    from llmfs.tensor import Tensor

    outcome = run("big.reshape([100, 100]).transpose(0, 1)", {"big": Tensor.arange(10_000)})
    (verdict,) = compare({"offsets": "0, 100"}, outcome)
    assert verdict.status == "wrong"
    assert (
        verdict.truth
        == "[0, 100, 200, 300, 400, 500, 600, 700, … 9988 more …, 9699, 9799, 9899, 9999]"
    )
