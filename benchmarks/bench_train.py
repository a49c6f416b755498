"""One capstone training step (forward, backward, AdamW) of the tensor engine
(:mod:`llmfs.gpt.tensor_train`, llmfs.tensor autograd on the numpy backend) against the NumPy
engine (:mod:`llmfs.gpt.train`, backpropagation by hand), at batch 64 in float64 and float32.

Run: ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_train.py``. Each row is the median of
alternating steps of both engines from the shipped weights, printed as a ratio (the goal: the
tensor engine within 2x). With PyTorch installed (``import torch`` works), the same model and
step in ``torch`` (CPU, one thread, ``torch.optim.AdamW``) is measured in the same rounds (the
three engines alternate) and printed as a second row, the tensor engine against PyTorch (the
goal: within 1.2x). Each engine checks that it really computes in the dtype of its row.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from _timing import alternating_medians, header, median_seconds, paired_medians, row

from llmfs.gpt import task, tensor_train, train
from llmfs.gpt.checkpoint import load_tiny_gpt
from llmfs.gpt.model import GPTConfig, Params
from llmfs.gpt.reference import GELU_C

try:
    import torch
except ImportError:  # the PyTorch column is optional
    torch = None

BATCH = 64


def the_batch(batch_size: int = BATCH) -> np.ndarray:
    """The batch every engine trains on: ``batch_size`` training sequences, seeded."""
    data = task.sequences(task.split().train)
    return data[np.random.default_rng(1).integers(0, len(data), size=batch_size)]


def numpy_step(params: Params, config: GPTConfig, dtype: Any) -> Callable[[], None]:
    """One step of the NumPy engine on ``params`` converted to ``dtype``."""
    p = {n: np.asarray(v, dtype=dtype) for n, v in params.items()}
    m = {n: np.zeros_like(v) for n, v in p.items()}
    s = {n: np.zeros_like(v) for n, v in p.items()}
    cfg = train.TrainConfig()
    batch = the_batch()
    weights = train.answer_weights(BATCH).astype(dtype)
    count = [0]

    def run() -> None:
        _, grads = train.loss_and_grads(p, config, batch[:, :-1], batch[:, 1:], weights)
        wrong = [n for n, g in grads.items() if g.dtype != np.dtype(dtype)]
        if wrong:
            raise AssertionError(f"the NumPy engine left {dtype.__name__}: {wrong[:3]}")
        train.adamw_update(p, grads, m, s, count[0], 1e-4, cfg)
        count[0] += 1

    return run


def torch_step(
    params: Params,
    config: GPTConfig,
    dtype: Any,
    tokens: np.ndarray | None = None,
    answer_only: bool = True,
    clip: float | None = None,
) -> Callable[[], None]:
    """The same model and step in PyTorch (CPU; the caller sets one thread): on ``tokens``
    (default: the adder's batch), the loss of the answer positions or, without
    ``answer_only``, of every position, clipped by global norm when ``clip`` is given."""
    assert torch is not None
    tdtype = torch.float64 if dtype is np.float64 else torch.float32
    p = {n: torch.tensor(v, dtype=tdtype, requires_grad=True) for n, v in params.items()}
    decayed = [t for n, t in p.items() if train.decays(n)]
    kept = [t for n, t in p.items() if not train.decays(n)]
    cfg = train.TrainConfig()
    optimizer = torch.optim.AdamW(
        [
            {"params": decayed, "weight_decay": cfg.weight_decay},
            {"params": kept, "weight_decay": 0},
        ],
        lr=1e-4,
        betas=(cfg.beta1, cfg.beta2),
        eps=cfg.adam_eps,
    )
    batch = torch.tensor(the_batch() if tokens is None else tokens)
    ids, targets = batch[:, :-1], batch[:, 1:]
    if answer_only:
        weights = torch.tensor(train.answer_weights(len(batch)), dtype=tdtype)
    else:
        weights = torch.ones(targets.shape, dtype=tdtype)
    b, t = ids.shape
    c, h, d = config.n_embd, config.n_head, config.head_size
    mask = torch.triu(torch.full((t, t), float("-inf"), dtype=tdtype), diagonal=1)
    f = torch.nn.functional

    def gelu(x: Any) -> Any:
        return 0.5 * x * (1.0 + torch.tanh(GELU_C * (x + 0.044715 * x * x * x)))

    def forward() -> Any:
        x = p["wte.weight"][ids] + p["wpe.weight"][:t]
        for i in range(config.n_layer):
            q_ = f"h.{i}."
            y = f.layer_norm(x, (c,), p[q_ + "ln_1.weight"], p[q_ + "ln_1.bias"], 1e-5)
            qkv = y @ p[q_ + "attn.c_attn.weight"] + p[q_ + "attn.c_attn.bias"]
            q, k, v = (
                qkv[..., j * c : (j + 1) * c].view(b, t, h, d).transpose(1, 2) for j in range(3)
            )
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d) + mask, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, c)
            x = x + y @ p[q_ + "attn.c_proj.weight"] + p[q_ + "attn.c_proj.bias"]
            y = f.layer_norm(x, (c,), p[q_ + "ln_2.weight"], p[q_ + "ln_2.bias"], 1e-5)
            y = gelu(y @ p[q_ + "mlp.c_fc.weight"] + p[q_ + "mlp.c_fc.bias"])
            x = x + y @ p[q_ + "mlp.c_proj.weight"] + p[q_ + "mlp.c_proj.bias"]
        x = f.layer_norm(x, (c,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
        return x @ p["wte.weight"].T

    def run() -> None:
        logits = forward()
        nll = f.cross_entropy(
            logits.reshape(-1, config.vocab_size), targets.reshape(-1), reduction="none"
        )
        loss = (nll * weights.reshape(-1)).sum() / weights.sum()
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(list(p.values()), clip)
        optimizer.step()
        optimizer.zero_grad()

    return run


#: Chapter 13's default run: its model, batch and clipping (float32), and the shipped text
#: model's (:data:`llmfs.gpt.text_corpus.TEXT_CONFIG`, batch 16, no clipping).
TEXT_RUNS = (
    ("chapter 13's run", GPTConfig(768, 32, 48, 4, 2), 16, 1.0),
    ("shipped text model", GPTConfig(768, 128, 128, 4, 4), 16, None),
)


def text_steps(config: GPTConfig, batch: int, clip: float | None) -> tuple[Any, Any]:
    """One text-model step of the library's loop (:func:`llmfs.gpt.text_training.train_step`,
    float32, windows of the shipped corpus's training stream) and the same step in PyTorch on
    one fixed batch of the same shape (or ``None`` without PyTorch)."""
    from llmfs.gpt.experiment import TrainConfig
    from llmfs.gpt.text_corpus import corpus_text, load_tokenizer, split
    from llmfs.gpt.text_training import train_step
    from llmfs.gpt.train_state import start_state

    stream = split(load_tokenizer().encode(corpus_text()[:200_000])).train
    cfg = TrainConfig(seed=0, steps=10**6, batch_size=batch, learning_rate=1e-4, warmup_steps=0)
    state = start_state(config, cfg, np.float32)

    def ours() -> None:
        train_step(state, stream, clip)

    tokens = stream[np.arange(batch)[:, None] * 97 + np.arange(config.n_ctx + 1)]
    params = {n: t.to_numpy() for n, t in state.w.items()}
    peer = None
    if torch is not None:
        peer = torch_step(params, config, np.float32, tokens, answer_only=False, clip=clip)
    return ours, peer


def main() -> None:
    header(
        f"training step, batch {BATCH}: tensor engine (llmfs autograd) vs NumPy engine (by hand)"
    )
    params32, config = load_tiny_gpt()
    params = {n: np.asarray(v, dtype=np.float64) for n, v in params32.items()}
    if torch is not None:
        torch.set_num_threads(1)
    for dtype in (np.float64, np.float32):
        engines = [
            tensor_train.step_time(params, config, BATCH, dtype=dtype),
            numpy_step(params, config, dtype),
        ]
        if torch is not None:
            engines.append(torch_step(params, config, dtype))
        times = alternating_medians(engines, repeat=9)
        row(f"capstone training step, {dtype.__name__}", times[0], times[1], goal=2.0)
        if torch is not None:
            row(f"  the same vs PyTorch (CPU, 1 thread), {dtype.__name__}", times[0], times[2], 1.2)
    header("text-model training step, float32: llmfs's loop vs PyTorch (CPU, 1 thread)")
    if torch is None:
        print("   PyTorch is not installed: no comparison (the goal: within 1.5x of it)")
    for name, config, batch, clip in TEXT_RUNS:
        ours, peer = text_steps(config, batch, clip)
        if peer is None:
            print(f"   {name:<44} {median_seconds(ours, repeat=9) * 1e3:9.2f}")
            continue
        t_ours, t_torch = paired_medians(ours, peer, repeat=9)
        label = f"{name}, batch {batch} x {config.n_ctx}" + (", clipped" if clip else "")
        row(label, t_ours, t_torch, goal=1.5)


if __name__ == "__main__":
    main()
