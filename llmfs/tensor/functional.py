"""Layers as single differentiable ops, named as PyTorch's ``torch.nn.functional``: ``gelu``,
``layer_norm``, ``softmax``, ``log_softmax``.

Each of them could be written with the elementwise ops and reductions of :mod:`llmfs.tensor.ops`
alone, and autograd would differentiate the composition: that is how a learner first writes
them (chapter 8's ``layer_norm`` is nine recorded ops). Here each one is ONE op on the tape, as
in PyTorch: its forward pass is that same composition of ops (so it runs on every backend, in
the operand's dtype), run with recording off, and its backward is one rule with the analytic
gradient, stated after the op and registered with :mod:`llmfs.tensor.autograd`
(:func:`~llmfs.tensor.autograd.register_rule`), instead of a walk through every intermediate
result.
The values are those of the composition written out; the gradients agree with autograd of the
composition to rounding (the tests hold them to finite differences and, where it is installed,
to PyTorch). When recorded, an op keeps the intermediate results its rule needs
(:func:`~llmfs.tensor.tape.save_for_backward`): ``gelu`` its ``x * x`` and tanh, ``layer_norm``
the normalized input and its deviation ``sqrt(var + eps)``; ``softmax`` and ``log_softmax``
need only their result.

Invariants: the result has the operand's shape and dtype (a Python number in the formulas is
weak, so float32 stays float32); a reduction axis is normalized once (:class:`AxisOutOfRangeError`
otherwise).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from llmfs.tensor import ops
from llmfs.tensor.autograd import Context, Grad, needs_grad, register_rule
from llmfs.tensor.errors import TensorError
from llmfs.tensor.layout import normalize_axes
from llmfs.tensor.tape import differentiable, save_for_backward
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import TensorView

Operand = Tensor | TensorView

#: sqrt(2 / pi), the constant of GELU's tanh form.
GELU_C = math.sqrt(2.0 / math.pi)
#: The cubic coefficient of GELU's tanh form.
GELU_CUBIC = 0.044715


@differentiable("gelu")
def gelu(x: Operand, approximate: str = "tanh") -> Tensor:
    """GELU in its tanh form (GPT-2's; PyTorch's ``gelu(x, approximate="tanh")``):
    ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))``, with ``x * x * x`` for the
    cube. Its gradient is ``0.5 (1 + t) + 0.5 x (1 - t**2) sqrt(2/pi) (1 + 3 * 0.044715 x**2)``
    with ``t`` that tanh.

    Raises :class:`TensorError` for any ``approximate`` but ``"tanh"``: the exact form
    (PyTorch's default, ``"none"``) needs ``erf``, which the library does not have.
    """
    if approximate != "tanh":
        raise TensorError(
            f"gelu(approximate={approximate!r}): only the tanh form is implemented "
            "(approximate='tanh'); the exact form needs erf, which llmfs does not have"
        )
    square = ops.mul(x, x)
    inner = ops.mul(GELU_C, ops.add(x, ops.mul(GELU_CUBIC, ops.mul(square, x))))
    t = ops.tanh(inner)
    save_for_backward("gelu", square, t)
    return ops.mul(ops.mul(0.5, x), ops.add(1.0, t))


def _gelu_backward(ctx: Context, g: Tensor) -> list[tuple[TensorView, Grad]]:
    """``d gelu(x)/dx = 0.5 (1 + t) + 0.5 x (1 - t**2) c (1 + 3 * 0.044715 x**2)`` with
    ``t = tanh(c (x + 0.044715 x**3))``: ``x**2`` and ``t`` are the forward's, kept in the
    node (``ctx.saved``)."""
    x = ctx.arg(0)
    if not needs_grad(x):
        return []
    v = ctx.values(x, "its input")
    x2, t = ctx.saved
    curve = ops.mul(ops.mul(ops.mul(0.5, v), ops.sub(1.0, ops.mul(t, t))), GELU_C)
    slope = ops.add(
        ops.mul(0.5, ops.add(1.0, t)), ops.mul(curve, ops.add(1.0, ops.mul(3 * GELU_CUBIC, x2)))
    )
    return [(x, ops.mul(g, slope))]


def normalized_axes(x: Operand, normalized_shape: Sequence[int]) -> tuple[int, ...]:
    """The trailing axes of ``x`` that ``normalized_shape`` names (PyTorch's rule: the last
    ``len(normalized_shape)`` sizes of ``x`` must equal it). Raises :class:`TensorError`
    naming both shapes otherwise, or for an empty ``normalized_shape``."""
    wanted = tuple(int(n) for n in normalized_shape)
    shape = tuple(x.shape)
    if not wanted or len(wanted) > len(shape) or shape[len(shape) - len(wanted) :] != wanted:
        raise TensorError(
            f"layer_norm: normalized_shape {list(wanted)} must be the last sizes of the input's "
            f"shape {list(shape)} (and not empty)"
        )
    return tuple(range(len(shape) - len(wanted), len(shape)))


@differentiable("layer_norm")
def layer_norm(
    x: Operand,
    normalized_shape: Sequence[int],
    weight: Operand | None = None,
    bias: Operand | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """LayerNorm over the trailing axes ``normalized_shape`` names, with the biased variance
    (PyTorch's ``layer_norm``): ``(x - mean) / sqrt(var + eps) * weight + bias``, in that order
    (:func:`llmfs.gpt.reference.layer_norm`'s); ``weight`` and ``bias`` (of
    ``normalized_shape``) are optional.

    Raises :class:`TensorError` when ``normalized_shape`` is not the end of ``x``'s shape,
    :class:`~llmfs.tensor.errors.BroadcastError` for a weight or bias of another shape, and
    :class:`~llmfs.tensor.errors.EmptyReductionError` for a normalized axis of size 0.
    """
    axes = normalized_axes(x, normalized_shape)
    for name, value in (("weight", weight), ("bias", bias)):
        if value is not None and tuple(value.shape) != tuple(x.shape[axes[0] :]):
            raise TensorError(
                f"layer_norm: {name} has shape {list(value.shape)}, the normalized shape is "
                f"{list(x.shape[axes[0] :])}"
            )
    mean = ops.mean(x, axis=axes, keepdims=True)
    centered = ops.sub(x, mean)
    var = ops.mean(ops.mul(centered, centered), axis=axes, keepdims=True)
    std = ops.sqrt(ops.add(var, float(eps)))
    out = ops.div(centered, std)
    save_for_backward("layer_norm", out, std)  # the normalized x and its deviation
    if weight is not None:
        out = ops.mul(out, weight)
    if bias is not None:
        out = ops.add(out, bias)
    return out


def _layer_norm_backward(ctx: Context, g: Tensor) -> list[tuple[TensorView, Grad]]:
    """With ``xhat = (x - mean) / std`` and ``std = sqrt(var + eps)`` over the normalized axes
    (the forward's, kept in the node): ``dbias = sum(g)`` and ``dweight = sum(g * xhat)`` over
    the leading axes, and ``dx = (1 / std) * (d - mean(d) - xhat * mean(d * xhat))`` with
    ``d = g * weight`` (the mean and the variance both depend on every normalized value)."""
    x, weight, bias = ctx.arg(0), ctx.arg(2, "weight"), ctx.arg(3, "bias")
    axes = normalized_axes(x, ctx.arg(1, "normalized_shape"))
    lead = tuple(range(axes[0]))
    xhat, std = ctx.saved
    out: list[tuple[TensorView, Grad]] = []
    if needs_grad(x):
        d = g if weight is None else ops.mul(g, ctx.values(weight, "its weight"))
        spread = ops.mul(xhat, ops.mean(ops.mul(d, xhat), axis=axes, keepdims=True))
        inner = ops.sub(ops.sub(d, ops.mean(d, axis=axes, keepdims=True)), spread)
        out.append((x, ops.mul(ops.div(1.0, std), inner)))
    if needs_grad(weight):
        out.append((weight, ops.sum(ops.mul(g, xhat), axis=lead)))
    if needs_grad(bias):
        out.append((bias, ops.sum(g, axis=lead)))
    return out


def _axis(x: Operand, axis: int) -> int:
    return normalize_axes(axis, len(x.shape))[0]


@differentiable("softmax")
def softmax(x: Operand, axis: int = -1) -> Tensor:
    """Softmax over ``axis`` (PyTorch's ``softmax``, with NumPy's ``axis`` for ``dim``), after
    subtracting the maximum, so ``exp`` never overflows and a ``-inf`` entry becomes exactly 0.
    Its gradient: ``y * (g - sum(g * y, axis))`` with ``y`` the result.

    Raises :class:`~llmfs.tensor.errors.AxisOutOfRangeError` for a bad axis and
    :class:`~llmfs.tensor.errors.EmptyReductionError` for an empty one.
    """
    axis = _axis(x, axis)
    e = ops.exp(ops.sub(x, ops.max(x, axis=axis, keepdims=True)))
    return ops.div(e, ops.sum(e, axis=axis, keepdims=True))


def _softmax_backward(ctx: Context, g: Tensor) -> list[tuple[TensorView, Grad]]:
    """``y * (g - sum(g * y, axis))`` with ``y`` the result: softmax's Jacobian is
    ``diag(y) - y y^T`` along ``axis``."""
    x, axis = ctx.arg(0), ctx.arg(1, "axis", -1)
    if not needs_grad(x):
        return []
    y = ctx.result
    return [(x, ops.mul(y, ops.sub(g, ops.sum(ops.mul(g, y), axis=axis, keepdims=True))))]


@differentiable("log_softmax")
def log_softmax(x: Operand, axis: int = -1) -> Tensor:
    """``log(softmax(x))`` over ``axis`` by the log-sum-exp trick (PyTorch's ``log_softmax``):
    ``z - m - log(sum(exp(z - m)))`` with ``m`` the maximum along ``axis``, so every ``exp`` is
    at most 1 and the largest term of the sum is exactly 1 (its log never sees 0). Its gradient:
    ``g - exp(y) * sum(g, axis)`` with ``y`` the result (the shift ``m`` cancels).

    Raises as :func:`softmax`.
    """
    axis = _axis(x, axis)
    shifted = ops.sub(x, ops.max(x, axis=axis, keepdims=True))
    return ops.sub(shifted, ops.log(ops.sum(ops.exp(shifted), axis=axis, keepdims=True)))


def _log_softmax_backward(ctx: Context, g: Tensor) -> list[tuple[TensorView, Grad]]:
    """``g - softmax(x) * sum(g, axis)``, with ``softmax(x) = exp(y)`` from the result ``y``."""
    x, axis = ctx.arg(0), ctx.arg(1, "axis", -1)
    if not needs_grad(x):
        return []
    probs = ops.exp(ctx.result)
    return [(x, ops.sub(g, ops.mul(probs, ops.sum(g, axis=axis, keepdims=True))))]


register_rule("gelu", _gelu_backward)
register_rule("layer_norm", _layer_norm_backward)
register_rule("softmax", _softmax_backward)
register_rule("log_softmax", _log_softmax_backward)

__all__ = ["GELU_C", "gelu", "layer_norm", "log_softmax", "normalized_axes", "softmax"]
