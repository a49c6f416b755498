"""A GPT-2 folder read by this package runs as Hugging Face runs it: on the same folder (a small
random one written here, nothing downloaded), ``GPT2LMHeadModel.from_pretrained`` and
``GPT2Tokenizer.from_pretrained`` give the same logits (float64 to 1e-9, float32 to 1e-4), the
same greedy tokens and the same token ids; and folders written by Hugging Face's own
``save_pretrained`` (float32, float16, bfloat16) load to exactly its values.

``torch`` and ``transformers`` are oracles, not dependencies of llmfs: without them these tests
skip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from llmfs.gpt import reference
from llmfs.gpt import tensor_model as tm
from llmfs.gpt.checkpoint import load_gpt2
from llmfs.gpt.hf_folder import load_tokenizer, write_folder
from llmfs.gpt.model import GPTConfig, Params, init_params
from llmfs.gpt.tokenizer import BPETokenizer

torch = pytest.importorskip("torch", reason="torch is not installed (not a dependency of llmfs)")
transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (not a dependency of llmfs)"
)

TEXT = (
    "Hugging Face writes a folder: config, weights, vocabulary, merges. The learner's library "
    "reads it, encodes a prompt, and generates with its own cache. " * 4
)
PROMPTS = ["The learner's library reads", "a prompt, and", " weights"]


@pytest.fixture(scope="module")
def tokenizer() -> BPETokenizer:
    return BPETokenizer.train(TEXT, 300)


@pytest.fixture(scope="module")
def config(tokenizer: BPETokenizer) -> GPTConfig:
    return GPTConfig(vocab_size=tokenizer.vocab_size, n_ctx=32, n_embd=48, n_head=4, n_layer=3)


@pytest.fixture(scope="module")
def params(config: GPTConfig) -> Params:
    rng = np.random.default_rng(11)
    # Every value moved off its initial one (biases, LayerNorm weights), and larger weights so
    # that the logits are far from uniform and greedy choices are not near-ties.
    return {n: 3 * v + rng.normal(0, 0.1, v.shape) for n, v in init_params(config, 11).items()}


def hugging_face(folder: Path, dtype: Any) -> Any:
    return transformers.GPT2LMHeadModel.from_pretrained(str(folder), torch_dtype=dtype).eval()


def hf_logits(model: Any, ids: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(ids)).logits.numpy()


@pytest.mark.parametrize("prefix", ["transformer.", ""])
def test_float64_logits_equal_hugging_faces_to_1e9(
    tmp_path: Path, params: Params, config: GPTConfig, tokenizer: BPETokenizer, prefix: str
) -> None:
    folder = write_folder(tmp_path, params, config, tokenizer, dtype=np.float64, prefix=prefix)
    loaded, read = load_gpt2(folder)
    model = hugging_face(folder, torch.float64)
    ids = np.array([load_tokenizer(folder).encode(PROMPTS[0])])
    expected = hf_logits(model, ids)
    ours = tm.forward(tm.tensor_params(loaded, np.float64), read, ids).to_numpy()
    assert np.abs(ours - expected).max() < 1e-9
    assert np.abs(reference.forward(loaded, read, ids) - expected).max() < 1e-9


def test_float32_logits_equal_hugging_faces_to_1e4(
    tmp_path: Path, params: Params, config: GPTConfig, tokenizer: BPETokenizer
) -> None:
    folder = write_folder(tmp_path, params, config, tokenizer)
    loaded, read = load_gpt2(folder)
    model = hugging_face(folder, torch.float32)
    rng = np.random.default_rng(2)
    ids = rng.integers(0, config.vocab_size, size=(3, config.n_ctx))
    ours = tm.forward(tm.tensor_params(loaded, np.float32), read, ids).to_numpy()
    assert ours.dtype == np.float32
    assert np.abs(ours - hf_logits(model, ids)).max() < 1e-4


def test_greedy_tokens_equal_hugging_faces(
    tmp_path: Path, params: Params, config: GPTConfig, tokenizer: BPETokenizer
) -> None:
    folder = write_folder(tmp_path, params, config, tokenizer, dtype=np.float64)
    loaded, read = load_gpt2(folder)
    model = hugging_face(folder, torch.float64)
    ours_tokenizer = load_tokenizer(folder, read)
    w = tm.tensor_params(loaded, np.float64)
    for prompt in PROMPTS:
        ids = np.array([ours_tokenizer.encode(prompt)])
        new = config.n_ctx - ids.shape[1]  # up to the full window: every cached position used
        with torch.no_grad():
            expected = model.generate(
                torch.from_numpy(ids),
                attention_mask=torch.ones(ids.shape, dtype=torch.long),
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=False,
                use_cache=True,
                pad_token_id=0,
                eos_token_id=None,
            ).numpy()
        np.testing.assert_array_equal(tm.generate(w, read, ids, new), expected)
        np.testing.assert_array_equal(tm.generate(w, read, ids, new, kv_cache=False), expected)


def test_token_ids_equal_gpt2_tokenizers_on_the_same_folder(
    tmp_path: Path, params: Params, config: GPTConfig, tokenizer: BPETokenizer
) -> None:
    folder = write_folder(tmp_path, params, config, tokenizer)
    ours = load_tokenizer(folder, config)
    theirs = transformers.GPT2Tokenizer.from_pretrained(str(folder))
    for text in [*PROMPTS, TEXT[:200], "naïve café 数字 🎉 it's   spaced\n\nout", ""]:
        ids = ours.encode(text)
        assert ids == theirs.encode(text), text
        assert ours.decode(ids) == theirs.decode(ids)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_folder_written_by_save_pretrained_loads_to_its_values(
    tmp_path: Path, config: GPTConfig, dtype: str
) -> None:
    torch.manual_seed(0)
    hf_config = transformers.GPT2Config(
        vocab_size=config.vocab_size,
        n_positions=config.n_ctx,
        n_embd=config.n_embd,
        n_layer=config.n_layer,
        n_head=config.n_head,
    )
    model = transformers.GPT2LMHeadModel(hf_config).to(getattr(torch, dtype)).eval()
    model.save_pretrained(str(tmp_path))
    assert (tmp_path / "model.safetensors").is_file()
    params, read = load_gpt2(tmp_path)
    assert read == config
    state = model.state_dict()
    for name, value in params.items():
        assert value.dtype == np.float32
        # Widening to float32 is exact: the same values as torch's own conversion, bit for bit.
        np.testing.assert_array_equal(value, state["transformer." + name].float().numpy())
    wide = transformers.GPT2LMHeadModel.from_pretrained(str(tmp_path), torch_dtype=torch.float32)
    ids = np.random.default_rng(4).integers(0, config.vocab_size, size=(2, 9))
    ours = tm.forward(tm.tensor_params(params, np.float32), read, ids).to_numpy()
    assert np.abs(ours - hf_logits(wide.eval(), ids)).max() < 1e-4
