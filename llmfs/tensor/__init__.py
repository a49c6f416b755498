"""``llmfs.tensor``: a compact tensor library built to be read.

* :class:`Tensor` owns contiguous row-major storage (a 1-D NumPy array).
* :class:`TensorView` reads that storage through (shape, strides, base offset) without copying;
  reshape, transpose, permute, slice, flip, merge, split and expand are views.
* :func:`materialize` and :func:`copying_transpose` copy, explicitly.
* :mod:`llmfs.tensor.layout` holds all layout arithmetic as pure functions.
* Every refusal is a :class:`TensorError` naming the violated condition.
"""

from __future__ import annotations

from llmfs.tensor.dtypes import SUPPORTED_DTYPES
from llmfs.tensor.errors import (
    AxisOutOfRangeError,
    BroadcastError,
    ClosedMutationError,
    DTypeError,
    DuplicateAxisError,
    ElementCountMismatchError,
    IndexOutOfBoundsError,
    InvalidAxisRangeError,
    InvalidIndexError,
    InvalidLayoutError,
    InvalidShapeError,
    InvalidStepError,
    NonContiguousReshapeError,
    PermutationLengthMismatchError,
    RankMismatchError,
    ReshapeElementCountMismatchError,
    ShapeOverflowError,
    SliceEndOutOfBoundsError,
    SliceStartAfterEndError,
    SqueezeError,
    StaleViewError,
    TensorError,
    TensorViewError,
)
from llmfs.tensor.layout import (
    broadcast_shapes,
    can_view_as_contiguous,
    can_view_as_contiguous_all,
    is_contiguous,
    row_major_strides,
    validate,
)
from llmfs.tensor.tensor import MutableStorage, Tensor
from llmfs.tensor.view import TensorView, as_strided, copying_transpose, materialize

__all__ = [
    "SUPPORTED_DTYPES",
    "AxisOutOfRangeError",
    "BroadcastError",
    "ClosedMutationError",
    "DTypeError",
    "DuplicateAxisError",
    "ElementCountMismatchError",
    "IndexOutOfBoundsError",
    "InvalidAxisRangeError",
    "InvalidIndexError",
    "InvalidLayoutError",
    "InvalidShapeError",
    "InvalidStepError",
    "MutableStorage",
    "NonContiguousReshapeError",
    "PermutationLengthMismatchError",
    "RankMismatchError",
    "ReshapeElementCountMismatchError",
    "ShapeOverflowError",
    "SliceEndOutOfBoundsError",
    "SliceStartAfterEndError",
    "SqueezeError",
    "StaleViewError",
    "Tensor",
    "TensorError",
    "TensorView",
    "TensorViewError",
    "as_strided",
    "broadcast_shapes",
    "can_view_as_contiguous",
    "can_view_as_contiguous_all",
    "copying_transpose",
    "is_contiguous",
    "materialize",
    "row_major_strides",
    "validate",
]
