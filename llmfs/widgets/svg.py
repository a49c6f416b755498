"""Static SVG renderer of the storage diagram (:mod:`llmfs.widgets.diagram`).

Draws a :class:`~llmfs.widgets.diagram.Diagram` as one SVG element, deterministic to the byte
(no ids beyond the diagram's own cell keys, no dates, numbers rounded), so the same markup serves
three uses: the ``text/html`` output of a diagram (what a static HTML export or a notebook
without the widget JS shows), the live widget (which only adds behaviour to this markup) and the
files under ``figures/``.

Drawing rules: each panel's cells sit in the view's shape (rank 3 and 4 as labelled blocks of
grids) above or below its owner's strip; every strip is one row of offsets, never wrapped (the
container scrolls sideways); a solid line joins every drawn logical cell to the offset it reads;
a copy's strip (◆, hatched corners) has a dashed line from every new offset back to its source
offset; unread offsets are hatched and say ``skip`` or ``·`` in the cell, with the full sentence
beside the strip; a refused reshape draws a bracket under the two offsets that no single stride
can join, marked ``×``. Elements carry ``data-*`` attributes (``data-cell``, ``data-line``,
``data-offset``, ``data-formula``...) that the widget's script and the tests read; colours are
presentation attributes (light) overridden by the shared stylesheet's theme variables.
"""

from __future__ import annotations

import base64
import textwrap
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING

from llmfs.widgets.model import REJECTED_MARK, format_number
from llmfs.widgets.style import style_tag

if TYPE_CHECKING:
    # Only read here, never built: the diagram module draws itself with this one.
    from llmfs.widgets.diagram import Diagram, Panel, Strip

CELL_W = 72
CELL_H = 46
CELL_GAP = 6
BLOCK_GAP = 22
BLOCK_LABEL_H = 20
SLOT_W = 58
SLOT_H = 46
ELIDED_W = 64
LINE_ZONE = 84
PANEL_GAP = 48
MARGIN = 16
TEXT_H = 18
CHAR_W = 7.8  # width of one 13 px monospace character
NOTE_GAP = 18
WRAP = 96

FG = "#1a1a1a"
MUTED = "#3d3d3d"
BORDER = "#767676"
SHARED = "#e3eefa"
COPY = "#fde6cc"
LINE = "#2f4b7c"
ACCENT = "#a4161a"
HATCH = "#5c5c5c"
GRAD = "#ffd8a8"  # a storage cell that received a gradient (themed: --llmfs-grad)


def _n(value: float) -> str:
    """A coordinate as short, deterministic text."""
    rounded = round(value, 1)
    return str(int(rounded)) if rounded == int(rounded) else f"{rounded:.1f}"


def _text(x: float, y: float, text: str, cls: str = "", size: int = 13, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    klass = f' class="{cls}"' if cls else ""
    fill = MUTED if "llmfs-small" in cls else (ACCENT if "llmfs-gap-text" in cls else FG)
    return (
        f'<text x="{_n(x)}" y="{_n(y)}" font-size="{size}" fill="{fill}"{klass}{extra}>'
        f"{escape(text)}</text>"
    )


def _rect(x: float, y: float, w: float, h: float, fill: str) -> str:
    return (
        f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" fill="{fill}" '
        f'stroke="{BORDER}" stroke-width="1"/>'
    )


def _hatch(x: float, y: float, w: float, h: float, spacing: float = 9.0) -> str:
    """Diagonal hatch lines clipped to the rectangle by arithmetic (no pattern ids)."""
    parts = []
    t = -h + spacing / 2
    while t < w:
        s0, s1 = max(0.0, -t), min(h, w - t)
        if s1 > s0:
            parts.append(f"M{_n(x + t + s0)} {_n(y + h - s0)}L{_n(x + t + s1)} {_n(y + h - s1)}")
        t += spacing
    return f'<path class="llmfs-hatch" d="{"".join(parts)}" stroke="{HATCH}" stroke-width="1"/>'


def _width(text: str, size: int = 13) -> float:
    return len(text) * CHAR_W * size / 13


# --------------------------------------------------------------------------------------------
# Geometry
# --------------------------------------------------------------------------------------------


@dataclass
class _PanelBox:
    panel: Panel
    x: float
    y: float
    width: float
    height: float
    grid_y: float  # top of the grid
    header: list[tuple[str, str]]  # (class, text) lines
    header_y: float
    cells: dict[str, tuple[float, float]]  # key -> top-left
    rows: int


def _grid_shape(panel: Panel) -> tuple[int, int, int, int]:
    if panel.summarised:
        return 1, 1, 1, len(panel.cells) + 1
    places = [c.place for c in panel.cells] or [(0, 0, 0, 0)]
    return tuple(max(p[k] for p in places) + 1 for k in range(4))  # type: ignore[return-value]


def _panel_header(panel: Panel) -> list[tuple[str, str]]:
    lines = [("llmfs-label", panel.label), ("llmfs-small", panel.meta)]
    lines.append(("llmfs-small", f"jumps: {panel.jumps}"))
    lines.extend(("llmfs-small", note) for note in panel.notes)
    if panel.summarised:
        lines.append(
            (
                "llmfs-small",
                f"{panel.total} values: the first {panel.head} and last "
                f"{len(panel.cells) - panel.head} are drawn",
            )
        )
    return lines


def _measure_panel(panel: Panel) -> tuple[float, float, float, list[tuple[str, str]]]:
    block_rows, block_cols, rows, cols = _grid_shape(panel)
    labelled = bool(panel.blocks)
    block_w = cols * (CELL_W + CELL_GAP) - CELL_GAP
    block_h = rows * (CELL_H + CELL_GAP) - CELL_GAP + (BLOCK_LABEL_H if labelled else 0)
    grid_w = block_cols * block_w + (block_cols - 1) * BLOCK_GAP
    grid_h = block_rows * block_h + (block_rows - 1) * BLOCK_GAP
    header = _panel_header(panel)
    width = max(grid_w, *(_width(text) for _, text in header))
    return width, grid_w, grid_h, header


def _layout_panel(panel: Panel, x: float, y: float, above: bool) -> _PanelBox:
    width, _, grid_h, header = _measure_panel(panel)
    header_h = len(header) * TEXT_H + 6
    if above:
        header_y, grid_y = y, y + header_h
    else:
        grid_y, header_y = y, y + grid_h + 10
    _, _, rows, cols = _grid_shape(panel)
    labelled = bool(panel.blocks)
    block_w = cols * (CELL_W + CELL_GAP) - CELL_GAP
    block_h = rows * (CELL_H + CELL_GAP) - CELL_GAP + (BLOCK_LABEL_H if labelled else 0)
    cells = {}
    for slot, cell in enumerate(panel.cells):
        if panel.summarised:
            column = slot + (1 if slot >= panel.head else 0)
            cells[cell.key] = (x + column * (CELL_W + CELL_GAP), grid_y)
            continue
        br, bc, r, c = cell.place
        cx = x + bc * (block_w + BLOCK_GAP) + c * (CELL_W + CELL_GAP)
        cy = grid_y + br * (block_h + BLOCK_GAP) + (BLOCK_LABEL_H if labelled else 0)
        cells[cell.key] = (cx, cy + r * (CELL_H + CELL_GAP))
    return _PanelBox(panel, x, y, width, header_h + grid_h, grid_y, header, header_y, cells, rows)


@dataclass
class _StripBox:
    strip: Strip
    x: float
    y: float
    slots: list[tuple[float, float]]  # (x, width) per slot
    text_x: float
    height: float

    def centre(self, offset: int) -> float | None:
        position = self.strip.slot_of(offset)
        if position is None:
            return None
        x, w = self.slots[position]
        return x + w / 2


def _layout_strip(strip: Strip, x: float, y: float) -> _StripBox:
    slots: list[tuple[float, float]] = []
    cursor = x
    for slot in strip.slots:
        w: float = ELIDED_W if slot.status == "elided" else SLOT_W
        slots.append((cursor, w))
        cursor += w
    lines = 1 + len(strip.notes) + (1 if strip.source else 0)
    height = max(SLOT_H, lines * TEXT_H)
    return _StripBox(strip, x, y, slots, cursor + 16, height)


def _port(box: _PanelBox, key: str, row: int, above: bool) -> tuple[float, float]:
    """Where a cell's line leaves it: lines of the rows nearest the strip leave from the middle
    of the edge; lines of farther rows leave from the margins, past the text of nearer cells."""
    x, y = box.cells[key]
    nearest = box.rows - 1 if above else 0
    distance = abs(nearest - row)
    if box.panel.summarised or distance == 0:
        dx = CELL_W / 2
    else:
        lane = (distance - 1) % 4
        dx = (5 + 6 * (lane // 2)) if lane % 2 == 0 else (CELL_W - 5 - 6 * (lane // 2))
    return x + dx, (y + CELL_H if above else y)


# --------------------------------------------------------------------------------------------
# Drawing
# --------------------------------------------------------------------------------------------


def render_diagram_svg(diagram: Diagram) -> str:
    """The diagram as one ``<svg class="llmfs-diagram">`` element (deterministic)."""
    boxes: dict[int, _PanelBox] = {}
    strips: dict[str, _StripBox] = {}
    body: list[str] = []
    y = float(MARGIN)
    right = 0.0
    if diagram.title:
        body.append(_text(MARGIN, y + 14, diagram.title, "llmfs-title", 15, font_weight="bold"))
        right = max(right, MARGIN + _width(diagram.title, 15))
        y += 30
    for name, numbers in diagram.groups:
        above = [diagram.panels[n] for n in numbers if diagram.panels[n].side == "above"]
        below = [diagram.panels[n] for n in numbers if diagram.panels[n].side == "below"]
        if above:
            height = max(_measure_panel(p)[2] + len(_panel_header(p)) * TEXT_H + 6 for p in above)
            x = float(MARGIN)
            for panel in above:
                width, _, grid_h, header = _measure_panel(panel)
                own = grid_h + len(header) * TEXT_H + 6
                box = _layout_panel(panel, x, y + height - own, True)
                boxes[panel.number] = box
                x += width + PANEL_GAP
                right = max(right, x)
            y += height + LINE_ZONE
        strip = diagram.strip(name)
        sbox = _layout_strip(strip, MARGIN, y)
        strips[name] = sbox
        right = max(right, sbox.text_x + max(_width(t) for t in _strip_texts(strip)))
        y += sbox.height
        if below:
            y += LINE_ZONE
            x = float(MARGIN)
            height = 0.0
            for panel in below:
                width, _, grid_h, header = _measure_panel(panel)
                box = _layout_panel(panel, x, y, False)
                boxes[panel.number] = box
                x += width + PANEL_GAP
                right = max(right, x)
                height = max(height, grid_h + 10 + len(header) * TEXT_H)
            y += height
        y += LINE_ZONE * 0.6 if any(s.source == name for s in diagram.strips) else 24
    gap_parts, rejection_lines = _rejections(diagram, strips)
    if rejection_lines:
        y += 8
        for cls, text in rejection_lines:
            body.append(_text(MARGIN, y + 13, text, cls))
            right = max(right, MARGIN + _width(text))
            y += TEXT_H
    width = max(right, 200) + MARGIN
    height = y + MARGIN

    lines = _lines(diagram, boxes, strips)
    drawing = [
        f'<rect class="llmfs-bg" x="0" y="0" width="{_n(width)}" height="{_n(height)}" '
        f'fill="#ffffff"/>',
        # The lines go under the strips and cells, in a layer that takes no pointer events,
        # so a click or hover anywhere on a cell reaches the cell, never a line across it.
        f'<g class="llmfs-lines" pointer-events="none">{"".join(lines)}</g>',
        *(_draw_strip(sbox) for sbox in strips.values()),
        *(_draw_panel(box) for box in boxes.values()),
        *gap_parts,
        *body,
    ]
    label = escape(_aria_label(diagram))
    return (
        f'<svg class="llmfs-diagram" xmlns="http://www.w3.org/2000/svg" width="{_n(width)}" '
        f'height="{_n(height)}" viewBox="0 0 {_n(width)} {_n(height)}" role="img" '
        f'aria-label="{label}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" '
        f'data-cells="{sum(len(p.cells) for p in diagram.panels)}">' + "".join(drawing) + "</svg>"
    )


def _aria_label(diagram: Diagram) -> str:
    parts = [diagram.title] if diagram.title else []
    parts.extend(strip.title for strip in diagram.strips)
    parts.extend(f"{p.label}: {p.meta}" for p in diagram.panels)
    return "; ".join(parts)


def _strip_texts(strip: Strip) -> list[str]:
    texts = [strip.title, *strip.notes]
    if strip.source:
        texts.append(f"dashed lines: each new offset ← the offset of {strip.source} it copies")
    return texts


def _draw_strip(box: _StripBox) -> str:
    strip = box.strip
    kind = "copy" if strip.kind == "copy" else "shared"
    fill = COPY if kind == "copy" else SHARED
    parts = [f'<g class="llmfs-strip llmfs-strip-{kind}" data-strip="{escape(strip.name)}">']
    for slot, (x, w) in zip(strip.slots, box.slots):
        if slot.status == "elided":
            parts.append(
                '<g class="llmfs-elided">'
                + _text(
                    x + w / 2,
                    box.y + SLOT_H / 2 + 4,
                    f"…{slot.elided}…",
                    "llmfs-small",
                    11,
                    text_anchor="middle",
                )
                + "</g>"
            )
            continue
        value = format_number(slot.value if slot.value is not None else 0.0)
        words = {
            "read": f"offset {slot.offset} holds {value}, read by {len(slot.readers)} cell(s)",
            "skipped": f"offset {slot.offset} holds {value}: skipped, not contiguous",
            "unread": f"offset {slot.offset} holds {value}: not read",
            "undrawn": f"offset {slot.offset} holds {value}",
        }[slot.status]
        received = slot.grad is not None and slot.grad != 0
        klass = "llmfs-slot llmfs-grad-on" if received else "llmfs-slot"
        grad_attr = ""
        if slot.grad is not None:
            grad = format_number(slot.grad)
            words += f"; gradient {grad}" + (
                f", the sum of {len(slot.readers)} positions" if len(slot.readers) > 1 else ""
            )
            grad_attr = f' data-grad="{grad}"'
        parts.append(
            f'<g class="{klass}" data-strip="{escape(strip.name)}" data-offset="{slot.offset}" '
            f'data-status="{slot.status}" data-readers="{" ".join(slot.readers)}"{grad_attr}>'
            f"<title>{escape(words)}</title>"
            + _rect(x, box.y, w, SLOT_H, GRAD if received else fill)
        )
        if kind == "copy":
            parts.append(_hatch(x + w - 14, box.y, 14, 14, 5))
        if slot.status in ("skipped", "unread"):
            parts.append(_hatch(x, box.y, w, SLOT_H))
        parts.append(_text(x + 4, box.y + 12, str(slot.offset), "llmfs-small", 11))
        if slot.grad is not None:
            # A gradient diagram: the cell shows what it accumulated; its value is in the title.
            shown = f"∇{format_number(slot.grad)}"
            parts.append(
                _text(
                    x + w / 2,
                    box.y + 30,
                    shown,
                    "llmfs-value llmfs-grad",
                    14,
                    text_anchor="middle",
                    font_weight="bold" if received else "normal",
                )
            )
        else:
            parts.append(
                _text(x + w / 2, box.y + 30, value, "llmfs-value", 14, text_anchor="middle")
            )
        if slot.status in ("skipped", "unread"):
            mark = "skip" if slot.status == "skipped" else "·"
            parts.append(
                _text(x + w / 2, box.y + SLOT_H - 3, mark, "llmfs-small", 10, text_anchor="middle")
            )
        parts.append("</g>")
    for k, text in enumerate(_strip_texts(strip)):
        cls = "llmfs-label" if k == 0 else "llmfs-small"
        weight = "bold" if k == 0 else "normal"
        parts.append(_text(box.text_x, box.y + 14 + k * TEXT_H, text, cls, font_weight=weight))
    parts.append("</g>")
    return "".join(parts)


def _draw_panel(box: _PanelBox) -> str:
    panel = box.panel
    parts = [f'<g class="llmfs-panel" data-panel="{panel.number}">']
    for k, (cls, text) in enumerate(box.header):
        weight = "bold" if k == 0 else "normal"
        parts.append(_text(box.x, box.header_y + 14 + k * TEXT_H, text, cls, font_weight=weight))
    if panel.blocks:
        _, _, rows, cols = _grid_shape(panel)
        block_w = cols * (CELL_W + CELL_GAP) - CELL_GAP
        block_h = rows * (CELL_H + CELL_GAP) - CELL_GAP + BLOCK_LABEL_H
        for (br, bc), label in panel.blocks:
            bx = box.x + bc * (block_w + BLOCK_GAP)
            by = box.grid_y + br * (block_h + BLOCK_GAP)
            parts.append(_text(bx, by + 14, f"block {label}", "llmfs-small", 12))
    for cell in panel.cells:
        x, y = box.cells[cell.key]
        coordinate = "[" + ",".join(str(c) for c in cell.coordinate) + "]"
        value = format_number(cell.value)
        tip = f"{coordinate} reads offset {cell.offset}: {cell.formula} (value {value})"
        big = value
        if cell.grad is not None:
            big = f"∇{format_number(cell.grad)}"
            tip += f"; its gradient {format_number(cell.grad)} goes back to offset {cell.offset}"
        parts.append(
            f'<g class="llmfs-cell" tabindex="0" role="button" data-cell="{cell.key}" '
            f'data-panel="{panel.number}" data-index="{cell.index}" data-offset="{cell.offset}" '
            f'data-strip="{escape(panel.owner)}" data-coordinate="{coordinate}" '
            f'data-value="{value}" data-formula="{escape(cell.formula)}">'
            f"<title>{escape(tip)}</title>"
            + _rect(x, y, CELL_W, CELL_H, "#ffffff")
            + _text(x + CELL_W / 2, y + 20, big, "llmfs-value", 15, text_anchor="middle")
            + _text(x + CELL_W / 2, y + 38, coordinate, "llmfs-small", 11, text_anchor="middle")
            + _text(x + 3, y + 12, "▶", "llmfs-mark", 10, visibility="hidden")
            + "</g>"
        )
    if panel.summarised:
        first = panel.cells[panel.head - 1].key if panel.head else panel.cells[0].key
        x, y = box.cells[first]
        parts.append(
            _text(
                x + CELL_W + CELL_GAP + CELL_W / 2,
                y + CELL_H / 2 + 4,
                f"… {panel.omitted} more",
                "llmfs-small",
                11,
                text_anchor="middle",
            )
        )
    parts.append("</g>")
    return "".join(parts)


def _lines(
    diagram: Diagram, boxes: dict[int, _PanelBox], strips: dict[str, _StripBox]
) -> list[str]:
    out = []
    for line in diagram.lines:
        target = strips[line.strip]
        tx = target.centre(line.offset)
        if tx is None:
            continue
        if line.kind == "read":
            cell = diagram.cell(line.cell)
            box = boxes[cell.panel]
            above = box.panel.side == "above"
            row = cell.place[2] if not box.panel.summarised else 0
            sx, sy = _port(box, cell.key, row, above)
            ty = target.y if above else target.y + SLOT_H
            out.append(
                f'<line class="llmfs-line llmfs-read" data-line="{line.key}" '
                f'data-cell="{line.cell}" data-offset="{line.offset}" x1="{_n(sx)}" '
                f'y1="{_n(sy)}" x2="{_n(tx)}" y2="{_n(ty)}" stroke="{LINE}" stroke-width="1.5"/>'
            )
            if cell.grad is not None:
                out.append(_arrow_head(sx, sy, tx, ty, line.key))
        else:
            source = strips[line.source]
            source_x = source.centre(line.source_offset)
            if source_x is None:
                continue
            out.append(
                f'<line class="llmfs-line llmfs-copy-line" data-line="{line.key}" '
                f'data-offset="{line.offset}" data-source-offset="{line.source_offset}" '
                f'x1="{_n(tx)}" y1="{_n(target.y)}" x2="{_n(source_x)}" '
                f'y2="{_n(source.y + SLOT_H)}" '
                f'stroke="{LINE}" stroke-width="1.5" stroke-dasharray="6 4"/>'
            )
    return out


def _arrow_head(sx: float, sy: float, tx: float, ty: float, key: str) -> str:
    """A filled triangle at ``(tx, ty)`` pointing from ``(sx, sy)``: a gradient flows from the
    view's position back to the storage cell (computed, so no marker ids are needed)."""
    dx, dy = tx - sx, ty - sy
    length = max((dx * dx + dy * dy) ** 0.5, 1e-9)
    ux, uy = dx / length, dy / length
    size, half = 9.0, 4.5
    bx, by = tx - ux * size, ty - uy * size
    points = [(tx, ty), (bx - uy * half, by + ux * half), (bx + uy * half, by - ux * half)]
    d = "M" + "L".join(f"{_n(px)} {_n(py)}" for px, py in points) + "Z"
    return f'<path class="llmfs-grad-arrow" data-line="{key}" d="{d}" fill="{LINE}"/>'


def _rejections(
    diagram: Diagram, strips: dict[str, _StripBox]
) -> tuple[list[str], list[tuple[str, str]]]:
    parts: list[str] = []
    lines: list[tuple[str, str]] = []
    for rejection in diagram.rejections:
        lines.append(("llmfs-gap-text", f"{REJECTED_MARK} {rejection.label}: rejected"))
        for chunk in textwrap.wrap(rejection.words, WRAP):
            lines.append(("", "   " + chunk))
        if rejection.gap is None or rejection.strip not in strips:
            continue
        box = strips[rejection.strip]
        a, b = (box.centre(o) for o in rejection.gap)
        if a is None or b is None:
            continue
        y = box.y + SLOT_H + 10
        label = f"{REJECTED_MARK} gap {rejection.gap[0]}→{rejection.gap[1]}: no single stride"
        middle = (a + b) / 2
        half = _width(label, 12) / 2 + 4
        parts.append(
            f'<g class="llmfs-gap-mark" data-gap="{rejection.gap[0]} {rejection.gap[1]}">'
            f'<path class="llmfs-gap" d="M{_n(a)} {_n(y - 6)}L{_n(a)} {_n(y)}L{_n(b)} {_n(y)}'
            f'L{_n(b)} {_n(y - 6)}" fill="none" stroke="{ACCENT}" stroke-width="2.5" '
            f'stroke-dasharray="5 3"/>'
            # A backing box keeps the words readable where dashed copy lines pass behind them.
            f'<rect class="llmfs-bg" x="{_n(middle - half)}" y="{_n(y + 3)}" '
            f'width="{_n(2 * half)}" height="16" fill="#ffffff"/>'
            + _text(middle, y + 15, label, "llmfs-gap-text", 12, text_anchor="middle")
            + "</g>"
        )
    return parts, lines


def render_diagram_html(diagram: Diagram) -> str:
    """The diagram as an HTML fragment: the SVG as an image in a sideways-scrolling box, its
    description as the image's ``alt`` text, and the strips' notes and refusals as a list (so a
    screen reader gets them in words too).

    The SVG travels as a ``data:`` image, not inline markup: an untrusted notebook's sanitizer
    removes inline SVG (leaving its text run together) but keeps images, and a static HTML
    export shows the image as it is. The live widget draws the inline, interactive SVG.
    """
    svg = render_diagram_svg(diagram)
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    width, height = _size(svg)
    notes = [note for strip in diagram.strips for note in strip.notes]
    notes.extend(f"{REJECTED_MARK} {r.label}: {r.words}" for r in diagram.rejections)
    listing = "".join(f"<li>{escape(n)}</li>" for n in notes)
    image = (
        f'<img class="llmfs-diagram-image" src="data:image/svg+xml;base64,{data}" '
        f'width="{width}" height="{height}" alt="{escape(_aria_label(diagram))}">'
    )
    return (
        f'<div class="llmfs llmfs-diagram-static">{style_tag()}'
        f'<div class="llmfs-diagram-scroll">{image}</div>'
        + (f'<ul class="llmfs-notes">{listing}</ul>' if listing else "")
        + "</div>"
    )


def _size(svg: str) -> tuple[str, str]:
    head = svg[: svg.index(">")]
    width = head.split(' width="', 1)[1].split('"', 1)[0]
    height = head.split(' height="', 1)[1].split('"', 1)[0]
    return width, height


def svg_of_html(html: str) -> str:
    """The SVG markup inside :func:`render_diagram_html`'s image (for tests and tools)."""
    encoded = html.split("data:image/svg+xml;base64,", 1)[1].split('"', 1)[0]
    return base64.b64decode(encoded).decode("utf-8")


__all__ = ["render_diagram_html", "render_diagram_svg", "svg_of_html"]
