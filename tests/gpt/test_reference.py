"""The NumPy reference forward pass: each layer does what GPT-2's does."""

from __future__ import annotations

import numpy as np
import pytest

from llmfs.gpt import reference
from llmfs.gpt.errors import TaskError
from llmfs.gpt.model import (
    TINY_CONFIG,
    ConfigError,
    GPTConfig,
    count_parameters,
    init_params,
    parameter_shapes,
)

SMALL = GPTConfig(vocab_size=12, n_ctx=8, n_embd=8, n_head=2, n_layer=2)


def _params(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: v + rng.normal(0, 0.3, v.shape) for n, v in init_params(SMALL, seed).items()}


def test_gelu_is_the_tanh_form() -> None:
    x = np.array([-3.0, -1.0, 0.0, 0.5, 2.0])
    expected = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(reference.gelu(x), expected, rtol=1e-15, atol=0)
    assert reference.gelu(np.array([1.0]))[0] == pytest.approx(0.8411919906082768, abs=1e-15)


def test_layer_norm_gives_zero_mean_unit_variance_before_the_affine_step() -> None:
    x = np.random.default_rng(0).normal(3.0, 2.0, size=(4, 16))
    y = reference.layer_norm(x, np.ones(16), np.zeros(16), 1e-5)
    np.testing.assert_allclose(y.mean(axis=-1), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=-1), 1, atol=1e-4)


def test_a_position_never_sees_the_future() -> None:
    params = _params()
    ids = np.array([1, 2, 3, 4, 5, 6, 7, 8])
    changed = ids.copy()
    changed[5] = 0
    a, b = reference.forward(params, SMALL, ids), reference.forward(params, SMALL, changed)
    np.testing.assert_array_equal(a[:5], b[:5])
    assert not np.allclose(a[5:], b[5:])


def test_the_output_head_is_the_token_embedding() -> None:
    params = _params()
    assert not any("lm_head" in n for n in params)
    ids = np.array([[3, 1, 4, 1, 5]])
    x = reference.embed(ids, params, SMALL)
    for i in range(SMALL.n_layer):
        x = reference.block(x, params, i, SMALL)
    x = reference.layer_norm(x, params["ln_f.weight"], params["ln_f.bias"], 1e-5)
    np.testing.assert_array_equal(reference.forward(params, SMALL, ids), x @ params["wte.weight"].T)


def test_the_named_activations_lead_to_the_same_logits() -> None:
    params = _params()
    ids = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]])
    acts = reference.activations(params, SMALL, ids)
    assert list(acts)[:4] == ["embed", "h.0.ln_1", "h.0.attn", "h.0.resid_attn"]
    assert list(acts)[-2:] == ["ln_f", "logits"]
    np.testing.assert_array_equal(acts["logits"], reference.forward(params, SMALL, ids))
    np.testing.assert_array_equal(acts["h.1.out"], acts["h.1.resid_attn"] + acts["h.1.mlp"])
    assert all(a.shape[:2] == (2, 5) for a in acts.values())


def test_a_batch_row_gives_the_same_logits_as_alone() -> None:
    params = _params()
    ids = np.array([[3, 1, 4], [1, 5, 9 % 12]])
    batch = reference.forward(params, SMALL, ids)
    np.testing.assert_allclose(batch[1], reference.forward(params, SMALL, ids[1]), atol=1e-12)


def test_greedy_generation_appends_the_argmax_each_step() -> None:
    params = _params()
    prompt = np.array([1, 2, 3])
    generated = reference.generate(params, SMALL, prompt, 3)
    ids = list(prompt)
    for _ in range(3):
        ids.append(int(reference.forward(params, SMALL, np.array(ids))[-1].argmax()))
    assert generated.tolist() == [ids]


def test_bad_tokens_and_lengths_are_refused() -> None:
    params = _params()
    with pytest.raises(TaskError, match=r"sequence length 9 is outside 1..n_ctx = 8"):
        reference.forward(params, SMALL, np.zeros(9, dtype=np.int64))
    with pytest.raises(TaskError, match=r"token ids 0..12 fall outside 0..11"):
        reference.forward(params, SMALL, np.array([0, 12]))
    # Generation is not limited by n_ctx: past it the context slides (tests/gpt/test_generate.py).
    assert reference.generate(params, SMALL, np.zeros(6, dtype=np.int64), 4).shape == (1, 10)


def test_the_config_is_checked() -> None:
    with pytest.raises(ConfigError, match="n_embd = 10 is not a multiple of n_head = 4"):
        GPTConfig(vocab_size=12, n_ctx=8, n_embd=10, n_head=4, n_layer=1)
    with pytest.raises(ConfigError, match="n_layer must be a positive int"):
        GPTConfig(vocab_size=12, n_ctx=8, n_embd=8, n_head=2, n_layer=0)


def test_parameters_use_gpt2_names_and_shapes() -> None:
    shapes = parameter_shapes(TINY_CONFIG)
    assert shapes["wte.weight"] == (12, 64) and shapes["wpe.weight"] == (8, 64)
    assert shapes["h.1.attn.c_attn.weight"] == (64, 192)
    assert shapes["h.0.mlp.c_proj.weight"] == (256, 64)
    assert count_parameters(TINY_CONFIG) == sum(int(np.prod(s)) for s in shapes.values())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_layers_compute_in_the_dtype_they_are_given(dtype: type) -> None:
    # The rule: every constant is a Python float, which takes the array's dtype (an np.float64
    # scalar would promote float32 to float64 under NumPy 2).
    params = {n: v.astype(dtype) for n, v in _params(3).items()}
    x = np.random.default_rng(1).normal(size=(2, 5, SMALL.n_embd)).astype(dtype)
    eps = np.float64(SMALL.layer_norm_eps)  # even an np.float64 eps promotes nothing
    outputs = {
        "layer_norm": reference.layer_norm(
            x, params["h.0.ln_1.weight"], params["h.0.ln_1.bias"], eps
        ),
        "gelu": reference.gelu(x),
        "softmax": reference.softmax(x),
        "attention": reference.attention(x, params, "h.0.attn.", SMALL),
        "mlp": reference.mlp(x, params, "h.0.mlp."),
        "block": reference.block(x, params, 1, SMALL),
    }
    assert {name: out.dtype for name, out in outputs.items()} == dict.fromkeys(outputs, dtype)
    assert type(reference.GELU_C) is float


def test_a_float32_model_through_the_layers_gives_float32_logits() -> None:
    # The benchmarks' NumPy peer: the reference's layers on float32 arrays, no conversion.
    params = {n: v.astype(np.float32) for n, v in _params(4).items()}
    ids = np.array([[3, 1, 4, 1, 5]])
    x = params["wte.weight"][ids] + params["wpe.weight"][: ids.shape[1]]
    for i in range(SMALL.n_layer):
        x = reference.block(x, params, i, SMALL)
    x = reference.layer_norm(x, params["ln_f.weight"], params["ln_f.bias"], 1e-5)
    logits = x @ params["wte.weight"].T
    assert logits.dtype == np.float32
    expected = reference.forward(params, SMALL, ids)
    np.testing.assert_allclose(logits, expected, atol=1e-4)


def test_forward_and_activations_are_float64_whatever_the_parameters_dtype() -> None:
    params = {n: v.astype(np.float32) for n, v in _params(5).items()}
    ids = np.array([[3, 1, 4]])
    assert reference.forward(params, SMALL, ids).dtype == np.float64
    assert {a.dtype for a in reference.activations(params, SMALL, ids).values()} == {
        np.dtype(np.float64)
    }
