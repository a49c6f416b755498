"""Every way a tensor request can be refused, as one exception hierarchy.

All errors derive from :class:`TensorError`, itself a :class:`ValueError`, so ``except TensorError``
catches every refusal of the library and nothing else. View operations raise subclasses of
:class:`TensorViewError`. Each class stores the numbers involved as attributes (so tests and widgets
can read them) and builds a message that names the violated condition in plain words.

The names follow the variants of the seed chapter's Rust ``TensorError``/``TensorViewError`` enums.
"""

from __future__ import annotations

from collections.abc import Sequence


def _fmt(values: Sequence[int]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


class TensorError(ValueError):
    """Root of every error raised by :mod:`llmfs.tensor`.

    ``condition`` is a short name of the violated rule (used by the trace-table widgets).
    """

    condition: str = "tensor rule"


class TensorViewError(TensorError):
    """Root of the errors raised while deriving or reading a view."""

    condition = "view rule"


class ShapeOverflowError(TensorError):
    """A shape's element count or a reachable storage offset does not fit in a signed 64-bit int."""

    condition = "sizes and offsets fit in 64 bits"

    def __init__(self, shape: Sequence[int], detail: str) -> None:
        self.shape = tuple(shape)
        self.detail = detail
        super().__init__(
            f"shape {_fmt(self.shape)} overflows: {detail} exceeds the largest signed 64-bit "
            f"index {2**63 - 1}"
        )


class InvalidShapeError(TensorError):
    """A shape contains a negative size (or is not a sequence of ints)."""

    condition = "sizes are non-negative integers"

    def __init__(self, shape: object, detail: str) -> None:
        self.shape = shape
        self.detail = detail
        super().__init__(f"invalid shape {shape!r}: {detail}")


class InvalidArgumentError(TensorError, TypeError):
    """An argument that must be an integer (an axis, an index, a stride, a slice bound) is not."""

    condition = "integer argument"

    def __init__(self, what: str, value: object) -> None:
        self.what = what
        self.value = value
        super().__init__(f"{what} must be an integer, got {value!r}")


class ElementCountMismatchError(TensorError):
    """The number of values does not equal the product of the requested sizes."""

    condition = "element counts match"

    def __init__(self, expected: int, actual: int, *, what: str = "values") -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"element count mismatch: the shape holds {expected} values but {actual} {what} "
            f"were given (the product of the sizes must equal the number of values)"
        )


class ReshapeElementCountMismatchError(ElementCountMismatchError, TensorViewError):
    """A reshape asks for a shape whose element count differs from the view's."""

    def __init__(self, current: int, requested: int, shape: Sequence[int]) -> None:
        self.current = current
        self.requested = requested
        self.requested_shape = tuple(shape)
        TensorViewError.__init__(
            self,
            f"element count mismatch: cannot reshape {current} values into shape "
            f"{_fmt(shape)}, which holds {requested}",
        )
        self.expected = current
        self.actual = requested


class NonContiguousReshapeError(TensorViewError):
    """A reshape would need a copy: the old axes cannot be merged/split over the same offsets."""

    condition = "reshape without copying"

    def __init__(
        self,
        shape: Sequence[int],
        strides: Sequence[int],
        requested: Sequence[int],
        reason: str,
    ) -> None:
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.requested = tuple(requested)
        self.reason = reason
        super().__init__(
            f"cannot reshape shape {_fmt(self.shape)} with strides {_fmt(self.strides)} to "
            f"{_fmt(self.requested)} without copying: {reason}. Call materialize() first to "
            f"get a contiguous copy, then reshape that"
        )


class RankMismatchError(TensorError):
    """An operation needs a specific rank, or two ranks that must agree differ."""

    condition = "ranks match"

    def __init__(self, expected: int, actual: int, *, what: str = "rank") -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(f"rank mismatch: {what} must be {expected}, got {actual}")


class AxisOutOfRangeError(TensorViewError, IndexError):
    """An axis number is not in ``[-rank, rank)`` (or ``[0, rank)`` where negatives are refused)."""

    condition = "axis in range"

    def __init__(
        self, axis: int, rank: int, *, allow_negative: bool = False, insertion: bool = False
    ) -> None:
        self.axis = axis
        self.rank = rank
        if insertion:
            # A new axis may go before any axis or after the last: positions -rank-1..rank.
            super().__init__(
                f"position {axis} is out of range for inserting an axis into rank {rank} "
                f"(valid positions: [{-rank - 1}, {rank}])"
            )
            return
        valid = f"[{-rank}, {rank})" if allow_negative else f"[0, {rank})"
        if rank == 0:
            valid = "none: a rank-0 view has no axes"
        super().__init__(f"axis {axis} is out of range for rank {rank} (valid axes: {valid})")


class DuplicateAxisError(TensorViewError):
    """An axis appears twice where each axis may appear once (permutations, reductions)."""

    condition = "each axis once"

    def __init__(self, axis: int, axes: Sequence[int]) -> None:
        self.axis = axis
        self.axes = tuple(axes)
        super().__init__(f"axis {axis} appears more than once in {_fmt(self.axes)}")


class PermutationLengthMismatchError(TensorViewError):
    """A permutation does not name exactly one position per axis."""

    condition = "one position per axis"

    def __init__(self, expected: int, actual: int) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"permutation length mismatch: the view has rank {expected} but the permutation "
            f"lists {actual} axes"
        )


class SliceStartAfterEndError(TensorViewError):
    """A strict slice asks for ``start > stop``."""

    condition = "start <= end"

    def __init__(self, axis: int, start: int, stop: int) -> None:
        self.axis = axis
        self.start = start
        self.stop = stop
        super().__init__(
            f"slice start after end on axis {axis}: start {start} > stop {stop} (a strict "
            f"slice needs start <= stop)"
        )


class SliceEndOutOfBoundsError(TensorViewError):
    """A strict slice's stop lies past the axis size."""

    condition = "end <= size"

    def __init__(self, axis: int, stop: int, size: int) -> None:
        self.axis = axis
        self.stop = stop
        self.size = size
        super().__init__(
            f"slice end out of bounds on axis {axis}: stop {stop} > size {size} (a strict slice "
            f"needs stop <= size)"
        )


class IndexOutOfBoundsError(TensorViewError, IndexError):
    """A coordinate (or strict-slice bound) is outside ``[0, size)`` of its axis."""

    condition = "index in bounds"

    def __init__(self, axis: int, index: int, size: int, *, what: str = "index") -> None:
        self.axis = axis
        self.index = index
        self.size = size
        super().__init__(
            f"{what} {index} is out of bounds for axis {axis} of size {size} "
            f"(valid: 0 <= {what} < {size})"
        )


class InvalidStepError(TensorViewError):
    """A slice step is not a positive integer."""

    condition = "step >= 1"

    def __init__(self, step: int) -> None:
        self.step = step
        super().__init__(f"invalid step {step}: a slice step must be >= 1 (use flip() to reverse)")


class StaleViewError(TensorViewError):
    """A view is used after its owner was mutated (the run-time form of Rust's borrow rule)."""

    condition = "owner not mutated while the view is used"

    def __init__(self, view_version: int, owner_version: int, *, window_open: bool = False) -> None:
        self.view_version = view_version
        self.owner_version = owner_version
        self.window_open = window_open
        if window_open:
            message = (
                "stale view: the owner is being mutated (a mutate() window is open), so no view "
                "of it may be made or read until the window closes"
            )
        else:
            message = (
                f"stale view: the owner was mutated after this view was made (owner version "
                f"{owner_version}, view made at version {view_version}). Make a new view with "
                f"tensor.view(), or materialize() before mutating if you need the old values"
            )
        super().__init__(message)


class BroadcastError(TensorViewError):
    """Two shapes (or a shape and a target) cannot be broadcast together."""

    condition = "sizes equal or 1"

    def __init__(
        self, shape: Sequence[int], target: Sequence[int], axis: int, detail: str = ""
    ) -> None:
        self.shape = tuple(shape)
        self.target = tuple(target)
        self.axis = axis
        text = detail or "sizes must be equal, or one of them 1"
        super().__init__(
            f"cannot broadcast shape {_fmt(self.shape)} with {_fmt(self.target)}: "
            f"axis {axis}: {text}"
        )


class OverlappingWriteError(TensorViewError):
    """A write through a view in which two coordinates read the same storage cell (a broadcast
    view's zero stride, or an explicit layout that overlaps itself): which written value would
    the cell keep? NumPy marks such views read-only; PyTorch refuses in-place writes to them."""

    condition = "each written coordinate has its own storage cell"

    def __init__(
        self,
        shape: Sequence[int],
        strides: Sequence[int],
        first: Sequence[int],
        second: Sequence[int],
        offset: int,
    ) -> None:
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.first = tuple(first)
        self.second = tuple(second)
        self.offset = offset
        super().__init__(
            f"cannot write through a view of shape {_fmt(self.shape)} with strides "
            f"{_fmt(self.strides)}: coordinates {_fmt(self.first)} and {_fmt(self.second)} both "
            f"read storage offset {offset}, so one cell would receive two values. Write to the "
            "owner's storage, or materialize() the view and write into the copy"
        )


class InvalidLayoutError(TensorViewError):
    """Explicit (shape, strides, base offset) metadata would read outside its storage."""

    condition = "layout inside storage"

    def __init__(self, rule: str, detail: str) -> None:
        self.rule = rule
        self.detail = detail
        super().__init__(f"invalid layout ({rule}): {detail}")


class SqueezeError(TensorViewError):
    """``squeeze`` was asked to drop an axis whose size is not 1."""

    condition = "squeezed axis has size 1"

    def __init__(self, axis: int, size: int) -> None:
        self.axis = axis
        self.size = size
        super().__init__(
            f"cannot squeeze axis {axis}: its size is {size}, and only size-1 axes can be dropped"
        )


class InvalidAxisRangeError(TensorViewError):
    """An inclusive axis range ``start..=end`` has ``start > end``."""

    condition = "start axis <= end axis"

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end
        super().__init__(
            f"invalid axis range: start axis {start} > end axis {end} (merge takes start <= end)"
        )


class InvalidIndexError(TensorViewError, IndexError):
    """An index expression has an unsupported item or more indices than the view has axes."""

    condition = "valid index expression"


class ClosedMutationError(TensorError):
    """A writable handle from ``Tensor.mutate()`` was used after its ``with`` block ended."""

    condition = "write inside the mutate() window"

    def __init__(self) -> None:
        super().__init__(
            "this writable handle's mutate() window has closed: writes must happen inside the "
            "`with tensor.mutate() as buf:` block (open a new window to write again)"
        )


class DTypeError(TensorError):
    """A dtype is not supported where it was asked for."""

    condition = "supported dtype"

    def __init__(
        self, dtype: object, allowed: Sequence[str], *, where: str = "llmfs.tensor"
    ) -> None:
        self.dtype = dtype
        self.allowed = tuple(allowed)
        super().__init__(
            f"unsupported dtype {dtype!s} for {where}; supported: {', '.join(self.allowed)}"
        )


# --------------------------------------------------------------------------------------------
# Compute errors (elementwise, reductions, matmul, einsum, plans, backends)
# --------------------------------------------------------------------------------------------


class EmptyReductionError(TensorError):
    """``max``, ``min`` or ``mean`` over an axis of size 0: there is no value to return.

    (``sum`` and ``prod`` of nothing are 0 and 1, as in NumPy; these three have no such identity,
    and a silent NaN or -inf would hide the mistake.)
    """

    condition = "reduced axes are non-empty"

    def __init__(self, op: str, shape: Sequence[int], axes: Sequence[int]) -> None:
        self.op = op
        self.shape = tuple(shape)
        self.axes = tuple(axes)
        empty = [axis for axis in self.axes if self.shape[axis] == 0]
        super().__init__(
            f"{op} over an empty axis: shape {_fmt(self.shape)} reduced over axes "
            f"{_fmt(self.axes)}, and axis {empty[0] if empty else '?'} has size 0 ({op} of no "
            f"values is undefined; only sum (0) and prod (1) have a value for an empty axis)"
        )


class MatmulShapeError(TensorError):
    """``matmul`` operands whose inner sizes differ, or that have no matrix axes."""

    condition = "inner sizes match"

    def __init__(self, a_shape: Sequence[int], b_shape: Sequence[int], detail: str) -> None:
        self.a_shape = tuple(a_shape)
        self.b_shape = tuple(b_shape)
        self.detail = detail
        super().__init__(
            f"matmul of shapes {_fmt(self.a_shape)} and {_fmt(self.b_shape)}: {detail}"
        )


class EinsumError(TensorError):
    """A malformed einsum expression, or operands that do not fit it.

    ``operand`` (an index or ``None``), ``label`` (a letter, ``"..."`` or ``None``) and ``position``
    (a character index in the expression, or ``None``) point at the offending part; the message
    repeats the expression with a caret under ``position`` when there is one.
    """

    condition = "einsum rule"

    def __init__(
        self,
        expression: str,
        detail: str,
        *,
        operand: int | None = None,
        label: str | None = None,
        position: int | None = None,
    ) -> None:
        self.expression = expression
        self.detail = detail
        self.operand = operand
        self.label = label
        self.position = position
        text = f"einsum {expression!r}: {detail}"
        if position is not None:
            # The caret sits under the character, after "  '" (the repr's opening quote).
            text += f"\n  {expression!r}\n  {' ' * (position + 1)}^"
        super().__init__(text)


class PlanMismatchError(TensorError):
    """An operand given to a plan's ``execute`` differs from the layout the plan was made for."""

    condition = "operands match the planned layouts"

    def __init__(self, operand: int | str, field: str, planned: object, actual: object) -> None:
        self.operand = operand
        self.field = field
        self.planned = planned
        self.actual = actual
        super().__init__(
            f"operand {operand} does not match the plan: its {field} is {actual} but the plan was "
            f"made for {planned} (make a new plan for a different layout)"
        )


class OutputBufferError(TensorError):
    """An ``execute_into`` output that is not an owned, unshared tensor of the planned layout."""

    condition = "output is an owned, unshared tensor of the planned layout"

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(f"cannot write the result into this output: {detail}")


class BackendUnavailableError(TensorError):
    """A backend name that is unknown, or whose backend cannot run on this machine.

    ``available`` lists the names that can be used; ``reason`` says why this one cannot.
    """

    condition = "backend available"

    def __init__(self, name: str, available: Sequence[str], reason: str) -> None:
        self.name = name
        self.available = tuple(available)
        self.reason = reason
        listed = ", ".join(self.available) or "none"
        super().__init__(f"backend {name!r} is not available: {reason} (available: {listed})")


class UnsupportedOperationError(TensorError):
    """A backend was asked for an operation or dtype it does not implement and has no fallback."""

    condition = "backend supports the operation"

    def __init__(self, backend: str, what: str) -> None:
        self.backend = backend
        self.what = what
        super().__init__(f"backend {backend!r} does not support {what} and has no fallback")


__all__ = [
    "AxisOutOfRangeError",
    "BackendUnavailableError",
    "BroadcastError",
    "ClosedMutationError",
    "DTypeError",
    "DuplicateAxisError",
    "EinsumError",
    "ElementCountMismatchError",
    "EmptyReductionError",
    "IndexOutOfBoundsError",
    "InvalidArgumentError",
    "InvalidAxisRangeError",
    "InvalidIndexError",
    "InvalidLayoutError",
    "InvalidShapeError",
    "InvalidStepError",
    "MatmulShapeError",
    "NonContiguousReshapeError",
    "OutputBufferError",
    "PermutationLengthMismatchError",
    "PlanMismatchError",
    "RankMismatchError",
    "ReshapeElementCountMismatchError",
    "ShapeOverflowError",
    "SliceEndOutOfBoundsError",
    "SliceStartAfterEndError",
    "SqueezeError",
    "StaleViewError",
    "TensorError",
    "TensorViewError",
    "UnsupportedOperationError",
]
