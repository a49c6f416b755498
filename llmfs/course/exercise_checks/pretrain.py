"""Checks of chapter 13's "implement it" exercises: pretraining a GPT on text.

Every check holds the learner's function to the library's answer (the course's answer key) on
random cases drawn from a seed; each case is one JSON object of sizes and seeds, and ``prepare``
draws its arrays. Where a wrong answer shows a known mistake, the report names the rule it broke
(the spec's ``explain``), never the expected values.

* ``get_batch(stream, n_ctx, batch_size, rng)``: :func:`llmfs.gpt.text_batches.get_batch`, the
  same draw of the same generator (one ``rng.integers(0, len(stream) - n_ctx, size=batch_size)``),
  on streams from one window long to a few dozen windows. Named mistakes: targets not shifted,
  the last window never drawn, a window reaching past the stream.
* ``estimate_loss(model, batches)``: :func:`llmfs.gpt.text_eval.estimate_loss` on a random
  bigram model (logits looked up from a table that requires grad). The check also records whether
  the model was called with gradients recorded. Named mistakes: a sum instead of a mean,
  the perplexity instead of the loss, the forward pass recorded on the tape.
* ``clip_grad_norm(params, max_norm)``: :func:`llmfs.gpt.grad_clip.clip_grad_norm` on leaves
  holding random gradients, some above the threshold and some below. Named mistakes: each
  parameter clipped on its own norm, gradients scaled up below the threshold, values clipped one
  by one, the norm after clipping returned.
* ``save_and_load(state, path)``: writes a :class:`~llmfs.gpt.train_state.TrainState` to ``path``
  and reads it back as a new state. The check trains a small random run N steps, saves and loads,
  trains N more, and compares with 2N steps uninterrupted, bit for bit; the report says which part
  of the state came back different (weights, AdamW's moments, its step count, the step, the
  random stream).
* ``train(state, stream, until, clip=None, on_step=None)``: the loop,
  :func:`llmfs.gpt.text_training.train_steps`, from a small random state; the losses and final
  weights must agree to :data:`TOLERANCE`.
"""

from __future__ import annotations

import math
import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from llmfs.course.exercise_checks.report import CheckReport
from llmfs.course.exercise_checks.shortcuts import Shortcuts
from llmfs.course.exercise_checks.spec import ImplementSpec, register
from llmfs.gpt.experiment import TrainConfig
from llmfs.gpt.grad_clip import clip_grad_norm as clip_reference
from llmfs.gpt.model import GPTConfig
from llmfs.gpt.text_batches import get_batch as batch_reference
from llmfs.gpt.text_batches import window_count
from llmfs.gpt.text_eval import estimate_loss as estimate_reference
from llmfs.gpt.text_training import train_steps
from llmfs.gpt.train_state import TrainState, start_state, state_params
from llmfs.tensor import Tensor, TensorView
from llmfs.tensor.tape import is_grad_enabled

#: Largest difference from the reference, relative to its largest magnitude (at least 1).
TOLERANCE = 1e-9
AGREES = f"< {TOLERANCE:g}"
#: Clipping: PyTorch divides by ``norm + 1e-6``; a learner's ``norm`` alone is as right.
CLIP_TOLERANCE = 1e-5


def _as_array(value: Any) -> np.ndarray:
    if isinstance(value, (Tensor, TensorView)):
        return value.to_numpy()
    return np.asarray(value)


def _difference(got: Any, want: np.ndarray, tolerance: float = TOLERANCE) -> str:
    try:
        array = np.asarray(_as_array(got), dtype=np.float64)
    except (TypeError, ValueError):
        return f"a {type(got).__name__}, not numbers"
    if array.shape != want.shape:
        return f"shape {list(array.shape)}, expected {list(want.shape)}"
    if array.size == 0:
        return AGREES
    if not np.all(np.isfinite(array)):
        return "inf or nan"
    scale = max(1.0, float(np.abs(want).max()))
    error = float(np.abs(array - want).max()) / scale
    return AGREES if error <= tolerance else f"{error:.3g}"


# -- get_batch(stream, n_ctx, batch_size, rng) -------------------------------------------------


def _batch_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for k in range(n):
        n_ctx = rng.randint(1, 8)
        windows = 1 if k % 5 == 0 else rng.randint(2, 30)
        cases.append(
            (
                {
                    "tokens": n_ctx + windows,
                    "n_ctx": n_ctx,
                    "batch_size": rng.randint(1, 6),
                    "seed": rng.randrange(10**6),
                },
            )
        )
    return cases


def _batch_stream(case: dict[str, Any]) -> np.ndarray:
    # Distinct ids (a shuffled range) so a window's tokens say exactly where it starts.
    return np.random.default_rng(case["seed"] + 1).permutation(case["tokens"]).astype(np.int64)


def _batch_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    return (
        _batch_stream(case),
        case["n_ctx"],
        case["batch_size"],
        np.random.default_rng(case["seed"]),
    )


def _batch_json(pair: Any) -> Any:
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        return {"result": f"a {type(pair).__name__}, not a pair (inputs, targets)"}
    try:
        inputs, targets = (np.asarray(_as_array(a)) for a in pair)
    except (TypeError, ValueError):
        return {"result": "inputs and targets are not arrays"}
    return {"inputs": inputs.tolist(), "targets": targets.tolist()}


def _batch_reference(case: dict[str, Any]) -> Any:
    return _batch_json(batch_reference(*_batch_prepare(case)))


def _batch_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    return _batch_json(result)


def _batch_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if not isinstance(got, dict) or "inputs" not in got:
        return None
    inputs, targets = np.asarray(got["inputs"]), np.asarray(got["targets"])
    shape = (case["batch_size"], case["n_ctx"])
    if inputs.shape != shape or targets.shape != shape:
        return (
            "inputs and targets are both [batch_size, n_ctx]: each window has n_ctx + 1 "
            "tokens, the inputs its first n_ctx and the targets its last n_ctx"
        )
    if np.array_equal(inputs, targets):
        return (
            "the targets are the inputs shifted one position left: position t predicts the "
            "token AFTER it, never itself"
        )
    stream = _batch_stream(case)
    where = {int(token): i for i, token in enumerate(stream)}
    starts = [where.get(int(row[0])) for row in inputs]
    count = window_count(case["tokens"], case["n_ctx"])
    if any(s is not None and s >= count for s in starts):
        return (
            f"a stream of n tokens holds n - n_ctx windows of n_ctx + 1 tokens: the start "
            f"{max(s for s in starts if s is not None)} leaves no room for the last target"
        )
    rng = np.random.default_rng(case["seed"])
    if count > 1 and [s for s in starts] == rng.integers(0, count - 1, size=len(starts)).tolist():
        return (
            "the starts run from 0 to n - n_ctx - 1 INCLUDED: integers(low, high) excludes high, "
            "so high is the number of windows, n - n_ctx"
        )
    return (
        "draw all the starts with ONE call rng.integers(0, number of windows, size=batch_size), "
        "so that the same generator gives the library's batches"
    )


# -- estimate_loss(model, batches) --------------------------------------------------------------


def _loss_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for _ in range(n):
        cases.append(
            (
                {
                    "vocab": rng.randint(2, 12),
                    "batches": rng.randint(1, 5),
                    "batch_size": rng.randint(1, 4),
                    "n_ctx": rng.randint(1, 6),
                    "scale": rng.choice((0.1, 1.0, 5.0)),
                    "seed": rng.randrange(10**6),
                },
            )
        )
    return cases


class _BigramModel:
    """Logits looked up from a ``[V, V]`` table that requires grad: ``model(x)[b, t] =
    table[x[b, t]]``. It notes whether each call was made with gradients recorded."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = Tensor.from_numpy(table, requires_grad=True)
        self.recorded: list[bool] = []

    def __call__(self, inputs: np.ndarray) -> Tensor:
        self.recorded.append(is_grad_enabled())
        onehot = Tensor.from_numpy(np.eye(self.table.shape[0])[np.asarray(inputs)])
        result: Tensor = onehot @ self.table
        return result


def _loss_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    rng = np.random.default_rng(case["seed"])
    vocab = case["vocab"]
    table = rng.normal(scale=case["scale"], size=(vocab, vocab))
    stream = rng.integers(0, vocab, size=case["n_ctx"] + 20)
    draw = np.random.default_rng(case["seed"] + 1)
    batches = [
        batch_reference(stream, case["n_ctx"], case["batch_size"], draw)
        for _ in range(case["batches"])
    ]
    return _BigramModel(table), batches


def _loss_reference(case: dict[str, Any]) -> Any:
    model, batches = _loss_prepare(case)
    return {"loss": round(estimate_reference(model, batches), 9), "recorded": "nothing"}


def _loss_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    model = call_args[0]
    try:
        value = float(_as_array(result))
    except (TypeError, ValueError):
        return {"loss": f"a {type(result).__name__}, not a number"}
    recorded = "nothing" if not any(model.recorded) else "the forward pass, on the tape"
    if model.table.grad is not None:
        recorded = "gradients, into the model's parameters"
    return {"loss": round(value, 9) if math.isfinite(value) else repr(value), "recorded": recorded}


def _loss_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if not isinstance(got, dict) or not isinstance(got.get("loss"), float):
        return None
    if got.get("recorded") != "nothing":
        return (
            "measuring must record nothing: call the model inside `with lt.no_grad():`, so no "
            "graph is kept and no gradient reaches the parameters"
        )
    value, truth = got["loss"], want["loss"]
    if math.isclose(value, math.exp(truth), rel_tol=1e-6):
        return "return the loss in nats, not its perplexity: exp comes afterwards, once"
    tokens = case["batch_size"] * case["n_ctx"]
    for factor in (case["batches"], tokens, tokens * case["batches"]):
        if factor > 1 and math.isclose(value, truth * factor, rel_tol=1e-6):
            return "the loss is a MEAN: per token within a batch, then over the batches"
    return None


# -- clip_grad_norm(params, max_norm) ------------------------------------------------------------


def _clip_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for k in range(n):
        shapes = [[rng.randint(1, 4) for _ in range(rng.randint(1, 2))] for _ in range(3)]
        cases.append(
            (
                {
                    "shapes": shapes,
                    "scale": rng.choice((0.01, 0.3, 1.0, 5.0)),
                    # Every third case sits below its threshold: nothing to clip.
                    "ratio": rng.choice((0.05, 0.3, 0.8)) if k % 3 else rng.choice((1.5, 4.0)),
                    "seed": rng.randrange(10**6),
                },
            )
        )
    return cases


def _clip_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    rng = np.random.default_rng(case["seed"])
    leaves: dict[str, Tensor] = {}
    total = 0.0
    for i, shape in enumerate(case["shapes"]):
        leaf = Tensor.from_numpy(rng.normal(size=shape), requires_grad=True)
        grad = rng.normal(scale=case["scale"], size=shape)
        total += float((grad**2).sum())
        leaf.grad = Tensor.from_numpy(grad)
        leaves[f"p{i}"] = leaf
    max_norm = float(f"{math.sqrt(total) * case['ratio']:.3g}")
    return leaves, max_norm


def _clip_json(norm: Any, leaves: dict[str, Tensor]) -> Any:
    grads = {}
    for name, leaf in leaves.items():
        grads[name] = None if leaf.grad is None else leaf.grad.to_numpy().tolist()
    return {"norm": norm, "grads": grads}


def _clip_reference(case: dict[str, Any]) -> Any:
    return {"norm": AGREES, "grads": AGREES}


def _clip_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    # The gradients as they were BEFORE the learner's function saw them, for the reference.
    leaves, max_norm = args
    before = {n: leaf.grad.to_numpy() for n, leaf in leaves.items() if leaf.grad is not None}
    return fn(leaves, max_norm), before


def _clip_summary(packed: Any, call_args: tuple[Any, ...]) -> Any:
    result, before = packed
    leaves, max_norm = call_args
    fresh: dict[str, Tensor] = {}
    for name, grad in before.items():
        copy = Tensor.from_numpy(np.zeros(grad.shape), requires_grad=True)
        copy.grad = Tensor.from_numpy(grad)
        fresh[name] = copy
    want_norm = clip_reference(fresh, max_norm)
    summary: dict[str, Any] = {}
    try:
        summary["norm"] = _difference(float(_as_array(result)), np.asarray(want_norm))
    except (TypeError, ValueError):
        summary["norm"] = f"a {type(result).__name__}, not the norm"
    worst = AGREES
    for name, leaf in leaves.items():
        want_grad = fresh[name].grad
        assert want_grad is not None
        if leaf.grad is None:
            worst = f"{name}: its .grad is None"
            break
        difference = _difference(leaf.grad.to_numpy(), want_grad.to_numpy(), CLIP_TOLERANCE)
        if difference != AGREES:
            worst = f"{name}: {difference}"
            break
    summary["grads"] = worst
    return summary


def _clip_explain(got: Any, want: Any, leaves_case: dict[str, Any]) -> str | None:
    if not isinstance(got, dict):
        return None
    leaves, max_norm = _clip_prepare(leaves_case)
    grads = {n: leaf.grad.to_numpy() for n, leaf in leaves.items() if leaf.grad is not None}
    norm = math.sqrt(sum(float((g**2).sum()) for g in grads.values()))
    if got.get("grads") == AGREES and got.get("norm") != AGREES:
        return "return the global norm BEFORE clipping, as PyTorch's clip_grad_norm_ does"
    if norm <= max_norm:
        return (
            "below max_norm nothing changes: the factor is min(1, max_norm / norm), never a "
            "scaling up"
        )
    return (
        "ONE norm over all the gradients together, sqrt of the sum of every squared value, and "
        "ONE factor for all: clipping each parameter on its own norm, or each value on its own, "
        "turns the update's direction"
    )


# -- save_and_load(state, path) -------------------------------------------------------------------


def _tiny_run(case: dict[str, Any]) -> tuple[GPTConfig, TrainConfig, np.ndarray]:
    config = GPTConfig(
        vocab_size=case["vocab"],
        n_ctx=case["n_ctx"],
        n_embd=case["heads"] * case["head_size"],
        n_head=case["heads"],
        n_layer=1,
    )
    cfg = TrainConfig(
        seed=case["seed"],
        steps=2 * case["half"],
        batch_size=case["batch"],
        learning_rate=case["learning_rate"],
        warmup_steps=case["warmup"],
        weight_decay=0.1,
    )
    stream = np.random.default_rng(case["seed"] + 1).integers(0, case["vocab"], size=60)
    return config, cfg, stream


def _run_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for _ in range(n):
        half = rng.randint(1, 3)
        cases.append(
            (
                {
                    "vocab": rng.randint(5, 20),
                    "n_ctx": rng.randint(2, 6),
                    "heads": rng.randint(1, 2),
                    "head_size": rng.randint(2, 4),
                    "batch": rng.randint(1, 4),
                    "half": half,
                    "warmup": rng.randint(0, half),
                    "learning_rate": rng.choice((3e-3, 3e-2)),
                    "clip": rng.choice((None, 0.05, 0.5)),
                    "seed": rng.randrange(10**6),
                },
            )
        )
    return cases


def _checkpoint_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    config, cfg, stream = _tiny_run(case)
    state = start_state(config, cfg)
    train_steps(state, stream, case["half"], clip=case["clip"])
    return state, case


_STATE_PARTS = ("weights", "AdamW's moments", "AdamW's step count", "step", "random stream")


def _compare_states(got: TrainState, want: TrainState) -> dict[str, str]:
    parts: dict[str, str] = {}
    same = all(
        name in got.w and _as_array(got.w[name]).tobytes() == _as_array(t).tobytes()
        for name, t in want.w.items()
    )
    parts["weights"] = "restored" if same else "different"
    moments = all(
        name in got.optimizer.exp_avg
        and got.optimizer.exp_avg[name].to_numpy().tobytes() == m.to_numpy().tobytes()
        and got.optimizer.exp_avg_sq[name].to_numpy().tobytes()
        == want.optimizer.exp_avg_sq[name].to_numpy().tobytes()
        for name, m in want.optimizer.exp_avg.items()
    )
    parts["AdamW's moments"] = "restored" if moments else "different"
    same_t = got.optimizer.steps == want.optimizer.steps
    parts["AdamW's step count"] = "restored" if same_t else "different"
    parts["step"] = "restored" if got.step == want.step else "different"
    same_rng = got.rng.bit_generator.state == want.rng.bit_generator.state
    parts["random stream"] = "restored" if same_rng else "different"
    return parts


def _checkpoint_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    state, case = args
    with tempfile.TemporaryDirectory(prefix="llmfs-checkpoint-") as folder:
        path = Path(folder) / "checkpoint.npz"
        before = {name: t.to_numpy() for name, t in state.w.items()}
        result = fn(state, path)
        wrote = path.is_file() and path.stat().st_size > 0
        if isinstance(result, TrainState):
            # Whatever the original state does next must not change the loaded one.
            for tensor in state.w.values():
                with tensor.mutate() as storage:
                    storage._array()[...] = 0.0
    return result, wrote, before, case


def _checkpoint_summary(packed: Any, call_args: tuple[Any, ...]) -> Any:
    result, wrote, before, case = packed
    if not isinstance(result, TrainState):
        return {"result": f"a {type(result).__name__}, not a TrainState"}
    if not wrote:
        return {"file": "nothing was written at path"}
    config, cfg, stream = _tiny_run(case)
    want = start_state(config, cfg)
    train_steps(want, stream, case["half"], clip=case["clip"])
    summary: dict[str, Any] = {"file": "written"}
    summary.update(_compare_states(result, want))
    if any(
        _as_array(result.w[name]).tobytes() != before[name].tobytes()
        for name in before
        if name in result.w
    ):
        summary["weights"] = "shared with the saved state: not loaded from the file"
    try:
        train_steps(result, stream, cfg.steps, clip=case["clip"])
    except Exception as error:  # the learner's state: any failure is a finding, not a crash
        summary["resumed"] = f"training it raised {type(error).__name__}"
        return summary
    train_steps(want, stream, cfg.steps, clip=case["clip"])
    final = state_params(result)
    same = all(final[n].tobytes() == v.tobytes() for n, v in state_params(want).items())
    summary["resumed"] = "bit for bit" if same else "differs from the uninterrupted run"
    return summary


def _checkpoint_reference(case: dict[str, Any]) -> Any:
    summary: dict[str, Any] = {"file": "written"}
    summary.update({part: "restored" for part in _STATE_PARTS})
    summary["resumed"] = "bit for bit"
    return summary


def _checkpoint_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if not isinstance(got, dict):
        return None
    messages = {
        "random stream": (
            "save the generator's state (rng.bit_generator.state) and set it on load: a new "
            "generator from the seed replays the FIRST batches"
        ),
        "AdamW's moments": (
            "save exp_avg and exp_avg_sq of every parameter: without them AdamW restarts from "
            "zero moments and its next steps are about lr per value in the sign of one gradient"
        ),
        "AdamW's step count": (
            "save optimizer.steps: the bias correction divides by 1 - beta ** t, and t must go on "
            "from where it stopped"
        ),
        "step": "save the step: the learning-rate schedule reads it",
        "weights": "save and load every parameter's values, exactly (np.savez keeps the dtype)",
    }
    for part, message in messages.items():
        if got.get(part) not in (None, "restored"):
            return message
    return None


# -- train(state, stream, until, clip=None, on_step=None) -----------------------------------------


def _train_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    state, stream, until, clip, _ = args
    losses: list[tuple[int, float]] = []

    def on_step(step: int, loss: float) -> None:
        losses.append((int(step), float(loss)))

    fn(state, stream, until, clip=clip, on_step=on_step)
    return state, losses


def _train_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    config, cfg, stream = _tiny_run(case)
    state = start_state(config, cfg)
    start = case["seed"] % 2  # half the cases start from a state one step in
    if start:
        train_steps(state, stream, 1, clip=case["clip"])
    return state, stream, cfg.steps, case["clip"], case


def _train_summary(packed: Any, call_args: tuple[Any, ...]) -> Any:
    state, losses = packed
    until, clip, case = call_args[2:]
    want, want_stream, _, _, _ = _train_prepare(case)
    first = want.step
    want_losses: list[tuple[int, float]] = []
    train_steps(
        want, want_stream, until, clip=clip, on_step=lambda r: want_losses.append((r.step, r.loss))
    )
    summary: dict[str, Any] = {}
    summary["step"] = "until" if state.step == until else f"state.step is {state.step}"
    steps = [s for s, _ in losses]
    if steps != [s for s, _ in want_losses]:
        summary["on_step"] = f"called for steps {steps}, expected one call per step from {first}"
        return summary
    summary["on_step"] = "every step"
    difference = _difference([v for _, v in losses], np.asarray([v for _, v in want_losses]))
    summary["losses"] = difference
    if difference != AGREES:
        k = next(
            i
            for i, ((_, g), (_, w)) in enumerate(zip(losses, want_losses, strict=True))
            if _difference(g, np.asarray(w)) != AGREES
        )
        summary["first differing step"] = f"step {first + k}"
    final, reference = state_params(state), state_params(want)
    worst = AGREES
    for name in sorted(reference):
        d = _difference(final.get(name), reference[name])
        if d != AGREES:
            worst = f"{name}: {d}"
            break
    summary["weights"] = worst
    return summary


def _train_reference(case: dict[str, Any]) -> Any:
    return {"step": "until", "on_step": "every step", "losses": AGREES, "weights": AGREES}


_UPDATE = (
    "the losses agree until an update differs: clip after backward() and before the "
    "optimizer's step, take the rate of learning_rate(state.step, cfg), and clear the gradients "
    "after each step"
)


def _train_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if not isinstance(got, dict):
        return None
    if got.get("step") != "until":
        return "each step adds one to state.step, and the loop stops when it reaches until"
    if "first differing step" in got:
        start = case["seed"] % 2
        if got["first differing step"] == f"step {start}":
            return (
                "the first loss differs: draw the batch with get_batch from state.rng, and score "
                "EVERY position's next token (weights of 1)"
            )
        return _UPDATE
    if got.get("weights") != AGREES:
        return _UPDATE
    return None


# -- specs -------------------------------------------------------------------------------------

_HERE = "llmfs.course.exercise_checks.pretrain"

SHORTCUTS: dict[str, Shortcuts] = {
    "ch13.get_batch": Shortcuts(
        (
            "llmfs.gpt.text_batches.get_batch",
            "llmfs.gpt.text_batches.draw_windows",
            "llmfs.gpt.text_corpus.windows",
        ),
        "rng.integers, np.arange and fancy indexing",
    ),
    "ch13.estimate_loss": Shortcuts(
        ("llmfs.gpt.text_eval.estimate_loss",),
        "lt.no_grad, your model and the chapter-10 cross_entropy",
    ),
    "ch13.clip_grad_norm": Shortcuts(
        (
            "llmfs.gpt.grad_clip.clip_grad_norm",
            "llmfs.gpt.grad_clip.global_grad_norm",
            "llmfs.gpt.grad_clip.clip_scale",
        ),
        "each leaf's .grad, NumPy and math.sqrt",
    ),
    "ch13.save_and_load": Shortcuts(
        ("llmfs.gpt.train_state.save_state", "llmfs.gpt.train_state.load_state"),
        "np.savez, np.load, json and the generator's bit_generator.state",
    ),
    "ch13.train": Shortcuts(
        (
            "llmfs.gpt.text_training.train_steps",
            "llmfs.gpt.text_training.train_step",
            "llmfs.gpt.text_training.train",
        ),
        "your get_batch and clip_grad_norm, tm.forward, cross_entropy, backward() and the "
        "state's optimizer",
    ),
}

check_get_batch = register(
    ImplementSpec(
        "ch13.get_batch",
        "get_batch",
        _batch_cases,
        _batch_reference,
        cases=80,
        prepare=_batch_prepare,
        summarize=_batch_summary,
        parameters=("stream", "n_ctx", "batch_size", "rng"),
        shortcuts=SHORTCUTS["ch13.get_batch"],
        size=lambda case: (case["batch_size"] * case["n_ctx"], case["tokens"]),
        explain=_batch_explain,
    ),
    "Checks ``get_batch(stream, n_ctx, batch_size, rng) -> (inputs, targets)`` against the "
    "library's loader: the same windows from the same generator, the targets shifted by one.",
)
check_estimate_loss = register(
    ImplementSpec(
        "ch13.estimate_loss",
        "estimate_loss",
        _loss_cases,
        _loss_reference,
        cases=40,
        prepare=_loss_prepare,
        summarize=_loss_summary,
        parameters=("model", "batches"),
        shortcuts=SHORTCUTS["ch13.estimate_loss"],
        size=lambda case: (case["batches"] * case["batch_size"] * case["n_ctx"], case["vocab"]),
        explain=_loss_explain,
    ),
    "Checks ``estimate_loss(model, batches) -> float``: the mean over the batches of each "
    "batch's mean cross-entropy, with nothing recorded on the tape, on random bigram models.",
)
check_clip_grad_norm = register(
    ImplementSpec(
        "ch13.clip_grad_norm",
        "clip_grad_norm",
        _clip_cases,
        _clip_reference,
        cases=60,
        prepare=_clip_prepare,
        call=_clip_call,
        summarize=_clip_summary,
        parameters=("params", "max_norm"),
        shortcuts=SHORTCUTS["ch13.clip_grad_norm"],
        size=lambda case: (sum(math.prod(s) for s in case["shapes"]), len(case["shapes"])),
        explain=_clip_explain,
    ),
    "Checks ``clip_grad_norm(params, max_norm) -> norm``: every .grad scaled by one factor "
    "min(1, max_norm / global norm), the global norm before clipping returned, against "
    "PyTorch's rule.",
)
check_save_and_load = register(
    ImplementSpec(
        "ch13.save_and_load",
        "save_and_load",
        _run_cases,
        _checkpoint_reference,
        cases=8,
        prepare=_checkpoint_prepare,
        call=_checkpoint_call,
        summarize=_checkpoint_summary,
        parameters=("state", "path"),
        shortcuts=SHORTCUTS["ch13.save_and_load"],
        size=lambda case: (case["half"] * case["batch"], case["heads"] * case["head_size"]),
        explain=_checkpoint_explain,
    ),
    "Checks ``save_and_load(state, path) -> TrainState``: N steps, save, load, N more steps "
    "equal 2N steps uninterrupted, bit for bit, and names the part of the state that did not "
    "come back.",
)
check_train_text = register(
    ImplementSpec(
        "ch13.train",
        "train",
        _run_cases,
        _train_reference,
        cases=8,
        prepare=_train_prepare,
        call=_train_call,
        summarize=_train_summary,
        parameters=("state", "stream", "until", "clip"),
        shortcuts=SHORTCUTS["ch13.train"],
        size=lambda case: (case["half"] * case["batch"], case["heads"] * case["head_size"]),
        explain=_train_explain,
    ),
    "Checks ``train(state, stream, until, clip=None, on_step=None)``: the losses and the final "
    "weights of the library's loop (random windows, cross-entropy of every position, clipping, "
    "AdamW on the schedule), from random small states.",
    name="check_train_text",
)

#: Exercise id -> check (chapter 13).
PRETRAIN_CHECKS: dict[str, Callable[..., CheckReport]] = {
    "ch13.get_batch": check_get_batch,
    "ch13.estimate_loss": check_estimate_loss,
    "ch13.clip_grad_norm": check_clip_grad_norm,
    "ch13.save_and_load": check_save_and_load,
    "ch13.train": check_train_text,
}

__all__ = [
    "PRETRAIN_CHECKS",
    "TOLERANCE",
    "check_clip_grad_norm",
    "check_estimate_loss",
    "check_get_batch",
    "check_save_and_load",
    "check_train_text",
]
