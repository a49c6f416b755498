"""Chapter 10's implement checks: answers written as the NumPy trainer's formulas pass, and the
mistakes a learner makes fail on the drawn cases, with the case shown: the naive softmax (its
overflow and its log(0)), the loss without autograd, AdamW without bias correction or without
decoupled decay, a learning-rate schedule off by one step, a loop that draws its batches in
another order. The references of the checks are the NumPy trainer itself."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import llmfs.tensor as lt
from llmfs.course.exercise_checks import (
    CHECKS,
    SPECS,
    check_adamw_step,
    check_cross_entropy,
    check_learning_rate,
    check_train,
)
from llmfs.course.exercise_checks.spec import draw_cases
from llmfs.course.exercise_checks.training import (
    AGREES,
    adamw_reference,
    cross_entropy_reference,
    train_reference,
)
from llmfs.gpt import task
from llmfs.gpt import tensor_model as tm
from llmfs.gpt import train as numpy_train
from llmfs.gpt.model import GPTConfig, init_params

IDS = ("ch10.cross_entropy", "ch10.learning_rate", "ch10.adamw_step", "ch10.train")


def cross_entropy(logits: Any, targets: Any, weights: Any) -> Any:
    top = lt.max(logits.detach(), axis=-1, keepdims=True)
    shifted = logits - top
    lse = lt.log(lt.sum(lt.exp(shifted), axis=-1))
    onehot = lt.Tensor.from_numpy(np.eye(logits.shape[-1])[targets])
    picked = lt.sum(shifted * onehot, axis=-1)
    w = lt.Tensor.from_numpy(np.asarray(weights, dtype=np.float64))
    return lt.sum((lse - picked) * w) / float(np.sum(weights))


def adamw_step(
    param: Any, grad: Any, m: Any, s: Any, step: int, lr: float, cfg: Any, decay: bool
) -> Any:
    m = cfg.beta1 * m + (1 - cfg.beta1) * grad
    s = cfg.beta2 * s + (1 - cfg.beta2) * grad * grad
    m_hat = m / (1 - cfg.beta1 ** (step + 1))
    s_hat = s / (1 - cfg.beta2 ** (step + 1))
    if decay:
        param = param * (1.0 - lr * cfg.weight_decay)
    return param - lr * m_hat / (np.sqrt(s_hat) + cfg.adam_eps), m, s


def learning_rate(step: int, cfg: Any) -> float:
    if step < cfg.warmup_steps:
        return cfg.learning_rate * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return cfg.learning_rate * (cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * cosine)


def make_train(loss_fn: Any = cross_entropy, order: str = "same") -> Any:
    def train(config: Any, cfg: Any, data: Any, on_step: Any = None) -> Any:
        rng = np.random.default_rng(cfg.seed)
        params = init_params(config, seed=cfg.seed)
        m = {n: np.zeros_like(v) for n, v in params.items()}
        s = {n: np.zeros_like(v) for n, v in params.items()}
        weights = numpy_train.answer_weights(cfg.batch_size)
        losses = []
        for step in range(cfg.steps):
            if order == "reseeded":  # a new generator each step: other batches
                picked = np.random.default_rng(cfg.seed + step).integers(
                    0, len(data), cfg.batch_size
                )
            else:
                picked = rng.integers(0, len(data), size=cfg.batch_size)
            batch = data[picked]
            w = {n: lt.Tensor.from_numpy(v, requires_grad=True) for n, v in params.items()}
            loss = loss_fn(tm.forward(w, config, batch[:, :-1]), batch[:, 1:], weights)
            loss.backward()
            losses.append(float(loss.to_numpy()))
            lr = learning_rate(step, cfg)
            for n in params:
                grad = w[n].grad.to_numpy()
                params[n], m[n], s[n] = adamw_step(
                    params[n], grad, m[n], s[n], step, lr, cfg, numpy_train.decays(n)
                )
        return params, losses

    return train


def test_every_chapter_10_check_is_registered_with_its_spec() -> None:
    assert set(IDS) <= set(CHECKS) and set(IDS) <= set(SPECS)


def test_answers_written_as_the_numpy_trainer_pass_every_check_on_other_seeds() -> None:
    for check, answer in (
        (check_cross_entropy, cross_entropy),
        (check_learning_rate, learning_rate),
        (check_adamw_step, adamw_step),
        (check_train, make_train()),
    ):
        for seed in (0, 3):
            report = check(answer, seed=seed, record_attempt=False)
            assert report.passed, repr(report)


def test_the_train_reference_is_the_numpy_trainer_bit_for_bit() -> None:
    config = GPTConfig(vocab_size=12, n_ctx=8, n_embd=8, n_head=2, n_layer=2)
    cfg = numpy_train.TrainConfig(seed=5, steps=4, batch_size=3, warmup_steps=2, weight_decay=0.2)
    problems = task.all_problems()[::97]
    result = numpy_train.train(config, cfg, problems, problems[:2])
    params, losses = train_reference(config, cfg, task.sequences(problems))
    assert losses == result.losses
    assert all(np.array_equal(params[n], result.params[n]) for n in params)


def test_the_adamw_reference_does_not_change_its_inputs() -> None:
    rng = np.random.default_rng(1)
    arrays = [np.abs(rng.normal(size=(3, 2))) for _ in range(4)]
    copies = [a.copy() for a in arrays]
    adamw_reference(*arrays, 0, 1e-2, numpy_train.TrainConfig(), True)
    assert all(np.array_equal(a, c) for a, c in zip(arrays, copies))


def test_the_loss_reference_is_the_numpy_trainers_where_that_is_finite_and_finite_beyond() -> None:
    config = GPTConfig(vocab_size=12, n_ctx=8, n_embd=8, n_head=2, n_layer=1)
    params = init_params(config, seed=3)
    data = task.sequences(task.all_problems()[:5])
    weights = numpy_train.answer_weights(5)
    loss, _ = numpy_train.loss_and_grads(params, config, data[:, :-1], data[:, 1:], weights)
    logits = numpy_train.forward_with_cache(params, config, data[:, :-1])[0]
    ours, dlogits = cross_entropy_reference(logits, data[:, 1:], weights)
    assert math.isclose(ours, loss, rel_tol=1e-12)
    # dlogits is the loss's gradient: central differences agree.
    bump = np.zeros_like(logits)
    bump[2, 6, 4] = 1e-6
    up = cross_entropy_reference(logits + bump, data[:, 1:], weights)[0]
    down = cross_entropy_reference(logits - bump, data[:, 1:], weights)[0]
    assert (up - down) / 2e-6 == pytest.approx(dlogits[2, 6, 4], rel=1e-6)
    hostile = np.array([[[1000.0, -1000.0, 0.0]]])
    value, grad = cross_entropy_reference(hostile, np.array([[1]]), np.ones((1, 1)))
    assert value == pytest.approx(2000.0) and np.all(np.isfinite(grad))


def _naive(logits: Any, targets: Any, weights: Any) -> Any:
    probs = tm.softmax(logits)  # listed: the chapter asks for the log-sum-exp
    onehot = lt.Tensor.from_numpy(np.eye(logits.shape[-1])[targets])
    picked = lt.sum(probs * onehot, axis=-1)
    w = lt.Tensor.from_numpy(weights)
    return -lt.sum(lt.log(picked) * w) / float(weights.sum())


def _naive_own_softmax(logits: Any, targets: Any, weights: Any) -> Any:
    e = lt.exp(logits)
    probs = e / lt.sum(e, axis=-1, keepdims=True)
    onehot = lt.Tensor.from_numpy(np.eye(logits.shape[-1])[targets])
    w = lt.Tensor.from_numpy(weights)
    return -lt.sum(lt.log(lt.sum(probs * onehot, axis=-1)) * w) / float(weights.sum())


def _through_numpy(logits: Any, targets: Any, weights: Any) -> Any:
    x = logits.to_numpy()
    top = x.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(x - top).sum(axis=-1)) + top[..., 0]
    picked = np.take_along_axis(x, targets[..., None], -1)[..., 0]
    return lt.Tensor.from_numpy(np.asarray(((lse - picked) * weights).sum() / weights.sum()))


def _unweighted(logits: Any, targets: Any, weights: Any) -> Any:
    return cross_entropy(logits, targets, np.ones_like(weights))


def test_a_naive_softmax_fails_on_the_hostile_cases_and_shows_one() -> None:
    from llmfs.course.exercise_checks.spec import run_spec

    report = run_spec(
        replace(SPECS["ch10.cross_entropy"], shortcuts=None),
        _naive_own_softmax,
        record_attempt=False,
    )
    text = repr(report)
    assert report.status == "failed", text
    # Only the hostile cases (every third) fail, and the smallest failing one is shown in full.
    assert report.right is not None and report.total is not None
    assert report.total // 2 <= report.right < report.total
    assert "smallest failing case" in text or '"offset"' in text
    assert "inf or nan" in text


def test_losses_that_leave_the_library_or_ignore_the_weights_fail() -> None:
    text = repr(check_cross_entropy(_through_numpy, record_attempt=False))
    assert "no gradient" in text
    assert check_cross_entropy(_unweighted, record_attempt=False).status == "failed"
    assert "tensor_model.softmax" in repr(check_cross_entropy(_naive, record_attempt=False))


@pytest.mark.parametrize(
    "mistake",
    ["no bias correction", "coupled decay", "decay ignored", "eps inside the root", "in place"],
)
def test_adamw_mistakes_fail_and_an_in_place_update_is_judged_by_its_values(mistake: str) -> None:
    def answer(
        param: Any, grad: Any, m: Any, s: Any, step: int, lr: float, cfg: Any, decay: bool
    ) -> Any:
        if mistake == "in place":  # a correct update that writes into its arguments
            new = adamw_step(param, grad, m, s, step, lr, cfg, decay)
            param[...], m[...], s[...] = new
            return param, m, s
        if mistake == "coupled decay" and decay:
            grad = grad + cfg.weight_decay * param
            decay = False
        m = cfg.beta1 * m + (1 - cfg.beta1) * grad
        s = cfg.beta2 * s + (1 - cfg.beta2) * grad * grad
        m_hat, s_hat = m, s
        if mistake != "no bias correction":
            m_hat = m / (1 - cfg.beta1 ** (step + 1))
            s_hat = s / (1 - cfg.beta2 ** (step + 1))
        if decay and mistake != "decay ignored":
            param = param * (1.0 - lr * cfg.weight_decay)
        if mistake == "eps inside the root":
            return param - lr * m_hat / np.sqrt(s_hat + cfg.adam_eps), m, s
        return param - lr * m_hat / (np.sqrt(s_hat) + cfg.adam_eps), m, s

    report = check_adamw_step(answer, record_attempt=False)
    assert report.passed == (mistake == "in place"), repr(report)


@pytest.mark.parametrize("mistake", ["warm-up off by one", "no floor", "no clamp", "linear decay"])
def test_learning_rate_mistakes_fail(mistake: str) -> None:
    def answer(step: int, cfg: Any) -> float:
        if step < cfg.warmup_steps:
            return (
                cfg.learning_rate
                * (step + (0 if mistake == "warm-up off by one" else 1))
                / cfg.warmup_steps
            )
        progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
        if mistake != "no clamp":
            progress = min(1.0, progress)
        shape = (
            1.0 - progress
            if mistake == "linear decay"
            else 0.5 * (1.0 + math.cos(math.pi * progress))
        )
        floor = 0.0 if mistake == "no floor" else cfg.min_lr_ratio
        return cfg.learning_rate * (floor + (1.0 - floor) * shape)

    assert check_learning_rate(answer, record_attempt=False).status == "failed"


def test_a_loop_that_draws_its_batches_in_another_order_fails_and_says_where() -> None:
    report = check_train(make_train(order="reseeded"), record_attempt=False)
    text = repr(report)
    assert report.status == "failed", text
    assert AGREES in text  # the expected side


def test_a_loop_calling_the_numpy_trainer_is_refused() -> None:
    def shortcut(config: Any, cfg: Any, data: Any, on_step: Any = None) -> Any:
        return train_reference(config, cfg, data)

    text = repr(check_train(shortcut, record_attempt=False))
    assert "train_reference" in text and "the work this exercise asks you to write yourself" in text


def test_cases_include_the_edges_each_exercise_is_about() -> None:
    ce = [c[0] for c in draw_cases(SPECS["ch10.cross_entropy"])]
    assert any(abs(c["offset"]) >= 800 for c in ce) and any(c["spread"] >= 60 for c in ce)
    assert {c["weights"] for c in ce} == {"ones", "mask", "fractional"}
    adam = [c[0] for c in draw_cases(SPECS["ch10.adamw_step"])]
    assert any(0 in c["shape"] for c in adam)
    assert {1e-12, 1e100} <= {c["grad_scale"] for c in adam}
    assert any(c["step"] == 0 for c in adam) and {True, False} == {c["decay"] for c in adam}
    for seed in range(20):  # no beta reads 1 (the bias correction's 1 - beta ** t would be 0)
        drawn = [c[0] for c in draw_cases(SPECS["ch10.adamw_step"], seed=seed)]
        assert all(c["beta1"] < 1 and c["beta2"] < 1 for c in drawn)
    lr = [c[0] for c in draw_cases(SPECS["ch10.learning_rate"])]
    assert any(c["warmup_steps"] == 0 for c in lr)
    assert any(c["step"] > c["steps"] for c in lr)
    assert any(c["steps"] <= c["warmup_steps"] for c in lr)
