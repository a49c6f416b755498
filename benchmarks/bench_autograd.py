"""Autograd's forward + backward through ``llmfs.tensor`` (numpy backend) against the same
gradients written out by hand in NumPy, per op family and for one capstone training step.

Run: ``python benchmarks/bench_autograd.py``. Each row is the median of alternating calls of
both sides, printed as a ratio. The op families use float64 arrays of a size where arithmetic,
not the per-op overhead, dominates. The training step is the capstone's loss and every
parameter's gradient at batch 64 in float64: :func:`llmfs.gpt.tensor_model.forward`, a
cross-entropy on llmfs tensors and ``backward()``, against :func:`llmfs.gpt.train.loss_and_grads`
(the goal: within 2x). With PyTorch installed, ``torch.autograd`` on the same family is printed
as a third column of reference.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from _timing import header, median_seconds, paired_medians, row

import llmfs.tensor as lt
from llmfs.gpt import task, tensor_model, train
from llmfs.gpt.checkpoint import load_tiny_gpt
from llmfs.tensor import Tensor

try:
    import torch
except ImportError:  # the PyTorch column is optional
    torch = None

RNG = np.random.default_rng(0)


def leaf(*shape: int) -> Tensor:
    return Tensor.from_numpy(RNG.uniform(0.5, 2.0, size=shape), requires_grad=True)


def llmfs_step(loss: Callable[[], Tensor], leaves: list[Tensor]) -> Callable[[], None]:
    def run() -> None:
        for t in leaves:
            t.grad = None
        loss().backward()

    return run


def families() -> list[tuple[str, Callable[[], None], Callable[[], None], Any]]:
    """(name, llmfs forward+backward, NumPy by hand, PyTorch or None)."""
    x, y = leaf(256, 512), leaf(512)
    xa, ya = x.to_numpy(), y.to_numpy()
    a, b = leaf(64, 128, 64), leaf(64, 256)
    aa, ba = a.to_numpy(), b.to_numpy()
    table = leaf(1000, 64)
    ids = RNG.integers(0, 1000, size=(64, 16))
    ids_t = Tensor.from_numpy(ids)
    ta = table.to_numpy()

    def np_elementwise() -> None:
        e = np.exp(xa * ya)
        _ = (e * ya, (e * xa).sum(axis=0))

    def np_reduction() -> None:
        m = xa.max(axis=1, keepdims=True)
        hits = (xa == m).astype(np.float64)
        _ = hits / hits.sum(axis=1, keepdims=True) + 1.0 / xa.shape[1]

    def np_matmul() -> None:
        g = np.ones((64, 128, 256))
        _ = (g @ ba.T, aa.reshape(-1, 64).T @ g.reshape(-1, 256))

    def np_take() -> None:
        grad = np.zeros_like(ta)
        np.add.at(grad, ids.reshape(-1), np.ones((ids.size, 64)))

    def np_views() -> None:
        g = np.zeros_like(xa)
        g.T[::2] += 1.0
        g[:, ::-1] += 1.0

    rows: list[tuple[str, Callable[[], None], Callable[[], None], Any]] = [
        (
            "elementwise: sum(exp(x * y)) [256,512]",
            llmfs_step(lambda: lt.sum(lt.exp(x * y)), [x, y]),
            np_elementwise,
            lambda t, u: torch.exp(t * u).sum(),
        ),
        (
            "reduction: sum(max + mean over axis 1)",
            llmfs_step(lambda: lt.sum(lt.max(x, axis=1) + lt.mean(x, axis=1)), [x]),
            np_reduction,
            lambda t, u: (t.amax(dim=1) + t.mean(dim=1)).sum(),
        ),
        (
            "matmul: sum([64,128,64] @ [64,256])",
            llmfs_step(lambda: lt.sum(a @ b), [a, b]),
            np_matmul,
            None,
        ),
        (
            "take: sum(table[ids]) [1000,64] x 1024 ids",
            llmfs_step(lambda: lt.sum(lt.take(table, ids_t)), [table]),
            np_take,
            None,
        ),
        (
            "views: sum(x.T[::2]) + sum(x.flip(1))",
            llmfs_step(lambda: lt.sum(x.T[::2]) + lt.sum(x.flip(1)), [x]),
            np_views,
            lambda t, u: t.T[::2].sum() + t.flip(1).sum(),
        ),
    ]
    if torch is not None:
        tx = torch.tensor(xa, requires_grad=True)
        ty = torch.tensor(ya, requires_grad=True)
        rows = [
            (name, ours, peer, None if fn is None else (lambda fn=fn: fn(tx, ty).backward()))
            for name, ours, peer, fn in rows
        ]
    else:
        rows = [(name, ours, peer, None) for name, ours, peer, _ in rows]
    return rows


def cross_entropy(logits: Tensor, targets: np.ndarray, weights: np.ndarray) -> Tensor:
    """train.py's loss on llmfs tensors: the weighted mean of -log softmax at the targets."""
    shifted = logits - lt.max(logits, axis=-1, keepdims=True)
    log_probs = shifted - lt.log(lt.sum(lt.exp(shifted), axis=-1, keepdims=True))
    picked = np.zeros(logits.shape)
    np.put_along_axis(picked, targets[..., None], 1.0, axis=-1)
    return lt.sum(log_probs * Tensor.from_numpy(-picked * (weights / weights.sum())[..., None]))


def main() -> None:
    header("autograd: llmfs forward + backward (numpy backend) vs the gradients by hand in NumPy")
    for name, ours, peer, theirs in families():
        t_ours, t_peer = paired_medians(ours, peer)
        row(name, t_ours, t_peer)
        if theirs is not None:
            print(f"   {'  PyTorch autograd, same case':<44} {median_seconds(theirs) * 1e3:9.2f}")

    params32, config = load_tiny_gpt()
    params = {n: np.asarray(v, dtype=np.float64) for n, v in params32.items()}
    data = task.sequences(task.split().train)
    batch = data[np.random.default_rng(1).integers(0, len(data), size=64)]
    ids, targets = batch[:, :-1], batch[:, 1:]
    weights = train.answer_weights(len(batch))
    w = tensor_model.tensor_params(params)
    for tensor in w.values():
        tensor.requires_grad_()

    def ours() -> None:
        for tensor in w.values():
            tensor.grad = None
        cross_entropy(tensor_model.forward(w, config, ids), targets, weights).backward()

    def peer() -> None:
        train.loss_and_grads(params, config, ids, targets, weights)

    t_ours, t_peer = paired_medians(ours, peer, repeat=7)
    row("capstone training step, batch 64, float64", t_ours, t_peer, goal=2.0)


if __name__ == "__main__":
    main()
