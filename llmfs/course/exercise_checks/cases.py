"""Drawing the random layouts of the layout exercises, and what a report needs to know of them.

The layout exercises of chapters 1 to 5 share one generator, :func:`view_layout`: a view made by
the library's own operations (permute, slice, step, flip) from a row-major owner, so every case is
a layout the library itself produces. Its options draw the edge cases the chapters teach, each
where the exercise's function takes it: a scalar (shape ``[]``, read at some offset of its
owner), an empty axis (size 0, an empty slice), size-1 axes (any stride is theirs) and negative
strides (flipped axes). :func:`edge_kinds` names the kinds a layout is, so a test can assert
that every kind appears in an exercise's cases.

A report orders cases by :func:`shape_size` (the sizes of the axes summed, then the rank) and
draws a case's layout as an offset table through :func:`view_over` (the case's own storage, or
the chapters' fixture values ``100 + offset`` when a case has none).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from llmfs.tensor import Tensor, TensorError, TensorView, as_strided, layout

#: The edge cases a layout exercise's cases must contain (where its function takes them).
EDGE_KINDS: tuple[str, ...] = ("scalar", "empty", "size-1", "negative stride")


def shape(
    rng: random.Random, *, low: int = 1, high: int = 4, rank: tuple[int, int] = (0, 4)
) -> list[int]:
    """A random shape: ``rank`` axes (inclusive range), sizes in ``low..high``."""
    return [rng.randint(low, high) for _ in range(rng.randint(*rank))]


def row_major(sizes: Sequence[int]) -> list[int]:
    """The library's row-major strides of ``sizes`` (a size-0 axis counted as 1)."""
    return list(layout.row_major_strides(tuple(sizes)))


def view_layout(
    rng: random.Random,
    *,
    negative: bool = False,
    scalar: float = 0.0,
    empty: float = 0.0,
    rank: tuple[int, int] = (1, 4),
) -> tuple[list[int], list[int], int, int]:
    """A random valid view layout, ``(shape, strides, base_offset, storage_len)``, made by the
    library's own operations from a row-major owner of ``storage_len`` values.

    Sizes run 1 to 4 (so size-1 axes are common); ``negative`` flips axes now and then; with
    probability ``scalar`` the view is a scalar at one offset of its owner (shape ``[]``), and
    with probability ``empty`` one axis is sliced to nothing (size 0). ``rank`` bounds the
    owner's rank (a scalar aside).
    """
    owner_shape = shape(rng, rank=rank)
    owner_len = layout.element_count(owner_shape)
    if rng.random() < scalar:
        return [], [], rng.randrange(owner_len), owner_len
    here = layout.Layout(tuple(owner_shape), tuple(row_major(owner_shape)), 0)
    for _ in range(rng.randint(0, 3)):
        choice = rng.random()
        axis = rng.randrange(here.rank)
        if choice < 0.35:
            axes = list(range(here.rank))
            rng.shuffle(axes)
            here = here.permute(axes)
        elif choice < 0.8 and here.shape[axis] > 1:
            start = rng.randrange(here.shape[axis])
            stop = rng.randint(start + 1, here.shape[axis])
            here = here.slice(axis, start, stop, rng.choice((1, 1, 2)))
        elif negative:
            here = here.flip(axis)
    if here.rank and rng.random() < empty:
        # An empty slice that starts at a value of the axis: the base offset stays in storage.
        axis = rng.randrange(here.rank)
        start = rng.randrange(here.shape[axis])
        here = here.slice(axis, start, start)
    return list(here.shape), list(here.strides), here.offset, owner_len


def storage(rng: random.Random, count: int) -> list[int]:
    """``count`` storage values that differ from their offsets (tens digit random, units the
    offset's), so an offset table shows where each value lives."""
    return [rng.randint(1, 9) * 10 + k % 10 for k in range(count)]


def edge_kinds(sizes: Sequence[int], strides: Sequence[int] | None = None) -> set[str]:
    """The :data:`EDGE_KINDS` a layout is: ``scalar`` (no axes), ``empty`` (a size-0 axis),
    ``size-1`` (an axis of size 1), ``negative stride`` (a stride below 0)."""
    kinds = set()
    if not sizes:
        kinds.add("scalar")
    if 0 in sizes:
        kinds.add("empty")
    if 1 in sizes:
        kinds.add("size-1")
    if strides is not None and any(s < 0 for s in strides):
        kinds.add("negative stride")
    return kinds


def shape_size(*positions: int, storage_at: int | None = None) -> Callable[..., tuple[int, ...]]:
    """A spec's ``size``: the total size of the shapes at ``positions`` of a case's arguments
    (every axis's size, summed: ``[2, 3]`` is 5, a scalar 0), then their ranks (summed), then
    the length of the storage list at ``storage_at`` (if any: of two scalar views, the one over
    the shorter storage is smaller). Sizes are summed, not multiplied, so a layout with an
    empty axis is not smaller than ``[2, 3]`` for being empty: its other axes count."""

    def size(*args: Any) -> tuple[int, ...]:
        shapes = [args[p] for p in positions]
        stored = len(args[storage_at]) if storage_at is not None else 0
        return (sum(sum(s) for s in shapes), sum(len(s) for s in shapes), stored)

    return size


def json_size(*args: Any) -> tuple[int, ...]:
    """The default size of a case: how many numbers its arguments hold (a seed not counted)."""

    def numbers(value: Any) -> int:
        if isinstance(value, bool) or value is None or isinstance(value, str):
            return 0
        if isinstance(value, (int, float)):
            return 1
        if isinstance(value, dict):
            return sum(numbers(v) for k, v in value.items() if k != "seed")
        if isinstance(value, (list, tuple)):
            return sum(numbers(v) for v in value)
        return 0

    return (numbers(list(args)),)


#: A case whose storage a view would need past this many values is not drawn.
DRAWN_STORAGE_LIMIT = 4096


def view_over(
    sizes: Sequence[int],
    strides: Sequence[int],
    base_offset: int = 0,
    values: Sequence[float] | None = None,
) -> TensorView:
    """A view of the layout over ``values`` (default: ``100 + offset`` for every offset the
    layout reaches). Raises :class:`~llmfs.tensor.TensorError` for a layout that is not a valid
    view of that storage (an offset below 0, past the end, or a storage too large to draw)."""
    if values is None:
        bounds = layout.offset_bounds(sizes, strides, base_offset)
        high = max(base_offset, bounds[1]) if bounds is not None else base_offset
        if high >= DRAWN_STORAGE_LIMIT:
            raise TensorError(f"a storage of {high + 1} values is too large to draw")
        values = [100 + k for k in range(high + 1)]
    owner = Tensor.from_vec([len(values)], list(values))
    return as_strided(owner, list(sizes), list(strides), base_offset)


def views_at(
    shape_at: int,
    strides_at: int | None = None,
    base_at: int | None = None,
    storage_at: int | None = None,
    name: str = "input",
) -> Callable[..., list[tuple[str, TensorView]]]:
    """A spec's ``views``: the one layout a case's arguments describe, its shape at position
    ``shape_at``, strides at ``strides_at`` (None: row-major), base offset at ``base_at`` (None:
    the lowest that reads no offset below 0) and storage at ``storage_at`` (None: the fixture
    values)."""

    def views(*args: Any) -> list[tuple[str, TensorView]]:
        sizes = args[shape_at]
        strides = row_major(sizes) if strides_at is None else args[strides_at]
        if len(strides) != len(sizes):
            raise TensorError("the strides do not match the shape")
        # A case without a base offset is drawn from the lowest offset it reaches, so a negative
        # stride still reads storage from offset 0 up.
        bounds = layout.offset_bounds(sizes, strides, 0)
        base = max(0, -bounds[0]) if bounds is not None else 0
        if base_at is not None:
            base = args[base_at]
        values = None if storage_at is None else args[storage_at]
        return [(name, view_over(sizes, strides, base, values))]

    return views


__all__ = [
    "DRAWN_STORAGE_LIMIT",
    "EDGE_KINDS",
    "edge_kinds",
    "json_size",
    "row_major",
    "shape",
    "shape_size",
    "storage",
    "view_layout",
    "view_over",
    "views_at",
]
