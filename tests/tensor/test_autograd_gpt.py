"""Autograd through the capstone GPT-2 (:mod:`llmfs.gpt.tensor_model`): one block against
central finite differences in float64, and the whole model's gradients on the shipped weights
against the hand-written NumPy backpropagation of :mod:`llmfs.gpt.train`."""

from __future__ import annotations

import numpy as np
import pytest

import llmfs.tensor as lt
from llmfs.gpt import task, tensor_model, train
from llmfs.gpt.checkpoint import load_tiny_gpt
from llmfs.gpt.model import GPTConfig, Params, init_params
from llmfs.tensor import Tensor, gradcheck

SMALL = GPTConfig(vocab_size=7, n_ctx=4, n_embd=4, n_head=2, n_layer=1)


def random_params(config: GPTConfig, seed: int = 0) -> Params:
    """Parameters of the right shapes with values large enough that every gradient is far from
    0 (GPT-2's initialisation is 0.02 wide; LayerNorm weights near 1)."""
    rng = np.random.default_rng(seed)
    params = {}
    for name, value in init_params(config, seed).items():
        centre = 1.0 if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") else 0.0
        params[name] = centre + 0.5 * rng.standard_normal(value.shape)
    return params


def test_one_block_matches_finite_differences_for_its_input_and_every_weight() -> None:
    params = random_params(SMALL)
    w = tensor_model.tensor_params(params)
    names = sorted(name for name in w if name.startswith("h.0."))
    for name in names:
        w[name].requires_grad_()
    x = Tensor.from_numpy(np.random.default_rng(1).standard_normal((2, 3, 4)), requires_grad=True)
    projection = Tensor.from_numpy(np.random.default_rng(2).standard_normal((2, 3, 4)))

    def block(x: Tensor, *weights: Tensor) -> Tensor:
        named = dict(w, **dict(zip(names, weights)))
        return lt.sum(tensor_model.block(x, named, 0, SMALL) * projection)

    assert gradcheck(block, [x, *(w[name] for name in names)], atol=1e-6)


def test_one_blocks_full_jacobian_for_its_input() -> None:
    w = tensor_model.tensor_params(random_params(SMALL, seed=3))
    x = Tensor.from_numpy(np.random.default_rng(4).standard_normal((1, 3, 4)), requires_grad=True)
    assert gradcheck(lambda x: tensor_model.block(x, w, 0, SMALL), [x], atol=1e-6)


def cross_entropy(logits: lt.Tensor, targets: np.ndarray, weights: np.ndarray) -> lt.Tensor:
    """train.py's loss on llmfs tensors: the weighted mean of -log softmax at the targets."""
    shifted = logits - lt.max(logits, axis=-1, keepdims=True)
    log_probs = shifted - lt.log(lt.sum(lt.exp(shifted), axis=-1, keepdims=True))
    picked = np.zeros(logits.shape)
    np.put_along_axis(picked, targets[..., None], 1.0, axis=-1)
    scale = Tensor.from_numpy(-picked * (weights / weights.sum())[..., None])
    return lt.sum(log_probs * scale)


def test_the_capstones_gradients_equal_train_pys_hand_written_backward() -> None:
    params32, config = load_tiny_gpt()
    params = {name: np.asarray(value, dtype=np.float64) for name, value in params32.items()}
    batch = task.sequences(task.split().train[:6])
    ids, targets = batch[:, :-1], batch[:, 1:]
    weights = train.answer_weights(len(batch))
    expected_loss, expected = train.loss_and_grads(params, config, ids, targets, weights)

    w = tensor_model.tensor_params(params)
    for tensor in w.values():
        tensor.requires_grad_()
    loss = cross_entropy(tensor_model.forward(w, config, ids), targets, weights)
    loss.backward()
    assert loss.item() == pytest.approx(expected_loss, rel=1e-12)
    for name, grad in expected.items():
        got = w[name].grad
        assert got is not None, name
        scale = np.abs(grad).max() + 1e-300
        assert np.abs(got.to_numpy() - grad).max() <= 1e-9 * scale, name
