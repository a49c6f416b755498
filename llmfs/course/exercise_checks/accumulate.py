"""Checks of chapter 10's gradient exercises: cross-entropy's closed-form gradient, and
gradient accumulation over parts of a batch.

* ``cross_entropy_grad(logits, targets, weights)``: the gradient of the weighted mean
  cross-entropy with respect to the logits, written in closed form (NumPy), against the library's
  autograd through chapter 10's cross-entropy (:func:`.training.cross_entropy_reference` gives
  the same), to 1e-9. The cases reuse the cross-entropy exercise's: masks, fractional weights and
  logits of 1,000 (where a softmax without the largest logit subtracted overflows).
* ``accumulate_grads(leaves, parts, loss_of)``: one step's gradient from a batch cut into parts
  (Hugging Face's ``gradient_accumulation_steps``): the leaves hold a ``.grad`` left over from an
  earlier step, the parts have unequal sizes and weights, and ``loss_of`` gives a part's own
  weighted mean. The answer is each leaf's ``.grad`` afterwards, which must equal the gradient
  of the whole batch's loss to 1e-12 (float64). Forgetting to clear the old gradients, adding
  the parts' means unscaled, or scaling by the count of parts instead of their weights fails.

It also holds the warm-up experiment of q3 (:func:`early_losses`), so that the notebook and the
test that holds its answer over five seeds run the same code, and the short runs of the knob
questions (:func:`short_training_run`). Both remember their runs for the process: a predict
check evaluates its expression in a fresh fixture, and without them every check would repeat
runs that the notebook's cells (with a progress bar) have just made.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections.abc import Callable
from typing import Any

import numpy as np

import llmfs.tensor as lt
from llmfs.course.exercise_checks.report import CheckReport
from llmfs.course.exercise_checks.shortcuts import Shortcuts
from llmfs.course.exercise_checks.spec import ImplementSpec, register
from llmfs.course.exercise_checks.training import (
    _ce_arrays,
    _ce_cases,
    _ce_size,
    cross_entropy_reference,
)
from llmfs.gpt import train as numpy_train
from llmfs.gpt.experiment import blas_threads
from llmfs.gpt.model import GPTConfig, init_params
from llmfs.tensor import Tensor, TensorView

#: Largest difference from the library's gradient that counts as equal, per exercise.
GRAD_TOLERANCE = 1e-9
ACCUMULATE_TOLERANCE = 1e-12
AGREES = "agrees"

_BACKWARD = "llmfs.tensor.autograd.backward"


def _difference(got: Any, want: np.ndarray, tolerance: float) -> str:
    if isinstance(got, (Tensor, TensorView)):
        got = got.to_numpy()
    try:
        array = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        return f"a {type(got).__name__}, not an array of numbers"
    if array.shape != want.shape:
        return f"shape {list(array.shape)}, not {list(want.shape)}"
    if not np.isfinite(array).all():
        return "not finite (inf or nan)"
    error = float(np.abs(array - want).max()) if array.size else 0.0
    return AGREES if error <= tolerance else f"differs by {error:.3g}"


# -- cross_entropy_grad(logits, targets, weights) ---------------------------------------------


def _grad_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    return _ce_arrays(case)


def library_ce_grad(logits: np.ndarray, targets: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """d(loss)/d(logits) of the weighted mean cross-entropy by the library's autograd (the
    log-sum-exp loss on tensors, ``backward()``)."""
    leaf = Tensor.from_numpy(logits, requires_grad=True)
    top = lt.max(leaf.detach(), axis=-1, keepdims=True)
    shifted = leaf - top
    lse = lt.log(lt.sum(lt.exp(shifted), axis=-1))
    onehot = Tensor.from_numpy(np.eye(logits.shape[-1])[targets])
    picked = lt.sum(shifted * onehot, axis=-1)
    loss = lt.sum((lse - picked) * Tensor.from_numpy(weights)) / float(weights.sum())
    loss.backward()
    assert leaf.grad is not None
    return leaf.grad.to_numpy()


def _grad_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    logits, targets, weights = call_args
    return {
        "dlogits": _difference(result, library_ce_grad(logits, targets, weights), GRAD_TOLERANCE)
    }


def _grad_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    text = str(got.get("dlogits", "")) if isinstance(got, dict) else ""
    if "not finite" in text:
        return "subtract each position's largest logit before exp: softmax is unchanged by it"
    if "differs" not in text:
        return None
    logits, targets, weights = _ce_arrays(case)
    _, grad = cross_entropy_reference(logits, targets, weights)
    return (
        "the loss is a weighted MEAN: each position's softmax minus one-hot is weighted by its "
        "weight and divided by the total weight"
        if np.abs(grad).max() > 0
        else None
    )


# -- accumulate_grads(leaves, parts, loss_of) -------------------------------------------------


def _accumulate_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for _ in range(n):
        rows = rng.randint(2, 12)
        count = rng.randint(2, min(4, rows))
        cuts = sorted(rng.sample(range(1, rows), count - 1))
        cases.append(
            (
                {
                    "rows": rows,
                    "features": rng.randint(1, 4),
                    "vocab": rng.randint(2, 6),
                    "cuts": cuts,
                    "weights": rng.choice(("ones", "mask", "fractional")),
                    "stale": rng.random() < 0.7,  # a .grad left over from an earlier step
                    "seed": rng.randrange(10**6),
                },
            )
        )
    return cases


def _batch(case: dict[str, Any]) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(case["seed"])
    rows, features, vocab = case["rows"], case["features"], case["vocab"]
    x = rng.normal(size=(rows, features))
    targets = rng.integers(0, vocab, size=rows)
    if case["weights"] == "ones":
        weights = np.ones(rows)
    elif case["weights"] == "mask":
        weights = (rng.random(rows) < 0.6).astype(np.float64)
        for start, end in zip([0, *case["cuts"]], [*case["cuts"], rows]):
            weights[rng.integers(start, end)] = 1.0  # every part counts somewhere
    else:
        weights = rng.uniform(0.1, 2.0, size=rows)
    w = rng.normal(size=(features, vocab))
    b = rng.normal(size=vocab)
    return x, targets, weights, w, b


def linear_loss(leaves: dict[str, Any], x: Any, targets: Any, weights: Any) -> Any:
    """The weighted mean cross-entropy of a linear model ``x @ W + b`` on one part (a tensor of
    shape ``[]``, recorded for backward)."""
    logits = Tensor.from_numpy(np.asarray(x)) @ leaves["W"] + leaves["b"]
    top = lt.max(logits.detach(), axis=-1, keepdims=True)
    shifted = logits - top
    lse = lt.log(lt.sum(lt.exp(shifted), axis=-1))
    onehot = Tensor.from_numpy(np.eye(logits.shape[-1])[np.asarray(targets)])
    picked = lt.sum(shifted * onehot, axis=-1)
    w = np.asarray(weights, dtype=np.float64)
    return lt.sum((lse - picked) * Tensor.from_numpy(w)) / float(w.sum())


def _leaves(case: dict[str, Any]) -> dict[str, Tensor]:
    _, _, _, w, b = _batch(case)
    leaves = {
        "W": Tensor.from_numpy(w.copy(), requires_grad=True),
        "b": Tensor.from_numpy(b.copy(), requires_grad=True),
    }
    if case["stale"]:
        stale = np.random.default_rng(case["seed"] + 1)
        for leaf in leaves.values():
            leaf.grad = Tensor.from_numpy(stale.normal(size=leaf.shape))
    return leaves


def _parts(case: dict[str, Any]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    x, targets, weights, _, _ = _batch(case)
    bounds = list(zip([0, *case["cuts"]], [*case["cuts"], case["rows"]]))
    return [(x[a:e], targets[a:e], weights[a:e]) for a, e in bounds]


def whole_batch_grads(case: dict[str, Any]) -> dict[str, np.ndarray]:
    """The gradient of the whole batch's loss, by the library's ``backward()`` on fresh leaves."""
    x, targets, weights, w, b = _batch(case)
    leaves = {
        "W": Tensor.from_numpy(w.copy(), requires_grad=True),
        "b": Tensor.from_numpy(b.copy(), requires_grad=True),
    }
    linear_loss(leaves, x, targets, weights).backward()
    return {name: leaf.grad.to_numpy() for name, leaf in leaves.items() if leaf.grad is not None}


def _accumulate_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    return _leaves(case), _parts(case), linear_loss, case


def _accumulate_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    leaves, parts, loss_of, _ = args
    return fn(leaves, parts, loss_of)


def _accumulate_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    leaves, _, _, case = call_args
    want = whole_batch_grads(case)
    out: dict[str, str] = {}
    stale = _leaves(case)  # what the leaves held before the call
    for name, leaf in leaves.items():
        grad = leaf.grad
        if grad is None:
            out[name] = "no .grad"
            continue
        out[name] = _difference(grad.to_numpy(), want[name], ACCUMULATE_TOLERANCE)
        before = stale[name].grad
        if out[name] != AGREES and before is not None:
            kept = grad.to_numpy() - before.to_numpy()
            if np.abs(kept - want[name]).max() <= 1e-9:
                out[name] += ", by the .grad held before"
    return out


def _accumulate_reference(case: dict[str, Any]) -> dict[str, str]:
    return {"W": AGREES, "b": AGREES}


def _accumulate_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if not isinstance(got, dict) or all(v == AGREES for v in got.values()):
        return None
    if any("held before" in str(v) for v in got.values()):
        return (
            "a .grad from an earlier step is still there and backward adds to it: clear every "
            "leaf's gradient (zero_grad) before the first part; then each part's loss, scaled "
            "by its share of the batch's total weight, adds its part"
        )
    return (
        "each part's loss is a mean over the part alone: weight it by the part's share of the "
        "whole batch's weight before backward, so the parts' gradients add up to the batch's"
    )


check_cross_entropy_grad = register(
    ImplementSpec(
        "ch10.cross_entropy_grad",
        "cross_entropy_grad",
        _ce_cases,
        lambda case: {"dlogits": AGREES},
        cases=90,
        prepare=_grad_prepare,
        summarize=_grad_summary,
        parameters=("logits", "targets", "weights"),
        shortcuts=Shortcuts(
            (
                _BACKWARD,
                "llmfs.course.exercise_checks.training.cross_entropy_reference",
                "llmfs.gpt.train.loss_and_grads",
            ),
            "np.exp, np.max, np.sum and a one-hot array",
        ),
        size=_ce_size,
        explain=_grad_explain,
    ),
    "Checks ``cross_entropy_grad(logits, targets, weights) -> d(loss)/d(logits)`` (NumPy, the "
    "closed form of the weighted mean cross-entropy's gradient) against the library's "
    "autograd, to 1e-9.",
)
check_accumulate_grads = register(
    ImplementSpec(
        "ch10.accumulate_grads",
        "accumulate_grads",
        _accumulate_cases,
        _accumulate_reference,
        cases=60,
        prepare=_accumulate_prepare,
        call=_accumulate_call,
        summarize=_accumulate_summary,
        parameters=("case",),
        shortcuts=Shortcuts(
            ("llmfs.course.exercise_checks.accumulate.whole_batch_grads",),
            "loss_of on each part, a scale and backward()",
        ),
        size=lambda case: (case["rows"], len(case["cuts"])),
        explain=_accumulate_explain,
    ),
    "Checks ``accumulate_grads(leaves, parts, loss_of)``: after it, every leaf's .grad is the "
    "whole batch's gradient (to 1e-12), whatever .grad the leaves held before.",
)

# -- the warm-up experiment of chapter 10's q3 --------------------------------------------------

#: The short runs' model and settings (chapter 10's "three knobs" baseline), at the large rate.
EARLY_CONFIG = GPTConfig(vocab_size=12, n_ctx=8, n_embd=32, n_head=2, n_layer=1)
EARLY_BASELINE: dict[str, float] = {
    "steps": 30,
    "batch_size": 16,
    "warmup_steps": 10,
    "learning_rate": 0.1,
}


#: Runs already made in this process, by what determines them (the runs are deterministic, so a
#: check's fixture and the notebook's cells share one run instead of repeating it).
_EARLY: dict[tuple[Any, ...], float] = {}
_RUNS: dict[tuple[GPTConfig, Any], Any] = {}


def _digest(data: np.ndarray) -> tuple[Any, ...]:
    array = np.ascontiguousarray(data)
    return (array.shape, array.dtype.str, hashlib.sha256(array.tobytes()).hexdigest())


def early_losses(
    data: np.ndarray, seed: int, warmup_steps: int, lr: float = 0.1, steps: int = 6
) -> float:
    """The NumPy trainer's first ``steps`` steps on :data:`EARLY_CONFIG` (its batches and its
    schedule of :data:`EARLY_BASELINE`, with ``warmup_steps`` and ``lr``): the mean loss of the
    steps after the first update (the first loss is the initial weights', the same for both
    settings). Computed once per process for each set of arguments (keyed by the data's
    contents, not its identity)."""
    key = (_digest(data), int(seed), int(warmup_steps), float(lr), int(steps))
    if key not in _EARLY:
        with blas_threads(1):  # small products: a second BLAS thread only waits
            _EARLY[key] = _early_losses(data, seed, warmup_steps, lr, steps)
    return _EARLY[key]


def short_training_run(config: GPTConfig, cfg: Any) -> Any:
    """``llmfs.gpt.train.train(config, cfg)`` on the training half of the course's split (with
    one held-out problem, as the runs do not evaluate), made once per process for each
    ``(config, cfg)``, both frozen values: chapter 10's knob questions and the cells that show
    their runs read the same run. Returns a copy (a new :class:`TrainResult` whose parameter
    arrays and losses are copies), so a caller that changes it changes no later answer."""
    from llmfs.gpt import task

    key = (config, cfg)
    if key not in _RUNS:
        split = task.split()
        with blas_threads(1):
            _RUNS[key] = numpy_train.train(config, cfg, split.train, split.held_out[:1])
    run = _RUNS[key]
    return dataclasses.replace(
        run,
        params={name: value.copy() for name, value in run.params.items()},
        losses=list(run.losses),
        curve=list(run.curve),
        accuracy_curve=list(run.accuracy_curve),
    )


def _early_losses(data: np.ndarray, seed: int, warmup_steps: int, lr: float, steps: int) -> float:
    cfg = numpy_train.TrainConfig(
        seed=seed,
        steps=int(EARLY_BASELINE["steps"]),
        batch_size=int(EARLY_BASELINE["batch_size"]),
        warmup_steps=warmup_steps,
        learning_rate=lr,
        eval_every=10**6,
    )
    params = init_params(EARLY_CONFIG, seed=seed)
    m = {k: np.zeros_like(v) for k, v in params.items()}
    s = {k: np.zeros_like(v) for k, v in params.items()}
    weights = numpy_train.answer_weights(cfg.batch_size)
    losses = []
    for step, batch in zip(range(steps), numpy_train.batches(data, cfg)):
        loss, grads = numpy_train.loss_and_grads(
            params, EARLY_CONFIG, batch[:, :-1], batch[:, 1:], weights
        )
        numpy_train.adamw_update(
            params, grads, m, s, step, numpy_train.learning_rate(step, cfg), cfg
        )
        losses.append(loss)
    return float(np.mean(losses[1:]))


def warmup_verdict(ratios: list[float]) -> str:
    """``"higher"`` when every ratio (loss without warm-up over loss with it) is above 1.02,
    ``"lower"`` when every one is below 0.98, else ``"mixed"``."""
    if all(r > 1.02 for r in ratios):
        return "higher"
    if all(r < 0.98 for r in ratios):
        return "lower"
    return "mixed"


#: Exercise id -> check (chapter 10's gradient exercises).
ACCUMULATE_CHECKS: dict[str, Callable[..., CheckReport]] = {
    "ch10.cross_entropy_grad": check_cross_entropy_grad,
    "ch10.accumulate_grads": check_accumulate_grads,
}

__all__ = [
    "ACCUMULATE_CHECKS",
    "ACCUMULATE_TOLERANCE",
    "EARLY_BASELINE",
    "EARLY_CONFIG",
    "check_accumulate_grads",
    "check_cross_entropy_grad",
    "early_losses",
    "library_ce_grad",
    "linear_loss",
    "short_training_run",
    "warmup_verdict",
    "whole_batch_grads",
]
