"""Checks of chapter 10's "implement it" exercises: training the capstone GPT on ``llmfs.tensor``.

Every check holds the learner's function to the NumPy trainer, :mod:`llmfs.gpt.train`, on random
cases drawn from a seed (a case is one plain JSON object of sizes, hyperparameters and a seed;
its ``prepare`` draws the arrays, float64):

* ``cross_entropy(logits, targets, weights)``: the weighted mean cross-entropy that
  :func:`llmfs.gpt.train.loss_and_grads` computes, and, through the library's autograd
  (``loss.backward()``), its gradient with respect to the logits, the ``dlogits`` that
  ``loss_and_grads`` writes by hand (``(softmax - onehot) * weight / total``). The reference here is
  the log-sum-exp form (:func:`cross_entropy_reference`): it equals ``loss_and_grads``'s value
  wherever that is finite, and stays finite on the hostile cases the checks draw on purpose
  (logits offset by up to 1000, where ``exp`` overflows, and spread wide enough that a target's
  softmax probability underflows to 0, where ``log(softmax)`` is ``-inf``).
* ``learning_rate(step, cfg)``: :func:`llmfs.gpt.train.learning_rate`, with the edge cases of its
  formula: no warm-up, a schedule no longer than its warm-up, steps past the end.
* ``adamw_step(param, grad, m, s, step, lr, cfg, decay)``: one AdamW update of one parameter.
  ``train.py`` writes it inline in :func:`llmfs.gpt.train.train`'s loop, not as a function, so
  :func:`adamw_reference` here is that loop body, the same formulas in the same order (a test pins
  it to ``train()``). Cases include zero-size parameters, the first step (bias correction divides
  by ``1 - beta1``), gradients of ``1e-12`` (where ``eps`` decides) and of ``1e100``.
* ``train(config, cfg, data, on_step=None)``: the whole loop, on small random GPTs, compared with
  :func:`train_reference`, which is :func:`llmfs.gpt.train.train` on the same sequences (same
  initialisation, same batches, same AdamW; a test pins the two to each other bit for bit).

A float result agrees when its largest difference from the reference is at most
:data:`TOLERANCE` times the reference's largest magnitude (at least 1): float64 throughout, so
only the order of summation may differ. A zero-size batch is not drawn for the loss: its mean
over no positions is 0/0, in the NumPy trainer too.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from llmfs.course.exercise_checks.report import CheckReport
from llmfs.course.exercise_checks.shortcuts import Shortcuts
from llmfs.course.exercise_checks.spec import ImplementSpec, register
from llmfs.gpt import task
from llmfs.gpt import train as numpy_train
from llmfs.gpt.model import GPTConfig, Params, init_params
from llmfs.tensor import Tensor, TensorView

#: Largest difference from the reference, relative to its largest magnitude (at least 1).
TOLERANCE = 1e-9
AGREES = f"< {TOLERANCE:g}"
ERROR_KEY = "max |difference| from NumPy"


def _short(value: float) -> float:
    """``value`` to 3 significant digits: a case reads as settings a person would choose."""
    return float(f"{value:.3g}")


def _difference(got: Any, want: np.ndarray) -> str:
    """``AGREES`` or the largest relative difference, for one array."""
    got = np.asarray(got, dtype=np.float64)
    if got.shape != want.shape:
        return f"shape {list(got.shape)}, expected {list(want.shape)}"
    if got.size == 0:
        return AGREES
    if not np.all(np.isfinite(got)) and np.all(np.isfinite(want)):
        return "inf or nan"
    scale = max(1.0, float(np.abs(want).max()))
    error = float(np.abs(got - want).max()) / scale
    return AGREES if error <= TOLERANCE else f"{error:.3g}"


def _as_array(value: Any) -> Any:
    if isinstance(value, (Tensor, TensorView)):
        return value.to_numpy()
    return value


# -- cross_entropy(logits, targets, weights) ---------------------------------------------------


def cross_entropy_reference(
    logits: np.ndarray, targets: np.ndarray, weights: np.ndarray
) -> tuple[float, np.ndarray]:
    """``(loss, dlogits)``: the weighted mean over positions of ``logsumexp(logits) -
    logits[target]``, and its gradient ``(softmax(logits) - onehot(target)) * weights / total``,
    as :func:`llmfs.gpt.train.loss_and_grads` defines them (``total = weights.sum()``)."""
    top = logits.max(axis=-1, keepdims=True)
    shifted = logits - top
    lse = np.log(np.exp(shifted).sum(axis=-1))
    picked = np.take_along_axis(shifted, targets[..., None], axis=-1)[..., 0]
    total = weights.sum()
    loss = float(((lse - picked) * weights).sum() / total)
    probs = np.exp(shifted - lse[..., None])
    onehot = np.zeros_like(probs)
    np.put_along_axis(onehot, targets[..., None], 1.0, axis=-1)
    return loss, (probs - onehot) * (weights / total)[..., None]


def _ce_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for k in range(n):
        hostile = k % 3 == 2  # every third case: logits a naive softmax cannot take
        cases.append(
            (
                {
                    "shape": [rng.randint(1, 3), rng.randint(1, 4), rng.randint(2, 12)],
                    "offset": rng.choice((-1000.0, 800.0, 1000.0)) if hostile else 0.0,
                    "spread": rng.choice((60.0, 200.0)) if hostile else rng.choice((0.5, 2.0)),
                    "weights": rng.choice(("ones", "mask", "mask", "fractional")),
                    "seed": rng.randrange(10**6),
                },
            )
        )
    return cases


def _ce_arrays(case: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(case["seed"])
    batch, positions, vocab = case["shape"]
    shape = (batch, positions)
    logits = case["offset"] + case["spread"] * rng.normal(size=(batch, positions, vocab))
    targets = rng.integers(0, vocab, size=shape)
    if case["weights"] == "ones":
        weights = np.ones(shape)
    elif case["weights"] == "mask":  # positions that do not count, as the prompt's
        weights = (rng.random(shape) < 0.5).astype(np.float64)
        weights.flat[rng.integers(weights.size)] = 1.0
    else:
        weights = rng.uniform(0.1, 2.0, size=shape)
    return logits, targets, weights


def _ce_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    logits, targets, weights = _ce_arrays(case)
    return Tensor.from_numpy(logits, requires_grad=True), targets, weights


def _ce_reference(case: dict[str, Any]) -> Any:
    return {"loss": AGREES, "dlogits": AGREES}


def _ce_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    logits, targets, weights = call_args
    want_loss, want_grad = cross_entropy_reference(logits.to_numpy(), targets, weights)
    if not isinstance(result, (Tensor, TensorView)):
        return {"result": f"a {type(result).__name__}, not a Tensor"}
    if list(result.shape) != []:
        return {"result": f"shape {list(result.shape)}, not a single value (shape [])"}
    summary = {"loss": _difference(result.to_numpy(), np.asarray(want_loss))}
    if not result.requires_grad:
        summary["dlogits"] = "no gradient: the loss was not computed from logits by the library"
        return summary
    result.backward()
    grad = logits.grad
    summary["dlogits"] = (
        "no gradient reached logits" if grad is None else _difference(grad.to_numpy(), want_grad)
    )
    return summary


def _ce_size(case: dict[str, Any]) -> tuple[int, ...]:
    return (int(np.prod(case["shape"])), 3)


# -- learning_rate(step, cfg) ------------------------------------------------------------------


def _lr_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for _ in range(n):
        warmup = rng.choice((0, 0, 1, rng.randint(2, 20)))
        # A schedule has at least one step (TrainConfig refuses 0); one as long as its warm-up.
        steps = rng.choice((max(1, warmup), max(1, warmup), warmup + rng.randint(1, 50)))
        step = rng.choice((0, warmup, max(0, warmup - 1), steps, rng.randint(0, steps + 10)))
        case = {
            "step": step,
            "learning_rate": rng.choice((3e-3, 1e-2, _short(rng.uniform(1e-4, 0.1)))),
            "warmup_steps": warmup,
            "steps": steps,
            "min_lr_ratio": rng.choice((0.0, 0.05, 1.0, _short(rng.random()))),
        }
        cases.append((case,))
    return cases


def _lr_config(case: dict[str, Any]) -> numpy_train.TrainConfig:
    return numpy_train.TrainConfig(
        learning_rate=case["learning_rate"],
        warmup_steps=case["warmup_steps"],
        steps=case["steps"],
        min_lr_ratio=case["min_lr_ratio"],
    )


def _lr_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    return case["step"], _lr_config(case)


def _lr_reference(case: dict[str, Any]) -> float:
    return numpy_train.learning_rate(case["step"], _lr_config(case))


def _lr_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    if isinstance(result, (bool, np.bool_)) or not isinstance(result, (int, float, np.number)):
        return {"result": f"a {type(result).__name__}, not a number"}
    return float(result)


def _lr_size(case: dict[str, Any]) -> tuple[int, ...]:
    return (case["steps"] + case["step"], 1)


# -- adamw_step(param, grad, m, s, step, lr, cfg, decay) ----------------------------------------


def adamw_reference(
    param: np.ndarray,
    grad: np.ndarray,
    m: np.ndarray,
    s: np.ndarray,
    step: int,
    lr: float,
    cfg: numpy_train.TrainConfig,
    decay: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One AdamW update, ``(param, m, s)`` after step ``step`` (0-based), exactly as the loop of
    :func:`llmfs.gpt.train.train` writes it: the moments, their bias correction by ``1 - beta **
    (step + 1)``, the decoupled decay ``param * (1 - lr * weight_decay)`` when ``decay``, then
    ``param - lr * m_hat / (sqrt(s_hat) + eps)``. The inputs are not changed."""
    m = cfg.beta1 * m + (1 - cfg.beta1) * grad
    s = cfg.beta2 * s + (1 - cfg.beta2) * grad * grad
    m_hat = m / (1 - cfg.beta1 ** (step + 1))
    s_hat = s / (1 - cfg.beta2 ** (step + 1))
    value = param.copy()
    if decay:
        value *= 1.0 - lr * cfg.weight_decay
    value -= lr * m_hat / (np.sqrt(s_hat) + cfg.adam_eps)
    return value, m, s


def _adamw_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for _ in range(n):
        rank = rng.randint(1, 2)
        shape = [rng.choice((0, 1, 2, 3, 4)) if rng.random() < 0.15 else rng.randint(1, 4)]
        shape += [rng.randint(1, 4) for _ in range(rank - 1)]
        case = {
            "shape": shape,
            "step": rng.choice((0, 0, 1, rng.randint(2, 30), 1000)),
            "lr": rng.choice((3e-3, _short(rng.uniform(1e-4, 0.1)))),
            "beta1": rng.choice((0.9, _short(rng.uniform(0.5, 0.99)))),
            # At most 0.999, so that three significant digits never round it to 1 (where the
            # bias correction would divide by 1 - 1).
            "beta2": rng.choice((0.98, 0.999, _short(rng.uniform(0.9, 0.999)))),
            "eps": rng.choice((1e-8, 1e-6)),
            "weight_decay": rng.choice((0.01, 0.1, _short(rng.uniform(0.0, 0.5)))),
            "decay": rng.random() < 0.6,
            "grad_scale": rng.choice((1.0, 1.0, 1e-3, 1e-12, 1e100)),
            "seed": rng.randrange(10**6),
        }
        cases.append((case,))
    return cases


def _adamw_config(case: dict[str, Any]) -> numpy_train.TrainConfig:
    return numpy_train.TrainConfig(
        beta1=case["beta1"],
        beta2=case["beta2"],
        adam_eps=case["eps"],
        weight_decay=case["weight_decay"],
    )


def _adamw_arrays(case: dict[str, Any]) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(case["seed"])
    shape, scale = tuple(case["shape"]), case["grad_scale"]
    param = rng.normal(size=shape)
    grad = scale * rng.normal(size=shape)
    if case["step"] == 0:  # the moments start at zero
        m, s = np.zeros(shape), np.zeros(shape)
    else:
        m = 0.5 * scale * rng.normal(size=shape)
        s = (scale * rng.normal(size=shape)) ** 2
    return param, grad, m, s


def _adamw_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    param, grad, m, s = _adamw_arrays(case)
    return param, grad, m, s, case["step"], case["lr"], _adamw_config(case), case["decay"]


def _with_inputs(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    # The inputs as they were before the call: an answer that updates its arrays in place (and
    # returns them) is compared with the update of the values it was given.
    before = tuple(np.copy(a) if isinstance(a, np.ndarray) else a for a in args)
    return fn(*args), before


_ADAMW_NAMES = ("param", "m", "s")


def _adamw_summary(pair: Any, call_args: tuple[Any, ...]) -> Any:
    result, before = pair
    want = adamw_reference(*before)
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        return {"result": "not a tuple (param, m, s) of three arrays"}
    return {name: _difference(_as_array(g), w) for name, g, w in zip(_ADAMW_NAMES, result, want)}


def _adamw_reference_outcome(case: dict[str, Any]) -> Any:
    return {name: AGREES for name in _ADAMW_NAMES}


def _adamw_size(case: dict[str, Any]) -> tuple[int, ...]:
    return (int(np.prod(case["shape"])), len(case["shape"]))


# -- train(config, cfg, data, on_step=None) ----------------------------------------------------


def train_reference(
    config: GPTConfig, cfg: numpy_train.TrainConfig, data: np.ndarray
) -> tuple[Params, list[float]]:
    """``(params, losses)`` of :func:`llmfs.gpt.train.train` on the token sequences ``data``
    (``[N, 9]``): parameters from ``init_params(config, seed=cfg.seed)``, batches
    ``data[rng.integers(0, len(data), size=cfg.batch_size)]`` from ``default_rng(cfg.seed)``, the
    loss of the answer positions (:func:`~llmfs.gpt.train.answer_weights`), the learning rate of
    :func:`~llmfs.gpt.train.learning_rate`, and :func:`adamw_reference` on every parameter, with
    decay where :func:`~llmfs.gpt.train.decays` says."""
    rng = np.random.default_rng(cfg.seed)
    params = init_params(config, seed=cfg.seed)
    m = {n: np.zeros_like(v) for n, v in params.items()}
    s = {n: np.zeros_like(v) for n, v in params.items()}
    weights = numpy_train.answer_weights(cfg.batch_size)
    losses: list[float] = []
    for step in range(cfg.steps):
        batch = data[rng.integers(0, len(data), size=cfg.batch_size)]
        loss, grads = numpy_train.loss_and_grads(
            params, config, batch[:, :-1], batch[:, 1:], weights
        )
        losses.append(loss)
        lr = numpy_train.learning_rate(step, cfg)
        for name in params:
            params[name], m[name], s[name] = adamw_reference(
                params[name], grads[name], m[name], s[name], step, lr, cfg, numpy_train.decays(name)
            )
    return params, losses


def _train_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for _ in range(n):
        steps = rng.randint(1, 3)
        case = {
            "layers": rng.randint(1, 2),
            "heads": rng.randint(1, 2),
            "head_size": rng.randint(2, 4),
            "batch": rng.randint(1, 4),
            "steps": steps,
            "warmup_steps": rng.randint(0, steps),
            "learning_rate": rng.choice((3e-3, 3e-2)),
            "weight_decay": rng.choice((0.01, 0.3)),
            "problems": rng.randint(1, 20),
            "seed": rng.randrange(10**6),
        }
        cases.append((case,))
    return cases


def _train_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    config = GPTConfig(
        vocab_size=len(task.VOCAB),
        n_ctx=task.SEQUENCE_LENGTH - 1,
        n_embd=case["heads"] * case["head_size"],
        n_head=case["heads"],
        n_layer=case["layers"],
    )
    cfg = numpy_train.TrainConfig(
        seed=case["seed"],
        steps=case["steps"],
        batch_size=case["batch"],
        learning_rate=case["learning_rate"],
        warmup_steps=case["warmup_steps"],
        weight_decay=case["weight_decay"],
    )
    problems = task.all_problems()
    picked = np.random.default_rng(case["seed"] + 1).choice(len(problems), case["problems"])
    return config, cfg, task.sequences(problems[picked])


def _train_summary(pair: Any, call_args: tuple[Any, ...]) -> Any:
    result, (config, cfg, data) = pair
    want_params, want_losses = train_reference(config, cfg, data)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return {"result": "not a pair (params, losses)"}
    params, losses = result
    summary: dict[str, Any] = {}
    try:
        got_losses = [float(_as_array(v)) for v in losses]
    except (TypeError, ValueError):
        return {"result": "losses is not a list of numbers"}
    if len(got_losses) != len(want_losses):
        summary["losses"] = f"{len(got_losses)} losses for {cfg.steps} steps"
    else:
        summary["losses"] = _difference(got_losses, np.asarray(want_losses))
        if summary["losses"] != AGREES:
            first = next(
                k
                for k, (g, w) in enumerate(zip(got_losses, want_losses))
                if _difference(g, np.asarray(w)) != AGREES
            )
            summary["first differing step"] = (
                f"step {first}: {got_losses[first]:.6f}, NumPy {want_losses[first]:.6f}"
            )
    if not isinstance(params, dict) or set(params) != set(want_params):
        summary["params"] = "not a dict with every parameter's name"
        return summary
    worst = AGREES
    for name in sorted(want_params):
        difference = _difference(_as_array(params[name]), want_params[name])
        if difference != AGREES:
            worst = f"{name}: {difference}"
            break
    summary["params"] = worst
    return summary


def _train_reference_outcome(case: dict[str, Any]) -> Any:
    return {"losses": AGREES, "params": AGREES}


def _train_size(case: dict[str, Any]) -> tuple[int, ...]:
    values = case["batch"] * case["steps"] * case["heads"] * case["head_size"] * case["layers"]
    return (values, 3)


def _train_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    config, cfg, data = args
    before = (config, replace(cfg), np.copy(data))
    return fn(config, cfg, data), before


# -- specs -------------------------------------------------------------------------------------

_HERE = "llmfs.course.exercise_checks.training"

#: What each exercise may not call: the NumPy trainer's and the tensor engine's own function for
#: it, and this module's references.
SHORTCUTS: dict[str, Shortcuts] = {
    "ch10.cross_entropy": Shortcuts(
        (
            "llmfs.gpt.train.loss_and_grads",
            "llmfs.gpt.reference.softmax",
            "llmfs.gpt.tensor_model.softmax",
            "llmfs.gpt.tensor_train.cross_entropy",
            "llmfs.gpt.tensor_train.log_softmax",
            "llmfs.tensor.functional.softmax",
            "llmfs.tensor.functional.log_softmax",
            f"{_HERE}.cross_entropy_reference",
        ),
        "lt.max, lt.exp, lt.log, lt.sum and arithmetic on the logits tensor",
    ),
    "ch10.learning_rate": Shortcuts(
        ("llmfs.gpt.train.learning_rate", f"{_HERE}._lr_reference"),
        "math.cos and arithmetic",
    ),
    "ch10.adamw_step": Shortcuts(
        ("llmfs.gpt.train.train", "llmfs.gpt.tensor_train.AdamW.step", f"{_HERE}.adamw_reference"),
        "NumPy arithmetic and np.sqrt",
    ),
    "ch10.train": Shortcuts(
        (
            "llmfs.gpt.train.train",
            "llmfs.gpt.train.loss_and_grads",
            "llmfs.gpt.tensor_train.train",
            f"{_HERE}.train_reference",
            f"{_HERE}.adamw_reference",
        ),
        "the chapter-8 forward pass, your cross_entropy, backward(), your learning_rate and "
        "your adamw_step",
    ),
}

check_cross_entropy = register(
    ImplementSpec(
        "ch10.cross_entropy",
        "cross_entropy",
        _ce_cases,
        _ce_reference,
        cases=60,
        prepare=_ce_prepare,
        summarize=_ce_summary,
        parameters=("logits", "targets", "weights"),
        shortcuts=SHORTCUTS["ch10.cross_entropy"],
        size=_ce_size,
    ),
    "Checks ``cross_entropy(logits, targets, weights) -> Tensor`` (shape []): its value and, "
    "through backward(), its gradient with respect to the logits, against the NumPy trainer's, "
    "on random logits, a third of them offset by up to 1000 or spread wide (to 1e-9).",
)
check_learning_rate = register(
    ImplementSpec(
        "ch10.learning_rate",
        "learning_rate",
        _lr_cases,
        _lr_reference,
        cases=200,
        prepare=_lr_prepare,
        summarize=_lr_summary,
        parameters=("step", "cfg"),
        shortcuts=SHORTCUTS["ch10.learning_rate"],
        size=_lr_size,
    ),
    "Checks ``learning_rate(step, cfg) -> float`` (linear warm-up, then cosine decay to "
    "min_lr_ratio) against llmfs.gpt.train.learning_rate, to 1e-9 relative.",
)
check_adamw_step = register(
    ImplementSpec(
        "ch10.adamw_step",
        "adamw_step",
        _adamw_cases,
        _adamw_reference_outcome,
        cases=120,
        prepare=_adamw_prepare,
        summarize=_adamw_summary,
        parameters=("param", "grad", "m", "s", "step", "lr", "cfg", "decay"),
        call=_with_inputs,
        shortcuts=SHORTCUTS["ch10.adamw_step"],
        size=_adamw_size,
    ),
    "Checks ``adamw_step(param, grad, m, s, step, lr, cfg, decay) -> (param, m, s)`` against the "
    "AdamW update of llmfs.gpt.train.train, to 1e-9 relative.",
)
check_train = register(
    ImplementSpec(
        "ch10.train",
        "train",
        _train_cases,
        _train_reference_outcome,
        cases=8,
        prepare=_train_prepare,
        summarize=_train_summary,
        parameters=("config", "cfg", "data"),
        call=_train_call,
        shortcuts=SHORTCUTS["ch10.train"],
        size=_train_size,
    ),
    "Checks ``train(config, cfg, data) -> (params, losses)`` on small random GPTs: every step's "
    "loss and the final parameters against the NumPy trainer's, to 1e-9.",
)

#: Exercise id -> check (chapter 10's part of the package's CHECKS).
TRAINING_CHECKS: dict[str, Callable[..., CheckReport]] = {
    "ch10.cross_entropy": check_cross_entropy,
    "ch10.learning_rate": check_learning_rate,
    "ch10.adamw_step": check_adamw_step,
    "ch10.train": check_train,
}

__all__ = [
    "AGREES",
    "ERROR_KEY",
    "SHORTCUTS",
    "TOLERANCE",
    "TRAINING_CHECKS",
    "adamw_reference",
    "check_adamw_step",
    "check_cross_entropy",
    "check_learning_rate",
    "check_train",
    "cross_entropy_reference",
    "train_reference",
]
