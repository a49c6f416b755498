"""Measuring a language model: the validation loss on fixed batches (nanoGPT's
``estimate_loss``), its perplexity, and the two baselines a model must beat.

* :func:`fixed_batches`: ``count`` batches of ``(inputs, targets)`` drawn by
  :func:`~llmfs.gpt.text_batches.get_batch` from a generator of their own seed, so every
  measurement during a run reads the SAME windows and two measurements differ only by what the
  model learned between them.
* :func:`estimate_loss`: the mean, over those batches, of each batch's mean cross-entropy
  (nats per token), computed under :class:`llmfs.tensor.no_grad`: measuring records nothing on
  the tape, so it neither costs the memory of a backward pass nor leaves gradients behind.
* :func:`perplexity`: ``exp(loss)``, the number of equally likely tokens the model is as unsure
  as; a uniform model over ``V`` tokens has perplexity ``V``.
* :func:`uniform_loss` (``ln V``: every token equally likely) and :func:`unigram_entropy` (the
  entropy of the stream's own token frequencies: the least any model that ignores the context
  can score). A loss below the unigram entropy is what the model learned from context.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from llmfs.gpt.tensor_train import cross_entropy
from llmfs.gpt.text_batches import get_batch
from llmfs.gpt.text_corpus import TextModelError
from llmfs.tensor import Tensor, TensorView, no_grad

Batch = tuple[np.ndarray, np.ndarray]
#: A model as the measurement sees it: token ids ``[B, T]`` to logits ``[B, T, V]``.
Model = Callable[[np.ndarray], Tensor | TensorView]


def fixed_batches(
    stream: np.ndarray, n_ctx: int, batch_size: int, count: int, seed: int
) -> list[Batch]:
    """``count`` batches of :func:`get_batch` from ``np.random.default_rng(seed)``: the same
    list for the same arguments. Raises :class:`TextModelError` for a count below 1 (and as
    :func:`get_batch` for a stream too short)."""
    if count < 1:
        raise TextModelError(f"a measurement needs at least 1 batch, got count = {count}")
    rng = np.random.default_rng(seed)
    return [get_batch(stream, n_ctx, batch_size, rng) for _ in range(count)]


def estimate_loss(model: Model, batches: Sequence[Batch]) -> float:
    """The mean over ``batches`` of each batch's mean cross-entropy of every target under
    ``model(inputs)``, as a Python float, with nothing recorded (:class:`no_grad`). Raises
    :class:`TextModelError` for no batches."""
    if len(batches) == 0:
        raise TextModelError("estimate_loss needs at least one batch")
    total = 0.0
    with no_grad():
        for inputs, targets in batches:
            logits = model(inputs)
            total += float(cross_entropy(logits, targets, np.ones(targets.shape)).item())
    return total / len(batches)


def perplexity(loss: float) -> float:
    """``exp(loss)`` for a loss in nats per token."""
    return math.exp(loss)


def uniform_loss(vocab_size: int) -> float:
    """The loss of a model that gives each of ``vocab_size`` tokens the same probability:
    ``ln(vocab_size)`` whatever the targets. Raises :class:`TextModelError` below 1 token."""
    if vocab_size < 1:
        raise TextModelError(f"a vocabulary needs at least 1 token, got {vocab_size}")
    return math.log(vocab_size)


def unigram_entropy(stream: np.ndarray, vocab_size: int) -> float:
    """The entropy (nats) of the token frequencies of ``stream``: ``-sum p log p`` over the ids
    that occur. It is the loss on ``stream`` of the best model that ignores the context (the
    one predicting those very frequencies every time). Raises :class:`TextModelError` for an
    empty stream or an id outside ``0 .. vocab_size - 1``."""
    ids = np.asarray(stream, dtype=np.int64).reshape(-1)
    if ids.size == 0:
        raise TextModelError("the unigram entropy of an empty stream is undefined")
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise TextModelError(
            f"token ids {int(ids.min())}..{int(ids.max())} fall outside 0..{vocab_size - 1}"
        )
    counts = np.bincount(ids, minlength=vocab_size)
    p = counts[counts > 0] / ids.size
    return float(-(p * np.log(p)).sum())


__all__ = [
    "Batch",
    "Model",
    "estimate_loss",
    "fixed_batches",
    "perplexity",
    "uniform_loss",
    "unigram_entropy",
]
