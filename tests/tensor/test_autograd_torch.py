"""llmfs's gradients equal ``torch.autograd``'s in float64 (to 1e-9), where PyTorch is installed:
view chains (PyTorch reads the same cells by index, so its gradient is its own scatter-add),
elementwise ops with broadcasting, reductions with ties, products with zeros, matmul, einsum,
take with repeated ids and where, and views made under ``no_grad()`` (constants in both)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llmfs.tensor as lt
from llmfs.tensor import Tensor
from llmfs.tensor import functional as F
from tests.tensor.strategies import apply_llmfs, apply_numpy, llmfs_apply, view_chains

torch = pytest.importorskip("torch", reason="PyTorch is not installed: nothing to compare with")

TOL = 1e-9


def both(values: np.ndarray) -> tuple[Tensor, Any]:
    """The same float64 leaf in llmfs and in PyTorch."""
    return (
        Tensor.from_numpy(values, requires_grad=True),
        torch.tensor(values, dtype=torch.float64, requires_grad=True),
    )


def assert_same_grads(ours: list[Tensor], theirs: list[Any]) -> None:
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert a.grad is not None and b.grad is not None, k
        assert np.allclose(a.grad.to_numpy(), b.grad.numpy(), rtol=TOL, atol=TOL), k


def compare(
    ours: Callable[..., Any], theirs: Callable[..., Any], *arrays: np.ndarray, seed: int = 0
) -> None:
    """Backward of ``sum(f(inputs) * r)`` for one random ``r``, in both libraries."""
    pairs = [both(a) for a in arrays]
    y = ours(*(p[0] for p in pairs))
    r = np.random.default_rng(seed).standard_normal(y.shape)
    lt.sum(y * Tensor.from_numpy(r)).backward()
    (theirs(*(p[1] for p in pairs)) * torch.from_numpy(r)).sum().backward()
    assert_same_grads([p[0] for p in pairs], [p[1] for p in pairs])


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.5, 2.0, size=shape)


@settings(max_examples=80, deadline=None)
@given(view_chains(max_ops=6), st.integers(0, 2**16))
def test_view_chains(chain: tuple[Tensor, list], seed: int) -> None:
    tensor, ops = chain
    size = tensor.size
    cells = torch.from_numpy(apply_numpy(np.arange(size), tensor.shape, ops).copy())
    ours, theirs = both(tensor.to_numpy().astype(np.float64))
    view = apply_llmfs(ours, ops)
    r = np.random.default_rng(seed).standard_normal(view.shape)
    lt.sum(lt.exp(view * 0.1) * Tensor.from_numpy(r)).backward()
    (torch.exp(theirs.reshape(-1)[cells] * 0.1) * torch.from_numpy(r)).sum().backward()
    assert_same_grads([ours], [theirs])


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (lambda a, b: a + b * a - b / a, lambda a, b: a + b * a - b / a),
        (lambda a, b: lt.power(a, b), torch.pow),
        (lambda a, b: lt.maximum(a, b.expand([2, 3]) * 0 + 1.0), None),
        (lambda a, b: lt.minimum(a, b), torch.minimum),
        (lambda a, b: lt.where(a > 1.2, a, b), lambda a, b: torch.where(a > 1.2, a, b)),
        (
            lambda a, b: lt.tanh(a) * lt.sigmoid(b) + lt.sqrt(a) * lt.log(b),
            lambda a, b: torch.tanh(a) * torch.sigmoid(b) + torch.sqrt(a) * torch.log(b),
        ),
        (
            lambda a, b: lt.sin(a) * lt.cos(b) + lt.relu(a - 1.0) + lt.reciprocal(b) - lt.abs(a),
            lambda a, b: torch.sin(a) * torch.cos(b) + torch.relu(a - 1) + 1 / b - torch.abs(a),
        ),
    ],
)
def test_elementwise_ops_with_broadcasting(ours: Any, theirs: Any) -> None:
    if theirs is None:  # maximum against ones, where half the values tie at 1.0
        theirs = lambda a, b: torch.maximum(a, b.expand(2, 3) * 0 + 1.0)  # noqa: E731
    compare(ours, theirs, rand(2, 3, seed=1), rand(3, seed=2))


def test_maximum_with_ties() -> None:
    a = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    compare(lt.maximum, torch.maximum, a, np.array([2.0, 2.0, 2.0]))


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 1, (0, 2)])
def test_reductions_with_ties(axis: Any, keepdims: bool) -> None:
    x = np.round(rand(2, 3, 4, seed=3) * 2) / 2  # values in steps of 0.5: many ties
    dim = tuple(range(3)) if axis is None else axis
    compare(
        lambda t: (
            lt.max(t, axis=axis, keepdims=keepdims) + lt.mean(t, axis=axis, keepdims=keepdims)
        ),
        lambda t: torch.amax(t, dim=dim, keepdim=keepdims) + t.mean(dim=dim, keepdim=keepdims),
        x,
    )
    compare(
        lambda t: lt.min(t, axis=axis, keepdims=keepdims) * lt.sum(t, axis=axis, keepdims=keepdims),
        lambda t: torch.amin(t, dim=dim, keepdim=keepdims) * t.sum(dim=dim, keepdim=keepdims),
        x,
    )


@pytest.mark.parametrize(
    ("left", "right"), [((3,), (3, 4)), ((2, 3), (3,)), ((2, 1, 2, 3), (3, 3, 2)), ((2, 3), (3, 4))]
)
def test_matmul(left: tuple[int, ...], right: tuple[int, ...]) -> None:
    compare(lt.matmul, torch.matmul, rand(*left, seed=4), rand(*right, seed=5))


@pytest.mark.parametrize(
    ("expression", "shapes"),
    [
        ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
        ("ii->i", [(3, 3)]),
        ("ij,j->i", [(2, 3), (3,)]),
        ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)]),
        ("bhqd,bhkd->bhqk", [(1, 2, 3, 2), (1, 2, 3, 2)]),
    ],
)
def test_einsum(expression: str, shapes: list[tuple[int, ...]]) -> None:
    arrays = [rand(*shape, seed=k) for k, shape in enumerate(shapes)]
    compare(
        lambda *ts: lt.einsum(expression, *ts),
        lambda *ts: torch.einsum(expression, *ts),
        *arrays,
    )


def test_take_with_repeated_ids() -> None:
    ids = np.array([[1, 1, 0], [3, 1, 1]])
    compare(
        lambda t: lt.take(t, Tensor.from_numpy(ids)),
        lambda t: t[torch.from_numpy(ids)],
        rand(4, 5, seed=6),
    )


@pytest.mark.parametrize("seed", range(3))
def test_fused_layers_equal_torch_nn_functional(seed: int) -> None:
    # llmfs.tensor.functional's single ops, value and gradient, against PyTorch's own fused ops.
    f = torch.nn.functional
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 2, size=(3, 4, 5))
    w, b = rand(5, seed=seed + 1), rand(5, seed=seed + 2)
    cases: list[tuple[Callable[..., Any], Callable[..., Any], tuple[np.ndarray, ...]]] = [
        (F.gelu, lambda t: f.gelu(t, approximate="tanh"), (x,)),
        (
            lambda x, w, b: F.layer_norm(x, (5,), w, b, 1e-5),
            lambda x, w, b: f.layer_norm(x, (5,), w, b, 1e-5),
            (x, w, b),
        ),
        (lambda x: F.layer_norm(x, (4, 5)), lambda t: f.layer_norm(t, (4, 5)), (x,)),
        (lambda x: F.softmax(x, 1), lambda t: torch.softmax(t, 1), (x,)),
        (lambda x: F.log_softmax(x, -1), lambda t: torch.log_softmax(t, -1), (x,)),
    ]
    for ours, theirs, arrays in cases:
        got = ours(*(Tensor.from_numpy(a) for a in arrays)).to_numpy()
        expected = theirs(*(torch.from_numpy(a) for a in arrays)).numpy()
        np.testing.assert_allclose(got, expected, rtol=TOL, atol=TOL)
        compare(ours, theirs, *arrays, seed=seed)


@settings(max_examples=60, deadline=None)
@given(view_chains(max_ops=6), st.integers(0, 2**16), st.integers(0, 6), st.booleans())
def test_views_made_under_no_grad_are_constants(
    chain: tuple[Tensor, list], seed: int, cut: int, computed: bool
) -> None:
    # The chain's first ``cut`` steps run with grad mode on, the rest (at least a view()) under
    # no_grad: that view is a constant in PyTorch, and must be one here, of a leaf or of a result.
    tensor, ops = chain
    cells = torch.from_numpy(apply_numpy(np.arange(tensor.size), tensor.shape, ops).copy())
    ours, theirs = both(tensor.to_numpy().astype(np.float64))
    source = lt.exp(ours * 0.5) if computed else ours
    their_source = torch.exp(theirs * 0.5) if computed else theirs
    head = source.view()
    for op in ops[:cut]:
        head = llmfs_apply(head, op)
    with lt.no_grad(), torch.no_grad():
        constant = head.view()
        for op in ops[cut:]:
            constant = llmfs_apply(constant, op)
        their_constant = their_source.reshape(-1)[cells]
    # PyTorch keeps requires_grad=True on a view made under no_grad (with no grad_fn: nothing
    # flows through it); llmfs says False. The gradients below are the rule, and they agree.
    assert not constant.requires_grad and their_constant.grad_fn is None
    live = apply_llmfs(ours, ops)
    r = np.random.default_rng(seed).standard_normal(live.shape)
    lt.sum(lt.exp(live * 0.1) * constant * Tensor.from_numpy(r)).backward()
    theirs_live = theirs.reshape(-1)[cells]
    (torch.exp(theirs_live * 0.1) * their_constant * torch.from_numpy(r)).sum().backward()
    if tensor.size == 0:
        return
    assert_same_grads([ours], [theirs])


def torch_prod(t: Any, axis: Any, keepdims: bool) -> Any:
    """torch.prod reduces one axis or all: several axes are reduced one after another."""
    if axis is None:
        out = torch.prod(t)
        return out.reshape((1,) * t.dim()) if keepdims else out
    for a in sorted(axis, reverse=True):
        t = torch.prod(t, dim=a, keepdim=keepdims)
    return t


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=3),
    st.integers(0, 2**16),
    st.sampled_from([0.0, 0.1, 0.3, 0.6]),
    st.booleans(),
    st.data(),
)
def test_prod_with_zeros(
    shape: list[int], seed: int, zeros: float, keepdims: bool, data: st.DataObject
) -> None:
    rng = np.random.default_rng(seed)
    values = rng.uniform(-2.0, 2.0, size=shape)
    values[rng.random(shape) < zeros] = 0.0  # no zero, one, or several in a group
    axis = data.draw(
        st.one_of(
            st.none(),
            st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True).map(tuple),
        )
    )
    compare(
        lambda t: lt.prod(t, axis=axis, keepdims=keepdims),
        lambda t: torch_prod(t, axis, keepdims),
        values,
        seed=seed,
    )
