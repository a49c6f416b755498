"""The drawing of check(...): verdict first, wrapped lines, hidden truths, and the result's
offset table once every field is right or revealed."""

from __future__ import annotations

import json
from pathlib import Path

from llmfs.widgets import check, predict
from llmfs.widgets.examples import seed_fixture
from tests.course.exercises.exercisekit import RIGHT, WRONG, WRONGS


def test_a_complete_check_puts_the_verdict_first_and_hides_the_truth_of_wrong_fields() -> None:
    base = seed_fixture()
    prediction = predict(
        "base.reshape([3, 2])", shape=[3, 2], strides=[1, 3], offsets="0 1 2 3 4 5"
    )
    comparison = check(prediction, {"base": base})
    lines = repr(comparison).splitlines()
    assert lines[:4] == [
        "2 of 3 fields right: try the ✗ fields again",
        "predict shape, strides, logical offsets of base.reshape([3, 2])",
        "  ✓ shape: [3, 2]",
        "  ✗ strides: [1, 3]",
    ]
    assert "      the entries at positions 0, 1 differ" in lines
    assert "[2, 1]" not in repr(comparison) and "[2, 1]" not in comparison._repr_html_()
    assert "coordinate  offset  value" not in repr(comparison)  # the result gives it away
    right = check(predict("base.reshape([3, 2])", strides=[2, 1]), {"base": base})
    assert repr(right).startswith("✓ right\n")
    assert "coordinate  offset  value" in repr(right)


def test_every_text_line_fits_the_text_width_and_the_html_has_no_verdict_table() -> None:
    # A long teaching line wraps under its field, so a 900-pixel output shows all of it.
    base = seed_fixture()
    comparison = check(
        predict("base.transpose(0, 1)", strides=[2, 1], offsets=[0, 1, 2, 3, 4, 5]),
        {"base": base},
    )
    text = repr(comparison)
    assert "row-major strides of the result's shape" in text
    assert max(len(line) for line in text.splitlines()) <= 88
    html = comparison._repr_html_()
    assert "<table" not in html  # no table before the exercise is finished
    assert html.index("llmfs-headline") < html.index("llmfs-fields")


def test_a_partly_answered_check_shows_the_question_and_nothing_of_the_truth() -> None:
    prediction = predict("base.transpose(0, 1)", shape=[3, 2], strides=None, offsets="")
    comparison = check(prediction, {"base": seed_fixture()})
    text = repr(comparison)
    assert not comparison.complete and not comparison.recorded
    assert text.splitlines() == [
        "not checked yet: 2 of 3 fields still to answer",
        "predict shape, strides, logical offsets of base.transpose(0, 1)",
        "still to answer:",
        "  strides: not answered yet",
        "  logical offsets: not answered yet",
        "(nothing is checked until every field has an answer)",
    ]
    html = comparison._repr_html_()
    for truth in ("[1, 3]", "[0, 3, 1, 4, 2, 5]", "✓", "✗", "coordinate"):
        assert truth not in text and truth not in html


def test_check_shows_the_mapping_of_a_copy() -> None:
    prediction = predict("base.slice(1, 1, 3).materialize()", owner="new")
    text = repr(check(prediction, {"base": seed_fixture()}))
    assert "new offsets [0, 1, 2, 3] -> source offsets [1, 2, 4, 5]" in text


def test_wrong_fields_can_be_retried_and_are_revealed_after_three_wrong_tries(
    attempts_log: Path,
) -> None:
    scope = {"base": seed_fixture()}
    for attempt in (1, 2):
        wrong = WRONGS[attempt - 1]
        comparison = check(predict("base.transpose(0, 1)", exercise_id="ch02.q1", **wrong), scope)
        text = repr(comparison)
        assert "[1, 3]" not in text and f"✗ strides: {wrong['strides']}" in text
        assert f"{3 - attempt} more wrong tr" in text
    third = check(predict("base.transpose(0, 1)", exercise_id="ch02.q1", **WRONGS[2]), scope)
    lines = repr(third).splitlines()
    assert lines[0] == "ch02.q1: 1 of 3 fields right; the answers of the others are shown"
    assert "  ✗ strides: [1, 2]" in lines and "      answer: [1, 3]" in lines
    assert "      answer: [0, 3, 1, 4, 2, 5]" in lines
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
    assert "      answer: [1, 3]" in repr(check(prediction, scope, max_tries=1)).splitlines()


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
