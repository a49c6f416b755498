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
    ``top_k`` outside ``1..vocab_size``, a negative ``max_new_tokens`` or seed."""


@dataclass(frozen=True)
class Sampler:
    """How the next token is chosen (checked by :func:`check_sampler`): ``temperature`` (0 is
    greedy), ``top_k`` (None keeps every id) and the generator that draws."""

    temperature: float
    top_k: int | None
    rng: np.random.Generator

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
        cumulative = np.cumsum(weights, axis=-1)
        u = self.rng.random(batch)
        # Per row, the first candidate whose cumulative weight exceeds u times the total (the
        # count of cumulative weights <= it, NumPy's searchsorted side="right"): a candidate of
        # weight 0 (exp underflowed) is never taken, and the index stays below k.
        threshold = u * cumulative[:, -1]
        index = np.minimum((cumulative <= threshold[:, None]).sum(axis=-1), k - 1)
        return np.asarray(candidates[np.arange(batch), index], dtype=np.int64)


def check_sampler(config: GPTConfig, temperature: object, top_k: object, seed: object) -> Sampler:
    """The :class:`Sampler` of these arguments. Raises :class:`GenerationError` for a
    temperature that is not a finite number ``>= 0``, a ``top_k`` that is not None or an int in
    ``1..vocab_size``, or a seed that is not None or an int ``>= 0``."""
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
    rng = np.random.default_rng(None if seed is None else int(seed))
    return Sampler(t, top_k, rng)


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
    "window_start",
]
