"""Training the capstone model: the NumPy engine (backpropagation written out by hand) and the
command that runs either engine.

``python -m llmfs.gpt.train --out PATH`` trains :data:`~llmfs.gpt.model.TINY_CONFIG` on the
training half of :func:`llmfs.gpt.task.split`, prints the loss curve and the held-out accuracy
(with a progress bar and the running loss when stdout is a terminal), and writes

* ``PATH`` (``.npz``, float32, see :func:`llmfs.gpt.checkpoint.save_params`) and ``PATH`` with
  suffix ``.sha256`` (its checksum);
* ``PATH`` with suffix ``.json``: the training record (:func:`make_record`: the command, engine,
  backend and dtype, config, hyperparameters and seed, the loss curve, held-out accuracy during
  training and of the saved weights, the BLAS environment, the wall time);
* the loss-curve figure ``capstone_loss.png``/``.svg``/``.txt`` in ``--figures DIR`` (default: the
  checkout's ``figures/``), drawn from the record by :func:`llmfs.gpt.plot.loss_figure`, the same
  function ``llmfs figures`` redraws it with.

``--engine numpy`` (the default) is this module's :func:`train`; ``--engine tensor`` is
:func:`llmfs.gpt.tensor_train.train`, the same experiment (:mod:`llmfs.gpt.experiment`: same
initialisation, batches, AdamW and schedule) with :mod:`llmfs.tensor` autograd on ``--backend``
(numpy by default) in ``--dtype`` (float64 by default).

The shipped weights were made by the NumPy engine with one BLAS thread::

    OPENBLAS_NUM_THREADS=1 python -m llmfs.gpt.train --out llmfs/gpt/weights/tiny_gpt.npz

Determinism: every random draw (initialisation, batches) comes from one seeded NumPy ``Generator``,
so the same seed gives the same weights, byte for byte, on the same machine and BLAS kernel.
Across kernels it does not: OpenBLAS picks its matrix-product kernel by CPU (``Haswell`` on AVX2
machines, ``SkylakeX`` with AVX-512, ``Sandybridge``, ...; ``OPENBLAS_CORETYPE`` overrides it),
and the kernels sum in different orders, so the first step's gradients already differ in the last
bit (about 1e-16 relative, in most values). Training amplifies any such difference while the loss
sits on its plateau near 1.55 (steps 100 to 250): a 1e-15 change of the initial weights becomes
a 1e-13 change of the loss by step 100 and 6e-7 by step 175, and the two runs end at different
weights (both answer the held-out problems; the record says how this one went). The shipped file
is pinned by its checksum and its record (``tiny_gpt.json``), not by retraining.

The loss is the cross-entropy of the answer tokens only (the prompt is given, not predicted), the
optimiser AdamW (decoupled weight decay on the matrices of the blocks; none on embeddings, biases
and LayerNorm parameters) with linear warm-up then cosine decay of the learning rate.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from llmfs.gpt import reference, task
from llmfs.gpt.checkpoint import load_params, save_params, write_checksum
from llmfs.gpt.errors import ConfigError
from llmfs.gpt.experiment import (
    ProgressBar,
    RunLog,
    TrainConfig,
    TrainResult,
    answer_weights,
    batches,
    blas_environment,
    decays,
    learning_rate,
    openblas_core,
    training_data,
)
from llmfs.gpt.model import TINY_CONFIG, GPTConfig, Params, count_parameters, init_params
from llmfs.gpt.reference import GELU_C, causal_mask, softmax

# --------------------------------------------------------------------------------------------
# Forward with caches, and the backward pass of every layer
# --------------------------------------------------------------------------------------------


def _ln_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> tuple[np.ndarray, Any]:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = (x - mean) * rstd
    return xhat * w + b, (xhat, rstd, w)


def _ln_backward(dy: np.ndarray, cache: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of LayerNorm: ``dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))``
    with ``dxhat = dy * w`` (the mean and the variance both depend on every feature)."""
    xhat, rstd, w = cache
    dw = (dy * xhat).reshape(-1, xhat.shape[-1]).sum(axis=0)
    db = dy.reshape(-1, dy.shape[-1]).sum(axis=0)
    dxhat = dy * w
    dx = rstd * (
        dxhat
        - dxhat.mean(axis=-1, keepdims=True)
        - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True)
    )
    return dx, dw, db


def _gelu_backward(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    """d/dx of ``0.5 x (1 + tanh(u))``, ``u = c (x + 0.044715 x^3)``:
    ``0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) c (1 + 3 * 0.044715 x^2)``."""
    x2 = x * x
    t = np.tanh(GELU_C * x * (1.0 + 0.044715 * x2))
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3 * 0.044715 * x2))


def _linear_backward(
    dy: np.ndarray, x: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For ``y = x @ w + b`` over leading batch axes: ``(dx, dw, db)``."""
    x2 = x.reshape(-1, x.shape[-1])
    dy2 = dy.reshape(-1, dy.shape[-1])
    dx = (dy2 @ w.T).reshape(*dy.shape[:-1], w.shape[0])
    return dx, x2.T @ dy2, dy2.sum(axis=0)


def _linear(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``x @ w + b`` over leading batch axes, as one 2-D matrix product (one BLAS call instead
    of one per leading index)."""
    return (x.reshape(-1, x.shape[-1]) @ w + b).reshape(*x.shape[:-1], w.shape[1])


def forward_with_cache(
    params: Params, config: GPTConfig, ids: np.ndarray
) -> tuple[np.ndarray, list[Any]]:
    """Logits ``[B, T, vocab]`` of ``ids`` (``[B, T]``) and the activations the backward pass
    needs. Computes exactly what :func:`llmfs.gpt.reference.forward` computes."""
    b, t = ids.shape
    c, h, d = config.n_embd, config.n_head, config.head_size
    eps = config.layer_norm_eps
    mask = causal_mask(t)
    x = params["wte.weight"][ids] + params["wpe.weight"][:t]
    caches: list[Any] = []
    for i in range(config.n_layer):
        p = f"h.{i}."
        h1, ln1 = _ln_forward(x, params[p + "ln_1.weight"], params[p + "ln_1.bias"], eps)
        qkv = _linear(h1, params[p + "attn.c_attn.weight"], params[p + "attn.c_attn.bias"])
        q, k, v = (
            qkv[..., j * c : (j + 1) * c].reshape(b, t, h, d).transpose(0, 2, 1, 3)
            for j in range(3)
        )
        scores = np.where(mask, q @ k.transpose(0, 1, 3, 2) / math.sqrt(d), -np.inf)
        att = softmax(scores)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(b, t, c)
        x = x + _linear(y, params[p + "attn.c_proj.weight"], params[p + "attn.c_proj.bias"])
        h2, ln2 = _ln_forward(x, params[p + "ln_2.weight"], params[p + "ln_2.bias"], eps)
        f = _linear(h2, params[p + "mlp.c_fc.weight"], params[p + "mlp.c_fc.bias"])
        g = reference.gelu(f)
        x = x + _linear(g, params[p + "mlp.c_proj.weight"], params[p + "mlp.c_proj.bias"])
        caches.append((h1, ln1, q, k, v, att, y, h2, ln2, f, g))
    xf, lnf = _ln_forward(x, params["ln_f.weight"], params["ln_f.bias"], eps)
    logits = xf @ params["wte.weight"].T
    caches.append((ids, xf, lnf))
    return logits, caches


def loss_and_grads(
    params: Params, config: GPTConfig, ids: np.ndarray, targets: np.ndarray, weights: np.ndarray
) -> tuple[float, Params]:
    """Mean cross-entropy of ``targets`` (``[B, T]``) weighted by ``weights`` (``[B, T]``, 1 where
    a position counts, 0 where it does not) and its gradient for every parameter."""
    b, t = ids.shape
    c, h, d = config.n_embd, config.n_head, config.head_size
    logits, caches = forward_with_cache(params, config, ids)
    probs = softmax(logits)
    total = weights.sum()
    picked = np.take_along_axis(probs, targets[..., None], axis=-1)[..., 0]
    loss = float(-(np.log(picked) * weights).sum() / total)

    grads: Params = {name: np.zeros_like(value) for name, value in params.items()}
    dlogits = probs
    np.put_along_axis(
        dlogits, targets[..., None], np.take_along_axis(probs, targets[..., None], -1) - 1.0, -1
    )
    dlogits *= (weights / total)[..., None]

    ids_, xf, lnf = caches[-1]
    # Tied head: logits = xf @ wte^T, so wte also collects the head's gradient.
    grads["wte.weight"] += dlogits.reshape(-1, config.vocab_size).T @ xf.reshape(-1, c)
    dx, grads["ln_f.weight"], grads["ln_f.bias"] = _ln_backward(dlogits @ params["wte.weight"], lnf)

    for i in reversed(range(config.n_layer)):
        p = f"h.{i}."
        h1, ln1, q, k, v, att, y, h2, ln2, f, g = caches[i]
        # MLP branch: x_out = x_mid + mlp(ln_2(x_mid))
        dg, grads[p + "mlp.c_proj.weight"], grads[p + "mlp.c_proj.bias"] = _linear_backward(
            dx, g, params[p + "mlp.c_proj.weight"]
        )
        df = _gelu_backward(dg, f)
        dh2, grads[p + "mlp.c_fc.weight"], grads[p + "mlp.c_fc.bias"] = _linear_backward(
            df, h2, params[p + "mlp.c_fc.weight"]
        )
        dmid, grads[p + "ln_2.weight"], grads[p + "ln_2.bias"] = _ln_backward(dh2, ln2)
        dx = dx + dmid
        # Attention branch: x_mid = x_in + attn(ln_1(x_in))
        dy, grads[p + "attn.c_proj.weight"], grads[p + "attn.c_proj.bias"] = _linear_backward(
            dx, y, params[p + "attn.c_proj.weight"]
        )
        dyh = dy.reshape(b, t, h, d).transpose(0, 2, 1, 3)  # [B, H, T, D]
        datt = dyh @ v.transpose(0, 1, 3, 2)
        dv = att.transpose(0, 1, 3, 2) @ dyh
        # Softmax backward; masked entries have att = 0 and so get no gradient.
        dscores = att * (datt - (datt * att).sum(axis=-1, keepdims=True)) / math.sqrt(d)
        dq = dscores @ k
        dk = dscores.transpose(0, 1, 3, 2) @ q
        dqkv = np.concatenate(
            [m.transpose(0, 2, 1, 3).reshape(b, t, c) for m in (dq, dk, dv)], axis=-1
        )
        dh1, grads[p + "attn.c_attn.weight"], grads[p + "attn.c_attn.bias"] = _linear_backward(
            dqkv, h1, params[p + "attn.c_attn.weight"]
        )
        din, grads[p + "ln_1.weight"], grads[p + "ln_1.bias"] = _ln_backward(dh1, ln1)
        dx = dx + din

    np.add.at(grads["wte.weight"], ids_, dx)
    grads["wpe.weight"][:t] += dx.sum(axis=0)
    return loss, grads


# --------------------------------------------------------------------------------------------
# The optimiser and the training loop
# --------------------------------------------------------------------------------------------


def adamw_update(
    params: Params,
    grads: Params,
    m: Params,
    s: Params,
    step: int,
    lr: float,
    cfg: TrainConfig,
) -> None:
    """One AdamW step (PyTorch's ``torch.optim.AdamW``: decoupled weight decay, bias-corrected
    moments) of every parameter, in place: ``m`` and ``s`` are the first and second moments,
    ``step`` the 0-based step (so the bias correction uses ``step + 1``). Weight decay applies
    where :func:`decays` says. :class:`llmfs.gpt.tensor_train.AdamW` is the same update on llmfs
    tensors, operation for operation."""
    for name, value in params.items():
        g = grads[name]
        m[name] = cfg.beta1 * m[name] + (1 - cfg.beta1) * g
        s[name] = cfg.beta2 * s[name] + (1 - cfg.beta2) * g * g
        m_hat = m[name] / (1 - cfg.beta1 ** (step + 1))
        s_hat = s[name] / (1 - cfg.beta2 ** (step + 1))
        if decays(name):
            value *= 1.0 - lr * cfg.weight_decay
        value -= lr * m_hat / (np.sqrt(s_hat) + cfg.adam_eps)


def train(
    config: GPTConfig = TINY_CONFIG,
    cfg: TrainConfig | None = None,
    train_problems: np.ndarray | None = None,
    held_out: np.ndarray | None = None,
    log: Any = None,
    progress: ProgressBar | None = None,
) -> TrainResult:
    """Trains from :func:`~llmfs.gpt.model.init_params` with ``cfg.seed``; batches are drawn
    with replacement from ``train_problems`` (default: the training half of the shipped split).
    ``log``, when given, is called with one line of text per logged point; ``progress``, when
    given, is advanced once per step with the loss."""
    cfg = cfg or TrainConfig()
    data, held_out = training_data(train_problems, held_out)
    params = init_params(config, seed=cfg.seed)
    m = {n: np.zeros_like(v) for n, v in params.items()}
    s = {n: np.zeros_like(v) for n, v in params.items()}
    weights = answer_weights(cfg.batch_size)
    run = RunLog(cfg, log)
    for step, batch in enumerate(batches(data, cfg)):
        loss, grads = loss_and_grads(params, config, batch[:, :-1], batch[:, 1:], weights)
        lr = learning_rate(step, cfg)
        adamw_update(params, grads, m, s, step, lr, cfg)
        if progress is not None:
            progress.update(loss)
        run.step(step, loss, lr, lambda: reference.accuracy(params, config, held_out))
    return run.result(params)


# --------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------


#: How the shipped weights were made (the numpy engine, one BLAS thread: faster on a busy
#: machine, and one fixed summation order).
COMMAND = "OPENBLAS_NUM_THREADS=1 python -m llmfs.gpt.train --out llmfs/gpt/weights/tiny_gpt.npz"

#: The engines of ``--engine``.
ENGINES = ("numpy", "tensor")


def default_figures_folder() -> Path:
    """``figures/`` at the root of the checkout."""
    return Path(__file__).resolve().parent.parent.parent / "figures"


def make_record(
    config: GPTConfig,
    cfg: TrainConfig,
    result: TrainResult,
    saved_accuracy: float,
    sha256: str,
    *,
    engine: str = "numpy",
    backend: str = "numpy",
    dtype: str = "float64",
    wall_seconds: float | None = None,
    command: str = COMMAND,
) -> dict[str, Any]:
    """The training record written beside the weights: the command, the engine (and for the
    tensor engine its backend and dtype), the model, the hyperparameters and seed (``train``),
    the split, the loss curve, the held-out accuracy curve, the final loss, the saved weights'
    accuracy and checksum, the BLAS environment and (when given) the wall time in seconds, the
    one field that differs between two runs of the same command."""
    split = task.split()
    record: dict[str, Any] = {
        "command": command,
        "engine": engine,
        "backend": backend,
        "dtype": dtype,
        "task": "a + b for 0 <= a, b <= 99, answer digits least significant first",
        "model": asdict(config),
        "parameters": count_parameters(config),
        "train": asdict(cfg),
        "split": {
            "seed": task.SPLIT_SEED,
            "held_out_fraction": task.HELD_OUT_FRACTION,
            "train_problems": len(split.train),
            "held_out_problems": len(split.held_out),
            "held_out_sha256": task.digest(split.held_out),
        },
        "loss_curve": [[step, round(loss, 6)] for step, loss in result.curve],
        "held_out_accuracy_curve": [[step, acc] for step, acc in result.accuracy_curve],
        "final_loss": round(float(np.mean(result.losses[-cfg.log_every :])), 6),
        "saved_dtype": "float32",
        "saved_held_out_accuracy": saved_accuracy,
        "sha256": sha256,
        "environment": blas_environment(),
    }
    if wall_seconds is not None:
        record["wall_seconds"] = round(wall_seconds, 2)
    return record


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``python -m llmfs.gpt.train``."""
    parser.add_argument("--out", type=Path, required=True, help="weights file to write (.npz)")
    parser.add_argument(
        "--figures", type=Path, default=None, help="folder for capstone_loss.* (default figures/)"
    )
    parser.add_argument("--no-figure", action="store_true", help="do not draw the loss curve")
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="numpy",
        help="numpy: backpropagation by hand (the shipped weights); tensor: llmfs.tensor autograd",
    )
    parser.add_argument(
        "--backend", default="numpy", help="the tensor engine's llmfs.tensor backend (numpy)"
    )
    parser.add_argument(
        "--dtype",
        choices=("float64", "float32"),
        default="float64",
        help="the tensor engine's dtype (the numpy engine trains in float64)",
    )
    parser.add_argument("--seed", type=int, default=TrainConfig.seed)
    parser.add_argument("--steps", type=int, default=TrainConfig.steps)
    parser.add_argument("--batch-size", type=int, default=TrainConfig.batch_size)


def main(argv: Sequence[str] | None = None) -> int:
    """Trains, saves and reports; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m llmfs.gpt.train", description=__doc__.split("\n")[0]
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.engine == "numpy" and (args.backend != "numpy" or args.dtype != "float64"):
        parser.error("--backend and --dtype choose the tensor engine's; use --engine tensor")
    try:
        cfg = TrainConfig(seed=args.seed, steps=args.steps, batch_size=args.batch_size)
    except ConfigError as error:
        parser.error(str(error))
    config = TINY_CONFIG
    what = (
        "numpy engine"
        if args.engine == "numpy"
        else (f"tensor engine, backend {args.backend}, {args.dtype}")
    )
    print(f"model: {config} ({count_parameters(config)} parameters); {what}")
    progress = ProgressBar(cfg.steps)
    start = time.perf_counter()
    if args.engine == "numpy":
        result = train(config, cfg, log=progress.write, progress=progress)
    else:
        # Loaded on use: the numpy engine never imports the tensor library.
        from llmfs.gpt import tensor_train

        result = tensor_train.train(
            config,
            cfg,
            log=progress.write,
            backend=args.backend,
            dtype=np.dtype(args.dtype),
            progress=progress,
        )
    seconds = time.perf_counter() - start
    progress.close()
    path = save_params(result.params, args.out)
    checksum = write_checksum(path)
    saved = load_params(path)
    saved_accuracy = reference.held_out_accuracy(saved, config)
    sha = checksum.read_text().split()[0]
    command = "python -m llmfs.gpt.train " + " ".join(sys.argv[1:] if argv is None else list(argv))
    record = make_record(
        config,
        cfg,
        result,
        saved_accuracy,
        sha,
        engine=args.engine,
        backend=args.backend,
        dtype=args.dtype,
        wall_seconds=seconds,
        command=command,
    )
    record_path = path.with_suffix(".json")
    record_path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"trained {cfg.steps} steps in {seconds:.1f} s; final loss {record['final_loss']}")
    held = len(task.split().held_out)
    print(f"held-out accuracy of the saved weights: {saved_accuracy:.4f} ({held} problems)")
    print(f"wrote {path} ({path.stat().st_size} bytes), {checksum}, {record_path}")
    if not args.no_figure:
        # Loaded on use: the figure needs matplotlib, which --no-figure runs never import.
        from llmfs.gpt.plot import write_loss_figure

        for written in write_loss_figure(record, args.figures or default_figures_folder()):
            print(f"wrote {written}")
    return 0


__all__ = [
    "COMMAND",
    "ENGINES",
    "ProgressBar",
    "RunLog",
    "TrainConfig",
    "TrainResult",
    "adamw_update",
    "answer_weights",
    "batches",
    "decays",
    "forward_with_cache",
    "learning_rate",
    "loss_and_grads",
    "main",
    "make_record",
    "openblas_core",
    "train",
    "training_data",
]


if __name__ == "__main__":
    sys.exit(main())
