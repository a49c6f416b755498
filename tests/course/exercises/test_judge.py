"""The one comparison: one verdict per field, errors by name, values by number."""

from __future__ import annotations

import pytest
from exercisekit import RIGHT, seed_fixture

from llmfs.course.exercises.judge import compare
from llmfs.course.exercises.run import run


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


def test_a_parent_error_class_counts_as_right() -> None:
    outcome = run("base.reshape([4, 2])", {"base": seed_fixture()})
    assert compare({"error": "ElementCountMismatchError"}, outcome)[0].status == "right"
    assert compare({"error": "TensorError"}, outcome)[0].status == "wrong"


def test_values_compare_numerically_and_accept_a_flat_list() -> None:
    outcome = run("base.reshape([3, 2])", {"base": seed_fixture()})
    assert compare({"values": "[[10, 11], [12, 20], [21, 22]]"}, outcome)[0].status == "right"
    flat = compare({"values": "10, 11, 12, 20, 21, 22"}, outcome)[0]
    assert (flat.status, flat.verdict_text) == ("right", "✓ right (flattened)")
    assert compare({"values": "[[10, 20], [11, 21], [12, 22]]"}, outcome)[0].status == "wrong"


def test_long_truths_are_shown_with_their_first_and_last_entries() -> None:
    from llmfs.tensor import Tensor

    outcome = run("big.reshape([100, 100]).transpose(0, 1)", {"big": Tensor.arange(10_000)})
    (verdict,) = compare({"offsets": "0, 100"}, outcome)
    assert verdict.status == "wrong"
    assert (
        verdict.truth
        == "[0, 100, 200, 300, 400, 500, 600, 700, … 9988 more …, 9699, 9799, 9899, 9999]"
    )


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


def test_a_correct_answer_never_gets_a_misconception_message() -> None:
    verdicts = compare(RIGHT, run("base.transpose(0, 1)", {"base": seed_fixture()}))
    assert all(v.status == "right" and not v.mistakes for v in verdicts)
