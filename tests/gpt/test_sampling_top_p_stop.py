"""Top-p (nucleus) sampling and the stop token: top-p keeps what Hugging Face's TopPLogitsWarper
keeps (written here from its definition), at least one candidate, after the temperature and
top-k; draws follow the kept probabilities (a chi-square test over many draws); a stop token ends
generation once every row has chosen it, in the NumPy reference and on llmfs.tensor alike; bad
values are refused with the rule they break."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmfs.gpt import reference
from llmfs.gpt import tensor_model as tm
from llmfs.gpt.model import GPTConfig, init_params
from llmfs.gpt.sampling import GenerationError, Sampler, check_sampler, nucleus

SMALL = GPTConfig(vocab_size=12, n_ctx=6, n_embd=8, n_head=2, n_layer=2)


def hf_top_p(logits: np.ndarray, top_p: float) -> np.ndarray:
    """Which ids Hugging Face's TopPLogitsWarper keeps (min_tokens_to_keep = 1): sort the
    probabilities ascending, remove those whose cumulative sum is <= 1 - top_p, keep the last."""
    probabilities = np.exp(logits - logits.max())
    probabilities /= probabilities.sum()
    order = np.argsort(probabilities, kind="stable")
    cumulative = np.cumsum(probabilities[order])
    removed = cumulative <= 1 - top_p
    removed[-1] = False
    keep = np.ones(len(logits), dtype=bool)
    keep[order[removed]] = False
    return keep


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(-6, 6), min_size=1, max_size=10),
    st.floats(0.0, 1.0),
)
def test_top_p_keeps_what_hugging_faces_warper_keeps(values: list[float], top_p: float) -> None:
    logits = np.array(values)
    weights = np.exp(logits - logits.max())
    kept = nucleus(weights[None, :], top_p)[0] > 0
    want = hf_top_p(logits, top_p)
    probabilities = weights / weights.sum()
    boundary = np.abs(np.cumsum(np.sort(probabilities)) - (1 - top_p)).min() < 1e-9
    ties = len(np.unique(np.round(probabilities, 12))) < len(probabilities)
    if not (boundary or ties):  # (rounding or tie order may decide there; the rule is below)
        assert (kept == want).all(), (logits, top_p, kept, want)
    assert kept.sum() >= 1
    mass_before_last_kept = np.sort(probabilities[kept])[::-1][:-1].sum()
    assert mass_before_last_kept < top_p or kept.sum() == 1
    assert probabilities[kept].sum() >= min(top_p, 1.0) - 1e-12


def test_top_p_zero_keeps_the_most_probable_and_one_keeps_all() -> None:
    weights = np.array([[0.1, 0.5, 0.4]])
    assert nucleus(weights, 0.0).tolist() == [[0.0, 0.5, 0.0]]
    assert (nucleus(weights, 1.0) > 0).all()
    assert nucleus(weights, 0.5).tolist() == [[0.0, 0.5, 0.0]]  # 0.5 reaches 0.5 exactly
    assert nucleus(weights, 0.55).tolist() == [[0.0, 0.5, 0.4]]
    # Equal probabilities: the lower id first.
    assert nucleus(np.array([[1.0, 1.0, 1.0]]), 0.3).tolist() == [[1.0, 0.0, 0.0]]


def _draws(sampler: Sampler, logits: np.ndarray, count: int) -> np.ndarray:
    return sampler.choose(np.repeat(logits[None, :], count, axis=0))


def _chi_square(counts: np.ndarray, probabilities: np.ndarray) -> float:
    expected = probabilities * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def test_draws_follow_the_kept_probabilities() -> None:
    logits = np.array([2.0, 1.0, 0.5, 0.0, -1.0, -3.0])
    temperature, top_k, top_p = 0.7, 5, 0.8
    sampler = Sampler(temperature, top_k, np.random.default_rng(0), top_p)
    draws = _draws(sampler, logits, 40_000)
    z = logits / temperature
    weights = np.exp(z - z.max())
    weights[np.argsort(-logits, kind="stable")[top_k:]] = 0.0
    weights = nucleus(weights[None, :], top_p)[0]
    probabilities = weights / weights.sum()
    counts = np.bincount(draws, minlength=len(logits))
    assert (counts[probabilities == 0] == 0).all()
    kept = probabilities > 0
    # 99.99th percentile of chi-square with (kept - 1) <= 3 degrees of freedom is below 22.
    assert _chi_square(counts[kept], probabilities[kept]) < 22.0
    # Without top-p, the same test rejects these counts: the cut is real.
    full = np.exp(z - z.max())
    full[np.argsort(-logits, kind="stable")[top_k:]] = 0.0
    full /= full.sum()
    assert _chi_square(counts[full > 0] + 0.0, full[full > 0]) > 100.0


@pytest.mark.parametrize("stop", [3, 7])
def test_a_stop_token_ends_generation_once_every_row_chose_it(stop: int) -> None:
    params = {
        n: v + np.random.default_rng(1).normal(0, 0.5, v.shape)
        for n, v in init_params(SMALL, 1).items()
    }
    prompt = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    free = reference.generate(params, SMALL, prompt, 20, temperature=1.0, seed=5)
    out = reference.generate(params, SMALL, prompt, 20, temperature=1.0, seed=5, stop_token=stop)
    new, free_new = out[:, 3:], free[:, 3:]
    for row, free_row in zip(new, free_new):
        hits = np.flatnonzero(free_row == stop)
        if len(hits):
            first = hits[0]
            assert (row[: first + 1] == free_row[: first + 1]).all()
            assert (row[first:] == stop).all()
    every = [np.flatnonzero(r == stop) for r in free_new]
    if all(len(h) for h in every):
        assert new.shape[1] == max(h[0] for h in every) + 1
    else:
        assert new.shape[1] == 20
    weights = {n: tm.Tensor.from_numpy(v) for n, v in params.items()}
    on_tensor = tm.generate(weights, SMALL, prompt, 20, temperature=1.0, seed=5, stop_token=stop)
    assert on_tensor.tolist() == out.tolist()


def test_greedy_generation_stops_at_the_first_stop_token() -> None:
    params = init_params(SMALL, 3)
    prompt = [1, 2]
    free = reference.generate(params, SMALL, prompt, 6)[0, 2:]
    stop = int(free[2])
    out = reference.generate(params, SMALL, prompt, 6, stop_token=stop)[0, 2:]
    first = int(np.flatnonzero(free == stop)[0])
    assert out.tolist() == free[: first + 1].tolist()


def test_same_seed_same_tokens_with_top_p() -> None:
    params = init_params(SMALL, 2)
    runs = [
        reference.generate(params, SMALL, [1, 2], 10, temperature=1.5, top_p=0.9, seed=11)
        for _ in range(2)
    ]
    assert runs[0].tolist() == runs[1].tolist()


@pytest.mark.parametrize(
    ("top_p", "stop", "match"),
    [
        (1.5, None, r"top_p must be a probability in \[0, 1\], got 1.5"),
        (-0.1, None, r"top_p must be a probability"),
        (float("nan"), None, r"top_p must be a probability"),
        (True, None, "top_p must be None or a number"),
        (None, 12, r"stop_token = 12 is outside the vocabulary 0..11"),
        (None, -1, r"stop_token = -1 is outside"),
        (None, 2.0, "stop_token must be None or a token id"),
    ],
)
def test_bad_top_p_and_stop_token_are_refused(top_p: object, stop: object, match: str) -> None:
    with pytest.raises(GenerationError, match=match):
        check_sampler(SMALL, 1.0, None, 0, top_p, stop)
