"""Pretraining on text: the batch loader, the validation loss and its baselines, clipping by
global norm, and checkpoints that resume a run bit for bit in a fresh process."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import llmfs
import llmfs.tensor as lt
from llmfs.gpt import tensor_model
from llmfs.gpt.errors import ConfigError
from llmfs.gpt.experiment import TrainConfig, openblas_core
from llmfs.gpt.grad_clip import clip_grad_norm, global_grad_norm
from llmfs.gpt.model import GPTConfig, init_params
from llmfs.gpt.tensor_train import cross_entropy, trainable
from llmfs.gpt.text_batches import (
    check_stream,
    draw_windows,
    get_batch,
    read_text_file,
    window_count,
)
from llmfs.gpt.text_corpus import Split, TextModelError, windows
from llmfs.gpt.text_eval import (
    estimate_loss,
    fixed_batches,
    perplexity,
    uniform_loss,
    unigram_entropy,
)
from llmfs.gpt.text_training import train, train_steps
from llmfs.gpt.train_state import (
    CheckpointError,
    load_state,
    save_state,
    start_state,
    state_params,
)

SMALL = GPTConfig(vocab_size=23, n_ctx=6, n_embd=8, n_head=2, n_layer=1)
RUN = TrainConfig(seed=3, steps=12, batch_size=4, learning_rate=3e-2, warmup_steps=2)


def stream(n: int = 400, seed: int = 0, vocab: int = 23) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, vocab, size=n)


# -- the batch loader ----------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "n_ctx", "count"), [(10, 3, 7), (4, 3, 1), (3, 3, 0), (0, 1, 0)])
def test_a_stream_of_n_tokens_holds_n_minus_n_ctx_windows(n: int, n_ctx: int, count: int) -> None:
    assert window_count(n, n_ctx) == count


def test_targets_are_the_inputs_shifted_by_one_and_every_window_lies_in_the_stream() -> None:
    ids = np.arange(50)  # each token is its own position: a window is a run of consecutive ids
    for seed in range(20):
        x, y = get_batch(ids, 7, 5, np.random.default_rng(seed))
        assert x.shape == y.shape == (5, 7) and x.dtype == np.int64
        assert (y[:, :-1] == x[:, 1:]).all() and (y == x + 1).all()
        assert x.min() >= 0 and y.max() <= 49


def test_every_start_is_drawn_and_the_last_window_ends_at_the_last_token() -> None:
    ids = np.arange(12)
    x, y = get_batch(ids, 4, 4000, np.random.default_rng(0))
    assert sorted(set(x[:, 0].tolist())) == list(range(window_count(12, 4)))
    assert y.max() == 11


def test_the_same_seed_gives_the_same_batches_and_the_shipped_runs_windows() -> None:
    ids = stream()
    a = [get_batch(ids, 6, 4, rng) for rng in [np.random.default_rng(5)] * 3]
    b = [get_batch(ids, 6, 4, rng) for rng in [np.random.default_rng(5)] * 3]
    for (xa, ya), (xb, yb) in zip(a, b, strict=True):
        assert (xa == xb).all() and (ya == yb).all()
    cfg = TrainConfig(seed=5, steps=3, batch_size=4)
    rng = np.random.default_rng(5)
    for shipped in windows(ids, 6, cfg):
        assert (shipped == draw_windows(ids, 6, 4, rng)).all()


def test_a_stream_too_short_for_a_window_is_refused_with_its_length() -> None:
    with pytest.raises(TextModelError, match=r"6 tokens.*window of 7"):
        get_batch(np.arange(6), 6, 2, np.random.default_rng(0))
    with pytest.raises(TextModelError, match="5 tokens: too short for one window of 7"):
        check_stream(np.arange(5), 6)


def test_a_learners_text_file_is_read_or_refused_by_name(tmp_path: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_text("Ünïcode text\n", encoding="utf-8")
    assert read_text_file(good) == "Ünïcode text\n"
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(TextModelError, match="0 characters"):
        read_text_file(empty)
    latin = tmp_path / "latin.txt"
    latin.write_bytes("café".encode("latin-1"))
    with pytest.raises(TextModelError, match="not UTF-8 text: byte 3 is 0xe9"):
        read_text_file(latin)
    binary = tmp_path / "data.bin"
    binary.write_bytes(b"abc\x00\x01\x02")
    with pytest.raises(TextModelError, match="NUL byte at character 3"):
        read_text_file(binary)
    with pytest.raises(TextModelError, match="is not a file"):
        read_text_file(tmp_path)
    with pytest.raises(TextModelError, match="13 characters; at least 100"):
        read_text_file(good, min_chars=100)


def test_chapter_elevens_bpe_trains_on_a_learners_file_and_the_loader_reads_its_stream(
    tmp_path: Path,
) -> None:
    from llmfs.gpt.text_corpus import corpus_text, split, train_tokenizer

    own = tmp_path / "notes.txt"
    own.write_text(corpus_text()[:24_000] + "Ünïcode café — naïve façade.\n" * 200, "utf-8")
    text = read_text_file(own)
    tokenizer = train_tokenizer(text, 300)
    assert tokenizer.vocab_size == 300
    ids = check_stream(np.asarray(tokenizer.encode(text)), 16, str(own))
    assert tokenizer.decode(ids.tolist()) == text and len(ids) < len(text.encode("utf-8"))
    parts = split(ids)
    x, y = get_batch(parts.train, 16, 4, np.random.default_rng(0))
    assert x.shape == (4, 16) and (y[:, :-1] == x[:, 1:]).all() and x.max() < 300
    with pytest.raises(TextModelError, match="too short for one window of 17"):
        check_stream(np.asarray(tokenizer.encode("Ünï")), 16, "a short text")


# -- the validation loss and the baselines -------------------------------------------------------


def test_estimate_loss_is_the_mean_of_the_batch_losses_and_records_nothing() -> None:
    params = init_params(SMALL, seed=1)
    w, _ = trainable(params, RUN, np.float64)
    batches = fixed_batches(stream(), SMALL.n_ctx, 4, 3, seed=9)
    again = fixed_batches(stream(), SMALL.n_ctx, 4, 3, seed=9)
    assert all((a[0] == b[0]).all() for a, b in zip(batches, again, strict=True))
    seen: list[bool] = []

    def model(x: np.ndarray) -> lt.Tensor:
        logits = tensor_model.forward(w, SMALL, x)
        seen.append(logits.requires_grad)
        return logits

    got = estimate_loss(model, batches)
    want = np.mean(
        [
            float(cross_entropy(tensor_model.forward(w, SMALL, x), y, np.ones(y.shape)).item())
            for x, y in batches
        ]
    )
    assert got == pytest.approx(want, rel=1e-12) and isinstance(got, float)
    assert seen == [False, False, False]
    assert all(p.grad is None for p in w.values())
    assert perplexity(got) == pytest.approx(math.exp(got))


def test_the_baselines_uniform_is_ln_v_and_unigram_is_the_streams_entropy() -> None:
    assert uniform_loss(768) == pytest.approx(math.log(768))
    assert perplexity(uniform_loss(50)) == pytest.approx(50)
    assert unigram_entropy(np.array([0, 1, 0, 1]), 5) == pytest.approx(math.log(2))
    assert unigram_entropy(np.array([3, 3, 3]), 5) == 0.0
    ids = stream(5000)
    assert unigram_entropy(ids, 23) <= uniform_loss(23) + 1e-12
    with pytest.raises(TextModelError, match=r"outside 0\.\.4"):
        unigram_entropy(np.array([0, 5]), 5)
    with pytest.raises(TextModelError, match="empty"):
        unigram_entropy(np.array([], dtype=np.int64), 5)


def test_a_zero_logit_model_scores_exactly_the_uniform_loss() -> None:
    batches = fixed_batches(stream(), 6, 3, 2, seed=0)
    loss = estimate_loss(lambda x: lt.Tensor.from_numpy(np.zeros((*x.shape, 23))), batches)
    assert loss == pytest.approx(uniform_loss(23), rel=1e-12)


# -- clipping by global norm ---------------------------------------------------------------------


def _leaves(rng: np.random.Generator, scale: float) -> dict[str, lt.Tensor]:
    leaves = {}
    for name, shape in {"a": (3, 4), "b": (5,), "c": (2, 2, 2)}.items():
        leaf = lt.Tensor.from_numpy(rng.normal(size=shape), requires_grad=True)
        leaf.grad = lt.Tensor.from_numpy(rng.normal(size=shape) * scale)
        leaves[name] = leaf
    return leaves


@pytest.mark.parametrize("seed", range(6))
def test_clipping_scales_every_gradient_by_one_factor_to_the_max_norm(seed: int) -> None:
    rng = np.random.default_rng(seed)
    leaves = _leaves(rng, scale=float(rng.uniform(0.01, 10)))
    before = {k: v.grad.to_numpy() for k, v in leaves.items()}
    norm = float(np.sqrt(sum((g**2).sum() for g in before.values())))
    max_norm = float(rng.uniform(0.1, 20))
    assert global_grad_norm(leaves) == pytest.approx(norm, rel=1e-12)
    assert clip_grad_norm(leaves, max_norm) == pytest.approx(norm, rel=1e-12)
    scale = min(1.0, max_norm / (norm + 1e-6))
    for k, leaf in leaves.items():
        assert np.allclose(leaf.grad.to_numpy(), before[k] * scale, rtol=1e-14, atol=0)
    assert global_grad_norm(leaves) == pytest.approx(min(norm, max_norm), rel=1e-5)


def test_clipping_refuses_a_threshold_that_is_not_positive() -> None:
    leaves = _leaves(np.random.default_rng(0), 1.0)
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ConfigError, match="max_norm must be a positive finite number"):
            clip_grad_norm(leaves, bad)


def test_clipping_agrees_with_pytorch() -> None:
    torch = pytest.importorskip("torch", reason="PyTorch is the oracle of clip_grad_norm_")
    rng = np.random.default_rng(7)
    leaves = _leaves(rng, 3.0)
    tensors = []
    for leaf in leaves.values():
        t = torch.zeros(leaf.shape, dtype=torch.float64, requires_grad=True)
        t.grad = torch.tensor(leaf.grad.to_numpy())
        tensors.append(t)
    want = float(torch.nn.utils.clip_grad_norm_(tensors, 1.5))
    assert clip_grad_norm(leaves, 1.5) == pytest.approx(want, rel=1e-12)
    for leaf, t in zip(leaves.values(), tensors, strict=True):
        assert np.allclose(leaf.grad.to_numpy(), t.grad.numpy(), rtol=1e-14, atol=0)


# -- the loop and the checkpoint -----------------------------------------------------------------


def test_the_loop_is_the_shipped_run_of_windows_step_for_step() -> None:
    parts = Split(stream(600), stream(200, seed=1))
    cfg = TrainConfig(seed=1, steps=5, batch_size=3, learning_rate=1e-2, warmup_steps=1)
    result = train(SMALL, cfg, parts, dtype=np.float64)
    w, optimizer = trainable(init_params(SMALL, seed=1), cfg, np.float64)
    from llmfs.gpt.experiment import learning_rate

    ones = np.ones((3, SMALL.n_ctx))
    for step, batch in enumerate(windows(parts.train, SMALL.n_ctx, cfg)):
        loss = cross_entropy(tensor_model.forward(w, SMALL, batch[:, :-1]), batch[:, 1:], ones)
        loss.backward()
        optimizer.step(learning_rate(step, cfg))
        optimizer.zero_grad()
        assert float(loss.item()) == result.losses[step]


def test_training_stops_at_the_end_of_its_schedule() -> None:
    state = start_state(SMALL, RUN)
    with pytest.raises(TextModelError, match="ends at step 12; cannot train until 13"):
        train_steps(state, stream(), 13)


_RESUME = """
import sys
import numpy as np
import llmfs
print(llmfs.__file__)
from llmfs.gpt.text_training import train_steps
from llmfs.gpt.train_state import load_state, state_params
state = load_state(sys.argv[1])
ids = np.load(sys.argv[2])
train_steps(state, ids, state.cfg.steps, clip=0.5)
np.savez(sys.argv[3], **state_params(state))
"""


def _same_blas_kernel() -> dict[str, str]:
    """The environment that gives a child process this one's OpenBLAS kernel: bit-for-bit
    equality across processes holds only on one kernel (OpenBLAS picks one by CPU, or as
    ``OPENBLAS_CORETYPE`` says, when it loads; the suite may have chosen one)."""
    core = openblas_core()
    return {} if core is None else {"OPENBLAS_CORETYPE": core}


def test_two_n_steps_equal_n_then_save_load_in_a_fresh_process_then_n_more(tmp_path: Path) -> None:
    ids = stream(500)
    whole = start_state(SMALL, RUN)
    losses: list[float] = []
    train_steps(whole, ids, RUN.steps, clip=0.5, on_step=lambda r: losses.append(r.loss))
    half = start_state(SMALL, RUN)
    train_steps(half, ids, RUN.steps // 2, clip=0.5)
    checkpoint = save_state(tmp_path / "run.npz", half)
    np.save(tmp_path / "ids.npy", ids)
    script = tmp_path / "resume.py"
    script.write_text(textwrap.dedent(_RESUME), encoding="utf-8")
    child = subprocess.run(
        [
            sys.executable,
            str(script),
            str(checkpoint),
            str(tmp_path / "ids.npy"),
            str(tmp_path / "out.npz"),
        ],
        check=True,
        capture_output=True,
        text=True,
        env={"OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", **_same_blas_kernel()},
    )
    # A fresh interpreter, importing the llmfs under test: nothing of this process carries over.
    assert child.stdout.strip() == llmfs.__file__
    with np.load(tmp_path / "out.npz") as resumed:
        final = state_params(whole)
        assert sorted(resumed.files) == sorted(final)
        for name, value in final.items():
            assert resumed[name].tobytes() == value.tobytes(), name
    # In this process too, and the weights did move.
    again = load_state(checkpoint)
    assert again.step == RUN.steps // 2 and again.optimizer.steps == RUN.steps // 2
    train_steps(again, ids, RUN.steps, clip=0.5)
    for name, value in state_params(whole).items():
        assert state_params(again)[name].tobytes() == value.tobytes()
        assert not np.array_equal(value, init_params(SMALL, seed=RUN.seed)[name]) or "ln" in name


def test_a_checkpoint_without_the_optimizer_resumes_on_other_weights(tmp_path: Path) -> None:
    ids = stream(500)
    state = start_state(SMALL, RUN)
    train_steps(state, ids, 6)
    path = save_state(tmp_path / "run.npz", state)
    full, bare = load_state(path), load_state(path, optimizer=False)
    assert bare.optimizer.steps == 0 and not bare.optimizer.exp_avg
    assert bare.step == full.step == 6
    assert bare.rng.integers(0, 10**9) == full.rng.integers(0, 10**9)
    train_steps(full, ids, 7)
    bare.rng = load_state(path).rng
    train_steps(bare, ids, 7)
    assert not np.array_equal(state_params(full)["wte.weight"], state_params(bare)["wte.weight"])


def test_a_float32_run_resumes_in_float32(tmp_path: Path) -> None:
    state = start_state(SMALL, RUN, np.float32)
    train_steps(state, stream(), 3)
    back = load_state(save_state(tmp_path / "f32.npz", state))
    assert all(t.to_numpy().dtype == np.float32 for t in back.w.values())
    assert back.optimizer.exp_avg["wte.weight"].to_numpy().dtype == np.float32


def test_a_file_that_is_not_a_checkpoint_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no checkpoint file"):
        load_state(tmp_path / "absent.npz")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(CheckpointError, match="not a training checkpoint"):
        load_state(junk)
    weights_only = tmp_path / "weights.npz"
    np.savez(weights_only, **init_params(SMALL, seed=0))
    with pytest.raises(CheckpointError, match="no 'meta' record"):
        load_state(weights_only)
    state = start_state(SMALL, RUN)
    train_steps(state, stream(), 2)
    good = save_state(tmp_path / "good.npz", state)
    with np.load(good) as archive:
        arrays = {k: archive[k] for k in archive.files if k != "exp_avg/wte.weight"}
    np.savez(tmp_path / "cut.npz", **arrays)
    with pytest.raises(CheckpointError, match=r"moments of 'wte\.weight' are missing"):
        load_state(tmp_path / "cut.npz")


# -- chapter 13's experiments ----------------------------------------------------------------------


def test_first_to_rise_names_the_curve_that_turns_up_first() -> None:
    from llmfs.gpt.text_experiments import first_to_rise

    assert first_to_rise({"training": [3, 2, 1], "validation": [3, 2, 2.5]}) == "validation"
    assert first_to_rise({"training": [3, 2, 1], "validation": [3, 2, 2.01]}) == "neither"
    assert first_to_rise({"a": [1, 2, 3], "b": [3, 2, 2.5]}) == "a"


def test_the_memorisation_run_measures_both_curves_and_is_computed_once() -> None:
    from llmfs.gpt.text_experiments import memorisation

    seen: list[int] = []
    run = memorisation(600, 20, 10, on_step=lambda record: seen.append(record.step))
    assert seen == list(range(20)) and run.steps == [10, 20] and len(run.losses) == 20
    assert len(run.training) == len(run.validation) == 2
    assert run.best_step in (10, 20) and run.validation[run.steps.index(run.best_step)] == min(
        run.validation
    )
    assert memorisation(600, 20, 10, on_step=lambda record: seen.append(-1)) is run
    assert -1 not in seen
