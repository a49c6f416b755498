"""EinsumPlan: validated once, executed many times, refusing operands of another layout."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import llmfs.tensor as lt
from llmfs.tensor import (
    DTypeError,
    EinsumPlan,
    PlanMismatchError,
    Tensor,
    TensorDescriptor,
)
from llmfs.tensor.einsum import plan as plan_module

from .support import rand


def test_a_plan_is_validated_once_and_executed_many_times() -> None:
    plan = EinsumPlan("bij,bjk->bik", TensorDescriptor((2, 3, 4)), TensorDescriptor((2, 4, 5)))
    assert plan.output_shape == (2, 3, 5) and plan.output_dtype == np.float32
    assert plan.compute_dtype == np.float32
    for seed in range(3):
        a = rand(2, 3, 4, dtype="float32", seed=seed)
        b = rand(2, 4, 5, dtype="float32", seed=seed + 10)
        np.testing.assert_allclose(
            plan.execute(a, b).to_numpy(), a.to_numpy() @ b.to_numpy(), rtol=1e-5
        )


def test_a_plan_takes_layouts_from_operands_and_holds_no_buffers() -> None:
    t = rand(3, 3)
    references = sys.getrefcount(t)
    plan = EinsumPlan("ij->ji", t.view().T)
    assert plan.descriptors[0] == TensorDescriptor((3, 3), (1, 3), "float64")
    assert sys.getrefcount(t) == references  # the plan kept no reference to the operand
    other = rand(3, 3, seed=5)
    assert plan.execute(other.view().T).tolist() == other.tolist()


def test_a_plan_refuses_operands_of_another_layout() -> None:
    plan = EinsumPlan("ij,jk->ik", rand(2, 3), rand(3, 4))
    b = rand(3, 4)
    with pytest.raises(PlanMismatchError, match=r"operand 0 .* shape is \[3, 2\]"):
        plan.execute(rand(3, 2), b)
    with pytest.raises(
        PlanMismatchError, match=r"strides is \[1, 2\] but the plan was made for \[3, 1\]"
    ):
        plan.execute(rand(3, 2).view().T, b)
    with pytest.raises(PlanMismatchError, match="dtype is float32"):
        plan.execute(rand(2, 3, dtype="float32"), b)
    with pytest.raises(PlanMismatchError, match="number of operands"):
        plan.execute(b)
    scalar_plan = EinsumPlan(",i->i", 2.0, rand(3))
    with pytest.raises(PlanMismatchError, match="kind"):
        scalar_plan.execute(rand(3), rand(3))
    assert scalar_plan.execute(3.0, Tensor.from_vec([3], [1.0, 2.0, 3.0])).tolist() == [3, 6, 9]


def test_a_plan_compute_type_cannot_drop_float64() -> None:
    with pytest.raises(DTypeError, match="float64"):
        EinsumPlan("i->i", rand(2), compute="float32")
    plan = EinsumPlan("i->i", rand(2, dtype="float32"), compute="float64")
    assert plan.compute_dtype == np.float64


def test_einsum_plans_each_layout_once_and_remembers_the_plan() -> None:
    a, b = rand(2, 3, 4, dtype="float32", seed=1), rand(2, 4, 5, dtype="float32", seed=2)
    first = plan_module.plan_for("bij,bjk->bik", a, b)
    assert plan_module.plan_for("bij,bjk->bik", a.view(), b) is first  # same layouts, same plan
    other = rand(2, 3, 4, dtype="float32", seed=3)
    assert plan_module.plan_for("bij,bjk->bik", other, b) is first  # the values do not matter
    transposed = rand(2, 4, 3, dtype="float32", seed=4).view().permute(0, 2, 1)
    assert plan_module.plan_for("bij,bjk->bik", transposed, b) is not first  # strides do
    assert plan_module.plan_for("bij,bjk->bik", a, b, dtype="float64") is not first
    np.testing.assert_allclose(
        lt.einsum("bij,bjk->bik", transposed, b).to_numpy(),
        transposed.to_numpy() @ b.to_numpy(),
        rtol=1e-5,
    )
    with pytest.raises(lt.EinsumError):  # errors are raised every time, never remembered
        plan_module.plan_for("bij,bjk->bik", a, a)
    with pytest.raises(lt.EinsumError):
        plan_module.plan_for("bij,bjk->bik", a, a)


def test_the_plan_memory_is_bounded() -> None:
    for size in range(1, plan_module.PLAN_CACHE_SIZE + 10):
        plan_module.plan_for("i->", Tensor.zeros((size,), "float32"))
    assert len(plan_module._PLANS) <= plan_module.PLAN_CACHE_SIZE
