"""Einsum's backward rule: the gradient of each operand is another einsum.

Einsum is recorded on the tape as one op (:func:`llmfs.tensor.einsum.functions.einsum`); its
rule is stated here, with the expression's syntax and label binding it reads
(:mod:`~llmfs.tensor.einsum.parse`, :mod:`~llmfs.tensor.einsum.labels`), and joins the other
rules through :func:`~llmfs.tensor.autograd.register_rule` when the einsum package is imported.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence

import numpy as np

from llmfs.tensor.autograd import Context, Grad, grad_array, needs_grad, register_rule
from llmfs.tensor.dtypes import is_number
from llmfs.tensor.einsum import functions
from llmfs.tensor.einsum.labels import bind
from llmfs.tensor.einsum.parse import parse_expression
from llmfs.tensor.layout import Layout
from llmfs.tensor.strided import writable_view
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import TensorView


def einsum_backward(ctx: Context, g: Tensor) -> list[tuple[TensorView, Grad]]:
    """Each operand's gradient is an einsum of the result's gradient with the other operands,
    producing that operand's labels: a label the operand alone has (summed away in the forward
    pass, or broadcast from size 1) comes out of the einsum summed and is expanded back; a label
    repeated in its term (a diagonal) is written onto that diagonal of a zero gradient."""
    expression = ctx.arg(0)
    operands = ctx.node.args[1:]
    if len(operands) == 1 and isinstance(operands[0], tuple):
        operands = operands[0]
    shapes = tuple(() if is_number(v) else tuple(v.shape) for v in operands)
    binding = bind(parse_expression(expression), shapes)
    names: dict[str, str] = {}
    for key in (*binding.output, *(k for keys in binding.keys for k in keys)):
        names.setdefault(key, string.ascii_letters[len(names)])

    def term(keys: Sequence[str]) -> str:
        return "".join(names[k] for k in keys)

    out: list[tuple[TensorView, Grad]] = []
    for i, operand in enumerate(operands):
        if not needs_grad(operand):
            continue
        keys = binding.keys[i]
        sizes = dict(zip(keys, operand.shape))
        unique = list(dict.fromkeys(keys))
        elsewhere = set(binding.output).union(
            *(binding.keys[j] for j in range(len(operands)) if j != i)
        )
        made = [
            k for k in unique if k in elsewhere and not (sizes[k] == 1 and binding.extents[k] > 1)
        ]
        others = [ctx.values(v, f"its operand {j}") for j, v in enumerate(operands) if j != i]
        other_terms = [term(binding.keys[j]) for j in range(len(operands)) if j != i]
        spec = ",".join([term(binding.output), *other_terms]) + "->" + term(made)
        grad: Grad = functions.einsum(spec, g, *others)
        # A made label may come out of size 1 (its only other operand broadcast it): it
        # expands back to the operand's size, as the missing labels do.
        produced = dict(zip(made, grad.shape))
        grad = grad.reshape([produced.get(k, 1) for k in unique])
        grad = grad.expand([sizes[k] for k in unique])
        if len(unique) != len(keys):
            grad = _onto_diagonal(grad, operand.shape, keys, unique, operand.dtype)
        out.append((operand, grad))
    return out


def _onto_diagonal(
    grad: Grad, shape: Sequence[int], keys: Sequence[str], unique: Sequence[str], dtype: np.dtype
) -> Tensor:
    """A zero gradient of ``shape`` with ``grad`` written on the diagonal that the repeated keys
    read: the diagonal is a view (its strides sum the repeated axes' strides), so this is the
    view rule again, with one cell per coordinate."""
    # ``unique`` lists the keys in order of first appearance, the order in which Layout.diagonal
    # keeps each group of repeated axes (where its first axis was): the gradient's axes.
    groups = [[axis for axis, key in enumerate(keys) if key == k] for k in unique]
    layout = Layout.row_major(tuple(shape)).diagonal(groups)
    buffer = np.zeros(math.prod(shape), dtype=dtype)
    if layout.size:
        writable_view(buffer, layout)[...] = grad_array(grad)
    return Tensor._adopt(buffer, tuple(shape))


register_rule("einsum", einsum_backward)

__all__ = ["einsum_backward"]
