"""The registry backends ``metal`` and ``metal-emulator``: thin adapters from the
:class:`~llmfs.tensor.backends.base.Backend` primitives to :mod:`~llmfs.tensor.backends.metal.ops`.

What runs on the kernels (both backends run the same kernels; :data:`KERNEL_OPS` lists them):

* ``copy`` (the strided copy), every ``unary`` op, every ``binary`` op (``scale`` reaches the
  backend as ``mul`` with a broadcast scalar), the reductions ``sum`` and ``max``, and
  ``matmul`` -- for float32 and float16 inputs whose result dtype equals the input dtype; and
  for int32 the copy, ``neg``/``abs`` and ``add``/``sub``/``mul``/``minimum``/``maximum``, for
  bool the copy (:func:`~llmfs.tensor.backends.metal.ops.kernel_dtypes`).

What runs on the numpy backend instead, explicitly (and is listed by :func:`numpy_fallbacks`):

* the reductions ``prod``, ``min`` and ``mean`` (declined in :meth:`supports`, so the dispatcher
  sends them to :attr:`fallback`);
* calls whose inputs mix float16 and float32, or whose requested result dtype differs from the
  input dtype (the kernels read and write one dtype; a second rounding would differ from numpy).

A matmul kernel of your own can serve the float32 matmuls of either backend for a ``with`` block:
``with backend.matmul_kernel(source, name, tile=8):`` (:meth:`_KernelBackend.matmul_kernel`, the
kernel's contract in :class:`~llmfs.tensor.backends.metal.ops.MatmulKernel`). Everything else
keeps running on the library's kernels.

float64 and int64 are refused, never converted: Metal has no 64-bit float and the kernels take
32-bit integers, so any primitive on them raises
:class:`~llmfs.tensor.backends.metal.errors.MetalDTypeError` saying to convert.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from llmfs.tensor.backends import get_backend
from llmfs.tensor.backends.base import BINARY_OPS, REDUCE_OPS, UNARY_OPS, Backend
from llmfs.tensor.backends.metal import device, emulator, ops, toolchain
from llmfs.tensor.backends.metal.errors import MetalDTypeError, MetalUnavailableError
from llmfs.tensor.dtypes import SUPPORTED_DTYPES
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


#: Refused by name rather than handed to numpy: Metal has no 64-bit float, and the kernels take
#: 32-bit integers (nothing is narrowed silently).
_REFUSED = ("float64", "int64")


def _strided(view: TensorView) -> ops.Strided:
    return ops.Strided(view.owner.as_slice(), view.layout)


class _KernelBackend(Backend):
    """The primitives on Metal kernels, through an executor set by the subclass."""

    #: The library's dtypes that have kernels (int32 and bool once the library has them).
    dtypes = tuple(d for d in ("float16", "float32", "int32", "bool") if d in SUPPORTED_DTYPES)
    fallback = "numpy"
    executor: ops.Executor
    #: The matmul kernel of your own set by :meth:`matmul_kernel` (per thread or task).
    _matmul_kernel: ContextVar[ops.MatmulKernel | None]

    @contextmanager
    def matmul_kernel(
        self, source: str, name: str, *, tile: int, sanitize: bool | None = None
    ) -> Iterator[ops.MatmulKernel]:
        """``with backend.matmul_kernel(source, name, tile=8):`` runs this backend's float32
        matmuls on kernel ``name`` of MSL ``source`` inside the block (in this thread or task
        only), then restores the library's kernel. The kernel's buffers, grid and threadgroup
        are those of :class:`~llmfs.tensor.backends.metal.ops.MatmulKernel`; float16 matmuls
        stay on the library's kernel. The source is compiled on entry, so a kernel that does not
        compile raises there (:class:`~llmfs.tensor.backends.metal.errors.KernelLintError` and
        the other kernel errors), and :class:`KernelArgumentError` for a bad ``tile``.
        """
        kernel = ops.MatmulKernel(source, name, tile, sanitize)
        self._compile(kernel)
        token = self._matmul_kernel.set(kernel)
        try:
            yield kernel
        finally:
            self._matmul_kernel.reset(token)

    def _compile(self, kernel: ops.MatmulKernel) -> None:
        raise NotImplementedError  # each backend compiles in its own way

    def supports(self, primitive: str, op: str | None, dtype: np.dtype) -> bool:
        """True for the kernel ops of :data:`KERNEL_OPS` on the dtypes they have kernels for,
        and for float64 and int64 (so that the refusal with its advice comes from here, never a
        silent numpy run)."""
        name = np.dtype(dtype).name
        if name in _REFUSED:
            return True
        if op not in KERNEL_OPS.get(primitive, ()):
            return False
        if primitive == "copy":
            return name in ops.COPY_DTYPES
        if primitive in ("unary", "binary") and op is not None:
            return name in ops.kernel_dtypes(op)
        return name in ops.FLOAT_DTYPES

    def _refuse(self, *dtypes: np.dtype) -> None:
        for dtype in dtypes:
            name = np.dtype(dtype).name
            if name in _REFUSED:
                raise MetalDTypeError(name, where=f"the {self.name} backend")

    @staticmethod
    def _numpy() -> Backend:
        return get_backend("numpy")

    def where(self, cond: TensorView, a: TensorView, b: TensorView, *, dtype: np.dtype) -> Tensor:
        """Reached only for a refused dtype (no kernel selects; the others run on numpy): the
        refusal, by name."""
        self._refuse(a.dtype, b.dtype, dtype)
        return self._numpy().where(cond, a, b, dtype=dtype)

    def take(self, x: TensorView, ids: TensorView, axis: int, *, dtype: np.dtype) -> Tensor:
        """Reached only for a refused dtype (no kernel gathers rows; the others run on numpy):
        the refusal, by name."""
        self._refuse(x.dtype, dtype)
        return self._numpy().take(x, ids, axis, dtype=dtype)

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
        """Batched ``a @ b`` on the matmul kernel (alpha 1, no C term), or, for float32 inside
        :meth:`matmul_kernel`, on the kernel set there."""
        self._refuse(a.dtype, b.dtype, dtype)
        if not (a.dtype == b.dtype == np.dtype(dtype)):
            return self._numpy().matmul(a, b, dtype=dtype, compute=compute)
        custom = self._matmul_kernel.get()
        if custom is not None and a.dtype == np.dtype(np.float32):
            values, shape = ops.kernel_matmul(self.executor, custom, _strided(a), _strided(b))
            return Tensor._adopt(values, shape)
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
        self._matmul_kernel = ContextVar(f"{self.name}-matmul-kernel", default=None)

    def _compile(self, kernel: ops.MatmulKernel) -> None:
        emulator.load_library(kernel.source).kernel(kernel.name)


class MetalBackend(_KernelBackend):
    """The Metal kernels on the GPU of a Mac (PyObjC; not run in CI, see the README)."""

    name = "metal"
    description = "Metal kernels on the Apple GPU through PyObjC (macOS only)"

    def __init__(self) -> None:
        reason = device.unavailable_reason()
        if reason is not None:
            raise BackendUnavailableError(self.name, (), reason)
        self.executor = device.default_device()
        self._matmul_kernel = ContextVar(f"{self.name}-matmul-kernel", default=None)

    def _compile(self, kernel: ops.MatmulKernel) -> None:
        device.default_device().pipeline(kernel.source, kernel.name)


__all__ = ["KERNEL_OPS", "MetalBackend", "MetalEmulatorBackend", "numpy_fallbacks"]
