"""The two calls by labelled axes: :func:`einsum` and the mode-labelled :func:`reduce`.

Both name each operand's axes by labels (letters, or any labels for ``reduce``) and follow the
rules stated in :mod:`llmfs.tensor.einsum`; both are ops on the tape, ``einsum`` with its rule in
:mod:`llmfs.tensor.einsum.gradient`, ``reduce`` with the rule below (the reduction's own rule,
after putting the axes back in input order).
"""

from __future__ import annotations

from llmfs.tensor import ops
from llmfs.tensor.autograd import Context, Grad, needs_grad, reduction_backward, register_rule
from llmfs.tensor.einsum.errors import ReduceError
from llmfs.tensor.einsum.plan import plan_for
from llmfs.tensor.layout import element_count
from llmfs.tensor.strided import allocating
from llmfs.tensor.tape import differentiable
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import TensorView

Operand = Tensor | TensorView


@differentiable("einsum")
def einsum(expression: str, *operands: object, dtype: object | None = None) -> Tensor:
    """Einstein summation over labelled axes (the rules are stated in :mod:`llmfs.tensor.einsum`:
    shared labels need equal sizes or 1, ``...`` broadcasts right-aligned, a label repeated in
    one term takes a diagonal, labels missing from the output are summed).

    ``einsum("ik,kj->ij", a, b)`` is a matrix product; the operands may also be passed as one
    list (``einsum("ik,kj->ij", [a, b])``). Raises :class:`EinsumError` pointing at the offending
    label or operand.
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    plan = plan_for(expression, *operands, dtype=dtype)
    with allocating(element_count(plan.output_shape), plan.output_dtype):
        return plan.execute(*operands)


_REDUCTIONS = ("sum", "prod", "max", "min", "mean")


def _modes(modes: object, what: str, modes_in: object, modes_out: object) -> tuple[object, ...]:
    if isinstance(modes, (str, list, tuple)):
        return tuple(modes)
    raise ReduceError(
        modes_in,
        modes_out,
        f"{what} must be a string of letters or a list of labels, got {type(modes).__name__}",
    )


@differentiable("reduce")
def reduce(
    x: Operand,
    modes_in: object,
    modes_out: object,
    op: str = "sum",
    *,
    dtype: object | None = None,
) -> Tensor:
    """Reduction by mode labels: ``modes_in`` names each axis of ``x`` (a string such as
    ``"ijk"`` or a list of labels, e.g. ints); the labels absent from ``modes_out`` are reduced
    with ``op`` (``"sum"``, ``"prod"``, ``"max"``, ``"min"``, ``"mean"``, any case), and the output
    axes follow ``modes_out``'s order. ``reduce(a, [0, 1], [0], "sum")`` sums each row.

    Raises :class:`ReduceError` (an :class:`EinsumError`) when ``modes_in`` does not name every
    axis once, when an output label repeats or is not an input label, or for an unknown ``op``;
    the message shows both modes and, for an unknown op, the valid ones.
    """
    view = ops.as_view(x, what="reduce's operand")
    inputs = _modes(modes_in, "modes_in", modes_in, modes_out)
    outputs = _modes(modes_out, "modes_out", modes_in, modes_out)
    name = op.lower() if isinstance(op, str) else None
    if name not in _REDUCTIONS:
        raise ReduceError(
            modes_in,
            modes_out,
            f"unknown reduction {op!r}; the valid ops are {', '.join(_REDUCTIONS)} (any case)",
        )
    if len(inputs) != view.rank:
        raise ReduceError(
            modes_in,
            modes_out,
            f"modes_in names {len(inputs)} axes but the operand has rank {view.rank} "
            f"(shape {list(view.shape)})",
            operand=0,
        )
    for k, label in enumerate(inputs):
        if label in inputs[:k]:
            raise ReduceError(
                modes_in,
                modes_out,
                f"input mode {label!r} appears twice (each axis needs its own label)",
                label=str(label),
            )
    for k, label in enumerate(outputs):
        if label in outputs[:k]:
            raise ReduceError(
                modes_in, modes_out, f"output mode {label!r} appears twice", label=str(label)
            )
        if label not in inputs:
            raise ReduceError(
                modes_in,
                modes_out,
                f"output mode {label!r} is not one of the input modes {list(inputs)}",
                label=str(label),
            )
    reduced = [k for k, label in enumerate(inputs) if label not in outputs]
    result = getattr(ops, name)(view, tuple(reduced), keepdims=False, dtype=dtype)
    kept = [label for label in inputs if label in outputs]
    if kept == list(outputs):
        return result
    order = [kept.index(label) for label in outputs]
    moved = result.view().permute(order)
    return ops.backend_for("copy", None, result.dtype).copy(moved, dtype=result.dtype)


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

    grad = reduction_backward(ctx, op, x, axes, in_input_order(g), in_input_order(ctx.result))
    return [(x, grad)]


register_rule("reduce", _reduce)

__all__ = ["einsum", "reduce"]
