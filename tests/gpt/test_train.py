"""Training: the hand-written backward pass is the forward pass's true gradient, and a run is
reproducible byte for byte."""

from __future__ import annotations

import json

import numpy as np
import pytest

from llmfs.gpt import reference, train
from llmfs.gpt.checkpoint import save_params, sha256_of, verify_checksum
from llmfs.gpt.model import GPTConfig, init_params, parameter_shapes

SMALL = GPTConfig(vocab_size=12, n_ctx=8, n_embd=8, n_head=2, n_layer=2)


def _perturbed(seed: int) -> dict[str, np.ndarray]:
    # Larger than initial weights, so that every layer's gradient is far from zero.
    params = init_params(SMALL, seed)
    rng = np.random.default_rng(seed + 100)
    return {n: v + rng.normal(0.0, 0.3, v.shape) for n, v in params.items()}


def _batch(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, SMALL.vocab_size, size=(3, SMALL.n_ctx))
    targets = rng.integers(0, SMALL.vocab_size, size=(3, SMALL.n_ctx))
    return ids, targets, rng.random((3, SMALL.n_ctx))


def test_the_training_forward_pass_is_the_reference_forward_pass() -> None:
    params = _perturbed(0)
    ids, _, _ = _batch(0)
    logits, _ = train.forward_with_cache(params, SMALL, ids)
    np.testing.assert_allclose(logits, reference.forward(params, SMALL, ids), rtol=0, atol=1e-12)


def test_gradients_agree_with_central_finite_differences() -> None:
    params = _perturbed(1)
    ids, targets, weights = _batch(1)
    loss, grads = train.loss_and_grads(params, SMALL, ids, targets, weights)
    assert set(grads) == set(parameter_shapes(SMALL))
    rng = np.random.default_rng(2)
    h = 1e-5
    for name, value in params.items():
        assert grads[name].shape == value.shape
        for _ in range(3):
            index = tuple(int(rng.integers(0, n)) for n in value.shape)
            old = value[index]
            value[index] = old + h
            plus, _ = train.loss_and_grads(params, SMALL, ids, targets, weights)
            value[index] = old - h
            minus, _ = train.loss_and_grads(params, SMALL, ids, targets, weights)
            value[index] = old
            numeric = (plus - minus) / (2 * h)
            analytic = grads[name][index]
            assert abs(numeric - analytic) <= 1e-6 * max(1.0, abs(numeric)), (name, index)
    assert np.isfinite(loss)


def test_the_tied_head_gives_the_embedding_its_gradient_twice() -> None:
    # A token that never appears as input still gets a gradient: through the output head.
    params = _perturbed(3)
    ids = np.zeros((2, SMALL.n_ctx), dtype=np.int64)
    targets = np.ones((2, SMALL.n_ctx), dtype=np.int64)
    _, grads = train.loss_and_grads(params, SMALL, ids, targets, np.ones((2, SMALL.n_ctx)))
    assert np.abs(grads["wte.weight"][5]).max() > 0


def test_loss_masks_positions_with_zero_weight() -> None:
    params = _perturbed(4)
    ids, targets, _ = _batch(4)
    weights = np.zeros(ids.shape)
    weights[:, -1] = 1.0
    changed = targets.copy()
    changed[:, 0] = (changed[:, 0] + 1) % SMALL.vocab_size
    first, _ = train.loss_and_grads(params, SMALL, ids, targets, weights)
    second, _ = train.loss_and_grads(params, SMALL, ids, changed, weights)
    assert first == second


def test_the_learning_rate_warms_up_then_decays() -> None:
    cfg = train.TrainConfig(steps=1000, warmup_steps=100, learning_rate=1e-3, min_lr_ratio=0.1)
    assert train.learning_rate(0, cfg) == pytest.approx(1e-5)
    assert train.learning_rate(99, cfg) == pytest.approx(1e-3)
    assert train.learning_rate(999, cfg) == pytest.approx(1e-4, rel=1e-3)


def test_the_same_seed_gives_identical_weight_bytes(tmp_path) -> None:
    cfg = train.TrainConfig(steps=6, batch_size=16, log_every=3, eval_every=6, warmup_steps=2)
    paths = []
    for k in range(2):
        result = train.train(SMALL, cfg)
        paths.append(save_params(result.params, tmp_path / f"run{k}.npz"))
    assert paths[0].read_bytes() == paths[1].read_bytes()
    other = train.train(SMALL, train.TrainConfig(**{**cfg.__dict__, "seed": 1}))
    assert not np.array_equal(other.params["wte.weight"], result.params["wte.weight"])
    assert len(result.losses) == 6 and len(result.curve) == 2 and len(result.accuracy_curve) == 1


def test_the_command_writes_weights_checksum_and_record(tmp_path, capsys) -> None:
    # The figure it would also draw is the one `llmfs figures` draws (tests/widgets).
    out = tmp_path / "model.npz"
    assert train.main(["--out", str(out), "--steps", "2", "--no-figure"]) == 0
    printed = capsys.readouterr().out
    assert "held-out accuracy of the saved weights" in printed
    assert verify_checksum(out) == sha256_of(out)
    record = json.loads(out.with_suffix(".json").read_text())
    assert record["sha256"] == sha256_of(out) and record["train"]["steps"] == 2
    assert [step for step, _ in record["loss_curve"]] == [2]
    assert [step for step, _ in record["held_out_accuracy_curve"]] == [2]
