"""The storage diagram's pure model: logical cells, storage strips and the lines between them.

A :class:`Diagram` is plain, frozen data computed once from views, tensors and refused requests;
the text renderer (:func:`render_diagram_text`), the static SVG renderer
(:mod:`llmfs.widgets.svg`) and the live widget (:class:`~llmfs.widgets.storage.StorageDiagram`)
only read it, so the three pictures of one diagram can never disagree.

What it holds:

* one **panel** per view: its logical cells in the view's shape (rank 3 and 4 as labelled blocks
  of grids), each cell with its coordinate, the storage offset it reads, its value and the offset
  formula with numbers (``1 + 1·3 + 0·1 = 4``); the stride jumps in words (``+3 per row, +1 per
  column``); the offset cursor's steps with the carry in words;
* one **strip** per owner (``◇`` an owner that already existed, ``◆`` a new owner made by a
  copy): every storage offset with its value and the cells that read it; offsets no view reads
  are *unread* (hatched, with words such as ``offset 3 is skipped: not contiguous``); a copy's
  strip knows, for each new offset, the source offset it was copied from;
* one **line** per drawn logical cell (cell -> offset) and per copied offset (new -> source);
* one **rejection** per refused request: the violated condition in words and, for a reshape that
  would need a copy, the gap in the source's offsets that no single stride can jump.

Every offset comes from the library (the offset cursor ``logical_offsets()`` and
:func:`llmfs.tensor.layout.storage_offset`); shape, strides and base offset are the view's own.
Large views are summarised: their first and last cells, and the storage around what they read.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from llmfs.course import CourseError
from llmfs.tensor import Tensor, TensorError, TensorView, layout
from llmfs.tensor.errors import NonContiguousReshapeError
from llmfs.widgets.model import (
    FULL_LIMIT,
    HEAD,
    NEW_OWNER_MARK,
    REJECTED_MARK,
    SHARED_MARK,
    TAIL,
    OwnerNames,
    default_namespace,
    evaluate,
    format_number,
)
from llmfs.widgets.svg import render_diagram_html

#: Storage up to this many offsets is drawn in full; a longer strip shows its first offsets, the
#: offsets the drawn cells read, and its last offsets, with the runs in between elided.
STRIP_LIMIT = 48
#: How many offsets a long strip shows from its start and from its end.
STRIP_HEAD = 12
STRIP_TAIL = 4
#: The cursor steps of a view are kept for views up to this many values.
STEP_LIMIT = FULL_LIMIT

SlotStatus = Literal["read", "skipped", "unread", "undrawn", "elided"]
OwnerKind = Literal["shared", "copy"]


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogicalCell:
    """One drawn logical value: ``coordinate`` reads storage ``offset``, which holds ``value``.

    ``place`` is ``(block_row, block_column, row, column)`` in the panel's grid; ``formula`` is
    the offset formula with numbers; ``key`` is unique in the diagram (``"p0c3"``).
    """

    panel: int
    index: int
    coordinate: tuple[int, ...]
    offset: int
    value: float
    place: tuple[int, int, int, int]
    formula: str
    #: In a gradient diagram (:func:`gradient_diagram`): d(loss)/d(this position of the view).
    grad: float | None = None

    @property
    def key(self) -> str:
        """The cell's id in the drawing (panel number and row-major position)."""
        return f"p{self.panel}c{self.index}"


@dataclass(frozen=True)
class CursorStep:
    """One step of the offset cursor: the ``position``-th value in logical order, at
    ``coordinate``, reads ``offset``; ``carry`` says in words how the cursor got there."""

    position: int
    coordinate: tuple[int, ...]
    offset: int
    carry: str


@dataclass(frozen=True)
class Panel:
    """A view's logical cells, drawn in its shape, reading the strip of ``owner``.

    Invariants: ``cells`` are in logical row-major order; ``omitted`` cells lie between the
    first ``head`` cells and the rest when the view is summarised; ``steps`` is empty for a
    summarised view.
    """

    number: int
    label: str
    owner: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    base_offset: int
    contiguous: bool
    cells: tuple[LogicalCell, ...]
    head: int
    omitted: int
    jumps: str
    notes: tuple[str, ...]
    steps: tuple[CursorStep, ...]
    blocks: tuple[tuple[tuple[int, int], str], ...]
    side: Literal["above", "below"] = "above"

    @property
    def total(self) -> int:
        """How many logical values the view has (drawn or not)."""
        return len(self.cells) + self.omitted

    @property
    def summarised(self) -> bool:
        """True when only the first and last cells are drawn."""
        return self.omitted > 0

    @property
    def meta(self) -> str:
        """``shape [3, 2], strides [1, 3], base offset 0, contiguous No``."""
        return (
            f"shape {_ints(self.shape)}, strides {_ints(self.strides)}, base offset "
            f"{self.base_offset}, contiguous {'Yes' if self.contiguous else 'No'}"
        )


@dataclass(frozen=True)
class StorageSlot:
    """One drawn position of a strip: storage ``offset`` with its ``value`` and the keys of the
    cells that read it, or (``status == "elided"``) a run of ``elided`` offsets not drawn."""

    offset: int | None
    value: float | None
    readers: tuple[str, ...]
    status: SlotStatus
    elided: int = 0
    #: In a gradient diagram: the gradient this storage cell accumulated from every view.
    grad: float | None = None


@dataclass(frozen=True)
class Strip:
    """One owner's storage, drawn once, never wrapped.

    ``kind`` is ``"shared"`` (◇, an owner that existed before) or ``"copy"`` (◆, made by
    ``made_by``). A copy from a known view has ``source`` (the source strip's name) and
    ``mapping``: ``(new offset, source offset)`` for every drawn new offset.
    """

    name: str
    kind: OwnerKind
    size: int
    slots: tuple[StorageSlot, ...]
    notes: tuple[str, ...]
    made_by: str = ""
    source: str | None = None
    mapping: tuple[tuple[int, int], ...] = ()

    @property
    def mark(self) -> str:
        """``◇`` or ``◆``."""
        return SHARED_MARK if self.kind == "shared" else NEW_OWNER_MARK

    @property
    def title(self) -> str:
        """``◇ base: storage, 6 values`` or ``◆ copy 1: new owner made by x.materialize()``."""
        if self.kind == "shared":
            return f"{self.mark} {self.name}: storage, {self.size} values"
        made = f" made by {self.made_by}" if self.made_by else ""
        return f"{self.mark} {self.name}: new owner{made}, {self.size} values"

    def slot_of(self, offset: int) -> int | None:
        """The position of ``offset`` among the drawn slots, or ``None`` when it is elided."""
        for position, slot in enumerate(self.slots):
            if slot.offset == offset:
                return position
        return None


@dataclass(frozen=True)
class Line:
    """``kind == "read"``: logical cell ``cell`` reads ``offset`` of strip ``strip``.
    ``kind == "copy"``: offset ``offset`` of the copy ``strip`` was copied from ``source_offset``
    of strip ``source``."""

    kind: Literal["read", "copy"]
    strip: str
    offset: int
    cell: str = ""
    source: str = ""
    source_offset: int = 0

    @property
    def key(self) -> str:
        """The line's id in the drawing."""
        if self.kind == "read":
            return f"l-{self.cell}"
        return f"m-{_slug(self.strip)}-{self.offset}"


@dataclass(frozen=True)
class Rejection:
    """A refused request: the violated ``condition`` and the library's ``message``.

    When the request was a reshape that needs a copy, ``panel`` is the source view's panel and
    ``gap`` the two consecutive offsets (in logical order) whose jump differs from the others, so
    that no single stride walks them all; ``words`` says so with the numbers.
    """

    label: str
    error: str
    condition: str
    message: str
    words: str
    panel: int | None = None
    gap: tuple[int, int] | None = None
    strip: str | None = None


@dataclass(frozen=True)
class Diagram:
    """A whole storage diagram. ``repr`` is the deterministic text form."""

    title: str
    panels: tuple[Panel, ...]
    strips: tuple[Strip, ...]
    lines: tuple[Line, ...]
    rejections: tuple[Rejection, ...] = ()
    #: Strip name -> the panel numbers drawn with it (above, then below).
    groups: tuple[tuple[str, tuple[int, ...]], ...] = field(default=())

    def cell(self, key: str) -> LogicalCell:
        """The cell with ``key``; :class:`CourseError` when there is none."""
        for panel in self.panels:
            for cell in panel.cells:
                if cell.key == key:
                    return cell
        raise CourseError(f"the diagram has no cell {key!r}")

    def strip(self, name: str) -> Strip:
        """The strip of owner ``name``; :class:`CourseError` when there is none."""
        for strip in self.strips:
            if strip.name == name:
                return strip
        raise CourseError(f"the diagram has no strip for {name!r}")

    @property
    def is_gradient(self) -> bool:
        """True for a :func:`gradient_diagram`: cells and offsets carry gradients."""
        return any(slot.grad is not None for strip in self.strips for slot in strip.slots)

    def read_lines(self) -> tuple[Line, ...]:
        """The solid lines: one per drawn logical cell."""
        return tuple(line for line in self.lines if line.kind == "read")

    def copy_lines(self) -> tuple[Line, ...]:
        """The dashed lines: one per drawn offset of every copy with a known source."""
        return tuple(line for line in self.lines if line.kind == "copy")

    def __repr__(self) -> str:
        return render_diagram_text(self)

    def _repr_html_(self) -> str:
        return render_diagram_html(self)


# --------------------------------------------------------------------------------------------
# Building a diagram
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    """One thing to draw: a view or tensor with a ``label``, or a refused request.

    ``copied_from`` (for a tensor made by copying) is the view it copied; ``source`` (for a
    refused request) is the view the request was made on.
    """

    label: str
    result: TensorView | Tensor | TensorError
    copied_from: TensorView | None = None
    source: TensorView | None = None


ItemLike = Item | TensorView | Tensor | tuple[Any, ...]


def _as_item(thing: ItemLike, position: int) -> Item:
    if isinstance(thing, Item):
        return thing
    if isinstance(thing, (TensorView, Tensor)):
        return Item("view" if position == 0 else f"view {position + 1}", thing)
    if isinstance(thing, tuple) and len(thing) in (2, 3) and isinstance(thing[0], str):
        label, result = thing[0], thing[1]
        extra = thing[2] if len(thing) == 3 else None
        if extra is not None and not isinstance(extra, (TensorView, Tensor)):
            raise CourseError(
                f"{label}: the third entry must be a view, got {type(extra).__name__}"
            )
        extra_view = _view(extra) if extra is not None else None
        if isinstance(result, TensorError):
            return Item(label, result, source=extra_view)
        if isinstance(result, (TensorView, Tensor)):
            return Item(label, result, copied_from=extra_view)
    raise CourseError(
        "draw a TensorView, a Tensor, a (label, view) pair, a (label, copy, source view) triple "
        f"or a (label, TensorError, source view) triple; got {type(thing).__name__}"
    )


def _view(item: TensorView | Tensor) -> TensorView:
    return item.view() if isinstance(item, Tensor) else item


def build(
    items: Iterable[ItemLike],
    *,
    owners: Mapping[str, Tensor | TensorView] | None = None,
    title: str = "",
) -> Diagram:
    """The diagram of ``items`` (views, tensors, ``(label, view)`` pairs, :class:`Item`).

    ``owners`` names the source owners (default: the first drawn owner is ``base``); an owner not
    named there is a new owner (a copy) named ``copy 1``, ``copy 2``, ... in order of appearance.
    Raises :class:`~llmfs.tensor.StaleViewError` for a stale view and :class:`CourseError` for
    something that is not a view, a tensor or a refused request.
    """
    entries = [_as_item(thing, k) for k, thing in enumerate(items)]
    given = dict(owners or {})
    if not given:
        first = next(
            (
                e.copied_from if e.copied_from is not None else e.result
                for e in entries
                if not isinstance(e.result, TensorError)
            ),
            None,
        )
        if first is None:
            first = next((e.source for e in entries if e.source is not None), None)
        if first is not None:
            given = {"base": first}
    names = OwnerNames(given)  # type: ignore[arg-type]
    return _Builder(names, title).run(entries)


def diagram(
    source: Tensor | TensorView,
    operations: Sequence[str],
    *,
    name: str = "base",
    owner: str | None = None,
    namespace: Mapping[str, Any] | None = None,
    title: str = "",
) -> Diagram:
    """The diagram of Python ``operations`` on ``source`` (bound to ``name``), as in
    :func:`~llmfs.widgets.model.trace`: ``"sliced = view.slice(1, 1, 3)"``,
    ``"sliced.materialize()"``, ``"sliced.reshape([4])"`` (refused: drawn with its gap).

    ``owner`` names ``source``'s owner (default: ``name``). Only the operations are drawn, not
    ``source`` itself. Raises :class:`~llmfs.widgets.model.ExpressionError` for a Python error.
    """
    scope = default_namespace()
    scope.update(namespace or {})
    scope[name] = source
    entries: list[Item] = []
    for operation in operations:
        if not isinstance(operation, str):
            raise CourseError(f"an operation is a Python expression string, got {operation!r}")
        label = operation.strip()
        _, result, copied_from = evaluate(operation, scope)
        if isinstance(result, TensorError):
            entries.append(Item(label, result, source=_request_source(label, scope)))
        else:
            entries.append(Item(label, result, copied_from=copied_from))
    names = OwnerNames({owner or name: _view(source).owner})
    return _Builder(names, title).run(entries)


GradientItem = tuple[str, TensorView | Tensor, Any]


def gradient_diagram(
    items: Sequence[GradientItem],
    *,
    owners: Mapping[str, Tensor | TensorView] | None = None,
    title: str = "",
) -> Diagram:
    """The storage diagram of a gradient flowing back: ``items`` are ``(label, view, grad)``
    triples, ``grad`` the gradient of the loss with respect to the view (anything NumPy reads,
    of the view's shape). Every drawn cell carries its ``grad``; every storage cell carries the
    sum of what the views send it, computed by the library's view rule
    (:func:`llmfs.tensor.autograd.view_backward`, a scatter-add through the view's offsets), and
    the strip's notes spell out each cell that adds several contributions.

    Raises :class:`CourseError` when a gradient's shape is not its view's.
    """
    import numpy as np

    from llmfs.tensor.autograd import view_backward

    plain = [(label, view) for label, view, _ in items]
    base = build(plain, owners=owners, title=title)
    totals: dict[int, np.ndarray] = {}
    grads_of: dict[int, np.ndarray] = {}
    for number, (label, view, grad) in enumerate(items):
        view = _view(view)
        array = np.asarray(grad.to_numpy() if hasattr(grad, "to_numpy") else grad, dtype=float)
        if array.shape != tuple(view.shape):
            raise CourseError(
                f"{label}: the gradient has shape {list(array.shape)}, the view "
                f"{list(view.shape)}; d(loss)/d(view) has the view's shape"
            )
        grads_of[number] = array.reshape(-1)
        owner = view.owner
        part = view_backward(array, view.layout, owner.size, np.dtype(np.float64))
        totals[id(owner)] = totals.get(id(owner), 0) + part
    by_name = {}
    for panel, (_, view, _) in zip(base.panels, items):
        by_name[panel.owner] = totals[id(_view(view).owner)]
    panels = tuple(
        replace(
            panel,
            cells=tuple(
                replace(cell, grad=float(grads_of[panel.number][cell.index]))
                for cell in panel.cells
            ),
        )
        for panel in base.panels
    )
    strips = []
    for strip in base.strips:
        total = by_name.get(strip.name)
        if total is None:
            strips.append(strip)
            continue
        slots = tuple(
            replace(slot, grad=float(total[slot.offset])) if slot.offset is not None else slot
            for slot in strip.slots
        )
        notes = [*_gradient_notes(strip, panels), *strip.notes]
        strips.append(replace(strip, slots=slots, notes=tuple(notes)))
    return replace(base, panels=panels, strips=tuple(strips))


def _gradient_notes(strip: Strip, panels: Sequence[Panel]) -> list[str]:
    """One sentence per storage cell that several drawn positions send a gradient to."""
    cells = {cell.key: cell for panel in panels for cell in panel.cells}
    notes = []
    for slot in strip.slots:
        if slot.offset is None or len(slot.readers) < 2:
            continue
        parts = [cells[key].grad or 0.0 for key in slot.readers]
        terms = " + ".join(format_number(v) if v >= 0 else f"({format_number(v)})" for v in parts)
        total = format_number(sum(parts))
        notes.append(f"offset {slot.offset} adds {len(parts)} gradients: {terms} = {total}")
    if len(notes) > 6:
        notes = [*notes[:6], f"… {len(notes) - 6} more cells add several gradients"]
    return notes


def _request_source(expression: str, scope: dict[str, Any]) -> TensorView | None:
    """The view a refused ``x.method(...)`` request was made on (``x`` evaluated again)."""
    try:
        tree = ast.parse(expression, mode="exec")
    except SyntaxError:
        return None
    statement = tree.body[0] if tree.body else None
    node = getattr(statement, "value", None)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    try:
        value = eval(compile(ast.Expression(node.func.value), "<source>", "eval"), scope)
    except Exception:
        return None
    return _view(value) if isinstance(value, (TensorView, Tensor)) else None


class _Builder:
    """Turns items into panels, strips, lines and rejections (one use)."""

    def __init__(self, names: OwnerNames, title: str) -> None:
        self.names = names
        self.title = title
        self.panels: list[Panel] = []
        self.panel_views: list[TensorView] = []
        self.rejections: list[Rejection] = []
        # owner name -> (owner, kind, made_by, copied_from view)
        self.owners: dict[str, tuple[Tensor, OwnerKind, str, TensorView | None]] = {}
        self.order: list[str] = []

    def _owner(self, owner: Tensor, made_by: str, copied_from: TensorView | None) -> str:
        name, _ = self.names.name(owner)
        if name not in self.owners:
            kind: OwnerKind = "shared" if self.names.is_given(name) else "copy"
            self.owners[name] = (owner, kind, made_by if kind == "copy" else "", copied_from)
            self.order.append(name)
        return name

    def _panel_of(self, view: TensorView) -> int | None:
        # Identity only: views are values whose == may compare elementwise.
        return next((k for k, v in enumerate(self.panel_views) if v is view), None)

    def _add_panel(self, label: str, view: TensorView) -> int:
        owner = self._owner(view.owner, label, None)
        number = len(self.panels)
        self.panels.append(make_panel(number, label, owner, view))
        self.panel_views.append(view)
        return number

    def run(self, items: Sequence[Item]) -> Diagram:
        for item in items:
            if isinstance(item.result, TensorError):
                self._reject(item)
                continue
            view = _view(item.result)
            if item.copied_from is not None:
                self._owner(item.copied_from.owner, "", None)
                self._owner(view.owner, item.label, item.copied_from)
            self._add_panel(item.label, view)
        return self._finish()

    def _reject(self, item: Item) -> None:
        error = item.result
        assert isinstance(error, TensorError)
        panel = None
        gap = None
        strip = None
        words = f"violated: {error.condition}. {error}"
        if item.source is not None:
            panel = self._panel_of(item.source)
            if panel is None:
                panel = self._add_panel(_source_label(item.label), item.source)
            strip = self.panels[panel].owner
            if isinstance(error, NonContiguousReshapeError):
                gap, words = _reshape_gap(item.source, error)
        self.rejections.append(
            Rejection(
                label=item.label,
                error=type(error).__name__,
                condition=error.condition,
                message=str(error),
                words=words,
                panel=panel,
                gap=gap,
                strip=strip,
            )
        )

    def _finish(self) -> Diagram:
        by_owner: dict[str, list[int]] = {name: [] for name in self.order}
        for panel in self.panels:
            by_owner[panel.owner].append(panel.number)
        has_copies = {
            self.names.lookup(source.owner)
            for _, kind, _, source in self.owners.values()
            if kind == "copy" and source is not None
        }
        panels = list(self.panels)
        for name, numbers in by_owner.items():
            kind = self.owners[name][1]
            for rank, number in enumerate(numbers):
                # A shared strip with copies under it keeps all its views above; otherwise views
                # alternate above and below so that two views' lines never cross.
                below = kind == "copy" or (name not in has_copies and rank % 2 == 1)
                if below:
                    panels[number] = _with_side(panels[number], "below")
        strips = []
        lines: list[Line] = []
        for name in self.order:
            owner, kind, made_by, copied_from = self.owners[name]
            readers = [p for p in panels if p.owner == name]
            source_name = self.names.lookup(copied_from.owner) if copied_from is not None else None
            strip = make_strip(name, kind, owner, readers, made_by, copied_from, source_name)
            strips.append(strip)
        for panel in panels:
            lines.extend(
                Line("read", panel.owner, cell.offset, cell=cell.key) for cell in panel.cells
            )
        for strip in strips:
            if strip.source is not None:
                lines.extend(
                    Line("copy", strip.name, new, source=strip.source, source_offset=old)
                    for new, old in strip.mapping
                )
        groups = tuple((name, tuple(by_owner[name])) for name in self.order)
        return Diagram(
            self.title, tuple(panels), tuple(strips), tuple(lines), tuple(self.rejections), groups
        )


def _source_label(label: str) -> str:
    head = label.split("=", 1)[-1].strip()
    return head.rsplit(".", 1)[0] if "." in head else head


def _with_side(panel: Panel, side: Literal["above", "below"]) -> Panel:
    return replace(panel, side=side)


# --------------------------------------------------------------------------------------------
# Panels: cells, formulas, jumps, cursor steps
# --------------------------------------------------------------------------------------------


def axis_name(axis: int, rank: int) -> str:
    """How an axis is called in words: ``column`` (last), ``row`` (second last), ``block``
    (third last), else ``axis k``."""
    from_end = rank - 1 - axis
    if rank == 1:
        return "step"
    return {0: "column", 1: "row", 2: "block"}.get(from_end, f"step of axis {axis}")


def jumps_text(shape: Sequence[int], strides: Sequence[int]) -> str:
    """The stride jumps in words: ``+3 per row, +1 per column`` (``+0 ... (repeats)`` for a zero
    stride, ``-1 ...`` for a flip); ``one value`` for a scalar."""
    if not shape:
        return "one value, no strides"
    parts = []
    for axis, stride in enumerate(strides):
        sign = "+" if stride >= 0 else "-"
        text = f"{sign}{abs(stride)} per {axis_name(axis, len(shape))}"
        if stride == 0 and shape[axis] > 1:
            text += " (repeats)"
        parts.append(text)
    return ", ".join(parts)


def formula(
    base_offset: int, coordinate: Sequence[int], strides: Sequence[int], offset: int
) -> str:
    """``1 + 1·3 + 0·1 = 4``: base offset plus coordinate times stride, per axis."""
    terms = [str(base_offset)]
    for index, stride in zip(coordinate, strides):
        terms.append(f"{index}·{stride}" if stride >= 0 else f"{index}·({stride})")
    return " + ".join(terms) + f" = {offset}"


def _place(coordinate: tuple[int, ...], rank: int) -> tuple[int, int, int, int]:
    padded = (0,) * max(0, 4 - rank) + coordinate[-4:]
    return padded[0], padded[1], padded[2], padded[3]


def _block_label(coordinate: tuple[int, ...], rank: int) -> str:
    lead = coordinate[: rank - 2]
    return "[" + ", ".join([*(str(c) for c in lead), ":", ":"]) + "]"


def _coordinates(shape: tuple[int, ...], positions: Iterable[int]) -> list[tuple[int, ...]]:
    import numpy as np

    if not shape:
        return [() for _ in positions]
    return [tuple(int(c) for c in np.unravel_index(k, shape)) for k in positions]


def make_panel(number: int, label: str, owner: str, view: TensorView) -> Panel:
    """The panel of ``view`` (reading owner ``owner``): its cells with offsets from the cursor
    (first ones) and :func:`layout.storage_offset` (last ones of a summarised view)."""
    shape, strides, base = tuple(view.shape), tuple(view.strides), view.base_offset
    total = layout.element_count(shape)
    storage = view.owner.as_slice()
    rank = len(shape)
    summarised = total > FULL_LIMIT or rank > 4
    head_n = HEAD if total > FULL_LIMIT else total
    tail_positions = range(total - TAIL, total) if total > FULL_LIMIT else range(0)
    cursor = view.logical_offsets()
    head_offsets = list(itertools.islice(cursor, head_n))
    positions = [*range(head_n), *tail_positions]
    coordinates = _coordinates(shape, positions)
    offsets = head_offsets + [
        layout.storage_offset(shape, strides, base, c) for c in coordinates[head_n:]
    ]
    cells = []
    for slot, (position, coordinate, offset) in enumerate(zip(positions, coordinates, offsets)):
        place = (0, 0, 0, slot) if summarised else _place(coordinate, rank)
        cells.append(
            LogicalCell(
                panel=number,
                index=position,
                coordinate=coordinate,
                offset=offset,
                value=float(storage[offset]),
                place=place,
                formula=formula(base, coordinate, strides, offset),
            )
        )
    blocks: list[tuple[tuple[int, int], str]] = []
    if rank >= 3 and not summarised:
        seen: set[tuple[int, int]] = set()
        for cell in cells:
            key = (cell.place[0], cell.place[1])
            if key not in seen:
                seen.add(key)
                blocks.append((key, _block_label(cell.coordinate, rank)))
    notes = []
    if total == 0:
        notes.append("no values: an axis has size 0, so nothing is read and no line is drawn")
    for axis, (size, stride) in enumerate(zip(shape, strides)):
        if stride == 0 and size > 1:
            notes.append(
                f"stride 0 on axis {axis}: its {size} {axis_name(axis, rank)}s read the same "
                f"offsets, so several lines meet in one storage cell"
            )
    steps = tuple(cursor_steps(view)) if total <= STEP_LIMIT else ()
    return Panel(
        number=number,
        label=label,
        owner=owner,
        shape=shape,
        strides=strides,
        base_offset=base,
        contiguous=view.is_contiguous(),
        cells=tuple(cells),
        head=head_n if summarised else len(cells),
        omitted=total - len(cells),
        jumps=jumps_text(shape, strides),
        notes=tuple(notes),
        steps=steps,
        blocks=tuple(blocks),
    )


def cursor_steps(view: TensorView) -> list[CursorStep]:
    """The offset cursor's walk over ``view`` with the carry in words.

    Offsets are the cursor's (``view.logical_offsets()``); the words name which axis advanced by
    its stride and which axes wrapped back to 0, and the tests hold the arithmetic in the words
    to the cursor's offsets.
    """
    shape, strides = tuple(view.shape), tuple(view.strides)
    rank = len(shape)
    offsets = list(view.logical_offsets())
    coordinates = _coordinates(shape, range(len(offsets)))
    steps = []
    for position, (coordinate, offset) in enumerate(zip(coordinates, offsets)):
        if position == 0:
            carry = f"start at the base offset {view.base_offset}"
        else:
            previous = coordinates[position - 1]
            moved = [axis for axis in range(rank) if coordinate[axis] != previous[axis]]
            advanced = moved[0]
            words = []
            terms = []
            for axis in reversed(moved[1:]):
                back = -previous[axis] * strides[axis]
                words.append(f"{axis_name(axis, rank)} {previous[axis]}→0 wraps ({_signed(back)})")
                terms.append(back)
            stride = strides[advanced]
            move = f"{axis_name(advanced, rank)} {previous[advanced]}→{coordinate[advanced]}"
            words.append(("carry into " if words else "") + f"{move} ({_signed(stride)})")
            terms.append(stride)
            sums = " ".join(_signed(t, spaced=True) for t in terms)
            carry = ", ".join(words) + f": offset {offsets[position - 1]} {sums} = {offset}"
        steps.append(CursorStep(position, coordinate, offset, carry))
    return steps


# --------------------------------------------------------------------------------------------
# Strips
# --------------------------------------------------------------------------------------------


def make_strip(
    name: str,
    kind: OwnerKind,
    owner: Tensor,
    panels: Sequence[Panel],
    made_by: str = "",
    copied_from: TensorView | None = None,
    source_name: str | None = None,
) -> Strip:
    """The strip of ``owner`` read by ``panels``: its offsets, who reads them, what is unread."""
    storage = owner.as_slice()
    size = int(storage.size)
    readers: dict[int, list[str]] = {}
    for panel in panels:
        for cell in panel.cells:
            readers.setdefault(cell.offset, []).append(cell.key)
    complete = all(not p.summarised for p in panels)
    if size <= STRIP_LIMIT:
        shown = list(range(size))
    else:
        wanted = set(range(min(STRIP_HEAD, size))) | set(range(size - STRIP_TAIL, size))
        wanted |= set(readers)
        shown = sorted(wanted)
    slots: list[StorageSlot] = []
    previous = -1
    for offset in shown:
        if offset > previous + 1:
            slots.append(StorageSlot(None, None, (), "elided", offset - previous - 1))
        # Around a summarised view, an offset no drawn cell reads may still be read by one of the
        # cells left out, so it is "undrawn", not "unread".
        status: SlotStatus = "read" if offset in readers else ("unread" if complete else "undrawn")
        slots.append(
            StorageSlot(offset, float(storage[offset]), tuple(readers.get(offset, ())), status)
        )
        previous = offset
    if previous < size - 1:
        slots.append(StorageSlot(None, None, (), "elided", size - 1 - previous))
    notes: list[str] = []
    if panels and complete and size <= STRIP_LIMIT:
        slots, notes = _mark_unread(slots, panels)
    mapping: tuple[tuple[int, int], ...] = ()
    if copied_from is not None and source_name is not None:
        mapping = _copy_mapping(copied_from, {s.offset for s in slots})
    return Strip(
        name=name,
        kind=kind,
        size=size,
        slots=tuple(slots),
        notes=tuple(notes),
        made_by=made_by,
        source=source_name if copied_from is not None else None,
        mapping=mapping,
    )


def _mark_unread(
    slots: list[StorageSlot], panels: Sequence[Panel]
) -> tuple[list[StorageSlot], list[str]]:
    """Unread offsets between the first and last offset some view reads are *skipped* (the gaps
    that make a view non-contiguous); the others are simply not read."""
    read = [s.offset for s in slots if s.status == "read" and s.offset is not None]
    if not read:
        return slots, []
    low, high = min(read), max(read)
    out = []
    runs: list[tuple[int, int, bool]] = []
    for slot in slots:
        offset = slot.offset
        if slot.status != "unread" or offset is None:
            out.append(slot)
            continue
        inside = low < offset < high
        out.append(StorageSlot(offset, slot.value, (), "skipped") if inside else slot)
        if runs and runs[-1][1] == offset - 1 and runs[-1][2] == inside:
            runs[-1] = (runs[-1][0], offset, inside)
        else:
            runs.append((offset, offset, inside))
    notes = []
    for start, end, inside in runs:
        what = f"offset {start}" if start == end else f"offsets {start}-{end}"
        verb = "is" if start == end else "are"
        if inside:
            notes.append(f"{what} {verb} skipped: not contiguous")
        elif end < low:
            notes.append(f"{what} {verb} not read: before the first offset read, {low}")
        else:
            notes.append(f"{what} {verb} not read: after the last offset read, {high}")
    return out, notes


def _copy_mapping(source: TensorView, drawn: set[int | None]) -> tuple[tuple[int, int], ...]:
    """``(new offset, source offset)``: the copy holds the source's values in logical order, so
    its k-th offset came from the k-th offset of the source's cursor."""
    total = layout.element_count(tuple(source.shape))
    wanted = sorted(o for o in drawn if o is not None and o < total)
    pairs = []
    cursor = source.logical_offsets()
    position = 0
    for new in wanted:
        if new - position > STRIP_LIMIT:
            # Jump over the elided run without walking it.
            coordinate = _coordinates(tuple(source.shape), [new])[0]
            old = layout.storage_offset(
                source.shape, source.strides, source.base_offset, coordinate
            )
            pairs.append((new, old))
            continue
        for _ in range(position, new):
            next(cursor)
        pairs.append((new, next(cursor)))
        position = new + 1
    return tuple(pairs)


# --------------------------------------------------------------------------------------------
# Refused reshapes: the gap no single stride can jump
# --------------------------------------------------------------------------------------------


def _reshape_gap(
    view: TensorView, error: NonContiguousReshapeError
) -> tuple[tuple[int, int] | None, str]:
    """The first pair of consecutive offsets (logical order) whose jump differs from the first
    jump, and the words that explain why the reshape needs a copy."""
    offsets = list(itertools.islice(view.logical_offsets(), STRIP_LIMIT * 4))
    requested = _ints(error.requested)
    if len(offsets) < 3:
        return None, f"violated: {error.condition}: {error.reason}"
    first = offsets[1] - offsets[0]
    for k in range(1, len(offsets) - 1):
        jump = offsets[k + 1] - offsets[k]
        if jump != first:
            a, b = offsets[k], offsets[k + 1]
            words = (
                f"reshape to {requested} would walk offsets {_ints(offsets[: k + 2])}"
                f"{', …' if len(offsets) > k + 2 else ''} with strides it cannot have: "
                f"{first:+d} per step, then {jump:+d} from offset {a} to {b}; no single stride "
                f"jumps both. Violated: {error.condition} ({error.reason})"
            )
            return (a, b), words
    return None, f"violated: {error.condition}: {error.reason}"


# --------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------


def _signed(value: int, *, spaced: bool = False) -> str:
    """``+3`` / ``−1`` (``+ 3`` / ``− 1`` when ``spaced``), with a real minus sign."""
    sign = "+" if value >= 0 else "−"
    return f"{sign}{' ' if spaced else ''}{abs(value)}"


def _ints(values: Sequence[int]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name)


def render_diagram_text(diagram: Diagram) -> str:
    """The diagram as deterministic text: each strip (offsets, values, readers), each panel's
    cells in its shape (``[0, 1] 20 → 3``), the copies' mappings and the refusals."""
    out: list[str] = []
    if diagram.title:
        out.append(diagram.title)
    for strip in diagram.strips:
        out.append(strip.title)
        offsets, values, reads = ["offset"], ["value"], ["read by"]
        grads = ["grad"]
        for slot in strip.slots:
            grads.append(format_number(slot.grad) if slot.grad is not None else "")
            if slot.status == "elided":
                text = f"… {slot.elided} …"
                offsets.append(text)
                values.append("")
                reads.append("")
                continue
            offsets.append(str(slot.offset))
            values.append(format_number(slot.value or 0.0) if slot.value is not None else "")
            reads.append(
                str(len(slot.readers))
                if slot.status == "read"
                else {"skipped": "skip", "unread": "·"}.get(slot.status, "")
            )
        rows = [offsets, values, reads] + ([grads] if diagram.is_gradient else [])
        widths = [max(len(t) for t in column) for column in zip(*rows)]
        for row in rows:
            out.append("  " + "  ".join(t.ljust(w) for t, w in zip(row, widths)).rstrip())
        out.extend(f"  {note}" for note in strip.notes)
        if strip.source is not None and strip.mapping:
            pairs = ", ".join(f"{new}←{old}" for new, old in strip.mapping)
            out.append(f"  copied from {strip.source}: new offset←source offset {pairs}")
    for panel in diagram.panels:
        out.append("")
        out.append(f"{panel.label}  (reads {panel.owner})")
        out.append(f"  {panel.meta}")
        out.append(f"  jumps: {panel.jumps}")
        out.extend(f"  {note}" for note in panel.notes)
        out.extend(_panel_rows(panel))
    for rejection in diagram.rejections:
        out.append("")
        out.append(f"{REJECTED_MARK} {rejection.label}  rejected ({rejection.error})")
        out.append(f"  {rejection.words}")
    return "\n".join(out)


def _panel_rows(panel: Panel) -> list[str]:
    def cell_text(cell: LogicalCell) -> str:
        grad = f" ∇{format_number(cell.grad)}" if cell.grad is not None else ""
        return f"{_ints(cell.coordinate)} {format_number(cell.value)} → {cell.offset}{grad}"

    if panel.summarised:
        head = [cell_text(c) for c in panel.cells[: panel.head]]
        tail = [cell_text(c) for c in panel.cells[panel.head :]]
        return [
            "  " + " | ".join(head),
            f"  … {panel.omitted} more …",
            "  " + " | ".join(tail),
        ]
    rows: dict[tuple[int, int, int], list[LogicalCell]] = {}
    for cell in panel.cells:
        rows.setdefault(cell.place[:3], []).append(cell)
    texts = {key: [cell_text(c) for c in cells] for key, cells in rows.items()}
    width = max((len(t) for ts in texts.values() for t in ts), default=0)
    labels = dict(panel.blocks)
    out = []
    current_block: tuple[int, int] | None = None
    for key, ts in texts.items():
        block = (key[0], key[1])
        if block != current_block and block in labels:
            out.append(f"  {labels[block]}")
        current_block = block
        out.append("  " + " | ".join(t.ljust(width) for t in ts).rstrip())
    return out


__all__ = [
    "STRIP_LIMIT",
    "CursorStep",
    "Diagram",
    "Item",
    "Line",
    "LogicalCell",
    "Panel",
    "Rejection",
    "StorageSlot",
    "Strip",
    "axis_name",
    "build",
    "cursor_steps",
    "diagram",
    "formula",
    "gradient_diagram",
    "jumps_text",
    "make_panel",
    "make_strip",
    "render_diagram_text",
]
