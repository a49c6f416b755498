"""The KV cache of :func:`llmfs.gpt.tensor_model.generate`: per block ONE owner, read through
slice views and written through ``copyto``.

Block ``i``'s cache is a :class:`~llmfs.tensor.Tensor` of shape ``[2, B, H, n_ctx, D]`` (keys at
index 0 of the first axis, values at 1; batch, heads, positions, head features), allocated once
when generation starts and never reallocated. Row-major, so its strides are
``[B*H*n_ctx*D, H*n_ctx*D, n_ctx*D, D, 1]``.

* :meth:`KVCache.write` puts the keys and values of ``T`` new positions ``pos..pos + T - 1``
  into ``cache.slice(3, pos, pos + T)`` with :func:`~llmfs.tensor.copyto` (a write into the
  cells that slice reads: nothing else of the owner moves).
* :meth:`KVCache.past` is ``cache.slice(3, 0, stop)``, a VIEW of the first ``stop`` positions:
  shape ``[2, B, H, stop, D]``, the owner's strides, offset 0. Attention reads the keys and
  values through it (``past[0]``, ``past[1]``); no value of the past is copied. It is
  contiguous only when ``stop == n_ctx`` (or ``B * H == 1``): between two heads lie the
  ``n_ctx - stop`` positions not written yet.
* The stale-view rule decides what may be read: each write moves the owner's version, so a view
  of the cache taken before a write (the previous step's ``past``) raises
  :class:`~llmfs.tensor.StaleViewError` when it is read afterwards. A step therefore writes
  first and takes its views after.

The sliding window: the cache holds keys and values computed at positions ``0..length - 1`` of
the learned, absolute position embedding. When the context slides past ``n_ctx`` every token
moves one position down, so its embedding changes and with it its keys and values in every
block: neither shifting nor rolling the cache would give the values an uncached pass computes.
The rule is therefore: a slid window is refilled, in place, from scratch (one pass over its
``n_ctx`` tokens, written into the same owners from position 0); :attr:`KVCache.start` records
which token of the sequence sits at position 0.
"""

from __future__ import annotations

import numpy as np

from llmfs.gpt.errors import GPTError
from llmfs.gpt.model import GPTConfig
from llmfs.tensor import Tensor, TensorView, copyto


class KVCache:
    """The keys and values of the positions already computed, one owner per block.

    Invariants: ``layers[i]`` has shape ``[2, batch, n_head, n_ctx, head_size]`` for every
    block; positions ``0..length - 1`` of every layer hold the keys and values of tokens
    ``start..start + length - 1`` of the sequence (``start`` is ``-1`` while nothing is
    cached); the owners are the ones made by the constructor, for the cache's whole life."""

    def __init__(self, config: GPTConfig, batch: int, dtype: object = np.float32) -> None:
        if batch < 1:
            raise GPTError(f"a KV cache needs a batch of at least 1, got {batch}")
        self.config = config
        self.batch = batch
        shape = [2, batch, config.n_head, config.n_ctx, config.head_size]
        self.layers: list[Tensor] = [Tensor.zeros(shape, dtype) for _ in range(config.n_layer)]
        self.start = -1
        self.length = 0

    def write(self, layer: int, pos: int, kv: Tensor | TensorView) -> None:
        """Writes ``kv`` (``[2, B, H, T, D]``: the new keys, then the new values) at positions
        ``pos..pos + T - 1`` of block ``layer``'s owner, through ``copyto`` into a slice. Every
        view of that owner taken before is stale afterwards. Raises :class:`GPTError` when the
        positions do not fit in ``0..n_ctx``."""
        t = kv.shape[3]
        if not 0 <= pos <= pos + t <= self.config.n_ctx:
            raise GPTError(
                f"positions {pos}..{pos + t - 1} do not fit a cache of n_ctx = "
                f"{self.config.n_ctx} positions"
            )
        copyto(self.layers[layer].slice(3, pos, pos + t), kv)

    def past(self, layer: int, stop: int) -> TensorView:
        """``[2, B, H, stop, D]``: a view of block ``layer``'s first ``stop`` positions (keys at
        ``[0]``, values at ``[1]``); nothing is copied."""
        return self.layers[layer].slice(3, 0, stop)

    def reset(self, start: int) -> None:
        """Marks the cache as holding nothing yet for a window starting at token ``start``
        (the owners are kept; their values are overwritten by the next writes)."""
        self.start, self.length = start, 0


__all__ = ["KVCache"]
