"""The batch loader of language-model training: random windows of a token stream, cut into
inputs and the targets one position later (nanoGPT's ``get_batch``), and a learner's own text
file read as the stream's source.

A window is ``n_ctx + 1`` consecutive tokens ``stream[s : s + n_ctx + 1]``; its first ``n_ctx``
are the inputs and its last ``n_ctx`` the targets, so position ``t`` of the inputs is trained to
predict ``stream[s + t + 1]``. A stream of ``n`` tokens holds ``n - n_ctx`` windows (the starts
``0 .. n - n_ctx - 1``, :func:`window_count`). Every batch draws ``batch_size`` starts uniformly,
with replacement, from ONE NumPy ``Generator``: the same seed gives the same batches in the same
order, and the generator's state (saved in a checkpoint, :mod:`llmfs.gpt.train_state`) is all a
resumed run needs to continue the same sequence.

Why the held-out split is by blocks (:func:`llmfs.gpt.text_corpus.split`) and not by tokens: a
window spans ``n_ctx + 1`` consecutive tokens, so held-out tokens scattered one by one would sit
inside training windows, and the model would be measured on text it was trained to continue.
Whole blocks of 1,024 tokens keep the held-out text apart, except for the few windows that
straddle a block's edge.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from llmfs.gpt.text_corpus import TextModelError


def window_count(n_tokens: int, n_ctx: int) -> int:
    """How many windows of ``n_ctx + 1`` tokens a stream of ``n_tokens`` holds (each start
    ``0 .. n_tokens - n_ctx - 1``): ``n_tokens - n_ctx``, or 0 when none fits. Raises
    :class:`TextModelError` for a negative count or an ``n_ctx`` below 1."""
    if n_tokens < 0 or n_ctx < 1:
        raise TextModelError(
            f"a window needs n_tokens >= 0 and n_ctx >= 1, got {n_tokens}, {n_ctx}"
        )
    return max(0, n_tokens - n_ctx)


def draw_windows(
    stream: np.ndarray, n_ctx: int, batch_size: int, rng: np.random.Generator
) -> np.ndarray:
    """``[batch_size, n_ctx + 1]`` windows of ``stream`` (int64) at starts drawn by ONE call
    ``rng.integers(0, window_count, size=batch_size)``. Raises :class:`TextModelError` when the
    stream is shorter than one window or ``batch_size`` is below 1."""
    stream = np.asarray(stream)
    count = window_count(len(stream), n_ctx)
    if count < 1:
        raise TextModelError(
            f"a stream of {len(stream)} tokens holds no window of {n_ctx + 1} tokens "
            f"(n_ctx = {n_ctx} inputs and the target after them)"
        )
    if batch_size < 1:
        raise TextModelError(f"a batch needs at least 1 window, got batch_size = {batch_size}")
    starts = rng.integers(0, count, size=batch_size)
    return np.asarray(stream[starts[:, None] + np.arange(n_ctx + 1)], dtype=np.int64)


def get_batch(
    stream: np.ndarray, n_ctx: int, batch_size: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``(inputs, targets)``, both ``[batch_size, n_ctx]`` int64: the :func:`draw_windows`
    windows without their last token, and the same windows without their first (the targets
    are the inputs shifted one position left). Errors as :func:`draw_windows`."""
    windows = draw_windows(stream, n_ctx, batch_size, rng)
    return windows[:, :-1], windows[:, 1:]


def read_text_file(path: Path | str, min_chars: int = 1) -> str:
    """A learner's own UTF-8 text file, to train a tokenizer and a model on. Raises
    :class:`TextModelError` naming the file and the condition when it is missing or not a
    file, not UTF-8 (a binary file, or text in another encoding: the byte offset of the first
    byte that is not), holds NUL bytes (binary data that happens to decode), or has fewer than
    ``min_chars`` characters (0 for an empty file)."""
    path = Path(path)
    if not path.is_file():
        raise TextModelError(f"{path} is not a file")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TextModelError(
            f"{path} is not UTF-8 text: byte {error.start} is 0x{data[error.start]:02x} "
            f"({error.reason}); save the file as UTF-8"
        ) from None
    if "\x00" in text:
        raise TextModelError(
            f"{path} holds a NUL byte at character {text.index(chr(0))}: binary data, not text"
        )
    if len(text) < max(1, min_chars):
        raise TextModelError(
            f"{path} holds {len(text)} characters; at least {max(1, min_chars)} are needed"
        )
    return text


def check_stream(stream: np.ndarray, n_ctx: int, what: str = "the token stream") -> np.ndarray:
    """``stream`` as int64, after checking that it holds at least one window of ``n_ctx + 1``
    tokens; the error names its length and what a window needs, so a learner's text that is
    too short says so before training starts."""
    array = np.asarray(stream, dtype=np.int64)
    if array.ndim != 1:
        raise TextModelError(f"{what} must be 1-D token ids, got shape {list(array.shape)}")
    if window_count(len(array), n_ctx) < 1:
        raise TextModelError(
            f"{what} has {len(array)} tokens: too short for one window of {n_ctx + 1} "
            f"(n_ctx = {n_ctx} inputs and one target after them); use a longer text or a "
            f"smaller n_ctx"
        )
    return array


__all__ = ["check_stream", "draw_windows", "get_batch", "read_text_file", "window_count"]
