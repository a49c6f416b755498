"""Every differentiable op's gradient equals central finite differences in float64
(:func:`llmfs.tensor.gradcheck`), with broadcasting, over axes, batched, on views; and gradcheck
itself reports a wrong gradient by input, position and both values."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llmfs.tensor as lt
from llmfs.tensor import (
    DTypeError,
    GradcheckError,
    Tensor,
    TensorError,
    copying_transpose,
    gradcheck,
    materialize,
    use_backend,
)
from llmfs.tensor import autograd as ag


def leaf(shape: tuple[int, ...], seed: int = 0, low: float = -2.0, high: float = 2.0) -> Tensor:
    values = np.random.default_rng(seed).uniform(low, high, size=shape)
    return Tensor.from_numpy(values, requires_grad=True)


def positive(shape: tuple[int, ...], seed: int = 0) -> Tensor:
    return leaf(shape, seed, 0.5, 2.0)


UNARY: dict[str, Callable[[Tensor], Tensor]] = {
    "neg": lt.neg,
    "abs": lt.abs,
    "exp": lt.exp,
    "sin": lt.sin,
    "cos": lt.cos,
    "tanh": lt.tanh,
    "sigmoid": lt.sigmoid,
    "relu": lt.relu,
    "scale": lambda x: lt.scale(x, -1.5),
    "materialize": materialize,
    "astype": lambda x: lt.astype(x, "float64"),
}
POSITIVE_UNARY: dict[str, Callable[[Tensor], Tensor]] = {
    "log": lt.log,
    "sqrt": lt.sqrt,
    "reciprocal": lt.reciprocal,
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_ops(name: str) -> None:
    # Values away from 0 (abs and relu have a kink there).
    x = leaf((2, 3))
    with lt.no_grad():
        x_far = lt.where(lt.less(lt.abs(x), 0.1), 0.5, x)
    y = Tensor.from_numpy(x_far.to_numpy(), requires_grad=True)
    assert gradcheck(UNARY[name], [y])


@pytest.mark.parametrize("name", list(POSITIVE_UNARY))
def test_unary_ops_of_positive_values(name: str) -> None:
    assert gradcheck(POSITIVE_UNARY[name], [positive((3, 2))])


BINARY: dict[str, Callable[..., Tensor]] = {
    "add": lt.add,
    "sub": lt.sub,
    "mul": lt.mul,
    "div": lambda a, b: lt.div(a, lt.add(lt.abs(b), 0.5)),
    "maximum": lt.maximum,
    "minimum": lt.minimum,
    "power": lambda a, b: lt.power(lt.add(lt.abs(a), 0.5), b),
}


@pytest.mark.parametrize("name", list(BINARY))
@pytest.mark.parametrize(
    ("left", "right"),
    [((2, 3), (2, 3)), ((2, 3), (3,)), ((4, 1, 3), (2, 1)), ((), (2,)), ((1,), (3, 1))],
)
def test_binary_ops_with_broadcasting(
    name: str, left: tuple[int, ...], right: tuple[int, ...]
) -> None:
    assert gradcheck(BINARY[name], [leaf(left, 1), leaf(right, 2)])


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "power", "maximum"])
def test_binary_ops_with_a_number_on_either_side(name: str) -> None:
    op = {"add": lt.add, "sub": lt.sub, "mul": lt.mul, "div": lt.div, "power": lt.power}.get(
        name, lt.maximum
    )
    x = positive((3,))
    assert gradcheck(lambda t: op(t, 1.7), [x])
    assert gradcheck(lambda t: op(1.3, t), [x])


def test_operators_record_like_the_functions() -> None:
    a, b = positive((2, 3), 1), positive((3,), 2)
    assert gradcheck(lambda a, b: (a + b) * a - b / a + a**2 - 2.0**b + (-a), [a, b])


def test_maximum_shares_the_gradient_of_a_tie_as_pytorch() -> None:
    a = Tensor.from_vec([2], [1.0, 2.0], requires_grad=True)
    b = Tensor.from_vec([2], [1.0, 3.0], requires_grad=True)
    lt.sum(lt.maximum(a, b)).backward()
    assert a.grad.tolist() == [0.5, 0.0] and b.grad.tolist() == [0.5, 1.0]  # type: ignore[union-attr]


def test_power_with_a_zero_base_has_pytorchs_zero_exponent_gradient() -> None:
    a = Tensor.from_vec([2], [0.0, 2.0])
    b = Tensor.from_vec([2], [2.0, 3.0], requires_grad=True)
    lt.sum(lt.power(a, b)).backward()
    assert np.allclose(b.grad.to_numpy(), [0.0, 8.0 * np.log(2.0)])  # type: ignore[union-attr]


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), (), [1]])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_over_axes(op: str, axis: object, keepdims: bool) -> None:
    # Distinct values: max and min have no ties (ties are tested below).
    x = Tensor.from_numpy(
        np.random.default_rng(3).permutation(24).reshape(2, 3, 4) / 7.0, requires_grad=True
    )
    fn = getattr(lt, op)
    assert gradcheck(lambda t: fn(t, axis=axis, keepdims=keepdims), [x])


def test_reductions_take_the_axis_positionally_too() -> None:
    x = leaf((2, 3))
    assert gradcheck(lambda t: lt.sum(t, 1), [x])
    assert gradcheck(lambda t: lt.mean(t, 0, keepdims=True), [x])


def test_max_shares_the_gradient_among_ties_as_pytorchs_amax() -> None:
    x = Tensor.from_vec([2, 3], [1.0, 5.0, 5.0, 2.0, 2.0, 0.0], requires_grad=True)
    lt.sum(lt.max(x, axis=1)).backward()
    assert x.grad.tolist() == [[0.0, 0.5, 0.5], [0.5, 0.5, 0.0]]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("modes_in", "modes_out", "op"),
    [("ijk", "ki", "sum"), ("ijk", "j", "mean"), ("ijk", "kji", "max"), ([0, 1, 2], [1], "MIN")],
)
def test_reduce_by_modes(modes_in: object, modes_out: object, op: str) -> None:
    x = Tensor.from_numpy(
        np.random.default_rng(4).permutation(24).reshape(2, 3, 4) / 5.0, requires_grad=True
    )
    assert gradcheck(lambda t: lt.reduce(t, modes_in, modes_out, op), [x])


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ((2, 3), (3, 4)),
        ((3,), (3, 4)),
        ((2, 3), (3,)),
        ((3,), (3,)),
        ((2, 2, 3), (3, 4)),
        ((2, 3), (5, 3, 2)),
        ((2, 1, 2, 3), (3, 3, 2)),
    ],
)
def test_matmul_batched_broadcast_and_vectors(
    left: tuple[int, ...], right: tuple[int, ...]
) -> None:
    assert gradcheck(lt.matmul, [leaf(left, 1), leaf(right, 2)])


def test_matmul_with_empty_axes_gives_zero_or_empty_gradients() -> None:
    a, b = leaf((2, 0), 1), leaf((0, 3), 2)
    lt.sum(a @ b).backward()
    assert a.grad is not None and a.grad.shape == (2, 0)
    assert b.grad is not None and b.grad.shape == (0, 3)
    c, d = leaf((0, 2, 3), 1), leaf((3, 4), 2)
    lt.sum(c @ d).backward()
    assert d.grad is not None and d.grad.tolist() == [[0.0] * 4] * 3


def test_tensors_passed_by_name_are_recorded_too() -> None:
    a, b = leaf((2, 3), 1), leaf((3, 2), 2)
    assert gradcheck(lambda a, b: lt.matmul(a=a, b=b), [a, b])
    assert gradcheck(lambda a: lt.sum(x=a, axis=1), [a])


def test_matmul_of_views() -> None:
    a, b = leaf((4, 3), 1), leaf((2, 4, 5), 2)
    assert gradcheck(lambda a, b: a.T @ b[:, :, ::2].flip(0), [a, b])


@pytest.mark.parametrize(
    ("expression", "shapes"),
    [
        ("ik,kj->ij", [(2, 3), (3, 4)]),
        ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
        ("ij->ji", [(2, 3)]),
        ("ij->", [(2, 3)]),
        ("ii->i", [(3, 3)]),
        ("iij->ij", [(2, 2, 3)]),
        ("ij,j->", [(2, 3), (3,)]),
        ("i,j->ij", [(2,), (3,)]),
        ("ij,kj->ikj", [(2, 3), (1, 3)]),
        ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)]),
        ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)]),
        ("ij", [(2, 3)]),
        ("ijk,ik", [(2, 3, 2), (2, 2)]),
        ("i,i->", [(3,), (1,)]),
    ],
)
def test_einsum(expression: str, shapes: list[tuple[int, ...]]) -> None:
    tensors = [leaf(shape, k) for k, shape in enumerate(shapes)]
    assert gradcheck(lambda *ts: lt.einsum(expression, *ts), tensors)


def test_einsum_with_a_number_operand_and_operands_as_a_list() -> None:
    x = leaf((3,))
    assert gradcheck(lambda t: lt.einsum("i,->i", t, 2.5), [x])
    assert gradcheck(lambda t: lt.einsum("i,i->", [t, t]), [x])


def test_einsums_backward_is_einsums(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmfs.tensor.einsum import functions

    seen: list[str] = []
    original = functions.einsum

    def spy(expression: str, *operands: object, dtype: object = None) -> Tensor:
        seen.append(expression)
        return original(expression, *operands, dtype=dtype)

    a, b = leaf((2, 3), 1), leaf((3, 4), 2)
    y = lt.einsum("ik,kj->ij", a, b)
    monkeypatch.setattr(functions, "einsum", spy)
    y.backward(Tensor.full([2, 4], 1.0))
    # The labels renamed in order of appearance (output first): dA = dY B^T, dB = A^T dY.
    assert seen == ["ab,cb->ac", "ab,ac->cb"]


def test_take_adds_the_rows_of_repeated_ids() -> None:
    table = leaf((4, 3))
    ids = Tensor.from_vec([2, 3], [0, 2, 0, 3, 0, -1])
    rows = lt.take(table, ids)
    rows.backward(Tensor.full([2, 3, 3], 1.0))
    assert table.grad.tolist() == [[3.0] * 3, [0.0] * 3, [1.0] * 3, [2.0] * 3]  # type: ignore[union-attr]
    assert gradcheck(lambda t: lt.take(t, ids, axis=1), [leaf((2, 4))])
    assert gradcheck(lambda t: t[ids], [leaf((4, 2))])


def test_where_sends_the_gradient_to_the_chosen_side() -> None:
    cond = Tensor.from_vec([3], [True, False, True])
    a, b = leaf((2, 3), 1), leaf((3,), 2)
    assert gradcheck(lambda a, b: lt.where(cond, a, b), [a, b])
    assert gradcheck(lambda a: lt.where(cond, a, 0.0), [a])


def test_copying_transpose() -> None:
    assert gradcheck(copying_transpose, [leaf((2, 3))])


def test_a_float32_graph_gives_float32_gradients() -> None:
    x = Tensor.from_numpy(np.linspace(-1, 1, 6).reshape(2, 3), dtype="float32", requires_grad=True)
    lt.sum(lt.tanh(x @ x.T)).backward()
    assert x.grad is not None and x.grad.dtype == np.float32
    x64 = Tensor.from_numpy(x.to_numpy().astype(np.float64), requires_grad=True)
    lt.sum(lt.tanh(x64 @ x64.T)).backward()
    assert np.allclose(x.grad.to_numpy(), x64.grad.to_numpy(), atol=1e-5)  # type: ignore[union-attr]


def test_reference_backend_gradients() -> None:
    a, b = leaf((2, 3), 1), leaf((3, 2), 2)
    with use_backend("reference"):
        assert gradcheck(lambda a, b: lt.sum(lt.exp(a @ b) * a[:, :2].T, axis=0), [a, b])


shapes = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)


@settings(max_examples=40, deadline=None)
@given(shapes, st.integers(0, 3), st.sampled_from(["add", "mul", "sub", "maximum"]))
def test_binary_ops_on_random_broadcast_shapes(
    shape: tuple[int, ...], drop: int, name: str
) -> None:
    other = tuple(1 if k % 2 else n for k, n in enumerate(shape[drop:]))
    assert gradcheck(BINARY[name], [leaf(shape, 1), leaf(other, 2)])


# -- gradcheck itself ---------------------------------------------------------------------------


def test_gradcheck_names_the_input_the_position_and_both_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wrong = ag.RULES["exp"]
    monkeypatch.setitem(
        ag.RULES, "exp", lambda ctx, g: [(view, lt.mul(grad, 2.0)) for view, grad in wrong(ctx, g)]
    )
    x = Tensor.from_vec([2], [0.0, 1.0], requires_grad=True)
    with pytest.raises(
        GradcheckError, match=r"input 0 at position \[0\]: backward gives 2\.0 .* gives 0\.99"
    ) as error:
        gradcheck(lt.exp, [x])
    assert error.value.input == 0 and error.value.position == (0,)
    assert error.value.analytic == pytest.approx(2.0) and error.value.numeric == pytest.approx(1.0)


def test_gradcheck_leaves_the_inputs_and_their_grad_as_they_were() -> None:
    x = leaf((3,))
    values = x.to_numpy()
    x.grad = Tensor.full([3], 7.0)
    assert gradcheck(lambda t, n: lt.sin(t) * n, [x, 3])
    assert np.array_equal(x.to_numpy(), values) and x.grad.tolist() == [7.0] * 3


def test_gradcheck_refuses_what_it_cannot_check() -> None:
    with pytest.raises(TensorError, match="requires_grad"):
        gradcheck(lt.exp, [Tensor.zeros([2])])
    with pytest.raises(DTypeError, match="float32"):
        gradcheck(lt.exp, [Tensor.zeros([2], dtype="float32", requires_grad=True)])


@pytest.mark.parametrize(
    ("equation", "shape"),
    [
        ("ii->i", (3, 3)),
        ("jij->ij", (2, 3, 2)),
        ("iji->j", (3, 2, 3)),
        ("ijji->ij", (2, 3, 3, 2)),
        ("kjkj->jk", (2, 3, 2, 3)),
        ("jii->ji", (2, 3, 3)),
        ("ii->", (4, 4)),
        ("ii->i", (0, 0)),
    ],
)
def test_a_repeated_label_sends_its_gradient_to_the_diagonal_in_any_axis_order(
    equation: str, shape: tuple[int, ...]
) -> None:
    """einsum's diagonal reads are views: the gradient lands on the diagonal cells whatever the
    order of the repeated labels, and nowhere else (finite differences)."""
    rng = np.random.default_rng(len(equation))
    x = lt.Tensor.from_numpy(rng.standard_normal(shape), requires_grad=True)
    assert lt.gradcheck(lambda t: lt.einsum(equation, t), [x])
