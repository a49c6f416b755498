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
* ``sample_next(logits, temperature, top_k, rng)``: judged on what it draws, not on one use of
  the random stream. A greedy case (temperature 0 or ``top_k = 1``) gives the arg-max, the lower
  id on a tie. A sampling case repeats each row :data:`DRAWS_PER_ROW` times in one call: no id
  outside the top k (ties to the lower id) or of weight 0 may be drawn, and each row's counts
  must pass a chi-square test against ``softmax(z / temperature)`` over the candidates at
  p >= :data:`P_VALUE`; the same seed must give the same tokens and another seed other tokens.
  Hostile logits: ties, logits of 10,000 and temperatures of 1e-3 (where ``exp`` without the
  largest logit subtracted overflows), ``-inf`` entries.
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

#: Draws per row of a sampling case: each row of the case's logits is repeated this many times.
DRAWS_PER_ROW = 1000
#: A row's counts fail when a chi-square test rejects them at this p-value: a right sampler
#: fails a case about once in a million, a wrong temperature or top-k (the probabilities moved
#: by a few percent at 1,000 draws) far more often than not.
P_VALUE = 1e-6
FOLLOWS = "drawn from softmax(logits / temperature) over the top k"
SAME = "same tokens"
OTHER = "other tokens"


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


def _stream_seed(case: dict[str, Any]) -> int:
    return int(case["seed"]) + 1


def _greedy(case: dict[str, Any]) -> bool:
    return case["temperature"] == 0 or case["top_k"] == 1


def sampling_probabilities(logits: np.ndarray, temperature: float, top_k: int | None) -> np.ndarray:
    """Each row's probability of every id: ``softmax(z / temperature)`` over the ``top_k``
    largest logits (ties to the lower id), 0 elsewhere; one-hot at the arg-max when greedy."""
    z = np.asarray(logits, dtype=np.float64)
    batch, vocab = z.shape
    out = np.zeros((batch, vocab))
    if temperature == 0 or top_k == 1:
        out[np.arange(batch), z.argmax(axis=-1)] = 1.0
        return out
    k = vocab if top_k is None else top_k
    candidates = np.argsort(-z, axis=-1, kind="stable")[:, :k]
    scaled = np.take_along_axis(z, candidates, axis=-1) / temperature
    weights = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
    np.put_along_axis(out, candidates, weights / weights.sum(axis=-1, keepdims=True), axis=-1)
    return out


def chi_square_p(statistic: float, dof: int) -> float:
    """The probability that a chi-square variable with ``dof`` degrees of freedom exceeds
    ``statistic``: the regularized upper incomplete gamma function Q(dof / 2, statistic / 2),
    by its series below ``a + 1`` and its continued fraction above (Numerical Recipes'
    ``gammq``)."""
    if dof < 1 or statistic <= 0:
        return 1.0
    a, x = dof / 2.0, statistic / 2.0
    log_front = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1.0:
        term = total = 1.0 / a
        n = a
        for _ in range(10_000):
            n += 1.0
            term *= x / n
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(log_front))
    tiny = 1e-300
    b = x + 1.0 - a
    c, d = 1.0 / tiny, 1.0 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        step = d * c
        h *= step
        if abs(step - 1.0) < 1e-15:
            break
    return min(1.0, math.exp(log_front) * h)


def judge_counts(counts: np.ndarray, probabilities: np.ndarray) -> str | None:
    """None when ``counts`` (draws per id of one row) are a plausible sample of
    ``probabilities``; else what is wrong: an id of probability 0 drawn, or counts a chi-square
    test rejects at :data:`P_VALUE` (ids expected fewer than 5 times pooled into one bin)."""
    impossible = np.flatnonzero((probabilities == 0) & (counts > 0))
    if len(impossible):
        return f"drew id {int(impossible[0])}, which has probability 0"
    expected = probabilities * counts.sum()
    # Bins expected fewer than 5 times are pooled, and a pool still below 5 joins the least
    # likely large bin: the chi-square approximation needs every bin expected 5 times or more.
    order = np.argsort(expected, kind="stable")
    pairs: list[list[float]] = []
    pool = [0.0, 0.0]
    for i in order:
        if expected[i] == 0:
            continue
        if expected[i] < 5 or (pool[1] and pool[1] < 5):
            pool = [pool[0] + counts[i], pool[1] + expected[i]]
            if pool[1] >= 5:
                pairs.append(pool)
                pool = [0.0, 0.0]
        else:
            pairs.append([float(counts[i]), float(expected[i])])
    if pool[1] > 0:
        if not pairs:
            return None
        pairs[0] = [pairs[0][0] + pool[0], pairs[0][1] + pool[1]]
    if len(pairs) < 2:
        return None
    statistic = sum((o - w) ** 2 / w for o, w in pairs)
    p = chi_square_p(statistic, len(pairs) - 1)
    if p < P_VALUE:
        return f"counts that do not follow the probabilities (chi-square p = {p:.1e})"
    return None


def _sample_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for k in range(n):
        vocab = rng.choice((1, 2, 5, rng.randint(3, 40)))
        top_k = rng.choice((None, 1, vocab, rng.randint(1, vocab)))
        temperature = rng.choice((0.0, 1.0, 0.7, 0.7, 2.5, 1e-3))
        case = {
            "shape": [rng.randint(1, 3), vocab],
            "logits": ("normal", "ties", "large", "-inf")[k % 4],
            "temperature": temperature,
            "top_k": top_k,
            "seed": rng.randrange(10**6),
        }
        cases.append((case,))
    return cases


def _sample_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    # A sampling case repeats each row DRAWS_PER_ROW times (one call, rows in blocks): the
    # counts per row are a sample of that row's distribution.
    z = _logits(case)
    repeat = 1 if _greedy(case) else DRAWS_PER_ROW
    return (
        np.repeat(z, repeat, axis=0),
        case["temperature"],
        case["top_k"],
        np.random.default_rng(_stream_seed(case)),
    )


def _sample_reference(case: dict[str, Any]) -> Any:
    z = _logits(case)
    if _greedy(case):
        return {"tokens": [int(t) for t in z.argmax(axis=-1)], "same seed": SAME}
    return {"tokens": FOLLOWS, "same seed": SAME, "another seed": OTHER}


def _sample_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    # Three calls: the case's generator, a new one from the same seed, one from another seed.
    logits, temperature, top_k, rng = args
    seed = int(rng.bit_generator.seed_seq.entropy)
    first = fn(logits.copy(), temperature, top_k, rng)
    again = fn(logits.copy(), temperature, top_k, np.random.default_rng(seed))
    other = fn(logits.copy(), temperature, top_k, np.random.default_rng(seed + 10**7))
    return first, again, other


def _token_array(result: Any, rows: int) -> np.ndarray | str:
    try:
        tokens = np.asarray(result).reshape(-1)
    except (TypeError, ValueError):
        return f"a {type(result).__name__}, not token ids"
    if tokens.shape != (rows,) or not np.issubdtype(tokens.dtype, np.integer):
        if tokens.shape == (rows,) and np.all(np.mod(tokens, 1) == 0):
            return tokens.astype(np.int64)
        return f"{tokens.size} values for {rows} rows, not one token id per row"
    return tokens.astype(np.int64)


def _sample_summary(results: Any, call_args: tuple[Any, ...]) -> Any:
    first, again, other = results
    logits, temperature, top_k, _ = call_args
    rows, vocab = logits.shape
    tokens = _token_array(first, rows)
    if isinstance(tokens, str):
        return {"tokens": tokens}
    if ((tokens < 0) | (tokens >= vocab)).any():
        bad = int(tokens[(tokens < 0) | (tokens >= vocab)][0])
        return {"tokens": f"{bad} is not an id of the vocabulary 0..{vocab - 1}"}
    repeated = _token_array(again, rows)
    same = SAME if not isinstance(repeated, str) and (repeated == tokens).all() else OTHER
    if temperature == 0 or top_k == 1:
        return {"tokens": [int(t) for t in tokens], "same seed": same}
    block = DRAWS_PER_ROW
    probabilities = sampling_probabilities(logits[::block], temperature, top_k)
    verdict = FOLLOWS
    for row in range(rows // block):
        counts = np.bincount(tokens[row * block : (row + 1) * block], minlength=vocab)
        wrong = judge_counts(counts, probabilities[row])
        if wrong is not None:
            verdict = f"row {row}: {wrong}"
            break
    # Another seed must give other draws wherever two ids are likely enough to differ.
    spread = vocab > 1 and bool((np.sort(probabilities, axis=-1)[:, -2] > 0.01).any())
    elsewhere = _token_array(other, rows)
    moved = OTHER if not isinstance(elsewhere, str) and (elsewhere != tokens).any() else SAME
    return {"tokens": verdict, "same seed": same, "another seed": moved if spread else OTHER}


def _sample_size(case: dict[str, Any]) -> tuple[int, ...]:
    return (case["shape"][0] * case["shape"][1], 2)


def _top_k_ids(row: np.ndarray, top_k: int | None) -> set[int]:
    k = len(row) if top_k is None else top_k
    return {int(i) for i in np.argsort(-row, kind="stable")[:k]}


def _sample_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if not isinstance(got, dict):
        return None
    tokens = got.get("tokens")
    if got.get("same seed") == OTHER:
        return (
            "draw every random number from the rng you are given: the same seed must give the "
            "same tokens"
        )
    if got.get("another seed") == SAME and want.get("another seed") == OTHER:
        return "the draws must come from the rng argument: another seed gives other tokens"
    if isinstance(tokens, str) and "probability 0" in tokens:
        return (
            "only the top_k ids with the largest logits (ties to the lower id) are candidates, "
            "and an id whose weight is 0 is never drawn"
        )
    if isinstance(tokens, str) and "chi-square" in tokens:
        return (
            "each candidate is drawn with probability softmax(logits / temperature) over the "
            "candidates: check the temperature and the normalization"
        )
    if _greedy(case) and isinstance(tokens, list):
        return "temperature 0 and top_k = 1 are greedy: the arg-max, the lowest id on a tie"
    return None


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
        cases=60,
        prepare=_sample_prepare,
        call=_sample_call,
        summarize=_sample_summary,
        parameters=("logits", "temperature", "top_k", "rng"),
        shortcuts=SHORTCUTS["ch11.sample_next"],
        size=_sample_size,
        explain=lambda got, want, *args: _sample_explain(got, want, *args),
    ),
    "Checks ``sample_next(logits, temperature, top_k, rng) -> [B] token ids`` on its "
    "distribution: greedy steps give the arg-max; sampled rows, each repeated many times, give "
    "counts that a chi-square test accepts as softmax(logits / temperature) over the top k; the "
    "same seed gives the same tokens and another seed other tokens.",
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
    "DRAWS_PER_ROW",
    "GENERATION_CHECKS",
    "P_VALUE",
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
