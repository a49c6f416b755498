"""Checking what a caller hands the layout algebra: integers, shapes, axes and explicit layouts.

:mod:`llmfs.tensor.layout` computes with tuples of Python ints it can trust. This module is the
door to it: it turns user objects (lists, tuples, NumPy integers, 0-d arrays) into those tuples
and refuses everything else with an error that names the value, and it holds the limits every
layout keeps:

* every size product (a 0 counted as 1), every stride and every reachable offset fits in a
  signed 64-bit integer, :data:`INDEX_MAX` (Python ints never overflow, but storage indices,
  NumPy and the Metal kernels are 64-bit);
* a layout has at most :data:`MAX_RANK` axes (NumPy's limit);
* an explicit layout (:func:`validate`) reaches only offsets ``0 <= offset < storage length``.

Each check is written once: :func:`checked_layout` and :func:`validate` are the same rules, the
first raising each rule's own error class, the second one :class:`InvalidLayoutError` naming the
rule, as explicit metadata given to ``as_strided`` is refused.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence, Set
from typing import NoReturn

from llmfs.tensor.errors import (
    INDEX_MAX,
    AxisOutOfRangeError,
    DuplicateAxisError,
    InvalidArgumentError,
    InvalidIndexError,
    InvalidLayoutError,
    InvalidShapeError,
    InvalidStepError,
    PermutationLengthMismatchError,
    RankMismatchError,
    ShapeOverflowError,
    TensorError,
)

Shape = tuple[int, ...]
Strides = tuple[int, ...]

#: The most axes a layout may have: NumPy 2's limit (``NPY_MAXDIMS``), so that every layout can
#: be read by NumPy (``repr``, ``tolist``, ``materialize`` and the ops all go through it).
MAX_RANK = 64


# -- Integers --------------------------------------------------------------------------------------


def as_int(value: object, what: str) -> int:
    """One exact integer (a Python or NumPy integer, or a 0-d integer array); ``what`` names it
    in the error. Floats, bools and sequences are refused with :class:`InvalidArgumentError`
    (:class:`InvalidShapeError` for sizes)."""
    if isinstance(value, bool) or (hasattr(value, "dtype") and value.dtype.kind == "b"):
        _refuse(what, value, "not a bool")
    try:
        # Accepts int, numpy integers and 0-d integer arrays; anything else raises TypeError.
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        _refuse(what, value, "")


def _refuse(what: str, value: object, note: str) -> NoReturn:
    if what == "size":
        detail = f"size must be an integer{', ' + note if note else ''}, got {value!r}"
        raise InvalidShapeError(value, detail) from None
    raise InvalidArgumentError(what, value) from None


def as_int_tuple(values: object, what: str = "size") -> tuple[int, ...]:
    """Converts a list/tuple/array of integers (or one integer) into a tuple of Python ints.

    Raises :class:`InvalidShapeError` (sizes) or :class:`InvalidArgumentError` (anything else)
    when ``values`` is not integers.
    """
    if type(values) is tuple and all(type(v) is int for v in values):
        return values  # already exact Python ints (the common case, checked in one pass)
    if type(values) is tuple or type(values) is list:  # the usual containers, no ABC checks
        return tuple(as_int(v, what) for v in values)
    if isinstance(values, (str, bytes, Mapping, Set)) or values is None:
        # A dict or a set iterates in an order the caller did not write down (a dict gives only
        # its keys), so it is refused rather than read as a shape; iterators are fine.
        if what == "size":
            raise InvalidShapeError(
                values,
                f"expected a sequence of integers (a list or tuple), got "
                f"{type(values).__name__} {values!r}",
            )
        raise InvalidArgumentError(what, values, many=True)
    if getattr(values, "ndim", None) == 0 or not isinstance(values, Iterable):
        return (as_int(values, what),)
    return tuple(as_int(v, what) for v in values)


# -- Shapes and axes -------------------------------------------------------------------------------


def check_rank(shape: Sequence[int]) -> None:
    """Raises :class:`InvalidShapeError` when ``shape`` has more than :data:`MAX_RANK` axes.

    Checked wherever a layout is made (constructors, reshape, unsqueeze, ``None`` indices,
    split, explicit layouts), so no later read is the first place the rank fails.
    """
    if len(shape) > MAX_RANK:
        raise InvalidShapeError(list(shape), _rank_detail(len(shape)))


def _rank_detail(rank: int) -> str:
    return f"rank {rank} is above the limit of {MAX_RANK} axes (NumPy's maximum)"


def check_sizes(shape: object) -> Shape:
    """``shape`` as a tuple of ints, each ``>= 0``, at most :data:`MAX_RANK` of them; raises
    :class:`InvalidShapeError`."""
    dims = as_int_tuple(shape, "size")
    check_rank(dims)
    for axis, size in enumerate(dims):
        if size < 0:
            raise InvalidShapeError(list(dims), f"size {size} of axis {axis} is negative")
    return dims


def check_shape(shape: object) -> Shape:
    """``shape`` as a tuple of ints after :func:`check_sizes` and checking that the product of
    the sizes (a 0 counted as 1, so a huge axis cannot hide behind an empty one) fits in 64 bits.

    Raises :class:`InvalidShapeError` or :class:`ShapeOverflowError`, whose message gives the
    running product from the last axis at the first axis where it passes :data:`INDEX_MAX`.
    """
    dims = check_sizes(shape)
    running = 1
    for size in reversed(dims):
        running *= max(size, 1)
        if running > INDEX_MAX:
            raise ShapeOverflowError(
                dims, f"the product of the sizes (a 0 counted as 1), {running},"
            )
    return dims


def normalize_axis(axis: object, rank: int) -> int:
    """Maps an axis in ``[-rank, rank)`` to ``[0, rank)``; raises :class:`AxisOutOfRangeError`."""
    index = as_int(axis, "axis")
    if not -rank <= index < rank:
        raise AxisOutOfRangeError(index, rank, allow_negative=True)
    return index + rank if index < 0 else index


def normalize_axes(axes: object, rank: int) -> tuple[int, ...]:
    """Normalises a list of distinct axes; raises :class:`AxisOutOfRangeError` or
    :class:`DuplicateAxisError`."""
    raw = as_int_tuple(axes, "axis")
    seen: set[int] = set()
    result = []
    for axis in raw:
        index = normalize_axis(axis, rank)
        if index in seen:
            raise DuplicateAxisError(index, raw)
        seen.add(index)
        result.append(index)
    return tuple(result)


def check_permutation(axes: object, rank: int) -> tuple[int, ...]:
    """Checks that ``axes`` names every axis of a rank-``rank`` layout exactly once.

    Raises :class:`PermutationLengthMismatchError`, :class:`AxisOutOfRangeError` or
    :class:`DuplicateAxisError`.
    """
    raw = as_int_tuple(axes, "axis")
    if len(raw) != rank:
        raise PermutationLengthMismatchError(rank, len(raw))
    return normalize_axes(raw, rank)


# -- Offsets and explicit layouts ------------------------------------------------------------------


def offset_bounds(
    shape: Sequence[int], strides: Sequence[int], base_offset: int
) -> tuple[int, int] | None:
    """Smallest and largest reachable storage offsets, or ``None`` for an empty layout.

    Negative-stride terms lower the minimum, positive ones raise the maximum; size-1 axes add
    nothing whatever their stride.
    """
    if any(size == 0 for size in shape):
        return None
    low = high = base_offset
    for size, stride in zip(shape, strides):
        span = (size - 1) * stride
        if span < 0:
            low += span
        else:
            high += span
    return low, high


def check_offsets_fit(shape: Sequence[int], strides: Sequence[int], base_offset: int) -> None:
    """Raises :class:`ShapeOverflowError` when a reachable offset leaves the signed 64-bit range."""
    bounds = offset_bounds(shape, strides, base_offset)
    if bounds is not None and (bounds[1] > INDEX_MAX or bounds[0] < -INDEX_MAX - 1):
        raise ShapeOverflowError(shape, f"the reachable offset range {bounds}")


def fits_int64(value: int) -> bool:
    """True when ``value`` is a signed 64-bit integer (a stride, an offset)."""
    return -INDEX_MAX - 1 <= value <= INDEX_MAX


def checked_layout(shape: object, strides: object) -> tuple[Shape, Strides]:
    """``(shape, strides)`` as int tuples after the rules of :func:`validate` that need no
    storage: integers, equal ranks, at most :data:`MAX_RANK` axes, sizes ``>= 0``, and strides,
    size product and the offsets reachable from base 0 in 64 bits.

    Raises each rule's own error: :class:`InvalidShapeError`, :class:`InvalidArgumentError`,
    :class:`RankMismatchError` or :class:`ShapeOverflowError`.
    """
    dims, steps, _ = _check_layout(shape, strides, 0, None)
    return dims, steps


def validate(shape: object, strides: object, base_offset: object, storage_len: object) -> None:
    """Checks explicit layout metadata against a storage of ``storage_len`` values.

    Rules, each failure an :class:`InvalidLayoutError` naming the rule and the numbers: shape and
    strides have the same rank, at most :data:`MAX_RANK`; the storage length is ``>= 0``; sizes
    are ``>= 0``; strides, the size product and offsets fit in 64 bits;
    and, for a non-empty layout, the minimum reachable offset (base plus the negative-stride
    terms) is ``>= 0`` and the maximum (base plus the positive terms) is ``< storage_len``. An
    empty layout reaches nothing and is always within bounds. Returns ``None``.
    """
    _check_layout(shape, strides, base_offset, storage_len, explicit=True)


def validated(
    shape: object, strides: object, base_offset: object, storage_len: object
) -> tuple[Shape, Strides, int]:
    """:func:`validate`, returning the converted ``(shape, strides, base_offset)`` (each input
    is read once, so a one-shot iterable is fine)."""
    return _check_layout(shape, strides, base_offset, storage_len, explicit=True)


def _check_layout(
    shape: object,
    strides: object,
    base_offset: object,
    storage_len: object,
    explicit: bool = False,
) -> tuple[Shape, Strides, int]:
    """The layout rules, in the order :func:`validate` reports them. Each broken rule has two
    forms: its own error (``explicit=False``) and an :class:`InvalidLayoutError` naming the rule
    (``explicit=True``); ``storage_len=None`` skips the storage rules."""

    def broken(rule: str, detail: str, error: TensorError) -> NoReturn:
        raise (InvalidLayoutError(rule, detail) if explicit else error) from None

    try:
        dims = as_int_tuple(shape, "size")
        steps = as_int_tuple(strides, "stride")
        base = as_int(base_offset, "base offset")
        length = None if storage_len is None else as_int(storage_len, "storage length")
    except (InvalidShapeError, InvalidArgumentError) as error:
        broken("integer metadata", str(error), error)
    if len(dims) != len(steps):
        detail = f"shape has rank {len(dims)} but strides has rank {len(steps)}"
        what = "the number of strides (the rank)"
        broken("rank", detail, RankMismatchError(len(dims), len(steps), what=what))
    if len(dims) > MAX_RANK:
        detail = _rank_detail(len(dims))
        broken(f"rank <= {MAX_RANK}", detail, InvalidShapeError(list(dims), detail))
    if length is not None and length < 0:
        detail = f"the storage length {length} is negative"
        broken("storage length >= 0", detail, InvalidArgumentError("storage length", length))
    for axis, size in enumerate(dims):
        if size < 0:
            detail = f"size {size} of axis {axis} is negative"
            broken("sizes >= 0", detail, InvalidShapeError(list(dims), detail))
    for axis, stride in enumerate(steps):
        if not fits_int64(stride):
            detail = f"stride {stride} of axis {axis} does not fit in 64 bits"
            overflow = ShapeOverflowError(dims, f"the magnitude of stride {stride} of axis {axis}")
            broken("64-bit overflow", detail, overflow)
    try:
        check_shape(dims)
        check_offsets_fit(dims, steps, base)
    except ShapeOverflowError as error:
        broken("64-bit overflow", str(error), error)
    bounds = offset_bounds(dims, steps, base)
    if length is None or bounds is None:
        return dims, steps, base
    low, high = bounds
    if low < 0:
        raise InvalidLayoutError(
            "minimum offset >= 0",
            f"the smallest reachable offset is {low}, {-low} below the start of the storage",
        )
    if high >= length:
        raise InvalidLayoutError(
            "maximum offset < storage length",
            f"the largest reachable offset is {high} but the storage holds {length} values "
            f"(valid offsets 0..{length - 1}); it is {high - length + 1} past the end",
        )
    return dims, steps, base


def layout_of_item(index: int, item: object) -> tuple[Shape, Strides]:
    """Item ``index`` of a list of layouts: a view (anything with ``shape`` and ``strides``) or
    a ``(shape, strides)`` pair, checked by :func:`checked_layout`. Raises :class:`TensorError`
    for anything else, a NumPy array included (its strides count bytes)."""
    if hasattr(item, "__array_interface__"):
        # A NumPy array: its strides count bytes, and read as elements they would give a wrong
        # answer rather than an error.
        raise TensorError(
            f"can_view_as_contiguous_all: item {index} is a NumPy array, whose strides count "
            f"bytes, not elements; pass (a.shape, [s // a.itemsize for s in a.strides])"
        )
    if hasattr(item, "shape") and hasattr(item, "strides"):
        return checked_layout(item.shape, item.strides)
    if isinstance(item, (tuple, list)) and len(item) == 2:
        return checked_layout(item[0], item[1])
    raise TensorError(
        f"can_view_as_contiguous_all takes views or (shape, strides) pairs; item {index} is "
        f"{type(item).__name__} {item!r}"
    )


def slice_indices(item: slice, size: int) -> tuple[int, int, int]:
    """Python's clamping of a slice to an axis of ``size`` (``slice.indices``), with our
    errors: :class:`InvalidIndexError` for a bound or step that is not an integer or None,
    :class:`InvalidStepError` for a zero step."""
    for part, what in (
        (item.start, "slice start"),
        (item.stop, "slice stop"),
        (item.step, "slice step"),
    ):
        if part is not None and (isinstance(part, bool) or not hasattr(type(part), "__index__")):
            raise InvalidIndexError(f"{what} must be an integer or None, got {part!r}")
    if item.step is not None and operator.index(item.step) == 0:
        raise InvalidStepError(0)
    return item.indices(size)


__all__ = [
    "INDEX_MAX",
    "MAX_RANK",
    "Shape",
    "Strides",
    "as_int",
    "as_int_tuple",
    "check_offsets_fit",
    "check_permutation",
    "check_rank",
    "check_shape",
    "check_sizes",
    "checked_layout",
    "fits_int64",
    "layout_of_item",
    "normalize_axes",
    "normalize_axis",
    "offset_bounds",
    "slice_indices",
    "validate",
    "validated",
]
