"""The words of a comparison: the question, what is still missing, and the teaching lines under
a wrong field. The widgets lay these out as text and HTML (with the result's offset table); the
engine's own plain text (:func:`plain_text`) uses them without any drawing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmfs.course.exercises.entries import NOT_ANSWERED
from llmfs.course.exercises.judge import Verdict

if TYPE_CHECKING:
    from llmfs.course.exercises.api import Comparison


def question(comparison: Comparison) -> str:
    """``ch02.q1: predict shape, strides of view.reshape([3, 2])``."""
    fields = ", ".join(v.label for v in comparison.verdicts)
    head = f"{comparison.exercise_id}: " if comparison.exercise_id else ""
    return f"{head}predict {fields} of {comparison.outcome.label}"


def missing_lines(comparison: Comparison) -> list[str]:
    """One line per field still to answer or that could not be read (nothing of the truth)."""
    lines = []
    for v in comparison.verdicts:
        if v.status == "unanswered":
            lines.append(f"  {v.label}: {NOT_ANSWERED}")
        elif v.status == "unreadable":
            lines.append(f"  {v.label}: could not read {v.predicted!r} ({v.note})")
    return lines


def feedback_lines(verdict: Verdict, tries_left: int | None) -> list[str]:
    """The teaching lines under a wrong field: which entries differ, the misconceptions, and
    the tries left before the answer is shown (or the answer, once revealed)."""
    lines: list[str] = []
    if verdict.status != "wrong":
        return lines
    if verdict.differs:
        lines.append(verdict.differs)
    lines.extend(verdict.mistakes)
    if verdict.revealed:
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
    """A comparison as plain lines, without tables or the result's drawing: the question, then
    the missing fields (incomplete) or one line per field with its feedback (complete)."""
    lines = [question(comparison)]
    if not comparison.complete:
        lines.append("still to answer:")
        lines += missing_lines(comparison)
        lines += [f"  {v.label} (revealed): {v.truth}" for v in comparison.verdicts if v.revealed]
        lines.append("(nothing is checked until every field has an answer)")
        return "\n".join(lines)
    left = comparison.tries_left or {}
    for v in comparison.verdicts:
        lines.append(f"  {v.label}: {v.predicted} ({v.verdict_text}; answer: {v.shown_truth})")
        lines += [f"    {line}" for line in feedback_lines(v, left.get(v.field))]
    return "\n".join(lines)


__all__ = ["feedback_lines", "missing_lines", "plain_text", "question", "verdict_rows"]
