"""The syntax of an expression: every malformed one is an EinsumError pointing at the character."""

from __future__ import annotations

import pytest

from llmfs.tensor import (
    einsum,
)

from .support import error_of, rand


@pytest.mark.parametrize(
    ("expression", "label", "position", "text"),
    [
        ("i1->i", "1", 1, "'1' in operand 0's term is not a label"),
        ("i j,jk", None, None, None),  # spaces are ignored: not an error
        ("ij->i->j", "->", 5, "'->' may appear only once"),
        ("i-j", "-", 1, "'-' is only allowed as part of one arrow '->'"),
        ("i>j", ">", 1, "'>' is only allowed as part of one arrow '->'"),
        ("i..j", ".", 1, "a '.' in operand 0's term must be part of an ellipsis '...'"),
        ("......", "...", 3, "'...' may appear only once in operand 0's term"),
        ("ij->i,j", ",", 5, "the output after '->' is one term and may not contain ','"),
        ("ij->i.", ".", 5, "a '.' in the output must be part of an ellipsis"),
    ],
)
def test_syntax_errors_point_at_the_character(
    expression: str, label: str | None, position: int | None, text: str | None
) -> None:
    operands = [rand(2, 2)] * expression.split("->")[0].count(",") + [rand(2, 2)]
    if text is None:
        einsum(expression, *operands)
        return
    error = error_of(expression, *operands)
    assert (error.label, error.position) == (label, position)
    assert text in str(error)
    caret_line = str(error).splitlines()[-1]
    assert caret_line.index("^") - 3 == position  # under the character, past "  '"


def test_the_expression_must_be_a_string() -> None:
    error = error_of(42, rand(2))  # type: ignore[arg-type]
    assert "must be a string, got int" in str(error)


def test_output_labels_must_be_unique() -> None:
    error = error_of("ij->ii", rand(2, 2))
    assert (error.label, error.position) == ("i", 5)
    assert "output label 'i' appears more than once" in str(error)
