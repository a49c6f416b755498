"""The autograd surface of the tensor types: ``requires_grad``, ``backward``, ``detach``, ``grad``.

The tensor types read storage through a layout (:mod:`llmfs.tensor.view`,
:mod:`llmfs.tensor.tensor`); what autograd adds to them is gathered here, as mixins that hold
no state of their own:

* :class:`GradMethods` (inherited by ``ViewMethods``, so by ``Tensor`` and ``TensorView``):
  the ``requires_grad`` flag, :meth:`~GradMethods.requires_grad_`,
  :meth:`~GradMethods.backward` and :meth:`~GradMethods.detach`;
* :class:`LeafGrad` (inherited by ``Tensor``): a leaf's accumulated ``grad``, the ``grad_fn``
  of an op's result, ``is_leaf``;
* :class:`ViewGrad` (inherited by ``TensorView``): a view's ``grad`` and ``grad_fn`` (always
  ``None``: its gradient lands in its owner's ``.grad``) and ``is_leaf``.

The state lives in slots of the concrete classes (``_requires_grad`` on both, ``_grad`` and
``_grad_fn`` on ``Tensor``), so the recording decorator (:func:`llmfs.tensor.tape.differentiable`)
pays one slot read per argument. The engine that walks the tape is :mod:`llmfs.tensor.autograd`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, TypeVar, cast

import numpy as np

from llmfs.tensor import above
from llmfs.tensor.dtypes import FLOAT_DTYPES
from llmfs.tensor.errors import DTypeError, TensorError

if TYPE_CHECKING:
    from llmfs.tensor.layout import Layout, Shape
    from llmfs.tensor.tape import Node
    from llmfs.tensor.tensor import Tensor
    from llmfs.tensor.view import TensorView, ViewMethods

_G = TypeVar("_G", bound="GradMethods")
_L = TypeVar("_L", bound="LeafGrad")


class GradMethods:
    """The autograd methods every tensor type has (``ViewMethods`` inherits them).

    Reads the ``_requires_grad`` slot, which each concrete class declares: a view copies it from
    what it is derived from, when it is made with grad mode on (see :mod:`llmfs.tensor.tape`).
    """

    __slots__ = ()

    _requires_grad: bool

    if TYPE_CHECKING:  # what ViewMethods provides (declared for the type checker only)
        _owns_storage: ClassVar[bool]

        @property
        def dtype(self) -> np.dtype: ...
        @property
        def owner(self) -> Tensor: ...
        @property
        def layout(self) -> Layout: ...
        def _check_fresh(self) -> None: ...
        def _derive(self, layout: Layout) -> TensorView: ...

    @property
    def requires_grad(self) -> bool:
        """Whether ops on this are recorded for :meth:`backward` (PyTorch's name). A view has
        the flag of what it was derived from, at the time it was made (``False`` when it was
        made inside ``no_grad()``: a constant, as in PyTorch). Setting it is
        ``requires_grad_(value)``."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self: _G, requires_grad: bool = True) -> _G:
        """A ``Tensor``: makes it a leaf whose ops are recorded (``True``) or not (``False``), in
        place, and returns it, as PyTorch's ``requires_grad_``; views made before keep what they
        had (a view copies the flag when it is made). A view: its flag is its owner's, copied
        when it was made, so this returns the view when the flag already is ``requires_grad``.

        Raises :class:`DTypeError` naming the dtype for an integer or bool tensor (only floats
        have gradients), and :class:`TensorError` for a flag that is not a bool, for turning it
        off on an op's result (use :meth:`detach`), or for changing a view's flag.
        """
        if not isinstance(requires_grad, (bool, np.bool_)):
            raise TensorError(
                f"requires_grad must be True or False, got {type(requires_grad).__name__} "
                f"{requires_grad!r}"
            )
        wanted = bool(requires_grad)
        if not self._owns_storage:
            if wanted != self._requires_grad:
                raise TensorError(
                    f"requires_grad_({wanted}) on a view: a view takes its flag from what it was "
                    "derived from; set it on the owner (v.owner.requires_grad_()) and make the "
                    "view again, or use v.detach() for a view that does not require grad"
                )
            return self
        if wanted and self.dtype.kind != "f":
            raise DTypeError(
                self.dtype.name,
                FLOAT_DTYPES,
                "requires_grad (only float tensors have gradients: cast first, e.g. "
                "t.astype('float64').requires_grad_())",
            )
        if not wanted and self.owner._grad_fn is not None:
            raise TensorError(
                "requires_grad_(False) on the result of a recorded op: only a leaf can stop "
                "requiring grad; use t.detach() for a view of it that does not"
            )
        self._requires_grad = wanted
        return self

    def backward(self, gradient: object = None) -> None:
        """Computes the gradient of this result with respect to every leaf it was computed from
        and adds it to each leaf's ``.grad`` (PyTorch's ``backward``); gradients through views
        land in the owner's ``.grad``. ``gradient`` is d(loss)/d(this), of this shape; without
        it this must hold one value (the gradient is 1).

        Raises :class:`~llmfs.tensor.errors.NoGradientError` when this does not require grad,
        :class:`~llmfs.tensor.errors.GradientShapeError` for a missing gradient of a result of
        several values or a gradient of another shape, and
        :class:`~llmfs.tensor.errors.SavedTensorModifiedError` when a tensor an op saved was
        written after the op ran. See :mod:`llmfs.tensor.autograd`.
        """
        # The engine runs the ops' backward rules, built on top of the views: above.autograd.
        above.autograd.backward(cast("ViewMethods", self), gradient)

    def detach(self) -> TensorView:
        """A view of the same storage and layout that does not require grad (PyTorch's
        ``detach``): ops on it are not recorded and no gradient flows back through it. It is a
        view (an owner's storage has one owner), so a write to the owner makes it stale."""
        self._check_fresh()
        view = self._derive(self.layout)
        view._requires_grad = False
        return view


class LeafGrad:
    """What a ``Tensor`` (an owner: a leaf, or an op's result) adds: its ``grad``, ``grad_fn``
    and ``is_leaf``, read from the ``_grad`` and ``_grad_fn`` slots ``Tensor`` declares."""

    __slots__ = ()

    _grad: Tensor | None
    _grad_fn: Node | None

    if TYPE_CHECKING:  # what Tensor provides (declared for the type checker only)

        @property
        def shape(self) -> Shape: ...
        @property
        def dtype(self) -> np.dtype: ...
        def requires_grad_(self: _L, requires_grad: bool = True) -> _L: ...

    def _leaf(self: _L, requires_grad: bool) -> _L:
        """This new tensor, made a leaf that requires grad when asked (constructors end here)."""
        if requires_grad is not False:
            self.requires_grad_(requires_grad)
        return self

    @property
    def grad(self) -> Tensor | None:
        """A leaf's gradient, accumulated (added to) by every ``backward()`` that reaches it:
        a tensor of this shape and dtype, or ``None`` before the first (and after
        ``t.grad = None``). Gradients through views of this tensor land here too. A result of
        an op keeps no gradient (``None``), as in PyTorch."""
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        # Only a Tensor is a LeafGrad: the check needs no import of the tensor module above.
        if value is not None and not (
            isinstance(value, LeafGrad) and value.shape == self.shape and value.dtype == self.dtype
        ):
            shape = getattr(value, "shape", None)
            raise TensorError(
                f"t.grad must be None or a Tensor of shape {list(self.shape)} and dtype "
                f"{self.dtype.name}, got {type(value).__name__}"
                + (f" of shape {list(shape)}" if shape is not None else "")
            )
        cast("Tensor", self)._grad = value  # the slot is Tensor's (a mixin declares none)

    @property
    def grad_fn(self) -> Node | None:
        """The recorded op that computed this tensor (``None`` for a leaf)."""
        return self._grad_fn

    @property
    def is_leaf(self) -> bool:
        """True unless this tensor is the result of a recorded op (PyTorch's rule: every
        tensor that does not require grad is a leaf too)."""
        return self._grad_fn is None


class ViewGrad:
    """What a ``TensorView`` has in place of a leaf's gradient: nothing of its own."""

    __slots__ = ()

    _requires_grad: bool

    @property
    def grad(self) -> None:
        """Always ``None``: a view is not a leaf; the gradient of what it reads lands in its
        owner's ``.grad`` (``v.owner.grad``)."""
        return None

    @property
    def grad_fn(self) -> None:
        """Always ``None``: a view records no op; its layout is the record, and its backward is
        the one view rule (:func:`llmfs.tensor.autograd.view_backward`)."""
        return None

    @property
    def is_leaf(self) -> bool:
        """True only when the view does not require grad (PyTorch's convention); a view that
        requires grad passes its gradient on to its owner."""
        return not self._requires_grad
