"""LoRA: a low-rank update beside a frozen weight, in the same forward pass as the base model.

The rules: the adapted layer is ``x @ W + (alpha/r) (x @ A) @ B``; it starts equal to the base
(``B = 0``); ``W`` gets no gradient and a write to it before ``backward()`` is refused as any write
to a saved tensor is; gradients of ``A``, ``B`` and the input equal finite differences (and
PyTorch's, where installed); ``merge`` is a new owner whose forward equals the adapted one to
1e-12 in float64; the count of trainable numbers is ``r * (in + out)`` per layer."""

from __future__ import annotations

import re

import numpy as np
import pytest

import llmfs.tensor as lt
from llmfs.gpt import lora
from llmfs.gpt import tensor_model as tm
from llmfs.gpt.errors import ConfigError, WeightsError
from llmfs.gpt.model import GPT2_SMALL_CONFIG, GPTConfig, init_params, parameter_shapes
from llmfs.gpt.tensor_train import AdamW, cross_entropy
from llmfs.tensor import Tensor
from llmfs.tensor.errors import SavedTensorModifiedError

CONFIG = GPTConfig(vocab_size=23, n_ctx=10, n_embd=16, n_head=4, n_layer=2)
IDS = np.array([[1, 5, 9, 2, 22, 0, 7], [3, 3, 8, 14, 1, 19, 6]])


def weights(dtype: object = np.float64) -> dict[str, Tensor]:
    rng = np.random.default_rng(0)
    params = {n: v + rng.normal(0, 0.1, v.shape) for n, v in init_params(CONFIG, 0).items()}
    return tm.tensor_params(params, dtype)


def randomize(tensor: Tensor, seed: int, scale: float = 0.5) -> None:
    """Writes random values into ``tensor`` (as a trained ``B`` would hold)."""
    values = np.random.default_rng(seed).normal(0, scale, tensor.shape)
    lt.copyto(tensor, Tensor.from_numpy(values, dtype=tensor.dtype))


def trained(w: dict[str, Tensor], which: tuple[str, ...] = lora.BLOCK_LINEARS) -> lora.LoRAParams:
    adapted = lora.adapt(w, lora.layer_names(CONFIG.n_layer, which), rank=3, alpha=6.0, seed=4)
    for k, adapter in enumerate(adapted.adapters.values()):
        randomize(adapter.B, 100 + k)
    return adapted


# ---------------------------------------------------------------------------------------------
# The forward pass
# ---------------------------------------------------------------------------------------------


def test_the_adapted_model_starts_equal_to_the_base() -> None:
    w = weights()
    base = tm.forward(w, CONFIG, IDS).to_numpy()
    adapted = lora.adapt(w, lora.layer_names(CONFIG.n_layer, lora.BLOCK_LINEARS), 4, 8.0)
    for adapter in adapted.adapters.values():
        assert not np.any(adapter.B.to_numpy()) and np.any(adapter.A.to_numpy())
    np.testing.assert_array_equal(tm.forward(adapted, CONFIG, IDS).to_numpy(), base)
    np.testing.assert_array_equal(
        tm.generate(adapted, CONFIG, IDS, 3), tm.generate(w, CONFIG, IDS, 3)
    )


def test_the_layer_is_w_x_plus_the_scaled_low_rank_term() -> None:
    rng = np.random.default_rng(1)
    weight = Tensor.from_numpy(rng.normal(size=(6, 5)))
    adapter = lora.LoRA(weight, rank=2, alpha=3.0, seed=7)
    randomize(adapter.B, 2)
    x = rng.normal(size=(4, 3, 6))
    a, b = adapter.A.to_numpy(), adapter.B.to_numpy()
    assert a.shape == (6, 2) and b.shape == (2, 5) and adapter.scale == 1.5
    expected = x @ weight.to_numpy() + 1.5 * ((x @ a) @ b)
    np.testing.assert_allclose(adapter(Tensor.from_numpy(x)).to_numpy(), expected, atol=1e-13)
    # The paper's column-vector form W' x + (alpha/r) B' A' x with W' = W^T, A' = A^T, B' = B^T.
    column = weight.to_numpy().T @ x[0, 0] + 1.5 * (b.T @ (a.T @ x[0, 0]))
    np.testing.assert_allclose(adapter(Tensor.from_numpy(x)).to_numpy()[0, 0], column, atol=1e-13)


def test_a_is_seeded_and_bounded_by_one_over_sqrt_fan_in() -> None:
    weight = Tensor.from_numpy(np.zeros((64, 8)))
    first, again = lora.LoRA(weight, 4, 1.0, seed=3), lora.LoRA(weight, 4, 1.0, seed=3)
    np.testing.assert_array_equal(first.A.to_numpy(), again.A.to_numpy())
    assert np.abs(first.A.to_numpy()).max() <= 1 / 8
    assert not np.array_equal(first.A.to_numpy(), lora.LoRA(weight, 4, 1.0, seed=4).A.to_numpy())
    assert first.A.dtype == first.B.dtype == weight.dtype


def test_only_the_adapted_layers_change_the_output() -> None:
    w = weights()
    base = tm.forward(w, CONFIG, IDS).to_numpy()
    adapted = trained(w, ("attn.c_attn",))
    assert sorted(adapted.adapters) == ["h.0.attn.c_attn", "h.1.attn.c_attn"]
    assert np.abs(tm.forward(adapted, CONFIG, IDS).to_numpy() - base).max() > 1e-3


# ---------------------------------------------------------------------------------------------
# Merging
# ---------------------------------------------------------------------------------------------


def test_merge_equals_the_adapted_forward_to_1e12_in_float64() -> None:
    w = weights()
    adapted = trained(w)
    merged = adapted.merged()
    ours = tm.forward(adapted, CONFIG, IDS).to_numpy()
    assert np.abs(tm.forward(merged, CONFIG, IDS).to_numpy() - ours).max() < 1e-12
    assert np.abs(ours - tm.forward(w, CONFIG, IDS).to_numpy()).max() > 1e-2  # it did change
    np.testing.assert_array_equal(
        tm.generate(merged, CONFIG, IDS, 3), tm.generate(adapted, CONFIG, IDS, 3)
    )


def test_merge_is_a_new_owner_and_leaves_the_base_alone() -> None:
    w = weights()
    before = {n: t.to_numpy() for n, t in w.items()}
    adapted = trained(w)
    merged = adapted.merged()
    for name, adapter in adapted.adapters.items():
        new = merged[name + ".weight"]
        assert isinstance(new, Tensor) and new is not adapter.base
        assert not new.requires_grad
        expected = before[name + ".weight"] + adapter.scale * (
            adapter.A.to_numpy() @ adapter.B.to_numpy()
        )
        np.testing.assert_allclose(new.to_numpy(), expected, atol=1e-15)
        lt.copyto(new, 0.0)  # its own storage: the base does not see the write
    for name, tensor in w.items():
        np.testing.assert_array_equal(tensor.to_numpy(), before[name])
    for name in w:
        if not name.endswith(".weight") or name[: -len(".weight")] not in adapted.adapters:
            assert merged[name] is w[name]  # the rest is the same owner, not a copy


# ---------------------------------------------------------------------------------------------
# Gradients and the frozen base
# ---------------------------------------------------------------------------------------------


def test_layer_gradients_equal_finite_differences() -> None:
    rng = np.random.default_rng(3)
    weight = Tensor.from_numpy(rng.normal(size=(5, 4)))
    adapter = lora.LoRA(weight, rank=2, alpha=5.0, seed=1)
    randomize(adapter.B, 9)
    x = Tensor.from_numpy(rng.normal(size=(3, 5)), requires_grad=True)
    assert lt.gradcheck(lambda x, a, b: lt.tanh(adapter(x)), [x, adapter.A, adapter.B])


def test_model_gradients_equal_finite_differences() -> None:
    w = weights()
    adapted = trained(w, ("attn.c_attn", "mlp.c_proj"))
    targets = np.roll(IDS, -1, axis=1)
    mask = np.ones(IDS.shape)
    chosen = adapted.adapters["h.0.attn.c_attn"]

    def loss(a: Tensor, b: Tensor) -> Tensor:
        return cross_entropy(tm.forward(adapted, CONFIG, IDS), targets, mask)

    assert lt.gradcheck(loss, [chosen.A, chosen.B], atol=1e-7)


def test_the_base_gets_no_gradient_and_only_adapters_are_trainable() -> None:
    w = weights()
    for tensor in w.values():
        tensor.requires_grad_()
    adapted = trained(w)
    assert not any(t.requires_grad for t in w.values())  # adapt froze the base model
    trainable = adapted.trainable()
    assert sorted(trainable) == sorted(
        f"{n}.lora_{m}" for n in adapted.adapters for m in ("A", "B")
    )
    loss = cross_entropy(
        tm.forward(adapted, CONFIG, IDS), np.roll(IDS, -1, axis=1), np.ones(IDS.shape)
    )
    loss.backward()
    assert all(t.grad is None for t in w.values())
    assert all(t.grad is not None and np.any(t.grad.to_numpy()) for t in trainable.values())


def test_a_base_that_requires_grad_still_gets_none_through_the_adapter() -> None:
    weight = Tensor.from_numpy(np.ones((3, 2)), requires_grad=True)
    adapter = lora.LoRA(weight, 1, 1.0)
    x = Tensor.from_numpy(np.ones((4, 3)), requires_grad=True)
    lt.sum(adapter(x)).backward()
    assert weight.grad is None and x.grad is not None and adapter.B.grad is not None


def test_a_write_to_the_base_before_backward_is_refused() -> None:
    rng = np.random.default_rng(5)
    weight = Tensor.from_numpy(rng.normal(size=(4, 4)))
    adapter = lora.LoRA(weight, 2, 2.0)
    x = Tensor.from_numpy(rng.normal(size=(2, 4)), requires_grad=True)
    loss = lt.sum(adapter(x) * adapter(x))
    lt.copyto(weight, 0.0)
    with pytest.raises(SavedTensorModifiedError, match="written after matmul ran"):
        loss.backward()


def test_a_write_to_a_models_base_weight_mid_step_is_refused_and_after_it_is_not() -> None:
    w = weights()
    adapted = trained(w)
    targets, mask = np.roll(IDS, -1, axis=1), np.ones(IDS.shape)
    loss = cross_entropy(tm.forward(adapted, CONFIG, IDS), targets, mask)
    lt.copyto(w["h.1.mlp.c_fc.weight"], w["h.1.mlp.c_fc.weight"] * 1.0)
    with pytest.raises(SavedTensorModifiedError):
        loss.backward()
    # After a step, a write is an ordinary edit: the next forward reads the new values.
    loss = cross_entropy(tm.forward(adapted, CONFIG, IDS), targets, mask)
    loss.backward()
    lt.copyto(w["h.1.mlp.c_fc.weight"], 0.0)
    after = tm.forward(adapted, CONFIG, IDS).to_numpy()
    assert np.all(np.isfinite(after))


def test_fine_tuning_moves_only_the_adapters_and_lowers_the_loss() -> None:
    w = weights()
    before = {n: t.to_numpy() for n, t in w.items()}
    adapted = lora.adapt(w, lora.layer_names(CONFIG.n_layer), rank=2, alpha=4.0)
    optimizer = AdamW(adapted.trainable(), lr=3e-2, weight_decay=0.0)
    targets, mask = np.roll(IDS, -1, axis=1), np.ones(IDS.shape)
    losses = []
    for _ in range(15):
        optimizer.zero_grad()
        loss = cross_entropy(tm.forward(adapted, CONFIG, IDS), targets, mask)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.to_numpy()))
    assert losses[-1] < 0.8 * losses[0]
    for name, tensor in w.items():
        np.testing.assert_array_equal(tensor.to_numpy(), before[name])


def test_the_kv_cache_runs_the_adapters_too() -> None:
    adapted = trained(weights())
    cached = tm.generate(adapted, CONFIG, IDS[:, :4], 9)  # slides past n_ctx = 10
    np.testing.assert_array_equal(
        cached, tm.generate(adapted, CONFIG, IDS[:, :4], 9, kv_cache=False)
    )


def test_float32_adapters_stay_float32() -> None:
    adapted = trained(weights(np.float32))
    assert all(t.dtype == np.float32 for t in adapted.trainable().values())
    assert tm.forward(adapted, CONFIG, IDS).dtype == np.float32
    assert all(t.dtype == np.float32 for t in adapted.merged().values())


# ---------------------------------------------------------------------------------------------
# Counting
# ---------------------------------------------------------------------------------------------


def test_the_trainable_count_is_r_times_in_plus_out() -> None:
    weight = Tensor.from_numpy(np.zeros((768, 2304), np.float32))
    adapter = lora.LoRA(weight, 8, 16.0)
    assert adapter.trainable_parameters() == 8 * (768 + 2304) == 24_576
    assert "trainable=24576 of 1769472" in repr(adapter)


def test_the_count_for_gpt2_smalls_attention_is_the_sum_of_the_adapters_sizes() -> None:
    config = GPT2_SMALL_CONFIG
    shapes = parameter_shapes(config)
    w = {
        name: Tensor.zeros(shape, dtype=np.float32)
        for name, shape in shapes.items()
        if name.startswith("h.") and ".attn." in name
    }
    adapted = lora.adapt(w, lora.layer_names(config.n_layer), rank=8, alpha=16.0)
    sizes = sum(int(np.prod(t.shape)) for t in adapted.trainable().values())
    assert adapted.trainable_parameters() == sizes == 12 * 8 * ((768 + 2304) + (768 + 768))


# ---------------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rank", [0, -1, 2.5, True, "4", None])
def test_a_rank_that_is_not_a_positive_int_is_refused(rank: object) -> None:
    with pytest.raises(ConfigError, match="the LoRA rank must be a positive int"):
        lora.LoRA(Tensor.from_numpy(np.zeros((3, 3))), rank, 1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("alpha", [0, -2.0, float("nan"), float("inf"), "8", None, False])
def test_an_alpha_that_is_not_a_positive_number_is_refused(alpha: object) -> None:
    with pytest.raises(ConfigError, match="the LoRA alpha must be a positive finite number"):
        lora.LoRA(Tensor.from_numpy(np.zeros((3, 3))), 1, alpha)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("weight", "shown"),
    [
        (Tensor.from_numpy(np.zeros(3)), "a float64 tensor of shape [3]"),
        (Tensor.from_numpy(np.zeros((2, 2, 2))), "a float64 tensor of shape [2, 2, 2]"),
        (Tensor.from_numpy(np.zeros((2, 2), np.int64)), "a int64 tensor of shape [2, 2]"),
        (
            Tensor.from_numpy(np.zeros((2, 3))).T,
            "a view of shape [3, 2] (adapt the weight's owner)",
        ),
        (np.zeros((2, 2)), "ndarray"),
    ],
)
def test_a_weight_that_is_not_a_2d_float_owner_is_refused(weight: object, shown: str) -> None:
    with pytest.raises(
        WeightsError, match=re.escape(f"LoRA adapts a 2-D float Tensor (an owner), got {shown}")
    ):
        lora.LoRA(weight, 1, 1.0)  # type: ignore[arg-type]


def test_adapt_refuses_unknown_and_repeated_layers() -> None:
    w = weights()
    with pytest.raises(WeightsError, match=r"the weights have no 'h\.2\.attn\.c_attn\.weight'"):
        lora.adapt(w, ["h.2.attn.c_attn"], 2, 2.0)
    with pytest.raises(WeightsError, match=r"layer 'h\.0\.mlp\.c_fc' is given twice"):
        lora.adapt(w, ["h.0.mlp.c_fc", "h.0.mlp.c_fc"], 2, 2.0)
    with pytest.raises(ConfigError, match=r"\['attn\.c_q'\] are not linear layers of a block"):
        lora.layer_names(2, ["attn.c_q"])


def test_an_adapter_must_adapt_the_weight_it_is_filed_under() -> None:
    w = weights()
    stray = lora.LoRA(Tensor.from_numpy(np.zeros((16, 48))), 1, 1.0)
    with pytest.raises(WeightsError, match=r"the adapter of 'h\.0\.attn\.c_attn' must adapt"):
        lora.LoRAParams(w, {"h.0.attn.c_attn": stray})


# ---------------------------------------------------------------------------------------------
# PyTorch, where installed
# ---------------------------------------------------------------------------------------------


def test_gradients_equal_pytorchs() -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed (not a dependency)")
    rng = np.random.default_rng(8)
    w1, w2 = rng.normal(size=(6, 8)), rng.normal(size=(8, 5))
    x_np, target = rng.normal(size=(2, 3, 6)), rng.normal(size=(2, 3, 5))
    first = lora.LoRA(Tensor.from_numpy(w1), 3, 6.0, seed=1)
    second = lora.LoRA(Tensor.from_numpy(w2), 2, 1.0, seed=2)
    for k, adapter in enumerate((first, second)):
        randomize(adapter.B, 20 + k)
    x = Tensor.from_numpy(x_np, requires_grad=True)
    out = second(tm.gelu(first(x)))
    loss = lt.sum((out - Tensor.from_numpy(target)) * (out - Tensor.from_numpy(target)))
    loss.backward()

    def t(a: np.ndarray, grad: bool = False) -> object:
        return torch.tensor(a, dtype=torch.float64, requires_grad=grad)

    tx = t(x_np, True)
    ta = [t(a.A.to_numpy(), True) for a in (first, second)]
    tb = [t(a.B.to_numpy(), True) for a in (first, second)]
    hidden = torch.nn.functional.gelu(
        tx @ t(w1) + first.scale * ((tx @ ta[0]) @ tb[0]), approximate="tanh"
    )
    tout = hidden @ t(w2) + second.scale * ((hidden @ ta[1]) @ tb[1])
    ((tout - t(target)) ** 2).sum().backward()
    np.testing.assert_allclose(out.to_numpy(), tout.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(x.grad.to_numpy(), tx.grad.numpy(), atol=1e-10)
    for k, adapter in enumerate((first, second)):
        np.testing.assert_allclose(adapter.A.grad.to_numpy(), ta[k].grad.numpy(), atol=1e-10)
        np.testing.assert_allclose(adapter.B.grad.to_numpy(), tb[k].grad.numpy(), atol=1e-10)
