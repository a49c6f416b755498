"""The syntax of an einsum expression: terms of labels, one optional arrow, one output term.

``"bij,bjk->bik"`` has one comma-separated *term* per input operand and, after ``->``, the output
term. A term is a run of *labels*: the case-sensitive ASCII letters ``a-z`` and ``A-Z``, plus at
most one ``...`` standing for any number of axes. Spaces are ignored. Without ``->`` the output is
implicit (see :mod:`llmfs.tensor.einsum.labels`). An empty term labels a scalar (rank-0) operand.

This module checks only what can be checked without operands: characters, ellipses, the arrow,
and that no output label repeats. Every violation is an :class:`EinsumError` whose ``position``
is the offending character, so the message can point at it with a caret.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from llmfs.tensor.errors import EinsumError

#: The characters that are labels.
LABELS = string.ascii_letters
#: The label that stands for any number of axes.
ELLIPSIS = "..."


@dataclass(frozen=True)
class Term:
    """One comma-separated part of an expression: its labels (letters, and ``"..."`` at most
    once) and where each one starts in the expression (for error carets)."""

    labels: tuple[str, ...]
    positions: tuple[int, ...]
    start: int
    text: str

    @property
    def named(self) -> tuple[str, ...]:
        """The letter labels, without the ellipsis."""
        return tuple(label for label in self.labels if label != ELLIPSIS)

    @property
    def has_ellipsis(self) -> bool:
        """True when the term contains ``...``."""
        return ELLIPSIS in self.labels


@dataclass(frozen=True)
class ParsedExpression:
    """An expression split into input terms and the output term (``None``: implicit output)."""

    expression: str
    inputs: tuple[Term, ...]
    output: Term | None


def _scan(expression: str, start: int, end: int, where: str, operand: int | None) -> Term:
    labels: list[str] = []
    positions: list[int] = []
    i = start
    while i < end:
        char = expression[i]
        if char in LABELS:
            labels.append(char)
            positions.append(i)
            i += 1
        elif char == ".":
            if expression[i : i + 3] != ELLIPSIS or i + 3 > end:
                raise EinsumError(
                    expression,
                    f"a '.' in {where} must be part of an ellipsis '...'",
                    operand=operand,
                    label=".",
                    position=i,
                )
            if ELLIPSIS in labels:
                raise EinsumError(
                    expression,
                    f"'...' may appear only once in {where}",
                    operand=operand,
                    label=ELLIPSIS,
                    position=i,
                )
            labels.append(ELLIPSIS)
            positions.append(i)
            i += 3
        elif char.isspace():
            i += 1
        elif char in "->":
            raise EinsumError(
                expression,
                f"{char!r} is only allowed as part of one arrow '->'",
                operand=operand,
                label=char,
                position=i,
            )
        else:
            raise EinsumError(
                expression,
                f"{char!r} in {where} is not a label: labels are the ASCII letters a-z and A-Z "
                f"(case-sensitive), plus one optional '...'",
                operand=operand,
                label=char,
                position=i,
            )
    return Term(tuple(labels), tuple(positions), start, expression[start:end])


def parse_expression(expression: object) -> ParsedExpression:
    """Splits and checks an expression's syntax (no operands needed).

    Raises :class:`EinsumError` for a non-string, more than one ``->``, a stray ``-``/``>``/``.``,
    a character that is not a label, two ellipses in one term, a ``,`` in the output, or a
    repeated output label (output labels are unique).
    """
    if not isinstance(expression, str):
        raise EinsumError(
            repr(expression), f"the expression must be a string, got {type(expression).__name__}"
        )
    arrow = expression.find("->")
    if arrow >= 0:
        second = expression.find("->", arrow + 2)
        if second >= 0:
            raise EinsumError(expression, "'->' may appear only once", label="->", position=second)
    lhs_end = arrow if arrow >= 0 else len(expression)
    inputs: list[Term] = []
    start = 0
    for index, part in enumerate(expression[:lhs_end].split(",")):
        end = start + len(part)
        inputs.append(_scan(expression, start, end, f"operand {index}'s term", index))
        start = end + 1
    output = None
    if arrow >= 0:
        output_start = arrow + 2
        comma = expression.find(",", output_start)
        if comma >= 0:
            raise EinsumError(
                expression,
                "the output after '->' is one term and may not contain ','",
                label=",",
                position=comma,
            )
        output = _scan(expression, output_start, len(expression), "the output", None)
        seen: set[str] = set()
        for label, position in zip(output.labels, output.positions):
            if label in seen:
                raise EinsumError(
                    expression,
                    f"output label {label!r} appears more than once (output labels are unique)",
                    label=label,
                    position=position,
                )
            seen.add(label)
    return ParsedExpression(expression, tuple(inputs), output)


__all__ = ["ELLIPSIS", "LABELS", "ParsedExpression", "Term", "parse_expression"]
