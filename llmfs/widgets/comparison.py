"""Drawing a comparison: the verdict table of ``check(...)`` as fixed-width text and as HTML,
with the result's offset table once every field is right or revealed.

The exercise engine (:mod:`llmfs.course.exercises`) decides every verdict and writes every
teaching line; this module only lays them out. Importing it installs the drawing into
:class:`~llmfs.course.exercises.api.Comparison` (:func:`~llmfs.course.exercises.api.draw_with`),
which :mod:`llmfs.widgets` does on import, so a notebook's ``check(q1)`` shows the tables.
"""

from __future__ import annotations

from llmfs.course.exercises.api import Comparison, draw_with
from llmfs.course.exercises.feedback import feedback_lines, missing_lines, question, verdict_rows
from llmfs.widgets.html import mark, render_mapping_html, render_offsets_html, wrap
from llmfs.widgets.text import REJECTED_MARK, render_mapping, render_offsets, table, tally


def render_comparison_text(comparison: Comparison) -> str:
    """A comparison as text. Incomplete: the question and the missing fields only. Complete:
    one row per field, the feedback of each wrong field, and, when every field is right or
    revealed, the offset table of the result (or the refusal)."""
    parts = [question(comparison)]
    if not comparison.complete:
        parts.append("still to answer:")
        parts += missing_lines(comparison)
        if any(v.revealed for v in comparison.verdicts):
            parts += [
                f"  {v.label} (revealed): {v.truth}" for v in comparison.verdicts if v.revealed
            ]
        parts.append("(nothing is checked until every field has an answer)")
        return "\n".join(parts)
    parts.append(table(("field", "your prediction", "answer", "verdict"), verdict_rows(comparison)))
    left = comparison.tries_left or {}
    for v in comparison.verdicts:
        for line in feedback_lines(v, left.get(v.field)):
            parts.append(f"  {v.label}: {line}")
    parts.append(tally(comparison.verdicts))
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
    """The same content as :func:`render_comparison_text`, as HTML."""
    from html import escape

    parts = [f"<p>{escape(question(comparison))}</p>"]
    if not comparison.complete:
        items = "".join(f"<li>{escape(line.strip())}</li>" for line in missing_lines(comparison))
        items += "".join(
            f"<li>{escape(v.label)} (revealed): {escape(v.truth)}</li>"
            for v in comparison.verdicts
            if v.revealed
        )
        parts.append(
            f'<div class="llmfs-missing"><p>still to answer:</p><ul>{items}</ul>'
            "<p>(nothing is checked until every field has an answer)</p></div>"
        )
        return wrap("llmfs-comparison", "".join(parts))
    left = comparison.tries_left or {}
    rows = []
    for v in comparison.verdicts:
        notes = "".join(
            f"<br><small>{escape(line)}</small>" for line in feedback_lines(v, left.get(v.field))
        )
        rows.append(
            f'<tr data-field="{escape(v.field)}" data-status="{v.status}">'
            f"<td>{escape(v.label)}</td><td><code>{escape(v.predicted)}</code></td>"
            f"<td><code>{escape(v.shown_truth)}</code></td>"
            f"<td>{escape(v.verdict_text)}{notes}</td></tr>"
        )
    parts.append(
        '<table class="llmfs-verdicts"><thead><tr><th>field</th><th>your prediction</th>'
        f"<th>answer</th><th>verdict</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f"<p>{escape(tally(comparison.verdicts))}</p>"
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


draw_with(render_comparison_text, render_comparison_html)

__all__ = ["render_comparison_html", "render_comparison_text"]
