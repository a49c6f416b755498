"""GPT-2 from the folder Hugging Face writes (``config.json``, ``model.safetensors``,
``vocab.json``, ``merges.txt``): read back exactly as written, in every stored float dtype, with
or without the ``transformer.`` prefix; and every folder that is not this model's refused with a
``WeightsError`` naming the file and the field. The folders are small random GPT-2s written here;
nothing is downloaded. (Equality with Hugging Face's own model on such folders is
``test_hf_folder_oracle.py``.)"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

from llmfs.gpt import reference
from llmfs.gpt import tensor_model as tm
from llmfs.gpt.checkpoint import load_gpt2
from llmfs.gpt.errors import WeightsError
from llmfs.gpt.hf_folder import (
    load_folder,
    load_tokenizer,
    read_config,
    read_safetensors,
    write_folder,
)
from llmfs.gpt.model import GPTConfig, Params, init_params
from llmfs.gpt.tokenizer import BPETokenizer, TokenizerFileError

TEXT = (
    "The quick brown fox jumps over the lazy dog. A tensor owns its storage; a view reads it "
    "through a layout. Attention weighs the past; the cache keeps keys and values. " * 4
)


def random_params(config: GPTConfig, seed: int) -> Params:
    """GPT-2's initialisation with every value moved (biases and LayerNorm weights included), so
    that a swapped or dropped tensor changes the logits."""
    rng = np.random.default_rng(seed)
    return {n: v + rng.normal(0, 0.05, v.shape) for n, v in init_params(config, seed).items()}


@pytest.fixture(scope="module")
def tokenizer() -> BPETokenizer:
    return BPETokenizer.train(TEXT, 280)


@pytest.fixture(scope="module")
def config(tokenizer: BPETokenizer) -> GPTConfig:
    return GPTConfig(vocab_size=tokenizer.vocab_size, n_ctx=24, n_embd=32, n_head=4, n_layer=2)


@pytest.fixture(scope="module")
def params(config: GPTConfig) -> Params:
    return random_params(config, 3)


@pytest.fixture()
def folder(tmp_path: Path, params: Params, config: GPTConfig, tokenizer: BPETokenizer) -> Path:
    return write_folder(tmp_path / "gpt2", params, config, tokenizer)


def edit_config(folder: Path, **changes: Any) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    path.write_text(json.dumps(config))


def edit_weights(folder: Path, change: Callable[[dict[str, np.ndarray]], None]) -> None:
    path = folder / "model.safetensors"
    tensors = read_safetensors(path)
    change(tensors)
    save_file(tensors, str(path))


def write_raw_safetensors(path: Path, tensors: dict[str, tuple[str, list[int], bytes]]) -> None:
    """A safetensors file written by hand from its specification: an 8-byte little-endian header
    length, the JSON header (dtype, shape, data offsets per tensor), then the bytes. Used for
    bfloat16, which NumPy cannot hold and so the NumPy writer cannot write."""
    header: dict[str, Any] = {}
    data = b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [len(data), len(data) + len(raw)],
        }
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


# ---------------------------------------------------------------------------------------------
# What is read
# ---------------------------------------------------------------------------------------------


def test_a_written_folder_loads_back_exactly(
    folder: Path, params: Params, config: GPTConfig
) -> None:
    loaded, read = load_gpt2(folder)
    assert read == config
    assert set(loaded) == set(params)
    for name, value in params.items():
        assert loaded[name].dtype == np.float32
        np.testing.assert_array_equal(loaded[name], value.astype(np.float32))


def test_float64_stays_float64_and_gives_the_references_logits(
    tmp_path: Path, params: Params, config: GPTConfig
) -> None:
    write_folder(tmp_path, params, config, dtype=np.float64)
    loaded, read = load_folder(tmp_path)
    for name, value in params.items():
        assert loaded[name].dtype == np.float64
        np.testing.assert_array_equal(loaded[name], value)
    ids = np.array([[1, 200, 3, 45, 0, 279]])
    ours = tm.forward(tm.tensor_params(loaded), read, ids).to_numpy()
    np.testing.assert_allclose(ours, reference.forward(params, config, ids), atol=1e-12)


@pytest.mark.parametrize("prefix", ["transformer.", ""])
def test_names_load_with_or_without_the_transformer_prefix(
    tmp_path: Path, params: Params, config: GPTConfig, prefix: str
) -> None:
    write_folder(tmp_path, params, config, prefix=prefix)
    loaded, _ = load_folder(tmp_path)
    np.testing.assert_array_equal(
        loaded["h.1.mlp.c_fc.weight"], params["h.1.mlp.c_fc.weight"].astype(np.float32)
    )


def test_float16_loads_as_float32_exactly(
    tmp_path: Path, params: Params, config: GPTConfig
) -> None:
    write_folder(tmp_path, params, config, dtype=np.float16)
    loaded, _ = load_folder(tmp_path)
    for name, value in params.items():
        assert loaded[name].dtype == np.float32
        np.testing.assert_array_equal(loaded[name], value.astype(np.float16).astype(np.float32))


def test_bfloat16_loads_as_float32_exactly(tmp_path: Path, config: GPTConfig) -> None:
    """A bfloat16 is the upper half of a float32: values whose lower 16 bits are zero are exact in
    bfloat16, and must come back bit for bit (signs, zero, infinities, subnormals, extremes)."""
    special = np.array(
        [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, 1e-40, -3e38, 3.3895314e38, 1.1754944e-38],
        dtype=np.float32,
    )
    rng = np.random.default_rng(5)
    values = np.concatenate([special, rng.normal(0, 1, 1000).astype(np.float32)])
    exact = (values.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    upper = (exact.view(np.uint32) >> 16).astype("<u2")
    path = tmp_path / "model.safetensors"
    write_raw_safetensors(
        path,
        {
            "a": ("BF16", [len(exact)], upper.tobytes()),
            "b": ("F32", [2, 2], np.arange(4, dtype="<f4").tobytes()),
            "c": ("BF16", [2, 5], upper[:10].tobytes()),
        },
    )
    loaded = read_safetensors(path)
    assert loaded["a"].dtype == np.float32
    np.testing.assert_array_equal(loaded["a"].view(np.uint32), exact.view(np.uint32))
    np.testing.assert_array_equal(loaded["c"], exact[:10].reshape(2, 5))
    np.testing.assert_array_equal(loaded["b"], np.arange(4, dtype=np.float32).reshape(2, 2))


def test_a_tied_head_and_old_mask_buffers_are_accepted_and_dropped(
    folder: Path, params: Params, config: GPTConfig
) -> None:
    def add(tensors: dict[str, np.ndarray]) -> None:
        tensors["lm_head.weight"] = tensors["transformer.wte.weight"].copy()
        mask = np.tril(np.ones((1, 1, config.n_ctx, config.n_ctx), dtype=bool))
        for i in range(config.n_layer):
            tensors[f"transformer.h.{i}.attn.bias"] = mask
            tensors[f"transformer.h.{i}.attn.masked_bias"] = np.array(-1e4, dtype=np.float32)

    edit_weights(folder, add)
    loaded, _ = load_folder(folder)
    assert set(loaded) == set(params)


def test_config_defaults_are_hugging_faces(folder: Path, config: GPTConfig) -> None:
    edit_config(folder, layer_norm_epsilon=None, activation_function=None, architectures=None)
    assert read_config(folder) == config  # 1e-5 and gelu_new, GPT2Config's defaults
    edit_config(folder, layer_norm_epsilon=1e-6, activation_function="gelu_pytorch_tanh")
    assert read_config(folder).layer_norm_eps == 1e-6


def test_the_tokenizer_is_read_from_the_folder(
    folder: Path, config: GPTConfig, tokenizer: BPETokenizer
) -> None:
    read = load_tokenizer(folder, config)
    assert read.vocab == tokenizer.vocab and read.merges == tokenizer.merges
    text = "The lazy fox keeps a view of the cache."
    assert read.encode(text) == tokenizer.encode(text)
    assert read.decode(read.encode(text)) == text


# ---------------------------------------------------------------------------------------------
# What is refused: a missing file
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_a_missing_model_file_is_named(folder: Path, name: str) -> None:
    (folder / name).unlink()
    with pytest.raises(WeightsError, match=rf"has no {name}"):
        load_gpt2(folder)


def test_a_folder_with_only_pytorch_weights_says_what_it_holds(folder: Path) -> None:
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    with pytest.raises(WeightsError, match=r"has no model\.safetensors.*pytorch_model\.bin"):
        load_gpt2(folder)


@pytest.mark.parametrize("name", ["vocab.json", "merges.txt"])
def test_a_missing_tokenizer_file_is_named(folder: Path, name: str) -> None:
    (folder / name).unlink()
    with pytest.raises(WeightsError, match=rf"has no {name}"):
        load_tokenizer(folder)


def test_no_folder_at_all(tmp_path: Path) -> None:
    with pytest.raises(WeightsError, match="no folder at"):
        load_folder(tmp_path / "absent")


def test_a_safetensors_file_alone_asks_for_its_folder(folder: Path) -> None:
    with pytest.raises(WeightsError, match="pass the folder that holds it"):
        load_gpt2(folder / "model.safetensors")


def test_files_that_are_not_what_their_names_say(folder: Path) -> None:
    (folder / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}......")
    with pytest.raises(WeightsError, match=r"model\.safetensors is not a safetensors file"):
        load_folder(folder)
    (folder / "config.json").write_text("{'n_head': 4")
    with pytest.raises(WeightsError, match=r"config\.json is not JSON"):
        load_folder(folder)
    (folder / "config.json").write_text("[4, 32]")
    with pytest.raises(WeightsError, match=r"config\.json must hold a JSON object"):
        load_folder(folder)


def test_a_malformed_tokenizer_file_is_named_by_the_tokenizer(folder: Path) -> None:
    (folder / "merges.txt").write_text("#version: 0.2\nno_such_symbol x\n")
    with pytest.raises(TokenizerFileError, match=r"merges\.txt"):
        load_tokenizer(folder)


def test_a_vocabulary_larger_than_the_model_is_refused(folder: Path, config: GPTConfig) -> None:
    smaller = GPTConfig(vocab_size=config.vocab_size - 3, n_ctx=24, n_embd=32, n_head=4, n_layer=2)
    with pytest.raises(
        WeightsError,
        match=rf"vocab\.json has {config.vocab_size} tokens.*vocab_size is {smaller.vocab_size}",
    ):
        load_tokenizer(folder, smaller)


# ---------------------------------------------------------------------------------------------
# What is refused: another architecture
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model_type": "llama"}, r"config\.json: model_type is 'llama', not 'gpt2'"),
        ({"model_type": None}, r"config\.json: model_type is None"),
        (
            {"architectures": ["GPT2ForSequenceClassification"]},
            r"config\.json: architectures lists \['GPT2ForSequenceClassification'\]",
        ),
        ({"architectures": "GPT2LMHeadModel"}, r"config\.json: architectures must be a list"),
        ({"activation_function": "gelu"}, r"config\.json: activation_function is 'gelu'"),
        ({"activation_function": "relu"}, r"config\.json: activation_function is 'relu'"),
        ({"scale_attn_weights": False}, r"config\.json: scale_attn_weights is False"),
        (
            {"scale_attn_by_inverse_layer_idx": True},
            r"config\.json: scale_attn_by_inverse_layer_idx is True",
        ),
        (
            {"n_inner": 96},
            r"config\.json: n_inner is 96, but this model's MLP is 4 \* n_embd = 128",
        ),
        ({"tie_word_embeddings": False}, r"config\.json: tie_word_embeddings is False"),
        ({"add_cross_attention": True}, r"config\.json: add_cross_attention is set"),
    ],
)
def test_another_architecture_is_refused_naming_the_field(
    folder: Path, changes: dict[str, Any], message: str
) -> None:
    edit_config(folder, **changes)
    if changes.get("model_type", "x") is None:
        config = json.loads((folder / "config.json").read_text())
        assert "model_type" not in config
    with pytest.raises(WeightsError, match=message):
        load_gpt2(folder)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"n_head": None}, r"config\.json: n_head must be a positive integer, got None"),
        ({"n_embd": 0}, r"config\.json: n_embd must be a positive integer, got 0"),
        ({"n_layer": 2.0}, r"config\.json: n_layer must be a positive integer, got 2\.0"),
        ({"vocab_size": True}, r"config\.json: vocab_size must be a positive integer, got True"),
        ({"n_positions": "24"}, r"config\.json: n_positions must be a positive integer"),
        ({"n_head": 5}, r"config\.json: n_embd = 32 is not a multiple of n_head = 5"),
        ({"layer_norm_epsilon": -1.0}, r"config\.json: layer_norm_epsilon must be a positive"),
        ({"layer_norm_epsilon": "1e-5"}, r"config\.json: layer_norm_epsilon must be a positive"),
    ],
)
def test_a_config_that_gives_no_model_is_refused_naming_the_field(
    folder: Path, changes: dict[str, Any], message: str
) -> None:
    edit_config(folder, **changes)
    with pytest.raises(WeightsError, match=message):
        load_gpt2(folder)


# ---------------------------------------------------------------------------------------------
# What is refused: weights that disagree with the config
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"n_embd": 48},
            r"model\.safetensors: wte\.weight has shape \[\d+, 32\], but config\.json's "
            r"vocab_size and n_embd \(vocab_size=\d+, n_embd=48\) make it \[\d+, 48\]",
        ),
        (
            {"vocab_size": 300},
            r"wte\.weight has shape \[280, 32\], but config\.json's vocab_size and n_embd "
            r"\(vocab_size=300, n_embd=32\)",
        ),
        (
            {"n_positions": 32},
            r"wpe\.weight has shape \[24, 32\], but config\.json's n_positions and n_embd "
            r"\(n_positions=32, n_embd=32\) make it \[32, 32\]",
        ),
        (
            {"n_layer": 1},
            r"model\.safetensors holds 12 tensors this model has no place for.*"
            r"blocks \[1\] are beyond config\.json's n_layer=1",
        ),
        (
            {"n_layer": 3},
            r"model\.safetensors lacks 12 tensors that config\.json \(n_layer=3\) needs: "
            r"\['h\.2\.ln_1\.weight'",
        ),
    ],
)
def test_weights_that_disagree_with_the_config_name_file_and_field(
    folder: Path, changes: dict[str, Any], message: str
) -> None:
    edit_config(folder, **changes)
    with pytest.raises(WeightsError, match=message):
        load_gpt2(folder)


def test_a_wrong_shape_names_the_tensor(folder: Path) -> None:
    def transpose(tensors: dict[str, np.ndarray]) -> None:
        name = "transformer.h.1.attn.c_attn.weight"
        tensors[name] = np.ascontiguousarray(tensors[name].T)

    edit_weights(folder, transpose)
    with pytest.raises(
        WeightsError,
        match=r"h\.1\.attn\.c_attn\.weight has shape \[96, 32\], but config\.json's n_embd "
        r"\(n_embd=32\) make it \[32, 96\]",
    ):
        load_gpt2(folder)


def test_a_missing_tensor_is_named(folder: Path) -> None:
    edit_weights(folder, lambda t: t.pop("transformer.ln_f.bias"))
    with pytest.raises(WeightsError, match=r"lacks 1 tensors .*\['ln_f\.bias'\]"):
        load_gpt2(folder)


def test_another_models_tensor_is_named(folder: Path) -> None:
    def add(tensors: dict[str, np.ndarray]) -> None:
        tensors["score.weight"] = np.zeros((2, 32), np.float32)

    edit_weights(folder, add)
    with pytest.raises(
        WeightsError, match=r"\['score\.weight'\]: they are not parameters of a GPT-2"
    ):
        load_gpt2(folder)


def test_an_untied_head_is_refused(folder: Path) -> None:
    def add(tensors: dict[str, np.ndarray]) -> None:
        tensors["lm_head.weight"] = tensors["transformer.wte.weight"] + np.float32(1e-3)

    edit_weights(folder, add)
    with pytest.raises(WeightsError, match=r"lm_head\.weight .* differs from wte\.weight"):
        load_gpt2(folder)


def test_a_tensor_with_and_without_the_prefix_is_refused(folder: Path) -> None:
    def add(tensors: dict[str, np.ndarray]) -> None:
        tensors["ln_f.weight"] = tensors["transformer.ln_f.weight"]

    edit_weights(folder, add)
    with pytest.raises(WeightsError, match=r"holds 'ln_f\.weight' both with and without"):
        load_gpt2(folder)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_weights_of_a_non_float_dtype_are_refused(folder: Path, dtype: type) -> None:
    def cast(tensors: dict[str, np.ndarray]) -> None:
        tensors["transformer.h.0.ln_1.bias"] = tensors["transformer.h.0.ln_1.bias"].astype(dtype)

    edit_weights(folder, cast)
    with pytest.raises(
        WeightsError, match=r"tensor 'transformer\.h\.0\.ln_1\.bias' is stored as [IU]"
    ):
        load_gpt2(folder)


def test_a_given_head_count_must_be_the_configs(folder: Path, config: GPTConfig) -> None:
    assert load_gpt2(folder, n_head=config.n_head)[1] == config
    with pytest.raises(
        WeightsError, match=r"n_head=8 was given, but .*config\.json records n_head=4"
    ):
        load_gpt2(folder, n_head=8)


def test_write_folder_refuses_params_that_do_not_fit(
    tmp_path: Path, params: Params, config: GPTConfig
) -> None:
    short = dict(params)
    del short["ln_f.bias"]
    with pytest.raises(WeightsError, match=r"missing \['ln_f\.bias'\]"):
        write_folder(tmp_path, short, config)
    wrong = dict(params, **{"wpe.weight": np.zeros((3, 32))})
    with pytest.raises(WeightsError, match=r"wpe\.weight has shape \[3, 32\]"):
        write_folder(tmp_path, wrong, config)
