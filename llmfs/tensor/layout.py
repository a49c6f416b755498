"""Layout arithmetic: pure functions over (shape, strides, base offset).

This module is the single home of the library's index maths. Views, every backend, the widgets
and the tests call these functions; nothing else computes strides, offsets, contiguity, bounds or
reshape plans. Every function is pure: it takes tuples of Python ints and returns new tuples (or
raises a :class:`~llmfs.tensor.errors.TensorError`), so each one can be read, tested and taught on
its own.

Conventions
-----------
* A *shape* is a tuple of non-negative sizes; ``()`` is a scalar with one value.
* *Strides* are signed and counted in elements (not bytes). A zero stride repeats values
  (broadcasting); a negative stride walks backwards (a flip).
* The *storage offset* of coordinate ``c`` is ``base_offset + sum(c[k] * strides[k])``.
* Row-major ("C order") strides count a size-0 axis as size 1, as NumPy and PyTorch do, so the
  strides of ``(2, 0, 3)`` are ``(3, 3, 1)``.
* Every size product (a 0 counted as 1) and every reachable offset must fit in a signed 64-bit
  integer: Python ints never overflow, but storage indices and the Metal kernels are 64-bit.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence

from llmfs.tensor.errors import (
    AxisOutOfRangeError,
    BroadcastError,
    DuplicateAxisError,
    IndexOutOfBoundsError,
    InvalidLayoutError,
    InvalidShapeError,
    NonContiguousReshapeError,
    PermutationLengthMismatchError,
    RankMismatchError,
    ReshapeElementCountMismatchError,
    ShapeOverflowError,
)

Shape = tuple[int, ...]
Strides = tuple[int, ...]

#: The largest index a 64-bit signed integer can hold; sizes and offsets must stay at or below it.
INDEX_MAX = 2**63 - 1


# --------------------------------------------------------------------------------------------
# Normalising user input
# --------------------------------------------------------------------------------------------


def _as_int(value: object, what: str) -> int:
    if isinstance(value, bool):
        raise InvalidShapeError(value, f"{what} must be an integer, not a bool")
    try:
        return operator.index(value)  # accepts int and numpy integers, refuses floats
    except TypeError:
        raise InvalidShapeError(value, f"{what} must be an integer, got {value!r}") from None


def as_int_tuple(values: object, what: str = "size") -> tuple[int, ...]:
    """Converts a list/tuple of integers (or one integer) into a tuple of Python ints.

    Raises :class:`InvalidShapeError` when ``values`` is not a sequence of integers.
    """
    if isinstance(values, (str, bytes)):
        raise InvalidShapeError(values, f"expected a sequence of integers, got {values!r}")
    if isinstance(values, Iterable):
        return tuple(_as_int(v, what) for v in values)
    return (_as_int(values, what),)


def check_shape(shape: object) -> Shape:
    """Returns ``shape`` as a tuple of ints after checking every size is ``>= 0`` and that the
    size product (a 0 counted as 1) fits in 64 bits.

    Raises :class:`InvalidShapeError` or :class:`ShapeOverflowError`.
    """
    dims = as_int_tuple(shape, "size")
    for axis, size in enumerate(dims):
        if size < 0:
            raise InvalidShapeError(list(dims), f"size {size} of axis {axis} is negative")
    row_major_strides(dims)  # raises ShapeOverflowError
    return dims


# --------------------------------------------------------------------------------------------
# Row-major layout, element counts, offsets
# --------------------------------------------------------------------------------------------


def row_major_strides(shape: Sequence[int]) -> Strides:
    """Row-major strides of ``shape``: the last axis has stride 1, each earlier axis the product
    of the sizes after it, a size-0 axis counted as 1.

    ``row_major_strides((10, 9, 5, 13)) == (585, 65, 13, 1)``.
    Raises :class:`ShapeOverflowError` when the size product (0 as 1) exceeds :data:`INDEX_MAX`.
    """
    strides = [0] * len(shape)
    running = 1
    for axis in range(len(shape) - 1, -1, -1):
        strides[axis] = running
        running *= max(shape[axis], 1)
        if running > INDEX_MAX:
            raise ShapeOverflowError(
                shape, f"the product of the sizes (a 0 counted as 1), {running},"
            )
    return tuple(strides)


def element_count(shape: Sequence[int]) -> int:
    """Number of values a shape holds: the product of its sizes (1 for a scalar, 0 with a 0)."""
    count = 1
    for size in shape:
        count *= size
    return count


def checked_row_major_layout(shape: object) -> tuple[Shape, Strides, int]:
    """Checks ``shape`` and returns ``(shape, row-major strides, element count)``.

    The whole stride chain is checked even when an early size is 0, so a huge later axis cannot
    hide an overflow behind a zero.
    Raises :class:`InvalidShapeError` or :class:`ShapeOverflowError`.
    """
    dims = check_shape(shape)
    return dims, row_major_strides(dims), element_count(dims)


def normalize_axis(axis: object, rank: int) -> int:
    """Maps an axis in ``[-rank, rank)`` to ``[0, rank)``; raises :class:`AxisOutOfRangeError`."""
    index = _as_int(axis, "axis")
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


def storage_offset(
    shape: Sequence[int], strides: Sequence[int], base_offset: int, coordinate: object
) -> int:
    """Storage offset of one caller-supplied coordinate, checking every component.

    Raises :class:`RankMismatchError` if the coordinate has the wrong length and
    :class:`IndexOutOfBoundsError` if a component is outside ``[0, size)`` (negative components
    are refused, as in the seed's ``usize`` coordinates).
    """
    coord = as_int_tuple(coordinate, "index")
    if len(coord) != len(shape):
        raise RankMismatchError(len(shape), len(coord), what="coordinate length (the view's rank)")
    offset = base_offset
    for axis, (index, size, stride) in enumerate(zip(coord, shape, strides)):
        if not 0 <= index < size:
            raise IndexOutOfBoundsError(axis, index, size)
        offset += index * stride
    return offset


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


# --------------------------------------------------------------------------------------------
# Contiguity
# --------------------------------------------------------------------------------------------


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """True when the layout walks its storage in row-major order with no gaps.

    Size-1 axes may carry any stride (they never advance); scalars and empty layouts are
    contiguous. The base offset does not matter.
    """
    if any(size == 0 for size in shape):
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def can_view_as_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Seed 004's "transpose-contiguous" test: the values fill one gap-free block of storage.

    True when the layout is contiguous; otherwise false if any axis of size != 1 has stride 0
    (broadcast) or a negative stride (a flip); otherwise size-1 axes are dropped, the remaining
    (stride, size) pairs are sorted by stride, descending, and the result must be contiguous.
    So ``(5, 4, 6, 7)`` with strides ``(42, 210, 7, 1)`` (a transposed ``(4, 5, 6, 7)``) is true.
    """
    if is_contiguous(shape, strides):
        return True
    pairs = []
    for size, stride in zip(shape, strides):
        if size == 1:
            continue
        if stride <= 0:
            return False
        pairs.append((stride, size))
    pairs.sort(key=lambda pair: pair[0], reverse=True)
    return is_contiguous([size for _, size in pairs], [stride for stride, _ in pairs])


def can_view_as_contiguous_all(layouts: Iterable[object]) -> bool:
    """List form of :func:`can_view_as_contiguous` (seed 004's overload).

    Each item is a view (anything with ``shape`` and ``strides``) or a ``(shape, strides)`` pair.
    True for an empty list; otherwise every item must share the first one's shape and strides,
    and that shared layout must pass the single test.
    """
    items = [_shape_and_strides(item) for item in layouts]
    if not items:
        return True
    first = items[0]
    if any(item != first for item in items[1:]):
        return False
    return can_view_as_contiguous(*first)


def _shape_and_strides(item: object) -> tuple[Shape, Strides]:
    if hasattr(item, "shape") and hasattr(item, "strides"):
        return tuple(item.shape), tuple(item.strides)  # type: ignore[attr-defined]
    shape, strides = item  # type: ignore[misc]
    return tuple(shape), tuple(strides)


def coalesce(shape: Sequence[int], strides: Sequence[int]) -> tuple[Shape, Strides]:
    """Fewest axes that visit the same offsets in the same order.

    Size-1 axes are dropped and neighbours with ``stride[k] == size[k+1] * stride[k+1]`` are merged
    (candle's contiguous-block idea), so a contiguous layout becomes one axis and a transposed
    matrix stays two. Empty layouts are returned unchanged. Used by fast copies and kernels to walk
    whole runs instead of single values.
    """
    if any(size == 0 for size in shape):
        return tuple(shape), tuple(strides)
    out_shape: list[int] = []
    out_strides: list[int] = []
    for size, stride in zip(shape, strides):
        if size == 1:
            continue
        if out_shape and out_strides[-1] == size * stride:
            out_shape[-1] *= size
            out_strides[-1] = stride
        else:
            out_shape.append(size)
            out_strides.append(stride)
    return tuple(out_shape), tuple(out_strides)


# --------------------------------------------------------------------------------------------
# Permutations, slices, flips
# --------------------------------------------------------------------------------------------


def check_permutation(axes: object, rank: int) -> tuple[int, ...]:
    """Checks that ``axes`` names every axis of a rank-``rank`` layout exactly once.

    Raises :class:`PermutationLengthMismatchError`, :class:`AxisOutOfRangeError` or
    :class:`DuplicateAxisError`.
    """
    raw = as_int_tuple(axes, "axis")
    if len(raw) != rank:
        raise PermutationLengthMismatchError(rank, len(raw))
    return normalize_axes(raw, rank)


def permute_layout(
    shape: Sequence[int], strides: Sequence[int], axes: Sequence[int]
) -> tuple[Shape, Strides]:
    """Output axis ``k`` takes the size and stride of source axis ``axes[k]`` (axes pre-checked)."""
    return tuple(shape[a] for a in axes), tuple(strides[a] for a in axes)


def stepped_size(start: int, stop: int, step: int) -> int:
    """Number of indices in ``range(start, stop, step)`` for ``start <= stop`` and ``step >= 1``:
    ``ceil((stop - start) / step)``."""
    return -(-(stop - start) // step)


def flip_layout(
    shape: Sequence[int], strides: Sequence[int], base_offset: int, axis: int
) -> tuple[Strides, int]:
    """Reverses one axis: its stride is negated and the base offset moves to the axis's last
    element. An empty axis leaves the base offset alone. Returns ``(strides, base_offset)``."""
    new_strides = list(strides)
    new_strides[axis] = -strides[axis]
    size = shape[axis]
    offset = base_offset + (size - 1) * strides[axis] if size > 0 else base_offset
    return tuple(new_strides), offset


# --------------------------------------------------------------------------------------------
# Reshape as merges and splits
# --------------------------------------------------------------------------------------------


def infer_shape(requested: object, count: int) -> Shape:
    """Resolves at most one ``-1`` in a requested shape for ``count`` values.

    A ``-1`` is inferred as ``count // product(others)``; it is ambiguous (an error) when the
    other sizes multiply to 0. Other negative sizes are :class:`InvalidShapeError`. The element
    count itself is not compared here (see :func:`plan_reshape`), except that a ``-1`` that cannot
    divide evenly is a :class:`ReshapeElementCountMismatchError`.
    """
    dims = as_int_tuple(requested, "size")
    unknown = [axis for axis, size in enumerate(dims) if size == -1]
    for axis, size in enumerate(dims):
        if size < -1:
            raise InvalidShapeError(list(dims), f"size {size} of axis {axis} is negative")
    if len(unknown) > 1:
        raise InvalidShapeError(
            list(dims), f"only one size may be -1 (inferred), but axes {unknown} are -1"
        )
    if not unknown:
        return check_shape(dims)
    others = element_count([size for size in dims if size != -1])
    if others == 0:
        raise InvalidShapeError(
            list(dims),
            "the -1 size is ambiguous because the other sizes multiply to 0",
        )
    if count % others != 0:
        raise ReshapeElementCountMismatchError(count, others, dims)
    resolved = list(dims)
    resolved[unknown[0]] = count // others
    return check_shape(resolved)


def plan_reshape(
    shape: Sequence[int], strides: Sequence[int], requested: object
) -> tuple[Shape, Strides]:
    """Plans a reshape without copying: returns ``(new_shape, new_strides)`` over the same
    offsets in the same logical order, or raises.

    Reshape is a sequence of merges and splits (seed 000). Splitting an axis never needs a copy.
    A group of old axes can be merged into one only when, ignoring size-1 axes, each stride equals
    the next axis's size times its stride: ``stride[k] == size[k+1] * stride[k+1]``. This is the
    rule of NumPy's no-copy reshape and PyTorch's ``view``, and the resulting strides agree with
    theirs (strides of size-1 axes are arbitrary; an empty layout gets row-major strides).

    Raises :class:`InvalidShapeError` for negative or ambiguous sizes,
    :class:`ReshapeElementCountMismatchError` when the counts differ, and
    :class:`NonContiguousReshapeError` naming the old axes that cannot be merged.
    """
    count = element_count(shape)
    new_shape = infer_shape(requested, count)
    new_count = element_count(new_shape)
    if new_count != count:
        raise ReshapeElementCountMismatchError(count, new_count, new_shape)
    if count == 0:
        return new_shape, row_major_strides(new_shape)
    if is_contiguous(shape, strides):
        # Any base stride works for a contiguous layout; keep row-major strides.
        return new_shape, row_major_strides(new_shape)

    # The old layout without its size-1 axes, remembering their original numbers for messages.
    old = [
        (axis, size, stride) for axis, (size, stride) in enumerate(zip(shape, strides)) if size != 1
    ]
    new_strides = [0] * len(new_shape)
    oi = ni = 0
    while ni < len(new_shape) and oi < len(old):
        new_product = new_shape[ni]
        old_product = old[oi][1]
        nj, oj = ni + 1, oi + 1
        while new_product != old_product:
            if new_product < old_product:
                new_product *= new_shape[nj]
                nj += 1
            else:
                old_product *= old[oj][1]
                oj += 1
        # Old axes oi..oj-1 must form one run to be merged (split afterwards into ni..nj-1).
        for k in range(oi, oj - 1):
            axis_a, size_a, stride_a = old[k]
            axis_b, size_b, stride_b = old[k + 1]
            if stride_a != size_b * stride_b:
                raise NonContiguousReshapeError(
                    shape,
                    strides,
                    new_shape,
                    f"axes {axis_a} and {axis_b} (sizes {size_a}, {size_b}; strides {stride_a}, "
                    f"{stride_b}) are not adjacent in storage: {stride_a} != {size_b}*{stride_b}",
                )
        new_strides[nj - 1] = old[oj - 1][2]
        for k in range(nj - 1, ni, -1):
            new_strides[k - 1] = new_strides[k] * new_shape[k]
        ni, oi = nj, oj
    # Trailing size-1 axes of the new shape: any stride is valid; use the last group's.
    last = new_strides[ni - 1] if ni > 0 else 1
    for k in range(ni, len(new_shape)):
        new_strides[k] = last
    return new_shape, tuple(new_strides)


def split_layout(
    shape: Sequence[int], strides: Sequence[int], axis: int, sizes: object
) -> tuple[Shape, Strides]:
    """Splits one axis into several (one size may be ``-1``); never needs a copy.

    The product of ``sizes`` must equal the axis size,
    else :class:`ReshapeElementCountMismatchError`.
    """
    parts = infer_shape(sizes, shape[axis])
    if element_count(parts) != shape[axis]:
        raise ReshapeElementCountMismatchError(shape[axis], element_count(parts), parts)
    inner = list(row_major_strides(parts))
    part_strides = tuple(s * strides[axis] for s in inner)
    return (
        tuple(shape[:axis]) + parts + tuple(shape[axis + 1 :]),
        tuple(strides[:axis]) + part_strides + tuple(strides[axis + 1 :]),
    )


# --------------------------------------------------------------------------------------------
# Broadcasting
# --------------------------------------------------------------------------------------------


def broadcast_layout(
    shape: Sequence[int], strides: Sequence[int], target: object
) -> tuple[Shape, Strides]:
    """Expands a layout to ``target`` with zero strides (``expand``/``broadcast_to``).

    New leading axes get stride 0; an existing axis keeps its stride when the sizes are equal or
    the target size is ``-1``; a size-1 axis may expand to any size (0 included) with stride 0.
    Anything else is a :class:`BroadcastError` naming the axis and both sizes.
    """
    dims = as_int_tuple(target, "size")
    if len(dims) < len(shape):
        raise BroadcastError(
            shape, dims, 0, f"the target has rank {len(dims)}, below the source rank {len(shape)}"
        )
    lead = len(dims) - len(shape)
    out_shape: list[int] = []
    out_strides: list[int] = []
    for axis, want in enumerate(dims):
        if axis < lead:
            if want < 0:
                raise BroadcastError(
                    shape, dims, axis, f"a new leading axis needs a size >= 0, not {want}"
                )
            out_shape.append(want)
            out_strides.append(0)
            continue
        have, stride = shape[axis - lead], strides[axis - lead]
        if want == -1 or want == have:
            out_shape.append(have)
            out_strides.append(stride)
        elif have == 1 and want >= 0:
            out_shape.append(want)
            out_strides.append(0)
        else:
            raise BroadcastError(
                shape,
                dims,
                axis,
                f"source size {have} cannot expand to {want} (only a size-1 axis can)",
            )
    check_shape(out_shape)
    return tuple(out_shape), tuple(out_strides)


def broadcast_shapes(*shapes: Sequence[int]) -> Shape:
    """NumPy's broadcasting rule: right-align the shapes; on each axis the sizes must be equal or 1.

    Raises :class:`BroadcastError` naming both shapes and the (right-aligned output) axis.
    """
    rank = max((len(s) for s in shapes), default=0)
    result = [1] * rank
    setter = [0] * rank  # which shape fixed each output size, for the error message
    for index, shape in enumerate(shapes):
        lead = rank - len(shape)
        for axis, size in enumerate(shape):
            out_axis = axis + lead
            current = result[out_axis]
            if size == current or size == 1:
                continue
            if current == 1:
                result[out_axis] = size
                setter[out_axis] = index
                continue
            raise BroadcastError(
                shapes[setter[out_axis]],
                shape,
                out_axis,
                f"sizes {current} and {size} are neither equal nor 1",
            )
    return tuple(result)


# --------------------------------------------------------------------------------------------
# Validation of explicit layouts
# --------------------------------------------------------------------------------------------


def validate(shape: object, strides: object, base_offset: object, storage_len: object) -> None:
    """Checks explicit layout metadata against a storage of ``storage_len`` values (seed 004).

    Rules, each failure an :class:`InvalidLayoutError` naming the rule and the numbers: shape and
    strides have the same rank; sizes are ``>= 0``; the size product and offsets fit in 64 bits;
    and, for a non-empty layout, the minimum reachable offset (base plus the negative-stride
    terms) is ``>= 0`` and the maximum (base plus the positive terms) is ``< storage_len``. An
    empty layout reaches nothing and is always within bounds. Returns ``None``.
    """
    try:
        dims = as_int_tuple(shape, "size")
        steps = as_int_tuple(strides, "stride")
        base = _as_int(base_offset, "base offset")
        length = _as_int(storage_len, "storage length")
    except InvalidShapeError as error:
        raise InvalidLayoutError("integer metadata", str(error)) from None
    if len(dims) != len(steps):
        raise InvalidLayoutError(
            "rank", f"shape has rank {len(dims)} but strides has rank {len(steps)}"
        )
    for axis, size in enumerate(dims):
        if size < 0:
            raise InvalidLayoutError("sizes >= 0", f"size {size} of axis {axis} is negative")
    try:
        row_major_strides(dims)
        check_offsets_fit(dims, steps, base)
    except ShapeOverflowError as error:
        raise InvalidLayoutError("64-bit overflow", str(error)) from None
    bounds = offset_bounds(dims, steps, base)
    if bounds is None:
        return
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


# --------------------------------------------------------------------------------------------
# Compute layouts: reductions, diagonals, matrix operands
# --------------------------------------------------------------------------------------------


def reduced_shape(shape: Sequence[int], axes: Sequence[int], keepdims: bool = False) -> Shape:
    """The shape left after reducing ``axes`` (normalised, distinct): those axes are dropped, or
    kept with size 1 when ``keepdims``."""
    drop = set(axes)
    if keepdims:
        return tuple(1 if axis in drop else size for axis, size in enumerate(shape))
    return tuple(size for axis, size in enumerate(shape) if axis not in drop)


def diagonal_layout(
    shape: Sequence[int], strides: Sequence[int], groups: Sequence[Sequence[int]]
) -> tuple[Shape, Strides]:
    """Takes diagonals as a view: each group of axes (equal sizes, checked by the caller) becomes
    ONE axis whose stride is the sum of the group's strides, placed where the group's first axis
    was. Axes in no group keep their place.

    Stepping the merged axis by one steps every axis of the group by one at once, which is the
    diagonal: ``shape (3, 3)`` with strides ``(3, 1)`` and group ``(0, 1)`` gives ``(3,)`` with
    stride ``(4,)`` (offsets 0, 4, 8). No value moves; the offsets visited are a subset of the
    original ones, so a valid layout stays valid.
    """
    first_of: dict[int, Sequence[int]] = {}
    absorbed: set[int] = set()
    for group in groups:
        first_of[group[0]] = group
        absorbed.update(group[1:])
    out_shape: list[int] = []
    out_strides: list[int] = []
    for axis, (size, stride) in enumerate(zip(shape, strides)):
        if axis in absorbed:
            continue
        group = first_of.get(axis)
        out_shape.append(size)
        out_strides.append(sum(strides[k] for k in group) if group else stride)
    return tuple(out_shape), tuple(out_strides)


def is_matrix_dense(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """True when the last two axes form a matrix that BLAS-style kernels read directly: one of
    them has stride 1 (or size 1) and the other a stride at least the first one's size, both
    non-negative. Anything else (flips, broadcast rows, overlapping or strided columns) is better
    copied into a dense block before a matrix product.
    """
    if len(shape) < 2:
        return False
    rows, cols = shape[-2], shape[-1]
    row_stride, col_stride = strides[-2], strides[-1]
    if rows == 0 or cols == 0:
        return True
    if (cols == 1 or col_stride == 1) and (rows == 1 or row_stride >= max(cols, 1)):
        return True
    return (rows == 1 or row_stride == 1) and (cols == 1 or col_stride >= max(rows, 1))


def zero_unused_strides(shape: Sequence[int], strides: Sequence[int]) -> Strides:
    """``strides`` with 0 for every axis whose stride is never applied; same offsets, same order.

    A size-1 axis only ever takes index 0, so its stride may be any value (``as_strided`` accepts
    ``2**31``); an empty layout reads nothing, so all of its strides are unused. Code that stores
    strides in narrower integers (the Metal kernels' 32-bit ints) uses this so that a stride that
    never moves cannot overflow. Never raises.
    """
    if any(size == 0 for size in shape):
        return (0,) * len(shape)
    return tuple(0 if size == 1 else stride for size, stride in zip(shape, strides))
