"""Matplotlib renderer: storage-strip diagrams and the trace table as a static figure.

Two figures from the same model as the text and HTML renderers:

* :func:`storage_figure`: each owner's storage as a strip of cells (offset and value), each view
  as a row of its logical cells with a line from every logical cell to the storage cell it reads.
  Shared storage is drawn once; a copy is drawn as a separate strip (filled diamond, "new owner")
  with dashed lines back to the values it was copied from and its new-offset <- source-offset
  mapping written under it.
* :func:`trace_figure`: the trace table, drawn as a grid.

Deterministic output: the object-oriented API only (no pyplot, no global backend), fonts fixed to
DejaVu Sans / DejaVu Sans Mono (shipped with matplotlib), and :func:`save` strips dates and
version strings from the files. Nothing relies on colour: every strip and row is labelled with
words and glyphs; fills only repeat what the words say.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmfs.course import CourseError
from llmfs.tensor import Tensor, TensorView
from llmfs.widgets.model import (
    NEW_OWNER_MARK,
    SHARED_MARK,
    OwnerNames,
    Trace,
    TraceRow,
    format_number,
    offset_entries,
)
from llmfs.widgets.text import LEGEND, TRACE_HEADERS, format_ints, trace_cells

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: rcParams that make files byte-for-byte reproducible.
RC: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "svg.hashsalt": "llmfs-figures",
    "svg.fonttype": "path",
    "path.simplify": False,
}
MONO = "DejaVu Sans Mono"
SHARED_FILL = "#dbe9f7"
COPY_FILL = "#fde3c8"
VIEW_FILL = "#ffffff"
#: Most storage cells a strip draws (a larger owner is summarised in its label).
MAX_CELLS = 24


@contextmanager
def figure_style() -> Iterator[None]:
    """The fixed fonts and file settings every figure is drawn and saved under."""
    import matplotlib

    with matplotlib.rc_context(RC):
        yield


def new_figure(width: float, height: float) -> Figure:
    """A figure not attached to pyplot (so nothing global changes), with an Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(figure)
    return figure


def save(figure: Figure, path: Path | str) -> None:
    """Saves ``figure`` as PNG or SVG (by suffix) without dates or version strings."""
    path = Path(path)
    with figure_style():
        if path.suffix == ".svg":
            metadata: dict[str, Any] = {"Date": None, "Creator": None}
        elif path.suffix == ".png":
            metadata = {"Software": None}
        else:
            raise CourseError(
                f"{path}: figures are saved as .png or .svg, not {path.suffix or 'no suffix'}"
            )
        figure.savefig(path, metadata=metadata, facecolor="white")


# --------------------------------------------------------------------------------------------
# Storage strips
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Band:
    kind: str  # "storage" or "view"
    label: str
    y: float
    owner: Tensor
    view: TensorView | None
    item: str = ""  # the item label that introduced this band


def storage_figure(
    items: Sequence[tuple[str, TensorView | Tensor]],
    *,
    owners: Mapping[str, Tensor] | None = None,
    copied_from: Mapping[str, str] | None = None,
    title: str = "",
) -> Figure:
    """A storage-strip diagram of labelled views and tensors.

    ``owners`` names the source owners (default: the first item's owner is ``base``); each
    owner's storage is drawn once, as a strip of cells (offset in the corner, value in the
    middle). Each view becomes a row of logical cells (value, coordinate) with an arrow from each
    cell to the storage cell it reads: an owner's first view is drawn above its strip, the others
    below, so the arrows of two views never cross each other's rows. An item whose owner is new
    (a copy, e.g. a materialized view) is drawn as its own strip, marked ◆ new owner;
    ``copied_from`` maps such an item's label to the label of the view it copied, which adds
    dashed arrows from each new offset to the source offset it was copied from, labelled
    ``new←source``.
    """
    given = dict(owners or {})
    if not given and items:
        given = {"base": items[0][1]}
    names = OwnerNames(given)  # type: ignore[arg-type]
    groups: list[tuple[Tensor, str, list[tuple[str, TensorView]]]] = []

    def group_of(owner: Tensor) -> list[tuple[str, TensorView]] | None:
        return next((views for known, _, views in groups if known is owner), None)

    for name in sorted(given):
        value = given[name]
        owner = value if isinstance(value, Tensor) else value.owner  # type: ignore[union-attr]
        if group_of(owner) is None:
            groups.append((owner, name, []))
    introduced: dict[str, str] = {}
    for label, item in items:
        view = item.view() if isinstance(item, Tensor) else item
        name, _ = names.name(view.owner)
        views = group_of(view.owner)
        if views is None:
            groups.append((view.owner, name, []))
            introduced[name] = label
            if isinstance(item, Tensor):
                continue
            views = groups[-1][2]
        views.append((label, view))

    bands: list[_Band] = []
    for owner, name, views in groups:
        if names.is_given(name):
            strip = _Band("storage", f"{SHARED_MARK} {name}: storage", 0, owner, None)
            above, below = views[:1], views[1:]
        else:
            strip = _Band(
                "storage", f"{NEW_OWNER_MARK} {name}: new owner", 0, owner, None, introduced[name]
            )
            above, below = [], views
        ordered = [_Band("view", lbl, 0, owner, v, lbl) for lbl, v in above]
        ordered.append(strip)
        ordered.extend(_Band("view", lbl, 0, owner, v, lbl) for lbl, v in below)
        bands.extend(ordered)
    bands = [_Band(b.kind, b.label, -2.0 * k, b.owner, b.view, b.item) for k, b in enumerate(bands)]
    bottom = -2.0 * len(bands) + 1.2

    cells = max(min(b.owner.size, MAX_CELLS) for b in bands) if bands else 1
    with figure_style():
        figure = new_figure(2.9 + 0.62 * cells, 0.2 + 0.8 * len(bands) + (0.4 if title else 0))
        ax = figure.add_axes((0, 0, 1, 1))
        ax.set_xlim(-4.8, cells + 0.3)
        ax.set_ylim(bottom, 1.4 if title else 0.8)
        ax.axis("off")
        if title:
            ax.text(-4.7, 1.0, title, fontsize=11, fontweight="bold", va="center")
        strips = {id(b.owner): b for b in bands if b.kind == "storage"}
        for band in bands:
            if band.kind == "storage":
                _draw_strip(ax, band, names)
            else:
                _draw_view(ax, band, strips[id(band.owner)])
        for band in bands:
            source = (copied_from or {}).get(band.item) if band.kind == "storage" else None
            if source is not None:
                source_band = next((b for b in bands if b.label == source), None)
                if source_band is not None and source_band.view is not None:
                    _draw_copy(ax, band, source_band, strips[id(source_band.owner)], names)
    return figure


def _cell(ax: Any, x: float, y: float, fill: str) -> None:
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x, y - 0.4), 0.9, 0.8, fc=fill, ec="black", lw=1, zorder=2))


def _draw_strip(ax: Any, band: _Band, names: OwnerNames) -> None:
    storage = band.owner.as_slice()
    name = names.lookup(band.owner)
    fill = COPY_FILL if name and not names.is_given(name) else SHARED_FILL
    ax.text(-4.7, band.y + 0.12, band.label, va="center", fontsize=9, family=MONO)
    ax.text(-4.7, band.y - 0.22, "offset / value", va="center", fontsize=7, family=MONO)
    shown = min(storage.size, MAX_CELLS)
    for k in range(shown):
        _cell(ax, k, band.y, fill)
        value = format_number(float(storage[k]))
        ax.text(k + 0.45, band.y - 0.1, value, ha="center", va="center", fontsize=9, zorder=3)
        ax.text(k + 0.06, band.y + 0.27, str(k), va="center", fontsize=6, family=MONO, zorder=3)
    if storage.size > shown:
        ax.text(shown, band.y, f"… {storage.size - shown} more", va="center", fontsize=8)


def _draw_view(ax: Any, band: _Band, strip: _Band) -> None:
    if band.view is None:
        return
    ax.text(-4.7, band.y + 0.12, band.label, va="center", fontsize=9, family=MONO)
    ax.text(-4.7, band.y - 0.22, "value / coordinate", va="center", fontsize=7, family=MONO)
    entries = offset_entries(band.view)
    shown = [*entries.head, *entries.tail][:MAX_CELLS]
    above = band.y > strip.y
    for slot, entry in enumerate(shown):
        _cell(ax, slot, band.y, VIEW_FILL)
        value = format_number(entry.value)
        coordinate = format_ints(entry.coordinate).replace(" ", "")
        ax.text(slot + 0.45, band.y + 0.1, value, ha="center", va="center", fontsize=9, zorder=3)
        ax.text(
            slot + 0.45,
            band.y - 0.25,
            coordinate,
            ha="center",
            va="center",
            fontsize=6,
            family=MONO,
            zorder=3,
        )
        if entry.offset < MAX_CELLS:
            start_y = band.y - 0.4 if above else band.y + 0.4
            end_y = strip.y + 0.4 if above else strip.y - 0.4
            _line(ax, (slot + 0.45, start_y), (entry.offset + 0.45, end_y))
    if not entries.complete:
        ax.text(len(shown), band.y, f"… {entries.omitted} more", va="center", fontsize=8)


def _draw_copy(ax: Any, band: _Band, source: _Band, source_strip: _Band, names: OwnerNames) -> None:
    if source.view is None:
        return
    entries = offset_entries(source.view)
    for new, entry in enumerate([*entries.head, *entries.tail][:MAX_CELLS]):
        if entry.offset >= MAX_CELLS:
            continue
        end_y = source_strip.y - 0.4 if source_strip.y > band.y else source_strip.y + 0.4
        _line(ax, (new + 0.45, band.y + 0.4), (entry.offset + 0.45, end_y), dashed=True)
        ax.text(
            new + 0.45,
            band.y - 0.6,
            f"{new}←{entry.offset}",
            ha="center",
            va="center",
            fontsize=7,
            family=MONO,
        )
    source_name = names.lookup(source_strip.owner)
    ax.text(
        -4.7,
        band.y - 0.6,
        f"new offset ← offset in {source_name}",
        va="center",
        fontsize=7,
        family=MONO,
    )


def _line(ax: Any, start: tuple[float, float], end: tuple[float, float], *, dashed: bool = False):
    ax.annotate(
        "",
        xy=end,
        xytext=start,
        arrowprops={
            "arrowstyle": "-|>",
            "lw": 0.9,
            "color": "#444444",
            "linestyle": "--" if dashed else "-",
            "shrinkA": 0,
            "shrinkB": 0,
            "mutation_scale": 8,
        },
        zorder=1,
    )


# --------------------------------------------------------------------------------------------
# The trace table as a figure
# --------------------------------------------------------------------------------------------


def trace_figure(trace: Trace) -> Figure:
    """The trace table drawn as a grid: same cells as the text table, header in bold,
    rejected rows spanning, the legend underneath."""
    rows = [trace_cells(row) for row in trace.rows]
    widths = [len(h) for h in TRACE_HEADERS]
    for cells in rows:
        # A rejected row's last cell spans the remaining columns, so it sets no width.
        spanning = len(cells) != len(TRACE_HEADERS)
        for k, cell in enumerate(cells[:-1] if spanning else cells):
            widths[k] = max(widths[k], len(cell))
    notes = [line for row in trace.copies for line in ["", *_mapping_lines(row)]]
    pad = 2
    starts = [0]
    for width in widths:
        starts.append(starts[-1] + width + pad)
    total = starts[-1]
    n = len(rows) + 1
    extra = 2 if trace.title else 1
    total = max(total, *(len(line) + 1 for line in notes)) if notes else total
    with figure_style():
        lines = n + 1 + len(notes)
        figure = new_figure(0.082 * total + 0.3, 0.3 * (lines + extra) - 0.1)
        ax = figure.add_axes((0, 0, 1, 1))
        ax.set_xlim(-1, total + 1)
        ax.set_ylim(-lines, extra - 0.5)
        ax.axis("off")
        if trace.title:
            ax.text(0, 1, trace.title, fontsize=11, fontweight="bold", va="center")
        for k, header in enumerate(TRACE_HEADERS):
            ax.text(starts[k], 0, header, family=MONO, fontsize=9, fontweight="bold", va="center")
        ax.plot([-0.5, total], [-0.5, -0.5], color="black", lw=1)
        for r, (row, cells) in enumerate(zip(trace.rows, rows), start=1):
            if row.status == "copy":
                ax.add_patch(_band(total, r, COPY_FILL))
            for k, cell in enumerate(cells):
                ax.text(starts[k], -r, cell, family=MONO, fontsize=9, va="center")
            ax.plot([-0.5, total], [-r - 0.5, -r - 0.5], color="#aaaaaa", lw=0.5)
        ax.text(0, -n, LEGEND, family=MONO, fontsize=8, va="center")
        for k, line in enumerate(notes, start=1):
            ax.text(0, -n - k, line, family=MONO, fontsize=9, va="center")
    return figure


def _mapping_lines(row: TraceRow) -> list[str]:
    """A copy's mapping as two aligned lines (new offsets over source offsets)."""
    if row.mapping is None:
        return []
    pairs = [*row.mapping.head, *row.mapping.tail]
    new_head = f"new offset in {NEW_OWNER_MARK} {row.owner}"
    old_head = f"source offset in {SHARED_MARK} {row.mapping_source}"
    width = max(len(new_head), len(old_head))
    cell = max(len(str(v)) for pair in pairs for v in pair) + 2
    new_line = new_head.ljust(width) + "".join(str(a).rjust(cell) for a, _ in pairs)
    old_line = old_head.ljust(width) + "".join(str(b).rjust(cell) for _, b in pairs)
    if not row.mapping.complete:
        new_line += f"  (… {row.mapping.omitted} more not shown)"
    return [f"mapping of the copy made by {row.label}:", new_line, old_line]


def _band(total: int, r: int, color: str) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle((-0.5, -r - 0.5), total + 0.5, 1, fc=color, ec="none")


__all__ = ["RC", "figure_style", "new_figure", "save", "storage_figure", "trace_figure"]
