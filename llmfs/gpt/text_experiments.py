"""Chapter 13's two small experiments on the shipped corpus, each a pure function of its
settings, computed once per process (a predict exercise's check evaluates its expression in a
fresh namespace, and must not train the model again):

* :func:`first_updates`: a small GPT trained ``resume_at`` steps, saved, and resumed twice, with
  AdamW's state and with a fresh AdamW over the same weights; the norm of the change of all the
  weights in the first step after resuming, for each.
* :func:`memorisation`: a small GPT trained on a tiny slice of the training stream, its loss on
  fixed batches of the slice and of the held-out stream measured every ``measure_every`` steps,
  and the parameters of the lowest held-out loss (nanoGPT's rule for the checkpoint it keeps).

Both use the library's loop (:func:`~llmfs.gpt.text_training.train_steps`) and checkpoint
(:mod:`llmfs.gpt.train_state`), the answer key of the chapter's exercises, on one BLAS thread
(:func:`~llmfs.gpt.experiment.blas_threads`): a second thread makes these small products no
faster, spins on a busy machine, and may change the last bits of a float32 run.
"""

from __future__ import annotations

import functools
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from llmfs.gpt import tensor_model
from llmfs.gpt.experiment import TrainConfig, blas_threads
from llmfs.gpt.model import GPTConfig, Params
from llmfs.gpt.text_corpus import VOCAB_SIZE, corpus_text, load_tokenizer, split
from llmfs.gpt.text_eval import estimate_loss, fixed_batches
from llmfs.gpt.text_training import StepRecord, train_steps
from llmfs.gpt.train_state import TrainState, load_state, save_state, start_state, state_params


@functools.lru_cache(maxsize=1)
def corpus_ids() -> np.ndarray:
    """The shipped corpus encoded by the shipped tokenizer (int64, read-only), once per process."""
    ids = np.asarray(load_tokenizer().encode(corpus_text()), dtype=np.int64)
    ids.flags.writeable = False
    return ids


def _small(n_embd: int = 32) -> GPTConfig:
    return GPTConfig(vocab_size=VOCAB_SIZE, n_ctx=32, n_embd=n_embd, n_head=2, n_layer=1)


def _update_norm(state: TrainState, stream: np.ndarray) -> float:
    before = state_params(state)
    train_steps(state, stream, state.step + 1, clip=1.0)
    after = state_params(state)
    return math.sqrt(sum(float(((after[k] - before[k]) ** 2).sum()) for k in before))


@functools.lru_cache(maxsize=4)
def first_updates(resume_at: int = 50, seed: int = 0) -> dict[str, float]:
    """``{"full": ..., "bare": ...}``: the norm of the first update after resuming at
    ``resume_at`` with AdamW's state (``full``) and with a fresh AdamW (``bare``), of a GPT of 1
    block and 32 features trained on windows of 32 tokens, batches of 8, a peak rate of
    ``1e-2`` over a schedule of ``2 * resume_at`` steps, clipped at 1, in float64."""
    cfg = TrainConfig(
        seed=seed,
        steps=2 * resume_at,
        batch_size=8,
        learning_rate=1e-2,
        warmup_steps=10,
        min_lr_ratio=0.1,
        beta2=0.99,
        weight_decay=0.1,
    )
    stream = split(corpus_ids()).train
    with blas_threads(1):  # as fast as two for products this small, and one summation order
        state = start_state(_small(), cfg)
        train_steps(state, stream, resume_at, clip=1.0)
        with tempfile.TemporaryDirectory(prefix="llmfs-resume-") as folder:
            path = save_state(Path(folder) / "run.npz", state)
            full, bare = load_state(path), load_state(path, optimizer=False)
        return {"full": _update_norm(full, stream), "bare": _update_norm(bare, stream)}


@dataclass
class Memorisation:
    """The curves of :func:`memorisation` (one value per measurement, at ``steps``), the step
    of the lowest held-out loss and the float64 parameters measured then."""

    steps: list[int] = field(default_factory=list)
    training: list[float] = field(default_factory=list)
    validation: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    best_step: int = 0
    best_params: Params = field(default_factory=dict)

    def curves(self) -> dict[str, list[float]]:
        """``{"training": [...], "validation": [...]}``."""
        return {"training": list(self.training), "validation": list(self.validation)}


_RUNS: dict[tuple[Any, ...], Memorisation] = {}


def memorisation(
    slice_tokens: int = 4096,
    steps: int = 300,
    measure_every: int = 15,
    learning_rate: float = 5e-3,
    on_step: Callable[[StepRecord], Any] | None = None,
) -> Memorisation:
    """A GPT of 1 block and 32 features (windows of 32 tokens, batches of 8, float32, a
    constant rate after 10 warm-up steps, no weight decay, clipped at 1) trained ``steps``
    steps on the first ``slice_tokens`` tokens of the training stream; every ``measure_every``
    steps the mean loss on 4 fixed batches of 16 windows of the slice (``training``) and of the
    held-out stream (``validation``). Computed once per process for the same settings;
    ``on_step`` sees each step of the run that computes it."""
    key = (slice_tokens, steps, measure_every, learning_rate)
    if key in _RUNS:
        return _RUNS[key]
    parts = split(corpus_ids())
    cfg = TrainConfig(
        seed=0,
        steps=steps,
        batch_size=8,
        learning_rate=learning_rate,
        warmup_steps=10,
        min_lr_ratio=1.0,
        beta2=0.99,
        weight_decay=0.0,
    )
    config = _small()
    tiny = parts.train[:slice_tokens]
    on_slice = fixed_batches(tiny, config.n_ctx, 16, 4, seed=1)
    held = fixed_batches(parts.held_out, config.n_ctx, 16, 4, seed=1)
    state = start_state(config, cfg, np.float32)
    result = Memorisation()

    def model(inputs: np.ndarray) -> Any:
        return tensor_model.forward(state.w, config, inputs)

    def watch(record: StepRecord) -> None:
        result.losses.append(record.loss)
        if (record.step + 1) % measure_every == 0:
            result.steps.append(record.step + 1)
            result.training.append(estimate_loss(model, on_slice))
            result.validation.append(estimate_loss(model, held))
            if result.validation[-1] == min(result.validation):
                result.best_step, result.best_params = record.step + 1, state_params(state)
        if on_step is not None:
            on_step(record)

    with blas_threads(1):  # as in first_updates
        train_steps(state, tiny, steps, clip=1.0, on_step=watch)
    _RUNS[key] = result
    return result


def first_to_rise(curves: dict[str, list[float]], margin: float = 0.05) -> str:
    """The name of the curve whose lowest point comes first among those that end more than
    ``margin`` above their lowest point, or ``"neither"``."""
    rising = {
        name: int(np.argmin(values))
        for name, values in curves.items()
        if values and values[-1] - min(values) > margin
    }
    return min(rising, key=lambda name: rising[name]) if rising else "neither"


__all__ = ["Memorisation", "corpus_ids", "first_to_rise", "first_updates", "memorisation"]
