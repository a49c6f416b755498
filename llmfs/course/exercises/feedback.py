"""The words of a comparison, verdict first: the headline, the question, one line per field and
the teaching lines under a wrong one (or, before a complete attempt, what is still missing), and,
once the exercise is finished, the chapter's explanation of its answer.

:func:`plain_text` is the whole comparison as wrapped lines (the ``text/plain`` of a ``check``);
the widgets lay the same words out as HTML and add the result's offset table once the exercise
is finished.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from llmfs.course.exercises.entries import NOT_ANSWERED, RIGHT_MARK, WRONG_MARK
from llmfs.course.exercises.explanations import explanations_for
from llmfs.course.exercises.judge import FieldVerdict
from llmfs.course.exercises.reveals import REVEALS_OFF

if TYPE_CHECKING:
    from llmfs.course.exercises.api import Comparison


#: Width of the plain-text form: a long teaching line wraps here, indented under its field.
TEXT_WIDTH = 88


def headline(comparison: Comparison) -> str:
    """The verdict first, in one line: ``ch02.q1: 2 of 3 fields right: try the ✗ fields
    again``, ``... ✓ all 3 fields right``, or, before a complete attempt, how many fields are
    still to answer (nothing of the truth)."""
    head = f"{comparison.exercise_id}: " if comparison.exercise_id else ""
    verdicts = comparison.verdicts
    count = len(verdicts)
    plural = "" if count == 1 else "s"
    if not comparison.complete:
        missing = sum(1 for v in verdicts if not v.answered)
        return f"{head}not checked yet: {missing} of {count} field{plural} still to answer"
    right = sum(1 for v in verdicts if v.status == "right")
    if right == count:
        return (
            f"{head}{RIGHT_MARK} all {count} field{plural} right"
            if count > 1
            else (f"{head}{RIGHT_MARK} right")
        )
    # A prediction already tried is shown again, not counted: the headline says so.
    again = " (already tried: not counted again)"
    again = again if comparison.repeated else ""
    if comparison.finished:
        return f"{head}{right} of {count} fields right; the answers of the others are shown{again}"
    return f"{head}{right} of {count} field{plural} right: try the {WRONG_MARK} fields again{again}"


def question(comparison: Comparison) -> str:
    """``predict shape, strides of view.reshape([3, 2])``."""
    fields = ", ".join(v.label for v in comparison.verdicts)
    return f"predict {fields} of {comparison.outcome.label}"


def field_line(verdict: FieldVerdict) -> str:
    """``✓ shape: [3, 2]`` or ``✗ strides: [2, 1]``: the field and what the learner gave (the
    truth of a wrong field is never here; :func:`feedback_lines` shows it once revealed)."""
    mark = RIGHT_MARK if verdict.status == "right" else WRONG_MARK
    note = f" ({verdict.note})" if verdict.note else ""
    return f"{mark} {verdict.label}: {verdict.predicted}{note}"


def missing_lines(comparison: Comparison) -> list[str]:
    """One line per field still to answer or that could not be read (nothing of the truth)."""
    lines = []
    for v in comparison.verdicts:
        if v.status == "unanswered":
            lines.append(f"  {v.label}: {NOT_ANSWERED}")
        elif v.status == "unreadable":
            lines.append(f"  {v.label}: could not read {v.predicted!r} ({v.note})")
    return lines


def feedback_lines(
    verdict: FieldVerdict, tries_left: int | None, *, reveals: bool = True
) -> list[str]:
    """The teaching lines under a wrong field: which entries differ, the misconceptions, and
    the tries left before the answer is shown (or the answer, once revealed). With ``reveals``
    False (graded work) no answer is ever shown, and the last line says so."""
    lines: list[str] = []
    if verdict.status != "wrong":
        return lines
    if verdict.differs:
        lines.append(verdict.differs)
    lines.extend(verdict.mistakes)
    if not reveals:
        lines.append(f"try again ({REVEALS_OFF}: no answer is shown; ask for a hint)")
    elif verdict.revealed:
        lines.append(f"answer: {verdict.truth}")
    elif tries_left is not None:
        lines.append(
            f"try again: {tries_left} more wrong tr{'y' if tries_left == 1 else 'ies'} "
            "before the answer is shown (or ask for a hint)"
        )
    return lines


def verdict_rows(comparison: Comparison) -> list[list[str]]:
    """``field, your prediction, answer, verdict`` rows; the answer is ``hidden`` until the
    field is right or revealed."""
    return [[v.label, v.predicted, v.shown_truth, v.verdict_text] for v in comparison.verdicts]


def plain_text(comparison: Comparison) -> str:
    """A comparison as plain lines, verdict first: the :func:`headline`, the :func:`question`,
    then the missing fields (incomplete) or one :func:`field_line` per field with its teaching
    lines under it, wrapped at :data:`TEXT_WIDTH` (complete). No table, nothing of the result:
    the widgets add the result's offset table once the exercise is finished."""
    lines = textwrap.wrap(headline(comparison), TEXT_WIDTH, subsequent_indent="  ")
    lines.append(question(comparison))
    if not comparison.complete:
        lines.append("still to answer:")
        lines += missing_lines(comparison)
        lines += [f"  {v.label} (revealed): {v.truth}" for v in comparison.verdicts if v.revealed]
        lines.append("(nothing is checked until every field has an answer)")
        return "\n".join(lines)
    left = comparison.tries_left or {}
    for v in comparison.verdicts:
        lines += textwrap.wrap(
            field_line(v), TEXT_WIDTH, initial_indent="  ", subsequent_indent="      "
        )
        for line in feedback_lines(v, left.get(v.field), reveals=comparison.reveals):
            lines += textwrap.wrap(
                line, TEXT_WIDTH, initial_indent="      ", subsequent_indent="      "
            )
    for text in explanations(comparison):
        lines += ["", *text.strip().splitlines()]
    return "\n".join(lines)


def explanations(comparison: Comparison) -> tuple[str, ...]:
    """The chapter's explanations of the exercise (markdown), once the comparison finished it
    (every field right or revealed): they state the answer, so they never show before
    (:mod:`~llmfs.course.exercises.explanations`)."""
    return explanations_for(comparison.exercise_id, comparison.complete and comparison.finished)


__all__ = [
    "TEXT_WIDTH",
    "explanations",
    "feedback_lines",
    "field_line",
    "headline",
    "missing_lines",
    "plain_text",
    "question",
    "verdict_rows",
]
