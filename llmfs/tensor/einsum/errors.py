"""The errors of einsum (expressions, plans, descriptors) and of the mode-labelled ``reduce``,
declared as every llmfs error is (:mod:`llmfs.tensor.error_base`).
"""

from __future__ import annotations

from llmfs.tensor.error_base import TensorError, shown


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
    """A :func:`~llmfs.tensor.einsum.functions.reduce` call whose modes do not fit the operand,
    or whose op is unknown: an :class:`EinsumError` (mode labels follow einsum's rules) whose
    message names ``reduce`` and its modes as given; ``expression`` is
    ``"modes_in -> modes_out"``."""

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
    "EinsumError",
    "OutputBufferError",
    "PlanMismatchError",
    "ReduceError",
]
