"""The fused layers of :mod:`llmfs.tensor.functional`: one recorded op each, with the values of
the composition of ops they stand for and an analytic gradient held to finite differences
(:func:`llmfs.tensor.gradcheck`) and to autograd of that composition."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llmfs.tensor as lt
from llmfs.tensor import Tensor
from llmfs.tensor import functional as F
from llmfs.tensor.errors import (
    AxisOutOfRangeError,
    SavedTensorModifiedError,
    TensorError,
)

C = math.sqrt(2.0 / math.pi)


# -- the compositions the fused ops stand for (autograd differentiates each op) -----------------


def gelu_ops(x: Any) -> Any:
    return 0.5 * x * (1.0 + lt.tanh(C * (x + 0.044715 * (x * x * x))))


def layer_norm_ops(x: Any, weight: Any, bias: Any, eps: float, axes: tuple[int, ...]) -> Any:
    m = lt.mean(x, axis=axes, keepdims=True)
    centered = x - m
    var = lt.mean(centered * centered, axis=axes, keepdims=True)
    out = centered / lt.sqrt(var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def softmax_ops(x: Any, axis: int) -> Any:
    e = lt.exp(x - lt.max(x.detach(), axis=axis, keepdims=True))
    return e / lt.sum(e, axis=axis, keepdims=True)


def log_softmax_ops(x: Any, axis: int) -> Any:
    shifted = x - lt.max(x.detach(), axis=axis, keepdims=True)
    return shifted - lt.log(lt.sum(lt.exp(shifted), axis=axis, keepdims=True))


def leaf(values: np.ndarray, dtype: str = "float64") -> Tensor:
    return Tensor.from_numpy(values, dtype=dtype, requires_grad=True)


def grads_of(fn: Callable[..., Any], arrays: list[np.ndarray | None], seed: int) -> list[Any]:
    """The gradients of ``sum(fn(*leaves) * r)`` for one random ``r`` (``None`` stays ``None``)."""
    leaves = [None if a is None else leaf(a) for a in arrays]
    y = fn(*leaves)
    r = np.random.default_rng(seed).standard_normal(y.shape)
    lt.sum(y * Tensor.from_numpy(r)).backward()
    return [None if t is None else t.grad.to_numpy() for t in leaves]  # type: ignore[union-attr]


shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple)


# -- values and gradients against the compositions ---------------------------------------------


@settings(max_examples=40, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**16), scale=st.sampled_from([0.1, 1.0, 4.0]))
def test_gelu_is_the_composition_in_value_and_gradient(
    shape: tuple[int, ...], seed: int, scale: float
) -> None:
    x = scale * np.random.default_rng(seed).standard_normal(shape)
    np.testing.assert_array_equal(
        F.gelu(Tensor.from_numpy(x)).to_numpy(), gelu_ops(Tensor.from_numpy(x)).to_numpy()
    )
    (ours,) = grads_of(F.gelu, [x], seed)
    (theirs,) = grads_of(gelu_ops, [x], seed)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-13)


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple),
    seed=st.integers(0, 2**16),
    trailing=st.integers(1, 2),
    affine=st.sampled_from(["both", "weight", "bias", "none"]),
)
def test_layer_norm_is_the_composition_in_value_and_gradient(
    shape: tuple[int, ...], seed: int, trailing: int, affine: str
) -> None:
    trailing = min(trailing, len(shape))
    normalized = shape[len(shape) - trailing :]
    axes = tuple(range(len(shape) - trailing, len(shape)))
    rng = np.random.default_rng(seed)
    x = rng.normal(rng.uniform(-2, 2), rng.uniform(0.5, 3), size=shape)
    weight = rng.normal(1, 0.5, normalized) if affine in ("both", "weight") else None
    bias = rng.normal(0, 0.5, normalized) if affine in ("both", "bias") else None

    def fused(x: Any, w: Any, b: Any) -> Any:
        return F.layer_norm(x, normalized, w, b, 1e-5)

    def composed(x: Any, w: Any, b: Any) -> Any:
        return layer_norm_ops(x, w, b, 1e-5, axes)

    arrays = [x, weight, bias]
    as_tensors = [None if a is None else Tensor.from_numpy(a) for a in arrays]
    np.testing.assert_allclose(
        fused(*as_tensors).to_numpy(), composed(*as_tensors).to_numpy(), rtol=0, atol=1e-14
    )
    for ours, theirs in zip(grads_of(fused, arrays, seed), grads_of(composed, arrays, seed)):
        assert (ours is None) == (theirs is None)
        if ours is not None:
            np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-11)


@settings(max_examples=40, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**16), data=st.data())
def test_softmax_and_log_softmax_are_the_compositions(
    shape: tuple[int, ...], seed: int, data: st.DataObject
) -> None:
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = 3.0 * np.random.default_rng(seed).standard_normal(shape)
    for fused, composed in ((F.softmax, softmax_ops), (F.log_softmax, log_softmax_ops)):
        np.testing.assert_allclose(
            fused(Tensor.from_numpy(x), axis).to_numpy(),
            composed(Tensor.from_numpy(x), axis).to_numpy(),
            rtol=1e-14,
            atol=1e-15,
        )
        (ours,) = grads_of(lambda t, f=fused: f(t, axis), [x], seed)
        (theirs,) = grads_of(lambda t, f=composed: f(t, axis), [x], seed)
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


# -- finite differences ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_every_fused_op_passes_gradcheck(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = leaf(rng.normal(0, 1.5, size=(2, 3, 4)))
    w, b = leaf(rng.normal(1, 0.5, size=4)), leaf(rng.normal(0, 0.5, size=4))
    w2 = leaf(rng.normal(1, 0.5, size=(3, 4)))
    assert lt.gradcheck(F.gelu, [x])
    assert lt.gradcheck(lambda x, w, b: F.layer_norm(x, (4,), w, b, 1e-5), [x, w, b])
    assert lt.gradcheck(lambda x, w: F.layer_norm(x, (3, 4), weight=w), [x, w2])
    assert lt.gradcheck(lambda x: F.softmax(x, 1), [x])
    assert lt.gradcheck(lambda x: F.log_softmax(x, -1), [x])


def test_fused_ops_through_views_pass_gradcheck() -> None:
    # A transposed, a sliced and a broadcast input: the gradient reaches the owner's cells
    # through the one view rule.
    rng = np.random.default_rng(5)
    x = leaf(rng.normal(0, 1, size=(4, 3)))
    row = leaf(rng.normal(0, 1, size=(1, 5)))
    assert lt.gradcheck(lambda x: F.gelu(x.T), [x])
    assert lt.gradcheck(lambda x: F.layer_norm(x.view().slice(0, 1, 4), (3,)), [x])
    assert lt.gradcheck(lambda r: F.softmax(r.view().expand((3, 5)) * 2.0, -1), [row])
    assert lt.gradcheck(lambda x: F.log_softmax(x.T, 0), [x])


def test_a_masked_softmax_gives_masked_entries_no_gradient() -> None:
    scores = leaf(np.random.default_rng(1).normal(size=(3, 3)))
    mask = Tensor.from_numpy(np.triu(np.full((3, 3), -np.inf), k=1))
    y = F.softmax(scores + mask, -1)
    assert np.all(y.to_numpy()[np.triu_indices(3, 1)] == 0.0)
    lt.sum(y * Tensor.from_numpy(np.arange(9.0).reshape(3, 3))).backward()
    assert scores.grad is not None
    grad = scores.grad.to_numpy()
    assert np.isfinite(grad).all() and np.all(grad[np.triu_indices(3, 1)] == 0.0)


# -- one node, dtypes, keywords, writes, errors ------------------------------------------------


def test_each_fused_op_is_one_node_of_its_name() -> None:
    x = leaf(np.ones((2, 3)))
    w, b = leaf(np.ones(3)), leaf(np.zeros(3))
    for name, y in (
        ("gelu", F.gelu(x)),
        ("layer_norm", F.layer_norm(x, [3], w, b)),
        ("softmax", F.softmax(x)),
        ("log_softmax", F.log_softmax(x)),
    ):
        assert y.grad_fn is not None and y.grad_fn.name == name
        assert {id(edge.owner) for edge in y.grad_fn.inputs} <= {id(x), id(w), id(b)}


def test_a_weight_passed_by_name_gets_its_gradient() -> None:
    x, w = leaf(np.random.default_rng(2).normal(size=(2, 3))), leaf(np.full(3, 2.0))
    b = leaf(np.zeros(3))
    lt.sum(F.layer_norm(x, (3,), weight=w, bias=b, eps=1e-5) ** 2.0).backward()
    assert w.grad is not None and b.grad is not None and x.grad is not None
    positional_w, positional_b = leaf(np.full(3, 2.0)), leaf(np.zeros(3))
    x2 = leaf(x.to_numpy())
    lt.sum(F.layer_norm(x2, (3,), positional_w, positional_b, 1e-5) ** 2.0).backward()
    assert positional_w.grad is not None
    np.testing.assert_array_equal(w.grad.to_numpy(), positional_w.grad.to_numpy())


@pytest.mark.parametrize("name", ["gelu", "layer_norm", "softmax", "log_softmax"])
def test_float32_stays_float32_in_value_and_gradient(name: str) -> None:
    x = leaf(np.random.default_rng(3).normal(size=(2, 5)), "float32")
    w, b = leaf(np.ones(5), "float32"), leaf(np.zeros(5), "float32")
    calls: dict[str, Callable[[], Any]] = {
        "gelu": lambda: F.gelu(x),
        "layer_norm": lambda: F.layer_norm(x, (5,), w, b),
        "softmax": lambda: F.softmax(x, 0),
        "log_softmax": lambda: F.log_softmax(x),
    }
    y = calls[name]()
    assert y.dtype == np.float32
    lt.sum(y * y).backward()
    for t in (x, w, b) if name == "layer_norm" else (x,):
        assert t.grad is not None and t.grad.dtype == np.float32


def test_a_write_to_the_saved_input_is_caught_at_backward() -> None:
    x = leaf(np.random.default_rng(4).normal(size=(2, 3)))
    y = F.gelu(x)
    with x.mutate() as storage:
        storage[0] = 5.0
    with pytest.raises(SavedTensorModifiedError, match="gelu"):
        lt.sum(y).backward()


def test_bad_arguments_are_named() -> None:
    x = Tensor.zeros((2, 3))
    with pytest.raises(TensorError, match="approximate='tanh'"):
        F.gelu(x, "none")
    with pytest.raises(TensorError, match=r"normalized_shape \[2\] must be the last sizes"):
        F.layer_norm(x, (2,))
    with pytest.raises(TensorError, match=r"weight has shape \[2\]"):
        F.layer_norm(x, (3,), Tensor.zeros((2,)))
    with pytest.raises(TensorError, match="not empty"):
        F.layer_norm(x, ())
    with pytest.raises(AxisOutOfRangeError):
        F.softmax(x, 2)
    with pytest.raises(AxisOutOfRangeError):
        F.log_softmax(x, -3)


def test_only_a_recorded_fused_op_keeps_its_intermediates() -> None:
    # save_for_backward keeps values in the node of the op being recorded, and nowhere else:
    # not without grad, not in the nodes of ordinary ops, not under no_grad().
    x = leaf(np.random.default_rng(6).normal(size=(2, 3)))
    y = F.gelu(x)
    assert y.grad_fn is not None and len(y.grad_fn.saved) == 2
    assert all(isinstance(t, Tensor) and t.shape == (2, 3) for t in y.grad_fn.saved)
    z = F.layer_norm(x, (3,))
    assert z.grad_fn is not None and [t.shape for t in z.grad_fn.saved] == [(2, 3), (2, 1)]
    assert (x * 2.0).grad_fn.saved == ()  # type: ignore[union-attr]
    assert F.gelu(Tensor.from_numpy(x.to_numpy())).grad_fn is None
    with lt.no_grad():
        assert F.gelu(x).grad_fn is None
    # The next recorded op starts with nothing kept.
    assert (lt.exp(x)).grad_fn.saved == ()  # type: ignore[union-attr]
