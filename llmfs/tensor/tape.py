"""The tape: how an op's result remembers how it was computed, for :mod:`llmfs.tensor.autograd`.

This module is the small part of autograd that sits *below* the ops (the ops and
``materialize`` are decorated with :func:`differentiable`); the backward rules, the view rule
and the engine that walks the tape live above the ops, in :mod:`llmfs.tensor.autograd`.

What is recorded
----------------
* Every ``Tensor`` and ``TensorView`` carries one slot, ``_requires_grad``. A leaf sets it with
  ``requires_grad=True`` (or ``t.requires_grad_()``); a view copies it from what it was derived
  from when it is made, while grad mode is on (so a view made *before* ``requires_grad_()``,
  or inside ``no_grad()``, does not require grad: a constant, through which no gradient flows,
  as in PyTorch, which keeps the flag on such a view but gives it no ``grad_fn``); an op's
  result gets it when the op was recorded.
* A view op records nothing: a view's layout (shape, strides, offset over its owner's storage)
  *is* the record of every view op that made it, and its backward is one rule over that layout
  (:func:`llmfs.tensor.autograd.view_backward`).
* A decorated op whose tensor arguments include one that requires grad, while grad mode is on,
  runs with recording off (its inner ops record nothing) and hands its result a :class:`Node`:
  the rule's name, the arguments with every tensor saved as a view (a view remembers its
  owner's version, so a later write is detected) and the views that require grad (the edges).
  Everything else (no argument requires grad, or ``no_grad()``) pays one slot read per argument.
* Only float results are recorded: an integer or bool result has no gradient.
* A layer computed as one op (:mod:`llmfs.tensor.functional`) may keep intermediate results
  for its rule with :func:`save_for_backward` (the node's ``saved``), as PyTorch's fused ops
  keep a layer norm's mean and inverse deviation.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class _GradMode(threading.local):
    """Whether ops record, per thread (PyTorch's grad mode is thread-local too), and what the
    op being recorded keeps for its backward (:func:`save_for_backward`)."""

    enabled = True
    saving: tuple[str, list[Any]] | None = None


_MODE = _GradMode()


def is_grad_enabled() -> bool:
    """True when ops on tensors that require grad are recorded (not inside :class:`no_grad`)."""
    return _MODE.enabled


class no_grad:
    """``with no_grad():`` (or ``@no_grad()``): ops inside record nothing, so their results do
    not require grad, and views made inside do not require grad either: both are constants,
    through which no gradient flows later, as in PyTorch's ``torch.no_grad``. Thread-local;
    nests; restores the mode it found on exit, also when the block raises."""

    def __init__(self) -> None:
        self._before: list[bool] = []

    def __enter__(self) -> None:
        self._before.append(_MODE.enabled)
        _MODE.enabled = False

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        _MODE.enabled = self._before.pop()

    def __call__(self, function: F) -> F:
        @functools.wraps(function)
        def without_grad(*args: Any, **kwargs: Any) -> Any:
            with no_grad():
                return function(*args, **kwargs)

        return without_grad  # type: ignore[return-value]


class Node:
    """One recorded op: what its result's backward needs (the result's ``grad_fn``).

    ``name`` picks the backward rule; ``args``/``kwargs`` are the op's arguments with every
    tensor saved as a view (lists of tensors as tuples of views); ``inputs`` are the saved views
    that require grad, the edges of the graph; ``version`` is the result's version when it was
    made (a write to the result afterwards is refused at backward time); ``saved`` holds what
    the op's forward kept for its rule (:func:`save_for_backward`; empty for most ops).
    """

    __slots__ = ("args", "inputs", "kwargs", "name", "saved", "version")

    def __init__(
        self,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        inputs: tuple[Any, ...],
        version: int,
        saved: tuple[Any, ...] = (),
    ) -> None:
        self.name = name
        self.args = args
        self.kwargs = kwargs
        self.inputs = inputs
        self.version = version
        self.saved = saved

    def __repr__(self) -> str:
        return f"<{self.name} backward, {len(self.inputs)} input(s) that require grad>"


_SEQUENCES = (list, tuple)


def _requires(arg: object) -> bool:
    """True for a tensor that requires grad, or a list/tuple holding one (einsum's operands)."""
    if getattr(arg, "_requires_grad", False):
        return True
    if type(arg) in (list, tuple):
        return any(getattr(item, "_requires_grad", False) for item in arg)  # type: ignore[attr-defined]
    return False


def _saved(arg: Any) -> Any:
    """A tensor as a view of its whole self (a view carries its owner's version); a view as it
    is (an immutable value); a list or tuple item by item; anything else unchanged."""
    if hasattr(arg, "_owns_storage"):
        return arg.view() if arg._owns_storage else arg
    if type(arg) in (list, tuple):
        return tuple(_saved(item) for item in arg)
    return arg


def _flat(args: tuple[Any, ...]) -> list[Any]:
    out: list[Any] = []
    for arg in args:
        if type(arg) is tuple:
            out.extend(_flat(arg))
        elif hasattr(arg, "_owns_storage"):
            out.append(arg)
    return out


def save_for_backward(name: str, *values: Any) -> None:
    """Called by the forward pass of op ``name`` (PyTorch's ``ctx.save_for_backward``): keeps
    ``values`` (intermediate results the op computed, such as a layer norm's normalized input)
    in the op's :class:`Node` for its rule, so the rule need not compute them again. Does
    nothing unless op ``name`` itself is being recorded (a call with recording off, or an op
    run inside another op's forward, keeps nothing). The values are the op's own new tensors,
    which nothing else holds or writes."""
    saving = _MODE.saving
    if saving is not None and saving[0] == name:
        saving[1].extend(values)


def record(name: str, function: Callable[..., Any], args: tuple[Any, ...], kwargs: Any) -> Any:
    """Runs ``function(*args, **kwargs)`` with recording off and gives a float result a
    :class:`Node` named ``name`` (the rule :mod:`llmfs.tensor.autograd` runs backward), with
    what the function kept by :func:`save_for_backward`."""
    kept: list[Any] = []
    _MODE.enabled = False
    _MODE.saving = (name, kept)
    try:
        result = function(*args, **kwargs)
    finally:
        _MODE.enabled = True
        _MODE.saving = None
    if result.dtype.kind != "f":  # an integer or bool result has no gradient
        return result
    saved = tuple(_saved(arg) for arg in args)
    inputs = tuple(view for view in _flat(saved) if view._requires_grad)
    result._requires_grad = True
    result._grad_fn = Node(name, saved, dict(kwargs), inputs, result._version, tuple(kept))
    return result


def differentiable(name: str) -> Callable[[F], F]:
    """Decorates an op (or ``materialize``) so that it is recorded on the tape when an argument
    requires grad and grad mode is on; ``name`` is its backward rule in
    :mod:`llmfs.tensor.autograd`. Otherwise the op runs as it is, after one slot read per
    argument."""

    def decorate(function: F) -> F:
        signature = inspect.signature(function)

        @functools.wraps(function)
        def op(*args: Any, **kwargs: Any) -> Any:
            for arg in args:
                # Inlined (this runs on every op): a slot read, and a list only for einsum.
                if getattr(arg, "_requires_grad", False) or (
                    type(arg) in _SEQUENCES and _requires(arg)
                ):
                    if not _MODE.enabled:
                        break
                    if kwargs and any(hasattr(v, "_owns_storage") for v in kwargs.values()):
                        # A tensor passed by name (layer_norm(x, s, weight=w)): recorded by
                        # position, so the rule reads it and its gradient has an edge.
                        bound = signature.bind(*args, **kwargs)
                        return record(name, function, bound.args, bound.kwargs)
                    return record(name, function, args, kwargs)
            else:
                if kwargs and _MODE.enabled and any(_requires(v) for v in kwargs.values()):
                    # A tensor passed by name (matmul(a=x, b=y)): recorded by position, as the
                    # rules read it.
                    bound = signature.bind(*args, **kwargs)
                    return record(name, function, bound.args, bound.kwargs)
            return function(*args, **kwargs)

        return op  # type: ignore[return-value]

    return decorate


__all__ = ["Node", "differentiable", "is_grad_enabled", "no_grad", "record", "save_for_backward"]
