"""Chapter 10's gradient checks: the closed-form cross-entropy gradient passes and a mean over the
count of positions fails; accumulation passes only when it clears the old gradients and weighs
each part by its share of the batch, and names which of the two went wrong."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from llmfs.course.exercise_checks.accumulate import (
    check_accumulate_grads,
    check_cross_entropy_grad,
    whole_batch_grads,
)


def ce_grad(logits: np.ndarray, targets: np.ndarray, weights: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    probs = np.exp(shifted)
    probs /= probs.sum(axis=-1, keepdims=True)
    return (probs - np.eye(logits.shape[-1])[targets]) * (weights / weights.sum())[..., None]


def by_count(logits: np.ndarray, targets: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return ce_grad(logits, targets, weights) * weights.sum() / weights.size


def overflowing(logits: np.ndarray, targets: np.ndarray, weights: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        probs = np.exp(logits)
        probs = probs / probs.sum(axis=-1, keepdims=True)
    return (probs - np.eye(logits.shape[-1])[targets]) * (weights / weights.sum())[..., None]


@pytest.mark.parametrize("seed", [None, 77])
def test_the_closed_form_passes(seed: int | None) -> None:
    assert check_cross_entropy_grad(ce_grad, seed=seed, record_attempt=False).passed


def test_a_mean_over_the_count_and_an_overflowing_softmax_fail_naming_the_rule() -> None:
    text = repr(check_cross_entropy_grad(by_count, record_attempt=False))
    assert "weighted MEAN" in text
    text = repr(check_cross_entropy_grad(overflowing, record_attempt=False))
    assert "largest logit" in text


def _total(parts: Any) -> float:
    return sum(float(np.sum(w)) for _, _, w in parts)


def accumulate(leaves: Any, parts: Any, loss_of: Any) -> None:
    for leaf in leaves.values():
        leaf.grad = None
    for x, t, w in parts:
        (loss_of(leaves, x, t, w) * (float(np.sum(w)) / _total(parts))).backward()


def keeps_old(leaves: Any, parts: Any, loss_of: Any) -> None:
    for x, t, w in parts:
        (loss_of(leaves, x, t, w) * (float(np.sum(w)) / _total(parts))).backward()


def by_parts(leaves: Any, parts: Any, loss_of: Any) -> None:
    for leaf in leaves.values():
        leaf.grad = None
    for x, t, w in parts:
        (loss_of(leaves, x, t, w) * (1.0 / len(parts))).backward()


def unscaled(leaves: Any, parts: Any, loss_of: Any) -> None:
    for leaf in leaves.values():
        leaf.grad = None
    for x, t, w in parts:
        loss_of(leaves, x, t, w).backward()


@pytest.mark.parametrize("seed", [None, 5])
def test_accumulation_that_clears_and_weighs_passes(seed: int | None) -> None:
    assert check_accumulate_grads(accumulate, seed=seed, record_attempt=False).passed


@pytest.mark.parametrize(
    ("wrong", "named"),
    [(keeps_old, "zero_grad"), (by_parts, "share of the whole batch"), (unscaled, "share")],
)
def test_each_wrong_accumulation_fails_naming_its_mistake(wrong: Any, named: str) -> None:
    report = check_accumulate_grads(wrong, record_attempt=False)
    assert not report.passed
    assert named in " ".join(repr(report).split())


def test_two_halves_equal_the_whole_batch_to_1e_12() -> None:
    case = {
        "rows": 8,
        "features": 3,
        "vocab": 5,
        "cuts": [4],
        "weights": "ones",
        "stale": False,
        "seed": 3,
    }
    from llmfs.course.exercise_checks.accumulate import _leaves, _parts, linear_loss

    leaves = _leaves(case)
    accumulate(leaves, _parts(case), linear_loss)
    want = whole_batch_grads(case)
    for name, leaf in leaves.items():
        assert leaf.grad is not None
        assert np.abs(leaf.grad.to_numpy() - want[name]).max() <= 1e-12
