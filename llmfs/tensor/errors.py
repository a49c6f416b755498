"""Every way a tensor request can be refused, as one exception hierarchy.

All errors derive from :class:`TensorError`, itself a :class:`ValueError`, so ``except TensorError``
catches every refusal of the library and nothing else. View operations raise subclasses of
:class:`TensorViewError`; the Metal backend's errors (:class:`~llmfs.tensor.MetalError` and its
subclasses) live with that backend, in :mod:`llmfs.tensor.backends.metal.errors`.

Each class is a declaration (:mod:`llmfs.tensor.error_base` says how one is built): its
``condition`` (the violated rule in a few words), its fields as annotated attributes (a value is
the default) and its message, a ``template`` over the fields or an ``explain()`` method.

The names follow the variants of the Rust ``TensorError``/``TensorViewError`` enums the library was
first written against, so a Rust and a Python version of an exercise name the same refusal.
"""

from __future__ import annotations

from typing import ClassVar

from llmfs.tensor.error_base import SHOWN_ENTRIES, TensorError, shown

#: The largest signed 64-bit integer: every size product, stride and reachable offset (and
#: every array's byte count) stays at or below it. The library's one definition of the limit.
INDEX_MAX = 2**63 - 1


class TensorViewError(TensorError):
    """Root of the errors raised while deriving or reading a view (free-text as a class)."""

    condition = "view rule"


# -- Sizes, shapes and arguments -------------------------------------------------------------------


class ShapeOverflowError(TensorError):
    """A shape's element count or a reachable storage offset does not fit in a signed 64-bit int."""

    condition = "sizes and offsets fit in 64 bits"
    largest: ClassVar[int] = INDEX_MAX
    shape: tuple[int, ...]
    detail: str

    def explain(self) -> str:
        return (
            f"shape {shown(self.shape)} overflows: {self.detail} exceeds the largest signed "
            f"64-bit index {self.largest}"
        )


class InvalidShapeError(TensorError):
    """A shape contains a negative size (or is not a sequence of ints)."""

    condition = "sizes are non-negative integers"
    template = "invalid shape {shape!r}: {detail}"
    shape: object
    detail: str


#: How a value's name reads for several of them ("axis" -> "axes").
PLURALS = {"axis": "axes", "index": "indices", "size": "sizes", "stride": "strides"}


class InvalidArgumentError(TensorError, TypeError):
    """An argument that must be an integer (an axis, an index, a stride, a slice bound) is not;
    ``many``: a sequence of them was expected (``"axis"`` then reads ``"axes"``)."""

    condition = "integer argument"
    what: str
    value: object
    many: bool = False

    def explain(self) -> str:
        if self.many:
            plural = PLURALS.get(self.what, f"{self.what} values")
            return (
                f"{plural} must be integers (one or a sequence of them), got {shown(self.value)!r}"
            )
        return f"{self.what} must be an integer, got {shown(self.value)!r}"


class ElementCountMismatchError(TensorError):
    """The number of values does not equal the product of the requested sizes."""

    condition = "element counts match"
    template = (
        "element count mismatch: the shape holds {expected} values but {actual} {what} were "
        "given (the product of the sizes must equal the number of values)"
    )
    expected: int
    actual: int
    what: str = "values"


class ReshapeElementCountMismatchError(ElementCountMismatchError):
    """A reshape asks for a shape whose element count differs from the view's; the parent's
    ``expected``/``actual`` are the view's count (``current``) and the shape's (``requested``)."""

    template = (
        "element count mismatch: cannot reshape {current} values into shape {requested_shape}, "
        "which holds {requested}"
    )
    current: int
    requested: int
    requested_shape: tuple[int, ...]

    def __post_init__(self) -> None:
        self.expected, self.actual = self.current, self.requested


class RankMismatchError(TensorError):
    """An operation needs a specific rank, or two ranks that must agree differ."""

    condition = "ranks match"
    template = "rank mismatch: {what} must be {expected}, got {actual}"
    expected: int
    actual: int
    what: str = "rank"


class DTypeError(TensorError):
    """A dtype is not supported where it was asked for."""

    condition = "supported dtype"
    dtype: object
    allowed: tuple[str, ...]
    where: str = "llmfs.tensor"

    def explain(self) -> str:
        return (
            f"unsupported dtype {shown(self.dtype)!s} for {self.where}; supported: "
            f"{', '.join(self.allowed)}"
        )


# -- Views -----------------------------------------------------------------------------------------


class NonContiguousReshapeError(TensorViewError):
    """A reshape would need a copy: the old axes cannot be merged/split over the same offsets."""

    condition = "reshape without copying"
    template = (
        "cannot reshape shape {shape} with strides {strides} to {requested} without copying: "
        "{reason}. Call materialize() first to get a contiguous copy, then reshape that"
    )
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    requested: tuple[int, ...]
    reason: str


class AxisOutOfRangeError(TensorViewError, IndexError):
    """An axis number is not in ``[-rank, rank)`` (or ``[0, rank)`` where negatives are refused);
    with ``insertion``, a position for a new axis outside ``[-rank-1, rank]``."""

    condition = "axis in range"
    axis: int
    rank: int
    allow_negative: bool = False
    insertion: bool = False

    def explain(self) -> str:
        axis, rank = self.axis, self.rank
        if self.insertion:  # a new axis may go before any axis or after the last
            return (
                f"position {axis} is out of range for inserting an axis into rank {rank} "
                f"(valid positions: [{-rank - 1}, {rank}])"
            )
        if rank == 0:
            valid = "none: a rank-0 view has no axes"
        else:
            valid = f"[{-rank}, {rank})" if self.allow_negative else f"[0, {rank})"
        return f"axis {axis} is out of range for rank {rank} (valid axes: {valid})"


class DuplicateAxisError(TensorViewError):
    """An axis appears twice where each axis may appear once (permutations, reductions)."""

    condition = "each axis once"
    template = "axis {axis} appears more than once in {axes}"
    axis: int
    axes: tuple[int, ...]


class PermutationLengthMismatchError(TensorViewError):
    """A permutation does not name exactly one position per axis."""

    condition = "one position per axis"
    template = (
        "permutation length mismatch: the view has rank {expected} but the permutation lists "
        "{actual} axes"
    )
    expected: int
    actual: int


class SliceStartAfterEndError(TensorViewError):
    """A strict slice asks for ``start > stop``."""

    condition = "start <= end"
    template = (
        "slice start after end on axis {axis}: start {start} > stop {stop} (a strict slice "
        "needs start <= stop)"
    )
    axis: int
    start: int
    stop: int


class SliceEndOutOfBoundsError(TensorViewError):
    """A strict slice's stop lies past the axis size."""

    condition = "end <= size"
    template = (
        "slice end out of bounds on axis {axis}: stop {stop} > size {size} (a strict slice "
        "needs stop <= size)"
    )
    axis: int
    stop: int
    size: int


class IndexOutOfBoundsError(TensorViewError, IndexError):
    """A coordinate (or strict-slice bound) is outside ``[0, size)`` of its axis, or an index
    that may count from the end (``from_end``) is outside ``[-size, size)``."""

    condition = "index in bounds"
    axis: int
    index: int
    size: int
    what: str = "index"
    #: True where negative values are accepted and count from the end (NumPy indexing).
    from_end: bool = False

    def explain(self) -> str:
        what, size = self.what, self.size
        valid = f"valid: 0 <= {what} < {size}"
        if self.from_end:
            valid = f"valid: -{size} <= {what} < {size}; a negative {what} counts from the end"
        return f"{what} {self.index} is out of bounds for axis {self.axis} of size {size} ({valid})"


class NegativeSliceBoundError(IndexOutOfBoundsError):
    """A strict slice's start or stop is negative: strict bounds lie in ``[0, size]``."""

    condition = "0 <= slice bound <= size"

    def explain(self) -> str:
        what, size = self.what, self.size
        return (
            f"{what} {self.index} is out of bounds for axis {self.axis} of size {size} (a strict "
            f"slice needs 0 <= {what} <= {size}; negative bounds count from the end only in "
            "view[a:b])"
        )


class InvalidStepError(TensorViewError):
    """A slice step is not a positive integer."""

    condition = "step >= 1"
    template = "invalid step {step}: a slice step must be >= 1 (use flip() to reverse)"
    step: int


class StaleViewError(TensorViewError):
    """A view is used after its owner was mutated (the run-time form of Rust's borrow rule)."""

    condition = "owner not mutated while the view is used"
    view_version: int
    owner_version: int
    window_open: bool = False

    def explain(self) -> str:
        if self.window_open:
            return (
                "stale view: the owner is being mutated (a mutate() window is open), so no view "
                "of it may be made or read until the window closes"
            )
        return (
            f"stale view: the owner was mutated after this view was made (owner version "
            f"{self.owner_version}, view made at version {self.view_version}). Make a new view "
            "with tensor.view(), or materialize() before mutating if you need the old values"
        )


class BroadcastError(TensorViewError):
    """Two shapes (or a shape and a target) cannot be broadcast together."""

    condition = "sizes equal or 1"
    shape: tuple[int, ...]
    target: tuple[int, ...]
    axis: int
    detail: str = ""

    def explain(self) -> str:
        why = self.detail or "sizes must be equal, or one of them 1"
        return (
            f"cannot broadcast shape {shown(self.shape)} with {shown(self.target)}: "
            f"axis {self.axis}: {why}"
        )


class OverlappingWriteError(TensorViewError):
    """A write through a view in which two coordinates read the same storage cell (a zero
    stride, or a layout that overlaps itself): NumPy marks such views read-only, PyTorch too."""

    condition = "each written coordinate has its own storage cell"
    template = (
        "cannot write through a view of shape {shape} with strides {strides}: coordinates "
        "{first} and {second} both read storage offset {offset}, so one cell would receive two "
        "values. Write to the owner's storage, or materialize() the view and write into the copy"
    )
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    first: tuple[int, ...]
    second: tuple[int, ...]
    offset: int


class InvalidLayoutError(TensorViewError):
    """Explicit (shape, strides, base offset) metadata would read outside its storage."""

    condition = "layout inside storage"
    template = "invalid layout ({rule}): {detail}"
    rule: str
    detail: str


class SqueezeError(TensorViewError):
    """``squeeze`` was asked to drop an axis whose size is not 1."""

    condition = "squeezed axis has size 1"
    template = "cannot squeeze axis {axis}: its size is {size}, and only size-1 axes can be dropped"
    axis: int
    size: int


class InvalidAxisRangeError(TensorViewError):
    """An inclusive axis range ``start..=end`` has ``start > end``."""

    condition = "start axis <= end axis"
    template = "invalid axis range: start axis {start} > end axis {end} (merge takes start <= end)"
    start: int
    end: int


class InvalidIndexError(TensorViewError, IndexError):
    """An index expression with an unsupported item or more indices than axes (free text)."""

    condition = "valid index expression"


class ClosedMutationError(TensorError):
    """A writable handle from ``Tensor.mutate()`` was used after its ``with`` block ended."""

    condition = "write inside the mutate() window"
    template = (
        "this writable handle's mutate() window has closed: writes must happen inside the "
        "`with tensor.mutate() as buf:` block (open a new window to write again)"
    )
    fields = ()


# -- Compute errors (elementwise, reductions, matmul, einsum, plans, backends) ---------------------


class EmptyReductionError(TensorError):
    """``max``, ``min`` or ``mean`` over an axis of size 0: no identity (as ``sum``'s 0 and
    ``prod``'s 1), and a silent NaN or -inf would hide the mistake."""

    condition = "reduced axes are non-empty"
    op: str
    shape: tuple[int, ...]
    axes: tuple[int, ...]

    def explain(self) -> str:
        rank = len(self.shape)
        empty = next((a for a in self.axes if 0 <= a < rank and self.shape[a] == 0), "?")
        return (
            f"{self.op} over an empty axis: shape {shown(self.shape)} reduced over axes "
            f"{shown(self.axes)}, and axis {empty} has size 0 ({self.op} of no values is "
            "undefined; only sum (0) and prod (1) have a value for an empty axis)"
        )


class MatmulShapeError(TensorError):
    """``matmul`` operands whose inner sizes differ, or that have no matrix axes."""

    condition = "inner sizes match"
    template = "matmul of shapes {a_shape} and {b_shape}: {detail}"
    a_shape: tuple[int, ...]
    b_shape: tuple[int, ...]
    detail: str


class EinsumError(TensorError):
    """A malformed einsum expression, or operands that do not fit it. ``operand`` (an index),
    ``label`` (a letter or ``"..."``) and ``position`` (a character index) point at the offending
    part, each ``None`` when unknown; the message repeats the expression with a caret under
    ``position`` when it lies inside the expression or just past its end."""

    condition = "einsum rule"
    expression: str
    detail: str
    operand: int | None = None
    label: str | None = None
    position: int | None = None

    def explain(self) -> str:
        caret = ""
        if self.position is not None and 0 <= self.position <= len(self.expression):
            # The caret sits under the character, after "  '" (the repr's opening quote).
            caret = f"\n  {self.expression!r}\n  {' ' * (self.position + 1)}^"
        return f"einsum {self.expression!r}: {self.detail}{caret}"


class ReduceError(EinsumError):
    """A :func:`~llmfs.tensor.ops.reduce` call whose modes do not fit the operand, or whose op is
    unknown: an :class:`EinsumError` (mode labels follow einsum's rules) whose message names
    ``reduce`` and its modes as given; ``expression`` is ``"modes_in -> modes_out"``."""

    condition = "reduce modes name each axis once; the op is a known reduction"
    modes_in: object
    modes_out: object
    detail: str
    operand: int | None = None
    label: str | None = None

    def __post_init__(self) -> None:
        self.expression = f"{self.modes_in!r} -> {self.modes_out!r}"
        self.position = None

    def explain(self) -> str:
        modes = f"modes_in={shown(self.modes_in)!r}, modes_out={shown(self.modes_out)!r}"
        return f"reduce({modes}): {self.detail}"


class BackendUnavailableError(TensorError):
    """A backend name that is unknown, or whose backend cannot run on this machine."""

    condition = "backend available"
    name: str
    available: tuple[str, ...]
    reason: str

    def explain(self) -> str:
        listing = ", ".join(self.available) or "none"
        return f"backend {self.name!r} is not available: {self.reason} (available: {listing})"


class UnsupportedOperationError(TensorError):
    """A backend was asked for an operation or dtype it does not implement and has no fallback."""

    condition = "backend supports the operation"
    template = "backend {backend!r} does not support {what} and has no fallback"
    backend: str
    what: str


class AllocationError(TensorError, MemoryError):
    """A new storage that NumPy or the machine cannot hold; ``reason`` says which limit refused
    it (NumPy's largest array, the machine's memory, or the allocation itself failing)."""

    condition = "storage fits in memory"
    count: int
    dtype: object
    nbytes: int
    reason: str

    def explain(self) -> str:
        # nbytes in binary units with two decimals (8.00 TiB), as NumPy reports them.
        value, unit = float(self.nbytes), "B"
        for bigger in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
            if value < 1024:
                break
            value, unit = value / 1024, bigger
        readable = f"{self.nbytes} B" if unit == "B" else f"{value:.2f} {unit}"
        return (
            f"cannot allocate {self.count} values of {shown(self.dtype)} ({self.nbytes} bytes, "
            f"{readable}): {self.reason}"
        )


class ConcurrentWriteError(StaleViewError):
    """A read overlapped a write of the same owner by another thread: the values read may mix
    two versions, so they are refused. llmfs has a single-writer rule: while one thread writes
    a tensor (an ``as_mut_slice()`` write or a ``mutate()`` window), no other thread reads it."""

    condition = "no other thread writes the owner during a read"

    def explain(self) -> str:
        if self.window_open:
            return (
                f"stale read: another thread is writing the owner (version {self.owner_version}), "
                "so it may not be read until that write ends: one thread writes a tensor at a "
                "time, and nothing reads it meanwhile"
            )
        return (
            f"stale read: the owner was written by another thread while it was being read (owner "
            f"version {self.owner_version}, read began at version {self.view_version}), so the "
            "values could mix two versions. One thread writes a tensor at a time, and nothing "
            "reads it meanwhile: make a new view and read again once the write is done"
        )


class ViewTooLargeError(TensorError):
    """An op would read more values from one view than any array can hold (only a broadcast or
    self-overlapping view is that large, and reading it would take hours)."""

    condition = "a view read by an op fits in memory"
    template = (
        "{what} would read {count} values of {dtype} ({nbytes} bytes) from one view, but "
        "{reason}: only a broadcast (zero-stride) or self-overlapping view is that large. "
        "Compute on the tensor before expanding it (a sum over a broadcast axis of size n is "
        "n times the value)"
    )
    what: str
    count: int
    dtype: object
    nbytes: int
    reason: str


# -- Autograd ----------------------------------------------------------------------------------


class AutogradError(TensorError):
    """The base of the autograd refusals (:mod:`llmfs.tensor.autograd`)."""

    condition = "autograd rule"


class NoGradientError(AutogradError):
    """``backward()`` of a result that no gradient reaches (the message lists the causes)."""

    condition = "the result requires grad"
    template = (
        "backward() of a {kind} of shape {shape} that does not require grad: no tensor it was "
        "computed from requires grad (make a leaf with requires_grad=True or "
        "t.requires_grad_()), or it was computed under no_grad(), or by an op with no gradient "
        "(comparisons, logical ops, astype to an integer or bool)"
    )
    kind: str
    shape: tuple[int, ...]


class GradientShapeError(AutogradError):
    """``backward()`` without a gradient for several values, or a gradient of another shape."""

    condition = "the gradient has the result's shape"
    shape: tuple[int, ...]
    #: The gradient's shape, or ``None`` when no gradient was given (not stored as a tuple).
    given: object = None

    def explain(self) -> str:
        count = 1
        for size in self.shape:
            count *= size if isinstance(size, int) else 1
        if self.given is None:
            return (
                f"backward() without a gradient needs a result of exactly one value, but shape "
                f"{shown(self.shape)} holds {count}: reduce it first (sum(y).backward()) or pass "
                f"backward(gradient) with shape {shown(self.shape)}"
            )
        return (
            f"backward(gradient): the gradient has shape {shown(self.given)} but the result has "
            f"shape {shown(self.shape)}; they must be equal (no broadcasting)"
        )


class SavedTensorModifiedError(AutogradError):
    """A tensor an op saved for its backward was written (``copyto``, ``mutate()``) after the op
    ran: PyTorch's rule for in-place changes of saved tensors, never a wrong gradient."""

    condition = "a tensor saved for backward is unchanged"
    template = (
        "{op}'s backward needs {what}, which was written after {op} ran (its storage version "
        "moved from {saved_version} to {version}): the gradient would use the new values, not "
        "the ones {op} read. Write into a copy (materialize()) or after backward(), or compute "
        "the forward pass again"
    )
    op: str
    what: str
    saved_version: int
    version: int


class NotDifferentiableError(AutogradError):
    """``backward()`` through an op that has no gradient in llmfs (``prod``, ``floor_divide``,
    ``remainder``)."""

    condition = "every op on the path has a gradient"
    template = "backward() through {op}: {op} has no gradient in llmfs ({reason})"
    op: str
    reason: str


class GradcheckError(AutogradError):
    """:func:`~llmfs.tensor.gradcheck` found an analytic gradient that differs from the central
    finite difference by more than the tolerance."""

    condition = "analytic gradient equals the finite difference"
    input: int
    position: tuple[int, ...]
    output: tuple[int, ...]
    analytic: float
    numeric: float
    atol: float
    rtol: float

    def explain(self) -> str:
        try:
            difference = f"{abs(float(self.analytic) - float(self.numeric)):.3g}"
        except (TypeError, ValueError):
            difference = "?"
        return (
            f"gradcheck: d output{shown(self.output)} / d input {shown(self.input)} at position "
            f"{shown(self.position)}: backward gives {shown(self.analytic)!r} but the central "
            f"finite difference gives {shown(self.numeric)!r} (difference {difference} > atol "
            f"{shown(self.atol)} + rtol {shown(self.rtol)} * |numeric|)"
        )


#: Every error class of this module (they are exported by :mod:`llmfs.tensor`), and the helpers.
__all__ = [
    "INDEX_MAX",
    "PLURALS",
    "SHOWN_ENTRIES",
    "shown",
    *sorted(
        name
        for name, value in list(globals().items())
        if isinstance(value, type) and issubclass(value, TensorError)
    ),
]
