"""The call :func:`einsum`: plan the expression for these operands (a cached
:class:`~llmfs.tensor.einsum.plan.EinsumPlan`) and execute it. One op on the tape; its rule is in
:mod:`llmfs.tensor.einsum.gradient`.
"""

from __future__ import annotations

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


__all__ = ["einsum"]
