"""Reading what a learner types: forgiving for lists and words, a message for what is not read."""

from __future__ import annotations

import pytest

from llmfs.course.exercises.entries import UnreadableEntry, normalize, plain_value


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


def test_a_plain_answer_may_be_a_bare_name_but_other_text_must_be_a_literal() -> None:
    assert plain_value("KernelMemoryError") == "KernelMemoryError"
    assert plain_value(" none ") == "none"
    assert plain_value("[6, 7]") == [6, 7]
    assert plain_value("yes") is True
    with pytest.raises(UnreadableEntry, match="could not read"):
        plain_value("six and seven")
