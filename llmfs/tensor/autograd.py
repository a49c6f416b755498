"""Reverse-mode autograd: the backward of every view is one rule; every op has a short rule.

A result computed from tensors that require grad remembers how (:mod:`llmfs.tensor.tape`):
``y.backward()`` walks that record from ``y`` back to the leaves and adds d(y)/d(leaf) into each
leaf's ``.grad``, as PyTorch's ``backward``. Read it as micrograd's ``engine.py`` at tensor scale:
:func:`view_backward` (the one view rule), :data:`RULES` (one short function per op), and
:func:`backward` (the walk).

The one view rule
-----------------
A view reads its owner's storage through a layout (shape, strides, offset), so the gradient of
a view *is* the gradient of the storage cells it reads: :func:`view_backward` scatter-adds the
view's gradient into a zero buffer of the owner's storage, through the view's offsets
(PyTorch's ``as_strided_backward``). Every view op (reshape, transpose, permute, slice with
steps, flip, merge, split, expand, unsqueeze, squeeze, indexing) and any chain of them is
covered by that one function, because the layout already is the composition of the chain:

* a broadcast's zero stride sends many coordinates to one cell, so their gradients *sum*;
* a slice's gradient lands in exactly the cells it read, the others stay 0;
* two views of one storage (``x[:2] * x[1:]``) add into the same buffer.

The adding itself is the backend's ``scatter_add`` (the backend protocol's one primitive for
autograd): the ``reference`` backend runs the rule as written, offset by offset along the
offset cursor; the numpy backend sums a broadcast first and writes a layout that never meets
itself with one strided assignment, and the tests hold it to the plain rule.

Invariants of the tape
----------------------
1. **Nodes are owners.** Only a ``Tensor`` (an owner) made by a recorded op has a node
   (``grad_fn``); a view has none, its layout is its record. A node's edges are the views the op
   read (saved with their owner's version); an edge leads to the view's owner.
2. **Gradients are storage-shaped.** The gradient of an owner has one value per storage cell
   (its shape, row-major, its dtype); the gradient of a view reaches its owner only through
   :func:`view_backward`.
3. **One visit per owner.** :func:`backward` orders the owners reachable from the result
   topologically and runs each node once, after every consumer has added its gradient.
4. **Leaves accumulate.** A leaf's gradient is added into its ``.grad`` in place (created on the
   first backward); results keep none. The record stays after ``backward()`` (PyTorch's
   ``retain_graph=True``), so backward may run again on it.
5. **Writes are caught, never differentiated.** A write to a saved tensor after the op that
   saved it (``copyto``, ``mutate()``, ``as_mut_slice()``, all of which move the storage version)
   is a :class:`SavedTensorModifiedError` when a rule needs those values, and a write to an op's
   result after it was computed is one whenever backward passes through that result. A leaf may
   be written (an optimizer step) when no rule needs its old values.
6. **Backward records nothing.** The rules run under ``no_grad()``, with the ops of
   :mod:`llmfs.tensor.ops` (so on the active backend) and einsums for einsum.

The rules of ops built in the layers above (the fused layers of :mod:`llmfs.tensor.functional`,
einsum) are stated next to their forward pass and join :data:`RULES` through
:func:`register_rule`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from llmfs.tensor import above, ops
from llmfs.tensor.backends import get_backend
from llmfs.tensor.dtypes import is_number
from llmfs.tensor.errors import (
    GradientShapeError,
    NoGradientError,
    NonContiguousReshapeError,
    NotDifferentiableError,
    SavedTensorModifiedError,
    TensorError,
)
from llmfs.tensor.layout import Layout, normalize_axes
from llmfs.tensor.strided import numpy_view
from llmfs.tensor.tape import Node, no_grad
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import TensorView, ViewMethods

Grad = Tensor | TensorView
#: A backward rule: (the op's record, d(loss)/d(result)) -> [(input view, d(loss)/d(view))].
Rule = Callable[["Context", Tensor], list[tuple[TensorView, Grad]]]

# -- The one view rule -----------------------------------------------------------------------------


def view_backward(
    grad: np.ndarray,
    layout: Layout,
    storage_size: int,
    dtype: np.dtype,
    into: np.ndarray | None = None,
) -> np.ndarray:
    """THE backward of every view: the gradient of a view reading ``layout`` is scattered and
    added into a buffer of its owner's storage (``storage_size`` values of ``dtype``), at the
    offsets the view reads: ``buffer[offset(c)] += grad[c]`` for every coordinate ``c``.

    ``grad`` has the view's shape. The buffer is ``into`` (a gradient that already reached the
    owner through another view, added to in place) or a new zero buffer. Cells the view never
    reads get nothing; a cell read by several coordinates (a zero stride, an overlapping
    explicit layout) gets their sum. The adding is the active backend's ``scatter_add``: the
    ``reference`` backend walks the offset cursor (``view.logical_offsets()``) one offset at a
    time, the numpy backend sums broadcast axes first and adds with one strided assignment.
    Returns the buffer.
    """
    buffer = np.zeros(storage_size, dtype=dtype) if into is None else into
    values = np.asarray(grad, dtype=dtype)
    if values.size:
        get_backend().scatter_add(buffer, layout, values)
    return buffer


# -- The walk --------------------------------------------------------------------------------------


class Context:
    """What a rule reads: the op's saved arguments (checked against later writes when their
    values are needed) and its result."""

    __slots__ = ("node", "result")

    def __init__(self, node: Node, result: Tensor) -> None:
        self.node = node
        self.result = result

    @property
    def saved(self) -> tuple[Any, ...]:
        """What the op's forward kept for its rule (:func:`llmfs.tensor.tape.save_for_backward`):
        its own intermediate tensors, which nothing else holds or writes."""
        return self.node.saved

    def arg(self, index: int, name: str | None = None, default: Any = None) -> Any:
        """Argument ``index`` as saved (or keyword ``name``, or ``default``), for its layout,
        shape or value as a number; a view's values are read through :meth:`values`."""
        if index < len(self.node.args):
            return self.node.args[index]
        if name is not None:
            return self.node.kwargs.get(name, default)
        return default

    def values(self, item: Any, what: str) -> Any:
        """``item`` (a saved argument) to be read: a number as it is; a view after checking its
        owner was not written since the op ran (:class:`SavedTensorModifiedError` if it was)."""
        if isinstance(item, TensorView):
            owner = item._owner
            if owner._version != item._version or owner._writer:
                raise SavedTensorModifiedError(self.node.name, what, item._version, owner._version)
        return item


def needs_grad(item: object) -> bool:
    """Whether a rule must send a gradient to ``item``: an argument the op read as a view that
    requires grad (numbers, labels and views of constants get none)."""
    return isinstance(item, TensorView) and item._requires_grad


def grad_array(grad: Grad) -> np.ndarray:
    """A rule's gradient as an array of its shape (no copy; a broadcast view stays one)."""
    if isinstance(grad, Tensor):
        return grad._storage.reshape(grad.shape)
    grad._check_fresh()
    return numpy_view(grad._owner._storage, grad._layout)


def _seed(root: ViewMethods, gradient: object) -> np.ndarray:
    if gradient is None:
        if root.size != 1:
            raise GradientShapeError(root.shape)
        return np.ones(root.shape, dtype=root.dtype)
    if not isinstance(gradient, ViewMethods):
        raise TensorError(
            f"backward(gradient): the gradient must be a Tensor or TensorView of shape "
            f"{list(root.shape)}, got {type(gradient).__name__}"
        )
    if gradient.shape != root.shape:
        raise GradientShapeError(root.shape, gradient.shape)
    return np.array(gradient.to_numpy(), dtype=root.dtype)


def _topological(root: Tensor) -> list[Tensor]:
    """The owners that require grad reachable from ``root``, each after every owner that
    consumed it (reverse post-order of a depth-first walk, without recursion)."""
    order: list[Tensor] = []
    seen = {id(root)}
    stack: list[tuple[Tensor, int]] = [(root, 0)]
    while stack:
        tensor, next_edge = stack.pop()
        node = tensor._grad_fn
        edges = node.inputs if node is not None else ()
        if next_edge < len(edges):
            stack.append((tensor, next_edge + 1))
            owner = edges[next_edge]._owner
            if owner._requires_grad and id(owner) not in seen:
                seen.add(id(owner))
                stack.append((owner, 0))
        else:
            order.append(tensor)
    order.reverse()
    return order


def backward(root: ViewMethods, gradient: object = None) -> None:
    """``root.backward(gradient)``: see :meth:`~llmfs.tensor.view.ViewMethods.backward`
    and the module docstring (the walk, the invariants, the errors)."""
    if not root._requires_grad:
        raise NoGradientError(type(root).__name__, root.shape)
    seed = _seed(root, gradient)
    owner = root.owner
    # The gradient reaching each owner, storage-shaped, and whether the engine owns that array
    # (a whole owner's gradient may be the rule's own array, copied before anything is added).
    buffers: dict[int, list[Any]] = {}
    with no_grad():
        _add_gradient(buffers, seed, root.owner, root.layout)
        for tensor in _topological(owner):
            entry = buffers.pop(id(tensor), None)
            if entry is None:
                continue
            grad, owned = entry
            node = tensor._grad_fn
            if node is None:
                if tensor._requires_grad:  # (a leaf may have stopped requiring grad since)
                    _accumulate(tensor, grad, owned)
                continue
            if tensor._version != node.version:
                what = f"its own result (a tensor of shape {list(tensor.shape)})"
                raise SavedTensorModifiedError(node.name, what, node.version, tensor._version)
            context = Context(node, tensor)
            # (an op's result is a row-major owner: its gradient reads the buffer through the
            # same layout)
            result_grad = Tensor._adopt_layout(grad, tensor._layout)
            for view, input_grad in RULES[node.name](context, result_grad):
                target = view._owner
                if not target._requires_grad:
                    continue
                _add_gradient(buffers, grad_array(input_grad), target, view._layout)


def _add_gradient(
    buffers: dict[int, list[Any]], grad: np.ndarray, owner: Tensor, layout: Layout
) -> None:
    """Adds the gradient ``grad`` of a view of ``owner`` through ``layout`` into the owner's
    buffer by the one view rule (:func:`view_backward`). The first gradient of the whole owner
    in row-major order (the owner itself, any reshape of it) reads every cell once in storage
    order, so it *is* the buffer: it is kept as it is, not owned, and copied only when a second
    gradient arrives."""
    storage = owner._storage
    entry = buffers.get(id(owner))
    whole = layout.offset == 0 and layout.size == storage.size and layout.is_contiguous()
    if entry is None:
        if whole:
            flat = np.ascontiguousarray(grad, dtype=storage.dtype).reshape(-1)
            buffers[id(owner)] = [flat, False]
            return
        entry = buffers[id(owner)] = [None, True]
    elif not entry[1]:
        if whole:  # two whole gradients: their sum, in one pass, is the engine's own buffer
            entry[:] = [entry[0] + np.asarray(grad, dtype=storage.dtype).reshape(-1), True]
            return
        entry[:] = [entry[0].copy(), True]
    entry[0] = view_backward(grad, layout, storage.size, storage.dtype, into=entry[0])


def _accumulate(leaf: Tensor, grad: np.ndarray, owned: bool) -> None:
    """Adds ``grad`` (storage-shaped) into the leaf's ``.grad``, in place after the first."""
    if leaf._grad is None:
        leaf._grad = Tensor._adopt_layout(grad if owned else grad.copy(), leaf._layout)
        return
    with leaf._grad.mutate() as storage:
        storage._array()[...] += grad


# -- Rules: elementwise ----------------------------------------------------------------------------


def unbroadcast(grad: Grad, shape: Sequence[int]) -> Grad:
    """The gradient of an operand of ``shape`` that was broadcast to ``grad``'s shape: summed
    over the added leading axes and over the axes that were size 1 (NumPy's broadcasting
    rule, run backwards)."""
    shape = tuple(shape)
    if grad.shape == shape:
        return grad
    lead = len(grad.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + k for k, n in enumerate(shape) if n == 1 and grad.shape[lead + k] != 1
    )
    return ops.sum(grad, axis=axes, keepdims=True).reshape(shape)


def _operand(value: Any, like: Tensor) -> Any:
    """A number operand as a 0-d tensor of the gradient's dtype; a view as it is."""
    return Tensor.full([], value, like.dtype) if is_number(value) else value


def _binary_rule(
    local: Callable[[Context, Tensor, Any, Any], tuple[Grad | None, Grad | None]],
) -> Rule:
    """A rule for ``op(a, b)`` with broadcasting, from ``local(ctx, g, a, b)`` which returns the
    two gradients at the broadcast shape (or ``None`` for an operand that needs none)."""

    def rule(ctx: Context, g: Tensor) -> list[tuple[TensorView, Grad]]:
        a, b = ctx.arg(0), ctx.arg(1)
        grads = local(ctx, g, a if needs_grad(a) else None, b if needs_grad(b) else None)
        out = []
        for operand, grad in zip((a, b), grads):
            if grad is not None and needs_grad(operand):
                out.append((operand, unbroadcast(grad, operand.shape)))
        return out

    return rule


def _add(ctx: Context, g: Tensor, a: Any, b: Any) -> tuple[Grad | None, Grad | None]:
    return g, g


def _sub(ctx: Context, g: Tensor, a: Any, b: Any) -> tuple[Grad | None, Grad | None]:
    return g, (ops.neg(g) if b is not None else None)


def _mul(ctx: Context, g: Tensor, a: Any, b: Any) -> tuple[Grad | None, Grad | None]:
    x, y = ctx.arg(0), ctx.arg(1)
    ga = ops.mul(g, ctx.values(y, "its right operand")) if a is not None else None
    gb = ops.mul(g, ctx.values(x, "its left operand")) if b is not None else None
    return ga, gb


def _div(ctx: Context, g: Tensor, a: Any, b: Any) -> tuple[Grad | None, Grad | None]:
    y = ctx.values(ctx.arg(1), "its divisor")
    ga = ops.div(g, y) if a is not None else None
    # d(a/b)/db = -a/b**2 = -(a/b)/b: the result, divided once more.
    gb = ops.neg(ops.div(ops.mul(g, ctx.result), y)) if b is not None else None
    return ga, gb


def _power(ctx: Context, g: Tensor, a: Any, b: Any) -> tuple[Grad | None, Grad | None]:
    base = _operand(ctx.values(ctx.arg(0), "its base"), g)
    exponent = _operand(ctx.values(ctx.arg(1), "its exponent"), g)
    ga = gb = None
    if a is not None:
        ga = ops.mul(g, ops.mul(exponent, ops.power(base, ops.sub(exponent, 1.0))))
    if b is not None:
        # d(a**b)/db = a**b * log(a); PyTorch's convention: 0 where a == 0 and b >= 0 (the
        # limit from the right), instead of 0 * -inf.
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = ops.mul(ops.mul(g, ctx.result), ops.log(base))
        zero = ops.logical_and(ops.equal(base, 0.0), ops.greater_equal(exponent, 0.0))
        gb = ops.where(zero, 0.0, slope)
    return ga, gb


def _extreme(pick: str) -> Callable[[Context, Tensor, Any, Any], tuple[Grad | None, Grad | None]]:
    """``maximum``/``minimum``: the gradient goes to the operand that was picked, half to each
    where they tie (PyTorch's rule)."""

    def local(ctx: Context, g: Tensor, a: Any, b: Any) -> tuple[Grad | None, Grad | None]:
        x = _operand(ctx.values(ctx.arg(0), "its left operand"), g)
        y = _operand(ctx.values(ctx.arg(1), "its right operand"), g)
        wins = ops.greater(x, y) if pick == "max" else ops.less(x, y)
        loses = ops.less(x, y) if pick == "max" else ops.greater(x, y)
        share_a = ops.where(wins, 1.0, ops.where(loses, 0.0, 0.5))
        ga = ops.mul(g, ops.astype(share_a, g.dtype)) if a is not None else None
        gb = ops.mul(g, ops.sub(1.0, ops.astype(share_a, g.dtype))) if b is not None else None
        return ga, gb

    return local


def _unary_rule(local: Callable[[Context, Tensor, TensorView], Grad]) -> Rule:
    def rule(ctx: Context, g: Tensor) -> list[tuple[TensorView, Grad]]:
        x = ctx.arg(0)
        return [(x, local(ctx, g, x))] if needs_grad(x) else []

    return rule


def _input(ctx: Context, x: TensorView) -> TensorView:
    return ctx.values(x, "its operand")


def _mask(condition: Tensor, like: Tensor) -> Tensor:
    return ops.astype(condition, like.dtype)


UNARY: dict[str, Callable[[Context, Tensor, TensorView], Grad]] = {
    "neg": lambda ctx, g, x: ops.neg(g),
    "abs": lambda ctx, g, x: ops.mul(
        g,
        ops.sub(_mask(ops.greater(_input(ctx, x), 0), g), _mask(ops.less(_input(ctx, x), 0), g)),
    ),
    "sqrt": lambda ctx, g, x: ops.div(g, ops.mul(ctx.result, 2.0)),
    "exp": lambda ctx, g, x: ops.mul(g, ctx.result),
    "log": lambda ctx, g, x: ops.div(g, _input(ctx, x)),
    "sin": lambda ctx, g, x: ops.mul(g, ops.cos(_input(ctx, x))),
    "cos": lambda ctx, g, x: ops.neg(ops.mul(g, ops.sin(_input(ctx, x)))),
    "tanh": lambda ctx, g, x: ops.mul(g, ops.sub(1.0, ops.mul(ctx.result, ctx.result))),
    "sigmoid": lambda ctx, g, x: ops.mul(g, ops.mul(ctx.result, ops.sub(1.0, ctx.result))),
    "relu": lambda ctx, g, x: ops.mul(g, _mask(ops.greater(ctx.result, 0), g)),
    "reciprocal": lambda ctx, g, x: ops.neg(ops.mul(g, ops.mul(ctx.result, ctx.result))),
    "materialize": lambda ctx, g, x: g,
    "astype": lambda ctx, g, x: g,  # a float-to-float cast; the engine casts back
}


def _scale(ctx: Context, g: Tensor) -> list[tuple[TensorView, Grad]]:
    x, alpha = ctx.arg(0), ctx.arg(1, "alpha")
    return [(x, ops.mul(g, alpha))] if needs_grad(x) else []


def _not_differentiable(reason: str) -> Rule:
    def rule(ctx: Context, g: Tensor) -> list[tuple[TensorView, Grad]]:
        raise NotDifferentiableError(ctx.node.name, reason)

    return rule


# -- Rules: reductions, matmul, take, where --------------------------------------------------------


def _reduced_axes(ctx: Context, x: TensorView) -> tuple[int, ...]:
    axis = ctx.arg(1, "axis")
    if axis is None:
        return tuple(range(x.rank))
    return tuple(sorted(normalize_axes(axis, x.rank)))


def _kept(value: Tensor, x: TensorView, axes: Sequence[int]) -> Tensor | TensorView:
    """A reduction's result (or its gradient) with the reduced axes as size 1 (keepdims)."""
    shape = tuple(1 if a in axes else n for a, n in enumerate(x.shape))
    return value if value.shape == shape else value.reshape(shape)


def _reduction_backward(
    ctx: Context, op: str, x: TensorView, axes: Sequence[int], g: Grad, out: Grad
) -> Grad:
    """d(op over ``axes``)/dx given ``g`` and the result ``out``, both with keepdims shape."""
    if op == "sum":
        return g.expand(x.shape)
    if op == "mean":
        count = math.prod(x.shape[a] for a in axes)
        return ops.div(g, float(count)).expand(x.shape)
    if op in ("max", "min"):
        # PyTorch's amax/amin rule: the gradient is shared evenly by the values that tie.
        hits = _mask(ops.equal(ctx.values(x, "its operand"), out), ctx.result)
        share = ops.div(g, ops.sum(hits, axis=tuple(axes), keepdims=True))
        return ops.mul(hits, share)
    if op == "prod":
        others = _products_of_the_others(grad_array(ctx.values(x, "its operand")), axes)
        return ops.mul(g, Tensor._adopt(others.reshape(-1), x.shape))
    raise NotDifferentiableError(op, f"no gradient rule for the reduction {op!r}")


def _products_of_the_others(values: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    """d(prod over ``axes``)/dx: at every position, the product of the other values of its
    group (the values that were multiplied with it), as a new array of ``values``' shape.

    It is the product of the values before it times the product of the values after it (two
    exclusive running products), never ``prod / x``: so a group with one zero sends the product
    of the others to the zero's position and 0 elsewhere, and a group with two or more zeros
    sends 0 everywhere, as PyTorch's rule does."""
    if values.size == 0:
        return np.zeros(values.shape, dtype=values.dtype)
    count = len(axes)
    ends = tuple(range(values.ndim - count, values.ndim))
    moved = np.moveaxis(values, tuple(axes), ends)  # the reduced axes last, in order
    lead = moved.shape[: values.ndim - count]
    group = moved.reshape((*lead, -1))
    ones = np.ones((*lead, 1), dtype=values.dtype)
    before = np.cumprod(np.concatenate([ones, group[..., :-1]], axis=-1), axis=-1)
    after = np.cumprod(np.concatenate([ones, group[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    return np.moveaxis((before * after).reshape(moved.shape), ends, tuple(axes))


def _reduction_rule(op: str) -> Rule:
    def rule(ctx: Context, g: Tensor) -> list[tuple[TensorView, Grad]]:
        x = ctx.arg(0)
        if not needs_grad(x):
            return []
        axes = _reduced_axes(ctx, x)
        return [
            (
                x,
                _reduction_backward(
                    ctx, op, x, axes, _kept(g, x, axes), _kept(ctx.result, x, axes)
                ),
            )
        ]

    return rule


def _reduce(ctx: Context, g: Tensor) -> list[tuple[TensorView, Grad]]:
    """``reduce(x, modes_in, modes_out, op)``: the result's axes follow ``modes_out``; put
    them back in input order with size-1 reduced axes, then the reduction's rule."""
    x = ctx.arg(0)
    if not needs_grad(x):
        return []
    inputs, outputs = tuple(ctx.arg(1, "modes_in")), tuple(ctx.arg(2, "modes_out"))
    op = str(ctx.arg(3, "op", "sum")).lower()
    axes = tuple(k for k, label in enumerate(inputs) if label not in outputs)
    kept = [label for label in inputs if label in outputs]
    order = [outputs.index(label) for label in kept]

    def in_input_order(value: Tensor) -> TensorView:
        shape = tuple(1 if a in axes else n for a, n in enumerate(x.shape))
        return value.view().permute(order).reshape(shape)

    grad = _reduction_backward(ctx, op, x, axes, in_input_order(g), in_input_order(ctx.result))
    return [(x, grad)]


def _matmul(ctx: Context, g: Tensor) -> list[tuple[TensorView, Grad]]:
    """``a @ b``: ``dA = dY @ B^T`` and ``dB = A^T @ dY`` over the broadcast batch, summed back
    to each operand's batch shape; a 1-D operand is a row (left) or column (right) vector."""
    a, b = ctx.arg(0), ctx.arg(1)
    left = a.unsqueeze(0) if a.rank == 1 else a
    right = b.unsqueeze(1) if b.rank == 1 else b
    batch = tuple(g.shape[: len(g.shape) - (a.rank > 1) - (b.rank > 1)])
    g2 = g.reshape((*batch, left.shape[-2], right.shape[-1]))
    out: list[tuple[TensorView, Grad]] = []
    if needs_grad(a):
        r = right.rank
        values = ctx.values(right, "its right operand")
        ga = unbroadcast(ops.matmul(g2, values.transpose(r - 1, r - 2)), left.shape)
        out.append((a, ga.reshape(a.shape)))
    if needs_grad(b):
        values = ctx.values(left, "its left operand")
        gb: Grad | None = None
        if right.rank == 2 and len(batch) > 0 and values.size and g2.size:
            # A shared weight: one product over every batch row at once, when the rows merge.
            try:
                rows = values.expand((*batch, *left.shape[-2:])).reshape(-1, left.shape[-1])
                gb = ops.matmul(rows.T, g2.reshape(-1, g2.shape[-1]))
            except NonContiguousReshapeError:
                gb = None
        if gb is None:
            r = left.rank
            gb = unbroadcast(ops.matmul(values.transpose(r - 1, r - 2), g2), right.shape)
        out.append((b, gb.reshape(b.shape)))
    return out


def _take(ctx: Context, g: Tensor) -> list[tuple[TensorView, Grad]]:
    """An embedding lookup's gradient: each row of ``g`` is added into the table row its id
    chose; a repeated id collects the sum of its rows (the backend's ``index_add``, an
    unbuffered scatter-add)."""
    table, ids = ctx.arg(0), ctx.arg(1)
    if not needs_grad(table):
        return []
    axis = normalize_axes(ctx.arg(2, "axis", 0), table.rank)[0]
    chosen = ctx.values(ids, "its ids").to_numpy().reshape(-1)
    grad = np.zeros(table.shape, dtype=g.dtype)
    rows = grad_array(g).reshape((*table.shape[:axis], chosen.size, *table.shape[axis + 1 :]))
    get_backend().index_add(grad, axis, chosen.astype(np.int64, copy=False), rows)
    return [(table, Tensor._adopt(grad.reshape(-1), table.shape))]


def _where(ctx: Context, g: Tensor) -> list[tuple[TensorView, Grad]]:
    cond, a, b = ctx.arg(0), ctx.arg(1), ctx.arg(2)
    out: list[tuple[TensorView, Grad]] = []
    if needs_grad(a) or needs_grad(b):
        chosen = ctx.values(cond, "its condition")
        if needs_grad(a):
            out.append((a, unbroadcast(ops.where(chosen, g, 0.0), a.shape)))
        if needs_grad(b):
            out.append((b, unbroadcast(ops.where(chosen, 0.0, g), b.shape)))
    return out


#: Every recorded op's backward rule, by the name it was recorded under (:mod:`llmfs.tensor.tape`).
RULES: dict[str, Rule] = {
    **{name: _unary_rule(local) for name, local in UNARY.items()},
    "add": _binary_rule(_add),
    "sub": _binary_rule(_sub),
    "mul": _binary_rule(_mul),
    "div": _binary_rule(_div),
    "power": _binary_rule(_power),
    "maximum": _binary_rule(_extreme("max")),
    "minimum": _binary_rule(_extreme("min")),
    "scale": _scale,
    "floor_divide": _not_differentiable("its result is piecewise constant"),
    "remainder": _not_differentiable("its result jumps at every multiple of the divisor"),
    "prod": _reduction_rule("prod"),
    "sum": _reduction_rule("sum"),
    "mean": _reduction_rule("mean"),
    "max": _reduction_rule("max"),
    "min": _reduction_rule("min"),
    "reduce": _reduce,
    "matmul": _matmul,
    "take": _take,
    "where": _where,
}


def register_rule(name: str, rule: Rule) -> None:
    """Adds the backward rule of op ``name`` to :data:`RULES`, for an op defined in a layer
    above this module: the fused layers of :mod:`llmfs.tensor.functional` and einsum
    (:mod:`llmfs.tensor.einsum.gradient`) state their forward pass and its rule side by side,
    as PyTorch's ``autograd.Function`` does, and register the rule when they are imported
    (importing :mod:`llmfs.tensor` imports them, so no recorded op lacks its rule).

    Raises :class:`ValueError` when ``name`` is one of this module's own ops (their rules are
    stated here, once)."""
    if name in _OWN_RULES:
        raise ValueError(f"op {name!r} already has its backward rule in llmfs.tensor.autograd")
    RULES[name] = rule


#: The ops whose rules this module states itself.
_OWN_RULES = frozenset(RULES)


__all__ = [
    "RULES",
    "Context",
    "backward",
    "no_grad",
    "unbroadcast",
    "view_backward",
]

above.provide("autograd", sys.modules[__name__])
