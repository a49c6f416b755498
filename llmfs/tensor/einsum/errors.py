"""The errors of einsum's plans and descriptors, declared as every llmfs error is
(:mod:`llmfs.tensor.error_base`). An expression that does not fit its operands is an
:class:`~llmfs.tensor.errors.EinsumError`, declared with the core's errors because ``ops.reduce``
(mode labels follow einsum's rules) raises its subclass :class:`~llmfs.tensor.errors.ReduceError`.
"""

from __future__ import annotations

from llmfs.tensor.error_base import TensorError


class DescriptorError(TensorError):
    """A :class:`~llmfs.tensor.einsum.TensorDescriptor` field (``"strides"``: exact integers, one
    per axis; ``"dtype"``: a supported dtype name) that is not what it must be."""

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


__all__ = [
    "DescriptorError",
    "OutputBufferError",
    "PlanMismatchError",
]
