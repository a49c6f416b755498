"""An einsum plan's executions are differentiable: ``plan.execute(...)`` is recorded on the tape as
``einsum(...)`` is, so its gradients equal einsum's and finite differences; a write into a given
buffer (``execute_into``) is refused while an operand requires grad, and allowed under
``no_grad()``."""

from __future__ import annotations

import numpy as np
import pytest

import llmfs.tensor as lt
from llmfs.tensor import EinsumPlan, OutputBufferError, Tensor

#: (expression, operand shapes): a product, a batch, a diagonal, a broadcast size-1 axis, an
#: ellipsis, a summed-away label, an outer product and a scalar result.
CASES = [
    ("ik,kj->ij", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("ii->i", [(3, 3)]),
    ("ij,j->ij", [(3, 1), (4,)]),
    ("...ij,jk->...ik", [(2, 1, 3), (3, 2)]),
    ("ijk->i", [(2, 3, 2)]),
    ("i,j->ij", [(3,), (2,)]),
    ("i,i->", [(4,), (4,)]),
]


def leaves(shapes: list[tuple[int, ...]], seed: int) -> list[Tensor]:
    rng = np.random.default_rng(seed)
    return [Tensor.from_numpy(rng.normal(size=s), requires_grad=True) for s in shapes]


@pytest.mark.parametrize(("expression", "shapes"), CASES, ids=[c[0] for c in CASES])
def test_a_plans_gradients_equal_einsums(expression: str, shapes: list[tuple[int, ...]]) -> None:
    ours, theirs = leaves(shapes, 1), leaves(shapes, 1)
    plan = EinsumPlan(expression, *ours)
    result = plan.execute(*ours)
    assert result.requires_grad and result.grad_fn is not None
    weights = Tensor.from_numpy(np.random.default_rng(2).normal(size=result.shape))
    lt.sum(result * weights).backward()
    lt.sum(lt.einsum(expression, *theirs) * weights).backward()
    for mine, reference in zip(ours, theirs):
        assert mine.grad is not None and reference.grad is not None
        np.testing.assert_allclose(mine.grad.to_numpy(), reference.grad.to_numpy(), atol=1e-12)


@pytest.mark.parametrize(("expression", "shapes"), CASES[:5], ids=[c[0] for c in CASES[:5]])
def test_a_plans_gradients_equal_finite_differences(
    expression: str, shapes: list[tuple[int, ...]]
) -> None:
    operands = leaves(shapes, 3)
    plan = EinsumPlan(expression, *operands)
    assert lt.gradcheck(lambda *xs: plan.execute(*xs), operands)


def test_each_execution_is_recorded_and_their_gradients_accumulate() -> None:
    a, b = leaves([(2, 3), (3, 2)], 4)
    plan = EinsumPlan("ik,kj->ij", a, b)
    lt.sum(plan.execute(a, b) + plan.execute(a, b)).backward()
    expected = 2 * np.ones((2, 2)) @ b.to_numpy().T
    assert a.grad is not None
    np.testing.assert_allclose(a.grad.to_numpy(), expected, atol=1e-12)


def test_a_view_operand_sends_its_gradient_to_its_owners_cells() -> None:
    owner = Tensor.from_numpy(np.arange(12.0).reshape(3, 4), requires_grad=True)
    column_pairs = owner[:, ::2]  # a stepped view: columns 0 and 2
    plan = EinsumPlan("ij->j", column_pairs)
    lt.sum(plan.execute(column_pairs)).backward()
    assert owner.grad is not None
    assert owner.grad.to_numpy().tolist() == [[1.0, 0.0, 1.0, 0.0]] * 3


def test_a_number_operand_and_no_grad() -> None:
    (x,) = leaves([(3,)], 5)
    plan = EinsumPlan("i,->i", x, 2.0)
    lt.sum(plan.execute(x, 2.0)).backward()
    assert x.grad is not None and x.grad.to_numpy().tolist() == [2.0, 2.0, 2.0]
    with lt.no_grad():
        assert not plan.execute(x, 2.0).requires_grad
    assert not plan.execute(x.detach(), 2.0).requires_grad


def test_execute_into_refuses_an_operand_that_requires_grad_outside_no_grad() -> None:
    a, b = leaves([(2, 3), (3, 2)], 6)
    plan = EinsumPlan("ik,kj->ij", a, b)
    out = Tensor.zeros([2, 2], dtype="float64")
    with pytest.raises(OutputBufferError, match="requires grad"):
        plan.execute_into(out, a, b)
    assert out.to_numpy().tolist() == [[0.0, 0.0], [0.0, 0.0]]  # nothing was written
    with lt.no_grad():
        plan.execute_into(out, a, b)
    np.testing.assert_allclose(out.to_numpy(), a.to_numpy() @ b.to_numpy(), atol=1e-12)
    assert not out.requires_grad


@pytest.mark.parametrize(
    ("inputs", "output"), [("float32", "float64"), ("float64", "float32"), ("float32", "float16")]
)
@pytest.mark.parametrize("with_c", [False, True])
def test_a_contraction_plan_that_changes_the_dtype_keeps_the_gradient(
    inputs: str, output: str, with_c: bool
) -> None:
    # D is rounded to its dtype once, at the end: that rounding is on the tape too, so the
    # gradient reaches A, B (and C) as through einsum followed by astype.
    rng = np.random.default_rng(7)
    arrays = [rng.normal(size=(2, 3)), rng.normal(size=(3, 4)), rng.normal(size=(4,))]
    ours = [Tensor.from_numpy(x, dtype=inputs, requires_grad=True) for x in arrays]
    theirs = [Tensor.from_numpy(x, dtype=inputs, requires_grad=True) for x in arrays]
    plan = lt.ContractionPlan(ours[0], ours[1], ours[2] if with_c else None, dtype=output)
    result = plan.execute(*ours[:2], ours[2] if with_c else None)
    assert result.dtype == np.dtype(output) and result.requires_grad
    expected = lt.einsum("ik,kj->ij", *theirs[:2])
    if with_c:
        expected = expected + theirs[2]
    expected = lt.astype(expected, output)
    assert np.array_equal(result.to_numpy(), expected.to_numpy())
    weights = Tensor.from_numpy(rng.normal(size=(2, 4)), dtype=output)
    lt.sum(result * weights).backward()
    lt.sum(expected * weights).backward()
    for mine, reference in zip(ours if with_c else ours[:2], theirs):
        assert mine.grad is not None and reference.grad is not None
        assert mine.grad.dtype == np.dtype(inputs)
        # (a float16 gradient may be summed over rows in float16 on one path, float32 on the
        # other: float16's precision)
        tol = 2e-3 if output == "float16" else 1e-6
        np.testing.assert_allclose(
            mine.grad.to_numpy(), reference.grad.to_numpy(), rtol=tol, atol=tol
        )
