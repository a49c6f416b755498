"""Checkpoints: byte-reproducible .npz files, the shipped weights pinned by their checksum,
and the model they hold adding numbers it has never seen (accuracy computed here, not read)."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from llmfs.gpt import checkpoint, reference, task
from llmfs.gpt.checkpoint import (
    TINY_GPT_PATH,
    TINY_GPT_RECORD_PATH,
    TINY_GPT_SHA256_PATH,
    HeadCountUnverifiedWarning,
    load_gpt2,
    load_params,
    load_tiny_gpt,
    save_params,
    sha256_of,
    verify_checksum,
    write_checksum,
)
from llmfs.gpt.errors import ChecksumMismatchError, ConfigError, WeightsError
from llmfs.gpt.model import TINY_CONFIG, GPTConfig, count_parameters, init_params, parameter_shapes
from llmfs.gpt.train import TrainConfig


def test_the_shipped_file_matches_its_checksum_and_is_small() -> None:
    recorded = TINY_GPT_SHA256_PATH.read_text().split()
    assert recorded[1] == "tiny_gpt.npz"
    assert sha256_of(TINY_GPT_PATH) == recorded[0]
    assert TINY_GPT_PATH.stat().st_size < 1_000_000


def test_the_shipped_weights_answer_held_out_problems() -> None:
    params, config = load_tiny_gpt()
    assert config == TINY_CONFIG
    assert {v.dtype for v in params.values()} == {np.dtype(np.float32)}
    held_out = task.split().held_out
    assert reference.accuracy(params, config, held_out) >= 0.98


def test_the_shipped_model_writes_a_carry() -> None:
    params, config = load_tiny_gpt()
    assert reference.solve(params, config, 99, 99) == "891"
    assert reference.solve(params, config, 0, 0) == "000"


def test_a_changed_file_is_refused_with_both_digests(tmp_path: Path) -> None:
    copy = tmp_path / "tiny_gpt.npz"
    shutil.copy(TINY_GPT_PATH, copy)
    shutil.copy(TINY_GPT_SHA256_PATH, tmp_path / "tiny_gpt.sha256")
    data = bytearray(copy.read_bytes())
    data[-100] ^= 1
    copy.write_bytes(bytes(data))
    with pytest.raises(ChecksumMismatchError, match=r"tiny_gpt\.npz has SHA-256") as info:
        load_tiny_gpt(copy)
    assert isinstance(info.value, ValueError)
    assert sha256_of(copy) in str(info.value)


def test_missing_files_are_weights_errors(tmp_path: Path) -> None:
    with pytest.raises(WeightsError, match="no file at"):
        verify_checksum(tmp_path / "absent.npz")
    with pytest.raises(WeightsError, match="no weights file at"):
        load_params(tmp_path / "absent.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(WeightsError, match=r"is not an \.npz of plain arrays"):
        load_params(tmp_path / "junk.npz")


def test_saving_is_byte_reproducible_and_round_trips(tmp_path: Path) -> None:
    config = GPTConfig(vocab_size=12, n_ctx=8, n_embd=8, n_head=2, n_layer=1)
    params = init_params(config, 0)
    a = save_params(params, tmp_path / "a.npz", dtype=np.float64)
    b = save_params(dict(reversed(params.items())), tmp_path / "b.npz", dtype=np.float64)
    assert a.read_bytes() == b.read_bytes()
    loaded = load_params(a)
    assert all(np.array_equal(loaded[n], params[n]) for n in params)
    checksum = write_checksum(a)
    assert verify_checksum(a, checksum) == sha256_of(a)


def _fake_gpt2(config: GPTConfig) -> dict[str, np.ndarray]:
    """A GPT-2 state dict as Hugging Face names it, with random values."""
    params = init_params(config, 5)
    sd = {f"transformer.{n}": v for n, v in params.items()}
    sd["lm_head.weight"] = params["wte.weight"]
    for i in range(config.n_layer):
        sd[f"transformer.h.{i}.attn.bias"] = np.tril(np.ones((1, 1, config.n_ctx, config.n_ctx)))
    return sd


def test_gpt2_weights_from_a_local_file_map_to_the_same_names(tmp_path: Path) -> None:
    config = GPTConfig(vocab_size=50, n_ctx=16, n_embd=24, n_head=3, n_layer=2)
    path = tmp_path / "gpt2.npz"
    np.savez(path, **_fake_gpt2(config))
    with pytest.warns(HeadCountUnverifiedWarning, match="n_head=3 is taken as given"):
        params, loaded = load_gpt2(path, n_head=3)
    assert loaded == config
    assert set(params) == set(parameter_shapes(config))
    logits = reference.forward(params, loaded, np.array([1, 2, 3]))
    assert logits.shape == (3, 50)


def test_an_untied_head_or_a_missing_file_is_refused(tmp_path: Path) -> None:
    config = GPTConfig(vocab_size=50, n_ctx=16, n_embd=24, n_head=3, n_layer=1)
    sd = _fake_gpt2(config)
    sd["lm_head.weight"] = sd["lm_head.weight"] + 1.0
    np.savez(tmp_path / "untied.npz", n_head=3, **sd)
    with pytest.raises(WeightsError, match=r"lm_head\.weight differs from wte\.weight"):
        load_gpt2(tmp_path / "untied.npz")
    with pytest.raises(WeightsError, match="no weights file at"):
        load_gpt2(tmp_path / "absent.npz")


HEADS_CONFIG = GPTConfig(vocab_size=50, n_ctx=16, n_embd=24, n_head=3, n_layer=2)


def test_a_wrong_head_count_runs_silently_and_gives_other_logits() -> None:
    # Why load_gpt2 checks n_head: the shapes are the same for every split of n_embd.
    params = {n: v + 0.2 for n, v in _params_with_noise(HEADS_CONFIG).items()}
    other = GPTConfig(vocab_size=50, n_ctx=16, n_embd=24, n_head=2, n_layer=2)
    ids = np.array([1, 2, 3, 4, 5])
    right, wrong = (
        reference.forward(params, HEADS_CONFIG, ids),
        reference.forward(params, other, ids),
    )
    assert np.abs(right - wrong).max() > 1e-3


def _params_with_noise(config: GPTConfig) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {n: v + rng.normal(0, 0.3, v.shape) for n, v in init_params(config, 2).items()}


def test_the_files_own_head_count_decides_and_a_different_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "gpt2.npz"
    np.savez(path, n_head=3, **_fake_gpt2(HEADS_CONFIG))
    assert load_gpt2(path)[1] == HEADS_CONFIG
    assert load_gpt2(path, n_head=3)[1] == HEADS_CONFIG
    with pytest.raises(WeightsError, match=r"n_head=2 was given, but the file's 'n_head' member"):
        load_gpt2(path, n_head=2)
    np.savez(path, n_head=np.array([3, 3]), **_fake_gpt2(HEADS_CONFIG))
    with pytest.raises(WeightsError, match=r"member 'n_head' must be one int"):
        load_gpt2(path)


def test_a_hugging_face_config_beside_the_file_decides(tmp_path: Path) -> None:
    path = tmp_path / "gpt2.npz"
    np.savez(path, **_fake_gpt2(HEADS_CONFIG))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_head": 3}))
    assert load_gpt2(path)[1] == HEADS_CONFIG
    with pytest.raises(
        WeightsError, match=r"n_head=6 was given, but .*config\.json records n_head=3"
    ):
        load_gpt2(path, n_head=6)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(WeightsError, match=r"config\.json is not a JSON config"):
        load_gpt2(path)


def test_published_gpt2_shapes_fix_the_head_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The published sizes are large; the rule is the same for a small shape added to the table.
    monkeypatch.setitem(checkpoint.GPT2_HEADS, (24, 2), 3)
    path = tmp_path / "gpt2.npz"
    np.savez(path, **_fake_gpt2(HEADS_CONFIG))
    assert load_gpt2(path)[1] == HEADS_CONFIG
    with pytest.raises(WeightsError, match=r"weights of GPT-2's shape .* have n_head=3"):
        load_gpt2(path, n_head=2)
    assert checkpoint.GPT2_HEADS[(768, 12)] == 12 and checkpoint.GPT2_HEADS[(1600, 48)] == 25


def test_an_unverifiable_head_count_is_used_with_a_warning_and_a_missing_one_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "gpt2.npz"
    np.savez(path, **_fake_gpt2(HEADS_CONFIG))
    with pytest.warns(HeadCountUnverifiedWarning, match=r"no 'n_head' member and no config\.json"):
        assert load_gpt2(path, n_head=3)[1] == HEADS_CONFIG
    with pytest.raises(WeightsError, match=r"cannot be read from its shapes .* pass n_head="):
        load_gpt2(path)
    with pytest.raises(ConfigError), pytest.warns(HeadCountUnverifiedWarning):
        load_gpt2(path, n_head=5)  # 5 does not divide 24


GPT2_FILE = os.environ.get("LLMFS_GPT2_NPZ", "")


@pytest.mark.skipif(
    not GPT2_FILE or not Path(GPT2_FILE).is_file(),
    reason="set LLMFS_GPT2_NPZ to a local .npz of GPT-2 small weights to run (never downloaded)",
)
def test_local_gpt2_small_weights_run_through_the_same_forward_pass() -> None:
    params, config = load_gpt2(GPT2_FILE)
    assert config.n_layer == 12 and config.n_embd == 768
    logits = reference.forward(params, config, np.array([15496, 11, 995]))  # "Hello, world"
    assert logits.shape == (3, config.vocab_size) and np.isfinite(logits).all()


def test_the_training_record_describes_the_shipped_file_and_the_script_defaults() -> None:
    record = json.loads(TINY_GPT_RECORD_PATH.read_text())
    assert record["sha256"] == sha256_of(TINY_GPT_PATH)
    assert record["model"] == asdict(TINY_CONFIG)
    assert record["train"] == asdict(TrainConfig())
    assert record["parameters"] == count_parameters(TINY_CONFIG)
    assert record["loss_curve"][-1][0] == TrainConfig().steps
