"""Greedy generation equals Hugging Face's ``GPT2LMHeadModel.generate(do_sample=False)`` on the same
weights. torch and transformers are not dependencies of llmfs: without them these tests skip.

Both sides compute in float64 (the Hugging Face model is converted with ``.double()``), so that
rounding never decides an arg-max; the prompts and new tokens stay within ``n_ctx`` (Hugging Face's
GPT-2 has no sliding window)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (not an llmfs dependency)")
transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (not an llmfs dependency)"
)

from llmfs.gpt import reference  # noqa: E402 - after the skips
from llmfs.gpt import tensor_model as tm  # noqa: E402
from llmfs.gpt.model import GPTConfig, Params, init_params  # noqa: E402


def _hugging_face(params: Params, config: GPTConfig) -> Any:
    """A float64 ``GPT2LMHeadModel`` holding ``params`` (the names are GPT-2's, with the
    ``transformer.`` prefix; the head is tied to ``wte``)."""
    hf_config = transformers.GPT2Config(
        vocab_size=config.vocab_size,
        n_positions=config.n_ctx,
        n_embd=config.n_embd,
        n_layer=config.n_layer,
        n_head=config.n_head,
        layer_norm_epsilon=config.layer_norm_eps,
        activation_function="gelu_new",  # GPT-2's tanh form, as llmfs's gelu
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    model = transformers.GPT2LMHeadModel(hf_config).double().eval()
    state = {
        "transformer." + n: torch.from_numpy(np.asarray(v, np.float64)) for n, v in params.items()
    }
    state["lm_head.weight"] = state["transformer.wte.weight"]
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected
    assert all(k.endswith((".attn.bias", ".attn.masked_bias")) for k in missing)
    return model


def _hf_generate(model: Any, ids: np.ndarray, new: int) -> np.ndarray:
    with torch.no_grad():
        out = model.generate(
            torch.from_numpy(ids),
            attention_mask=torch.ones(ids.shape, dtype=torch.long),
            max_new_tokens=new,
            min_new_tokens=new,
            do_sample=False,
            use_cache=True,
            pad_token_id=0,
            eos_token_id=None,
        )
    result: np.ndarray = out.numpy()
    return result


CONFIGS = [
    GPTConfig(vocab_size=40, n_ctx=16, n_embd=16, n_head=2, n_layer=2),
    GPTConfig(vocab_size=97, n_ctx=24, n_embd=24, n_head=3, n_layer=3),
    GPTConfig(vocab_size=7, n_ctx=12, n_embd=8, n_head=4, n_layer=1),
]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"V{c.vocab_size}-L{c.n_layer}")
def test_greedy_equals_hugging_face_generate(config: GPTConfig, seed: int) -> None:
    rng = np.random.default_rng(seed)
    params = {n: v + rng.normal(0, 0.3, v.shape) for n, v in init_params(config, seed).items()}
    batch, length = 3, 1 + seed * 3
    ids = rng.integers(0, config.vocab_size, size=(batch, length))
    new = config.n_ctx - length
    expected = _hf_generate(_hugging_face(params, config), ids, new)
    assert expected.shape == (batch, config.n_ctx)
    np.testing.assert_array_equal(reference.generate(params, config, ids, new), expected)
    np.testing.assert_array_equal(
        reference.generate(params, config, ids, new, kv_cache=False), expected
    )
    w = tm.tensor_params(params, np.float64)
    np.testing.assert_array_equal(tm.generate(w, config, ids, new), expected)
    np.testing.assert_array_equal(tm.generate(w, config, ids, new, kv_cache=False), expected)
