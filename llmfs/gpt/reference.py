"""The plain NumPy forward pass of the capstone model: the reference every other implementation
(the course's ``llmfs.tensor`` version on each backend) is checked against.

:func:`forward`, :func:`activations` and :func:`generate` compute in float64, whatever dtype the
parameters are stored in, one step per function so that each can be compared on its own:

``embed`` -> for each block ``x = x + attention(ln_1(x))``, ``x = x + mlp(ln_2(x))`` ->
``layer_norm(ln_f)`` -> ``x @ wte.weight.T`` (the tied head).

``tokens`` is ``[T]`` or ``[B, T]`` int with ``1 <= T <= n_ctx``; logits come back as
``[T, vocab]`` or ``[B, T, vocab]``.

The layer functions (:func:`layer_norm`, :func:`gelu`, :func:`softmax`, :func:`attention`,
:func:`mlp`, :func:`block`) compute in the dtype of the arrays they are given, so a float32 model
stays float32 (the benchmarks' NumPy peer relies on it). The rule that keeps it so: every
constant is a Python ``float`` (``math.sqrt``, never ``np.sqrt`` of a Python number), because
NumPy 2 promotes a float32 array combined with an ``np.float64`` scalar to float64, while a
Python float takes the array's dtype.
"""

from __future__ import annotations

import math

import numpy as np

from llmfs.gpt import sampling, task
from llmfs.gpt.model import GPTConfig, Params, check_params

#: sqrt(2 / pi), the constant of GELU's tanh form.
GELU_C = math.sqrt(2.0 / math.pi)


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm over the last axis: ``(x - mean) / sqrt(var + eps) * weight + bias`` with the
    biased variance (divided by the number of features), as PyTorch's ``LayerNorm``. In the
    dtype of ``x`` (``eps`` is taken as a Python float, so an ``np.float64`` one promotes
    nothing)."""
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + float(eps)) * weight + bias


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU, tanh form (GPT-2's): ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))``."""
    # x * x * x rather than x**3: NumPy's power with exponent 3 calls pow() per element, several
    # times slower; the two differ by at most an ulp or so.
    return 0.5 * x * (1.0 + np.tanh(GELU_C * (x + 0.044715 * (x * x * x))))


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax over ``axis``, computed after subtracting the maximum (so no overflow)."""
    shifted = x - x.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def causal_mask(t: int) -> np.ndarray:
    """``[t, t]`` bool: position ``i`` may attend to position ``j`` exactly when ``j <= i``."""
    return np.tril(np.ones((t, t), dtype=bool))


def attention(x: np.ndarray, params: Params, prefix: str, config: GPTConfig) -> np.ndarray:
    """Causal multi-head self-attention of ``x`` (``[B, T, C]``) with the weights under
    ``prefix`` (``"h.{i}.attn."``): packed QKV projection, split into ``n_head`` heads,
    ``softmax(q @ k^T / sqrt(head_size))`` with future positions masked out, ``@ v``, heads
    merged back, output projection."""
    b, t, c = x.shape
    h, d = config.n_head, config.head_size
    qkv = x @ params[prefix + "c_attn.weight"] + params[prefix + "c_attn.bias"]  # [B, T, 3C]
    q, k, v = (
        qkv[..., i * c : (i + 1) * c].reshape(b, t, h, d).transpose(0, 2, 1, 3) for i in range(3)
    )
    # math.sqrt: a Python float keeps float32 scores float32 (np.sqrt(d) is an np.float64).
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)  # [B, H, T, T]
    scores = np.where(causal_mask(t), scores, -np.inf)
    y = softmax(scores) @ v  # [B, H, T, D]
    y = y.transpose(0, 2, 1, 3).reshape(b, t, c)
    return y @ params[prefix + "c_proj.weight"] + params[prefix + "c_proj.bias"]


def mlp(x: np.ndarray, params: Params, prefix: str) -> np.ndarray:
    """The block's MLP under ``prefix`` (``"h.{i}.mlp."``): up-projection to ``4 * n_embd``,
    GELU, down-projection."""
    hidden = gelu(x @ params[prefix + "c_fc.weight"] + params[prefix + "c_fc.bias"])
    return hidden @ params[prefix + "c_proj.weight"] + params[prefix + "c_proj.bias"]


def block(x: np.ndarray, params: Params, i: int, config: GPTConfig) -> np.ndarray:
    """Block ``i``: ``x + attention(ln_1(x))``, then ``+ mlp(ln_2(.))`` (pre-LayerNorm)."""
    p = f"h.{i}."
    eps = config.layer_norm_eps
    x = x + attention(
        layer_norm(x, params[p + "ln_1.weight"], params[p + "ln_1.bias"], eps),
        params,
        p + "attn.",
        config,
    )
    return x + mlp(
        layer_norm(x, params[p + "ln_2.weight"], params[p + "ln_2.bias"], eps), params, p + "mlp."
    )


def embed(tokens: np.ndarray, params: Params, config: GPTConfig) -> np.ndarray:
    """Token embedding plus position embedding: ``[B, T, n_embd]`` float64."""
    ids, _ = sampling.check_tokens(config, tokens)
    wte = params["wte.weight"].astype(np.float64)
    wpe = params["wpe.weight"].astype(np.float64)
    return wte[ids] + wpe[: ids.shape[1]]


def forward(params: Params, config: GPTConfig, tokens: np.ndarray) -> np.ndarray:
    """Logits of every position, float64: ``[T, vocab]`` for ``[T]`` tokens, ``[B, T, vocab]`` for
    ``[B, T]``. Raises :class:`TaskError` on a length outside ``1..n_ctx`` or an unknown id."""
    ids, single = sampling.check_tokens(config, tokens)
    p64 = {name: np.asarray(value, dtype=np.float64) for name, value in params.items()}
    x = embed(ids, p64, config)
    for i in range(config.n_layer):
        x = block(x, p64, i, config)
    x = layer_norm(x, p64["ln_f.weight"], p64["ln_f.bias"], config.layer_norm_eps)
    logits = x @ p64["wte.weight"].T
    return logits[0] if single else logits


def activations(params: Params, config: GPTConfig, tokens: np.ndarray) -> dict[str, np.ndarray]:
    """Every intermediate result of :func:`forward`, by name, for checking an implementation one
    step at a time (all float64, batch axis kept: ``[B, T, ...]``):

    ``"embed"``; for each block ``i``: ``"h.{i}.ln_1"``, ``"h.{i}.attn"`` (the attention output
    before the residual add), ``"h.{i}.resid_attn"`` (after it), ``"h.{i}.ln_2"``, ``"h.{i}.mlp"``,
    ``"h.{i}.out"``; then ``"ln_f"`` and ``"logits"`` (equal to :func:`forward`'s)."""
    ids, _ = sampling.check_tokens(config, tokens)
    p64 = {name: np.asarray(value, dtype=np.float64) for name, value in params.items()}
    eps = config.layer_norm_eps
    out: dict[str, np.ndarray] = {}
    x = out["embed"] = embed(ids, p64, config)
    for i in range(config.n_layer):
        p = f"h.{i}."
        h = out[p + "ln_1"] = layer_norm(x, p64[p + "ln_1.weight"], p64[p + "ln_1.bias"], eps)
        a = out[p + "attn"] = attention(h, p64, p + "attn.", config)
        x = out[p + "resid_attn"] = x + a
        h = out[p + "ln_2"] = layer_norm(x, p64[p + "ln_2.weight"], p64[p + "ln_2.bias"], eps)
        m = out[p + "mlp"] = mlp(h, p64, p + "mlp.")
        x = out[p + "out"] = x + m
    x = out["ln_f"] = layer_norm(x, p64["ln_f.weight"], p64["ln_f.bias"], eps)
    out["logits"] = x @ p64["wte.weight"].T
    return out


# --------------------------------------------------------------------------------------------
# Generation: greedy or sampled, with or without a KV cache
# --------------------------------------------------------------------------------------------


def _head_of_last(x: np.ndarray, p64: Params, config: GPTConfig) -> np.ndarray:
    """``[B, vocab]``: the final LayerNorm and the tied head of the last position only (the
    logits of the other positions are never used by generation)."""
    last = layer_norm(x[:, -1], p64["ln_f.weight"], p64["ln_f.bias"], config.layer_norm_eps)
    return last @ p64["wte.weight"].T


def _window_logits(p64: Params, config: GPTConfig, window: np.ndarray) -> np.ndarray:
    """The last position's logits of ``window`` (``[B, T]``, ``T <= n_ctx``), recomputed from
    scratch: what :func:`forward` gives at ``[:, -1]``."""
    x = p64["wte.weight"][window] + p64["wpe.weight"][: window.shape[1]]
    for i in range(config.n_layer):
        x = block(x, p64, i, config)
    return _head_of_last(x, p64, config)


def cached_attention(
    x: np.ndarray, p64: Params, prefix: str, config: GPTConfig, cache: np.ndarray, pos: int
) -> np.ndarray:
    """:func:`attention` of ``T`` new positions ``pos..pos + T - 1`` (``x`` is ``[B, T, C]``)
    whose earlier positions' keys and values are already in ``cache`` (``[2, B, H, n_ctx, D]``,
    keys at ``cache[0]``, values at ``cache[1]``). Writes the new keys and values into
    ``cache[:, :, :, pos:pos + T]``, then attends over positions ``0..pos + T - 1`` (new
    position ``pos + i`` sees ``j <= pos + i``)."""
    b, t, c = x.shape
    h, d = config.n_head, config.head_size
    qkv = x @ p64[prefix + "c_attn.weight"] + p64[prefix + "c_attn.bias"]  # [B, T, 3C]
    q, k, v = (
        qkv[..., i * c : (i + 1) * c].reshape(b, t, h, d).transpose(0, 2, 1, 3) for i in range(3)
    )
    cache[0, :, :, pos : pos + t] = k
    cache[1, :, :, pos : pos + t] = v
    keys, values = cache[0, :, :, : pos + t], cache[1, :, :, : pos + t]
    scores = q @ keys.transpose(0, 1, 3, 2) / np.sqrt(d)  # [B, H, T, pos + T]
    if t > 1:
        seen = np.arange(pos + t)[None, :] <= (pos + np.arange(t))[:, None]
        scores = np.where(seen, scores, -np.inf)
    y = softmax(scores) @ values  # [B, H, T, D]
    y = y.transpose(0, 2, 1, 3).reshape(b, t, c)
    return y @ p64[prefix + "c_proj.weight"] + p64[prefix + "c_proj.bias"]


def _cached_logits(
    p64: Params, config: GPTConfig, new: np.ndarray, caches: list[np.ndarray], pos: int
) -> np.ndarray:
    """The last position's logits after running the tokens ``new`` (``[B, T]``) at positions
    ``pos..pos + T - 1`` through every block, each block's attention reading and extending its
    cache (:func:`cached_attention`)."""
    eps = config.layer_norm_eps
    x = p64["wte.weight"][new] + p64["wpe.weight"][pos : pos + new.shape[1]]
    for i, cache in enumerate(caches):
        p = f"h.{i}."
        h = layer_norm(x, p64[p + "ln_1.weight"], p64[p + "ln_1.bias"], eps)
        x = x + cached_attention(h, p64, p + "attn.", config, cache, pos)
        h = layer_norm(x, p64[p + "ln_2.weight"], p64[p + "ln_2.bias"], eps)
        x = x + mlp(h, p64, p + "mlp.")
    return _head_of_last(x, p64, config)


def generate(
    params: Params,
    config: GPTConfig,
    ids: object,
    max_new_tokens: int,
    *,
    temperature: float = 0.0,
    top_k: int | None = None,
    seed: int | None = None,
    kv_cache: bool = True,
    top_p: float | None = None,
    stop_token: int | None = None,
) -> np.ndarray:
    """Appends ``max_new_tokens`` tokens to the prompt ``ids`` (a list, a ``[T]`` or a
    ``[B, T]`` int array) and returns the whole sequences, ``[B, T + max_new_tokens]`` int64
    (a flat prompt is one row).

    Each new token is chosen from the last position's logits by
    :class:`llmfs.gpt.sampling.Sampler`: ``temperature = 0`` is greedy (the arg-max, lowest id
    on a tie), otherwise a draw from ``softmax(logits / temperature)`` over the ``top_k`` largest
    logits, reproducible for a given ``seed`` (the draw order is in :mod:`llmfs.gpt.sampling`);
    ``top_p`` keeps only the most probable candidates holding that much of the probability
    (Hugging Face's top-p). With a ``stop_token`` (a tokenizer's ``<|endoftext|>``), a row that
    chose it is finished (it repeats the stop token) and generation ends once every row has
    chosen it: the result then has fewer than ``max_new_tokens`` new columns.
    The context is the last ``n_ctx`` tokens: past ``n_ctx`` the window slides.

    ``kv_cache=True`` keeps, per block, one preallocated ``[2, B, H, n_ctx, D]`` array of the
    keys and values of the positions already seen, so that each step computes one position;
    ``False`` recomputes the window at every step. Both give the same tokens. The cache holds
    keys and values computed at positions ``0..n - 1`` of the position embedding; once the window
    slides, every token moves to a new position, so its keys and values change in every block (the
    embeddings are learned, absolute): the cache is refilled from the slid window in place (no new
    array), never shifted.

    Raises :class:`~llmfs.gpt.errors.TaskError` for an empty prompt or ids that are not ints of
    the vocabulary, :class:`~llmfs.gpt.sampling.GenerationError` for a bad ``max_new_tokens``,
    ``temperature``, ``top_k``, ``top_p``, ``stop_token`` or ``seed``,
    :class:`~llmfs.gpt.errors.WeightsError` for params
    that do not fit ``config``.
    """
    prompt = sampling.check_prompt(config, ids, max_new_tokens)
    sampler = sampling.check_sampler(config, temperature, top_k, seed, top_p, stop_token)
    check_params(params, config)
    p64 = {name: np.asarray(value, dtype=np.float64) for name, value in params.items()}
    shape = (2, len(prompt), config.n_head, config.n_ctx, config.head_size)
    caches = [np.zeros(shape) for _ in range(config.n_layer)]
    return sampling.generate_with(
        prompt,
        max_new_tokens,
        config.n_ctx,
        sampler,
        lambda window: _window_logits(p64, config, window),
        lambda new, pos: _cached_logits(p64, config, new, caches, pos),
        sampling.Window() if kv_cache else None,
    )


def solve(params: Params, config: GPTConfig, a: int, b: int) -> str:
    """The model's answer text to ``a + b`` (three digits, least significant first)."""
    return task.solve_with(lambda ids, n: generate(params, config, ids, n), a, b)


def accuracy(params: Params, config: GPTConfig, problems: np.ndarray) -> float:
    """Fraction of ``problems`` (``[n, 2]``) whose greedy answer is exactly right, computed now
    (all problems in one batch)."""
    return task.accuracy_with(lambda ids, n: generate(params, config, ids, n), problems)


def held_out_accuracy(params: Params, config: GPTConfig) -> float:
    """:func:`accuracy` on the held-out problems of the shipped split (:func:`task.split`)."""
    return accuracy(params, config, task.split().held_out)
