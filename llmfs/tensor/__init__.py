"""``llmfs.tensor``: a compact tensor library built to be read.

* :class:`Tensor` owns contiguous row-major storage (a 1-D NumPy array).
* :class:`TensorView` reads that storage through a :class:`Layout` (shape, strides, offset)
  without copying; reshape, transpose, permute, slice, flip, merge, split and expand are views,
  on a ``Tensor`` as on a ``TensorView`` (one shared implementation).
* :func:`materialize` and :func:`copying_transpose` copy, explicitly.
* :mod:`llmfs.tensor.layout` holds the layout algebra (the :class:`Layout` value and its rules),
  :mod:`llmfs.tensor.checks` the input checks and 64-bit limits it stands on.
* Storage is bool, int32, int64, float16, float32 or float64 (:data:`SUPPORTED_DTYPES`); ops
  promote as NumPy 2 does (:mod:`llmfs.tensor.dtypes`).
* Reverse-mode autograd (:mod:`llmfs.tensor.autograd`): ``requires_grad=True``, ``y.backward()``,
  ``t.grad``, :class:`no_grad`, :func:`gradcheck`; the backward of every view is one rule over
  its layout.
* Every refusal is a :class:`TensorError` naming the violated condition.
"""

from __future__ import annotations

from llmfs.tensor import dispatch as _dispatch
from llmfs.tensor import errors
from llmfs.tensor.backends import (
    Backend,
    available_backends,
    get_backend,
    register_backend,
    set_default_backend,
    use_backend,
)
from llmfs.tensor.backends.metal import errors as _metal_errors
from llmfs.tensor.backends.threads import get_num_threads, set_num_threads
from llmfs.tensor.compare import allclose, array_equal, isclose
from llmfs.tensor.dtypes import FLOAT_DTYPES, INTEGER_DTYPES, SUPPORTED_DTYPES
from llmfs.tensor.einsum import ContractionPlan, EinsumPlan, TensorDescriptor, einsum
from llmfs.tensor.einsum import errors as _einsum_errors
from llmfs.tensor.errors import AutogradError, StaleViewError, TensorError, TensorViewError
from llmfs.tensor.finite_difference import gradcheck
from llmfs.tensor.layout import (
    Layout,
    broadcast_shapes,
    can_view_as_contiguous,
    can_view_as_contiguous_all,
    is_contiguous,
    row_major_strides,
    validate,
)
from llmfs.tensor.ops import (
    abs,
    add,
    all,
    any,
    astype,
    cos,
    div,
    equal,
    exp,
    floor_divide,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mul,
    neg,
    not_equal,
    power,
    prod,
    reciprocal,
    reduce,
    relu,
    remainder,
    scale,
    sigmoid,
    sin,
    sqrt,
    sub,
    sum,
    take,
    tanh,
    where,
)
from llmfs.tensor.tape import no_grad
from llmfs.tensor.tensor import MutableStorage, Tensor
from llmfs.tensor.view import TensorView, as_strided, copying_transpose, materialize
from llmfs.tensor.writes import copyto

# The speed code above the rules: the numpy backend's cached dispatch and the views' layout memo,
# put in front of the ops and the view methods through their hooks (the rules run unchanged
# without them; dispatch.uninstall() takes them away).
_dispatch.install()

__all__ = [
    "FLOAT_DTYPES",
    "INTEGER_DTYPES",
    "SUPPORTED_DTYPES",
    "AutogradError",
    "Backend",
    "ContractionPlan",
    "EinsumPlan",
    "Layout",
    "MutableStorage",
    "StaleViewError",
    "Tensor",
    "TensorDescriptor",
    "TensorError",
    "TensorView",
    "TensorViewError",
    "abs",
    "add",
    "all",
    "allclose",
    "any",
    "array_equal",
    "as_strided",
    "astype",
    "available_backends",
    "broadcast_shapes",
    "can_view_as_contiguous",
    "can_view_as_contiguous_all",
    "copying_transpose",
    "copyto",
    "cos",
    "div",
    "einsum",
    "equal",
    "errors",
    "exp",
    "floor_divide",
    "get_backend",
    "get_num_threads",
    "gradcheck",
    "greater",
    "greater_equal",
    "is_contiguous",
    "isclose",
    "less",
    "less_equal",
    "log",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "materialize",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mul",
    "neg",
    "no_grad",
    "not_equal",
    "power",
    "prod",
    "reciprocal",
    "reduce",
    "register_backend",
    "relu",
    "remainder",
    "row_major_strides",
    "scale",
    "set_default_backend",
    "set_num_threads",
    "sigmoid",
    "sin",
    "sqrt",
    "sub",
    "sum",
    "take",
    "tanh",
    "use_backend",
    "validate",
    "where",
]


def __getattr__(name: str) -> type[Exception]:
    """Every error class by its own name as well (``lt.OverlappingWriteError``), as learners'
    code and older notebooks name them: the library's errors live in :mod:`llmfs.tensor.errors`
    (``lt.errors.OverlappingWriteError``), einsum's and the Metal backend's beside them; this
    exports only their bases (:class:`TensorError`, :class:`TensorViewError`,
    :class:`AutogradError`) and :class:`StaleViewError`, the chapters' own."""
    for module in (errors, _einsum_errors, _metal_errors):
        found = getattr(module, name, None)
        if name in module.__all__ and isinstance(found, type) and issubclass(found, Exception):
            return found
    raise AttributeError(f"module 'llmfs.tensor' has no attribute {name!r}")
