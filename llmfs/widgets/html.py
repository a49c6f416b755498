"""HTML renderer of the table model, for notebooks and the ipywidgets layer.

Accessible table markup: a ``<caption>``, column headers ``<th scope="col">``, each step's label
as a row header ``<th scope="row">``. Nothing relies on colour: marks are glyphs with words
(``◇`` shared, ``◆`` new owner, ``×`` rejected with the violated condition; ``✓ right`` /
``✗ wrong``), each also carrying an ``aria-label``. Colours and borders are inline styles only
(no scripts), so the markup renders the same in JupyterLab outputs and in ipywidgets ``HTML``.

Every cell carries ``data-*`` attributes (``data-field``, ``data-status``, ``data-offset``...) so
tests can read the DOM without parsing styles. Output is deterministic (no ids, no addresses).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from llmfs.tensor import Tensor, TensorView
from llmfs.widgets.rows import (
    FULL_LIMIT,
    NEW_OWNER_MARK,
    REJECTED_MARK,
    SHARED_MARK,
    TraceRow,
    format_number,
    offset_entries,
)
from llmfs.widgets.text import (
    TRACE_HEADERS,
    format_ints,
    format_sampled,
    format_values,
    storage_readers,
    tally,
    yes_no,
)

if TYPE_CHECKING:
    # model.py shows a Trace through these renderers, so it imports them.
    from llmfs.widgets.model import Trace

TABLE_STYLE = "border-collapse:collapse;font-family:monospace;font-size:13px;margin:4px 0"
CELL_STYLE = "border:1px solid #888;padding:2px 8px;text-align:left;vertical-align:top"
HEAD_STYLE = CELL_STYLE + ";background:#eee"
MARK_WORDS = {
    "shared": "shared storage of an existing owner",
    "copy": "new owner (a copy)",
    "rejected": "rejected request",
}
VERDICT_STYLE = {
    "right": "background:#e3f4e3",
    "wrong": "background:#fbe3e3",
    "unanswered": "background:#f4f4f4",
    "unreadable": "background:#fff4d6",
}


def _th(text: str, scope: str = "col", extra: str = "") -> str:
    return f'<th scope="{scope}" style="{HEAD_STYLE}"{extra}>{text}</th>'


def _td(text: str, extra: str = "", style: str = "") -> str:
    css = CELL_STYLE + (";" + style if style else "")
    return f'<td style="{css}"{extra}>{text}</td>'


def mark(status: str) -> str:
    """The glyph of a row status with its words as ``aria-label`` and ``title``."""
    glyph = {"shared": SHARED_MARK, "copy": NEW_OWNER_MARK, "rejected": REJECTED_MARK}[status]
    words = MARK_WORDS[status]
    return (
        f'<span class="llmfs-mark" data-mark="{status}" role="img" aria-label="{words}" '
        f'title="{words}">{glyph}</span>'
    )


def trace_row_html(row: TraceRow) -> str:
    """One ``<tr>`` of the trace table."""
    label = _th(f"<code>{escape(row.label)}</code>", "row", f' data-status="{row.status}"')
    if row.rejected:
        owner = _td(f"{mark('rejected')} rejected", ' data-field="owner"')
        condition = escape(row.condition or "")
        detail = (
            f"violated: <strong>{condition}</strong> (<code>{escape(row.error or '')}</code>)"
            f"<br><small>{escape(row.message or '')}</small>"
        )
        body = _td(detail, f' colspan="{len(TRACE_HEADERS) - 2}" data-field="condition"')
        return f'<tr data-status="rejected">{label}{owner}{body}</tr>'
    cells = [
        _td(f"{mark(row.status)} {escape(row.owner or '')}", ' data-field="owner"'),
        _td(format_ints(row.shape), ' data-field="shape"'),
        _td(format_ints(row.strides), ' data-field="strides"'),
        _td(str(row.base_offset), ' data-field="base_offset"'),
        _td(yes_no(row.contiguous), ' data-field="contiguous"'),
        _td(escape(format_sampled(row.offsets, short=True)), ' data-field="offsets"'),
        _td(escape(format_values(row)), ' data-field="values"'),
    ]
    return f'<tr data-status="{row.status}">{label}{"".join(cells)}</tr>'


def legend_html() -> str:
    """The legend under a trace table: each glyph with its words."""
    items = [f"{mark(s)} {MARK_WORDS[s]}" for s in ("shared", "copy", "rejected")]
    return f'<p class="llmfs-legend" style="font-size:12px">{" &nbsp; ".join(items)}</p>'


def render_trace_html(trace: Trace) -> str:
    """The trace table, its legend and one mapping table per copy, as one HTML fragment."""
    head = "".join(_th(escape(h)) for h in TRACE_HEADERS)
    body = "".join(trace_row_html(row) for row in trace.rows)
    caption = escape(trace.title or "Trace: one row per request")
    parts = [
        f'<table class="llmfs-trace" style="{TABLE_STYLE}"><caption style="text-align:left">'
        f"{caption}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>",
        legend_html(),
    ]
    parts.extend(render_mapping_html(row) for row in trace.copies)
    return f'<div class="llmfs-trace-figure">{"".join(parts)}</div>'


def render_mapping_html(row: TraceRow) -> str:
    """The mapping table of a copy: new offset -> source offset."""
    if row.mapping is None:
        return ""
    source = escape(row.mapping_source or "")
    owner = escape(row.owner or "")
    head = _th(f"new offset in {mark('copy')} {owner}") + _th(
        f"source offset in {mark('shared')} {source}"
    )
    lines = [
        "<tr>"
        + _td(str(new), f' data-new="{new}"')
        + _td(str(old), f' data-source="{old}"')
        + "</tr>"
        for new, old in row.mapping.head
    ]
    if not row.mapping.complete:
        lines.append(f"<tr>{_td(f'… {row.mapping.omitted} more …', ' colspan=2')}</tr>")
        lines.extend(f"<tr>{_td(str(new))}{_td(str(old))}</tr>" for new, old in row.mapping.tail)
    caption = f"Mapping of the copy made by <code>{escape(row.label)}</code>"
    return (
        f'<table class="llmfs-mapping" style="{TABLE_STYLE}"><caption style="text-align:left">'
        f"{caption}</caption><thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody>"
        "</table>"
    )


def render_offsets_html(
    item: TensorView | Tensor, owner: str = "base", selected: int | None = None
) -> str:
    """The offset table (coordinate -> offset -> value) and the storage strip of a view.

    ``selected`` (a logical position) marks that row and the storage cell it reads with ``▶`` and
    bold text, besides the background. Long views show their first and last rows and a count.
    """
    view = item.view() if isinstance(item, Tensor) else item
    entries = offset_entries(view)
    selected_offset = None
    rows = []
    shown = [*entries.head, None, *entries.tail] if not entries.complete else list(entries.head)
    for entry in shown:
        if entry is None:
            rows.append(f"<tr>{_td(f'… {entries.omitted} more …', ' colspan=3')}</tr>")
            continue
        is_selected = entry.index == selected
        if is_selected:
            selected_offset = entry.offset
        pointer = "▶ " if is_selected else ""
        style = "font-weight:bold;background:#dde8ff" if is_selected else ""
        attrs = f' data-index="{entry.index}" data-offset="{entry.offset}"'
        rows.append(
            f"<tr{attrs}>"
            + _th(pointer + escape(format_ints(entry.coordinate)), "row")
            + _td(str(entry.offset), ' data-field="offset"', style)
            + _td(format_number(entry.value), ' data-field="value"', style)
            + "</tr>"
        )
    head = _th("coordinate") + _th("storage offset") + _th("value")
    meta = (
        f"shape {format_ints(view.shape)}, strides {format_ints(view.strides)}, base offset "
        f"{view.base_offset}, contiguous {yes_no(view.is_contiguous())}, owner {escape(owner)}"
    )
    table = (
        f'<table class="llmfs-offsets" style="{TABLE_STYLE}"><caption style="text-align:left">'
        f"{meta}</caption><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    return table + render_strip_html(view, owner, entries, selected_offset)


def render_strip_html(
    view: TensorView, owner: str, entries: Any = None, selected_offset: int | None = None
) -> str:
    """The owner's storage as one table row of cells: offset, value, and the logical positions
    that read it (``·`` for none). Storage longer than :data:`FULL_LIMIT` is summarised."""
    storage = view.owner.as_slice()
    if storage.size > FULL_LIMIT:
        return f"<p>storage of {escape(owner)}: {storage.size} values</p>"
    entries = entries if entries is not None else offset_entries(view)
    readers = storage_readers(entries)
    offsets = "".join(_th(str(k)) for k in range(storage.size))
    values = []
    reads = []
    for k in range(storage.size):
        chosen = k == selected_offset
        style = "font-weight:bold;background:#dde8ff" if chosen else ""
        text = ("▶ " if chosen else "") + format_number(float(storage[k]))
        values.append(_td(text, f' data-offset="{k}"', style))
        reads.append(_td(",".join(map(str, readers.get(k, []))) or "·", f' data-offset="{k}"'))
    return (
        f'<table class="llmfs-strip" style="{TABLE_STYLE}"><caption style="text-align:left">'
        f"storage of {escape(owner)}</caption><thead><tr>{_th('offset')}{offsets}</tr></thead>"
        f"<tbody><tr>{_th('value', 'row')}{''.join(values)}</tr>"
        f"<tr>{_th('read by position', 'row')}{''.join(reads)}</tr></tbody></table>"
    )


def render_verdicts_html(verdicts: Sequence[Any]) -> str:
    """The field-by-field table: prediction, truth, and the verdict in words."""
    head = _th("field") + _th("your prediction") + _th("truth") + _th("verdict")
    rows = []
    for v in verdicts:
        attrs = f' data-field="{v.field}" data-status="{v.status}"'
        rows.append(
            f"<tr{attrs}>{_th(escape(v.label), 'row')}{_td(escape(v.predicted))}"
            f"{_td(escape(v.truth))}"
            f"{_td(escape(v.verdict_text), ' class=llmfs-verdict', VERDICT_STYLE[v.status])}</tr>"
        )
    return (
        f'<table class="llmfs-verdicts" style="{TABLE_STYLE}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table><p>{escape(tally(verdicts))}</p>"
    )


__all__ = [
    "legend_html",
    "mark",
    "render_mapping_html",
    "render_offsets_html",
    "render_strip_html",
    "render_trace_html",
    "render_verdicts_html",
    "trace_row_html",
]
