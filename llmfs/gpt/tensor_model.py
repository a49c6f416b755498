"""The capstone model's forward pass on :mod:`llmfs.tensor`: the same GPT-2 as
:mod:`llmfs.gpt.reference`, computed with the course's tensors, views and ops on any backend.

Every step is a function over :class:`~llmfs.tensor.Tensor`/:class:`~llmfs.tensor.TensorView`
values, named as in the reference so that each can be checked against it on its own:

``embed`` -> for each block ``x = x + attention(ln_1(x))``, ``x = x + mlp(ln_2(x))`` ->
``layer_norm(ln_f)`` -> ``x @ wte.weight.T`` (the tied head, a transposed VIEW of the embedding).

What is a view and what is a copy (the "copy budget" of one forward pass, :func:`copy_budget`):

* Q, K and V are slices of the packed ``[B, T, 3C]`` projection, split into heads and permuted to
  ``[B, H, T, D]``: views, nothing copied; ``K^T`` is a transposed view.
* The causal mask is a ``[T, T]`` tensor of ``0`` and ``-inf`` added to the scores: broadcasting
  expands it to ``[B, H, T, T]`` with zero strides, without copying.
* Merging the heads back (``[B, H, T, D]`` -> permute -> ``[B, T, H, D]`` -> ``[B, T, C]``)
  cannot be a view (the permuted heads are not contiguous), so it costs exactly ONE materialize
  per block.
* Every elementwise op, reduction and matmul computes a new owner; none of them copies values
  that it could read through a view.

Weights are converted once (:func:`tensor_params`) into tensors of one dtype: float64 gives logits
equal to the reference to ~1e-12, float32 to ~1e-5 (the emulated Metal backend runs float32 only).
The embedding lookup is :func:`llmfs.tensor.take` of the token ids (an int64 tensor) along the
table's rows, a gather into a new owner. Generation (:func:`generate`) reads the last position's
logits back to NumPy to choose the next token (:mod:`llmfs.gpt.sampling`), and with its KV cache
(:mod:`llmfs.gpt.kv_cache`) computes one position per step.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any

import numpy as np

import llmfs.tensor as lt
from llmfs.gpt import reference, sampling, task
from llmfs.gpt.errors import TaskError, WeightsError
from llmfs.gpt.kv_cache import KVCache
from llmfs.gpt.lora import LoRAParams
from llmfs.gpt.model import GPTConfig, Params, check_params, parameter_shapes
from llmfs.tensor import Tensor, TensorView, available_backends, use_backend
from llmfs.tensor import functional as F

Operand = Tensor | TensorView
#: Parameters as tensors, with the names of :mod:`llmfs.gpt.model`.
TensorParams = dict[str, Tensor]
#: A forward pass: ``(weights, config, tokens) -> logits``.
ForwardFn = Callable[[TensorParams, GPTConfig, np.ndarray], Tensor]


# --------------------------------------------------------------------------------------------
# The copy-budget trace
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One step of a forward pass: its name, result shape, and what it cost in storage.

    ``kind`` is ``"view"`` (new metadata over existing storage, nothing copied), ``"compute"``
    (an op wrote its result into a new owner) or ``"copy"`` (a materialize: values moved into a new
    owner without any arithmetic)."""

    name: str
    kind: str
    shape: tuple[int, ...]


@dataclass
class Trace:
    """The steps of one forward pass, in order; ``repr`` is the deterministic copy-budget table."""

    steps: list[Step] = field(default_factory=list)

    def record(self, name: str, result: Operand, *, copy: bool = False) -> None:
        kind = "view" if isinstance(result, TensorView) else ("copy" if copy else "compute")
        self.steps.append(Step(name, kind, tuple(result.shape)))

    def count(self, kind: str) -> int:
        """How many steps were of ``kind`` (``"view"``, ``"compute"`` or ``"copy"``)."""
        return len([s for s in self.steps if s.kind == kind])

    @property
    def copies(self) -> list[Step]:
        """The materializations: the copy budget."""
        return [s for s in self.steps if s.kind == "copy"]

    def __repr__(self) -> str:
        width = max((len(s.name) for s in self.steps), default=4)
        lines = [f"{'step':<{width}}  {'kind':<7}  shape"]
        lines += [f"{s.name:<{width}}  {s.kind:<7}  {list(s.shape)}" for s in self.steps]
        lines.append(
            f"{len(self.steps)} steps: {self.count('view')} views, {self.count('compute')} "
            f"computed results, {self.count('copy')} copies (materialize)"
        )
        return "\n".join(lines)


@dataclass
class CopyCount:
    """Materializations counted by :func:`count_materializations`: their shapes, in order."""

    shapes: list[tuple[int, ...]] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.shapes)


@contextmanager
def _on_materialize(seen: Callable[[Operand, Tensor], None]) -> Iterator[None]:
    """Calls ``seen(source, copy)`` after every ``materialize()`` run inside the ``with`` block,
    by any code: the method is wrapped on the class that defines it for the duration of the
    block, then put back (so not thread-safe)."""
    owner = next(c for c in TensorView.__mro__ if "materialize" in c.__dict__)
    original = owner.__dict__["materialize"]

    def counting(self: Operand) -> Tensor:
        copy: Tensor = original(self)
        seen(self, copy)
        return copy

    setattr(owner, "materialize", counting)  # noqa: B010 - the class is chosen at run time
    try:
        yield
    finally:
        setattr(owner, "materialize", original)  # noqa: B010


@contextmanager
def count_materializations() -> Iterator[CopyCount]:
    """Counts every ``materialize()`` of a view or a tensor (and so :func:`llmfs.tensor.materialize`
    and ``copying_transpose``) run inside the ``with`` block, by any code: the copy budget of code
    that records no trace, such as a learner's forward pass. Not thread-safe (it wraps the method
    on the class that defines it for the duration of the block, then puts it back)."""
    counted = CopyCount()
    with _on_materialize(lambda source, _: counted.shapes.append(tuple(source.shape))):
        yield counted


#: The steps :func:`tracing` records: for each layer of the forward pass (a function of this
#: module), the local names that hold a step's result and the step's name, formatted with the
#: layer's locals (``h.{i}.ln_1`` is block ``i``'s). The layers themselves say nothing of it.
STEPS: dict[str, dict[str, str]] = {
    "embed": {
        "rows": "token rows = take(wte, ids)",
        "positions": "positions = wpe[:T]",
        "x": "embed = tokens + positions",
    },
    "block": {
        "ln_1": "h.{i}.ln_1",
        "resid": "h.{i} residual + attention",
        "ln_2": "h.{i}.ln_2",
        "out": "h.{i} residual + mlp",
    },
    "attention": {
        "qkv": "qkv = x @ W + b",
        "q": "q, k, v: slices split into heads",
        "kt": "k transposed",
        "scores": "scores = q @ k^T / sqrt(d)",
        "masked": "scores + causal mask",
        "weights": "softmax",
        "heads": "weights @ v",
        "merged": "heads merged to [B, T, C]",
        "out": "attention output projection",
    },
    "merge_heads": {"moved": "heads permuted to [B, T, H, D]", "copied": "materialize (heads)"},
    "mlp": {"hidden": "gelu(x @ W_fc + b)", "out": "mlp output projection"},
    "forward": {"ln_f": "ln_f", "head": "head = wte^T (tied)", "logits": "logits = x @ wte^T"},
}


@contextmanager
def tracing() -> Iterator[Trace]:
    """Records the steps of every forward pass this thread runs inside the ``with`` block, in
    order: each time a layer of :data:`STEPS` binds one of its step names, the value bound is a
    step (a view, a computed result, or a copy when a ``materialize()`` made it, as
    :func:`count_materializations` sees them). The layers carry no notes: the block watches
    them (Python's trace hook, for this thread and this block only, the one held before put
    back after), so the forward pass reads as a plain model and costs nothing outside it."""
    trace = Trace()
    copies: dict[int, Tensor] = {}  # the copies made in the block, kept so an id is not reused
    watched = _WATCHED

    def watch(frame: FrameType, event: str, _: object) -> Any:
        names = watched.get(frame.f_code) if event == "call" else None
        if names is None:
            return None
        seen: dict[str, int] = {}

        def bindings(frame: FrameType, event: str, _: object) -> Any:
            local = frame.f_locals
            for name, step in names.items():
                value = local.get(name)
                if value is not None and seen.get(name) != id(value):
                    seen[name] = id(value)
                    copy = copies.get(id(value)) is value
                    trace.record(step.format_map(local), value, copy=copy)
            return bindings

        return bindings

    def made(_: Operand, copy: Tensor) -> None:
        copies[id(copy)] = copy

    before = sys.gettrace()
    with _on_materialize(made):
        sys.settrace(watch)
        try:
            yield trace
        finally:
            sys.settrace(before)


# --------------------------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------------------------


def tensor_params(params: Params, dtype: object = np.float64) -> TensorParams:
    """Every parameter as an owning :class:`Tensor` of ``dtype`` (float64 or float32)."""
    return {name: Tensor.from_numpy(np.asarray(v), dtype=dtype) for name, v in params.items()}


def layer_norm(x: Operand, weight: Operand, bias: Operand, eps: float) -> Tensor:
    """LayerNorm over the last axis, biased variance: ``(x - mean) / lt.sqrt(var + eps) * weight +
    bias`` (the reference's order of operations), as ONE recorded op with its analytic gradient
    (:func:`llmfs.tensor.functional.layer_norm`, PyTorch's ``layer_norm``)."""
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def gelu(x: Operand) -> Tensor:
    """GELU, tanh form: ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))``, as one
    recorded op (:func:`llmfs.tensor.functional.gelu`, PyTorch's ``gelu(approximate="tanh")``)."""
    return F.gelu(x, "tanh")


def softmax(x: Operand, axis: int = -1) -> Tensor:
    """Softmax over ``axis`` after subtracting the maximum (so ``exp`` never overflows; ``-inf``
    entries become exactly 0), as one recorded op (:func:`llmfs.tensor.functional.softmax`)."""
    return F.softmax(x, axis)


def causal_mask(t: int, dtype: object = np.float64) -> Tensor:
    """``[t, t]``: 0 where position ``i`` may attend to ``j`` (``j <= i``), ``-inf`` above the
    diagonal. Added to the scores, it broadcasts over batch and heads as a zero-stride view."""
    return Tensor.from_numpy(np.triu(np.full((t, t), -np.inf), k=1), dtype=dtype)


def split_heads(x: Operand, n_head: int) -> TensorView:
    """``[B, T, C]`` -> ``[B, H, T, C // H]`` as a view (split the feature axis, swap T and H)."""
    view = x.view() if isinstance(x, Tensor) else x
    c = view.shape[2]
    return view.split(2, [n_head, c // n_head]).permute([0, 2, 1, 3])


def merge_heads(y: Operand) -> TensorView:
    """``[B, H, T, D]`` -> ``[B, T, H * D]`` with exactly one copy: permuted heads are not
    contiguous, so they are materialized once, then merged as a view."""
    view = y.view() if isinstance(y, Tensor) else y
    moved = view.permute([0, 2, 1, 3])
    copied = moved.materialize()
    return copied.merge(2, 3)


def linear(x: Operand, w: TensorParams, name: str) -> Tensor:
    """The linear layer ``name`` (``"h.0.attn.c_attn"``): ``x @ weight + bias``. When ``w`` is a
    :class:`~llmfs.gpt.lora.LoRAParams` that adapts the layer, its adapter computes the product
    (``x @ W + (alpha/r) (x @ A) @ B``): the same forward pass runs a model with or without
    LoRA."""
    adapter = w.adapters.get(name) if isinstance(w, LoRAParams) else None
    product = x @ w[name + ".weight"] if adapter is None else adapter(x)
    result: Tensor = product + w[name + ".bias"]
    return result


def attention(x: Operand, w: TensorParams, prefix: str, config: GPTConfig) -> Tensor:
    """Causal multi-head self-attention of ``x`` (``[B, T, C]``) with the weights under ``prefix``
    (``"h.{i}.attn."``), as :func:`llmfs.gpt.reference.attention`."""
    view = x.view() if isinstance(x, Tensor) else x
    c = config.n_embd
    t = view.shape[1]
    qkv = linear(view, w, prefix + "c_attn")
    q, k, v = (split_heads(qkv.slice(2, i * c, (i + 1) * c), config.n_head) for i in range(3))
    kt = k.transpose(2, 3)
    scores = q @ kt / math.sqrt(config.head_size)
    masked = scores + causal_mask(t, scores.dtype)
    weights = softmax(masked, axis=-1)
    heads = weights @ v
    merged = merge_heads(heads)
    out = linear(merged, w, prefix + "c_proj")
    return out


def mlp(x: Operand, w: TensorParams, prefix: str) -> Tensor:
    """The block's MLP under ``prefix`` (``"h.{i}.mlp."``): up-projection, GELU, down-projection."""
    hidden = gelu(linear(x, w, prefix + "c_fc"))
    out = linear(hidden, w, prefix + "c_proj")
    return out


def block(x: Operand, w: TensorParams, i: int, config: GPTConfig) -> Tensor:
    """Block ``i``: ``x + attention(ln_1(x))``, then ``+ mlp(ln_2(.))`` (pre-LayerNorm)."""
    p = f"h.{i}."
    eps = config.layer_norm_eps
    ln_1 = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
    resid: Tensor = x + attention(ln_1, w, p + "attn.", config)
    ln_2 = layer_norm(resid, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
    out: Tensor = resid + mlp(ln_2, w, p + "mlp.")
    return out


def embed(tokens: object, w: TensorParams, config: GPTConfig) -> Tensor:
    """Token embedding plus position embedding: ``[B, T, C]``. The token rows are gathered with
    ``take(wte, ids)``; the positions are a slice VIEW of ``wpe`` that broadcasts over the
    batch."""
    ids, _ = sampling.check_tokens(config, tokens)
    rows = lt.take(w["wte.weight"], Tensor.from_numpy(ids.astype(np.int64)), axis=0)
    positions = w["wpe.weight"].slice(0, 0, ids.shape[1])
    x = rows + positions
    return x


def forward(w: TensorParams, config: GPTConfig, tokens: object) -> Tensor:
    """Logits of every position: ``[T, vocab]`` for ``[T]`` tokens, ``[B, T, vocab]`` for
    ``[B, T]``, in the weights' dtype (:func:`tracing` records its steps). Raises
    :class:`TaskError` on a length outside ``1..n_ctx`` or an unknown id."""
    ids, single = sampling.check_tokens(config, tokens)
    x = embed(ids, w, config)
    for i in range(config.n_layer):
        x = block(x, w, i, config)
    ln_f = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], config.layer_norm_eps)
    head = w["wte.weight"].T
    logits = ln_f @ head
    if single:
        return logits.view()[0].materialize()
    return logits


#: The layers :func:`tracing` watches, by their code (a layer wrapped or replaced while a block
#: traces is not watched): :data:`STEPS` by function.
_WATCHED: dict[CodeType, dict[str, str]] = {
    layer.__code__: STEPS[layer.__name__]
    for layer in (embed, block, attention, merge_heads, mlp, forward)
}


# --------------------------------------------------------------------------------------------
# Generation: greedy or sampled, with or without the KV cache
# --------------------------------------------------------------------------------------------


def _last_logits(x: Operand, w: TensorParams, config: GPTConfig) -> np.ndarray:
    """``[B, vocab]`` as float64 NumPy: the final LayerNorm and the tied head of the last
    position of ``x`` (``[B, T, C]``) only (generation never reads the other positions)."""
    view = x.view() if isinstance(x, Tensor) else x
    last = view.slice(1, view.shape[1] - 1, view.shape[1])  # [B, 1, C], a view
    h = layer_norm(last, w["ln_f.weight"], w["ln_f.bias"], config.layer_norm_eps)
    logits: np.ndarray = (h @ w["wte.weight"].T).to_numpy()
    return logits[:, 0, :].astype(np.float64)


def _embed_at(ids: np.ndarray, w: TensorParams, pos: int) -> Tensor:
    """Token rows of ``ids`` (``[B, T]``) plus position rows ``pos..pos + T - 1``."""
    rows = lt.take(w["wte.weight"], Tensor.from_numpy(ids), axis=0)
    result: Tensor = rows + w["wpe.weight"].slice(0, pos, pos + ids.shape[1])
    return result


def _window_logits(w: TensorParams, config: GPTConfig, window: np.ndarray) -> np.ndarray:
    """The last position's logits of ``window`` (``[B, T]``, ``T <= n_ctx``), recomputed with
    :func:`block`: what :func:`forward` gives at ``[:, -1]``."""
    x = _embed_at(window, w, 0)
    for i in range(config.n_layer):
        x = block(x, w, i, config)
    return _last_logits(x, w, config)


def cached_attention(
    x: Operand,
    w: TensorParams,
    prefix: str,
    config: GPTConfig,
    cache: KVCache,
    layer: int,
    pos: int,
) -> Tensor:
    """:func:`attention` of ``T`` new positions ``pos..pos + T - 1`` (``x`` is ``[B, T, C]``)
    over block ``layer``'s cache, whose positions ``0..pos - 1`` already hold the earlier keys
    and values.

    The new keys and values are the slice ``qkv[..., C:3C]`` split to ``[B, T, 2, H, D]`` and
    permuted to ``[2, B, H, T, D]`` (a view), written with ``copyto`` into
    ``cache.slice(3, pos, pos + T)``; THEN ``past = cache.slice(3, 0, pos + T)`` is taken (a view
    taken before the write would be stale) and ``q @ past[0]^T``, ``softmax(.) @ past[1]`` read
    the keys and values through it without copying them. One new position needs no mask (it
    sees every cached one) and its heads merge as a view (``[B, H, 1, D]`` permuted is still
    adjacent in storage); several (the prompt, or a slid window) mask ``j > pos + i`` and merge
    with :func:`merge_heads`' one copy, as :func:`attention` does."""
    view = x.view() if isinstance(x, Tensor) else x
    c, h, d = config.n_embd, config.n_head, config.head_size
    t = view.shape[1]
    qkv = linear(view, w, prefix + "c_attn")
    q = split_heads(qkv.slice(2, 0, c), h)
    kv = qkv.slice(2, c, 3 * c).split(2, [2, h, d]).permute([2, 0, 3, 1, 4])
    cache.write(layer, pos, kv)
    past = cache.past(layer, pos + t)
    scores = q @ past[0].transpose(2, 3) / math.sqrt(d)
    if t > 1:
        mask = np.triu(np.full((t, pos + t), -np.inf), k=pos + 1)
        scores = scores + Tensor.from_numpy(mask, dtype=scores.dtype)
    heads = softmax(scores, axis=-1) @ past[1]
    if t == 1:
        merged = heads.view().permute([0, 2, 1, 3]).merge(2, 3)
    else:
        merged = merge_heads(heads)
    out = linear(merged, w, prefix + "c_proj")
    return out


def cached_logits(
    w: TensorParams, config: GPTConfig, new: np.ndarray, cache: KVCache, pos: int
) -> np.ndarray:
    """The last position's logits (``[B, vocab]`` float64) after running the tokens ``new``
    (``[B, T]``) at positions ``pos..pos + T - 1`` through every block, each block's attention
    extending and reading its cache (:func:`cached_attention`)."""
    eps = config.layer_norm_eps
    x: Operand = _embed_at(new, w, pos)
    for i in range(config.n_layer):
        p = f"h.{i}."
        hidden = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        x = x + cached_attention(hidden, w, p + "attn.", config, cache, i, pos)
        hidden = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        x = x + mlp(hidden, w, p + "mlp.")
    return _last_logits(x, w, config)


def generate(
    w: TensorParams,
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
    """:func:`llmfs.gpt.reference.generate` on :mod:`llmfs.tensor`, with the same arguments,
    result (``[B, T + max_new_tokens]`` int64: the prompt, then the new tokens), choice of tokens
    (:class:`llmfs.gpt.sampling.Sampler`, fed the logits as float64; ``top_p`` and
    ``stop_token`` as there) and errors.

    ``kv_cache=True`` keeps one :class:`~llmfs.gpt.kv_cache.KVCache` owner per block, in the
    weights' dtype: the prompt fills positions ``0..T - 1`` in one pass, then each step computes
    one position, writing its keys and values through ``copyto`` and attending over a slice view
    of the positions so far (no copy of the past). Once the window slides past ``n_ctx``, every
    position's embedding changes, so each step refills the owners in place from the slid window
    (the rule and its reason are in :mod:`llmfs.gpt.kv_cache`). ``kv_cache=False`` recomputes
    the window at every step; both give the same tokens.
    """
    prompt = sampling.check_prompt(config, ids, max_new_tokens)
    sampler = sampling.check_sampler(config, temperature, top_k, seed, top_p, stop_token)
    _check_tensor_params(w, config)
    cache = KVCache(config, len(prompt), w["wte.weight"].dtype) if kv_cache else None
    return sampling.generate_with(
        prompt,
        max_new_tokens,
        config.n_ctx,
        sampler,
        lambda window: _window_logits(w, config, window),
        lambda new, pos: cached_logits(w, config, new, cache, pos),  # type: ignore[arg-type]
        cache,
    )


def _check_tensor_params(w: TensorParams, config: GPTConfig) -> None:
    """Raises :class:`~llmfs.gpt.errors.WeightsError` unless ``w`` has exactly ``config``'s
    parameter names, each a tensor of its shape."""
    shapes = parameter_shapes(config)
    if set(w) != set(shapes):
        missing = sorted(set(shapes) - set(w))
        extra = sorted(set(w) - set(shapes))
        raise WeightsError(
            f"weights do not match the config: missing {missing[:5]} ({len(missing)}), "
            f"unexpected {extra[:5]} ({len(extra)})"
        )
    for name, shape in shapes.items():
        if not isinstance(w[name], (Tensor, TensorView)) or tuple(w[name].shape) != shape:
            got = list(w[name].shape) if hasattr(w[name], "shape") else type(w[name]).__name__
            raise WeightsError(f"{name} is {got}, the config needs a tensor of {list(shape)}")


def solve(w: TensorParams, config: GPTConfig, a: int, b: int) -> str:
    """The model's answer text to ``a + b`` (three digits, least significant first)."""
    return task.solve_with(lambda ids, n: generate(w, config, ids, n), a, b)


def accuracy(
    w: TensorParams, config: GPTConfig, problems: np.ndarray, batch_size: int = 1024
) -> float:
    """Fraction of ``problems`` (``[n, 2]``) answered exactly right, computed now through
    :mod:`llmfs.tensor` in batches of ``batch_size``."""
    return task.accuracy_with(lambda ids, n: generate(w, config, ids, n), problems, batch_size)


def held_out_accuracy(w: TensorParams, config: GPTConfig) -> float:
    """:func:`accuracy` on the held-out problems of the shipped split."""
    return accuracy(w, config, task.split().held_out)


def copy_budget(w: TensorParams, config: GPTConfig, tokens: object) -> Trace:
    """The trace of one forward pass of ``tokens``: every step with its kind (view, computed
    result, copy)."""
    with tracing() as trace:
        forward(w, config, tokens)
    return trace


# --------------------------------------------------------------------------------------------
# Timing per backend
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BackendTime:
    """The median time of one forward pass on one backend, or why it was not measured."""

    backend: str
    dtype: str
    batch: tuple[int, ...]
    seconds: float | None
    note: str = ""


def forward_time(
    params: Params,
    config: GPTConfig,
    tokens: np.ndarray,
    backend: str,
    dtype: object = np.float32,
    repeat: int = 3,
    warmup: int = 1,
    forward_fn: ForwardFn | None = None,
) -> float:
    """Median seconds of one forward pass of ``tokens`` on ``backend``, after ``warmup`` untimed
    runs (which also compile kernels where a backend compiles them). ``forward_fn(w, config,
    tokens)`` is the forward pass timed (default :func:`forward`; a learner's works too)."""
    run = forward if forward_fn is None else forward_fn
    if repeat < 1:
        raise TaskError(f"repeat must be at least 1, got {repeat}")
    with use_backend(backend):
        w = tensor_params(params, dtype)
        for _ in range(warmup):
            run(w, config, tokens)
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            run(w, config, tokens)
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


@dataclass(frozen=True)
class TimingPlan:
    """What one backend is timed on: ``batch`` held-out prompts cut to their first ``length``
    tokens, in ``dtype``, ``repeat`` timed runs after ``warmup`` untimed ones."""

    batch: int
    length: int = task.PROMPT_LENGTH
    dtype: str = "float32"
    repeat: int = 3
    warmup: int = 1


#: Per backend: the pure-Python ``reference`` backend loops over every value in Python (seconds
#: per pass), so it gets one short prompt, timed once; the emulated Metal backend runs float32
#: only and compiles its kernels on the first (untimed) run.
DEFAULT_TIMING: dict[str, TimingPlan] = {
    "numpy": TimingPlan(batch=64),
    "reference": TimingPlan(batch=1, length=2, dtype="float64", repeat=1, warmup=0),
    "metal-emulator": TimingPlan(batch=1),
    "metal": TimingPlan(batch=64),
}


def backend_times(
    params: Params,
    config: GPTConfig,
    backends: Sequence[str] | None = None,
    plan: dict[str, TimingPlan] | None = None,
    forward_fn: ForwardFn | None = None,
) -> list[BackendTime]:
    """Times one forward pass (``forward_fn``, default :func:`forward`) of held-out prompts on each
    available backend (default: all of them) as ``plan`` (default :data:`DEFAULT_TIMING`) says. A
    backend that refuses an op gets a note instead of a time, never an exception."""
    plans = {**DEFAULT_TIMING, **(plan or {})}
    names = list(backends) if backends is not None else list(available_backends())
    prompts = task.prompts(task.split().held_out)
    rows = []
    for name in names:
        how = plans.get(name, TimingPlan(batch=1))
        tokens = prompts[: how.batch, : how.length]
        try:
            seconds: float | None = forward_time(
                params, config, tokens, name, how.dtype, how.repeat, how.warmup, forward_fn
            )
            note = ""
        except Exception as error:  # any refusal is reported, not raised
            seconds, note = None, f"{type(error).__name__}: {str(error).splitlines()[0]}"
        rows.append(BackendTime(name, how.dtype, tuple(tokens.shape), seconds, note))
    return rows


def format_times(rows: Sequence[BackendTime]) -> str:
    """The timing table: one line per backend."""
    lines = []
    for r in rows:
        what = f"{r.backend:<15} {r.dtype:<8} batch {list(r.batch)}"
        if r.seconds is None:
            lines.append(f"{what}: not measured ({r.note})")
        else:
            lines.append(f"{what}: {r.seconds * 1e3:9.2f} ms per forward pass")
    return "\n".join(lines)


def check_against_reference(
    params: Params, config: GPTConfig, tokens: np.ndarray, dtype: object = np.float64
) -> float:
    """Largest absolute difference between this module's logits (``dtype``) and the NumPy
    reference's (float64) for ``tokens``."""
    check_params(params, config)
    ours = forward(tensor_params(params, dtype), config, tokens).to_numpy()
    return float(np.abs(ours.astype(np.float64) - reference.forward(params, config, tokens)).max())


__all__ = [
    "DEFAULT_TIMING",
    "STEPS",
    "BackendTime",
    "CopyCount",
    "ForwardFn",
    "Step",
    "TensorParams",
    "TimingPlan",
    "Trace",
    "accuracy",
    "attention",
    "backend_times",
    "block",
    "cached_attention",
    "cached_logits",
    "causal_mask",
    "check_against_reference",
    "copy_budget",
    "count_materializations",
    "embed",
    "format_times",
    "forward",
    "forward_time",
    "gelu",
    "generate",
    "held_out_accuracy",
    "layer_norm",
    "linear",
    "merge_heads",
    "mlp",
    "softmax",
    "solve",
    "split_heads",
    "tensor_params",
    "tracing",
]
