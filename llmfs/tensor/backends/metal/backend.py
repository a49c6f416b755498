"""The registry backends ``metal`` and ``metal-emulator``: thin adapters from the
:class:`~llmfs.tensor.backends.base.Backend` primitives to :mod:`~llmfs.tensor.backends.metal.ops`.

What runs on the kernels (both backends run the same kernels; :data:`KERNEL_OPS` lists them):

* ``copy`` (the strided copy), every ``unary`` op, every ``binary`` op (``scale`` reaches the
  backend as ``mul`` with a broadcast scalar), the reductions ``sum`` and ``max``, and
  ``matmul`` -- for float32 and float16 inputs whose result dtype equals the input dtype.

What runs on the numpy backend instead, explicitly (and is listed by :func:`numpy_fallbacks`):

* the reductions ``prod``, ``min`` and ``mean`` (declined in :meth:`supports`, so the dispatcher
  sends them to :attr:`fallback`);
* calls whose inputs mix float16 and float32, or whose requested result dtype differs from the
  input dtype (the kernels read and write one dtype; a second rounding would differ from numpy).

float64 is refused, never converted: Metal has no 64-bit float, so any primitive on float64
input raises :class:`~llmfs.tensor.backends.metal.errors.MetalDTypeError` saying to convert.
"""

from __future__ import annotations

import numpy as np

from llmfs.tensor.backends import get_backend
from llmfs.tensor.backends.base import BINARY_OPS, REDUCE_OPS, UNARY_OPS, Backend
from llmfs.tensor.backends.metal import device, ops, toolchain
from llmfs.tensor.backends.metal.errors import MetalDTypeError, MetalUnavailableError
from llmfs.tensor.errors import BackendUnavailableError
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import TensorView

#: Primitive -> the ops of it that run on Metal kernels (``None`` stands for "no op name").
KERNEL_OPS: dict[str, tuple[str | None, ...]] = {
    "copy": (None,),
    "unary": tuple(op for op in UNARY_OPS if op in ops.UNARY_OPS),
    "binary": tuple(op for op in BINARY_OPS if op in ops.BINARY_OPS),
    "reduce": ops.REDUCE_OPS,
    "matmul": (None,),
}


def numpy_fallbacks() -> dict[str, str]:
    """What the Metal backends hand to the numpy backend, each with the reason."""
    fallbacks = {
        f"reduce {op}": "no Metal kernel; runs on the numpy backend"
        for op in REDUCE_OPS
        if op not in ops.REDUCE_OPS
    }
    fallbacks["mixed float16/float32 inputs"] = "kernels read one dtype; runs on numpy"
    fallbacks["result dtype != input dtype"] = "kernels write the input dtype; runs on numpy"
    return fallbacks


def _strided(view: TensorView) -> ops.Strided:
    return ops.Strided(view.owner.as_slice(), view.layout)


class _KernelBackend(Backend):
    """The primitives on Metal kernels, through an executor set by the subclass."""

    dtypes = ("float16", "float32")
    fallback = "numpy"
    executor: ops.Executor

    def supports(self, primitive: str, op: str | None, dtype: np.dtype) -> bool:
        """True for the kernel ops of :data:`KERNEL_OPS` on float16/float32, and for float64
        (so that the refusal with its advice comes from here, never a silent numpy run)."""
        name = np.dtype(dtype).name
        if name == "float64":
            return True
        return name in self.dtypes and op in KERNEL_OPS.get(primitive, ())

    def _refuse(self, *dtypes: np.dtype) -> None:
        for dtype in dtypes:
            if np.dtype(dtype).name == "float64":
                raise MetalDTypeError("float64", where=f"the {self.name} backend")

    @staticmethod
    def _numpy() -> Backend:
        return get_backend("numpy")

    def unary(self, op: str, x: TensorView, *, dtype: np.dtype, compute: np.dtype) -> Tensor:
        """``op(x)`` on the ``unary`` kernel (numpy when the result dtype differs)."""
        self._refuse(x.dtype, dtype)
        if np.dtype(dtype) != x.dtype:
            return self._numpy().unary(op, x, dtype=dtype, compute=compute)
        return Tensor._adopt(ops.unary(self.executor, op, _strided(x)), x.shape)

    def binary(
        self, op: str, a: TensorView, b: TensorView, *, dtype: np.dtype, compute: np.dtype
    ) -> Tensor:
        """``op(a, b)`` on the ``binary`` kernel, reading broadcast inputs through zero strides."""
        self._refuse(a.dtype, b.dtype, dtype)
        if not (a.dtype == b.dtype == np.dtype(dtype)):
            return self._numpy().binary(op, a, b, dtype=dtype, compute=compute)
        values, shape = ops.binary(self.executor, op, _strided(a), _strided(b))
        return Tensor._adopt(values, shape)

    def reduce(
        self,
        op: str,
        x: TensorView,
        axes: tuple[int, ...],
        *,
        dtype: np.dtype,
        compute: np.dtype,
    ) -> Tensor:
        """``sum``/``max`` over ``axes`` on the reduction kernels; other ops on numpy."""
        self._refuse(x.dtype, dtype)
        if op not in ops.REDUCE_OPS or np.dtype(dtype) != x.dtype:
            return self._numpy().reduce(op, x, axes, dtype=dtype, compute=compute)
        values, shape = ops.reduce(self.executor, op, _strided(x), axes)
        return Tensor._adopt(values, shape)

    def matmul(self, a: TensorView, b: TensorView, *, dtype: np.dtype, compute: np.dtype) -> Tensor:
        """Batched ``a @ b`` on the matmul kernel (alpha 1, no C term)."""
        self._refuse(a.dtype, b.dtype, dtype)
        if not (a.dtype == b.dtype == np.dtype(dtype)):
            return self._numpy().matmul(a, b, dtype=dtype, compute=compute)
        values, shape = ops.matmul(self.executor, _strided(a), _strided(b))
        return Tensor._adopt(values, shape)

    def copy(self, x: TensorView, *, dtype: np.dtype) -> Tensor:
        """The strided-copy kernel (``materialize``); a dtype change goes through numpy."""
        self._refuse(x.dtype, dtype)
        if np.dtype(dtype) != x.dtype:
            return super().copy(x, dtype=dtype)
        return Tensor._adopt(ops.strided_copy(self.executor, _strided(x)), x.shape)


class MetalEmulatorBackend(_KernelBackend):
    """The Metal kernels run on the CPU by the emulator (needs a C++ compiler)."""

    name = "metal-emulator"
    description = "the Metal kernels compiled as C++ and run on the CPU (any OS with a compiler)"

    def __init__(self) -> None:
        try:
            toolchain.find_compiler()
        except MetalUnavailableError as error:
            raise BackendUnavailableError(self.name, (), str(error)) from None
        self.executor = ops.EmulatorExecutor()


class MetalBackend(_KernelBackend):
    """The Metal kernels on the GPU of a Mac (PyObjC; not run in CI, see the README)."""

    name = "metal"
    description = "Metal kernels on the Apple GPU through PyObjC (macOS only)"

    def __init__(self) -> None:
        reason = device.unavailable_reason()
        if reason is not None:
            raise BackendUnavailableError(self.name, (), reason)
        self.executor = device.default_device()


__all__ = ["KERNEL_OPS", "MetalBackend", "MetalEmulatorBackend", "numpy_fallbacks"]
