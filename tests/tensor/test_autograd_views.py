"""The backward of every view is one rule: the view's gradient is scatter-added into a zero
buffer of its owner's storage at the offsets the view reads (PyTorch's ``as_strided_backward``).

The expected gradients here never use llmfs's layouts: the same chain of view ops is replayed on
a NumPy array of storage *indices*, which says which cell each coordinate reads."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llmfs.tensor as lt
from llmfs.tensor import Layout, Tensor, TensorView, as_strided, use_backend
from llmfs.tensor.autograd import view_backward
from llmfs.tensor.backends.base import layout_offsets
from tests.tensor.strategies import apply_llmfs, apply_numpy, view_chains


def expected_owner_grad(shape: tuple[int, ...], ops: list, weights: np.ndarray) -> np.ndarray:
    """d(sum(weights * chain(x)))/dx from NumPy's views of an index array: each weight is added
    to the cell its coordinate reads."""
    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    cells = apply_numpy(np.arange(size), shape, ops)
    grad = np.zeros(size)
    np.add.at(grad, cells.reshape(-1), weights.reshape(-1))
    return grad.reshape(shape)


def weights_for(view: TensorView, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-3, 4, size=view.shape).astype(np.float64)


@settings(max_examples=150, deadline=None)
@given(view_chains(max_ops=6), st.integers(0, 2**16))
def test_any_chain_of_view_ops_sends_its_gradient_to_the_cells_it_read(
    chain: tuple[Tensor, list], seed: int
) -> None:
    tensor, ops = chain
    tensor.requires_grad_()
    view = apply_llmfs(tensor, ops)
    weights = weights_for(view, seed)
    view.backward(Tensor.from_numpy(weights))
    assert tensor.grad is not None and tensor.grad.shape == tensor.shape
    assert np.array_equal(tensor.grad.to_numpy(), expected_owner_grad(tensor.shape, ops, weights))


@settings(max_examples=60, deadline=None)
@given(view_chains(max_ops=5), st.integers(0, 2**16))
def test_a_chain_inside_a_computation_is_the_same_rule(
    chain: tuple[Tensor, list], seed: int
) -> None:
    tensor, ops = chain
    tensor.requires_grad_()
    view = apply_llmfs(tensor, ops)
    weights = weights_for(view, seed)
    lt.sum(lt.mul(view, Tensor.from_numpy(weights))).backward()
    assert np.array_equal(
        tensor.grad.to_numpy(),  # type: ignore[union-attr]
        expected_owner_grad(tensor.shape, ops, weights),
    )


@settings(max_examples=60, deadline=None)
@given(view_chains(max_ops=5), st.integers(0, 2**16))
def test_materialize_and_views_of_a_result_run_the_same_rule(
    chain: tuple[Tensor, list], seed: int
) -> None:
    tensor, ops = chain
    tensor.requires_grad_()
    result = tensor * 2.0  # a result (not a leaf): its views send gradients to it, then on
    view = apply_llmfs(result, ops).materialize()
    weights = weights_for(view, seed)
    view.backward(Tensor.from_numpy(weights))
    expected = 2.0 * expected_owner_grad(tensor.shape, ops, weights)
    assert np.array_equal(tensor.grad.to_numpy(), expected)  # type: ignore[union-attr]


def test_a_broadcasts_zero_stride_becomes_a_sum() -> None:
    x = Tensor.from_vec([3, 1], [1.0, 2.0, 3.0], requires_grad=True)
    x.expand([2, 3, 4]).backward(Tensor.full([2, 3, 4], 1.0))
    assert x.grad is not None and x.grad.tolist() == [[8.0], [8.0], [8.0]]


def test_a_slices_gradient_lands_in_the_cells_it_read_and_nowhere_else() -> None:
    x = Tensor.zeros([6], requires_grad=True)
    x.view().slice(0, 1, 6, 2).backward(Tensor.from_vec([3], [1.0, 2.0, 3.0]))
    assert x.grad is not None and x.grad.tolist() == [0.0, 1.0, 0.0, 2.0, 0.0, 3.0]


def test_two_views_of_one_storage_add() -> None:
    x = Tensor.from_vec([4], [1.0, 2.0, 3.0, 4.0], requires_grad=True)
    lt.sum(x[:3] * x[1:]).backward()  # x0*x1 + x1*x2 + x2*x3
    assert x.grad is not None and x.grad.tolist() == [2.0, 4.0, 6.0, 3.0]


def test_negative_strides_scalars_and_empty_views() -> None:
    x = Tensor.from_vec([3], [1.0, 2.0, 3.0], requires_grad=True)
    x.flip(0).backward(Tensor.from_vec([3], [10.0, 20.0, 30.0]))
    assert x.grad is not None and x.grad.tolist() == [30.0, 20.0, 10.0]
    s = Tensor.from_vec([], [5.0], requires_grad=True)
    s.unsqueeze(0).expand([3]).backward(Tensor.full([3], 2.0))
    assert s.grad is not None and s.grad.tolist() == 6.0
    e = Tensor.zeros([2, 0], requires_grad=True)
    lt.sum(e.T).backward()
    assert e.grad is not None and e.grad.shape == (2, 0)


def test_an_overlapping_explicit_layout_adds_every_read() -> None:
    owner = Tensor.from_vec([4], [1.0, 2.0, 3.0, 4.0], requires_grad=True)
    windows = as_strided(owner, [3, 2], [1, 1])  # rows (0,1), (1,2), (2,3)
    windows.backward(Tensor.full([3, 2], 1.0))
    assert owner.grad is not None and owner.grad.tolist() == [1.0, 2.0, 2.0, 1.0]


# -- the fast paths equal the plain rule -------------------------------------------------------


@st.composite
def explicit_layouts(draw: st.DrawFn) -> tuple[Layout, int]:
    """Any valid layout over a small storage: negative, zero and overlapping strides."""
    rank = draw(st.integers(0, 3))
    shape = tuple(draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank)))
    strides = tuple(draw(st.lists(st.integers(-4, 4), min_size=rank, max_size=rank)))
    low = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0 and n > 0)
    high = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0 and n > 0)
    offset = -low + draw(st.integers(0, 2))
    return Layout(shape, strides, offset), offset + high + 1 + draw(st.integers(0, 2))


def plain_rule(grad: np.ndarray, layout: Layout, size: int) -> np.ndarray:
    """The rule as stated, one coordinate at a time: ``buffer[offset(c)] += grad[c]``."""
    buffer = np.zeros(size)
    for coordinate in np.ndindex(layout.shape):
        buffer[layout.storage_offset(coordinate)] += grad[coordinate]
    return buffer


@settings(max_examples=200, deadline=None)
@given(explicit_layouts(), st.integers(0, 2**16))
def test_every_backends_scatter_add_is_the_plain_rule(drawn: tuple[Layout, int], seed: int) -> None:
    layout, size = drawn
    grad = np.random.default_rng(seed).standard_normal(layout.shape)
    plain = plain_rule(grad, layout, size)
    for backend in ("numpy", "reference"):
        with use_backend(backend):
            assert np.allclose(
                view_backward(grad, layout, size, np.dtype(np.float64)), plain, rtol=0, atol=1e-12
            ), backend
            # A further gradient of the same owner, added in place through the layout.
            before = np.random.default_rng(seed + 1).standard_normal(size)
            buffer = before.copy()
            added = view_backward(grad, layout, size, np.dtype(np.float64), into=buffer)
            assert added is buffer
            assert np.allclose(buffer, before + plain, rtol=0, atol=1e-12), backend
        # The backend's primitive itself, and the protocol's default (NumPy's np.add.at).
        buffer = np.zeros(size)
        lt.get_backend(backend).scatter_add(buffer, layout, grad)
        assert np.allclose(buffer, plain, rtol=0, atol=1e-12), backend
    buffer = np.zeros(size)
    lt.Backend.scatter_add(lt.get_backend("numpy"), buffer, layout, grad)
    assert np.allclose(buffer, plain, rtol=0, atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(explicit_layouts())
def test_the_protocols_offsets_are_the_offsets_of_the_cursor(drawn: tuple[Layout, int]) -> None:
    layout, size = drawn
    view = TensorView.from_layout(Tensor.zeros([size]), layout)
    assert layout_offsets(layout, size).tolist() == list(view.logical_offsets())


@pytest.mark.parametrize("op", ["reshape", "transpose", "whole", "broadcast"])
def test_a_whole_owners_gradient_and_a_broadcast_are_the_plain_rule(op: str) -> None:
    owner = Tensor.zeros([2, 3], requires_grad=True)
    view = {
        "reshape": owner.reshape(3, 2),
        "transpose": owner.transpose(0, 1),
        "whole": owner.view(),
        "broadcast": owner[:, None, :].expand(2, 4, 3),
    }[op]
    grad = np.arange(float(view.size)).reshape(view.shape)
    lt.sum(view * Tensor.from_numpy(grad)).backward()
    assert owner.grad is not None
    assert np.array_equal(owner.grad.to_numpy().reshape(-1), plain_rule(grad, view.layout, 6))


def test_gradients_are_the_same_on_the_reference_backend() -> None:
    x = Tensor.from_numpy(np.arange(12.0).reshape(3, 4), requires_grad=True)
    lt.sum(lt.exp(x.T[::2] * 0.1) * x[:, ::-1].T[1:3]).backward()
    fast = x.grad.to_numpy()  # type: ignore[union-attr]
    x.grad = None
    with use_backend("reference"):
        lt.sum(lt.exp(x.T[::2] * 0.1) * x[:, ::-1].T[1:3]).backward()
    assert np.allclose(x.grad.to_numpy(), fast, rtol=1e-12)  # type: ignore[union-attr]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_every_backends_index_add_is_the_plain_scatter_add(data: st.DataObject) -> None:
    # take's gradient: buffer[..., ids[k], ...] += rows[..., k, ...]; repeated ids (the same
    # token twice in a batch) collect the sum of their rows, negative ids count from the end.
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    axis = data.draw(st.integers(0, len(shape) - 1))
    size = shape[axis]
    ids = np.array(data.draw(st.lists(st.integers(-size, size - 1), max_size=12)), np.int64)
    seed = data.draw(st.integers(0, 2**16))
    rows_shape = (*shape[:axis], ids.size, *shape[axis + 1 :])
    rows = np.random.default_rng(seed).standard_normal(rows_shape)
    before = np.random.default_rng(seed + 1).standard_normal(shape)
    plain = before.copy()
    for k, i in enumerate(ids):  # the rule, one row at a time
        index = (slice(None),) * axis + (i,)
        plain[index] += rows[(slice(None),) * axis + (k,)]
    for backend in ("numpy", "reference"):
        buffer = before.copy()
        lt.get_backend(backend).index_add(buffer, axis, ids, rows)
        assert np.allclose(buffer, plain, rtol=0, atol=1e-12), backend
    buffer = before.copy()
    lt.Backend.index_add(lt.get_backend("numpy"), buffer, axis, ids, rows)
    assert np.allclose(buffer, plain, rtol=0, atol=1e-12)


def test_an_embeddings_gradient_sums_the_rows_of_a_repeated_id_on_every_backend() -> None:
    table = np.arange(12.0).reshape(4, 3)
    ids = np.array([[3, 1], [3, -1]])  # id 3 three times (-1 is 3)
    weights = np.arange(12.0).reshape(2, 2, 3) + 1
    expected = np.zeros((4, 3))
    np.add.at(expected, ids.reshape(-1), weights.reshape(4, 3))
    for backend in ("numpy", "reference"):
        with use_backend(backend):
            t = Tensor.from_numpy(table, requires_grad=True)
            picked = lt.take(t, Tensor.from_numpy(ids))
            lt.sum(picked * Tensor.from_numpy(weights)).backward()
            assert t.grad is not None
            assert np.array_equal(t.grad.to_numpy(), expected), backend
