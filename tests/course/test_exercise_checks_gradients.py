"""Chapter 9's implement checks: right rules pass, the expected wrong ones fail with the rule they
break named, the cases hold the edge cases, and the references the checks compare with agree with
finite differences and with a plain scatter-add written here."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

import llmfs.tensor as lt
from llmfs.course.exercise_checks import CHECKS, SPECS, run_spec
from llmfs.course.exercise_checks.cases import edge_kinds
from llmfs.course.exercise_checks.gradients import (
    GRADCHECK_FUNCTIONS,
    check_expand_backward,
    check_gradcheck,
    check_layer_norm_backward,
    check_softmax_backward,
    check_view_backward,
    layer_norm_grads,
    softmax_grad,
)
from llmfs.course.exercise_checks.spec import draw_cases
from llmfs.gpt import tensor_model as tm
from llmfs.tensor import Tensor, as_strided

IDS = (
    "ch09.view_backward",
    "ch09.expand_backward",
    "ch09.softmax_backward",
    "ch09.layer_norm_backward",
    "ch09.gradcheck",
)


def test_every_chapter_9_check_is_registered_with_its_spec() -> None:
    assert set(IDS) <= set(CHECKS) and set(IDS) <= set(SPECS)


# -- right answers pass, on the visible seed and on a grader's ----------------------------------


def scatter_add(grad: np.ndarray, view: Any) -> np.ndarray:
    buffer = np.zeros(view.owner.size)
    for offset, value in zip(view.logical_offsets(), np.asarray(grad).reshape(-1)):
        buffer[offset] += value
    return buffer


def summed(grad: Any, shape: list[int]) -> Any:
    lead = len(grad.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + k for k, n in enumerate(shape) if n == 1 and grad.shape[lead + k] != 1
    )
    return (lt.sum(grad, axis=axes, keepdims=True) if axes else grad).reshape(shape)


def softmax_vjp(y: Any, g: Any, axis: int) -> Any:
    return y * (g - lt.sum(g * y, axis=axis, keepdims=True))


def ln_backward(x: Any, weight: Any, eps: float, g: Any, *, sum_weight: bool = True) -> Any:
    mean = lt.mean(x, axis=-1, keepdims=True)
    centered = x - mean
    inv = 1.0 / lt.sqrt(lt.mean(centered * centered, axis=-1, keepdims=True) + eps)
    x_hat = centered * inv
    lead = tuple(range(len(x.shape) - 1))
    dweight = lt.sum(g * x_hat, axis=lead) if lead and sum_weight else g * x_hat
    dbias = lt.sum(g, axis=lead) if lead else g
    gh = g * weight
    dx = inv * (
        gh
        - lt.mean(gh, axis=-1, keepdims=True)
        - x_hat * lt.mean(gh * x_hat, axis=-1, keepdims=True)
    )
    return dx, dweight, dbias


def finite_gradcheck(fn: Any, x: Any, eps: float = 1e-6, atol: float = 1e-5) -> bool:
    x.grad = None
    fn(x).backward()
    analytic = x.grad.to_numpy() if x.grad is not None else np.zeros(x.shape)
    values = x.to_numpy()
    for position in np.ndindex(values.shape):
        ends = []
        for step in (eps, -eps):
            moved = values.copy()
            moved[position] += step
            with lt.no_grad():
                ends.append(float(fn(Tensor.from_numpy(moved)).to_numpy()))
        numeric = (ends[0] - ends[1]) / (2 * eps)
        if abs(analytic[position] - numeric) > atol + 1e-3 * abs(numeric):
            return False
    return True


RIGHT = {
    "ch09.view_backward": scatter_add,
    "ch09.expand_backward": summed,
    "ch09.softmax_backward": softmax_vjp,
    "ch09.layer_norm_backward": ln_backward,
    "ch09.gradcheck": finite_gradcheck,
}


@pytest.mark.parametrize("exercise_id", IDS)
@pytest.mark.parametrize("seed", [None, 123])
def test_a_right_rule_passes_every_case(exercise_id: str, seed: int | None) -> None:
    report = run_spec(SPECS[exercise_id], RIGHT[exercise_id], seed=seed, record_attempt=False)
    assert report.passed, repr(report)


def test_a_view_rule_that_returns_a_list_passes_too() -> None:
    report = check_view_backward(lambda g, v: scatter_add(g, v).tolist(), record_attempt=False)
    assert report.passed, repr(report)


# -- the expected wrong rules fail, naming the rule they break -----------------------------------


def words(text: str) -> str:
    """The report's text with its line wrapping undone."""
    return " ".join(text.split())


def test_assigning_instead_of_adding_fails_and_names_the_sum() -> None:
    def assigned(grad: np.ndarray, view: Any) -> np.ndarray:
        buffer = np.zeros(view.owner.size)
        for offset, value in zip(view.logical_offsets(), grad.reshape(-1)):
            buffer[offset] = value
        return buffer

    text = repr(check_view_backward(assigned, record_attempt=False))
    assert "✗ not yet" in text and "receives the SUM of their gradients" in words(text), text
    # The smallest failing case is a broadcast (stride 0), drawn as its offset table.
    assert '"strides": [0]' in text.split("smallest failing case:")[1].splitlines()[0]


def test_gradients_at_the_views_positions_fail_and_name_the_storage_cells() -> None:
    def at_positions(grad: np.ndarray, view: Any) -> np.ndarray:
        buffer = np.zeros(view.owner.size)
        buffer[: grad.size] = grad.reshape(-1)
        return buffer

    text = words(repr(check_view_backward(at_positions, record_attempt=False)))
    assert "✗ not yet" in text and "each belongs to the storage cell its position" in text, text


def test_a_gradient_in_the_views_shape_fails_and_names_the_owners_storage() -> None:
    text = repr(check_view_backward(lambda grad, view: grad, record_attempt=False))
    assert "✗ not yet" in text and "OWNER's storage" in text, text


def test_an_expand_backward_that_does_not_sum_fails_and_says_sum() -> None:
    report = check_expand_backward(lambda grad, shape: grad, record_attempt=False)
    assert report.status == "failed"
    assert "sum over the broadcast axes" in words(repr(report))


def test_an_expand_backward_that_sums_only_the_leading_axes_fails() -> None:
    def leading_only(grad: Any, shape: list[int]) -> Any:
        lead = len(grad.shape) - len(shape)
        return lt.sum(grad, axis=tuple(range(lead))) if lead else grad

    assert check_expand_backward(leading_only, record_attempt=False).status == "failed"


def test_a_softmax_backward_without_the_shared_term_fails() -> None:
    report = check_softmax_backward(lambda y, g, axis: y * g, record_attempt=False)
    assert report.status == "failed" and report.right < report.total


def test_a_layer_norm_backward_that_forgets_to_sum_the_weight_fails() -> None:
    def unsummed(x: Any, weight: Any, eps: float, g: Any) -> Any:
        return ln_backward(x, weight, eps, g, sum_weight=False)

    report = check_layer_norm_backward(unsummed, record_attempt=False)
    assert report.status == "failed", repr(report)
    assert '"dweight": "shape' in repr(report)


def test_a_layer_norm_backward_through_x_hat_only_fails() -> None:
    def no_mean_terms(x: Any, weight: Any, eps: float, g: Any) -> Any:
        _, dweight, dbias = ln_backward(x, weight, eps, g)
        mean = lt.mean(x, axis=-1, keepdims=True)
        inv = 1.0 / lt.sqrt(lt.mean((x - mean) * (x - mean), axis=-1, keepdims=True) + eps)
        return g * weight * inv, dweight, dbias

    assert check_layer_norm_backward(no_mean_terms, record_attempt=False).status == "failed"


def test_a_gradcheck_that_always_agrees_fails_on_the_detached_functions() -> None:
    text = words(repr(check_gradcheck(lambda fn, x, eps, atol: True, record_attempt=False)))
    assert "✗ not yet" in text and "detaches a factor" in text, text


def test_a_gradcheck_with_the_verdict_reversed_fails_on_the_right_functions() -> None:
    text = words(
        repr(
            check_gradcheck(
                lambda fn, x, eps, atol: not finite_gradcheck(fn, x), record_attempt=False
            )
        )
    )
    assert "✗ not yet" in text and "this backward is right" in text, text


# -- the cases hold the edge cases ---------------------------------------------------------------


def test_the_view_cases_hold_every_edge_kind_zero_strides_and_overlaps() -> None:
    cases = [case for (case,) in draw_cases(SPECS["ch09.view_backward"])]
    kinds = set().union(*(edge_kinds(c["shape"], c["strides"]) for c in cases))
    assert kinds >= {"scalar", "empty", "size-1", "negative stride"}
    assert any(0 in c["strides"] and max(c["shape"], default=0) > 1 for c in cases)
    overlapping = [
        c
        for c in cases
        if 0 not in c["strides"]
        and len(
            set(
                as_strided(
                    Tensor.zeros([c["storage"]]), c["shape"], c["strides"], c["base_offset"]
                ).logical_offsets()
            )
        )
        < int(np.prod(c["shape"]))
    ]
    assert overlapping


def test_the_broadcast_cases_hold_scalars_empty_targets_and_leading_axes() -> None:
    cases = [case for (case,) in draw_cases(SPECS["ch09.expand_backward"])]
    assert any(c["shape"] == [] and c["target"] for c in cases)
    assert any(0 in c["target"] for c in cases)
    assert any(len(c["target"]) > len(c["shape"]) for c in cases)
    assert any(1 in c["shape"] and c["target"][-len(c["shape"]) :] != c["shape"] for c in cases)


@pytest.mark.parametrize("exercise_id", ["ch09.softmax_backward", "ch09.layer_norm_backward"])
def test_the_float_cases_hold_empty_and_size_1_axes(exercise_id: str) -> None:
    shapes = [case["shape"] for (case,) in draw_cases(SPECS[exercise_id])]
    assert any(0 in shape for shape in shapes)
    assert any(1 in shape for shape in shapes)
    assert any(len(shape) == 1 for shape in shapes)


def test_the_gradcheck_cases_mix_right_and_wrong_backwards_and_shapes() -> None:
    cases = [case for (case,) in draw_cases(SPECS["ch09.gradcheck"])]
    verdicts = {GRADCHECK_FUNCTIONS[c["fn"]][1] for c in cases}
    assert verdicts == {True, False}
    assert any(c["shape"] == [] for c in cases)
    assert any(0 in c["shape"] for c in cases)


# -- the references agree with finite differences and with a scatter-add written here ------------


def test_the_view_reference_is_a_plain_scatter_add_through_the_offset_formula() -> None:
    spec = SPECS["ch09.view_backward"]
    for (case,) in draw_cases(spec, seed=99):
        grad = np.array(case["grad"], dtype=float).reshape(case["shape"])
        buffer = np.zeros(case["storage"])
        for coordinate in np.ndindex(*case["shape"]):
            offset = case["base_offset"] + sum(i * s for i, s in zip(coordinate, case["strides"]))
            buffer[offset] += grad[coordinate]
        assert spec.reference(case) == buffer.tolist(), case


def numeric_gradient(f: Any, values: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    out = np.zeros_like(values)
    for position in np.ndindex(values.shape):
        ends = []
        for step in (eps, -eps):
            moved = values.copy()
            moved[position] += step
            ends.append(f(moved))
        out[position] = (ends[0] - ends[1]) / (2 * eps)
    return out


def test_softmaxs_reference_gradient_equals_finite_differences() -> None:
    rng = np.random.default_rng(5)
    for shape, axis in (([3], 0), ([2, 4], -1), ([3, 2], 0), ([1, 2, 3], 1)):
        x, g = rng.normal(0, 2, shape), rng.normal(0, 1, shape)

        def loss(values: np.ndarray, axis: int = axis, g: np.ndarray = g) -> float:
            e = np.exp(values - values.max(axis=axis, keepdims=True))
            return float((g * e / e.sum(axis=axis, keepdims=True)).sum())

        y = tm.softmax(Tensor.from_numpy(x), axis=axis)
        ours = softmax_grad(y, Tensor.from_numpy(g), axis)
        np.testing.assert_allclose(ours, numeric_gradient(loss, x), atol=1e-7)


def test_layer_norms_reference_gradients_equal_finite_differences() -> None:
    rng = np.random.default_rng(6)
    for shape in ([4], [2, 3], [2, 1, 5], [3, 1]):
        x, w, g = rng.normal(1, 2, shape), rng.normal(1, 0.5, shape[-1]), rng.normal(0, 1, shape)

        def forward(values: np.ndarray, weight: np.ndarray) -> np.ndarray:
            mean = values.mean(-1, keepdims=True)
            var = ((values - mean) ** 2).mean(-1, keepdims=True)
            return (values - mean) / np.sqrt(var + 1e-5) * weight

        dx, dw, db = layer_norm_grads(
            Tensor.from_numpy(x), Tensor.from_numpy(w), 1e-5, Tensor.from_numpy(g)
        )
        np.testing.assert_allclose(
            dx, numeric_gradient(lambda v, g=g, w=w: float((g * forward(v, w)).sum()), x), atol=1e-6
        )
        np.testing.assert_allclose(
            dw, numeric_gradient(lambda v, g=g, x=x: float((g * forward(x, v)).sum()), w), atol=1e-6
        )
        np.testing.assert_allclose(db, g.reshape(-1, shape[-1]).sum(0), atol=1e-12)


def test_each_gradcheck_function_is_right_exactly_when_its_flag_says() -> None:
    rng = random.Random(3)
    for name, (fn, right, least) in GRADCHECK_FUNCTIONS.items():
        for rank in range(least, 3):
            shape = [rng.randint(1, 3) for _ in range(rank)]
            values = np.random.default_rng(rank).uniform(0.5, 1.5, shape)
            x = Tensor.from_numpy(values, requires_grad=True)
            assert finite_gradcheck(fn, x) is right, (name, shape)
