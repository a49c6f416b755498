"""The KV cache on llmfs.tensor: one owner per block, read through slice views (no copy of the
past), written through copyto, never reallocated (not even when the window slides), and views
taken before a write are stale."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

from llmfs.gpt import reference
from llmfs.gpt import tensor_model as tm
from llmfs.gpt.errors import GPTError
from llmfs.gpt.kv_cache import KVCache
from llmfs.gpt.model import GPTConfig, init_params
from llmfs.tensor import StaleViewError, Tensor, TensorView

CONFIG = GPTConfig(vocab_size=11, n_ctx=6, n_embd=12, n_head=3, n_layer=2)


def _weights(seed: int = 0, dtype: object = np.float64) -> dict[str, Tensor]:
    rng = np.random.default_rng(seed)
    params = {n: v + rng.normal(0, 0.5, v.shape) for n, v in init_params(CONFIG, seed).items()}
    return tm.tensor_params(params, dtype)


def test_each_block_has_one_owner_of_shape_2_b_h_nctx_d() -> None:
    cache = KVCache(CONFIG, batch=2)
    assert len(cache.layers) == CONFIG.n_layer
    for owner in cache.layers:
        assert isinstance(owner, Tensor)
        assert owner.shape == (2, 2, 3, 6, 4)
        assert owner.strides == (144, 72, 24, 4, 1)


@pytest.mark.parametrize("stop", [1, 3, 6])
def test_the_past_is_a_slice_view_of_the_owner_with_its_strides(stop: int) -> None:
    cache = KVCache(CONFIG, batch=2)
    past = cache.past(0, stop)
    assert isinstance(past, TensorView)
    assert past.owner is cache.layers[0]
    assert past.shape == (2, 2, 3, stop, 4)
    assert past.strides == cache.layers[0].strides
    assert past.layout.offset == 0
    # Unwritten positions lie between two heads, so only the full window is contiguous.
    assert past.is_contiguous() == (stop == CONFIG.n_ctx)
    keys = past[1]  # the values: offset one [B, H, n_ctx, D] block further
    assert keys.layout.offset == 144 and keys.strides == (72, 24, 4, 1)


def test_a_write_goes_into_the_slice_of_its_positions_only() -> None:
    cache = KVCache(CONFIG, batch=1)
    kv = np.arange(2 * 3 * 2 * 4, dtype=np.float32).reshape(2, 1, 3, 2, 4) + 1
    cache.write(1, 3, Tensor.from_numpy(kv))
    values = cache.layers[1].to_numpy()
    np.testing.assert_array_equal(values[:, :, :, 3:5], kv)
    assert not values[:, :, :, :3].any() and not values[:, :, :, 5:].any()
    assert not cache.layers[0].to_numpy().any()
    with pytest.raises(GPTError, match=r"positions 5..6 do not fit a cache of n_ctx = 6"):
        cache.write(0, 5, Tensor.from_numpy(kv))


def test_a_view_taken_before_a_write_is_stale_and_one_taken_after_reads_the_write() -> None:
    cache = KVCache(CONFIG, batch=1)
    before = cache.past(0, 2)
    assert not before.is_stale
    cache.write(0, 2, Tensor.from_numpy(np.ones((2, 1, 3, 1, 4))))
    assert before.is_stale
    with pytest.raises(StaleViewError):
        before.to_numpy()
    with pytest.raises(StaleViewError):
        before[0].transpose(2, 3)  # deriving a view from a stale one is a use too
    after = cache.past(0, 3)
    assert after.to_numpy()[:, :, :, 2].tolist() == np.ones((2, 1, 3, 4)).tolist()
    # The other block's owner was not written: its views stay fresh.
    other = cache.past(1, 3)
    cache.write(0, 3, Tensor.from_numpy(np.ones((2, 1, 3, 1, 4))))
    assert not other.is_stale and other.to_numpy().sum() == 0


def test_a_step_with_the_cache_copies_nothing_and_the_prompt_one_merge_per_block() -> None:
    w = _weights()
    cache = KVCache(CONFIG, batch=2, dtype=np.float64)
    ids = np.array([[1, 2, 3], [4, 5, 6]])
    with tm.count_materializations() as prompt_copies:
        tm.cached_logits(w, CONFIG, ids, cache, 0)
    # The prompt's heads are merged as attention merges them: one copy per block, [B, T, H, D].
    assert prompt_copies.shapes == [(2, 3, 3, 4)] * CONFIG.n_layer
    for pos in (3, 4, 5):
        with tm.count_materializations() as step_copies:
            tm.cached_logits(w, CONFIG, ids[:, :1], cache, pos)
        assert step_copies.count == 0  # the past keys and values are read through views


def test_cached_logits_equal_the_forward_pass_at_every_step() -> None:
    w = _weights(1)
    ids = np.array([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 5, 8]]) % CONFIG.vocab_size
    full = tm.forward(w, CONFIG, ids).to_numpy()
    cache = KVCache(CONFIG, batch=2, dtype=np.float64)
    first = tm.cached_logits(w, CONFIG, ids[:, :2], cache, 0)
    np.testing.assert_allclose(first, full[:, 1], rtol=0, atol=1e-12)
    for pos in range(2, 6):
        step = tm.cached_logits(w, CONFIG, ids[:, pos : pos + 1], cache, pos)
        np.testing.assert_allclose(step, full[:, pos], rtol=0, atol=1e-12)


class _RecordingCache(KVCache):
    made: ClassVar[list[_RecordingCache]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storages = [owner._storage for owner in self.layers]
        self.owners = list(self.layers)
        _RecordingCache.made.append(self)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_one_cache_lives_through_a_generation_that_slides_past_n_ctx(
    monkeypatch: pytest.MonkeyPatch, dtype: type
) -> None:
    monkeypatch.setattr(tm, "KVCache", _RecordingCache)
    _RecordingCache.made = []
    w = _weights(2, dtype)
    ids = np.array([[1, 2], [3, 4]])
    out = tm.generate(w, CONFIG, ids, 12)  # 14 tokens: the window slides 8 times
    [cache] = _RecordingCache.made
    assert cache.layers == cache.owners
    assert all(o._storage is s for o, s in zip(cache.layers, cache.storages, strict=True))
    assert all(o.dtype == np.dtype(dtype) for o in cache.layers)
    assert cache.start == out.shape[1] - 1 - CONFIG.n_ctx and cache.length == CONFIG.n_ctx
    if dtype == np.float64:
        np.testing.assert_array_equal(out, tm.generate(w, CONFIG, ids, 12, kv_cache=False))


def test_the_numpy_reference_cache_gives_the_forward_pass_logits() -> None:
    rng = np.random.default_rng(3)
    params = {n: v + rng.normal(0, 0.5, v.shape) for n, v in init_params(CONFIG, 3).items()}
    ids = rng.integers(0, CONFIG.vocab_size, size=(2, 6))
    full = reference.forward(params, CONFIG, ids)
    shape = (2, 2, CONFIG.n_head, CONFIG.n_ctx, CONFIG.head_size)
    caches = [np.zeros(shape) for _ in range(CONFIG.n_layer)]
    p64 = {n: v.astype(np.float64) for n, v in params.items()}
    first = reference._cached_logits(p64, CONFIG, ids[:, :3], caches, 0)
    np.testing.assert_allclose(first, full[:, 2], rtol=0, atol=1e-12)
    for pos in range(3, 6):
        step = reference._cached_logits(p64, CONFIG, ids[:, pos : pos + 1], caches, pos)
        np.testing.assert_allclose(step, full[:, pos], rtol=0, atol=1e-12)
