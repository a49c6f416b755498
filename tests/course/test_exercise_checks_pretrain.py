"""Chapter 13's checks: a right batch loader, validation loss, clipping, checkpoint and loop
pass; each named mistake fails with the rule it broke in the report; the library's own functions
are refused as shortcuts."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

import llmfs.tensor as lt
from llmfs.course.exercise_checks.pretrain import (
    check_clip_grad_norm,
    check_estimate_loss,
    check_get_batch,
    check_save_and_load,
    check_train_text,
)
from llmfs.gpt import tensor_model as tm
from llmfs.gpt.experiment import TrainConfig, learning_rate
from llmfs.gpt.grad_clip import clip_grad_norm as library_clip
from llmfs.gpt.model import GPTConfig
from llmfs.gpt.tensor_train import cross_entropy, trainable
from llmfs.gpt.text_batches import get_batch as library_batch
from llmfs.gpt.train_state import TrainState, load_state, save_state


def text(report: Any) -> str:
    return " ".join(repr(report).split())


def get_batch(stream: Any, n_ctx: int, batch_size: int, rng: Any) -> Any:
    starts = rng.integers(0, len(stream) - n_ctx, size=batch_size)
    windows = np.asarray(stream)[starts[:, None] + np.arange(n_ctx + 1)]
    return windows[:, :-1], windows[:, 1:]


def estimate_loss(model: Any, batches: Any) -> float:
    total = 0.0
    with lt.no_grad():
        for x, y in batches:
            total += float(cross_entropy(model(x), y, np.ones(y.shape)).item())
    return total / len(batches)


def clip_grad_norm(params: Any, max_norm: float) -> float:
    grads = [p.grad.to_numpy() for p in params.values() if p.grad is not None]
    norm = math.sqrt(sum(float((g**2).sum()) for g in grads))
    scale = min(1.0, max_norm / (norm + 1e-6))
    for p in params.values():
        if p.grad is not None:
            p.grad = lt.Tensor.from_numpy(p.grad.to_numpy() * scale)
    return norm


def save_checkpoint(path: Any, state: TrainState, rng_state: bool = True) -> None:
    arrays = {f"weights/{n}": p.to_numpy() for n, p in state.w.items()}
    for n, m in state.optimizer.exp_avg.items():
        arrays[f"exp_avg/{n}"] = m.to_numpy()
        arrays[f"exp_avg_sq/{n}"] = state.optimizer.exp_avg_sq[n].to_numpy()
    meta = {
        "step": state.step,
        "t": state.optimizer.steps,
        "rng": state.rng.bit_generator.state if rng_state else None,
        "config": vars(state.config),
        "cfg": vars(state.cfg),
    }
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


def load_checkpoint(path: Any, moments: bool = True) -> TrainState:
    with np.load(path) as archive:
        arrays = {k: archive[k] for k in archive.files}
    meta = json.loads(arrays.pop("meta").tobytes())
    config, cfg = GPTConfig(**meta["config"]), TrainConfig(**meta["cfg"])
    params = {k[8:]: v for k, v in arrays.items() if k.startswith("weights/")}
    w, optimizer = trainable(params, cfg, np.float64)
    if moments:
        for n in params:
            if f"exp_avg/{n}" in arrays:
                optimizer.exp_avg[n] = lt.Tensor.from_numpy(arrays[f"exp_avg/{n}"])
                optimizer.exp_avg_sq[n] = lt.Tensor.from_numpy(arrays[f"exp_avg_sq/{n}"])
        optimizer.steps = meta["t"]
    rng = np.random.default_rng(cfg.seed)
    if meta["rng"] is not None:
        rng.bit_generator.state = meta["rng"]
    return TrainState(w, optimizer, meta["step"], rng, config, cfg)


def save_and_load(state: TrainState, path: Any) -> TrainState:
    save_checkpoint(path, state)
    return load_checkpoint(path)


def train(
    state: TrainState, stream: Any, until: int, clip: Any = None, on_step: Any = None
) -> None:
    config, cfg = state.config, state.cfg
    while state.step < until:
        x, y = get_batch(stream, config.n_ctx, cfg.batch_size, state.rng)
        loss = cross_entropy(tm.forward(state.w, config, x), y, np.ones(y.shape))
        loss.backward()
        if clip is not None:
            clip_grad_norm(state.w, clip)
        state.optimizer.step(learning_rate(state.step, cfg))
        state.optimizer.zero_grad()
        if on_step is not None:
            on_step(state.step, float(loss.item()))
        state.step += 1


@pytest.mark.parametrize(
    ("check", "answer"),
    [
        (check_get_batch, get_batch),
        (check_estimate_loss, estimate_loss),
        (check_clip_grad_norm, clip_grad_norm),
        (check_save_and_load, save_and_load),
        (check_train_text, train),
    ],
)
def test_a_right_answer_passes_on_fresh_seeds(check: Any, answer: Any) -> None:
    # Another seed than the notebook's: the cases a learner never saw.
    report = check(answer, seed=11, record_attempt=False)
    assert report.passed, text(report)


def _batch_one_short(stream: Any, n_ctx: int, batch_size: int, rng: Any) -> Any:
    starts = rng.integers(0, len(stream) - n_ctx - 1, size=batch_size)
    windows = np.asarray(stream)[starts[:, None] + np.arange(n_ctx + 1)]
    return windows[:, :-1], windows[:, 1:]


def _batch_unshifted(stream: Any, n_ctx: int, batch_size: int, rng: Any) -> Any:
    x, _ = get_batch(stream, n_ctx, batch_size, rng)
    return x, x.copy()


def _loss_recorded(model: Any, batches: Any) -> float:
    return float(
        np.mean([float(cross_entropy(model(x), y, np.ones(y.shape)).item()) for x, y in batches])
    )


def _loss_summed(model: Any, batches: Any) -> float:
    return estimate_loss(model, batches) * len(batches) * batches[0][1].size


def _loss_perplexity(model: Any, batches: Any) -> float:
    return math.exp(estimate_loss(model, batches))


def _clip_each(params: Any, max_norm: float) -> float:
    total = 0.0
    for p in params.values():
        g = p.grad.to_numpy()
        norm = float(np.sqrt((g**2).sum()))
        total += norm**2
        p.grad = lt.Tensor.from_numpy(g * min(1.0, max_norm / norm))
    return math.sqrt(total)


def _clip_after(params: Any, max_norm: float) -> float:
    clip_grad_norm(params, max_norm)
    return math.sqrt(sum(float((p.grad.to_numpy() ** 2).sum()) for p in params.values()))


def _no_rng(state: TrainState, path: Any) -> TrainState:
    save_checkpoint(path, state, rng_state=False)
    return load_checkpoint(path)


def _no_moments(state: TrainState, path: Any) -> TrainState:
    save_checkpoint(path, state)
    return load_checkpoint(path, moments=False)


def _train_clip_late(
    state: TrainState, stream: Any, until: int, clip: Any = None, on_step: Any = None
) -> None:
    config, cfg = state.config, state.cfg
    while state.step < until:
        x, y = get_batch(stream, config.n_ctx, cfg.batch_size, state.rng)
        loss = cross_entropy(tm.forward(state.w, config, x), y, np.ones(y.shape))
        loss.backward()
        state.optimizer.step(learning_rate(state.step, cfg))
        if clip is not None:
            clip_grad_norm(state.w, clip)
        state.optimizer.zero_grad()
        if on_step is not None:
            on_step(state.step, float(loss.item()))
        state.step += 1


@pytest.mark.parametrize(
    ("check", "wrong", "rule"),
    [
        (check_get_batch, _batch_one_short, "integers(low, high) excludes high"),
        (check_get_batch, _batch_unshifted, "shifted one position left"),
        (check_estimate_loss, _loss_recorded, "measuring must record nothing"),
        (check_estimate_loss, _loss_summed, "the loss is a MEAN"),
        (check_estimate_loss, _loss_perplexity, "not its perplexity"),
        (check_clip_grad_norm, _clip_each, "ONE norm over all the gradients together"),
        (check_clip_grad_norm, _clip_after, "BEFORE clipping"),
        (check_save_and_load, _no_rng, "bit_generator.state"),
        (check_save_and_load, _no_moments, "save exp_avg and exp_avg_sq"),
        (
            check_save_and_load,
            lambda state, path: (save_checkpoint(path, state), state)[1],
            "save and load every parameter",
        ),
        (
            check_train_text,
            _train_clip_late,
            "clip after backward() and before the optimizer's step",
        ),
    ],
)
def test_a_named_mistake_fails_with_its_rule(check: Any, wrong: Any, rule: str) -> None:
    report = check(wrong, record_attempt=False)
    assert not report.passed
    assert rule in text(report), text(report)


@pytest.mark.parametrize(
    ("check", "shortcut"),
    [
        (check_get_batch, library_batch),
        (check_clip_grad_norm, library_clip),
        (check_save_and_load, lambda state, path: load_state(save_state(path, state))),
    ],
)
def test_the_librarys_own_function_is_refused(check: Any, shortcut: Any) -> None:
    report = check(shortcut, record_attempt=False)
    assert not report.passed and "the work this exercise asks you to write yourself" in text(report)
