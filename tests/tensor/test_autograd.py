"""Autograd's contract, with PyTorch's names: which tensors require grad, what ``backward()``
accepts, where gradients land, ``no_grad()``, ``detach()``, and the refusals (a write to a
saved tensor, an op without a gradient) that stand where a wrong gradient would be."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import llmfs.tensor as lt
from llmfs.tensor import (
    DTypeError,
    GradientShapeError,
    NoGradientError,
    NotDifferentiableError,
    SavedTensorModifiedError,
    Tensor,
    TensorError,
    TensorView,
    copyto,
    no_grad,
)


def leaf(shape: tuple[int, ...], seed: int = 0) -> Tensor:
    values = np.random.default_rng(seed).standard_normal(shape)
    return Tensor.from_numpy(values, requires_grad=True)


# -- requires_grad -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: Tensor.from_vec([2], [1.0, 2.0], requires_grad=True),
        lambda: Tensor([2], [1.0, 2.0], requires_grad=True),
        lambda: Tensor.from_numpy(np.ones((2, 2)), requires_grad=True),
        lambda: Tensor.zeros([3], requires_grad=True),
        lambda: Tensor.full([3], 2.0, dtype="float32", requires_grad=True),
        lambda: Tensor.arange(4, dtype="float64", requires_grad=True),
    ],
)
def test_every_constructor_makes_a_leaf_that_requires_grad(make: object) -> None:
    t = make()  # type: ignore[operator]
    assert t.requires_grad and t.is_leaf and t.grad is None and t.grad_fn is None


def test_tensors_do_not_require_grad_unless_asked() -> None:
    t = Tensor.from_vec([2], [1.0, 2.0])
    assert not t.requires_grad and not lt.exp(t).requires_grad


def test_requires_grad_in_place_returns_the_tensor_and_can_be_set_as_an_attribute() -> None:
    t = Tensor.zeros([2])
    assert t.requires_grad_() is t and t.requires_grad
    t.requires_grad = False
    assert not t.requires_grad


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_requires_grad_on_an_integer_or_bool_tensor_names_the_dtype(dtype: str) -> None:
    with pytest.raises(DTypeError, match=dtype):
        Tensor.zeros([2], dtype=dtype, requires_grad=True)
    with pytest.raises(DTypeError, match=dtype):
        Tensor.zeros([2], dtype=dtype).requires_grad_()


def test_arange_is_int64_by_default_so_it_needs_a_float_dtype_to_require_grad() -> None:
    with pytest.raises(DTypeError, match="int64"):
        Tensor.arange(3, requires_grad=True)


def test_requires_grad_takes_a_bool() -> None:
    with pytest.raises(TensorError, match="True or False"):
        Tensor.zeros([2], requires_grad="yes")  # type: ignore[arg-type]


def test_a_view_takes_the_flag_of_what_it_is_derived_from_when_it_is_made() -> None:
    t = Tensor.zeros([2, 3])
    before = t.view()
    t.requires_grad_()
    after = t.T[0]
    assert after.requires_grad and not before.requires_grad  # as in PyTorch
    assert after.grad is None and after.grad_fn is None and not after.is_leaf
    assert after.requires_grad_(True) is after
    with pytest.raises(TensorError, match="owner"):
        before.requires_grad_(True)


def test_a_result_records_its_op_and_is_not_a_leaf() -> None:
    y = lt.exp(leaf((2,)))
    assert y.requires_grad and not y.is_leaf and y.grad_fn is not None
    assert "exp" in repr(y.grad_fn)
    with pytest.raises(TensorError, match="detach"):
        y.requires_grad_(False)


def test_integer_and_bool_results_do_not_require_grad() -> None:
    x = leaf((3,))
    assert not (x > 0).requires_grad
    assert not lt.astype(x, "int64").requires_grad
    assert lt.astype(x, "float32").requires_grad


# -- backward's argument -------------------------------------------------------------------------


def test_backward_without_a_gradient_needs_a_single_value() -> None:
    x = leaf((2, 3))
    with pytest.raises(GradientShapeError, match=r"shape \[2, 3\] holds 6"):
        (x * 2).backward()
    (x * 2)[1:2, 0:1].backward()  # one value, rank 2: allowed
    assert x.grad is not None and x.grad.tolist() == [[0, 0, 0], [2, 0, 0]]


def test_a_gradient_argument_must_have_the_results_shape() -> None:
    y = leaf((2, 3)) * 2
    with pytest.raises(GradientShapeError, match=r"\[3, 2\].*\[2, 3\]"):
        y.backward(Tensor.zeros([3, 2]))
    with pytest.raises(TensorError, match="Tensor or TensorView"):
        y.backward(np.ones((2, 3)))


def test_backward_of_a_result_that_does_not_require_grad_says_why() -> None:
    with pytest.raises(NoGradientError, match=r"shape \[2\]"):
        Tensor.zeros([2]).backward(Tensor.zeros([2]))
    with pytest.raises(NoGradientError):
        lt.sum(leaf((2,)) > 0).backward()


def test_the_gradient_argument_weights_each_value() -> None:
    x = leaf((3,))
    (x * 3.0).backward(Tensor.from_vec([3], [1.0, 10.0, 100.0]))
    assert x.grad is not None and np.allclose(x.grad.to_numpy(), [3.0, 30.0, 300.0])


# -- where gradients land ------------------------------------------------------------------------


def test_grad_has_the_owners_shape_and_dtype_and_accumulates_until_reset() -> None:
    x = Tensor.from_numpy(np.arange(6.0).reshape(2, 3), dtype="float32", requires_grad=True)
    lt.sum(x * x).backward()
    first = x.grad
    assert first is not None and first.shape == (2, 3) and first.dtype == np.float32
    lt.sum(x * x).backward()
    assert x.grad is first  # accumulated in place, as PyTorch does
    assert np.allclose(first.to_numpy(), 4 * np.arange(6.0).reshape(2, 3))
    x.grad = None
    lt.sum(x).backward()
    assert x.grad is not None and x.grad.tolist() == [[1.0] * 3] * 2


def test_grad_can_be_set_only_to_none_or_a_tensor_of_the_owners_shape_and_dtype() -> None:
    x = leaf((2,))
    x.grad = Tensor.zeros([2])
    with pytest.raises(TensorError, match=r"shape \[2\]"):
        x.grad = Tensor.zeros([3])


def test_gradients_through_views_land_in_the_owners_grad() -> None:
    x = leaf((2, 3))
    lt.sum(x.T[1:] * 2.0).backward()
    assert x.grad is not None and x.grad.tolist() == [[0, 2, 2], [0, 2, 2]]


def test_backward_of_a_view_of_a_result_starts_from_the_cells_it_reads() -> None:
    x = leaf((4,))
    y = x * 3.0
    y[::2].backward(Tensor.from_vec([2], [1.0, 1.0]))
    assert x.grad is not None and x.grad.tolist() == [3.0, 0.0, 3.0, 0.0]


def test_a_tensor_used_twice_gets_both_contributions() -> None:
    x = leaf((3,))
    lt.sum(x * x + x).backward()
    assert np.allclose(x.grad.to_numpy(), 2 * x.to_numpy() + 1)  # type: ignore[union-attr]


def test_results_keep_no_grad_and_the_record_stays_for_another_backward() -> None:
    x = leaf((2,))
    y = lt.exp(x)
    loss = lt.sum(y)
    loss.backward()
    loss.backward()
    assert y.grad is None
    assert np.allclose(x.grad.to_numpy(), 2 * np.exp(x.to_numpy()))  # type: ignore[union-attr]


# -- no_grad and detach --------------------------------------------------------------------------


def test_no_grad_records_nothing_and_restores_the_mode() -> None:
    x = leaf((2,))
    with no_grad():
        y = lt.exp(x)
        with no_grad():
            pass
        z = lt.exp(x)
    assert not y.requires_grad and not z.requires_grad
    assert lt.exp(x).requires_grad


def test_no_grad_is_a_decorator_and_restores_the_mode_after_an_error() -> None:
    @no_grad()
    def step(t: Tensor) -> Tensor:
        return t * 2

    x = leaf((2,))
    assert not step(x).requires_grad
    with pytest.raises(ZeroDivisionError), no_grad():
        raise ZeroDivisionError
    assert (x * 2).requires_grad


def test_no_grad_is_per_thread() -> None:
    x = leaf((2,))
    seen: list[bool] = []
    with no_grad():
        worker = threading.Thread(target=lambda: seen.append(lt.exp(x).requires_grad))
        worker.start()
        worker.join()
    assert seen == [True]


def test_detach_is_a_view_of_the_same_storage_that_does_not_require_grad() -> None:
    x = leaf((2, 3))
    d = x.detach()
    assert isinstance(d, TensorView) and d.shares_storage(x) and not d.requires_grad
    assert not d.T.requires_grad and not lt.exp(d).requires_grad
    lt.sum(x * d).backward()  # d is a constant: d(x*d)/dx = d
    assert np.allclose(x.grad.to_numpy(), x.to_numpy())  # type: ignore[union-attr]


# Every way of making a view; each made under no_grad() must be a constant.
VIEW_MAKERS = [
    ("index", lambda t: t[0]),
    ("slice", lambda t: t[1:, ::2]),
    ("view", lambda t: t.view()),
    ("T", lambda t: t.T),
    ("reshape", lambda t: t.reshape(-1)),
    ("permute", lambda t: t.permute(1, 0)),
    ("transpose", lambda t: t.transpose(0, 1)),
    ("flip", lambda t: t.flip(1)),
    ("expand", lambda t: t.unsqueeze(0).expand(2, 2, 3)),
    ("squeeze", lambda t: t.unsqueeze(1).squeeze(1)),
    ("merge", lambda t: t.merge(0, 1)),
    ("split", lambda t: t.split(1, [3, 1])),
    ("slice method", lambda t: t.slice(1, 0, 2)),
    ("iteration", lambda t: next(iter(t))),
    ("from_parts", lambda t: TensorView.from_parts(t.owner, [3], [1], 1)),
]


@pytest.mark.parametrize(("how", "make"), VIEW_MAKERS, ids=[name for name, _ in VIEW_MAKERS])
@pytest.mark.parametrize("source", ["leaf", "result", "view of a leaf"])
def test_a_view_made_under_no_grad_is_a_constant(how: str, make: object, source: str) -> None:
    x = leaf((2, 3), seed=4)
    base = {"leaf": lambda: x, "result": lambda: lt.exp(x), "view of a leaf": x.view}[source]()
    with no_grad():
        constant = make(base)  # type: ignore[operator]
    assert not constant.requires_grad and constant.is_leaf
    live = make(base)  # type: ignore[operator]
    assert live.requires_grad
    lt.sum(live * constant).backward()  # d(live * c)/d(live) = c; nothing flows through c
    # Each coordinate of live adds the constant's value there into the cell it reads.
    expected = np.zeros(6)
    values = constant.to_numpy()
    for coordinate in np.ndindex(live.shape):
        expected[live.layout.storage_offset(coordinate)] += values[coordinate]
    if source == "result":  # d(exp(x))/dx = exp(x)
        expected *= np.exp(x.to_numpy()).reshape(-1)
    assert x.grad is not None
    assert np.allclose(x.grad.to_numpy().reshape(-1), expected), how
    with pytest.raises(NoGradientError):
        lt.sum(constant * 2.0).backward()


def test_views_made_under_no_grad_stay_constant_and_later_views_require_grad_again() -> None:
    x = leaf((2, 3))
    with no_grad():
        target = x[0]
    assert x.requires_grad  # the leaf keeps its flag
    assert not target.T.requires_grad  # derived outside no_grad from a constant: a constant
    assert x[0].requires_grad  # grad mode is back: views of x require grad again
    lt.sum((x[1] - target) * (x[1] - target)).backward()
    values = x.to_numpy()
    assert x.grad is not None
    assert np.allclose(x.grad.to_numpy()[0], 0.0)
    assert np.allclose(x.grad.to_numpy()[1], 2 * (values[1] - values[0]))


def test_a_view_made_in_another_thread_follows_that_threads_grad_mode() -> None:
    x = leaf((2,))
    seen: list[bool] = []
    with no_grad():
        worker = threading.Thread(target=lambda: seen.append(x[0].requires_grad))
        worker.start()
        worker.join()
        assert not x[0].requires_grad
    assert seen == [True]


# -- writes into a graph ---------------------------------------------------------------------------


def test_writing_a_saved_input_after_the_op_is_refused_at_backward() -> None:
    x = leaf((3,))
    loss = lt.sum(lt.log(x * x))  # log saves x * x, mul saves x
    with x.mutate() as storage:
        storage[0] = 5.0
    with pytest.raises(SavedTensorModifiedError, match=r"mul's backward.*version"):
        loss.backward()


@pytest.mark.parametrize(
    "write",
    [
        lambda t: copyto(t, 0.5),
        lambda t: t.as_mut_slice().__setitem__(0, 0.5),
        lambda t: t.mutate().__enter__(),
    ],
    ids=["copyto", "as_mut_slice", "mutate"],
)
def test_every_kind_of_write_to_an_ops_result_is_caught(write: object) -> None:
    x = leaf((2,))
    y = lt.exp(x)
    loss = lt.sum(y * 2.0)
    write(y)  # type: ignore[operator]
    with pytest.raises(SavedTensorModifiedError, match="exp"):
        loss.backward()


def test_a_leaf_may_be_written_when_no_rule_needs_its_old_values() -> None:
    x = leaf((2,))
    loss = lt.sum(x * 3.0)  # mul by a number saves nothing of x that backward reads
    copyto(x, 1.0)
    loss.backward()
    assert x.grad is not None and x.grad.tolist() == [3.0, 3.0]


def test_an_op_without_a_gradient_says_so_at_backward() -> None:
    x = leaf((3,))
    with pytest.raises(NotDifferentiableError, match="floor_divide"):
        lt.sum(x // 2.0).backward()
    with pytest.raises(NotDifferentiableError, match="remainder"):
        lt.sum(x % 2.0).backward()


# -- prod ------------------------------------------------------------------------------------------


def products_of_the_others(values: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """The rule by its definition, one position at a time: the product of every other value of
    the position's group (the values reduced with it)."""
    out = np.empty_like(values)
    kept = [a for a in range(values.ndim) if a not in axes]
    for position in np.ndindex(values.shape):
        group = values[tuple(position[a] if a in kept else slice(None) for a in range(values.ndim))]
        mine = tuple(position[a] for a in axes)
        others = group.copy()
        others[mine] = 1.0
        out[position] = np.prod(others)
    return out


@pytest.mark.parametrize("seed", range(12))
def test_the_gradient_of_a_product_is_the_product_of_the_others_even_with_zeros(
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(1, 4))))
    values = rng.uniform(-2.0, 2.0, size=shape)
    # No zero, one zero or several in a group: each is its own case of the rule.
    values[rng.random(shape) < rng.choice([0.0, 0.15, 0.5])] = 0.0
    axis_choices: list[tuple[int, ...] | None] = [None, (len(shape) - 1,), (0,)]
    if len(shape) > 1:
        axis_choices.append((0, len(shape) - 1))
    axis = axis_choices[int(rng.integers(len(axis_choices)))]
    keepdims = bool(rng.integers(2))
    x = Tensor.from_numpy(values, requires_grad=True)
    y = lt.prod(x, axis=axis, keepdims=keepdims)
    weights = rng.standard_normal(y.shape)
    lt.sum(y * Tensor.from_numpy(weights)).backward()
    axes = tuple(range(len(shape))) if axis is None else axis
    spread = weights if keepdims else np.expand_dims(weights, axes)
    expected = products_of_the_others(values, axes) * spread
    assert x.grad is not None
    assert np.allclose(x.grad.to_numpy(), expected, rtol=1e-12, atol=1e-12)


def test_one_zero_takes_the_product_of_the_others_and_two_zeros_send_nothing() -> None:
    x = Tensor.from_vec([2, 3], [2.0, 0.0, 3.0, 0.0, 5.0, 0.0], requires_grad=True)
    lt.sum(lt.prod(x, axis=1)).backward()
    assert x.grad is not None and x.grad.tolist() == [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0]]
    z = Tensor.from_vec([3], [2.0, 3.0, 4.0], requires_grad=True)
    assert lt.gradcheck(lambda t: lt.prod(t), [z])
    e = Tensor.zeros([0, 2], requires_grad=True)
    lt.sum(lt.prod(e, axis=0)).backward()  # a product of nothing is 1: its gradient is empty
    assert e.grad is not None and e.grad.shape == (0, 2)


def test_reduce_with_prod_has_the_products_gradient() -> None:
    values = np.array([[1.5, 0.0, -2.0], [0.5, 4.0, 3.0]])
    x = Tensor.from_numpy(values, requires_grad=True)
    lt.sum(lt.reduce(x, "ij", "j", "prod")).backward()
    assert x.grad is not None
    assert np.allclose(x.grad.to_numpy(), products_of_the_others(values, (0,)))


def test_the_layers_above_register_their_rules_and_cannot_replace_the_cores() -> None:
    # The fused layers and einsum state their rules next to their forward pass; importing them
    # puts the rules in the one table backward reads. A core op's rule is stated once, in
    # autograd, and no layer above may replace it.
    import llmfs.tensor.functional as functional
    from llmfs.tensor import autograd
    from llmfs.tensor.einsum.gradient import einsum_backward

    for name in ("gelu", "layer_norm", "softmax", "log_softmax"):
        assert autograd.RULES[name] is getattr(functional, f"_{name}_backward")
    assert autograd.RULES["einsum"] is einsum_backward
    for name in ("add", "matmul", "sum", "where"):
        with pytest.raises(ValueError, match=name):
            autograd.register_rule(name, autograd.RULES["gelu"])
