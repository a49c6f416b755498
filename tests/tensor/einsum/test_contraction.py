"""ContractionPlan: D = alpha * (A @ B) + beta * C."""

from __future__ import annotations

import numpy as np
import pytest

from llmfs.tensor import (
    BroadcastError,
    ContractionPlan,
    PlanMismatchError,
    TensorError,
)

from .support import rand


def test_contraction_plan_matches_its_formula() -> None:
    a, b, c = rand(3, 4, seed=1), rand(4, 5, seed=2), rand(3, 5, seed=3)
    plan = ContractionPlan(a, b, c)
    got = plan.execute(a, b, c, alpha=0.5, beta=-2.0)
    want = 0.5 * (a.to_numpy() @ b.to_numpy()) - 2.0 * c.to_numpy()
    np.testing.assert_allclose(got.to_numpy(), want)
    assert plan.output_shape == (3, 5) and plan.output_dtype == np.float64


def test_contraction_plan_without_c_with_batches_and_a_broadcast_bias() -> None:
    a, b = rand(2, 3, 4, seed=1), rand(4, 5, seed=2)
    assert np.allclose(
        ContractionPlan(a, b).execute(a, b, alpha=2.0).to_numpy(),
        2.0 * (a.to_numpy() @ b.to_numpy()),
    )
    bias = rand(5, seed=4)
    got = ContractionPlan(a, b, bias).execute(a, b, bias)
    np.testing.assert_allclose(got.to_numpy(), a.to_numpy() @ b.to_numpy() + bias.to_numpy())


def test_contraction_plan_with_an_expression_and_float16_storage() -> None:
    a = rand(4, 3, dtype="float16", seed=1)
    b = rand(4, 5, dtype="float16", seed=2)
    plan = ContractionPlan(a, b, expression="ki,kj->ij")
    got = plan.execute(a, b)
    assert got.dtype == np.float16 and plan.compute_dtype == np.float32
    want = a.to_numpy().astype(np.float32).T @ b.to_numpy().astype(np.float32)
    np.testing.assert_allclose(got.to_numpy(), want.astype(np.float16), rtol=4e-3, atol=4e-3)


def test_contraction_plan_refuses_a_c_that_does_not_broadcast() -> None:
    with pytest.raises(BroadcastError):
        ContractionPlan(rand(3, 4), rand(4, 5), rand(3, 4))


def test_contraction_plan_checks_the_presence_of_c() -> None:
    a, b, c = rand(2, 2), rand(2, 2), rand(2, 2)
    with pytest.raises(PlanMismatchError, match="presence"):
        ContractionPlan(a, b).execute(a, b, c)
    with pytest.raises(PlanMismatchError, match="presence"):
        ContractionPlan(a, b, c).execute(a, b)
    with pytest.raises(PlanMismatchError, match="dtype"):
        ContractionPlan(a, b, c).execute(a, b, rand(2, 2, dtype="float32"))


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"alpha": "2"}, "alpha must be a real number .*got str '2'"),
        ({"beta": True}, "beta must be a real number .*got bool True"),
        ({"alpha": 10**400}, r"alpha is too large for a float .*1\.8e308"),
    ],
)
def test_contraction_scalars_must_be_real_numbers_that_fit_a_float(kwargs, expected) -> None:
    a, b = rand(2, 2), rand(2, 2)
    plan = ContractionPlan(a, b)
    with pytest.raises(TensorError, match=expected):
        plan.execute(a, b, **kwargs)
