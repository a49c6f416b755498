"""The text model's training run: next-token language modelling on the tensor engine, the
chapter-10 engine unchanged on another task (see :mod:`llmfs.gpt.text_model`)."""

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
from llmfs.gpt.model import GPTConfig, Params, init_params
from llmfs.gpt.tensor_train import cross_entropy, to_numpy_params, trainable
from llmfs.gpt.text_corpus import (
    Split,
    held_out_loss,
    windows,
)
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
    :func:`windows` of ``parts.train`` with the tensor engine (forward of
    :mod:`llmfs.gpt.tensor_model`, autograd, :func:`cross_entropy` on every position,
    :class:`AdamW`, :func:`learning_rate`) on ``backend`` in ``dtype``. The loss curve has the
    mean of every ``cfg.log_every`` steps (and of the last, shorter window); the held-out loss
    (:func:`held_out_loss` of ``parts.held_out``) is measured every ``cfg.eval_every`` steps and
    at the last. ``log`` gets one line per logged point; ``progress`` one update per step.

    The result holds the parameters after the last step, or with ``keep_best`` those of the
    measurement with the lowest held-out loss (the first, on a tie), as nanoGPT keeps the
    checkpoint of its best validation loss: a model this size memorises a corpus this small,
    and past that point more steps lower the training loss and raise the held-out one."""
    start = init_params(config, seed=cfg.seed)
    every = np.ones((cfg.batch_size, config.n_ctx))
    result = TextTrainResult(start)
    window: list[float] = []
    best = math.inf
    with use_backend(backend):
        w, optimizer = trainable(start, cfg, dtype)
        for step, batch in enumerate(windows(parts.train, config.n_ctx, cfg)):
            loss = cross_entropy(
                tensor_model.forward(w, config, batch[:, :-1]), batch[:, 1:], every
            )
            loss.backward()
            lr = learning_rate(step, cfg)
            optimizer.step(lr)
            optimizer.zero_grad()
            value = float(loss.item())
            result.losses.append(value)
            window.append(value)
            if progress is not None:
                progress.update(value)
            done = step + 1
            if done % cfg.log_every and done != cfg.steps:
                continue
            mean = float(np.mean(window))
            window = []
            result.curve.append((done, mean))
            line = f"step {done:5d}  lr {lr:.2e}  loss {mean:.4f}"
            if done % cfg.eval_every == 0 or done == cfg.steps:
                now = to_numpy_params(w)
                held = held_out_loss(now, config, parts.held_out)
                result.held_out_curve.append((done, held))
                if keep_best and held < best:
                    best, result.params, result.selected_step = held, now, done
                line += f"  held-out loss {held:.4f}"
            if log is not None:
                log(line)
        if not keep_best:
            result.params, result.selected_step = to_numpy_params(w), cfg.steps
    return result
