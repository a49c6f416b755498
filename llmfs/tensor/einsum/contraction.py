"""The contraction plan ``D = alpha * (A @ B) + beta * C``, validated once, run many times.

The product is an :class:`~llmfs.tensor.einsum.plan.EinsumPlan` (by default the batched matrix
product ``"...ik,...kj->...ij"``); ``C`` is optional and broadcasts to the product's shape (a
bias row, a full matrix). The arithmetic runs in float64 if any input is float64, else float32,
and D is rounded to its storage dtype once, at the end.
"""

from __future__ import annotations

import numpy as np

from llmfs.tensor import ops
from llmfs.tensor.einsum.descriptor import TensorDescriptor
from llmfs.tensor.einsum.errors import PlanMismatchError
from llmfs.tensor.einsum.output import check_output
from llmfs.tensor.einsum.plan import EinsumPlan
from llmfs.tensor.errors import TensorError
from llmfs.tensor.layout import broadcast_layout
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import TensorView


def _check_scalar(name: str, value: object) -> float:
    if isinstance(value, (bool, np.bool_)) or not ops.is_scalar(value):
        raise TensorError(
            f"{name} must be a real number (not a bool), got {type(value).__name__} {value!r}"
        )
    try:
        return float(value)  # type: ignore[arg-type]  # a real number, checked above
    except OverflowError:
        raise TensorError(
            f"{name} is too large for a float (its magnitude exceeds about 1.8e308)"
        ) from None


class ContractionPlan:
    """``D = alpha * (A @ B) + beta * C`` for fixed layouts of A, B and (optionally) C.

    ``a``, ``b`` and the optional ``c`` are :class:`TensorDescriptor` objects or operands whose
    layouts are used; ``expression`` labels the product (default: batched matrix product,
    ``"...ik,...kj->...ij"``); ``c`` must broadcast to the product's shape. The output dtype is the
    widest of the inputs unless ``dtype`` is given; arithmetic is float64 if any input is float64,
    else float32. Plans hold no buffers.

    Raises :class:`EinsumError` for a bad expression or mismatched A/B, :class:`BroadcastError`
    when C does not broadcast to the product.
    """

    def __init__(
        self,
        a: object,
        b: object,
        c: object | None = None,
        *,
        expression: str = "...ik,...kj->...ij",
        dtype: object | None = None,
    ) -> None:
        da, db = TensorDescriptor.of(a), TensorDescriptor.of(b)
        dc = None if c is None else TensorDescriptor.of(c)
        described = [d for d in (da, db, dc) if d is not None]
        if any(d.is_scalar for d in described):
            raise TensorError("a contraction plan takes tensors for A, B and C, not numbers")
        dtypes = [d.dtype for d in described if d.dtype is not None]
        compute = ops.compute_dtype(dtypes)
        self._product = EinsumPlan(expression, da, db, dtype=compute, compute=compute)
        self._c = dc
        self._compute = compute
        self._dtype = ops.output_dtype(dtypes, dtype)
        if dc is not None:
            broadcast_layout(dc.shape, dc.strides, self._product.output_shape)

    @property
    def output_shape(self) -> tuple[int, ...]:
        """Shape of D."""
        return self._product.output_shape

    @property
    def output_dtype(self) -> np.dtype:
        """Storage dtype of D."""
        return self._dtype

    @property
    def compute_dtype(self) -> np.dtype:
        """The arithmetic precision."""
        return self._compute

    def _c_view(self, c: object | None) -> TensorView | None:
        if self._c is None:
            if c is not None:
                raise PlanMismatchError("C", "presence", "no C", "a C operand")
            return None
        if c is None:
            raise PlanMismatchError("C", "presence", "a C operand", "none")
        view = ops.as_view(c, what="C")
        for field, planned, actual in (
            ("shape", self._c.shape, view.shape),
            ("strides", self._c.strides, view.strides),
            ("dtype", self._c.dtype, view.dtype),
        ):
            if planned != actual:
                raise PlanMismatchError("C", field, planned, actual)
        return view

    def execute(
        self,
        a: object,
        b: object,
        c: object | None = None,
        *,
        alpha: float = 1.0,
        beta: float = 1.0,
    ) -> Tensor:
        """D for these operands (which must match the planned layouts), as a new owning Tensor.

        Raises :class:`PlanMismatchError` when an operand differs from its descriptor or C is
        missing/unexpected.
        """
        c_view = self._c_view(c)
        alpha, beta = _check_scalar("alpha", alpha), _check_scalar("beta", beta)
        compute = self._compute
        product = self._product.execute(a, b)
        if alpha != 1:
            product = ops.mul(product, Tensor.full((), alpha, compute))
        if c_view is None:
            if product.dtype == self._dtype:
                return product
            # The one rounding to D's dtype, as an op: recorded when an operand requires grad.
            return ops.astype(product, self._dtype)
        scaled_c = c_view if beta == 1 else ops.mul(c_view, Tensor.full((), beta, compute))
        return ops.add(product, scaled_c, dtype=self._dtype)

    def execute_into(
        self,
        out: Tensor | TensorView,
        a: object,
        b: object,
        c: object | None = None,
        *,
        alpha: float = 1.0,
        beta: float = 1.0,
    ) -> Tensor | TensorView:
        """Computes D into ``out``: a Tensor, or a fresh view of one (any layout reaching each
        offset once), of the planned shape and dtype, not the owner of A, B or C. Views of the
        owner made before go stale. Returns ``out`` (a view given is made again at the new
        version).

        When ``out``'s dtype is the compute precision, A @ B is written straight into ``out``,
        then scaled by alpha and increased by beta * C in place (NumPy ufuncs on the output's
        memory; a temporary of C's own shape only when beta != 1). Otherwise the product is
        computed in the compute precision first and the last addition (or the rounding copy)
        writes into ``out``, so D is rounded once, as :meth:`execute` rounds it.

        Raises :class:`OutputBufferError` for a buffer of another shape or dtype, a broadcast
        view, or shared storage.
        """
        c_view = self._c_view(c)
        alpha, beta = _check_scalar("alpha", alpha), _check_scalar("beta", beta)
        views = self._product.check_operands((a, b))
        inputs = views + ([c_view] if c_view is not None else [])
        output = check_output(out, self.output_shape, self._dtype, inputs)
        compute = self._compute
        if self._dtype == compute:
            with output.target() as target, np.errstate(all="ignore"):
                self._product.run(views, target)
                if alpha != 1:
                    np.multiply(target, alpha, out=target, dtype=compute)
                if c_view is not None:
                    c_values = c_view.numpy_view()
                    if beta != 1:
                        c_values = np.multiply(c_values, beta, dtype=compute)
                    np.add(target, c_values, out=target, dtype=compute)
            return output.result()
        product = self._product.run(views, None)
        assert product is not None
        if alpha != 1:
            product = ops.mul(product, Tensor.full((), alpha, compute))
        with output.target() as target:
            if c_view is None:
                ops.backend_for("copy", None, compute).copy_into(product.view(), target)
            else:
                scaled_c = c_view if beta == 1 else ops.mul(c_view, Tensor.full((), beta, compute))
                left, right = ops.broadcast_operands(product, scaled_c, what="D")
                backend = ops.backend_for("binary", "add", compute)
                backend.binary_into("add", left, right, target, compute=compute)
        return output.result()


__all__ = ["ContractionPlan"]
