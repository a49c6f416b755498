"""The text model's training loop: next-token language modelling on the tensor engine, the
chapter-10 engine unchanged on another task (see :mod:`llmfs.gpt.text_model`).

One loop serves every run: :func:`train_step` is one step of a :class:`TrainState` (random
windows, forward, cross-entropy, backward, optional clipping, AdamW on the schedule), and
:func:`train_steps` repeats it up to a step, so a run can stop, be saved
(:mod:`llmfs.gpt.train_state`) and go on. :func:`train` is the shipped model's run on top of
it (logging, the held-out loss, keeping the best weights); chapter 13's notebook drives the
same loop with its live plot, progress bar and samples."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llmfs.gpt import tensor_model
from llmfs.gpt.experiment import (
    ProgressBar,
    TrainConfig,
    learning_rate,
)
from llmfs.gpt.grad_clip import clip_grad_norm
from llmfs.gpt.model import GPTConfig, Params, init_params
from llmfs.gpt.tensor_train import cross_entropy, to_numpy_params
from llmfs.gpt.text_batches import check_stream, draw_windows
from llmfs.gpt.text_corpus import (
    Split,
    TextModelError,
    held_out_loss,
)
from llmfs.gpt.train_state import TrainState, start_state
from llmfs.tensor import use_backend

# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------


@dataclass
class TextTrainResult:
    """A run's float64 parameters (those after step ``selected_step``), every step's loss, the
    loss curve (the mean of every ``log_every`` steps) and the held-out loss curve."""

    params: Params
    losses: list[float] = field(default_factory=list)
    curve: list[tuple[int, float]] = field(default_factory=list)
    held_out_curve: list[tuple[int, float]] = field(default_factory=list)
    selected_step: int = 0


@dataclass(frozen=True)
class StepRecord:
    """What one step of :func:`train_steps` did: its number (from 0), the batch's loss, the
    learning rate, and the gradients' global norm before clipping (``None`` without it)."""

    step: int
    loss: float
    lr: float
    grad_norm: float | None


def train_step(state: TrainState, stream: np.ndarray, clip: float | None = None) -> StepRecord:
    """One step of next-token training, nanoGPT's: ``batch_size`` windows of ``stream`` from
    the state's random stream (:func:`~llmfs.gpt.text_batches.draw_windows`), the forward pass
    of :mod:`llmfs.gpt.tensor_model` on the inputs, the mean cross-entropy of EVERY position's
    next token, ``backward()``, clipping by global norm when ``clip`` is given
    (:func:`~llmfs.gpt.grad_clip.clip_grad_norm`), AdamW at the schedule's rate of this step
    (:func:`~llmfs.gpt.experiment.learning_rate`), and the gradients cleared. Advances
    ``state.step`` by one. Run it under the backend the state's tensors live on."""
    config, cfg = state.config, state.cfg
    batch = draw_windows(stream, config.n_ctx, cfg.batch_size, state.rng)
    every = np.ones((cfg.batch_size, config.n_ctx))
    loss = cross_entropy(tensor_model.forward(state.w, config, batch[:, :-1]), batch[:, 1:], every)
    loss.backward()
    norm = clip_grad_norm(state.w, clip) if clip is not None else None
    lr = learning_rate(state.step, cfg)
    state.optimizer.step(lr)
    state.optimizer.zero_grad()
    record = StepRecord(state.step, float(loss.item()), lr, norm)
    state.step += 1
    return record


def train_steps(
    state: TrainState,
    stream: np.ndarray,
    until: int,
    clip: float | None = None,
    on_step: Callable[[StepRecord], Any] | None = None,
) -> None:
    """THE training loop: :func:`train_step` from ``state.step`` until ``until`` steps are
    done (at most ``state.cfg.steps``, where the schedule ends), calling ``on_step`` with each
    step's :class:`StepRecord`. Stopping at any step, saving the state
    (:func:`~llmfs.gpt.train_state.save_state`), loading it and calling this again continues
    the same run bit for bit. Raises :class:`TextModelError` for ``until`` past the
    schedule's end."""
    if until > state.cfg.steps:
        raise TextModelError(
            f"the run's schedule ends at step {state.cfg.steps}; cannot train until {until}"
        )
    stream = check_stream(stream, state.config.n_ctx, "the training stream")
    while state.step < until:
        record = train_step(state, stream, clip)
        if on_step is not None:
            on_step(record)


def train(
    config: GPTConfig,
    cfg: TrainConfig,
    parts: Split,
    log: Callable[[str], Any] | None = None,
    backend: str = "numpy",
    dtype: object = np.float32,
    progress: ProgressBar | None = None,
    keep_best: bool = False,
) -> TextTrainResult:
    """Trains ``config``'s model from :func:`~llmfs.gpt.model.init_params` with ``cfg.seed`` on
    ``parts.train`` by :func:`train_steps` (no clipping; the batches those of :func:`windows`)
    on ``backend`` in ``dtype``. The loss curve has the
    mean of every ``cfg.log_every`` steps (and of the last, shorter window); the held-out loss
    (:func:`held_out_loss` of ``parts.held_out``) is measured every ``cfg.eval_every`` steps and
    at the last. ``log`` gets one line per logged point; ``progress`` one update per step.

    The result holds the parameters after the last step, or with ``keep_best`` those of the
    measurement with the lowest held-out loss (the first, on a tie), as nanoGPT keeps the
    checkpoint of its best validation loss: a model this size memorises a corpus this small,
    and past that point more steps lower the training loss and raise the held-out one."""
    result = TextTrainResult(init_params(config, seed=cfg.seed))
    window: list[float] = []
    best = [math.inf]

    with use_backend(backend):
        state = start_state(config, cfg, dtype)

        def logged(record: StepRecord) -> None:
            result.losses.append(record.loss)
            window.append(record.loss)
            if progress is not None:
                progress.update(record.loss)
            done = record.step + 1
            if done % cfg.log_every and done != cfg.steps:
                return
            mean = float(np.mean(window))
            window.clear()
            result.curve.append((done, mean))
            line = f"step {done:5d}  lr {record.lr:.2e}  loss {mean:.4f}"
            if done % cfg.eval_every == 0 or done == cfg.steps:
                now = to_numpy_params(state.w)
                held = held_out_loss(now, config, parts.held_out)
                result.held_out_curve.append((done, held))
                if keep_best and held < best[0]:
                    best[0], result.params, result.selected_step = held, now, done
                line += f"  held-out loss {held:.4f}"
            if log is not None:
                log(line)

        train_steps(state, parts.train, cfg.steps, on_step=logged)
        if not keep_best:
            result.params, result.selected_step = to_numpy_params(state.w), cfg.steps
    return result
