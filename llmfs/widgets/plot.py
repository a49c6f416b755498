"""Matplotlib renderer: the trace table as a static figure (:func:`trace_figure`).

Storage diagrams are not drawn here: :mod:`llmfs.widgets.svg` draws them, for notebooks and for
``figures/`` alike.

Deterministic output: the figures are drawn and saved with :mod:`llmfs.gpt.figure_files` (the
object-oriented API only, fixed fonts, files without dates or version strings). Nothing relies
on colour: every strip and row is labelled with words and glyphs; fills only repeat what the
words say.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmfs.course import CourseError
from llmfs.gpt import figure_files
from llmfs.gpt.errors import ConfigError
from llmfs.gpt.figure_files import RC, figure_style, new_figure
from llmfs.widgets.model import (
    NEW_OWNER_MARK,
    SHARED_MARK,
    Trace,
    TraceRow,
)
from llmfs.widgets.text import LEGEND, TRACE_HEADERS, trace_cells

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MONO = "DejaVu Sans Mono"
COPY_FILL = "#fde3c8"


def save(figure: Figure, path: Path | str) -> None:
    """Saves ``figure`` as PNG or SVG (by suffix) without dates or version strings
    (:func:`llmfs.gpt.figure_files.save`); raises :class:`CourseError` for another suffix."""
    try:
        figure_files.save(figure, path)
    except ConfigError as error:
        raise CourseError(str(error)) from None


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


__all__ = ["RC", "figure_style", "new_figure", "save", "trace_figure"]
