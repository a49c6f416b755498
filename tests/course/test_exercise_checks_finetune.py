"""Chapter 14's checks: a right LoRA forward, merge and count pass; each named mistake (the scale
left out or inverted, the update lost on the tape, the base weight written in place, a view, the
frozen weights counted, A or B alone) fails with the rule it broke in the report; the library's
own adapter is refused as a shortcut."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import llmfs.tensor as lt
from llmfs.course.exercise_checks.finetune import (
    check_count_trainable,
    check_lora_forward,
    check_lora_merge,
)
from llmfs.gpt.lora import LoRA


def text(report: Any) -> str:
    return " ".join(repr(report).split())


def lora_forward(x: Any, W: Any, b: Any, A: Any, B: Any, alpha: float) -> Any:
    return x @ W + b + ((x @ A) @ B) * (alpha / A.shape[1])


def lora_merge(W: Any, A: Any, B: Any, alpha: float) -> Any:
    return W + (A @ B) * (alpha / A.shape[1])


def count_trainable(shapes: list[list[int]], rank: int) -> int:
    return sum(rank * (i + o) for i, o in shapes)


def test_right_answers_pass() -> None:
    for check, answer in (
        (check_lora_forward, lora_forward),
        (check_lora_merge, lora_merge),
        (check_count_trainable, count_trainable),
    ):
        report = check(answer, record_attempt=False)
        assert report.passed, text(report)


def _unscaled(x: Any, W: Any, b: Any, A: Any, B: Any, alpha: float) -> Any:
    return x @ W + b + (x @ A) @ B


def _alpha_only(x: Any, W: Any, b: Any, A: Any, B: Any, alpha: float) -> Any:
    return x @ W + b + ((x @ A) @ B) * alpha


def _inverted(x: Any, W: Any, b: Any, A: Any, B: Any, alpha: float) -> Any:
    return x @ W + b + ((x @ A) @ B) * (A.shape[1] / alpha)


def _in_numpy(x: Any, W: Any, b: Any, A: Any, B: Any, alpha: float) -> Any:
    x, W, b, A, B = (t.to_numpy() for t in (x, W, b, A, B))
    return lt.Tensor.from_numpy(x @ W + b + (alpha / A.shape[1]) * ((x @ A) @ B))


def _no_update(x: Any, W: Any, b: Any, A: Any, B: Any, alpha: float) -> Any:
    return x @ W + b


@pytest.mark.parametrize(
    ("answer", "rule"),
    [
        (_unscaled, "scaled by alpha / r"),
        (_alpha_only, "scaled by alpha / r"),
        (_inverted, "alpha divided by the rank"),
        (_in_numpy, "tensor operations"),
        (_no_update, "adds the low-rank update"),
    ],
)
def test_forward_mistakes_are_named(answer: Any, rule: str) -> None:
    report = check_lora_forward(answer, record_attempt=False)
    assert not report.passed
    assert rule in text(report)


def _written_in_place(W: Any, A: Any, B: Any, alpha: float) -> Any:
    update = (A @ B).to_numpy() * (alpha / A.shape[1])
    with W.mutate() as storage:
        storage.writable_array()[...] += update.reshape(-1)
    return W


def _a_view(W: Any, A: Any, B: Any, alpha: float) -> Any:
    return lora_merge(W, A, B, alpha).view(W.shape)


def _merge_unscaled(W: Any, A: Any, B: Any, alpha: float) -> Any:
    return W + A @ B


@pytest.mark.parametrize(
    ("answer", "rule"),
    [
        (_written_in_place, "merge must leave W as it is"),
        (_a_view, "must be a new owner"),
        (_merge_unscaled, "scaled by alpha / r"),
    ],
)
def test_merge_mistakes_are_named(answer: Any, rule: str) -> None:
    report = check_lora_merge(answer, record_attempt=False)
    assert not report.passed
    assert rule in text(report)


@pytest.mark.parametrize(
    ("answer", "rule"),
    [
        (lambda shapes, r: sum(r * (i + o) + i * o for i, o in shapes), "frozen weights W"),
        (lambda shapes, r: sum(r * i for i, _ in shapes), "count B too"),
        (lambda shapes, r: sum(r * o for _, o in shapes), "count A too"),
        (lambda shapes, r: sum(i + o for i, o in shapes), "the rank multiplies both"),
        (lambda shapes, r: sum(r * i * o for i, o in shapes), "not r * in * out"),
    ],
)
def test_count_mistakes_are_named(answer: Any, rule: str) -> None:
    report = check_count_trainable(answer, record_attempt=False)
    assert not report.passed
    assert rule in text(report)


def test_the_library_adapter_is_a_refused_shortcut() -> None:
    def via_library(x: Any, W: Any, b: Any, A: Any, B: Any, alpha: float) -> Any:
        adapter = LoRA(W, A.shape[1], alpha)
        adapter.A, adapter.B = A, B
        return adapter(x) + b

    def merged_by_library(W: Any, A: Any, B: Any, alpha: float) -> Any:
        adapter = LoRA(W, A.shape[1], alpha)
        adapter.A, adapter.B = A, B
        return adapter.merge()

    assert "LoRA.__call__" in text(check_lora_forward(via_library, record_attempt=False))
    assert "LoRA.merge" in text(check_lora_merge(merged_by_library, record_attempt=False))


def test_the_counts_are_the_library_s() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        shapes = [[int(rng.integers(1, 50)), int(rng.integers(1, 50))] for _ in range(3)]
        rank = int(rng.integers(1, 9))
        want = sum(LoRA(lt.Tensor.zeros(s), rank, 1.0).trainable_parameters() for s in shapes)
        assert count_trainable(shapes, rank) == want
