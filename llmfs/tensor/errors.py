"""Every way a tensor request can be refused, as one exception hierarchy.

All errors derive from :class:`TensorError`, itself a :class:`ValueError`, so ``except TensorError``
catches every refusal of the library and nothing else. View operations raise subclasses of
:class:`TensorViewError`, the Metal backend subclasses of :class:`MetalError`.

Each class is a declaration, not code: it states

* ``condition``: the violated rule in a few words (the trace-table widgets show it);
* its **fields**, as annotated class attributes (a default makes a field optional); the
  constructor takes them in order, positionally or by name, and stores each one as an attribute;
  a field annotated ``tuple[...]`` is stored as a tuple;
* ``template``: the message, a :meth:`str.format` template over the fields (and over the
  class's properties, for the parts of a sentence that depend on several fields). A sequence
  shows as ``[2, 3]``. ``variants`` pairs a boolean field with the template used when it is true.

A field declared as ``derived(function)`` is not a constructor argument: it is computed from the
others once, when the error is made. ``str(error)`` and ``error.message`` are the plain-words
message, and :meth:`TensorError.details` returns the fields as a dict.

The names follow the variants of the Rust ``TensorError``/``TensorViewError`` enums the library was
first written against, so a Rust and a Python version of an exercise name the same refusal.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

_INT64_MAX = 2**63 - 1


class _Derived:
    """Marks a field computed from the other fields (see :func:`derived`)."""

    def __init__(self, compute: Callable[[Any], object]) -> None:
        self.compute = compute


def derived(compute: Callable[[Any], object]) -> Any:
    """Declares a field that is not passed to the constructor but computed from the others."""
    return _Derived(compute)


_NO_DEFAULT = object()


class _Fields(Mapping[str, object]):
    """The names a template may use: the error's attributes and properties, sequences shown as
    ``[a, b]``."""

    def __init__(self, error: TensorError) -> None:
        self._error = error

    def __getitem__(self, name: str) -> object:
        try:
            value = getattr(self._error, name)
        except AttributeError:
            raise KeyError(name) from None
        return _Shown(value) if isinstance(value, (tuple, list)) else value

    def __iter__(self) -> Iterator[str]:  # required by Mapping; templates only look names up
        return iter(())

    def __len__(self) -> int:
        return 0


#: A sequence longer than this is shown by its first and last entries and its length (a rank-65
#: shape would otherwise fill the message with 65 sizes).
SHOWN_ENTRIES = 12


class _Shown:
    """A sequence in a message: ``{shape}`` shows ``[2, 3]``, ``{shape!r}`` its own repr; past
    :data:`SHOWN_ENTRIES` entries, ``[1, 1, 1, 1, 1, 1, 1, 1, ..., 1, 1] (65 entries)``."""

    def __init__(self, values: Sequence[object]) -> None:
        self.values = values

    def _text(self, show: Callable[[object], str]) -> str:
        values = list(self.values)
        if len(values) <= SHOWN_ENTRIES:
            return "[" + ", ".join(show(v) for v in values) + "]"
        shown = [show(v) for v in values[: SHOWN_ENTRIES - 4]] + ["..."]
        shown += [show(v) for v in values[-2:]]
        return "[" + ", ".join(shown) + f"] ({len(values)} entries)"

    def __format__(self, spec: str) -> str:
        return format(self._text(str), spec)

    def __repr__(self) -> str:
        return self._text(repr) if len(self.values) > SHOWN_ENTRIES else repr(self.values)


def _rebuild(cls: type[TensorError], values: dict[str, object]) -> TensorError:
    return cls(**values)


class TensorError(ValueError):
    """Root of every error raised by :mod:`llmfs.tensor`; as a class it takes a free-text message.

    Subclasses declare ``condition``, their fields and ``template`` (see the module docstring);
    none writes an ``__init__``, so every error is built, stored and printed the same way.
    """

    condition: ClassVar[str] = "tensor rule"
    template: ClassVar[str] = "{message}"
    #: ``(boolean field, template)`` pairs: the first whose field is true replaces ``template``.
    variants: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: The constructor's fields in order, and the defaults of the optional ones.
    fields: ClassVar[tuple[str, ...]] = ("message",)
    defaults: ClassVar[dict[str, object]] = {}
    #: Fields computed from the others after the constructor's fields are stored.
    computed: ClassVar[dict[str, Callable[[Any], object]]] = {}
    _as_tuple: ClassVar[frozenset[str]] = frozenset()

    message: str

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            raise TypeError(
                f"{cls.__name__} defines __init__; declare its fields, condition and template "
                f"instead"
            )
        annotations = {
            name: str(annotation)
            for name, annotation in inspect.get_annotations(cls).items()
            if not str(annotation).startswith(("ClassVar", "typing.ClassVar"))
        }
        if not annotations:
            return  # inherits its parent's fields
        fields: list[str] = []
        defaults: dict[str, object] = {}
        computed: dict[str, Callable[[Any], object]] = {}
        for name in annotations:
            value = cls.__dict__.get(name, _NO_DEFAULT)
            if isinstance(value, _Derived):
                computed[name] = value.compute
                delattr(cls, name)
                continue
            if value is not _NO_DEFAULT:
                defaults[name] = value
            elif defaults:
                raise TypeError(f"{cls.__name__}.{name} follows a field with a default")
            fields.append(name)
        cls.fields = tuple(fields)
        cls.defaults = defaults
        cls.computed = computed
        cls._as_tuple = frozenset(n for n, a in annotations.items() if a.startswith("tuple["))

    def __init__(self, *args: object, **kwargs: object) -> None:
        cls = type(self)
        if len(args) > len(cls.fields):
            raise TypeError(
                f"{cls.__name__} takes {len(cls.fields)} field(s) {list(cls.fields)}, "
                f"got {len(args)} positional arguments"
            )
        values = dict(zip(cls.fields, args))
        for name, value in kwargs.items():
            if name not in cls.fields or name in values:
                raise TypeError(f"{cls.__name__} got an unexpected or repeated field {name!r}")
            values[name] = value
        for name in cls.fields:
            if name not in values:
                if name not in cls.defaults:
                    raise TypeError(f"{cls.__name__} needs the field {name!r}")
                values[name] = cls.defaults[name]
            value = values[name]
            if name in cls._as_tuple and not isinstance(value, tuple):
                value = tuple(value)  # type: ignore[arg-type]  # declared a sequence
            setattr(self, name, value)
        for name, compute in cls.computed.items():
            setattr(self, name, compute(self))
        template = next((text for flag, text in cls.variants if getattr(self, flag)), cls.template)
        self.message = template.format_map(_Fields(self))
        super().__init__(self.message)

    def details(self) -> dict[str, object]:
        """The error's fields (constructor fields, then computed ones) by name."""
        names = (*type(self).fields, *type(self).computed)
        return {name: getattr(self, name) for name in names}

    def __reduce__(self) -> tuple[object, ...]:
        # Exceptions pickle as cls(*self.args); ours are rebuilt from their fields instead.
        values = {name: getattr(self, name) for name in type(self).fields}
        return (_rebuild, (type(self), values))


class TensorViewError(TensorError):
    """Root of the errors raised while deriving or reading a view (free-text as a class)."""

    condition = "view rule"


# --------------------------------------------------------------------------------------------
# Sizes, shapes and arguments
# --------------------------------------------------------------------------------------------


class ShapeOverflowError(TensorError):
    """A shape's element count or a reachable storage offset does not fit in a signed 64-bit int."""

    condition = "sizes and offsets fit in 64 bits"
    template = "shape {shape} overflows: {detail} exceeds the largest signed 64-bit index {largest}"
    largest: ClassVar[int] = _INT64_MAX
    shape: tuple[int, ...]
    detail: str


class InvalidShapeError(TensorError):
    """A shape contains a negative size (or is not a sequence of ints)."""

    condition = "sizes are non-negative integers"
    template = "invalid shape {shape!r}: {detail}"
    shape: object
    detail: str


#: How a value's name reads for several of them ("axis" -> "axes").
PLURALS = {"axis": "axes", "index": "indices", "size": "sizes", "stride": "strides"}


class InvalidArgumentError(TensorError, TypeError):
    """An argument that must be an integer (an axis, an index, a stride, a slice bound) is not.

    ``many`` says that a sequence of them was expected (``"axis"`` then reads ``"axes"``).
    """

    condition = "integer argument"
    template = "{what} must be an integer, got {value!r}"
    variants = (("many", "{plural} must be integers (one or a sequence of them), got {value!r}"),)
    what: str
    value: object
    many: bool = False

    @property
    def plural(self) -> str:
        """``what`` for several values: ``axes``, ``indices``, ``strides``..."""
        return PLURALS.get(self.what, f"{self.what} values")


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
    """A reshape asks for a shape whose element count differs from the view's.

    ``expected``/``actual`` of the parent are the view's count (``current``) and the requested
    shape's (``requested``).
    """

    template = (
        "element count mismatch: cannot reshape {current} values into shape {requested_shape}, "
        "which holds {requested}"
    )
    current: int
    requested: int
    requested_shape: tuple[int, ...]
    expected: int = derived(lambda error: error.current)
    actual: int = derived(lambda error: error.requested)


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
    template = "unsupported dtype {dtype!s} for {where}; supported: {allowed_names}"
    dtype: object
    allowed: tuple[str, ...]
    where: str = "llmfs.tensor"

    @property
    def allowed_names(self) -> str:
        """The allowed dtypes as a comma-separated list."""
        return ", ".join(self.allowed)


# --------------------------------------------------------------------------------------------
# Views
# --------------------------------------------------------------------------------------------


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
    template = "axis {axis} is out of range for rank {rank} (valid axes: {valid})"
    variants = (
        (
            "insertion",
            "position {axis} is out of range for inserting an axis into rank {rank} "
            "(valid positions: [{lowest_insertion}, {rank}])",
        ),
    )
    axis: int
    rank: int
    allow_negative: bool = False
    insertion: bool = False

    @property
    def valid(self) -> str:
        """The valid axes in words."""
        if self.rank == 0:
            return "none: a rank-0 view has no axes"
        return f"[{-self.rank}, {self.rank})" if self.allow_negative else f"[0, {self.rank})"

    @property
    def lowest_insertion(self) -> int:
        """A new axis may go before any axis or after the last: positions -rank-1 .. rank."""
        return -self.rank - 1


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
    template = (
        "{what} {index} is out of bounds for axis {axis} of size {size} "
        "(valid: 0 <= {what} < {size})"
    )
    variants = (
        (
            "from_end",
            "{what} {index} is out of bounds for axis {axis} of size {size} "
            "(valid: -{size} <= {what} < {size}; a negative {what} counts from the end)",
        ),
    )
    axis: int
    index: int
    size: int
    what: str = "index"
    #: True where negative values are accepted and count from the end (NumPy indexing).
    from_end: bool = False


class InvalidStepError(TensorViewError):
    """A slice step is not a positive integer."""

    condition = "step >= 1"
    template = "invalid step {step}: a slice step must be >= 1 (use flip() to reverse)"
    step: int


class StaleViewError(TensorViewError):
    """A view is used after its owner was mutated (the run-time form of Rust's borrow rule)."""

    condition = "owner not mutated while the view is used"
    template = (
        "stale view: the owner was mutated after this view was made (owner version "
        "{owner_version}, view made at version {view_version}). Make a new view with "
        "tensor.view(), or materialize() before mutating if you need the old values"
    )
    variants = (
        (
            "window_open",
            "stale view: the owner is being mutated (a mutate() window is open), so no view of "
            "it may be made or read until the window closes",
        ),
    )
    view_version: int
    owner_version: int
    window_open: bool = False


class BroadcastError(TensorViewError):
    """Two shapes (or a shape and a target) cannot be broadcast together."""

    condition = "sizes equal or 1"
    template = "cannot broadcast shape {shape} with {target}: axis {axis}: {explanation}"
    shape: tuple[int, ...]
    target: tuple[int, ...]
    axis: int
    detail: str = ""

    @property
    def explanation(self) -> str:
        """``detail``, or the general rule when there is none."""
        return self.detail or "sizes must be equal, or one of them 1"


class OverlappingWriteError(TensorViewError):
    """A write through a view in which two coordinates read the same storage cell (a broadcast
    view's zero stride, or an explicit layout that overlaps itself): which written value would
    the cell keep? NumPy marks such views read-only; PyTorch refuses in-place writes to them."""

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
    """An index expression has an unsupported item or more indices than the view has axes
    (free text: the message says which)."""

    condition = "valid index expression"


class ClosedMutationError(TensorError):
    """A writable handle from ``Tensor.mutate()`` was used after its ``with`` block ended."""

    condition = "write inside the mutate() window"
    template = (
        "this writable handle's mutate() window has closed: writes must happen inside the "
        "`with tensor.mutate() as buf:` block (open a new window to write again)"
    )
    fields = ()


# --------------------------------------------------------------------------------------------
# Compute errors (elementwise, reductions, matmul, einsum, plans, backends)
# --------------------------------------------------------------------------------------------


class EmptyReductionError(TensorError):
    """``max``, ``min`` or ``mean`` over an axis of size 0: there is no value to return.

    (``sum`` and ``prod`` of nothing are 0 and 1, as in NumPy; these three have no such identity,
    and a silent NaN or -inf would hide the mistake.)
    """

    condition = "reduced axes are non-empty"
    template = (
        "{op} over an empty axis: shape {shape} reduced over axes {axes}, and axis {empty_axis} "
        "has size 0 ({op} of no values is undefined; only sum (0) and prod (1) have a value for "
        "an empty axis)"
    )
    op: str
    shape: tuple[int, ...]
    axes: tuple[int, ...]

    @property
    def empty_axis(self) -> int | str:
        """The first reduced axis of size 0 (``"?"`` if none is)."""
        rank = len(self.shape)
        return next((axis for axis in self.axes if axis < rank and self.shape[axis] == 0), "?")


class MatmulShapeError(TensorError):
    """``matmul`` operands whose inner sizes differ, or that have no matrix axes."""

    condition = "inner sizes match"
    template = "matmul of shapes {a_shape} and {b_shape}: {detail}"
    a_shape: tuple[int, ...]
    b_shape: tuple[int, ...]
    detail: str


class EinsumError(TensorError):
    """A malformed einsum expression, or operands that do not fit it.

    ``operand`` (an index or ``None``), ``label`` (a letter, ``"..."`` or ``None``) and ``position``
    (a character index in the expression, or ``None``) point at the offending part; the message
    repeats the expression with a caret under ``position`` when there is one.
    """

    condition = "einsum rule"
    template = "einsum {expression!r}: {detail}{caret}"
    expression: str
    detail: str
    operand: int | None = None
    label: str | None = None
    position: int | None = None

    @property
    def caret(self) -> str:
        """The expression again with a ``^`` under ``position`` (empty without a position)."""
        if self.position is None:
            return ""
        # The caret sits under the character, after "  '" (the repr's opening quote).
        return f"\n  {self.expression!r}\n  {' ' * (self.position + 1)}^"


class ReduceError(EinsumError):
    """A :func:`~llmfs.tensor.ops.reduce` call whose modes do not fit the operand, or whose op is
    unknown.

    An :class:`EinsumError` (mode labels follow einsum's rules), but the message names ``reduce``
    and shows ``modes_in``/``modes_out`` as they were given; ``label`` and ``operand`` point at
    the offending part as in :class:`EinsumError`; ``expression`` is ``"modes_in -> modes_out"``.
    """

    condition = "reduce modes name each axis once; the op is a known reduction"
    template = "reduce(modes_in={modes_in!r}, modes_out={modes_out!r}): {detail}"
    modes_in: object
    modes_out: object
    detail: str
    operand: int | None = None
    label: str | None = None
    expression: str = derived(lambda error: f"{error.modes_in!r} -> {error.modes_out!r}")
    position: int | None = derived(lambda error: None)


class DescriptorError(TensorError):
    """A :class:`~llmfs.tensor.einsum.TensorDescriptor` field that is not what it must be
    (strides that are not exact integers, one per axis; a dtype that is not a supported dtype
    name). ``field`` names the field (``"strides"``, ``"dtype"``), ``value`` holds what was given.
    """

    condition = "descriptor fields are exact"
    template = "a TensorDescriptor's {field} {detail}, got {value!r}"
    field: str
    value: object
    detail: str


class PlanMismatchError(TensorError):
    """An operand given to a plan's ``execute`` differs from the layout the plan was made for."""

    condition = "operands match the planned layouts"
    template = (
        "operand {operand} does not match the plan: its {field} is {actual} but the plan was "
        "made for {planned} (make a new plan for a different layout)"
    )
    operand: int | str
    field: str
    planned: object
    actual: object


class OutputBufferError(TensorError):
    """An ``execute_into`` output that is not a writable, unshared buffer of the planned layout."""

    condition = "output is a writable, unshared buffer of the planned layout"
    template = "cannot write the result into this output: {detail}"
    detail: str


class BackendUnavailableError(TensorError):
    """A backend name that is unknown, or whose backend cannot run on this machine.

    ``available`` lists the names that can be used; ``reason`` says why this one cannot.
    """

    condition = "backend available"
    template = "backend {name!r} is not available: {reason} (available: {listed})"
    name: str
    available: tuple[str, ...]
    reason: str

    @property
    def listed(self) -> str:
        """The available names, comma-separated (``none`` when there are none)."""
        return ", ".join(self.available) or "none"


class UnsupportedOperationError(TensorError):
    """A backend was asked for an operation or dtype it does not implement and has no fallback."""

    condition = "backend supports the operation"
    template = "backend {backend!r} does not support {what} and has no fallback"
    backend: str
    what: str


# --------------------------------------------------------------------------------------------
# The Metal backend and its CPU emulator
# --------------------------------------------------------------------------------------------


class MetalError(TensorError):
    """Root of the errors raised by :mod:`llmfs.tensor.backends.metal` (free text as a class)."""

    condition = "Metal kernel rule"


class KernelCompileError(MetalError):
    """A kernel source did not compile; ``log`` holds the compiler's diagnostics verbatim."""

    condition = "kernel compiles"
    template = "{what} failed to compile:\n{stripped_log}"
    what: str
    log: str

    @property
    def stripped_log(self) -> str:
        """``log`` without surrounding blank lines."""
        return self.log.strip()


class KernelLintError(KernelCompileError):
    """The source uses something Metal rejects although C++ would accept it.

    ``problems`` holds ``(line, message)`` pairs, 1-based lines of the kernel source; ``log`` is
    them one per line.
    """

    condition = "source stays inside Metal Shading Language"
    template = "the kernel source breaks {count} Metal rule(s):\n{log}"
    problems: list[tuple[int, str]]
    log: str = derived(
        lambda error: "\n".join(f"line {line}: {message}" for line, message in error.problems)
    )
    what: str = derived(lambda error: "the kernel source")

    @property
    def count(self) -> int:
        """How many rules the source breaks."""
        return len(self.problems)


class KernelNotFoundError(MetalError):
    """``run_kernel`` named a kernel function the source does not define."""

    condition = "kernel exists"
    template = "no kernel named {name!r} in the source (kernels defined: {listed})"
    name: str
    available: tuple[str, ...]

    @property
    def listed(self) -> str:
        """The kernels defined, comma-separated (``none`` when there are none)."""
        return ", ".join(self.available) or "none"


class KernelArgumentError(MetalError):
    """The buffers or grid given to a kernel do not match what it declares or what Metal allows."""

    condition = "kernel arguments match"


class KernelLaunchError(MetalError):
    """A dispatch failed; the message carries Metal's (or the emulator's) error text."""

    condition = "kernel runs"


def _summary(report: str) -> str:
    lines = report.strip().splitlines()
    return next(
        (line.strip() for line in lines if line.startswith("SUMMARY:")),
        lines[0] if lines else "no report",
    )


def _fault_thread(report: str) -> tuple[int, int, int] | None:
    for line in report.splitlines():
        if line.startswith("LLMFS-THREAD:"):
            x, y, z = (int(v) for v in line.split()[1:4])
            return (x, y, z)
    return None


class KernelMemoryError(KernelLaunchError):
    """An isolated emulator launch caught a kernel reading or writing outside a buffer.

    ``kernel`` names the kernel; ``report`` is AddressSanitizer's report (or the guarded
    harness's, naming the buffer and byte offset); ``summary`` its one-line ``SUMMARY`` (or first
    line); ``thread`` the ``thread_position_in_grid`` ``(x, y, z)`` of the first thread that
    stepped outside (the launch stops there), or ``None`` when the harness could not tell.
    """

    condition = "kernel stays inside its buffers"
    template = (
        "kernel {kernel!r} accessed memory outside its buffers{by_thread} (a missing bounds "
        "guard?): {summary}"
    )
    kernel: str
    report: str
    summary: str = derived(lambda error: _summary(error.report))
    thread: tuple[int, int, int] | None = derived(lambda error: _fault_thread(error.report))

    @property
    def by_thread(self) -> str:
        """`` in thread [x, y, z]`` (thread_position_in_grid) when known, else empty."""
        if self.thread is None:
            return ""
        return f" in thread_position_in_grid [{', '.join(str(v) for v in self.thread)}]"


class MetalUnavailableError(MetalError):
    """The requested executor cannot run here (no Mac/Metal device, or no C++ compiler)."""

    condition = "Metal executor available"


class MetalDTypeError(DTypeError):
    """A dtype the Metal kernels do not take was sent to them: float64 (Metal has no 64-bit
    float), int64 (the kernels take 32-bit integers), or a dtype an op has no kernel for (for
    example ``exp`` of int32, which NumPy computes in float64). ``allowed`` lists what the op
    takes (``supported`` as given)."""

    template = "{where} does not take {dtype!s}: {reason}"
    dtype: object
    where: str
    supported: tuple[str, ...] = ("float32", "float16")
    allowed: tuple[str, ...] = derived(lambda error: tuple(error.supported))

    @property
    def reason(self) -> str:
        """Why the dtype is refused and what to do instead."""
        name = str(self.dtype)
        if name == "float64":
            return (
                "Metal has no 64-bit floating point type, and llmfs never downcasts silently. "
                "Convert first (for example Tensor.from_numpy(t.to_numpy(), dtype='float32')), "
                "or use the numpy backend for float64"
            )
        if name == "int64":
            return (
                "the Metal kernels take 32-bit integers, and llmfs never narrows silently. "
                "Convert to int32 first, or use the numpy backend for int64"
            )
        return f"it takes {', '.join(self.supported)}. Convert first, or use the numpy backend"


class NegativeSliceBoundError(IndexOutOfBoundsError):
    """A strict slice's start or stop is negative: strict bounds lie in ``[0, size]``."""

    condition = "0 <= slice bound <= size"
    template = (
        "{what} {index} is out of bounds for axis {axis} of size {size} (a strict slice needs "
        "0 <= {what} <= {size}; negative bounds count from the end only in view[a:b])"
    )


class AllocationError(TensorError, MemoryError):
    """A new storage that NumPy or the machine cannot hold.

    ``count`` values of ``dtype`` take ``nbytes`` bytes; ``reason`` says which limit refused them
    (NumPy's largest array, the machine's memory, or the allocation itself failing).
    """

    condition = "storage fits in memory"
    template = "cannot allocate {count} values of {dtype} ({nbytes} bytes, {readable}): {reason}"
    count: int
    dtype: object
    nbytes: int
    reason: str

    @property
    def readable(self) -> str:
        """``nbytes`` in binary units with two decimals (``8.00 TiB``), as NumPy reports them."""
        value, unit = float(self.nbytes), "B"
        for bigger in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
            if value < 1024:
                break
            value, unit = value / 1024, bigger
        return f"{self.nbytes} B" if unit == "B" else f"{value:.2f} {unit}"


__all__ = [
    "PLURALS",
    "AllocationError",
    "AxisOutOfRangeError",
    "BackendUnavailableError",
    "BroadcastError",
    "ClosedMutationError",
    "DTypeError",
    "DescriptorError",
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
    "KernelArgumentError",
    "KernelCompileError",
    "KernelLaunchError",
    "KernelLintError",
    "KernelMemoryError",
    "KernelNotFoundError",
    "MatmulShapeError",
    "MetalDTypeError",
    "MetalError",
    "MetalUnavailableError",
    "NegativeSliceBoundError",
    "NonContiguousReshapeError",
    "OutputBufferError",
    "OverlappingWriteError",
    "PermutationLengthMismatchError",
    "PlanMismatchError",
    "RankMismatchError",
    "ReduceError",
    "ReshapeElementCountMismatchError",
    "ShapeOverflowError",
    "SliceEndOutOfBoundsError",
    "SliceStartAfterEndError",
    "SqueezeError",
    "StaleViewError",
    "TensorError",
    "TensorViewError",
    "UnsupportedOperationError",
    "derived",
]


class ConcurrentWriteError(StaleViewError):
    """A read overlapped a write of the same owner by another thread: the values read may mix
    two versions, so they are refused. llmfs has a single-writer rule: while one thread writes
    a tensor (an ``as_mut_slice()`` write or a ``mutate()`` window), no other thread reads it."""

    condition = "no other thread writes the owner during a read"
    template = (
        "stale read: the owner was written by another thread while it was being read (owner "
        "version {owner_version}, read began at version {view_version}), so the values could "
        "mix two versions. One thread writes a tensor at a time, and nothing reads it meanwhile: "
        "make a new view and read again once the write is done"
    )
    variants = (
        (
            "window_open",
            "stale read: another thread is writing the owner (version {owner_version}), so it "
            "may not be read until that write ends: one thread writes a tensor at a time, and "
            "nothing reads it meanwhile",
        ),
    )


class ViewTooLargeError(TensorError):
    """A view holds more values than any array can: an op would read ``count`` values of
    ``dtype`` (``nbytes`` bytes), past NumPy's largest array or this machine's memory. Only a
    broadcast or self-overlapping view is that large, and reading it would take hours."""

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


__all__ += ["ConcurrentWriteError", "ViewTooLargeError"]
