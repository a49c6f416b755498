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

from llmfs.gpt import task
from llmfs.gpt.errors import TaskError
from llmfs.gpt.model import GPTConfig, Params

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


def _as_batch(tokens: np.ndarray, config: GPTConfig) -> tuple[np.ndarray, bool]:
    ids = np.asarray(tokens)
    single = ids.ndim == 1
    if single:
        ids = ids[None, :]
    if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
        raise TaskError(
            f"tokens must be [T] or [B, T] ints, got shape {list(np.shape(tokens))} of {ids.dtype}"
        )
    t = ids.shape[1]
    if not 1 <= t <= config.n_ctx:
        raise TaskError(f"sequence length {t} is outside 1..n_ctx = {config.n_ctx}")
    if ids.size and (ids.min() < 0 or ids.max() >= config.vocab_size):
        raise TaskError(
            f"token ids {int(ids.min())}..{int(ids.max())} fall outside 0..{config.vocab_size - 1}"
        )
    return ids, single


def embed(tokens: np.ndarray, params: Params, config: GPTConfig) -> np.ndarray:
    """Token embedding plus position embedding: ``[B, T, n_embd]`` float64."""
    ids, _ = _as_batch(tokens, config)
    wte = params["wte.weight"].astype(np.float64)
    wpe = params["wpe.weight"].astype(np.float64)
    return wte[ids] + wpe[: ids.shape[1]]


def forward(params: Params, config: GPTConfig, tokens: np.ndarray) -> np.ndarray:
    """Logits of every position, float64: ``[T, vocab]`` for ``[T]`` tokens, ``[B, T, vocab]`` for
    ``[B, T]``. Raises :class:`TaskError` on a length outside ``1..n_ctx`` or an unknown id."""
    ids, single = _as_batch(tokens, config)
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
    ids, _ = _as_batch(tokens, config)
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


def generate(
    params: Params, config: GPTConfig, tokens: np.ndarray, max_new_tokens: int
) -> np.ndarray:
    """Greedy generation: appends ``max_new_tokens`` tokens to ``tokens`` (``[T]`` or ``[B, T]``),
    each the argmax of the last position's logits (the lowest id on a tie, as ``np.argmax``).
    Returns only the new tokens, ``[max_new_tokens]`` or ``[B, max_new_tokens]``. Raises
    :class:`TaskError` when the sequence would outgrow ``n_ctx``."""
    ids, single = _as_batch(tokens, config)
    if max_new_tokens < 0 or ids.shape[1] + max_new_tokens - 1 > config.n_ctx:
        raise TaskError(
            f"{ids.shape[1]} prompt tokens + {max_new_tokens} new tokens need "
            f"{ids.shape[1] + max_new_tokens - 1} positions; n_ctx = {config.n_ctx}"
        )
    new = []
    for _ in range(max_new_tokens):
        nxt = forward(params, config, ids)[:, -1, :].argmax(axis=-1)
        new.append(nxt)
        ids = np.concatenate([ids, nxt[:, None]], axis=1)
    out = np.stack(new, axis=1) if new else np.zeros((ids.shape[0], 0), dtype=np.int64)
    return out[0] if single else out


def solve(params: Params, config: GPTConfig, a: int, b: int) -> str:
    """The model's answer text to ``a + b`` (three digits, least significant first)."""
    ids = np.asarray(task.encode(task.prompt(a, b)), dtype=np.int64)
    return task.decode(generate(params, config, ids, task.ANSWER_LENGTH))


def accuracy(params: Params, config: GPTConfig, problems: np.ndarray) -> float:
    """Fraction of ``problems`` (``[n, 2]``) whose greedy answer is exactly right, computed now
    (all problems in one batch)."""
    problems = np.asarray(problems)
    if len(problems) == 0:
        raise TaskError("accuracy of no problems is undefined: problems is empty")
    generated = generate(params, config, task.prompts(problems), task.ANSWER_LENGTH)
    expected = task.sequences(problems)[:, task.PROMPT_LENGTH :]
    return float((generated == expected).all(axis=1).mean())


def held_out_accuracy(params: Params, config: GPTConfig) -> float:
    """:func:`accuracy` on the held-out problems of the shipped split (:func:`task.split`)."""
    return accuracy(params, config, task.split().held_out)
