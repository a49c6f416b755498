"""What a plan knows about an operand: its layout and dtype, without its data.

A plan is made from descriptors and keeps no buffers, so it can be made before the data exists
and reused for any operands of the same layouts.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmfs.tensor import ops
from llmfs.tensor.dtypes import WEAK_SCALAR_TYPES, number_kind, resolve_dtype
from llmfs.tensor.einsum.errors import DescriptorError
from llmfs.tensor.errors import TensorError
from llmfs.tensor.layout import check_shape, row_major_strides


def _descriptor_strides(strides: object, rank: int) -> tuple[int, ...]:
    # operator.index, not int(): int() would truncate 1.7 to a stride of 1 and accept "3".
    if isinstance(strides, (str, bytes)):
        raise DescriptorError("strides", strides, "must be a sequence of integers")
    try:
        entries: tuple[Any, ...] = tuple(strides)  # type: ignore[arg-type]  # refused below
    except TypeError:
        raise DescriptorError("strides", strides, "must be a sequence of integers") from None
    steps: list[int] = []
    for axis, entry in enumerate(entries):
        if isinstance(entry, (bool, np.bool_)):
            raise DescriptorError(
                "strides", strides, f"entry {axis} must be an integer, not a bool ({entry!r})"
            )
        try:
            steps.append(operator.index(entry))
        except TypeError:
            raise DescriptorError(
                "strides",
                strides,
                f"entry {axis} must be an integer (a number of elements), not "
                f"{type(entry).__name__} {entry!r}",
            ) from None
    if len(steps) != rank:
        raise DescriptorError(
            "strides", strides, f"must have one entry per axis ({rank}), but has {len(steps)}"
        )
    return tuple(steps)


def _descriptor_dtype(dtype: object) -> np.dtype:
    try:
        return resolve_dtype(dtype, where="a TensorDescriptor's dtype")
    except TensorError:
        raise
    except (TypeError, ValueError):
        # NumPy refuses some spellings (a dict, a malformed string) with a ValueError of its own.
        raise DescriptorError(
            "dtype", dtype, "must name a supported dtype (float16, float32 or float64)"
        ) from None


def _number_kind(number: object) -> type | np.dtype:
    if isinstance(number, type) and number in WEAK_SCALAR_TYPES:
        return number
    try:
        kind = np.dtype(number)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        kind = None
    if kind is None or kind.kind not in "biuf":
        raise DescriptorError(
            "number", number, "must be bool, int, float or the dtype of a NumPy number"
        )
    return kind


@dataclass(frozen=True)
class TensorDescriptor:
    """An operand's layout without its data: shape, strides (in elements) and storage dtype.

    ``dtype=None`` describes a number operand (shape ``()``), and ``number`` its kind, which is
    all a plan needs to promote as NumPy 2 does (:func:`~llmfs.tensor.dtypes.number_kind`): the
    Python type ``bool``, ``int`` or ``float`` (weak; the default is ``float``) or the dtype of a
    NumPy scalar (strong). Tensor descriptors have ``number=None``.
    Build one from an operand with :meth:`of`, or explicitly (``strides=None`` is row-major).

    Raises :class:`InvalidShapeError` for a shape that is not a sequence of sizes ``>= 0``,
    :class:`DescriptorError` for strides that are not exact integers (one per axis: ``1.7`` is
    refused, never truncated) and :class:`DTypeError`/:class:`DescriptorError` for a dtype that is
    not float16, float32 or float64.
    """

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: np.dtype | None
    number: type | np.dtype | None

    def __init__(
        self,
        shape: Sequence[int],
        strides: Sequence[int] | None = None,
        dtype: object | None = "float32",
        number: object | None = None,
    ) -> None:
        dims = check_shape(shape)
        steps = (
            row_major_strides(dims) if strides is None else _descriptor_strides(strides, len(dims))
        )
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "strides", steps)
        object.__setattr__(self, "dtype", None if dtype is None else _descriptor_dtype(dtype))
        if dtype is not None and number is not None:
            raise DescriptorError("number", number, "is only for number operands (dtype=None)")
        kind = None if dtype is not None else _number_kind(float if number is None else number)
        object.__setattr__(self, "number", kind)

    @classmethod
    def of(cls, operand: object) -> TensorDescriptor:
        """The descriptor of a Tensor, TensorView, real number, or a descriptor itself."""
        if isinstance(operand, TensorDescriptor):
            return operand
        if ops.is_scalar(operand):
            return cls((), (), None, number=number_kind(operand))
        view = ops.as_view(operand, what="an einsum operand", numbers=True)
        return cls(view.shape, view.strides, view.dtype)

    @property
    def is_scalar(self) -> bool:
        """True for a number operand."""
        return self.dtype is None


__all__ = ["TensorDescriptor"]
