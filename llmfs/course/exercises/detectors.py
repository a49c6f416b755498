"""General misconception detectors: each recognises one way of thinking wrong about a kind of
request (a permute, a slice, a reduction, a broadcast, an error), from the request that was made
(:class:`~llmfs.course.exercises.run.Call`), its true outcome and the learner's value, so it
applies to every exercise of that kind, present and future.

Every detector returns one sentence that names the RULE the answer broke, never a value of the
answer (no number, shape or class name of the truth): the learner is to find the answer with the
rule. :mod:`llmfs.course.exercises.misconceptions` lists them in its catalogue. A detector that
redoes the request the way the learner thought of it (another axis, the permutation backwards,
shapes aligned from the left) catches a ``TensorError`` of that redo and then stays silent.

This module reads the request and holds the detectors of layouts (order, strides, views and
copies) and of indexing and slicing; :mod:`llmfs.course.exercises.op_detectors` those of ops
(reductions, broadcasting, attention weights) and of errors.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from llmfs.course.exercises.entries import flat
from llmfs.tensor import Tensor, TensorError, TensorView, layout

if TYPE_CHECKING:
    from llmfs.course.exercises.misconceptions import Context

Detector = Callable[[Any, Any, "Context"], "str | None"]


# -- reading the request ----------------------------------------------------------------------


def method(context: Context) -> str:
    """The outermost method the expression called (``""`` when it is not a call)."""
    call = context.outcome.call
    return call.method if call is not None else ""


def source(context: Context) -> TensorView | None:
    """The receiver's view (``x`` of ``x.permute(...)``), when it could be read."""
    call = context.outcome.call
    return call.source if call is not None else None


def operand(context: Context, position: int) -> TensorView | None:
    """The view of positional argument ``position`` (``base`` of ``ops.sum(base, axis=0)``)."""
    call = context.outcome.call
    if call is None or position >= len(call.operands):
        return None
    return call.operands[position]


def row_major(shape: Sequence[int]) -> tuple[int, ...]:
    """The strides of a new owner of ``shape``."""
    return tuple(layout.row_major_strides(tuple(shape)))


def ints(values: Any) -> bool:
    return isinstance(values, (list, tuple)) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in values
    )


def _shared(context: Context) -> bool:
    row = context.outcome.row
    return row is not None and not row.rejected and not row.new_owner


def _new_owner(context: Context) -> bool:
    row = context.outcome.row
    return row is not None and not row.rejected and row.new_owner


def redo(make: Callable[[], Any]) -> TensorView | None:
    """The view another request gives, or ``None`` when that request is refused."""
    try:
        result = make()
    except (TensorError, TypeError, ValueError, IndexError):
        return None
    if isinstance(result, Tensor):
        return result.view()
    return result if isinstance(result, TensorView) else None


def _field_of(view: TensorView, field: str) -> Any:
    if field == "shape":
        return tuple(view.shape)
    if field == "strides":
        return tuple(view.strides)
    if field == "offsets":
        return tuple(view.logical_offsets())
    if field == "values":
        return view.tolist()
    return None


def _nesting(value: Any) -> Any:
    return [_nesting(v) for v in value] if isinstance(value, (list, tuple)) else None


def _same(field: str, value: Any, other: Any) -> bool:
    if field == "values":  # the same numbers in the same nesting (keepdims changes only that)
        got, want = flat(value), flat(other)
        return _nesting(value) == _nesting(other) and all(
            math.isclose(float(g), float(w), rel_tol=1e-6, abs_tol=1e-9) for g, w in zip(got, want)
        )
    return tuple(value) == tuple(other) if isinstance(value, (list, tuple)) else value == other


def shows(field: str, value: Any, truth: Any, other: TensorView | None) -> bool:
    """Whether ``value`` is what ``other`` gives for ``field`` while the truth is not."""
    if other is None or value is None or truth is None:
        return False
    theirs = _field_of(other, field)
    return theirs is not None and _same(field, value, theirs) and not _same(field, truth, theirs)


# -- order and layout -------------------------------------------------------------------------


def reversed_order(value: Any, truth: Any, context: Context) -> str | None:
    """The right entries listed from the last axis to the first."""
    if not ints(value) or not ints(truth) or len(truth) < 2:
        return None
    if tuple(value) == tuple(reversed(truth)) != tuple(truth):
        return (
            "Those are the right entries in reverse order: a layout lists one entry per axis "
            "from axis 0 (the outermost) to the last axis (the one that changes fastest)."
        )
    return None


def column_major(value: Any, truth: Any, context: Context) -> str | None:
    """Strides that step by one value along the FIRST axis (Fortran order)."""
    view = context.outcome.view
    if view is None or not ints(value) or len(view.shape) < 2:
        return None
    sizes = [max(size, 1) for size in view.shape]
    strides, running = [], 1
    for size in sizes:
        strides.append(running)
        running *= size
    if tuple(value) == tuple(strides) != tuple(truth) and tuple(strides) != row_major(view.shape):
        return (
            "Those are column-major (Fortran-order) strides, where the first axis steps by one "
            "value: llmfs lays values out row-major, where the LAST axis steps by one and each "
            "earlier stride is the product of the sizes after it."
        )
    return None


def _permutation(context: Context) -> tuple[int, ...] | None:
    call = context.outcome.call
    if call is None or call.source is None:
        return None
    rank = len(call.source.shape)
    if call.method == "permute" and call.args and ints(call.args[0]):
        dims = tuple(d % rank for d in call.args[0]) if rank else ()
    elif call.method == "transpose" and len(call.args) == 2 and ints(call.args):
        a, b = (d % rank for d in call.args)
        order = list(range(rank))
        order[a], order[b] = order[b], order[a]
        dims = tuple(order)
    else:
        return None
    return dims if sorted(dims) == list(range(rank)) else None


def inverse_permutation(value: Any, truth: Any, context: Context) -> str | None:
    """``permute(dims)`` read backwards: old axis k sent to position dims[k]."""
    dims, view = _permutation(context), source(context)
    if dims is None or view is None or not ints(value):
        return None
    inverse = [0] * len(dims)
    for position, axis in enumerate(dims):
        inverse[axis] = position
    redone = redo(lambda: view.permute(inverse))
    field = "shape" if tuple(truth) == tuple(context.outcome.truth("shape")) else "strides"
    if shows(field, value, truth, redone):
        return (
            "That applies the permutation backwards: permute(dims) puts source axis dims[k] at "
            "position k (new axis k IS old axis dims[k]); it does not send old axis k to "
            "position dims[k]."
        )
    return None


def kept_source_layout(value: Any, truth: Any, context: Context) -> str | None:
    """A transpose or permute predicted with the source's sizes or strides unchanged."""
    view = source(context)
    if _permutation(context) is None or view is None or not ints(value):
        return None
    for own in (tuple(view.shape), tuple(view.strides)):
        if tuple(value) == own != tuple(truth):
            return (
                "Those are the source's own entries, in the source's order: a transpose or "
                "permute moves each axis, with its size and its stride, to its new position."
            )
    return None


def dims_for_strides(value: Any, truth: Any, context: Context) -> str | None:
    """The permutation's axis numbers given as the strides or the shape."""
    dims = _permutation(context)
    call = context.outcome.call
    if dims is None or call is None or call.method != "permute" or not ints(value):
        return None
    if tuple(value) == tuple(call.args[0]) != tuple(truth):
        return (
            "Those are the permutation's axis numbers: permute says WHICH source axis goes "
            "where, and each new axis brings along that source axis's own size and stride."
        )
    return None


def transpose_for_reshape(value: Any, truth: Any, context: Context) -> str | None:
    """The transpose's strides, offsets or values given for a reshape."""
    view = source(context)
    if method(context) != "reshape" or view is None or len(view.shape) < 2:
        return None
    transposed = redo(lambda: view.permute(list(reversed(range(len(view.shape))))))
    for field in ("strides", "offsets", "values"):
        if shows(field, value, truth, transposed) and is_field(field, truth, context):
            return (
                "That is what a transpose gives: a reshape keeps the order in which the values "
                "are walked and only regroups them into the new sizes, so row 0 of the result "
                "holds the first values of the walk."
            )
    return None


def is_field(field: str, truth: Any, context: Context) -> bool:
    try:
        mine = context.outcome.truth(field)
    except Exception:  # a plain outcome has no tensor fields
        return False
    return mine is not None and _same(field, truth, mine)


def view_as_new_owner(value: Any, truth: Any, context: Context) -> str | None:
    """Row-major strides for a view that shares its source's storage (not a transpose, permute
    or slice: those have their own wording)."""
    view = context.outcome.view
    if view is None or not _shared(context) or not ints(value):
        return None
    if method(context) in ("transpose", "permute", "slice", "getitem"):
        return None
    if tuple(value) == row_major(view.shape) != tuple(truth):
        return (
            "Those are the row-major strides of a new owner of this shape, but the result is a "
            "view of its source's storage: each of its axes steps as far in storage as the "
            "source axis it came from."
        )
    return None


def copy_keeps_source(value: Any, truth: Any, context: Context) -> str | None:
    """A new owner predicted with its source's strides or walk."""
    view = source(context)
    view = view if view is not None else operand(context, 0)
    if not _new_owner(context) or view is None:
        return None
    for field in ("strides", "offsets"):
        if shows(field, value, truth, view) and is_field(field, truth, context):
            return (
                "Those describe the source: a new owner has storage of its own, laid out "
                "row-major for its shape, so it walks its own cells in order from offset 0."
            )
    return None


def new_owner_walk(value: Any, truth: Any, context: Context) -> str | None:
    """A new owner's offsets in any order other than 0, 1, 2, ... (a view's walk)."""
    if not _new_owner(context) or not ints(value) or not ints(truth):
        return None
    if sorted(value) == sorted(truth) and tuple(value) != tuple(truth):
        return (
            "A new owner is laid out row-major: its walk visits its own cells in storage "
            "order, whatever order its values were read in when it was made."
        )
    return None


def owner_kind(value: Any, truth: Any, context: Context) -> str | None:
    """``shared`` for a request that allocates, ``new`` for a view."""
    if value == "new" and truth == "shared":
        return (
            "A view only writes new metadata (shape, strides, base offset) over its source's "
            "storage: it allocates nothing, so it shares its source's owner."
        )
    if value == "shared" and truth == "new":
        return (
            "This request computes or copies values into storage of its own (an op, a matrix "
            "product, einsum and materialize all allocate): the result is a new owner."
        )
    return None


def contiguity(value: Any, truth: Any, context: Context) -> str | None:
    """ "A view is always contiguous" (not for a slice: its detector says it) and "a copy is
    never contiguous"."""
    if value is True and truth is False and method(context) not in ("slice", "getitem"):
        return (
            "Being a view does not make a layout contiguous: it is contiguous only when its "
            "strides are the row-major strides of its shape, so that its walk is one gap-free "
            "run through storage in order."
        )
    if value is False and truth is True:
        return (
            "Contiguous means the walk is one gap-free run in storage order: a new owner, and "
            "any view whose strides are row-major for its shape, is contiguous."
        )
    return None


def scalar_axes(value: Any, truth: Any, context: Context) -> str | None:
    """A size-1 axis (or a stride of 1) given for a result with no axes."""
    if ints(truth) and len(truth) == 0 and ints(value) and tuple(value) in ((1,), (0,)):
        return (
            "A scalar has no axes at all: its shape and its strides list nothing (the product "
            "of no sizes is 1, so it still holds one value)."
        )
    return None


def zero_size_products(value: Any, truth: Any, context: Context) -> str | None:
    """Row-major strides computed with a size-0 axis multiplied in as 0."""
    view = context.outcome.view
    if view is None or 0 not in view.shape or not ints(value):
        return None
    strides, running = [], 1
    for size in reversed(view.shape):
        strides.append(running)
        running *= size
    if tuple(value) == tuple(reversed(strides)) != tuple(truth):
        return (
            "A size-0 axis counts as 1 in the stride products, so the axes before it keep "
            "strides that would still tell coordinates apart."
        )
    return None


def expand_zero_stride(value: Any, truth: Any, context: Context) -> str | None:
    """A nonzero stride for an axis that ``expand`` adds or stretches."""
    if method(context) != "expand" or not ints(value) or not ints(truth):
        return None
    if len(value) != len(truth):
        return None
    stretched = [k for k, t in enumerate(truth) if t == 0]
    if any(value[k] != 0 for k in stretched) and all(
        v == t for k, (v, t) in enumerate(zip(value, truth)) if k not in stretched
    ):
        return (
            "expand copies nothing: every axis it adds or stretches from size 1 gets stride 0, "
            "so all its coordinates read the same cells again."
        )
    return None


def head_axis_order(value: Any, truth: Any, context: Context) -> str | None:
    """Axes 1 and 2 of a 4-axis result swapped: [batch, heads, seq, head] against
    [batch, seq, heads, head]."""
    if not ints(value) or not ints(truth) or len(truth) != 4:
        return None
    swapped = (truth[0], truth[2], truth[1], truth[3])
    if tuple(value) == swapped != tuple(truth):
        return (
            "Axes 1 and 2 are swapped: attention's per-head layout is [batch, heads, seq, "
            "head_dim], the packed one [batch, seq, heads, head_dim]; follow each axis through "
            "the permute to see which of the two the result has."
        )
    return None


def merge_outer_stride(value: Any, truth: Any, context: Context) -> str | None:
    """A merged axis given the stride of its OUTER axis."""
    call, view = context.outcome.call, source(context)
    if call is None or call.method != "merge" or view is None or not ints(value):
        return None
    if len(call.args) < 2 or not ints(call.args[:2]) or not ints(truth):
        return None
    start = call.args[0] % len(view.shape)
    wrong = list(truth)
    if start < len(wrong):
        wrong[start] = view.strides[start]
    if tuple(value) == tuple(wrong) != tuple(truth):
        return (
            "A merged axis steps like its INNER (last) axis: one step of the merged index "
            "moves to the next element of the innermost axis merged."
        )
    return None


def split_column_major(value: Any, truth: Any, context: Context) -> str | None:
    """The new axes of a split given strides that grow left to right."""
    call, view = context.outcome.call, source(context)
    if call is None or call.method != "split" or view is None or len(call.args) < 2:
        return None
    axis, sizes = call.args[0], call.args[1]
    if not isinstance(axis, int) or not ints(sizes) or not ints(value) or not ints(truth):
        return None
    axis %= len(view.shape)
    wrong, running = list(truth), view.strides[axis]
    for k, size in enumerate(sizes):
        if axis + k < len(wrong):
            wrong[axis + k] = running
        running *= size
    if tuple(value) == tuple(wrong) != tuple(truth):
        return (
            "The LAST new axis of a split keeps the old stride, and each earlier new axis "
            "multiplies it by the sizes after it (row-major within the split axis)."
        )
    return None


def flip_keeps_direction(value: Any, truth: Any, context: Context) -> str | None:
    """A flip predicted with the source's stride or base offset."""
    view = source(context)
    if method(context) != "flip" or view is None:
        return None
    if ints(value) and tuple(value) == tuple(view.strides) != tuple(truth):
        return "A flip walks its axis backwards: that axis's stride becomes negative."
    if value == view.base_offset != truth:
        return (
            "A flip starts at the LAST index of its axis: the base offset moves by "
            "(size - 1) × stride along it."
        )
    return None


# -- indexing and slicing ---------------------------------------------------------------------


def _int_index(context: Context) -> tuple[int, ...] | None:
    call = context.outcome.call
    if call is None or call.method != "getitem" or not call.args or not ints(call.args):
        return None
    return tuple(call.args)


def index_without_strides(value: Any, truth: Any, context: Context) -> str | None:
    """``x[i, j, k]``'s offset as the plain sum of the indices (no strides)."""
    index, view = _int_index(context), source(context)
    if index is None or view is None or len(index) < 2 or not isinstance(value, int):
        return None
    if value == sum(index) != truth:
        return (
            "Each index counts steps along its axis, and one step skips that axis's stride: "
            "the offset is the sum of index × stride (plus the base offset), not of the indices."
        )
    return None


def slice_base_offset_zero(value: Any, truth: Any, context: Context) -> str | None:
    """ "A slice's base offset is 0": the view starts where the slice starts."""
    label = context.outcome.label
    sliced = ".slice(" in label or method(context) == "getitem"
    if not sliced or value != 0 or truth in (0, None):
        return None
    return (
        "A slice starts at its first kept element: its base offset is the source's base offset "
        "plus start × stride along the sliced axis, and every view made from it keeps that "
        "starting point."
    )


def _slice_request(context: Context) -> tuple[int, int, int, int] | None:
    call = context.outcome.call
    if call is None or call.method != "slice" or call.source is None or len(call.args) < 3:
        return None
    args = tuple(call.args[:4]) if len(call.args) >= 4 else (*call.args[:3], 1)
    if not ints(args) or not call.source.shape:
        return None
    axis, start, stop, step = args
    return axis % len(call.source.shape), start, stop, step


def slice_end_off_by_one(value: Any, truth: Any, context: Context) -> str | None:
    """The stop index kept (or one index too few): the length off by one."""
    request = _slice_request(context)
    if request is None or not ints(value) or not ints(truth):
        return None
    axis, start, stop, step = request
    if context.outcome.truth("shape") == tuple(truth):  # the shape field
        if len(value) != len(truth) or axis >= len(truth):
            return None
        others = all(v == t for k, (v, t) in enumerate(zip(value, truth)) if k != axis)
        off = abs(value[axis] - truth[axis]) == 1
        floor = step > 1 and value[axis] == (stop - start) // step
        if not (others and off) or floor:
            return None
    elif context.outcome.truth("offsets") == tuple(truth):  # the walk, one row too many/few
        view = source(context)
        assert view is not None

        def cut(end: int) -> TensorView | None:
            return redo(lambda: view.slice(axis, start, end, step))

        if not any(shows("offsets", value, truth, cut(end)) for end in (stop - step, stop + 1)):
            return None
    else:
        return None
    return (
        "A slice keeps start, start + step, ... while below stop: stop itself is excluded, so "
        "slice(axis, start, stop) keeps stop - start indices."
    )


# -- numbers and counts -------------------------------------------------------------------------
# These read a number against the truth, so they apply to every numeric field, plain or not
# (a loss, a count of reads, a base offset): the field kind ``number`` of the catalogue.

#: Half a unit of the second decimal: numbers asked "to 2 decimals" are rounded that far.
ROUNDING = 0.006
#: Whole factors up to this are read as "counted several times over" (or once too few).
LARGEST_FACTOR = 1024


def number(value: Any) -> bool:
    """A real number that is not a boolean."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _close(value: float, target: float) -> bool:
    """Equal, allowing the rounding of an answer given to 2 decimals (exact for whole numbers)."""
    if isinstance(value, int) and float(target).is_integer():
        return value == target
    return abs(value - target) <= ROUNDING * max(1.0, abs(target))


def other_log_base(value: Any, truth: Any, context: Context) -> str | None:
    """The natural log computed in base 10 or 2 (``1.08`` for ``ln 12 = 2.48``), or the other
    way round."""
    if not (number(value) and number(truth)) or truth == 0:
        return None
    bases = (math.log(10), math.log(2), 1 / math.log(10), 1 / math.log(2))
    if any(_close(value, truth / base) for base in bases) and not _close(value, truth):
        return (
            "That is the right logarithm taken in another base (10 or 2): a loss, like NumPy's "
            "np.log, uses the natural logarithm, ln."
        )
    return None


def flipped_sign(value: Any, truth: Any, context: Context) -> str | None:
    """The right size with the wrong sign."""
    if number(value) and number(truth) and truth != 0 and _close(value, -truth):
        return (
            "The size is right but the sign is flipped: find the step where the direction turns "
            "(the minus sign of a formula such as -log p, or the end a reversed axis starts from)."
        )
    return None


def _whole_factor(value: float, truth: float) -> int | None:
    """``k`` (2 to :data:`LARGEST_FACTOR`) when ``value`` is ``k`` times ``truth``."""
    if truth == 0 or value == 0:
        return None
    ratio = value / truth
    k = round(ratio)
    if 2 <= k <= LARGEST_FACTOR and _close(value, k * truth):
        return k
    return None


def counted_several_times(value: Any, truth: Any, context: Context) -> str | None:
    """A count (or a sum) that is a whole multiple of the truth: something counted again."""
    if not (number(value) and number(truth)) or other_log_base(value, truth, context):
        return None
    if _whole_factor(value, truth) is not None:
        return (
            "Your number is a whole multiple of the right one, so something is counted more than "
            "once (each value, read, position or step is to be counted once), or summed where the "
            "question asks for a mean."
        )
    if _whole_factor(truth, value) is not None:
        return (
            "Your number is a whole fraction of the right one, so something that happens several "
            "times over (per head, per operand, per row, per byte of a value) is counted once."
        )
    return None


def _common_factor(value: Sequence[Any], truth: Sequence[Any]) -> int | None:
    """``k`` when every entry of ``value`` is ``k`` times its entry of ``truth`` (zeros match
    zeros), with at least one entry that is not zero."""
    factors = set()
    for given, right in zip(value, truth, strict=True):
        if right == 0 or given == 0:
            if given != right:
                return None
            continue
        k = _whole_factor(given, right)
        if k is None:
            return None
        factors.add(k)
    return factors.pop() if len(factors) == 1 else None


def scaled_values(value: Any, truth: Any, context: Context) -> str | None:
    """Every value the same whole multiple (or fraction) of the truth's: a mean for a sum, a
    sum for a mean, one count for several."""
    try:
        given, right = flat(value), flat(truth)
    except (TypeError, ValueError):
        return None
    if len(given) != len(right) or not all(number(v) for v in (*given, *right)):
        return None
    if _common_factor(given, right) is not None:
        return (
            "Every value is the same whole multiple of the answer's: a sum where the request "
            "takes a mean, or each value counted several times."
        )
    if _common_factor(right, given) is not None:
        return (
            "Every value is the same whole fraction of the answer's: a mean where the request "
            "takes a sum, or something that happens several times counted once."
        )
    return None


def float32_spacing(value: Any, truth: Any, context: Context) -> str | None:
    """A number float32 cannot hold, from 2**24 on (where neighbouring float32 values are 2 or
    more apart), given where the truth is one it can."""
    if not (number(value) and number(truth)) or abs(truth) < 2**24 or abs(value) < 2**24:
        return None
    if float(value) != float(_float32(value)) and float(truth) == float(_float32(truth)):
        return (
            "float32 cannot hold that number: from 2 to the power 24 on, neighbouring float32 "
            "values are 2 or more apart, so a fraction or an odd step is rounded to the nearest "
            "one it can hold."
        )
    return None


def _float32(value: float) -> float:
    import numpy as np  # the course's numbers, read the way the kernels store them

    return float(np.float32(value))


def probability_for_loss(value: Any, truth: Any, context: Context) -> str | None:
    """A loss given as a probability, or as one unit per wrong guess."""
    if number(value) and number(truth) and 0 <= value <= 1 < truth:
        return (
            "A cross-entropy loss is minus the natural log of the probability the model gives "
            "the target, averaged over the positions: not the probability itself, nor one unit "
            "per wrong guess."
        )
    return None


# -- gradients and the cells a view reads --------------------------------------------------------


def _nested_shape(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, list):
        return ()
    shapes = {_nested_shape(item) for item in value}
    if len(shapes) > 1 or None in shapes:
        return None
    inner = shapes.pop() if shapes else ()
    return (len(value), *inner) if inner is not None else None


def gradient_shape(value: Any, truth: Any, context: Context) -> str | None:
    """A gradient of another shape than the leaf's (the view's, or another operand's)."""
    given, right = _nested_shape(value), _nested_shape(truth)
    if given is not None and right is not None and given != right:
        return (
            "A gradient has the shape of the tensor it belongs to, the leaf that requires grad: "
            "where a view repeats a cell its gradients add up there, and a cell no view reads "
            "gets 0."
        )
    return None


def gradient_shape_named(value: Any, truth: Any, context: Context) -> str | None:
    """A gradient's shape predicted as another tensor's."""
    if isinstance(value, list) and value != truth:
        return (
            "A leaf's gradient always has the leaf's own shape, whatever views and operands the "
            "loss used it through."
        )
    return None


def neighbouring_cells(value: Any, truth: Any, context: Context) -> str | None:
    """The cells of a strided view given as a run of neighbouring cells."""
    if not (ints(value) and ints(truth)) or len(value) != len(truth) or len(value) < 2:
        return None
    run = all(b - a == 1 for a, b in itertools.pairwise(value))
    spread = any(b - a != 1 for a, b in itertools.pairwise(truth))
    if run and spread:
        return (
            "Those cells are neighbours in storage, but a view reads through its strides: "
            "cells a stride apart, with the ones between them left out."
        )
    return None


def product_keeps_operand_shape(value: Any, truth: Any, context: Context) -> str | None:
    """A product's shape given as one operand's shape."""
    call = context.outcome.call
    if call is None or call.method not in ("einsum", "matmul", "__matmul__"):
        return None
    shapes = [list(view.shape) for view in call.operands if view is not None]
    given = list(value) if isinstance(value, (list, tuple)) else None
    if given is not None and given != list(truth) and given in shapes:
        return (
            "A product's result has the axes its output keeps (the rows of the first operand, "
            "the columns of the second, the batch axes), not the shape of one operand."
        )
    return None


__all__ = [
    "Detector",
    "column_major",
    "contiguity",
    "copy_keeps_source",
    "counted_several_times",
    "dims_for_strides",
    "expand_zero_stride",
    "flip_keeps_direction",
    "flipped_sign",
    "float32_spacing",
    "gradient_shape",
    "gradient_shape_named",
    "head_axis_order",
    "index_without_strides",
    "ints",
    "inverse_permutation",
    "is_field",
    "kept_source_layout",
    "merge_outer_stride",
    "method",
    "neighbouring_cells",
    "new_owner_walk",
    "number",
    "operand",
    "other_log_base",
    "owner_kind",
    "probability_for_loss",
    "product_keeps_operand_shape",
    "redo",
    "reversed_order",
    "row_major",
    "scalar_axes",
    "scaled_values",
    "shows",
    "slice_base_offset_zero",
    "slice_end_off_by_one",
    "source",
    "split_column_major",
    "transpose_for_reshape",
    "view_as_new_owner",
    "zero_size_products",
]
