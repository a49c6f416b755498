"""The rows of every trace and offset table: plain, frozen data that the engine judges and
every renderer reads.

:class:`TraceRow` is one row of a trace table, :class:`Sampled` the first and last entries of a
long sequence, :func:`offset_entries` a view's offset table. They belong to the exercise engine
(an exercise's truth is read from a row) and are drawn by :mod:`llmfs.widgets` (text, HTML,
figures), which imports them: imports run rows <- describe <- the engine <- the widgets.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from llmfs.course import CourseError
from llmfs.tensor import Tensor, TensorError, TensorView
from llmfs.tensor.layout import Layout

#: Up to this many logical values a row or an offset table shows everything.
FULL_LIMIT = 24
#: Past FULL_LIMIT, this many entries from the start and ...
HEAD = 8
#: ... this many from the end are shown, with a count of those left out in between.
TAIL = 4

SHARED_MARK = "◇"
NEW_OWNER_MARK = "◆"
REJECTED_MARK = "×"

Status = Literal["shared", "copy", "rejected"]


# --------------------------------------------------------------------------------------------
# Sampling: the first and last entries of a long sequence, with a count
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sampled:
    """The first and last entries of a sequence of ``total`` items.

    Invariant: ``head + tail`` are the shown items in order; when ``complete`` (``omitted == 0``)
    ``tail`` is empty and ``head`` is the whole sequence.
    """

    head: tuple[Any, ...]
    tail: tuple[Any, ...]
    total: int

    @property
    def omitted(self) -> int:
        """How many items lie between ``head`` and ``tail`` and are not shown."""
        return self.total - len(self.head) - len(self.tail)

    @property
    def complete(self) -> bool:
        """True when every item is shown."""
        return self.omitted == 0

    def items(self) -> tuple[Any, ...]:
        """The complete sequence. Raises :class:`CourseError` when items were left out."""
        if not self.complete:
            raise CourseError(
                f"only {len(self.head) + len(self.tail)} of {self.total} items were kept, so the "
                f"complete sequence is not available"
            )
        return self.head


def _sample_indices(total: int) -> tuple[range, range]:
    if total <= FULL_LIMIT:
        return range(total), range(0)
    return range(HEAD), range(total - TAIL, total)


def _coordinate(index: int, shape: Sequence[int]) -> tuple[int, ...]:
    # Row-major position -> coordinate; numpy does the division so no index maths lives here.
    if not shape:
        return ()
    return tuple(int(c) for c in np.unravel_index(index, tuple(shape)))


@dataclass(frozen=True)
class OffsetEntry:
    """One line of an offset table: logical ``coordinate`` -> storage ``offset`` -> ``value``."""

    index: int
    coordinate: tuple[int, ...]
    offset: int
    value: float


def offset_entries(view: TensorView | Tensor) -> Sampled:
    """The offset table of a view (or a tensor's full view), sampled for large views.

    Entries come in logical row-major order; offsets are the offset cursor's, values are read at
    those offsets. Raises :class:`~llmfs.tensor.StaleViewError` for a stale view.
    """
    view = _as_view(view)
    total = view.size
    head_range, tail_range = _sample_indices(total)
    storage = view.owner.as_slice()
    cursor = view.logical_offsets()
    head = []
    for index, offset in zip(head_range, itertools.islice(cursor, len(head_range))):
        coordinate = _coordinate(index, view.shape)
        head.append(OffsetEntry(index, coordinate, offset, float(storage[offset])))
    tail = []
    for index in tail_range:
        coordinate = _coordinate(index, view.shape)
        offset = view.layout.storage_offset(coordinate)
        tail.append(OffsetEntry(index, coordinate, offset, float(storage[offset])))
    return Sampled(tuple(head), tuple(tail), total)


def _as_view(item: TensorView | Tensor) -> TensorView:
    if isinstance(item, Tensor):
        return item.view()
    if isinstance(item, TensorView):
        return item
    raise TensorError(f"expected a Tensor or TensorView, got {type(item).__name__}")


@dataclass(frozen=True)
class TraceRow:
    """One row of the trace table; every field is plain data (ints, floats, strings, tuples).

    ``status`` is ``"shared"`` (reads an existing owner's storage), ``"copy"`` (a new owner made
    by this step) or ``"rejected"`` (the request raised; only ``label``, ``error``,
    ``condition`` and ``message`` are set). For a copy made from a known view, ``mapping`` holds
    ``(new offset, source offset)`` pairs (sampled) and ``mapping_source`` the source owner.
    """

    label: str
    status: Status
    owner: str | None = None
    layout: Layout | None = None
    contiguous: bool | None = None
    offsets: Sampled | None = None
    values: Sampled | None = None
    nested_values: Any = None
    mapping: Sampled | None = None
    mapping_source: str | None = None
    error: str | None = None
    condition: str | None = None
    message: str | None = None

    @property
    def shape(self) -> tuple[int, ...] | None:
        """The row's shape (``None`` for a rejected request)."""
        return None if self.layout is None else self.layout.shape

    @property
    def strides(self) -> tuple[int, ...] | None:
        """The row's strides (``None`` for a rejected request)."""
        return None if self.layout is None else self.layout.strides

    @property
    def base_offset(self) -> int | None:
        """The row's base offset (``None`` for a rejected request)."""
        return None if self.layout is None else self.layout.offset

    @property
    def rejected(self) -> bool:
        """True for a refused request."""
        return self.status == "rejected"

    @property
    def new_owner(self) -> bool:
        """True when this row's owner was created by this step (the filled diamond)."""
        return self.status == "copy"

    @property
    def marker(self) -> str:
        """``◇`` shared, ``◆`` new owner, ``×`` rejected."""
        return {"shared": SHARED_MARK, "copy": NEW_OWNER_MARK, "rejected": REJECTED_MARK}[
            self.status
        ]


def format_number(value: float) -> str:
    """A value as learners write it: ``10`` for 10.0, ``0.5``, ``nan``, ``inf``."""
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))
