"""HTML renderer of the table model, for notebooks and the ipywidgets layer.

Accessible table markup: a ``<caption>``, column headers ``<th scope="col">``, each step's label
as a row header ``<th scope="row">``. Nothing relies on colour: marks are glyphs with words
(``◇`` shared, ``◆`` new owner, ``×`` rejected with the violated condition; ``✓ right`` /
``✗ wrong``), each also carrying an ``aria-label``; a selected row is marked ``▶`` (a pointer that
every row reserves room for, so selecting never shifts the layout), bold and outlined. A rejected
row opens (``<details>``, no script) to the library's full message.

Looks come from the one shared stylesheet (:mod:`llmfs.widgets.style`): each top-level fragment is
an element of class ``llmfs`` carrying it, so the markup renders the same in JupyterLab outputs,
in ipywidgets ``HTML`` and in a static HTML export, in the light and the dark theme.

Every cell carries ``data-*`` attributes (``data-field``, ``data-status``, ``data-offset``...) so
tests can read the DOM without parsing styles. Output is deterministic (no ids, no addresses).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from llmfs.course.exercises.rows import (
    FULL_LIMIT,
    NEW_OWNER_MARK,
    REJECTED_MARK,
    SHARED_MARK,
    TraceRow,
    format_number,
    offset_entries,
)
from llmfs.tensor import Tensor, TensorView
from llmfs.widgets.style import style_tag
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

MARK_WORDS = {
    "shared": "shared storage of an existing owner",
    "copy": "new owner (a copy)",
    "rejected": "rejected request",
}


def _th(text: str, scope: str = "col", extra: str = "") -> str:
    return f'<th scope="{scope}"{extra}>{text}</th>'


def _td(text: str, extra: str = "") -> str:
    return f"<td{extra}>{text}</td>"


def wrap(kind: str, body: str) -> str:
    """A top-level fragment: ``<div class="llmfs KIND">`` with the shared stylesheet."""
    return f'<div class="llmfs {kind}">{style_tag()}{body}</div>'


def markdown_html(text: str) -> str:
    """A course author's markdown (an explanation from a solution notebook) as HTML.

    Rendered by mistune (which JupyterLab's nbconvert brings) with its math plugin, so ``$...$``
    reaches the notebook's MathJax intact; where mistune is missing, as escaped paragraphs with
    their code spans, which read the same words."""
    try:
        import mistune
    except ImportError:  # pragma: no cover - mistune comes with JupyterLab (the course extra)
        paragraphs = [p.strip() for p in text.split("\n\n") if p.strip()]
        return "".join(
            "<p>" + re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(p, quote=False)) + "</p>"
            for p in paragraphs
        )
    render = mistune.create_markdown(escape=True, plugins=["math", "table"])
    return str(render(text))


def pointer(on: bool) -> str:
    """The ``▶`` selection pointer; every row has one, hidden unless selected, so selecting a
    row never changes any column's width."""
    hidden = "" if on else ' style="visibility:hidden"'
    return f'<span class="llmfs-pointer" aria-hidden="true"{hidden}>▶</span> '


def mark(status: str) -> str:
    """The glyph of a row status with its words as ``aria-label`` and ``title``."""
    glyph = {"shared": SHARED_MARK, "copy": NEW_OWNER_MARK, "rejected": REJECTED_MARK}[status]
    words = MARK_WORDS[status]
    return (
        f'<span class="llmfs-mark" data-mark="{status}" role="img" aria-label="{words}" '
        f'title="{words}">{glyph}</span>'
    )


def trace_row_html(row: TraceRow, index: int | None = None, chosen: bool = False) -> str:
    """One ``<tr>`` of the trace table; ``index`` adds ``data-row`` (a clickable row in the live
    table), ``chosen`` marks the row selected (``▶``, bold, outlined, ``aria-selected``)."""
    attrs = f' data-status="{row.status}"'
    if index is not None:
        attrs += f' data-row="{index}" tabindex="0" aria-selected="{str(chosen).lower()}"'
    if chosen:
        attrs += ' class="llmfs-on"'
    label = _th(
        pointer(chosen) + f"<code>{escape(row.label)}</code>", "row", f' data-status="{row.status}"'
    )
    if row.rejected:
        owner = _td(f"{mark('rejected')} rejected", ' data-field="owner"')
        condition = escape(row.condition or "")
        opened = " open" if chosen else ""
        detail = (
            f"<details{opened}><summary>violated: <strong>{condition}</strong> "
            f"(<code>{escape(row.error or '')}</code>)</summary>"
            f'<p class="llmfs-message">{escape(row.message or "")}</p></details>'
        )
        body = _td(
            detail, f' colspan="{len(TRACE_HEADERS) - 2}" data-field="condition" class="llmfs-wrap"'
        )
        return f"<tr{attrs}>{label}{owner}{body}</tr>"
    cells = [
        _td(f"{mark(row.status)} {escape(row.owner or '')}", ' data-field="owner"'),
        _td(format_ints(row.shape), ' data-field="shape"'),
        _td(format_ints(row.strides), ' data-field="strides"'),
        _td(str(row.base_offset), ' data-field="base_offset"'),
        _td(yes_no(row.contiguous), ' data-field="contiguous"'),
        _td(escape(format_sampled(row.offsets, short=True)), ' data-field="offsets"'),
        _td(escape(format_values(row)), ' data-field="values"'),
    ]
    return f"<tr{attrs}>{label}{''.join(cells)}</tr>"


def legend_html() -> str:
    """The legend under a trace table: each glyph with its words."""
    items = [
        f'<span class="llmfs-nowrap">{mark(s)} {MARK_WORDS[s]}</span>'
        for s in ("shared", "copy", "rejected")
    ]
    return f'<p class="llmfs-legend">{" &nbsp; ".join(items)}</p>'


def render_trace_html(
    trace: Trace, chosen: int | None = None, *, rows_clickable: bool = False
) -> str:
    """The trace table, its legend and one mapping table per copy, as one HTML fragment.

    ``rows_clickable`` gives every row ``data-row`` and ``tabindex`` (the live table's script
    makes them choosable); ``chosen`` marks that row selected and opens it if it was rejected.
    """
    head = "".join(_th(escape(h)) for h in TRACE_HEADERS)
    body = "".join(
        trace_row_html(row, k if rows_clickable else None, k == chosen)
        for k, row in enumerate(trace.rows)
    )
    caption = escape(trace.title or "Trace: one row per request")
    if rows_clickable:
        caption += " (choose a row to see its storage)"
    parts = [
        f'<table class="llmfs-trace"><caption>{caption}</caption><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>",
        legend_html(),
    ]
    parts.extend(render_mapping_html(row) for row in trace.copies)
    return wrap("llmfs-trace-figure", "".join(parts))


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
        f'<table class="llmfs-mapping"><caption>{caption}</caption><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(lines)}</tbody></table>"
    )


def render_offsets_html(
    item: TensorView | Tensor,
    owner: str = "base",
    selected: int | None = None,
    *,
    strip: bool = True,
) -> str:
    """The offset table (coordinate -> offset -> value) and, with ``strip``, the storage strip
    of a view (leave it out where a storage diagram already shows the storage: storage is shown
    once).

    ``selected`` (a logical position) marks that row and the storage cell it reads with ``▶``,
    bold text and an outline; rows never change width. Long views show their first and last rows
    and a count.
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
        attrs = f' data-index="{entry.index}" data-offset="{entry.offset}"'
        if is_selected:
            attrs += ' class="llmfs-on"'
        rows.append(
            f"<tr{attrs}>"
            + _th(pointer(is_selected) + escape(format_ints(entry.coordinate)), "row")
            + _td(str(entry.offset), ' data-field="offset"')
            + _td(format_number(entry.value), ' data-field="value"')
            + "</tr>"
        )
    head = _th("coordinate") + _th("storage offset") + _th("value")
    meta = (
        f"shape {format_ints(view.shape)}, strides {format_ints(view.strides)}, base offset "
        f"{view.base_offset}, contiguous {yes_no(view.is_contiguous())}, owner {escape(owner)}"
    )
    table = (
        f'<table class="llmfs-offsets"><caption>{meta}</caption><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    if not strip:
        return table
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
        on = ' class="llmfs-on"' if chosen else ""
        text = pointer(chosen) + format_number(float(storage[k]))
        values.append(_td(text, f' data-offset="{k}"{on}'))
        read = ",".join(map(str, readers.get(k, [])))
        reads.append(_td(read or "· not read", f' data-offset="{k}"'))
    return (
        f'<table class="llmfs-strip"><caption>'
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
            f"{_td(escape(v.verdict_text), f' class=llmfs-verdict data-status={v.status}')}</tr>"
        )
    return (
        f'<table class="llmfs-verdicts"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table><p>{escape(tally(verdicts))}</p>"
    )


__all__ = [
    "legend_html",
    "mark",
    "pointer",
    "render_mapping_html",
    "render_offsets_html",
    "render_strip_html",
    "render_trace_html",
    "render_verdicts_html",
    "trace_row_html",
    "wrap",
]
