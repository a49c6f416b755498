"""Generation, in the NumPy reference and on llmfs.tensor: the same tokens with and without the KV
cache, the same tokens from both implementations, the context sliding past n_ctx, sampling that
stays in the top-k and repeats per seed, and clear errors for bad arguments."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmfs.gpt import reference
from llmfs.gpt import tensor_model as tm
from llmfs.gpt.errors import TaskError
from llmfs.gpt.model import GPTConfig, init_params
from llmfs.gpt.sampling import GenerationError, Sampler, check_sampler

SMALL = GPTConfig(vocab_size=12, n_ctx=5, n_embd=8, n_head=2, n_layer=2)

# Each example runs several generations of tens of ops; no timing is asserted.
CASES = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _params(config: GPTConfig, seed: int) -> dict[str, np.ndarray]:
    """Initialisation plus N(0, 0.5^2) noise: logits spread wide enough that float64 rounding
    never decides an arg-max."""
    rng = np.random.default_rng(seed)
    return {n: v + rng.normal(0, 0.5, v.shape) for n, v in init_params(config, seed).items()}


def _by_definition(params: dict[str, np.ndarray], config: GPTConfig, ids: Any, new: int) -> Any:
    """Greedy generation as its definition says: the forward pass of the last n_ctx tokens,
    the arg-max of the last position, appended; repeated."""
    seq = np.atleast_2d(np.asarray(ids, dtype=np.int64))
    for _ in range(new):
        logits = reference.forward(params, config, seq[:, -config.n_ctx :])[:, -1]
        seq = np.concatenate([seq, logits.argmax(axis=-1)[:, None]], axis=1)
    return seq


@st.composite
def models(draw: st.DrawFn) -> tuple[GPTConfig, dict[str, np.ndarray], np.ndarray, int]:
    heads = draw(st.integers(1, 3))
    config = GPTConfig(
        vocab_size=draw(st.integers(2, 20)),
        n_ctx=draw(st.integers(1, 6)),
        n_embd=heads * draw(st.integers(1, 4)),
        n_head=heads,
        n_layer=draw(st.integers(1, 2)),
    )
    seed = draw(st.integers(0, 2**16))
    batch, length = draw(st.integers(1, 3)), draw(st.integers(1, 8))  # may exceed n_ctx
    ids = np.random.default_rng(seed).integers(0, config.vocab_size, size=(batch, length))
    return config, _params(config, seed), ids, draw(st.integers(0, 8))


@CASES
@given(models())
def test_greedy_is_the_same_with_and_without_the_cache_in_both_implementations(
    case: tuple[GPTConfig, dict[str, np.ndarray], np.ndarray, int],
) -> None:
    config, params, ids, new = case
    expected = _by_definition(params, config, ids, new)
    w = tm.tensor_params(params)  # float64: logits equal the reference's to ~1e-12
    for got in (
        reference.generate(params, config, ids, new),
        reference.generate(params, config, ids, new, kv_cache=False),
        tm.generate(w, config, ids, new),
        tm.generate(w, config, ids, new, kv_cache=False),
    ):
        assert got.dtype == np.int64
        assert got.shape == (ids.shape[0], ids.shape[1] + new)
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n_ctx", [2, 3, 4])
def test_the_window_slides_many_times_with_the_same_tokens_as_recomputing(
    seed: int, n_ctx: int
) -> None:
    # Far past n_ctx, greedy and sampled: a cache that kept (shifted or rolled) keys and values
    # of the old positions would drift from the window's own forward pass.
    config = GPTConfig(vocab_size=17, n_ctx=n_ctx, n_embd=8, n_head=2, n_layer=2)
    params = _params(config, seed)
    ids = np.random.default_rng(seed).integers(0, 17, size=(3, 2))
    w = tm.tensor_params(params)
    expected = _by_definition(params, config, ids, 14)
    np.testing.assert_array_equal(reference.generate(params, config, ids, 14), expected)
    np.testing.assert_array_equal(tm.generate(w, config, ids, 14), expected)
    how = {"temperature": 1.5, "seed": seed}
    sampled = reference.generate(params, config, ids, 14, kv_cache=False, **how)
    np.testing.assert_array_equal(reference.generate(params, config, ids, 14, **how), sampled)
    np.testing.assert_array_equal(tm.generate(w, config, ids, 14, **how), sampled)


@CASES
@given(models(), st.floats(0.05, 5.0), st.integers(1, 20), st.integers(0, 2**32))
def test_sampling_is_the_same_in_both_implementations_with_and_without_the_cache(
    case: tuple[GPTConfig, dict[str, np.ndarray], np.ndarray, int],
    temperature: float,
    top_k: int,
    seed: int,
) -> None:
    config, params, ids, new = case
    top_k = min(top_k, config.vocab_size)
    how = {"temperature": temperature, "top_k": top_k, "seed": seed}
    expected = reference.generate(params, config, ids, new, **how)
    np.testing.assert_array_equal(expected, reference.generate(params, config, ids, new, **how))
    w = tm.tensor_params(params)
    for kv_cache in (True, False):
        np.testing.assert_array_equal(
            reference.generate(params, config, ids, new, kv_cache=kv_cache, **how), expected
        )
        np.testing.assert_array_equal(
            tm.generate(w, config, ids, new, kv_cache=kv_cache, **how), expected
        )


@CASES
@given(models(), st.floats(0.05, 20.0), st.integers(1, 20), st.integers(0, 2**32))
def test_every_sampled_token_is_among_the_top_k_logits_of_its_step(
    case: tuple[GPTConfig, dict[str, np.ndarray], np.ndarray, int],
    temperature: float,
    top_k: int,
    seed: int,
) -> None:
    config, params, ids, new = case
    top_k = min(top_k, config.vocab_size)
    seq = reference.generate(
        params, config, ids, new, temperature=temperature, top_k=top_k, seed=seed
    )
    for length in range(ids.shape[1], seq.shape[1]):
        logits = reference.forward(params, config, seq[:, max(0, length - config.n_ctx) : length])
        for row, z in enumerate(logits[:, -1]):
            allowed = np.argsort(-z, kind="stable")[:top_k]
            assert seq[row, length] in allowed


def test_top_k_1_and_temperature_0_are_greedy() -> None:
    params = _params(SMALL, 3)
    ids = np.array([[1, 2, 3], [4, 5, 6]])
    greedy = reference.generate(params, SMALL, ids, 9)
    for temperature in (0.1, 1.0, 100.0):
        got = reference.generate(params, SMALL, ids, 9, temperature=temperature, top_k=1, seed=1)
        np.testing.assert_array_equal(got, greedy)
    # top_k has nothing to choose at temperature 0.
    np.testing.assert_array_equal(reference.generate(params, SMALL, ids, 9, top_k=5), greedy)


def test_a_seed_repeats_its_tokens_and_other_seeds_give_others() -> None:
    params = _params(SMALL, 4)
    ids = [1, 2, 3]
    runs = [
        reference.generate(params, SMALL, ids, 12, temperature=2.0, seed=s).tolist()
        for s in range(6)
    ]
    again = reference.generate(params, SMALL, ids, 12, temperature=2.0, seed=0).tolist()
    assert again == runs[0]
    assert len({str(r) for r in runs}) > 1
    assert all(r[0][:3] == ids for r in runs)


def test_the_draw_follows_the_softmax_of_the_scaled_top_k_logits() -> None:
    # 40,000 rows of the same logits: each candidate's share approaches its probability.
    z = np.array([0.0, 2.0, 1.0, -1.0, 2.0, 0.5])
    sampler = Sampler(temperature=0.7, top_k=4, rng=np.random.default_rng(0))
    drawn = sampler.choose(np.tile(z, (40_000, 1)))
    top = [1, 4, 2, 5]  # the 4 largest logits, ties in increasing id order
    p = np.exp(z[top] / 0.7) / np.exp(z[top] / 0.7).sum()
    shares = np.array([(drawn == i).mean() for i in top])
    np.testing.assert_allclose(shares, p, atol=0.01)
    assert set(drawn.tolist()) <= set(top)


def test_ties_at_the_k_th_logit_keep_the_lower_ids_and_exactly_k_candidates() -> None:
    z = np.array([[1.0, 3.0, 3.0, 3.0, 0.0]])
    drawn = {int(Sampler(1.0, 2, np.random.default_rng(s)).choose(z)[0]) for s in range(200)}
    assert drawn == {1, 2}


def test_a_zero_probability_candidate_is_never_drawn() -> None:
    # exp(-2000) underflows to 0: however the uniform falls, id 0 is not taken.
    z = np.tile(np.array([-2000.0, 0.0, 0.0]), (5000, 1))
    assert 0 not in Sampler(1.0, None, np.random.default_rng(1)).choose(z)


def test_the_prompt_is_kept_and_lists_and_one_row_arrays_are_accepted() -> None:
    params = _params(SMALL, 5)
    w = tm.tensor_params(params)
    for ids in ([3, 1, 4], np.array([3, 1, 4]), [[3, 1, 4]], np.array([[3, 1, 4]], np.int32)):
        for generate, weights in ((reference.generate, params), (tm.generate, w)):
            out = generate(weights, SMALL, ids, 4)  # type: ignore[operator]
            assert out.shape == (1, 7) and out.dtype == np.int64
            assert out[0, :3].tolist() == [3, 1, 4]
    assert reference.generate(params, SMALL, [5], 0).tolist() == [[5]]


def test_a_prompt_longer_than_the_context_is_read_through_its_last_n_ctx_tokens() -> None:
    params = _params(SMALL, 6)
    ids = np.arange(11).reshape(1, 11) % 12
    got = reference.generate(params, SMALL, ids, 3)
    np.testing.assert_array_equal(got[:, :11], ids)
    np.testing.assert_array_equal(got, _by_definition(params, SMALL, ids, 3))
    # Only the window matters: the tokens before the last n_ctx change nothing.
    other = ids.copy()
    other[0, :6] = 0
    np.testing.assert_array_equal(reference.generate(params, SMALL, other, 3)[:, 11:], got[:, 11:])


BAD_ARGUMENTS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"temperature": -0.5}, GenerationError, r"temperature must be a finite number >= 0.*-0\.5"),
    ({"temperature": float("nan")}, GenerationError, "temperature must be a finite number"),
    ({"temperature": float("inf")}, GenerationError, "temperature must be a finite number"),
    ({"temperature": "hot"}, GenerationError, "temperature must be a number >= 0, got str"),
    ({"top_k": 0}, GenerationError, r"top_k = 0 is outside 1..vocab_size = 12"),
    ({"top_k": 13}, GenerationError, r"top_k = 13 is outside 1..vocab_size = 12"),
    ({"top_k": 2.5}, GenerationError, "top_k must be None or an int, got float"),
    ({"top_k": True}, GenerationError, "top_k must be None or an int, got bool"),
    ({"seed": -1}, GenerationError, r"seed must be None or an int >= 0, got -1"),
    ({"ids": [1, 12]}, TaskError, r"token ids 1..12 fall outside the vocabulary 0..11"),
    ({"ids": [-1, 3]}, TaskError, r"token ids -1..3 fall outside the vocabulary 0..11"),
    ({"ids": []}, TaskError, r"the prompt is empty \(shape \[0\]\)"),
    ({"ids": np.zeros((2, 0), np.int64)}, TaskError, r"the prompt is empty \(shape \[2, 0\]\)"),
    ({"ids": [1.0, 2.0]}, TaskError, r"ids must be ints, got float64 \(shape \[2\]\)"),
    ({"ids": [True, False]}, TaskError, r"ids must be ints, got bool"),
    ({"ids": [[1, 2], [3]]}, TaskError, "ids must be \\[T\\] or \\[B, T\\] ints, got a ragged"),
    ({"ids": np.zeros((1, 2, 3), np.int64)}, TaskError, r"got shape \[1, 2, 3\]"),
    ({"max_new_tokens": -1}, GenerationError, "max_new_tokens must be >= 0, got -1"),
    ({"max_new_tokens": 2.0}, GenerationError, "max_new_tokens must be an int >= 0, got float"),
]


@pytest.mark.parametrize(("change", "error", "message"), BAD_ARGUMENTS)
@pytest.mark.parametrize("implementation", ["reference", "tensor"])
def test_bad_arguments_are_refused_with_the_numbers(
    change: dict[str, Any], error: type[Exception], message: str, implementation: str
) -> None:
    params = _params(SMALL, 7)
    args: dict[str, Any] = {"ids": [1, 2, 3], "max_new_tokens": 2, **change}
    ids, new = args.pop("ids"), args.pop("max_new_tokens")
    with pytest.raises(error, match=message):
        if implementation == "reference":
            reference.generate(params, SMALL, ids, new, **args)
        else:
            tm.generate(tm.tensor_params(params), SMALL, ids, new, **args)


def test_errors_are_gpt_errors_and_value_errors() -> None:
    with pytest.raises(ValueError):
        check_sampler(SMALL, -1.0, None, None)


def test_weights_that_do_not_fit_the_config_are_refused() -> None:
    from llmfs.gpt.errors import WeightsError

    params = _params(SMALL, 8)
    other = GPTConfig(vocab_size=12, n_ctx=5, n_embd=8, n_head=2, n_layer=3)
    with pytest.raises(WeightsError, match="missing"):
        reference.generate(params, other, [1], 1)
    with pytest.raises(WeightsError, match="missing"):
        tm.generate(tm.tensor_params(params), other, [1], 1)
