"""Plain-text renderer of the table model: fixed-width tables for terminals and notebook validation.

Everything here is deterministic: the same model always gives the same characters (owner names,
never addresses; no trailing spaces). These strings are the ``repr`` of the model objects and of
the widgets, so they are what notebook validation compares.

Nothing relies on colour: the owner column shows ``◇`` (shares an existing owner's storage) or
``◆`` (a new owner) next to the owner's name, contiguity is spelled ``Yes``/``No``, a refused
request is marked ``×`` with the violated condition, and verdicts say ``right``/``wrong``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from llmfs.course.exercises.rows import (
    NEW_OWNER_MARK,
    REJECTED_MARK,
    SHARED_MARK,
    Sampled,
    TraceRow,
    format_number,
)
from llmfs.course.exercises.tables import (
    describe_view,
    format_ints,
    render_offsets,
    render_strip,
    storage_readers,
    table,
    yes_no,
)

if TYPE_CHECKING:
    # model.py shows a Trace through these renderers, so it imports them.
    from llmfs.widgets.model import Trace

LEGEND = (
    f"{SHARED_MARK} reads the storage of an existing owner   {NEW_OWNER_MARK} new owner (a copy)   "
    f"{REJECTED_MARK} rejected request"
)

TRACE_HEADERS = (
    "step",
    "owner",
    "shape",
    "strides",
    "base offset",
    "contiguous",
    "offsets",
    "values",
)


def format_sampled(
    sampled: Sampled | None, item: Callable[[Any], str] = str, *, short: bool = False
) -> str:
    """``[a, b, c]``, or for a long sequence ``[a, ..., h, … 988 more …, w, x, y, z]``.

    ``short`` keeps only the first 4 and last 2 of a long sequence (for table cells).
    """
    if sampled is None:
        return "—"
    if sampled.complete:
        return "[" + ", ".join(item(v) for v in sampled.head) + "]"
    head = list(sampled.head[:4] if short else sampled.head)
    tail = list(sampled.tail[-2:] if short else sampled.tail)
    omitted = sampled.total - len(head) - len(tail)
    cells = [*(item(v) for v in head), f"… {omitted} more …", *(item(v) for v in tail)]
    return "[" + ", ".join(cells) + "]"


def format_nested(values: Any) -> str:
    """Nested lists of numbers as learners write them: ``[[10, 11], [12, 20]]``."""
    if isinstance(values, list):
        return "[" + ", ".join(format_nested(v) for v in values) + "]"
    return format_number(values)


def format_values(row: TraceRow) -> str:
    """A row's values: nested lists when short, else the first and last values and a count."""
    if row.nested_values is not None:
        return format_nested(row.nested_values)
    if row.values is None:
        return "—"
    return format_sampled(row.values, format_number, short=True) + f" ({row.values.total} values)"


def owner_cell(row: TraceRow) -> str:
    """``◇ base``, ``◆ copy 1`` or ``× rejected``."""
    if row.rejected:
        return f"{REJECTED_MARK} rejected"
    return f"{row.marker} {row.owner}"


def trace_cells(row: TraceRow) -> list[str]:
    """The cells of one trace row, in :data:`TRACE_HEADERS` order (a rejected row has three: the
    step, the mark, and the violated condition with the error class)."""
    if row.rejected:
        return [row.label, owner_cell(row), f"violated: {row.condition} ({row.error})"]
    return [
        row.label,
        owner_cell(row),
        format_ints(row.shape),
        format_ints(row.strides),
        str(row.base_offset),
        yes_no(row.contiguous),
        format_sampled(row.offsets, short=True),
        format_values(row),
    ]


def render_trace(trace: Trace) -> str:
    """The whole trace table, the legend, then one mapping table per copy with a known source."""
    parts = []
    if trace.title:
        parts.append(trace.title)
    parts.append(table(TRACE_HEADERS, [trace_cells(row) for row in trace.rows]))
    parts.append(LEGEND)
    text = "\n".join(parts)
    for row in trace.copies:
        text += "\n\n" + render_mapping(row)
    return text


def render_mapping(row: TraceRow) -> str:
    """The mapping table of a copy: each new offset and the source offset its value came from."""
    if row.mapping is None:
        return f"{row.label}: no mapping (the source of this copy is not known)"
    source = row.mapping_source
    heading = f"mapping {NEW_OWNER_MARK} {row.owner} <- {SHARED_MARK} {source}  ({row.label})"
    headers = (f"new offset in {row.owner}", f"source offset in {row.mapping_source}")
    pairs = [[str(new), str(old)] for new, old in row.mapping.head]
    if not row.mapping.complete:
        pairs.append([f"… {row.mapping.omitted} more …", ""])
        pairs.extend([str(new), str(old)] for new, old in row.mapping.tail)
    new_offsets = format_sampled(Sampled(*_split(row.mapping, 0), row.mapping.total))
    old_offsets = format_sampled(Sampled(*_split(row.mapping, 1), row.mapping.total))
    summary = f"new offsets {new_offsets} -> source offsets {old_offsets}"
    return "\n".join([heading, table(headers, pairs), summary])


def _split(mapping: Sampled, side: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return tuple(p[side] for p in mapping.head), tuple(p[side] for p in mapping.tail)


def tally(verdicts: Sequence[Any]) -> str:
    """``2 of 3 answered fields right; 1 not answered yet`` (or ``nothing answered yet``)."""
    answered = [v for v in verdicts if v.answered]
    right = sum(1 for v in answered if v.status == "right")
    waiting = sum(1 for v in verdicts if v.status == "unanswered")
    unreadable = sum(1 for v in verdicts if v.status == "unreadable")
    text = (
        f"{right} of {len(answered)} answered fields right" if answered else "nothing answered yet"
    )
    if answered and waiting:
        text += f"; {waiting} not answered yet"
    if unreadable:
        text += f"; {unreadable} could not be read"
    return text


__all__ = [
    "LEGEND",
    "TRACE_HEADERS",
    "describe_view",
    "format_ints",
    "format_nested",
    "format_sampled",
    "format_values",
    "owner_cell",
    "render_mapping",
    "render_offsets",
    "render_strip",
    "render_trace",
    "storage_readers",
    "table",
    "tally",
    "trace_cells",
    "yes_no",
]
