"""Chapter 11's checks pass the solutions and fail the plausible wrong answers, each with the rule
it breaks: BPE ties to the pair counted first, merges across words, a sampler whose temperature
or top-k is off, which ignores its generator or overflows (and one that draws its own way, right,
passes), a cache write through a stale view or NumPy, an attention step that reads the
unwritten cells, forgets its own position, copies the past or reads it out."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from solutionkit import SOLUTIONS

import llmfs.tensor as lt
from llmfs.course.exercise_checks import generation
from llmfs.course.exercise_checks.spec import SPECS, run_spec
from llmfs.gpt import tensor_model as tm
from llmfs.gpt.model import GPTConfig, init_params
from llmfs.gpt.tokenizer import pretokenize
from llmfs.tensor import ops


@pytest.fixture(autouse=True)
def attempts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(tmp_path / "attempts.jsonl"))


def _text(report: Any) -> str:
    return " ".join(repr(report).split())


def _run(exercise_id: str, fn: Any, seed: int = 3) -> Any:
    return run_spec(SPECS[exercise_id], fn, seed=seed, record_attempt=False)


@pytest.mark.parametrize("exercise_id", sorted(generation.GENERATION_CHECKS))
@pytest.mark.parametrize("seed", [0, 11, 2024])
def test_the_solution_passes_on_every_seed(exercise_id: str, seed: int) -> None:
    report = _run(exercise_id, SOLUTIONS[exercise_id], seed)
    assert report.passed, repr(report)


# -- BPE ---------------------------------------------------------------------------------------


def _first_seen_ties(text: str, num_merges: int) -> list[list[int]]:
    # The learner's version of the mistake (the check's own is refused as a shortcut).
    words = Counter(pretokenize(text))
    ids = [list(w.encode("utf-8")) for w in words]
    merges: list[list[int]] = []
    for new in range(256, 256 + num_merges):
        pairs: Counter[tuple[int, int]] = Counter()
        for word, freq in zip(ids, words.values()):
            for pair in itertools.pairwise(word):
                pairs[pair] += freq
        if not pairs:
            break
        best = pairs.most_common(1)[0][0]
        merges.append(list(best))
        ids = [_merged(word, best, new) for word in ids]
    return merges


def _merged(word: list[int], pair: tuple[int, int], new: int) -> list[int]:
    out: list[int] = []
    i = 0
    while i < len(word):
        if tuple(word[i : i + 2]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def test_ties_to_the_first_counted_pair_fail_with_the_tie_rule() -> None:
    report = _run("ch11.train_bpe", _first_seen_ties)
    assert not report.passed
    assert "the smallest (left id, right id) is merged, not the one counted first" in _text(report)


def test_the_tie_sensitive_cases_are_a_quarter_and_really_tie_sensitive() -> None:
    cases = generation._train_cases(random.Random(5), 40)
    sensitive = [
        c for c in cases if generation.train_first_seen_ties(*c) != generation.train_reference(*c)
    ]
    assert len(sensitive) >= 10


def test_counting_each_word_once_fails() -> None:
    def once(text: str, num_merges: int) -> list[Any]:
        return _first_seen_ties(" ".join(sorted(set(pretokenize(text)))), num_merges)

    assert not _run("ch11.train_bpe", once).passed


def test_the_reference_trainer_stops_early_and_merges_only_within_words() -> None:
    assert generation.train_reference("", 5) == []
    assert generation.train_reference("a b", 5) == [[32, 98]]  # " b" is a pair: one merge
    merges = generation.train_reference("ab ab ab", 10)
    assert merges[0] == [97, 98]  # "ab" three times
    for left, right in merges:
        assert left < 256 + len(merges) and right < 256 + len(merges)


def test_merging_across_words_fails_with_the_word_rule() -> None:
    def across_words(text: str, merges: list[tuple[int, int]]) -> list[int]:
        ids = list(text.encode("utf-8"))
        for rank, pair in enumerate(merges):
            ids = _merged(ids, tuple(pair), 256 + rank)  # type: ignore[arg-type]
        return ids

    report = _run("ch11.bpe_encode", across_words)
    assert not report.passed
    assert "merges apply within a word, never across a word boundary" in _text(report)


def test_applying_the_merges_in_rank_order_once_each_is_the_same_encoding() -> None:
    # Merge i can only follow merges before it, so one pass per merge in rank order equals
    # repeatedly taking the lowest-ranked pair present.
    def in_order(text: str, merges: list[tuple[int, int]]) -> list[int]:
        out: list[int] = []
        for word in pretokenize(text):
            ids = list(word.encode("utf-8"))
            for rank, pair in enumerate(merges):
                ids = _merged(ids, pair, 256 + rank)
            out.extend(ids)
        return out

    assert _run("ch11.bpe_encode", in_order).passed


# -- sampling ------------------------------------------------------------------------------------


def _rng_choice(logits: np.ndarray, temperature: float, top_k: Any, rng: Any) -> Any:
    """A right sampler that uses the stream its own way: one rng.choice per row."""
    z = np.asarray(logits, dtype=np.float64)
    if temperature == 0 or top_k == 1:
        return z.argmax(axis=-1)
    k = z.shape[1] if top_k is None else top_k
    out = []
    for row in z:
        candidates = np.argsort(-row, kind="stable")[:k]
        weights = np.exp((row[candidates] - row[candidates].max()) / temperature)
        out.append(candidates[rng.choice(k, p=weights / weights.sum())])
    return np.array(out)


def _gumbel_max(logits: np.ndarray, temperature: float, top_k: Any, rng: Any) -> Any:
    """A right sampler that uses the stream another way: Gumbel noise on every candidate's
    scaled logit, the largest wins (the Gumbel-max trick): k draws per row, all in one call."""
    z = np.asarray(logits, dtype=np.float64)
    if temperature == 0 or top_k == 1:
        return z.argmax(axis=-1)
    k = z.shape[1] if top_k is None else top_k
    candidates = np.argsort(-z, axis=-1, kind="stable")[:, :k]
    scaled = np.take_along_axis(z, candidates, axis=-1) / temperature
    noisy = scaled + rng.gumbel(size=scaled.shape)
    return np.take_along_axis(candidates, noisy.argmax(axis=-1)[:, None], axis=-1)[:, 0]


@pytest.mark.parametrize(("sampler", "seed"), [(_rng_choice, 0), (_gumbel_max, 5)])
def test_a_right_sampler_that_draws_its_own_way_passes(sampler: Any, seed: int) -> None:
    # Judged on the distribution and on reproducibility, not on one use of the random stream:
    # one choice per row, or k Gumbel draws per row, where the solution draws one uniform a row.
    assert _run("ch11.sample_next", sampler, seed).passed


def test_a_wrong_temperature_fails_the_distribution_naming_the_rule() -> None:
    solution = SOLUTIONS["ch11.sample_next"]

    def hotter(logits: np.ndarray, temperature: float, top_k: Any, rng: Any) -> Any:
        return solution(logits, temperature * 1.3, top_k, rng)

    for seed in (3, 8):
        text = _text(_run("ch11.sample_next", hotter, seed))
        assert "chi-square" in text and "check the temperature" in text


def test_one_candidate_too_many_fails_with_the_top_k_rule() -> None:
    solution = SOLUTIONS["ch11.sample_next"]

    def k_plus_one(logits: np.ndarray, temperature: float, top_k: Any, rng: Any) -> Any:
        vocab = np.asarray(logits).shape[1]
        wider = top_k if top_k in (None, 1) else min(top_k + 1, vocab)
        return solution(logits, temperature, wider, rng)

    text = _text(_run("ch11.sample_next", k_plus_one))
    assert "has probability 0" in text and "only the top_k ids" in text


def test_a_sampler_that_ignores_its_rng_fails_reproducibility() -> None:
    solution = SOLUTIONS["ch11.sample_next"]

    def own_stream(logits: np.ndarray, temperature: float, top_k: Any, rng: Any) -> Any:
        return solution(logits, temperature, top_k, np.random.default_rng())

    def fixed_stream(logits: np.ndarray, temperature: float, top_k: Any, rng: Any) -> Any:
        return solution(logits, temperature, top_k, np.random.default_rng(0))

    assert "the same seed must give the same tokens" in _text(_run("ch11.sample_next", own_stream))
    assert "another seed gives other tokens" in _text(_run("ch11.sample_next", fixed_stream))


@pytest.mark.parametrize(
    ("statistic", "dof", "p"),
    [(3.841458820694124, 1, 0.05), (11.070497693516351, 5, 0.05), (50.0, 2, math.exp(-25.0))],
)
def test_the_chi_square_tail_is_the_known_one(statistic: float, dof: int, p: float) -> None:
    assert generation.chi_square_p(statistic, dof) == pytest.approx(p, rel=1e-9)
    assert generation.chi_square_p(0.0, dof) == 1.0


def test_counts_are_judged_against_the_probabilities() -> None:
    probabilities = np.array([0.5, 0.3, 0.2, 0.0])
    assert generation.judge_counts(np.array([510, 290, 200, 0]), probabilities) is None
    assert "probability 0" in str(
        generation.judge_counts(np.array([500, 300, 199, 1]), probabilities)
    )
    assert "chi-square" in str(generation.judge_counts(np.array([600, 250, 150, 0]), probabilities))


def test_sampling_without_subtracting_the_largest_logit_fails() -> None:
    def overflowing(logits: np.ndarray, temperature: float, top_k: Any, rng: Any) -> Any:
        z = np.asarray(logits, dtype=np.float64)
        if temperature == 0 or top_k == 1:
            return z.argmax(axis=-1)
        k = z.shape[1] if top_k is None else top_k
        candidates = np.sort(np.argsort(-z, axis=-1, kind="stable")[:, :k], axis=-1)
        with np.errstate(over="ignore", invalid="ignore"):
            weights = np.exp(np.take_along_axis(z, candidates, axis=-1) / temperature)
            cumulative = np.cumsum(weights, axis=-1)
            u = rng.random(len(z))
            index = (cumulative <= (u * cumulative[:, -1])[:, None]).sum(axis=-1)
        return candidates[np.arange(len(z)), np.minimum(index, k - 1)]

    assert not _run("ch11.sample_next", overflowing).passed


def test_top_k_ties_broken_toward_the_higher_id_leave_the_top_k() -> None:
    solution = SOLUTIONS["ch11.sample_next"]

    def higher(logits: np.ndarray, temperature: float, top_k: Any, rng: Any) -> Any:
        flipped = np.asarray(logits)[:, ::-1]
        return flipped.shape[1] - 1 - np.asarray(solution(flipped, temperature, top_k, rng))

    text = _text(_run("ch11.sample_next", higher))
    assert "wrong" in text and ("only the top_k ids" in text or "lowest id on a tie" in text)


# -- the cache write -------------------------------------------------------------------------------


def test_one_destination_view_for_both_writes_is_stale_at_the_second() -> None:
    def one_view(cache: Any, pos: int, k: Any, v: Any) -> None:
        slot = cache.slice(3, pos, pos + k.shape[2])
        lt.copyto(slot[0], k)
        lt.copyto(slot[1], v)

    text = _text(_run("ch11.cache_write", one_view))
    assert "StaleViewError" in text


def test_a_write_through_numpy_is_a_read_out() -> None:
    def through_numpy(cache: Any, pos: int, k: Any, v: Any) -> None:
        values = cache.to_numpy()
        t = k.shape[2]
        values[0, :, :, pos : pos + t] = k.to_numpy()
        values[1, :, :, pos : pos + t] = v.to_numpy()
        with cache.mutate() as buffer:
            buffer[:] = values.reshape(-1)

    text = _text(_run("ch11.cache_write", through_numpy))
    assert "read tensors out of the library" in text


def test_a_write_that_clears_the_rest_of_the_cache_fails() -> None:
    def clears(cache: Any, pos: int, k: Any, v: Any) -> None:
        lt.copyto(cache.view(), 0.0)
        SOLUTIONS["ch11.cache_write"](cache, pos, k, v)

    text = _text(_run("ch11.cache_write", clears))
    assert "every other cell keeps the value it had" in text


def test_positions_that_do_not_fit_are_the_librarys_slice_error() -> None:
    case = {"batch": 1, "heads": 1, "n_ctx": 3, "head_size": 2, "pos": 2, "new": 2, "seed": 1}
    with pytest.raises(lt.TensorError, match="stop 4 > size 3"):
        generation.write_reference(case)


# -- the cached step -------------------------------------------------------------------------------


def test_attending_over_the_whole_cache_with_a_mask_reads_the_nans() -> None:
    def whole(q: Any, cache: Any, t: int) -> Any:
        n_ctx = cache.shape[3]
        mask = np.where(np.arange(n_ctx) <= t, 0.0, -np.inf)
        scores = q @ cache.view()[0].transpose(2, 3) / math.sqrt(q.shape[-1])
        return tm.softmax(scores + lt.Tensor.from_numpy(mask), axis=-1) @ cache.view()[1]

    text = _text(_run("ch11.cached_step", whole))
    assert "they hold NaN here" in text


def test_leaving_out_the_new_position_fails_with_its_rule() -> None:
    def without_itself(q: Any, cache: Any, t: int) -> Any:
        past = cache.slice(3, 0, max(t, 1))
        scores = q @ past[0].transpose(2, 3) / math.sqrt(q.shape[-1])
        return tm.softmax(scores, axis=-1) @ past[1]

    text = _text(_run("ch11.cached_step", without_itself))
    assert "the new token attends to itself too" in text


def test_copying_the_past_fails_with_the_copy_rule() -> None:
    def copies(q: Any, cache: Any, t: int) -> Any:
        past = cache.slice(3, 0, t + 1).materialize()
        scores = q @ past.view()[0].transpose(2, 3) / math.sqrt(q.shape[-1])
        return tm.softmax(scores, axis=-1) @ past.view()[1]

    text = _text(_run("ch11.cached_step", copies))
    assert "no copy of the past" in text


def test_a_numpy_round_trip_fails_with_the_read_out_rule() -> None:
    def numpy_step(q: Any, cache: Any, t: int) -> Any:
        values = cache.to_numpy()[:, :, :, : t + 1]
        scores = q.to_numpy() @ values[0].transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
        return lt.Tensor.from_numpy(weights @ values[1])

    text = _text(_run("ch11.cached_step", numpy_step))
    assert "a round trip through NumPy or Python numbers does not count" in text


# -- multiply-adds ---------------------------------------------------------------------------------


def test_multiply_adds_are_counted_product_by_product_and_the_wrap_is_undone() -> None:
    a = lt.Tensor.from_numpy(np.ones((2, 3, 4)))
    b = lt.Tensor.from_numpy(np.ones((4, 5)))
    original = ops.matmul
    with generation.count_multiply_adds() as counted:
        a @ b
        lt.matmul(b.T, b)
    assert (counted.total, counted.products) == (2 * 3 * 5 * 4 + 5 * 5 * 4, 2)
    assert ops.matmul is original and lt.matmul is original
    with pytest.raises(RuntimeError), generation.count_multiply_adds():
        raise RuntimeError("the block fails")
    assert ops.matmul is original and lt.matmul is original


@pytest.mark.parametrize("seed", range(4))
def test_a_step_costs_what_its_products_cost(seed: int) -> None:
    rng = random.Random(seed)
    heads, size = rng.randint(1, 3), rng.randint(1, 4)
    c = heads * size
    config = GPTConfig(rng.randint(5, 30), 12, c, heads, rng.randint(1, 3))
    w = tm.tensor_params(init_params(config, seed=seed))
    t = rng.randint(1, 11)
    tokens = [k % config.vocab_size for k in range(t + 1)]
    layers, positions = config.n_layer, t + 1
    head = c * config.vocab_size
    cached = layers * (12 * c * c + 2 * positions * c) + head
    uncached = layers * (12 * c * c * positions + 2 * positions * positions * c) + head
    assert generation.multiply_adds_per_token(w, config, tokens, kv_cache=True) == cached
    assert generation.multiply_adds_per_token(w, config, tokens, kv_cache=False) == uncached


def test_the_check_names_are_the_packages() -> None:
    from llmfs.course.exercise_checks import CHECKS

    for exercise_id, check in generation.GENERATION_CHECKS.items():
        assert CHECKS[exercise_id] is check
    assert Counter(e.split(".")[0] for e in generation.GENERATION_CHECKS) == {"ch11": 5}
