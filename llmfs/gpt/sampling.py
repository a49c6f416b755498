"""What generation shares between the NumPy reference and the :mod:`llmfs.tensor` model: the
checks of its arguments, the generation loop with its sliding context window and KV-cache state
(:func:`generate_with`), and the choice of the next token.

Both ``generate`` functions (:func:`llmfs.gpt.reference.generate` and
:func:`llmfs.gpt.tensor_model.generate`) compute the last position's logits their own way (the
step functions they pass to :func:`generate_with`) and hand them here, as float64 NumPy, so that
the same logits and the same seed choose the same tokens.

The choice of a token from a row of logits ``z`` (NumPy only, no tensor library):

* ``temperature == 0``: greedy, ``argmax(z)`` (the lowest id on a tie, as ``np.argmax``);
  ``top_k`` changes nothing (the arg-max is always among the top k);
* ``temperature > 0``: the candidates are the ``top_k`` ids with the largest logits (ties broken
  toward the lower id, so there are exactly ``top_k`` of them; all ids when ``top_k`` is None),
  weighted by ``softmax(z / temperature)`` over the candidates only. ``top_k = 1`` is greedy.
* ``top_p`` (nucleus sampling, after the temperature and ``top_k``, as Hugging Face's
  ``TopPLogitsWarper``): of those candidates, only the smallest set of the most probable whose
  probabilities add up to at least ``top_p`` keeps its weight (a candidate stays when the
  candidates more probable than it hold less than ``top_p``; equal probabilities in increasing
  id order; the most probable always stays, so ``top_p = 0`` keeps one). The others get weight
  0 and are never drawn; the draw itself is unchanged (one uniform per row, also when a single
  candidate is left). ``None`` or ``1`` keeps every candidate.

A stop token (``stop_token``, e.g. a tokenizer's ``<|endoftext|>``): a row that has chosen it is
finished, and every later step writes the stop token again in that row; generation ends after
the step at which every row has chosen it (so the output may be shorter than asked).

The draw order, which makes a seed reproducible: one ``numpy.random.Generator`` (PCG64,
``np.random.default_rng(seed)``) per call of ``generate``; at each step one ``rng.random(batch)``
(uniform in ``[0, 1)``, one value per row, rows in batch order), and row ``b`` takes the first
candidate, in increasing id order, whose cumulative probability exceeds ``u_b`` times the total.
Greedy steps draw nothing. ``seed=None`` draws from fresh OS entropy (not reproducible).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from llmfs.gpt.errors import GPTError, TaskError
from llmfs.gpt.model import GPTConfig


class GenerationError(GPTError):
    """An argument of ``generate`` outside its range: a negative or non-finite temperature,
    ``top_k`` outside ``1..vocab_size``, ``top_p`` outside ``[0, 1]``, a stop token outside the
    vocabulary, a negative ``max_new_tokens`` or seed."""


@dataclass(frozen=True)
class Sampler:
    """How the next token is chosen (checked by :func:`check_sampler`): ``temperature`` (0 is
    greedy), ``top_k`` (None keeps every id), the generator that draws, ``top_p`` (None keeps
    every candidate) and the ``stop_token`` that finishes a row (None: none does)."""

    temperature: float
    top_k: int | None
    rng: np.random.Generator
    top_p: float | None = None
    stop_token: int | None = None

    @property
    def greedy(self) -> bool:
        """Whether every step takes the arg-max (temperature 0, or top_k = 1)."""
        return self.temperature == 0.0 or self.top_k == 1

    def choose(self, logits: np.ndarray) -> np.ndarray:
        """The next token of each row of ``logits`` (``[B, vocab]``, read as float64): ``[B]``
        int64, by the rule in the module docstring."""
        z = np.asarray(logits, dtype=np.float64)
        if self.greedy:
            return np.asarray(z.argmax(axis=-1), dtype=np.int64)
        batch, vocab = z.shape
        k = vocab if self.top_k is None else self.top_k
        # Stable sort of -z: the k largest logits, equal logits in increasing id order.
        order = np.argsort(-z, axis=-1, kind="stable")[:, :k]
        candidates = np.sort(order, axis=-1)  # increasing id: the order the draw walks
        scaled = np.take_along_axis(z, candidates, axis=-1) / self.temperature
        weights = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
        if self.top_p is not None and self.top_p < 1.0:
            weights = nucleus(weights, self.top_p)
        cumulative = np.cumsum(weights, axis=-1)
        u = self.rng.random(batch)
        # Per row, the first candidate whose cumulative weight exceeds u times the total (the
        # count of cumulative weights <= it, NumPy's searchsorted side="right"): a candidate of
        # weight 0 (exp underflowed) is never taken, and the index stays below k.
        threshold = u * cumulative[:, -1]
        index = np.minimum((cumulative <= threshold[:, None]).sum(axis=-1), k - 1)
        return np.asarray(candidates[np.arange(batch), index], dtype=np.int64)

    def finished(self, new: np.ndarray) -> bool:
        """After a step: ``new`` is the ``[B, n]`` block of tokens generated so far (a view of
        the output, written in place). A row that chose :attr:`stop_token` at an earlier step
        gets it again in the last column; True when every row has chosen it (generation ends).
        Always False without a stop token."""
        if self.stop_token is None or new.shape[1] == 0:
            return False
        earlier = (new[:, :-1] == self.stop_token).any(axis=1)
        new[earlier, -1] = self.stop_token
        return bool((new[:, -1] == self.stop_token).all())


def nucleus(weights: np.ndarray, top_p: float) -> np.ndarray:
    """Top-p of each row of ``weights`` (``[B, k]``, nonnegative, proportional to the
    candidates' probabilities, in increasing id order): a copy in which only the smallest set of
    the most probable candidates whose probabilities sum to at least ``top_p`` keeps its weight,
    the others 0. A candidate stays when the candidates before it, most probable first (equal
    ones in increasing id order), hold less than ``top_p`` of the total; the most probable
    always stays."""
    probabilities = weights / weights.sum(axis=-1, keepdims=True)
    order = np.argsort(-probabilities, axis=-1, kind="stable")
    ranked = np.take_along_axis(probabilities, order, axis=-1)
    before = np.cumsum(ranked, axis=-1) - ranked
    keep_ranked = before < top_p
    keep_ranked[:, 0] = True
    keep = np.empty_like(keep_ranked)
    np.put_along_axis(keep, order, keep_ranked, axis=-1)
    return np.where(keep, weights, 0.0)


def check_sampler(
    config: GPTConfig,
    temperature: object,
    top_k: object,
    seed: object,
    top_p: object = None,
    stop_token: object = None,
) -> Sampler:
    """The :class:`Sampler` of these arguments. Raises :class:`GenerationError` for a
    temperature that is not a finite number ``>= 0``, a ``top_k`` that is not None or an int in
    ``1..vocab_size``, a seed that is not None or an int ``>= 0``, a ``top_p`` that is not None
    or a number in ``[0, 1]``, or a ``stop_token`` that is not None or an id of the
    vocabulary."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float, np.floating)):
        raise GenerationError(
            f"temperature must be a number >= 0, got {type(temperature).__name__} {temperature!r}"
        )
    t = float(temperature)
    if not math.isfinite(t) or t < 0:
        raise GenerationError(
            f"temperature must be a finite number >= 0 (0 is greedy), got {temperature!r}"
        )
    if top_k is not None:
        if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)):
            raise GenerationError(f"top_k must be None or an int, got {type(top_k).__name__}")
        if not 1 <= int(top_k) <= config.vocab_size:
            raise GenerationError(
                f"top_k = {int(top_k)} is outside 1..vocab_size = {config.vocab_size}"
            )
        top_k = int(top_k)
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or int(seed) < 0
    ):
        raise GenerationError(f"seed must be None or an int >= 0, got {seed!r}")
    p = None
    if top_p is not None:
        if isinstance(top_p, bool) or not isinstance(top_p, (int, float, np.integer, np.floating)):
            raise GenerationError(f"top_p must be None or a number, got {type(top_p).__name__}")
        p = float(top_p)
        if not 0.0 <= p <= 1.0:  # (NaN fails too)
            raise GenerationError(f"top_p must be a probability in [0, 1], got {top_p!r}")
    stop = None
    if stop_token is not None:
        if isinstance(stop_token, bool) or not isinstance(stop_token, (int, np.integer)):
            raise GenerationError(
                f"stop_token must be None or a token id, got {type(stop_token).__name__}"
            )
        stop = int(stop_token)
        if not 0 <= stop < config.vocab_size:
            raise GenerationError(
                f"stop_token = {stop} is outside the vocabulary 0..{config.vocab_size - 1}"
            )
    rng = np.random.default_rng(None if seed is None else int(seed))
    return Sampler(t, top_k, rng, p, stop)


def check_prompt(config: GPTConfig, ids: object, max_new_tokens: object) -> np.ndarray:
    """The prompt as a ``[B, T]`` int64 array (a flat list or a ``[T]`` array is one row), for
    ``T >= 1`` of any length (past ``n_ctx`` the window slides). Raises :class:`TaskError` for an
    empty prompt, a shape other than ``[T]``/``[B, T]``, values that are not ints (floats, bools)
    or ids outside ``0..vocab_size - 1``; :class:`GenerationError` for a ``max_new_tokens`` that
    is not an int ``>= 0``."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)):
        raise GenerationError(
            f"max_new_tokens must be an int >= 0, got {type(max_new_tokens).__name__}"
        )
    if max_new_tokens < 0:
        raise GenerationError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    try:
        array = np.asarray(ids)
    except ValueError as error:  # ragged nested lists
        raise TaskError(f"ids must be [T] or [B, T] ints, got a ragged list ({error})") from None
    given = list(array.shape)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        raise TaskError(f"ids must be [T] or [B, T] ints, got shape {given}")
    if array.size == 0:
        raise TaskError(
            f"the prompt is empty (shape {given}): generation needs at least one token per row"
        )
    if not np.issubdtype(array.dtype, np.integer):
        raise TaskError(f"ids must be ints, got {array.dtype} (shape {given})")
    low, high = int(array.min()), int(array.max())
    if low < 0 or high >= config.vocab_size:
        raise TaskError(
            f"token ids {low}..{high} fall outside the vocabulary 0..{config.vocab_size - 1}"
        )
    return array.astype(np.int64)


def check_tokens(config: GPTConfig, tokens: object) -> tuple[np.ndarray, bool]:
    """The tokens of one forward pass as a ``[B, T]`` int array, and whether they were one
    ``[T]`` sequence. Raises :class:`~llmfs.gpt.errors.TaskError` for another rank or dtype, a
    length outside ``1..n_ctx`` or an id outside the vocabulary."""
    ids = np.asarray(tokens)
    given = list(ids.shape)
    single = ids.ndim == 1
    if single:
        ids = ids[None, :]
    if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
        raise TaskError(f"tokens must be [T] or [B, T] ints, got shape {given} of {ids.dtype}")
    t = ids.shape[1]
    if not 1 <= t <= config.n_ctx:
        raise TaskError(f"sequence length {t} is outside 1..n_ctx = {config.n_ctx}")
    if ids.size and (ids.min() < 0 or ids.max() >= config.vocab_size):
        raise TaskError(
            f"token ids {int(ids.min())}..{int(ids.max())} fall outside 0..{config.vocab_size - 1}"
        )
    return ids, single


def window_start(length: int, n_ctx: int) -> int:
    """Where the context of the next step starts in a sequence of ``length`` tokens: its last
    ``n_ctx`` tokens are read (positions ``0..n_ctx - 1`` of the position embedding)."""
    return max(0, length - n_ctx)


class CacheWindow(Protocol):
    """Which positions a KV cache holds: the keys and values of the tokens
    ``start..start + length - 1`` of the sequence, computed at positions ``0..length - 1``."""

    start: int
    length: int

    def reset(self, start: int) -> None:
        """Empties the cache for a window that starts at ``start`` (``length`` becomes 0)."""


@dataclass
class Window:
    """A :class:`CacheWindow` that keeps only the two numbers (a cache whose arrays the step
    function holds)."""

    start: int = -1
    length: int = 0

    def reset(self, start: int) -> None:
        self.start, self.length = start, 0


def generate_with(
    prompt: np.ndarray,
    max_new_tokens: int,
    n_ctx: int,
    sampler: Sampler,
    window_logits: Callable[[np.ndarray], np.ndarray],
    cached_logits: Callable[[np.ndarray, int], np.ndarray],
    cache: CacheWindow | None,
) -> np.ndarray:
    """The generation loop of both models: appends ``max_new_tokens`` tokens to ``prompt``
    (``[B, T]`` int64, checked) and returns ``[B, T + max_new_tokens]`` int64.

    Each step reads the last ``n_ctx`` tokens (:func:`window_start`) and chooses the next token
    from the last position's logits with ``sampler``. Without a ``cache`` the logits are
    ``window_logits(window)``, the whole window run again. With one, a step that extends the
    window the cache holds runs only the new token, ``cached_logits(new, pos)`` at position
    ``pos``; the first step, and every step after the window slid (every token then moves to a
    new position, so its keys and values change in every block), resets the cache and runs the
    whole window from position 0. Both give the same tokens.
    """
    batch, t = prompt.shape
    out = np.empty((batch, t + max_new_tokens), dtype=np.int64)
    out[:, :t] = prompt
    for length in range(t, t + max_new_tokens):
        start = window_start(length, n_ctx)
        if cache is None:
            logits = window_logits(out[:, start:length])
        elif cache.start == start and cache.length == length - start - 1:
            logits = cached_logits(out[:, length - 1 : length], cache.length)
            cache.length += 1
        else:  # the first step, or the window slid: every position moved, so refill
            cache.reset(start)
            logits = cached_logits(out[:, start:length], 0)
            cache.length = length - start
        out[:, length] = sampler.choose(logits)
        if sampler.finished(out[:, t : length + 1]):  # every row chose the stop token
            return out[:, : length + 1]
    return out


__all__ = [
    "CacheWindow",
    "GenerationError",
    "Sampler",
    "Window",
    "check_prompt",
    "check_sampler",
    "check_tokens",
    "generate_with",
    "nucleus",
    "window_start",
]
