"""The capstone model on llmfs.tensor: the same logits as the NumPy reference, the held-out
accuracy computed now from the shipped weights, one copy per block."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from llmfs.gpt import reference, task
from llmfs.gpt import tensor_model as tm
from llmfs.gpt.checkpoint import load_tiny_gpt
from llmfs.gpt.errors import TaskError
from llmfs.gpt.model import GPTConfig, init_params
from llmfs.tensor import Tensor, TensorView

SMALL = GPTConfig(vocab_size=12, n_ctx=8, n_embd=8, n_head=2, n_layer=2)


@pytest.fixture(scope="module")
def shipped() -> tuple[dict[str, np.ndarray], GPTConfig]:
    return load_tiny_gpt()


def _random_params(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: v + rng.normal(0, 0.3, v.shape) for n, v in init_params(SMALL, seed).items()}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_named_step_equals_the_reference_in_float64(seed: int) -> None:
    params = _random_params(seed)
    tokens = np.random.default_rng(seed).integers(0, 12, size=(3, 7))
    steps = reference.activations(params, SMALL, tokens)
    w = tm.tensor_params(params)
    x = tm.embed(tokens, w, SMALL)
    np.testing.assert_allclose(x.to_numpy(), steps["embed"], rtol=0, atol=1e-12)
    x = tm.block(x, w, 0, SMALL)
    np.testing.assert_allclose(x.to_numpy(), steps["h.0.out"], rtol=0, atol=1e-12)
    logits = tm.forward(w, SMALL, tokens)
    np.testing.assert_allclose(logits.to_numpy(), steps["logits"], rtol=0, atol=1e-9)


def test_shipped_logits_equal_the_reference_at_1e_9_in_float64_and_1e_4_in_float32(
    shipped: tuple[dict[str, np.ndarray], GPTConfig],
) -> None:
    params, config = shipped
    tokens = task.sequences(task.split().held_out[::50])[:, : config.n_ctx]
    expected = reference.forward(params, config, tokens)
    got64 = tm.forward(tm.tensor_params(params, np.float64), config, tokens)
    got32 = tm.forward(tm.tensor_params(params, np.float32), config, tokens)
    assert got64.dtype == np.float64 and got32.dtype == np.float32
    assert np.abs(got64.to_numpy() - expected).max() <= 1e-9
    assert np.abs(got32.to_numpy() - expected).max() <= 1e-4


def test_held_out_accuracy_through_llmfs_tensor_is_computed_and_at_least_98_percent(
    shipped: tuple[dict[str, np.ndarray], GPTConfig],
) -> None:
    params, config = shipped
    held_out = task.split().held_out
    w = tm.tensor_params(params, np.float32)
    accuracy = tm.accuracy(w, config, held_out, batch_size=512)
    assert accuracy >= 0.98
    # The same answers as the reference's greedy decoding, problem by problem.
    sample = held_out[::37]
    np.testing.assert_array_equal(
        tm.generate(w, config, task.prompts(sample), task.ANSWER_LENGTH),
        reference.generate(params, config, task.prompts(sample), task.ANSWER_LENGTH),
    )


def test_accuracy_counts_wrong_answers(shipped: tuple[dict[str, np.ndarray], GPTConfig]) -> None:
    params, config = shipped
    broken = dict(params, **{"wpe.weight": np.zeros_like(params["wpe.weight"])})  # no positions
    problems = task.split().held_out[:64]
    assert tm.accuracy(tm.tensor_params(broken), config, problems) < 0.5
    assert tm.solve(tm.tensor_params(params), config, 37, 45) == "280"


def test_a_single_sequence_gives_rank_2_logits_and_one_generated_row() -> None:
    params = _random_params(0)
    w = tm.tensor_params(params)
    tokens = np.array([1, 2, 3])
    logits = tm.forward(w, SMALL, tokens)
    assert logits.shape == (3, 12)
    expected = reference.forward(params, SMALL, tokens)
    np.testing.assert_allclose(logits.to_numpy(), expected, rtol=0, atol=1e-9)
    generated = tm.generate(w, SMALL, tokens, 4)
    assert generated.shape == (1, 7)
    np.testing.assert_array_equal(generated, reference.generate(params, SMALL, tokens, 4))


def test_one_forward_pass_copies_once_per_block_and_views_q_k_v() -> None:
    w = tm.tensor_params(_random_params(0))
    trace = tm.copy_budget(w, SMALL, np.zeros((2, 5), dtype=np.int64))
    assert [s.shape for s in trace.copies] == [(2, 5, 2, 4)] * SMALL.n_layer
    kinds = {s.name: s.kind for s in trace.steps}
    assert kinds["q, k, v: slices split into heads"] == "view"
    assert kinds["head = wte^T (tied)"] == "view"
    assert kinds["heads merged to [B, T, C]"] == "view"
    assert repr(trace).endswith(f"{trace.count('copy')} copies (materialize)")


def test_split_and_merge_heads_round_trip_with_one_copy() -> None:
    x = Tensor.from_numpy(np.arange(2 * 3 * 8, dtype=np.float64).reshape(2, 3, 8) * 1.5)
    heads = tm.split_heads(x, 2)
    assert isinstance(heads, TensorView) and heads.shares_storage(x)
    assert heads.shape == (2, 2, 3, 4) and heads.strides == (24, 4, 8, 1)
    copied = heads.materialize()
    with tm.tracing() as trace:
        merged = tm.merge_heads(copied)
    np.testing.assert_array_equal(merged.to_numpy(), x.to_numpy())
    assert [(s.name, s.kind) for s in trace.steps] == [
        ("heads permuted to [B, T, H, D]", "view"),
        ("materialize (heads)", "copy"),
    ]


def test_tracing_watches_the_layers_only_inside_its_block_and_puts_the_hook_back() -> None:
    w = tm.tensor_params(_random_params(1))
    tokens = np.array([[1, 2, 3]], dtype=np.int64)
    outer: list[str] = []

    def hook(frame, event, arg):  # a hook already installed (a debugger, coverage)
        outer.append(event)

    sys.settrace(hook)
    try:
        with tm.tracing() as trace:
            logits = tm.forward(w, SMALL, tokens)
        assert sys.gettrace() is hook
    finally:
        sys.settrace(None)
    names = [s.name for s in trace.steps]
    per_block = len(tm.STEPS["block"]) + len(tm.STEPS["attention"]) + len(tm.STEPS["mlp"]) + 2
    assert len(names) == 3 + SMALL.n_layer * per_block + 3
    assert names[:4] == [*tm.STEPS["embed"].values(), "h.0.ln_1"]
    assert f"h.{SMALL.n_layer - 1} residual + mlp" in names
    assert trace.steps[-1].shape == tuple(logits.shape)
    # Nothing is recorded outside the block, and the traced pass computes the same logits.
    tm.forward(w, SMALL, tokens)
    assert len(trace.steps) == len(names)
    np.testing.assert_array_equal(tm.forward(w, SMALL, tokens).to_numpy(), logits.to_numpy())


def test_a_copy_is_a_step_made_by_materialize_and_an_op_result_is_computed() -> None:
    x = Tensor.from_numpy(np.arange(2 * 2 * 3 * 4, dtype=np.float64).reshape(2, 2, 3, 4))
    with tm.tracing() as trace:
        tm.merge_heads(x.view() + 0.0)  # the permuted view of a computed owner, copied once
        tm.merge_heads(x)
    assert [s.kind for s in trace.steps] == ["view", "copy", "view", "copy"]
    assert trace.copies == [tm.Step("materialize (heads)", "copy", (2, 3, 2, 4))] * 2


def test_layers_match_the_reference_on_random_inputs() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(0, 2, size=(2, 3, 8))
    w, b = rng.normal(size=8), rng.normal(size=8)
    t = Tensor.from_numpy
    got = tm.layer_norm(t(x), t(w), t(b), 1e-5).to_numpy()
    np.testing.assert_allclose(got, reference.layer_norm(x, w, b, 1e-5), rtol=0, atol=1e-12)
    np.testing.assert_allclose(tm.gelu(t(x)).to_numpy(), reference.gelu(x), rtol=0, atol=1e-14)
    np.testing.assert_allclose(
        tm.softmax(t(x)).to_numpy(), reference.softmax(x), rtol=0, atol=1e-15
    )
    mask = tm.causal_mask(3).to_numpy()
    assert mask[0].tolist() == [0.0, -np.inf, -np.inf] and mask[2].tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        (np.zeros((1, 9), dtype=np.int64), r"sequence length 9 is outside 1\.\.n_ctx = 8"),
        (np.array([[0, 12]]), r"token ids 0\.\.12 fall outside 0\.\.11"),
        (np.array([[0.5]]), r"tokens must be \[T\] or \[B, T\] ints"),
    ],
)
def test_bad_tokens_are_refused_with_the_numbers(tokens: np.ndarray, message: str) -> None:
    w = tm.tensor_params(_random_params(0))
    with pytest.raises(TaskError, match=message):
        tm.forward(w, SMALL, tokens)


def test_generation_slides_past_the_context_and_empty_accuracy_is_refused() -> None:
    w = tm.tensor_params(_random_params(0))
    assert tm.generate(w, SMALL, np.zeros(6, dtype=np.int64), 4).shape == (1, 10)
    with pytest.raises(TaskError, match="problems is empty"):
        tm.accuracy(w, SMALL, np.zeros((0, 2), dtype=np.int64))


def test_backend_times_time_numpy_and_report_a_refusal_instead_of_raising(
    shipped: tuple[dict[str, np.ndarray], GPTConfig],
) -> None:
    params, config = shipped
    plan = {"numpy": tm.TimingPlan(batch=2, repeat=1, warmup=0)}
    (row,) = tm.backend_times(params, config, ["numpy"], plan)
    assert row.backend == "numpy" and row.batch == (2, 6) and row.seconds is not None
    (missing,) = tm.backend_times(params, config, ["no-such-backend"])
    assert missing.seconds is None and "no-such-backend" in missing.note
    text = tm.format_times([row, missing])
    assert "ms per forward pass" in text and "not measured" in text


def test_count_materializations_counts_copies_made_by_any_code_and_restores_the_method() -> None:
    w = tm.tensor_params(_random_params(0))
    original = TensorView.materialize
    with tm.count_materializations() as copies:
        tm.forward(w, SMALL, np.zeros((1, 3), dtype=np.int64))
        Tensor.zeros([2, 3]).view().T.materialize()
    assert copies.count == SMALL.n_layer + 1
    assert copies.shapes[-1] == (3, 2)
    assert TensorView.materialize is original


def test_float32_logits_on_the_metal_emulator_equal_the_reference_at_1e_4(
    shipped: tuple[dict[str, np.ndarray], GPTConfig],
) -> None:
    from llmfs.tensor import available_backends, use_backend

    if "metal-emulator" not in available_backends():
        pytest.skip("the Metal emulator does not load here (it needs a C++ compiler)")
    params, config = shipped
    tokens = task.sequences(task.split().held_out[::200])[:, : config.n_ctx]
    with use_backend("metal-emulator"):
        got = tm.forward(tm.tensor_params(params, np.float32), config, tokens).to_numpy()
    assert np.abs(got - reference.forward(params, config, tokens)).max() <= 1e-4
