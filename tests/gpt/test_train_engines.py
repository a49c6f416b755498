"""The two training engines run one experiment: the tensor engine (llmfs.tensor autograd,
:mod:`llmfs.gpt.tensor_train`) is held to the NumPy engine (backpropagation by hand,
:mod:`llmfs.gpt.train`) loss for loss; its loss and its optimiser are specified on their own."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llmfs.tensor as lt
from llmfs.gpt import experiment, task, tensor_train, train
from llmfs.gpt.errors import ConfigError, TaskError
from llmfs.gpt.model import TINY_CONFIG, GPTConfig, init_params
from llmfs.tensor import Tensor

# Seconds in all (two engines trained side by side for hundreds of steps): the file is scheduled
# early (conftest.py).
pytestmark = pytest.mark.slow

SMALL = GPTConfig(vocab_size=12, n_ctx=8, n_embd=8, n_head=2, n_layer=2)


def test_in_float64_the_engines_log_the_same_losses_for_200_steps() -> None:
    # The shipped model and schedule (warm-up, cosine decay, AdamW) with a batch of 32 instead of
    # 128 so that 200 real steps stay cheap; every step's loss is compared, not only the logged
    # means. The two differ in rounding only (autograd sums gradient terms in its own order).
    cfg = train.TrainConfig(steps=200, batch_size=32, log_every=25, eval_every=200)
    held_out = task.split().held_out[:32]
    numpy_run = train.train(TINY_CONFIG, cfg, held_out=held_out)
    tensor_run = tensor_train.train(TINY_CONFIG, cfg, held_out=held_out)
    ours, theirs = np.array(tensor_run.losses), np.array(numpy_run.losses)
    assert len(ours) == len(theirs) == 200
    np.testing.assert_allclose(ours, theirs, rtol=1e-8, atol=0)
    assert [s for s, _ in tensor_run.curve] == [s for s, _ in numpy_run.curve]
    np.testing.assert_allclose(
        [v for _, v in tensor_run.curve], [v for _, v in numpy_run.curve], rtol=1e-8, atol=0
    )
    assert tensor_run.accuracy_curve == numpy_run.accuracy_curve
    # It learned something: the loss fell well below ln(12), the loss of a uniform guess.
    assert theirs[-25:].mean() < 0.7 * math.log(12)


def test_the_engines_draw_the_same_batches_in_the_same_order() -> None:
    data = np.arange(40).reshape(20, 2)
    cfg = train.TrainConfig(steps=5, batch_size=3, seed=7)
    first, second = list(experiment.batches(data, cfg)), list(experiment.batches(data, cfg))
    assert len(first) == 5 and all(np.array_equal(a, b) for a, b in zip(first, second))
    other = list(experiment.batches(data, train.TrainConfig(steps=5, batch_size=3, seed=8)))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))


# ----------------------------------------------------------------------------------------------
# The loss
# ----------------------------------------------------------------------------------------------


def _numpy_cross_entropy(logits: np.ndarray, targets: np.ndarray, weights: np.ndarray) -> float:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
    return float(-(picked * weights).sum() / weights.sum())


def test_uniform_logits_cost_ln_of_the_vocabulary_size() -> None:
    logits = Tensor.zeros((2, 3, 12))
    targets = np.array([[0, 5, 11], [3, 3, 3]])
    loss = tensor_train.cross_entropy(logits, targets, np.ones((2, 3)))
    assert loss.item() == pytest.approx(math.log(12), rel=1e-15)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    scale=st.sampled_from([1e-3, 1.0, 50.0, 1e4]),
    shape=st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(2, 7)),
)
def test_cross_entropy_and_its_gradient_for_any_logits_even_huge(
    seed: int, scale: float, shape: tuple[int, int, int]
) -> None:
    # Logits of 1e4 overflow a naive exp; log-sum-exp keeps every term at most 1.
    rng = np.random.default_rng(seed)
    logits = scale * rng.standard_normal(shape)
    targets = rng.integers(0, shape[2], size=shape[:2])
    weights = rng.integers(0, 2, size=shape[:2]).astype(np.float64)
    weights.reshape(-1)[0] = 1.0
    x = Tensor.from_numpy(logits, requires_grad=True)
    loss = tensor_train.cross_entropy(x, targets, weights)
    expected = _numpy_cross_entropy(logits, targets, weights)
    assert np.isfinite(loss.item())
    assert loss.item() == pytest.approx(expected, rel=1e-12, abs=1e-12)
    loss.backward()
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    onehot = np.zeros(shape)
    np.put_along_axis(onehot, targets[..., None], 1.0, axis=-1)
    grad = (probs - onehot) * (weights / weights.sum())[..., None]
    assert x.grad is not None
    np.testing.assert_allclose(x.grad.to_numpy(), grad, rtol=1e-10, atol=1e-14)


def _composed_cross_entropy(logits: Tensor, targets: np.ndarray, weights: np.ndarray) -> Tensor:
    # The loss written out of recorded ops: log_softmax times a dense one-hot of the scales
    # (-0.0 elsewhere), summed; autograd walks every op of it.
    dtype = np.dtype(logits.dtype.name)
    scale = np.full(tuple(logits.shape), -0.0, dtype=dtype)
    at_target = (-(weights / weights.sum())).astype(dtype)[..., None]
    np.put_along_axis(scale, targets[..., None], at_target, axis=-1)
    return lt.sum(tensor_train.log_softmax(logits, -1) * Tensor.from_numpy(scale, dtype=dtype))


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    dtype=st.sampled_from([np.float32, np.float64]),
    shape=st.tuples(st.integers(1, 4), st.integers(1, 5), st.integers(2, 40)),
    transposed=st.booleans(),
)
def test_the_one_op_loss_has_the_gradient_of_the_loss_written_out_value_for_value(
    seed: int, dtype: type, shape: tuple[int, int, int], transposed: bool
) -> None:
    # cross_entropy is one recorded op: its backward must give the gradient autograd gives the
    # composition, the same floats (zeros aside, whose sign is not compared), also through a view
    # of the logits and added to a gradient already there.
    rng = np.random.default_rng(seed)
    b, t, v = shape
    targets = rng.integers(0, v, size=(b, t))
    weights = rng.integers(0, 2, size=(b, t)).astype(np.float64)
    weights.reshape(-1)[0] = 1.0
    base = (rng.standard_normal((b, v, t) if transposed else shape) * 20).astype(dtype)
    grads, losses = [], []
    for loss_of in (tensor_train.cross_entropy, _composed_cross_entropy):
        x = Tensor.from_numpy(base, requires_grad=True)
        logits = x.transpose(1, 2) if transposed else x
        for _ in range(2):  # twice: the second gradient adds to the first
            loss = loss_of(logits, targets, weights)
            loss.backward()
        losses.append(loss.item())
        assert x.grad is not None
        grads.append(x.grad.to_numpy())
    assert grads[0].dtype == grads[1].dtype == np.dtype(dtype)
    np.testing.assert_array_equal(grads[0], grads[1])
    # The loss sums the same positive terms in another order: rounding apart, equal.
    assert losses[0] == pytest.approx(losses[1], rel=float(32 * np.finfo(dtype).eps))


def test_log_softmax_is_normalised_and_finite_at_minus_infinity_free_extremes() -> None:
    x = Tensor.from_numpy(np.array([[1000.0, 0.0, -1000.0], [3.0, 3.0, 3.0]]))
    out = tensor_train.log_softmax(x).to_numpy()
    assert np.isfinite(out).all()
    np.testing.assert_allclose(np.exp(out).sum(axis=-1), [1.0, 1.0], rtol=1e-15)
    assert out[0, 0] == 0.0 and out[1, 0] == pytest.approx(-math.log(3))


@pytest.mark.parametrize(
    ("targets", "weights", "needle"),
    [
        (np.zeros((2, 2), dtype=np.int64), np.ones((2, 3)), "leading shape [2, 3]"),
        (np.zeros((2, 3), dtype=np.int64), np.ones((3, 2)), "weights [3, 2]"),
        (np.full((2, 3), 5), np.ones((2, 3)), "outside 0..4"),
        (np.full((2, 3), -1), np.ones((2, 3)), "outside 0..4"),
        (np.zeros((2, 3)), np.ones((2, 3)), "integer token ids"),
        (np.zeros((2, 3), dtype=np.int64), np.zeros((2, 3)), "positive number, got 0.0"),
    ],
)
def test_cross_entropy_refuses_what_it_cannot_average(
    targets: np.ndarray, weights: np.ndarray, needle: str
) -> None:
    with pytest.raises(TaskError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        tensor_train.cross_entropy(Tensor.zeros((2, 3, 5)), targets, weights)


# ----------------------------------------------------------------------------------------------
# The optimiser
# ----------------------------------------------------------------------------------------------


def _leaves(values: dict[str, np.ndarray]) -> dict[str, Tensor]:
    return {n: Tensor.from_numpy(v, requires_grad=True) for n, v in values.items()}


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 4))
def test_adamw_is_the_numpy_engines_update_bit_for_bit(seed: int, steps: int) -> None:
    rng = np.random.default_rng(seed)
    names = ["h.0.attn.c_attn.weight", "h.0.ln_1.weight", "wte.weight", "h.1.mlp.c_fc.bias"]
    values = {n: rng.standard_normal((3, 4)) for n in names}
    cfg = train.TrainConfig(weight_decay=0.1, beta2=0.98)
    mine = _leaves(values)
    optimizer = tensor_train.AdamW(
        mine,
        lr=0.0,
        betas=(cfg.beta1, cfg.beta2),
        eps=cfg.adam_eps,
        weight_decay=cfg.weight_decay,
        decay=train.decays,
    )
    theirs = {n: v.copy() for n, v in values.items()}
    m = {n: np.zeros_like(v) for n, v in values.items()}
    s = {n: np.zeros_like(v) for n, v in values.items()}
    for step in range(steps):
        grads = {n: rng.standard_normal((3, 4)) * 10.0 ** rng.integers(-6, 3) for n in names}
        for n, t in mine.items():
            t.grad = Tensor.from_numpy(grads[n])
        lr = float(rng.uniform(1e-4, 1e-1))
        optimizer.step(lr)
        train.adamw_update(theirs, grads, m, s, step, lr, cfg)
        for n in names:
            assert np.array_equal(mine[n].to_numpy(), theirs[n]), (n, step)
            assert np.array_equal(optimizer.exp_avg_sq[n].to_numpy(), s[n]), (n, step)


def test_adamws_first_step_moves_each_value_by_the_learning_rate_against_its_gradient() -> None:
    # Bias correction: after one step m_hat = g and v_hat = g^2, so the step is lr * sign(g)
    # whatever the gradient's size (up to eps).
    p = Tensor.from_numpy(np.zeros(4), requires_grad=True)
    optimizer = tensor_train.AdamW({"p": p}, lr=0.01, weight_decay=0.0, eps=0.0)
    p.grad = Tensor.from_numpy(np.array([1e-5, -3.0, 200.0, -1e-3]))
    optimizer.step()
    np.testing.assert_allclose(p.to_numpy(), [-0.01, 0.01, -0.01, 0.01], rtol=1e-12)


def test_adamws_weight_decay_is_decoupled_and_only_where_decay_says() -> None:
    # A zero gradient leaves Adam's step at 0: what moves is the decay alone, p * (1 - lr * wd).
    w = {"decayed": np.full(3, 2.0), "kept": np.full(3, 2.0)}
    leaves = _leaves(w)
    optimizer = tensor_train.AdamW(
        leaves, lr=0.1, weight_decay=0.5, decay=lambda name: name == "decayed"
    )
    for t in leaves.values():
        t.grad = Tensor.zeros((3,))
    optimizer.step()
    np.testing.assert_allclose(leaves["decayed"].to_numpy(), 2.0 * (1 - 0.1 * 0.5), rtol=1e-15)
    np.testing.assert_array_equal(leaves["kept"].to_numpy(), 2.0)


def test_adamw_skips_parameters_without_a_gradient_and_zero_grad_forgets() -> None:
    leaves = _leaves({"a": np.ones(2), "b": np.ones(2)})
    optimizer = tensor_train.AdamW(leaves, lr=0.1)
    leaves["a"].grad = Tensor.from_numpy(np.ones(2))
    optimizer.step()
    np.testing.assert_array_equal(leaves["b"].to_numpy(), 1.0)
    assert not np.array_equal(leaves["a"].to_numpy(), np.ones(2))
    optimizer.zero_grad()
    assert leaves["a"].grad is None and leaves["b"].grad is None


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"lr": -1.0}, "learning rate must be at least 0, got -1.0"),
        ({"betas": (0.9, 1.0)}, r"betas\[1\] must lie in \[0, 1\), got 1.0"),
        ({"eps": -1e-8}, "eps must be at least 0"),
        ({"weight_decay": -0.1}, "weight_decay must be at least 0"),
    ],
)
def test_adamw_refuses_impossible_hyperparameters(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        tensor_train.AdamW(_leaves({"a": np.ones(2)}), **kwargs)  # type: ignore[arg-type]


def test_adamw_refuses_a_parameter_that_does_not_require_grad() -> None:
    with pytest.raises(ConfigError, match="'frozen' does not require grad"):
        tensor_train.AdamW({"frozen": Tensor.zeros((2,))})


@pytest.mark.parametrize(
    "field",
    [
        {"steps": 0},
        {"batch_size": -1},
        {"log_every": 0},
        {"eval_every": 1.5},
        {"warmup_steps": -1},
        {"beta1": 1.0},
        {"learning_rate": -1e-3},
        {"adam_eps": float("nan")},
    ],
)
def test_a_training_config_refuses_impossible_values(field: dict[str, object]) -> None:
    (name,) = field
    with pytest.raises(ConfigError, match=name):
        train.TrainConfig(**field)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------
# Backends, the command, the record and the progress bar
# ----------------------------------------------------------------------------------------------


def test_the_tensor_engine_trains_alike_on_the_reference_backend() -> None:
    cfg = train.TrainConfig(steps=2, batch_size=2, log_every=1, eval_every=2, warmup_steps=1)
    held_out = task.split().held_out[:4]
    on_numpy = tensor_train.train(SMALL, cfg, held_out=held_out)
    on_reference = tensor_train.train(SMALL, cfg, held_out=held_out, backend="reference")
    np.testing.assert_allclose(on_reference.losses, on_numpy.losses, rtol=1e-13)
    for name, value in on_numpy.params.items():
        np.testing.assert_allclose(on_reference.params[name], value, rtol=0, atol=1e-13)


def test_float32_training_stays_close_to_float64() -> None:
    cfg = train.TrainConfig(steps=5, batch_size=4, log_every=5, eval_every=5)
    held_out = task.split().held_out[:4]
    wide = tensor_train.train(SMALL, cfg, held_out=held_out)
    narrow = tensor_train.train(SMALL, cfg, held_out=held_out, dtype=np.float32)
    np.testing.assert_allclose(narrow.losses, wide.losses, rtol=1e-5)


def test_training_starts_from_the_seeded_initialisation() -> None:
    cfg = train.TrainConfig(steps=1, batch_size=2, learning_rate=0.0)
    run = tensor_train.train(SMALL, cfg, held_out=task.split().held_out[:2])
    for name, value in init_params(SMALL, seed=0).items():
        np.testing.assert_array_equal(run.params[name], value)


@pytest.mark.parametrize("engine", ["numpy", "tensor"])
def test_the_command_writes_the_record_of_either_engine(tmp_path, capsys, engine: str) -> None:
    out = tmp_path / "model.npz"
    args = ["--out", str(out), "--steps", "2", "--batch-size", "4", "--no-figure"]
    assert train.main([*args, "--engine", engine]) == 0
    assert "held-out accuracy of the saved weights" in capsys.readouterr().out
    record = json.loads(out.with_suffix(".json").read_text())
    assert record["engine"] == engine and record["backend"] == "numpy"
    assert record["dtype"] == "float64" and record["train"]["seed"] == 0
    assert record["train"]["batch_size"] == 4 and record["wall_seconds"] > 0
    assert record["command"].endswith(f"--engine {engine}")
    assert [s for s, _ in record["loss_curve"]] == [2]
    assert [s for s, _ in record["held_out_accuracy_curve"]] == [2]
    assert "numpy" in record["environment"]


def test_the_command_refuses_tensor_options_for_the_numpy_engine(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        train.main(["--out", str(tmp_path / "m.npz"), "--dtype", "float32"])
    assert "--engine tensor" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train.main(["--out", str(tmp_path / "m.npz"), "--steps", "0"])
    assert "steps must be a positive int, got 0" in capsys.readouterr().err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_draws_on_a_terminal_only() -> None:
    ticks = iter(range(100))
    terminal = _Terminal()
    bar = experiment.ProgressBar(4, stream=terminal, clock=lambda: float(next(ticks)))
    bar.update(2.0)
    bar.update(1.0)
    bar.write("step 2 logged")
    bar.close()
    drawn = terminal.getvalue()
    assert "\rstep    1/4 [#######" in drawn and "loss 2.00000" in drawn
    assert "loss 1.90000" in drawn and "step 2 logged\n" in drawn and drawn.endswith("\n")
    piped = io.StringIO()
    quiet = experiment.ProgressBar(4, stream=piped)
    quiet.update(2.0)
    quiet.write("a logged line")
    quiet.close()
    assert piped.getvalue() == "a logged line\n"


def test_the_tensor_engine_leaves_no_recording_behind() -> None:
    # The optimiser's arithmetic records nothing: the moments are plain tensors, and a view of
    # a parameter taken before the step is stale after it (the step wrote its storage).
    p = Tensor.from_numpy(np.ones(3), requires_grad=True)
    optimizer = tensor_train.AdamW({"p": p}, lr=0.1)
    lt.sum(p * p).backward()
    before = p.view()
    optimizer.step()
    assert not optimizer.exp_avg["p"].requires_grad and p.requires_grad
    assert p.grad_fn is None and optimizer.exp_avg["p"].grad_fn is None
    with pytest.raises(lt.StaleViewError):
        before.to_numpy()
    # One step: decay by lr * weight_decay, then lr against the sign of the gradient.
    np.testing.assert_allclose(p.to_numpy(), np.full(3, (1 - 0.1 * 0.01) - 0.1), rtol=1e-6)


def test_the_numpy_engine_computes_float32_weights_in_float32() -> None:
    # NumPy 2 promotes float32 with a NumPy float64 scalar (such as np.sqrt(d)) to float64; the
    # benchmarks compare the engines in the dtype they name.
    params = {n: v.astype(np.float32) for n, v in init_params(SMALL, 0).items()}
    rng = np.random.default_rng(0)
    ids = rng.integers(0, SMALL.vocab_size, size=(2, SMALL.n_ctx))
    logits, _ = train.forward_with_cache(params, SMALL, ids)
    _, grads = train.loss_and_grads(params, SMALL, ids, ids, np.ones(ids.shape))
    assert logits.dtype == np.float32
    assert {g.dtype for g in grads.values()} == {np.dtype(np.float32)}


def test_a_float32_step_of_the_tensor_engine_never_leaves_float32(monkeypatch) -> None:
    # A float64 promotion anywhere in a float32 step (a NumPy float64 scalar in a formula, a
    # rule building a float64 constant, the optimiser) is a bug: the engine would hide it by
    # casting each gradient back to its owner's dtype, so every rule's output is checked as it
    # leaves the rule, every result on the tape, every gradient, parameter and moment after it.
    from llmfs.gpt import tensor_model
    from llmfs.tensor import autograd

    left: list[str] = []

    def pinned(name: str, rule: autograd.Rule) -> autograd.Rule:
        def checked(ctx: autograd.Context, g: Tensor) -> list:
            out = rule(ctx, g)
            left.extend(f"{name}: {grad.dtype}" for _, grad in out if grad.dtype != np.float32)
            return out

        return checked

    for name, rule in list(autograd.RULES.items()):
        monkeypatch.setitem(autograd.RULES, name, pinned(name, rule))
    w = tensor_model.tensor_params(init_params(SMALL, 0), np.float32)
    for t in w.values():
        t.requires_grad_()
    batch = task.sequences(task.split().train)[:4]
    loss = tensor_train.cross_entropy(
        tensor_model.forward(w, SMALL, batch[:, :-1]), batch[:, 1:], experiment.answer_weights(4)
    )
    seen, stack = set(), [loss]
    while stack:
        tensor = stack.pop()
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        assert tensor.dtype == np.float32, tensor.grad_fn
        if tensor.grad_fn is not None:
            stack.extend(edge.owner for edge in tensor.grad_fn.inputs)
    assert len(seen) > 40  # the whole model was walked
    loss.backward()
    assert left == []
    assert {n: t.grad.dtype for n, t in w.items() if t.grad is not None} == {
        n: np.dtype(np.float32) for n in w
    }
    optimizer = tensor_train.AdamW(w, decay=experiment.decays)
    optimizer.step()
    for moments in (optimizer.exp_avg, optimizer.exp_avg_sq):
        assert {m.dtype for m in moments.values()} == {np.dtype(np.float32)}
    assert {t.dtype for t in w.values()} == {np.dtype(np.float32)}
