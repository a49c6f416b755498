"""Checks of chapter 11's "implement it" exercises: from tokens to text.

Every check holds the learner's function to the library's own, on random and hostile cases drawn
from a seed (a case is one plain JSON object; its ``prepare`` makes the arguments):

* ``train_bpe(text, num_merges)``: the merges :meth:`llmfs.gpt.tokenizer.BPETokenizer.train`
  learns, as ``(left id, right id)`` pairs (merge ``i`` makes id ``256 + i``). Its rule: the most
  frequent adjacent pair within a pre-tokenized word, ties to the smallest ``(left, right)``,
  a pair whose bytes are already a token skipped, stopping early when no pair is left. A quarter
  of the cases are texts on which ties to the first counted pair (``Counter.most_common``) give
  other merges (each drawn until it does); all are in several scripts (multi-byte UTF-8).
* ``bpe_encode(text, merges)``: :meth:`BPETokenizer.encode` of a tokenizer trained with those
  merges; texts the merges were not trained on, in any script, whitespace runs, the empty text.
* ``sample_next(logits, temperature, top_k, rng)``: :meth:`llmfs.gpt.sampling.Sampler.choose` on
  the same logits and a generator from the same seed: the same tokens, and the same use of the
  random stream (one ``rng.random(B)`` per call; nothing when greedy). Hostile logits: ties (the
  lower id wins, at the arg-max and at the top-k boundary), logits of 10,000 and temperatures of
  1e-3 (where ``exp`` without the largest logit subtracted overflows), ``-inf`` entries.
* ``cache_write(cache, pos, k, v)``: the write of :meth:`llmfs.gpt.kv_cache.KVCache.write`: the
  keys into ``cache[0]`` and the values into ``cache[1]`` at positions ``pos..pos + T - 1``,
  every other cell unchanged (the cells hold earlier values, never zeros), with no read-out of
  the tensors to NumPy; positions that do not fit raise the library's slice error.
* ``cached_attention_step(q, cache, t)``: one new query attending over positions ``0..t`` of the
  cache, read through ``cache.slice(3, 0, t + 1)`` without a copy (``materialize`` counted, and
  read-outs refused, as chapter 8's attention check does). The cells past ``t`` hold NaN, so an
  answer that reads them (the whole ``n_ctx`` with a mask) is wrong.

:func:`count_multiply_adds` counts the multiply-adds of every matrix product run in a block
(the chapter's prediction of what the cache saves is measured with it, not computed by formula).
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
import random
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmfs.course.exercise_checks.attention import Counted, counted_call
from llmfs.course.exercise_checks.report import CheckReport
from llmfs.course.exercise_checks.shortcuts import Shortcuts
from llmfs.course.exercise_checks.spec import ImplementSpec, register
from llmfs.gpt.sampling import Sampler
from llmfs.gpt.tokenizer import BPETokenizer, pretokenize
from llmfs.tensor import Tensor, TensorView

#: Largest difference from the reference, relative to its largest magnitude (at least 1).
TOLERANCE = 1e-9
AGREES = f"< {TOLERANCE:g}"

_BYTES = 256


# -- byte-level BPE ------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _trained(text: str, num_merges: int) -> BPETokenizer:
    return BPETokenizer.train(text, _BYTES + 1 + num_merges)


def train_reference(text: str, num_merges: int) -> list[list[int]]:
    """The merges :meth:`BPETokenizer.train` learns from ``text`` (at most ``num_merges``), as
    ``[left id, right id]`` pairs in rank order."""
    tokenizer = _trained(text, num_merges)
    return [[tokenizer.vocab[a], tokenizer.vocab[b]] for a, b in tokenizer.merges]


def train_first_seen_ties(text: str, num_merges: int) -> list[list[int]]:
    """BPE training whose ties go to the pair counted first (``Counter.most_common``'s order)
    instead of the smallest ``(left, right)``: the mistake the tie-sensitive cases catch."""
    words = Counter(pretokenize(text))
    ids = [list(w.encode("utf-8")) for w in words]
    freqs = list(words.values())
    merges: list[list[int]] = []
    for new_id in range(_BYTES, _BYTES + num_merges):
        counts: Counter[tuple[int, int]] = Counter()
        for word, freq in zip(ids, freqs):
            for pair in itertools.pairwise(word):
                counts[pair] += freq
        if not counts:
            break
        best = counts.most_common(1)[0][0]
        merges.append(list(best))
        ids = [_merge(word, best, new_id) for word in ids]
    return merges


def _merge(word: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    out: list[int] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


#: Words of the random texts: few letters, so pairs repeat and counts tie; several scripts.
_PIECES = ("ab", "ba", "abc", "aab", "bca", "the", "then", "he", "é", "née", "ça", "🙂", "🙂🙂")
_SPACES = (" ", " ", " ", "  ", "\n", " 's", "'t ", ", ", ". ")


def _random_text(rng: random.Random, words: int) -> str:
    out: list[str] = []
    for _ in range(words):
        out.append("".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 3))))
        out.append(rng.choice(_SPACES))
    return "".join(out)[: rng.randint(0, 160)]


def _tie_text(rng: random.Random) -> tuple[str, int]:
    # Texts on which ties to the first counted pair give other merges (about 99 draws in 100).
    for _ in range(_TIE_TRIES):
        text, n = _random_text(rng, rng.randint(3, 14)), rng.randint(4, 16)
        if train_first_seen_ties(text, n) != train_reference(text, n):
            return text, n
    return "ba ab", 2  # pragma: no cover - never reached in practice


#: Draws per tie-sensitive case before the fallback.
_TIE_TRIES = 50


def _train_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for k in range(n):
        if k % 4 == 3:
            text, merges = _tie_text(rng)
        elif k % 9 == 5:
            text, merges = rng.choice(("", " ", "a", "🙂")), rng.randint(0, 3)
        else:
            text, merges = _random_text(rng, rng.randint(1, 14)), rng.randint(0, 16)
        cases.append((text, merges))
    return cases


def _ids_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    try:
        return [[int(a), int(b)] for a, b in result]
    except (TypeError, ValueError):
        return {"result": f"a {type(result).__name__}, not a list of (left, right) id pairs"}


def _train_explain(got: Any, want: Any, text: str, num_merges: int) -> str | None:
    if got == train_first_seen_ties(text, num_merges):
        return (
            "among equally frequent pairs the smallest (left id, right id) is merged, not the "
            "one counted first"
        )
    if isinstance(got, list) and len(got) != len(want):
        return (
            "training merges until num_merges merges are made or no adjacent pair is left "
            "within any word"
        )
    return None


def _bpe_size(text: str, *rest: Any) -> tuple[int, ...]:
    return (len(text.encode("utf-8")), len(rest))


def _encode_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for k in range(n):
        train_text = _random_text(rng, rng.randint(4, 14))
        if k % 5 == 4:  # text the merges never saw, and the special token's spelling
            text = rng.choice(("", "  \n\n  x", "<|endoftext|>", "ünïcödé 🙂 mixed", "'s'll'd"))
        else:
            text = _random_text(rng, rng.randint(1, 10))
        cases.append((train_text, rng.randint(0, 20), text))
    return cases


def _encode_prepare(train_text: str, num_merges: int, text: str) -> tuple[Any, ...]:
    merges = [tuple(pair) for pair in train_reference(train_text, num_merges)]
    return text, merges


def _encode_reference(train_text: str, num_merges: int, text: str) -> list[int]:
    return _trained(train_text, num_merges).encode(text)


def _encode_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    try:
        return [int(i) for i in result]
    except (TypeError, ValueError):
        return {"result": f"a {type(result).__name__}, not a list of ids"}


def encode_across_words(text: str, merges: list[tuple[int, int]]) -> list[int]:
    """The merges applied to the whole text as one word: the mistake of skipping
    pre-tokenization (merges then cross word boundaries)."""
    word = list(text.encode("utf-8"))
    for rank, pair in enumerate(merges):
        word = _merge(word, (pair[0], pair[1]), _BYTES + rank)
    return word


def _encode_explain(got: Any, want: Any, train_text: str, num_merges: int, text: str) -> str | None:
    merges = [(a, b) for a, b in train_reference(train_text, num_merges)]
    if got == encode_across_words(text, merges) and got != want:
        return (
            "the text is cut into words first (pretokenize) and merges apply within a word, "
            "never across a word boundary"
        )
    return None


# -- sampling ------------------------------------------------------------------------------------

NOTHING_DRAWN = "nothing drawn"
ONE_DRAW = "one rng.random(B)"
OTHER_DRAWS = "other draws"


def _logits(case: dict[str, Any]) -> np.ndarray:
    rng = np.random.default_rng(case["seed"])
    batch, vocab = case["shape"]
    kind = case["logits"]
    if kind == "ties":  # few distinct values: ties at the arg-max and at the top-k boundary
        z = rng.integers(-2, 3, size=(batch, vocab)).astype(np.float64)
    elif kind == "large":
        z = 1e4 + 30.0 * rng.normal(size=(batch, vocab))
    else:
        z = 2.0 * rng.normal(size=(batch, vocab))
    if kind == "-inf" and vocab > 1:  # banned ids, never every id of a row
        banned = rng.random((batch, vocab)) < 0.4
        banned[np.arange(batch), rng.integers(0, vocab, size=batch)] = False
        z[banned] = -np.inf
    return z


def _draws(after: np.random.Generator, before: np.random.Generator, batch: int) -> str:
    # How the call used the stream: ``before`` is a copy of the generator made before the call.
    if after.bit_generator.state == before.bit_generator.state:
        return NOTHING_DRAWN
    before.random(batch)
    return ONE_DRAW if after.bit_generator.state == before.bit_generator.state else OTHER_DRAWS


def _stream_seed(case: dict[str, Any]) -> int:
    return int(case["seed"]) + 1


def _sample_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for k in range(n):
        vocab = rng.choice((1, 2, 5, rng.randint(3, 40)))
        top_k = rng.choice((None, 1, vocab, rng.randint(1, vocab)))
        temperature = rng.choice((0.0, 0.0, 1.0, 0.7, 2.5, 1e-3))
        case = {
            "shape": [rng.randint(1, 4), vocab],
            "logits": ("normal", "ties", "large", "-inf")[k % 4],
            "temperature": temperature,
            "top_k": top_k,
            "seed": rng.randrange(10**6),
        }
        cases.append((case,))
    return cases


def _sample_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    return (
        _logits(case),
        case["temperature"],
        case["top_k"],
        np.random.default_rng(_stream_seed(case)),
    )


def _sample_reference(case: dict[str, Any]) -> Any:
    rng = np.random.default_rng(_stream_seed(case))
    before = copy.deepcopy(rng)
    tokens = Sampler(float(case["temperature"]), case["top_k"], rng).choose(_logits(case))
    draws = _draws(rng, before, case["shape"][0])
    return {"tokens": [int(t) for t in tokens], "random stream": draws}


def _sample_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    # The generator as it was before the call: the summary compares how far the call moved it.
    before = copy.deepcopy(args[3])
    return fn(*args), before


def _sample_summary(pair: Any, call_args: tuple[Any, ...]) -> Any:
    result, before = pair
    logits, _, _, rng = call_args
    try:
        tokens = [int(t) for t in np.asarray(result).reshape(-1)]
    except (TypeError, ValueError):
        return {"result": f"a {type(result).__name__}, not token ids"}
    return {"tokens": tokens, "random stream": _draws(rng, before, logits.shape[0])}


def _top_k_ids(row: np.ndarray, top_k: int | None) -> set[int]:
    k = len(row) if top_k is None else top_k
    return {int(i) for i in np.argsort(-row, kind="stable")[:k]}


def _sample_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if not isinstance(got, dict) or not isinstance(got.get("tokens"), list):
        return None
    z = _logits(case)
    tokens = got["tokens"]
    if len(tokens) != z.shape[0]:
        return "sample_next returns one token per row of the logits"
    for b, token in enumerate(tokens):
        if not 0 <= token < z.shape[1]:
            return f"row {b}'s token {token} is not an id of the vocabulary"
        if token not in _top_k_ids(z[b], case["top_k"]):
            return (
                f"row {b}'s token is outside the top-k: only the top_k ids with the largest "
                "logits (ties to the lower id) are candidates"
            )
    if got.get("random stream") != want.get("random stream"):
        return (
            "the stream is used as the library uses it: one rng.random(B) per call when "
            "sampling, nothing when greedy (temperature 0 or top_k = 1)"
        )
    if case["temperature"] == 0:
        return "temperature 0 is greedy: the arg-max, the lowest id on a tie"
    return None


def _sample_size(case: dict[str, Any]) -> tuple[int, ...]:
    return (case["shape"][0] * case["shape"][1], 2)


# -- the cache write -----------------------------------------------------------------------------


def _cache_case(rng: random.Random, errors: bool) -> dict[str, Any]:
    n_ctx = rng.randint(1, 8)
    roll = rng.random()
    if errors and roll < 0.1:
        t = rng.randint(1, 3)
        pos = rng.randint(max(0, n_ctx - t + 1), n_ctx)  # the positions do not fit
    else:
        t = rng.choice((1, 1, 1, rng.randint(1, n_ctx)))
        pos = rng.choice((0, n_ctx - t, rng.randint(0, n_ctx - t)))
    return {
        "batch": rng.randint(1, 2),
        "heads": rng.randint(1, 3),
        "n_ctx": n_ctx,
        "head_size": rng.randint(1, 4),
        "pos": pos,
        "new": t,
        "seed": rng.randrange(10**6),
    }


def _write_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    return [(_cache_case(rng, errors=True),) for _ in range(n)]


def _owner(case: dict[str, Any], fill: float | None = None) -> np.ndarray:
    rng = np.random.default_rng(case["seed"])
    shape = (2, case["batch"], case["heads"], case["n_ctx"], case["head_size"])
    values = rng.normal(size=shape)
    if fill is not None:
        values[:, :, :, case["pos"] + 1 :, :] = fill
    return values


def _new_kv(case: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(case["seed"] + 1)
    shape = (case["batch"], case["heads"], case["new"], case["head_size"])
    return rng.normal(size=shape), rng.normal(size=shape)


def _as_projection(k: np.ndarray, v: np.ndarray) -> tuple[TensorView, TensorView]:
    # The keys and values as the model has them: head views of one packed [B, T, 2C] projection
    # (not contiguous), as split_heads gives them.
    b, h, t, d = k.shape
    packed = np.concatenate([x.transpose(0, 2, 1, 3).reshape(b, t, h * d) for x in (k, v)], axis=-1)
    view = Tensor.from_numpy(packed).view()
    heads = [view.slice(2, i * h * d, (i + 1) * h * d).split(2, [h, d]) for i in range(2)]
    return heads[0].permute([0, 2, 1, 3]), heads[1].permute([0, 2, 1, 3])


def write_reference(case: dict[str, Any]) -> np.ndarray:
    """The cache after the write, as NumPy: positions ``pos..pos + T - 1`` of ``[0]`` hold the
    keys and of ``[1]`` the values; the library's slice refuses positions that do not fit."""
    cache = _owner(case)
    k, v = _new_kv(case)
    pos, t = case["pos"], case["new"]
    Tensor.zeros(list(cache.shape)).slice(3, pos, pos + t)  # raises the library's error
    cache[0, :, :, pos : pos + t] = k
    cache[1, :, :, pos : pos + t] = v
    return cache


def _write_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    k, v = _new_kv(case)
    kv = _as_projection(k, v)
    return Tensor.from_numpy(_owner(case)), case["pos"], kv[0], kv[1]


CACHE_KEY = "cache after the write"
READ_OUTS_KEY = "reads out of the library"
COPIES_KEY = "copies (materialize)"
_NO_READ_OUTS = "none"


def _write_reference_outcome(case: dict[str, Any]) -> Any:
    write_reference(case)  # raises for positions that do not fit
    return {CACHE_KEY: AGREES, READ_OUTS_KEY: _NO_READ_OUTS}


def _read_outs(count: Any) -> str:
    if not count.read_outs:
        return _NO_READ_OUTS
    return f"{count.read_outs}: {', '.join(count.read_out_names)}"


@dataclass(frozen=True)
class _Written:
    """What ``cache_write`` returned, what it allocated and read out, and the cache, keys and
    values (NumPy) as they were before the call."""

    counted: Counted
    before: tuple[np.ndarray, np.ndarray, np.ndarray]


def _write_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> _Written:
    cache, _, k, v = args
    before = (cache.to_numpy(), k.to_numpy(), v.to_numpy())
    return _Written(counted_call(fn, args), before)


def _write_summary(written: _Written, call_args: tuple[Any, ...]) -> Any:
    cache, pos, _, _ = call_args
    want, k, v = (a.copy() for a in written.before)
    t = k.shape[2]
    want[0, :, :, pos : pos + t] = k
    want[1, :, :, pos : pos + t] = v
    got = cache.to_numpy()
    wrong = np.argwhere(np.abs(got - want) > TOLERANCE)
    return {
        CACHE_KEY: AGREES
        if not len(wrong)
        else f"{len(wrong)} cells differ, first at {wrong[0].tolist()}",
        READ_OUTS_KEY: _read_outs(written.counted.count),
    }


def _write_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if not isinstance(got, dict):
        return None
    if got.get(READ_OUTS_KEY, _NO_READ_OUTS) != _NO_READ_OUTS:
        return (
            "cache_write read tensors out of the library: the keys and values go into the "
            "owner's cells with copyto into a slice view, nothing through NumPy"
        )
    cells = str(got.get(CACHE_KEY, ""))
    if cells != AGREES:
        return (
            "only positions pos..pos + T - 1 change: keys into cache[0], values into cache[1], "
            "every other cell keeps the value it had"
        )
    return None


def _cache_size(case: dict[str, Any]) -> tuple[int, ...]:
    values = 2 * case["batch"] * case["heads"] * case["n_ctx"] * case["head_size"]
    return (values, case["new"])


# -- the cached attention step -------------------------------------------------------------------


def _step_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for _ in range(n):
        case = _cache_case(rng, errors=False)
        case["new"] = 1
        case["pos"] = rng.choice((0, case["n_ctx"] - 1, rng.randint(0, case["n_ctx"] - 1)))
        cases.append((case,))
    return cases


def _query(case: dict[str, Any]) -> np.ndarray:
    rng = np.random.default_rng(case["seed"] + 2)
    return rng.normal(size=(case["batch"], case["heads"], 1, case["head_size"]))


def attention_step_reference(q: np.ndarray, cache: np.ndarray, t: int) -> np.ndarray:
    """``softmax(q @ K[0..t]^T / sqrt(D)) @ V[0..t]`` in NumPy, ``q`` ``[B, H, 1, D]`` and the
    cache ``[2, B, H, n_ctx, D]``."""
    keys, values = cache[0, :, :, : t + 1], cache[1, :, :, : t + 1]
    scores = q @ keys.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    out: np.ndarray = weights @ values
    return out


STEP_KEY = "max |difference| from NumPy"


def _step_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    return (
        Tensor.from_numpy(_query(case)),
        Tensor.from_numpy(_owner(case, fill=np.nan)),
        case["pos"],
    )


def _step_reference_outcome(case: dict[str, Any]) -> Any:
    return {STEP_KEY: AGREES, COPIES_KEY: 0, READ_OUTS_KEY: _NO_READ_OUTS}


def _difference(got: Any, want: np.ndarray) -> str:
    if not isinstance(got, (Tensor, TensorView)):
        return f"a {type(got).__name__}, not a Tensor or TensorView"
    values = got.to_numpy().astype(np.float64)
    if values.shape != want.shape:
        return f"shape {list(values.shape)}, expected {list(want.shape)}"
    if not np.all(np.isfinite(values)):
        return "nan or inf"
    error = float(np.abs(values - want).max()) / max(1.0, float(np.abs(want).max()))
    return AGREES if error <= TOLERANCE else f"{error:.3g}"


#: What the step key says when the answer attends over positions 0..t - 1 only.
MISSES_ITSELF = "equals attention over positions 0..t - 1"


def _step_summary(counted: Counted, call_args: tuple[Any, ...]) -> Any:
    if counted.result is None:
        return None
    q, cache, t = call_args
    q_values, cache_values = q.to_numpy(), cache.to_numpy()
    difference = _difference(counted.result, attention_step_reference(q_values, cache_values, t))
    if difference not in (AGREES,) and t > 0:
        short = attention_step_reference(q_values, cache_values, t - 1)
        if _difference(counted.result, short) == AGREES:
            difference = MISSES_ITSELF
    return {
        STEP_KEY: difference,
        COPIES_KEY: counted.count.copies,
        READ_OUTS_KEY: _read_outs(counted.count),
    }


def _step_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if not isinstance(got, dict):
        return None
    if got.get(READ_OUTS_KEY, _NO_READ_OUTS) != _NO_READ_OUTS:
        return (
            "the step reads the cache through views on llmfs tensors, with @ and softmax: a "
            "round trip through NumPy or Python numbers does not count"
        )
    if got.get(COPIES_KEY, 0):
        return (
            "no copy of the past: a slice of the cache, its [0] and [1] and a transpose are "
            "views, and @ reads them as they lie"
        )
    if got.get(STEP_KEY) == "nan or inf":
        return (
            "the positions after t are not written yet (they hold NaN here): the step reads "
            "positions 0..t only, through a slice, never the whole n_ctx"
        )
    if got.get(STEP_KEY) == MISSES_ITSELF:
        return (
            "the new token attends to itself too: its key and value are already written at "
            "position t, so the slice holds positions 0..t, t + 1 of them"
        )
    return None


# -- multiply-adds ---------------------------------------------------------------------------------


@dataclass
class MultiplyAdds:
    """Multiply-adds of the matrix products run in a :func:`count_multiply_adds` block."""

    total: int = 0
    products: int = 0


@contextmanager
def count_multiply_adds() -> Iterator[MultiplyAdds]:
    """Counts the multiply-adds of every matrix product run inside the block, through ``@`` or
    :func:`llmfs.tensor.matmul`: a product with result ``[..., M, N]`` over an inner size ``K``
    costs ``K`` per result value. Not thread-safe (it wraps the function where ``@`` and
    ``llmfs.tensor`` find it, for the block, then puts it back)."""
    import llmfs.tensor
    from llmfs.tensor import ops

    counted = MultiplyAdds()
    original = ops.matmul

    @functools.wraps(original)
    def matmul(a: Any, b: Any, **kwargs: Any) -> Any:
        result = original(a, b, **kwargs)
        inner = a.shape[-1] if len(a.shape) else 1
        counted.total += int(np.prod(result.shape, dtype=np.int64)) * int(inner)
        counted.products += 1
        return result

    ops.matmul = llmfs.tensor.matmul = matmul
    try:
        yield counted
    finally:
        ops.matmul = llmfs.tensor.matmul = original


def multiply_adds_per_token(weights: Any, config: Any, tokens: Any, *, kv_cache: bool) -> int:
    """The multiply-adds of the generation step that reads ``tokens`` (``[T]``: the token at
    position ``T - 1`` is the newest) and chooses the next token, measured on
    :func:`llmfs.gpt.tensor_model.generate`: the cost of generating two tokens after the first
    ``T - 1`` minus the cost of generating one (so a cached step does not count the prompt's
    pass). ``tokens`` must fit ``n_ctx``."""
    from llmfs.gpt import tensor_model as tm

    prompt = [int(t) for t in tokens][:-1]
    counts = []
    for new in (1, 2):
        with count_multiply_adds() as counted:
            tm.generate(weights, config, prompt, new, kv_cache=kv_cache)
        counts.append(counted.total)
    return counts[1] - counts[0]


# -- specs -----------------------------------------------------------------------------------------

_HERE = "llmfs.course.exercise_checks.generation"

SHORTCUTS: dict[str, Shortcuts] = {
    "ch11.train_bpe": Shortcuts(
        (
            "llmfs.gpt.tokenizer.BPETokenizer.train",
            "llmfs.gpt.tokenizer._merge_ids",
            f"{_HERE}.train_reference",
            f"{_HERE}.train_first_seen_ties",
        ),
        "pretokenize, collections.Counter and your own merge loop",
    ),
    "ch11.bpe_encode": Shortcuts(
        (
            "llmfs.gpt.tokenizer.BPETokenizer.encode",
            "llmfs.gpt.tokenizer.BPETokenizer.encode_word",
            "llmfs.gpt.tokenizer._apply_merges",
            f"{_HERE}.encode_across_words",
        ),
        "pretokenize, str.encode('utf-8') and a loop over each word's ids",
    ),
    "ch11.sample_next": Shortcuts(
        ("llmfs.gpt.sampling.Sampler.choose",),
        "np.argsort, np.exp, np.cumsum and one rng.random(B)",
    ),
    "ch11.cache_write": Shortcuts(
        ("llmfs.gpt.kv_cache.KVCache.write", "llmfs.gpt.tensor_model.cached_attention"),
        "cache.slice, indexing and lt.copyto",
    ),
    "ch11.cached_step": Shortcuts(
        (
            "llmfs.gpt.tensor_model.cached_attention",
            "llmfs.gpt.tensor_model.attention",
            "llmfs.gpt.reference.attention",
            "llmfs.gpt.reference.cached_attention",
            f"{_HERE}.attention_step_reference",
        ),
        "cache.slice, transpose, @ and softmax",
    ),
}

check_train_bpe = register(
    ImplementSpec(
        "ch11.train_bpe",
        "train_bpe",
        _train_cases,
        train_reference,
        cases=40,
        summarize=_ids_summary,
        parameters=("text", "num_merges"),
        shortcuts=SHORTCUTS["ch11.train_bpe"],
        size=_bpe_size,
        explain=lambda got, want, *args: _train_explain(got, want, *args),
    ),
    "Checks ``train_bpe(text, num_merges) -> [(left id, right id), ...]`` against the merges "
    "BPETokenizer.train learns, on random texts in several scripts, a quarter of them texts where "
    "the tie rule decides.",
)
check_bpe_encode = register(
    ImplementSpec(
        "ch11.bpe_encode",
        "bpe_encode",
        _encode_cases,
        _encode_reference,
        cases=40,
        prepare=_encode_prepare,
        summarize=_encode_summary,
        parameters=("train text", "num_merges", "text"),
        shortcuts=SHORTCUTS["ch11.bpe_encode"],
        size=_bpe_size,
        explain=lambda got, want, *args: _encode_explain(got, want, *args),
    ),
    "Checks ``bpe_encode(text, merges) -> ids`` against BPETokenizer.encode of a tokenizer "
    "trained with those merges, on texts in any script.",
)
check_sample_next = register(
    ImplementSpec(
        "ch11.sample_next",
        "sample_next",
        _sample_cases,
        _sample_reference,
        cases=120,
        prepare=_sample_prepare,
        call=_sample_call,
        summarize=_sample_summary,
        parameters=("logits", "temperature", "top_k", "rng"),
        shortcuts=SHORTCUTS["ch11.sample_next"],
        size=_sample_size,
        explain=lambda got, want, *args: _sample_explain(got, want, *args),
    ),
    "Checks ``sample_next(logits, temperature, top_k, rng) -> [B] token ids`` against the "
    "library's Sampler on the same logits and seed: the same tokens and the same draws.",
)
check_cache_write = register(
    ImplementSpec(
        "ch11.cache_write",
        "cache_write",
        _write_cases,
        _write_reference_outcome,
        cases=60,
        prepare=_write_prepare,
        summarize=_write_summary,
        parameters=("cache", "pos", "k", "v"),
        call=_write_call,
        shortcuts=SHORTCUTS["ch11.cache_write"],
        size=_cache_size,
        explain=lambda got, want, *args: _write_explain(got, want, *args),
    ),
    "Checks ``cache_write(cache, pos, k, v)``: after it, positions pos..pos + T - 1 of the "
    "owner hold the keys and values and every other cell is unchanged, with no read-out of "
    "the tensors; positions that do not fit raise the library's slice error.",
)
check_cached_step = register(
    ImplementSpec(
        "ch11.cached_step",
        "cached_attention_step",
        _step_cases,
        _step_reference_outcome,
        cases=60,
        prepare=_step_prepare,
        summarize=lambda counted, args: _step_summary(counted, args),
        parameters=("q", "cache", "t"),
        call=counted_call,
        shortcuts=SHORTCUTS["ch11.cached_step"],
        size=_cache_size,
        explain=lambda got, want, *args: _step_explain(got, want, *args),
    ),
    "Checks ``cached_attention_step(q, cache, t) -> [B, H, 1, D]`` against NumPy (to 1e-9): one "
    "query over positions 0..t of the cache, with no copy and no read-out.",
)

#: Exercise id -> check (chapter 11's part of the package's CHECKS).
GENERATION_CHECKS: dict[str, Callable[..., CheckReport]] = {
    "ch11.train_bpe": check_train_bpe,
    "ch11.bpe_encode": check_bpe_encode,
    "ch11.sample_next": check_sample_next,
    "ch11.cache_write": check_cache_write,
    "ch11.cached_step": check_cached_step,
}

__all__ = [
    "AGREES",
    "GENERATION_CHECKS",
    "NOTHING_DRAWN",
    "ONE_DRAW",
    "OTHER_DRAWS",
    "SHORTCUTS",
    "TOLERANCE",
    "MultiplyAdds",
    "attention_step_reference",
    "check_bpe_encode",
    "check_cache_write",
    "check_cached_step",
    "check_sample_next",
    "check_train_bpe",
    "count_multiply_adds",
    "encode_across_words",
    "multiply_adds_per_token",
    "train_first_seen_ties",
    "train_reference",
    "write_reference",
]
