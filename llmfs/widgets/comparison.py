"""Drawing a comparison: what ``check(...)`` shows, as text and as HTML, verdict first.

The exercise engine (:mod:`llmfs.course.exercises`) decides every verdict and writes every
teaching line (:mod:`~llmfs.course.exercises.feedback`); this module lays them out and adds the
result's offset table (or the refusal) once every field is right or revealed. Importing it
installs the drawing into :class:`~llmfs.course.exercises.api.Comparison`
(:func:`~llmfs.course.exercises.api.draw_with`), which :mod:`llmfs.widgets` does on import.

The output is a plain mime bundle (``text/plain`` and ``text/html``, no ipywidget), so it is
saved in the notebook and reads the same after a kernel restart, with the kernel closed and in
a static export. The HTML reads at 900 px: the headline and each field's line come first, every
line wraps, and only the result's offset table (narrow, under the verdicts) is a table.
"""

from __future__ import annotations

from html import escape

from llmfs.course.exercises.api import Comparison, draw_with
from llmfs.course.exercises.feedback import (
    explanations,
    feedback_lines,
    field_line,
    headline,
    missing_lines,
    plain_text,
    question,
)
from llmfs.course.exercises.state import exercise_state
from llmfs.widgets.html import (
    mark,
    markdown_html,
    render_mapping_html,
    render_offsets_html,
    wrap,
)
from llmfs.widgets.text import REJECTED_MARK, render_mapping, render_offsets


def _status(comparison: Comparison) -> str:
    if not comparison.complete:
        return "unanswered"
    return "right" if comparison.all_right else "wrong"


def render_comparison_text(comparison: Comparison) -> str:
    """A comparison as text: :func:`~llmfs.course.exercises.feedback.plain_text` (headline,
    question, a line per field with its teaching lines), then, once every field is right or
    revealed, the result's offset table (or the refusal)."""
    parts = [plain_text(comparison)]
    outcome = comparison.outcome
    if not comparison.finished or outcome.row is None:
        return "\n".join(parts)
    row = outcome.row
    if row.rejected:
        parts.append(f"{REJECTED_MARK} rejected: violated {row.condition} ({row.error})")
        parts.append(f"  {row.message}")
    elif outcome.view is not None:
        parts.append("")
        parts.append(render_offsets(outcome.view, row.owner or "base"))
        if row.mapping is not None:
            parts.append("")
            parts.append(render_mapping(row))
    return "\n".join(parts)


def render_comparison_html(comparison: Comparison) -> str:
    """The same content as :func:`render_comparison_text`, as wrapped HTML: a headline marked
    with the overall status, the question, one list item per field (``data-field`` and
    ``data-status``) with its teaching lines, then, once finished, the chapter's explanation
    (markdown, rendered) and the result."""
    status = _status(comparison)
    parts = [
        f'<p class="llmfs-verdict llmfs-headline" data-status="{status}">'
        f"<strong>{escape(headline(comparison))}</strong></p>",
        f'<p class="llmfs-question">{escape(question(comparison))}</p>',
    ]
    if not comparison.complete:
        items = "".join(f"<li>{escape(line.strip())}</li>" for line in missing_lines(comparison))
        items += "".join(
            f"<li>{escape(v.label)} (revealed): <code>{escape(v.truth)}</code></li>"
            for v in comparison.verdicts
            if v.revealed
        )
        parts.append(
            f'<div class="llmfs-missing"><p>still to answer:</p><ul>{items}</ul>'
            "<p>(nothing is checked until every field has an answer)</p></div>"
        )
        return wrap("llmfs-comparison", "".join(parts))
    left = comparison.tries_left or {}
    fields = []
    for v in comparison.verdicts:
        lines = feedback_lines(v, left.get(v.field), reveals=comparison.reveals)
        notes = "".join(f"<li>{escape(line)}</li>" for line in lines)
        fields.append(
            f'<li data-field="{escape(v.field)}" data-status="{v.status}">'
            f"{escape(field_line(v))}{f'<ul>{notes}</ul>' if notes else ''}</li>"
        )
    parts.append(f'<ul class="llmfs-fields">{"".join(fields)}</ul>')
    parts.extend(
        f'<div class="llmfs-explanation">{markdown_html(text)}</div>'
        for text in explanations(comparison)
    )
    outcome = comparison.outcome
    if comparison.finished and outcome.row is not None:
        row = outcome.row
        if row.rejected:
            parts.append(
                f'<p data-status="rejected">{mark("rejected")} rejected: violated '
                f"<strong>{escape(row.condition or '')}</strong> (<code>"
                f"{escape(row.error or '')}</code>)<br><small>{escape(row.message or '')}"
                "</small></p>"
            )
        elif outcome.view is not None:
            parts.append(render_offsets_html(outcome.view, row.owner or "base"))
            parts.append(render_mapping_html(row))
    return wrap("llmfs-comparison", "".join(parts))


class PredictThenRun:
    """What an exercise's latest ``check`` in this kernel showed, for notebooks saved with the
    earlier answer widget: it has no input of its own (the answer is the exercise's
    ``predict(...)`` cell, the one record), so it only points there, or repeats that check.

    Static output (text and HTML, no ipywidget). Accepts the old widget's arguments and ignores
    all but ``exercise_id``.
    """

    def __init__(self, expression: object = None, fields: object = None, **options: object) -> None:
        exercise_id = options.get("exercise_id")
        self.exercise_id = exercise_id if isinstance(exercise_id, str) else None

    def _last(self) -> Comparison | None:
        if self.exercise_id is None:
            return None
        return exercise_state(self.exercise_id).last

    def __repr__(self) -> str:
        last = self._last()
        if last is not None:
            return render_comparison_text(last)
        which = f"{self.exercise_id}: " if self.exercise_id else ""
        return (
            f"{which}answer in the exercise's predict(...) cell (replace each None), then run "
            "its check(...) cell: the cell's text is your answer, saved with the notebook"
        )

    def _repr_html_(self) -> str:
        last = self._last()
        if last is not None:
            return render_comparison_html(last)
        return wrap("llmfs-comparison", f'<p class="llmfs-question">{escape(repr(self))}</p>')


draw_with(render_comparison_text, render_comparison_html)

__all__ = ["PredictThenRun", "render_comparison_html", "render_comparison_text"]
