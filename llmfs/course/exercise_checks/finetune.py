"""Checks of chapter 14's "implement it" exercises: LoRA, a low-rank update beside a frozen weight.

Every check holds the learner's function to the library's answer (:mod:`llmfs.gpt.lora`, the
course's answer key) on random cases drawn from a seed; each case is one JSON object of sizes and
seeds, and ``prepare`` draws its tensors. Where a wrong answer shows a known mistake, the report
names the rule it broke (the spec's ``explain``), never the expected values.

* ``lora_forward(x, W, b, A, B, alpha)``: ``x @ W + b + (alpha / r) * ((x @ A) @ B)`` with ``r``
  the rank (``A``'s second axis), against :class:`~llmfs.gpt.lora.LoRA`'s call; the values, and
  the gradients that reach ``A`` and ``B`` (so the update must be computed with tensor
  operations the tape records). ``B`` is drawn random, not zero, so the update counts. Named
  mistakes: the scale left out, ``alpha`` instead of ``alpha / r``, ``r / alpha``, the update left
  out, the gradients lost (NumPy instead of tensors).
* ``lora_merge(W, A, B, alpha)``: ``W + (alpha / r) * (A @ B)`` as a NEW owner, ``W`` left as it
  was, against :meth:`LoRA.merge <llmfs.gpt.lora.LoRA.merge>`. Named mistakes: the scale left out
  or wrong, ``W`` written in place, a view returned.
* ``count_trainable(shapes, rank)``: the numbers LoRA of ``rank`` trains on layers whose weights
  have the ``[in, out]`` shapes given, against :meth:`LoRA.trainable_parameters
  <llmfs.gpt.lora.LoRA.trainable_parameters>`. Named mistakes: the frozen weights counted, only
  ``A`` or only ``B`` counted, the rank left out, ``rank * in * out``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np

import llmfs.tensor as lt
from llmfs.course.exercise_checks.report import CheckReport
from llmfs.course.exercise_checks.shortcuts import Shortcuts
from llmfs.course.exercise_checks.spec import ImplementSpec, register
from llmfs.gpt.lora import LoRA
from llmfs.tensor import Tensor, TensorView

#: Largest difference from the reference, relative to its largest magnitude (at least 1).
TOLERANCE = 1e-9
AGREES = f"< {TOLERANCE:g}"


def _as_array(value: Any) -> np.ndarray:
    if isinstance(value, (Tensor, TensorView)):
        return value.to_numpy()
    return np.asarray(value)


def _error(got: Any, want: np.ndarray) -> float | str:
    """The largest difference relative to ``want``'s largest magnitude (at least 1), or a text
    saying why ``got`` is not comparable."""
    try:
        array = np.asarray(_as_array(got), dtype=np.float64)
    except (TypeError, ValueError):
        return f"a {type(got).__name__}, not numbers"
    if array.shape != want.shape:
        return f"shape {list(array.shape)}, expected {list(want.shape)}"
    if array.size == 0:
        return 0.0
    if not np.all(np.isfinite(array)):
        return "inf or nan"
    return float(np.abs(array - want).max()) / max(1.0, float(np.abs(want).max()))


def _difference(got: Any, want: np.ndarray) -> str:
    error = _error(got, want)
    if isinstance(error, str):
        return error
    return AGREES if error <= TOLERANCE else f"{error:.3g}"


# -- the cases: an adapted linear layer --------------------------------------------------------


def _weight_case(rng: random.Random, k: int) -> dict[str, Any]:
    fan_in = rng.randint(1, 7)
    # Every third layer is square, so an update multiplied in the wrong order still runs.
    fan_out = fan_in if k % 3 == 0 else rng.randint(1, 7)
    return {
        "in": fan_in,
        "out": fan_out,
        "rank": rng.randint(1, 4) if k % 4 else 1 + (k % 3),
        "alpha": rng.choice((1.0, 2.0, 8.0, 16.0, 0.5)),
        "seed": rng.randrange(1000),
    }


def _layer_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    """Cases of the forward pass: a weight's case and the leading axes of ``x``."""
    cases: list[tuple[Any, ...]] = []
    for k in range(n):
        rows = [rng.randint(1, 3) for _ in range(rng.randint(1, 2))]
        cases.append(({"rows": rows, **_weight_case(rng, k)},))
    return cases


def _merge_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    """Cases of the merge: a weight's case (no input)."""
    return [(_weight_case(rng, k),) for k in range(n)]


def _layer(case: dict[str, Any]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(case["seed"])
    fan_in, fan_out, rank = case["in"], case["out"], case["rank"]
    return {
        "x": rng.normal(size=(*case.get("rows", [1]), fan_in)),
        "W": rng.normal(size=(fan_in, fan_out)),
        "b": rng.normal(size=fan_out),
        "A": rng.normal(size=(fan_in, rank)),
        "B": rng.normal(size=(rank, fan_out)),
    }


def _adapter(arrays: dict[str, np.ndarray], alpha: float) -> LoRA:
    """The library's adapter with the case's ``A`` and ``B`` (``B`` not zero)."""
    rank = arrays["A"].shape[1]
    adapter = LoRA(Tensor.from_numpy(arrays["W"]), rank, alpha)
    adapter.A = Tensor.from_numpy(arrays["A"], requires_grad=True)
    adapter.B = Tensor.from_numpy(arrays["B"], requires_grad=True)
    return adapter


def _forms(arrays: dict[str, np.ndarray], alpha: float) -> dict[str, np.ndarray]:
    """The layer's output with the right scale and with the usual wrong ones."""
    x, rank = arrays["x"], arrays["A"].shape[1]
    base = x @ arrays["W"] + arrays["b"]
    update = (x @ arrays["A"]) @ arrays["B"]
    return {
        "right": base + (alpha / rank) * update,
        "unscaled": base + update,
        "alpha": base + alpha * update,
        "inverted": base + (rank / alpha) * update,
        "no update": base,
    }


# -- lora_forward(x, W, b, A, B, alpha) ---------------------------------------------------------


def _forward_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    arrays = _layer(case)
    return (
        Tensor.from_numpy(arrays["x"]),
        Tensor.from_numpy(arrays["W"]),
        Tensor.from_numpy(arrays["b"]),
        Tensor.from_numpy(arrays["A"], requires_grad=True),
        Tensor.from_numpy(arrays["B"], requires_grad=True),
        case["alpha"],
    )


def _forward_reference(case: dict[str, Any]) -> Any:
    return {"values": AGREES, "grad_A": AGREES, "grad_B": AGREES}


def _forward_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    return fn(*args)


def _grad_text(leaf: Tensor, want: np.ndarray) -> str:
    if leaf.grad is None:
        return "None: no gradient reached it (was the update computed with tensor operations?)"
    return _difference(leaf.grad.to_numpy(), want)


def _forward_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    x, W, b, A, B, alpha = call_args
    arrays = {"x": x.to_numpy(), "W": W.to_numpy(), "b": b.to_numpy()}
    arrays |= {"A": A.to_numpy(), "B": B.to_numpy()}
    forms = _forms(arrays, alpha)
    values = _difference(result, forms["right"])
    if values != AGREES:
        for name, form in forms.items():
            error = _error(result, form)
            if name != "right" and not isinstance(error, str) and error <= TOLERANCE:
                values += f" (the output with {name})"
                break
    # The gradients of sum(output) with respect to A and B, the library's.
    adapter = _adapter(arrays, alpha)
    lt.sum(adapter(Tensor.from_numpy(arrays["x"])) + Tensor.from_numpy(arrays["b"])).backward()
    assert adapter.A.grad is not None and adapter.B.grad is not None
    grads = {"grad_A": "not computed: the output is not a tensor that backward() can start from"}
    grads["grad_B"] = grads["grad_A"]
    if isinstance(result, (Tensor, TensorView)) and result.requires_grad:
        lt.sum(result).backward()
        grads = {
            "grad_A": _grad_text(A, adapter.A.grad.to_numpy()),
            "grad_B": _grad_text(B, adapter.B.grad.to_numpy()),
        }
    elif isinstance(result, (Tensor, TensorView)):
        grads = {"grad_A": "None: the output does not depend on A on the tape"}
        grads["grad_B"] = "None: the output does not depend on B on the tape"
    return {"values": values, **grads}


def _scale_message(values: str) -> str | None:
    if "(the output with unscaled)" in values or "(the output with alpha)" in values:
        return (
            "the update is scaled by alpha / r, r being the rank (A's second axis): that keeps "
            "its size the same when you change the rank"
        )
    if "(the output with inverted)" in values:
        return "the scale is alpha divided by the rank, not the rank divided by alpha"
    if "(the output with no update)" in values:
        return "the adapted layer adds the low-rank update (x @ A) @ B, scaled, to x @ W + b"
    return None


def _forward_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if not isinstance(got, dict):
        return None
    values = str(got.get("values", ""))
    message = _scale_message(values)
    if message is not None:
        return message
    if values.startswith("shape"):
        return (
            "x is [..., in]: it meets A ([in, r]) first and then B ([r, out]), the paper's B A x "
            "written for row vectors"
        )
    if values == AGREES and "None" in str(got.get("grad_A", "")) + str(got.get("grad_B", "")):
        return (
            "compute the update with tensor operations (@, *, +) on A and B, so that the tape "
            "records it and backward() reaches them: fine-tuning trains exactly those two"
        )
    return None


# -- lora_merge(W, A, B, alpha) ----------------------------------------------------------------


def _merge_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    arrays = _layer(case)
    return (
        Tensor.from_numpy(arrays["W"]),
        Tensor.from_numpy(arrays["A"]),
        Tensor.from_numpy(arrays["B"]),
        case["alpha"],
    )


def _merge_reference(case: dict[str, Any]) -> Any:
    arrays = _layer(case)
    merged = _adapter(arrays, case["alpha"]).merge()
    kind = "a new owner" if isinstance(merged, Tensor) else "a view"
    return {"values": AGREES, "returns": kind, "W": "unchanged"}


def _merge_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    W = args[0]
    return fn(*args), W.to_numpy().copy()


def _merge_summary(packed: Any, call_args: tuple[Any, ...]) -> Any:
    result, before = packed
    W, A, B, alpha = call_args
    rank = A.shape[1]
    update = A.to_numpy() @ B.to_numpy()
    forms = {
        "right": before + (alpha / rank) * update,
        "unscaled": before + update,
        "alpha": before + alpha * update,
        "inverted": before + (rank / alpha) * update,
        "no update": before,
    }
    values = _difference(result, forms["right"])
    if values != AGREES:
        for name, form in forms.items():
            error = _error(result, form)
            if name != "right" and not isinstance(error, str) and error <= TOLERANCE:
                values += f" (the output with {name})"
                break
    if result is W:
        returns = "W itself"
    elif isinstance(result, TensorView):
        returns = "a view"
    elif isinstance(result, Tensor):
        returns = "a new owner"
    else:
        returns = f"a {type(result).__name__}, not a tensor"
    same = np.array_equal(W.to_numpy(), before)
    return {"values": values, "returns": returns, "W": "unchanged" if same else "written"}


def _merge_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if not isinstance(got, dict):
        return None
    if got.get("W") == "written" or got.get("returns") == "W itself":
        return (
            "merge must leave W as it is: it is the frozen base that the adapter, and every "
            "other model sharing it, still reads; write the sum into a new owner"
        )
    if got.get("returns") == "a view":
        return (
            "a view only re-reads storage that already holds its values, and no storage holds "
            "W + (alpha/r) A B: the merged weight must be a new owner"
        )
    message = _scale_message(str(got.get("values", "")))
    if message is not None:
        return message.replace("(x @ A) @ B", "A @ B").replace(" to x @ W + b", " to W")
    if str(got.get("values", "")).startswith("shape"):
        return "A @ B is [in, out], W's shape: A ([in, r]) comes first, then B ([r, out])"
    return None


# -- count_trainable(shapes, rank) -------------------------------------------------------------


def _count_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for k in range(n):
        layers = 1 if k % 5 == 0 else rng.randint(2, 6)
        shapes = [[rng.randint(1, 300), rng.randint(1, 300)] for _ in range(layers)]
        cases.append((shapes, rng.randint(1, 16)))
    return cases


def _count_reference(shapes: list[list[int]], rank: int) -> int:
    total = 0
    for fan_in, fan_out in shapes:
        total += LoRA(Tensor.zeros((fan_in, fan_out)), rank, 1.0).trainable_parameters()
    return total


def _count_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    if isinstance(result, (bool, np.bool_)) or not isinstance(result, (int, np.integer)):
        if isinstance(result, float) and result.is_integer():
            return int(result)
        return f"a {type(result).__name__}, not an int"
    return int(result)


def _count_explain(got: Any, want: Any, shapes: list[list[int]], rank: int) -> str | None:
    if not isinstance(got, int):
        return None
    frozen = sum(i * o for i, o in shapes)
    wrong = {
        want + frozen: (
            "count only what fine-tuning changes: the frozen weights W are not trained, only A "
            "and B"
        ),
        sum(rank * i for i, _ in shapes): "count B too: A is [in, r] and B is [r, out]",
        sum(rank * o for _, o in shapes): "count A too: A is [in, r] and B is [r, out]",
        sum(i + o for i, o in shapes): "A has r columns and B r rows: the rank multiplies both",
        rank * frozen: (
            "A and B are small: r * (in + out) numbers, not r * in * out; that is the point of "
            "a low-rank update"
        ),
    }
    return wrong.get(got) if got != want else None


# -- specs -------------------------------------------------------------------------------------

SHORTCUTS: dict[str, Shortcuts] = {
    "ch14.lora_forward": Shortcuts(
        (
            "llmfs.gpt.lora.LoRA.__call__",
            "llmfs.gpt.lora.LoRA.delta",
            "llmfs.gpt.tensor_model.linear",
        ),
        "@, * and + on the tensors you are given",
    ),
    "ch14.lora_merge": Shortcuts(
        (
            "llmfs.gpt.lora.LoRA.merge",
            "llmfs.gpt.lora.LoRA.delta",
            "llmfs.gpt.lora.LoRAParams.merged",
        ),
        "@, * and + on the tensors you are given",
    ),
    "ch14.count_trainable": Shortcuts(
        (
            "llmfs.gpt.lora.LoRA.trainable_parameters",
            "llmfs.gpt.lora.LoRAParams.trainable_parameters",
        ),
        "the shapes and plain arithmetic",
    ),
}


def _layer_size(case: dict[str, Any]) -> tuple[int, ...]:
    return (case["in"] * case["out"], case["rank"])


check_lora_forward = register(
    ImplementSpec(
        "ch14.lora_forward",
        "lora_forward",
        _layer_cases,
        _forward_reference,
        cases=60,
        prepare=_forward_prepare,
        call=_forward_call,
        summarize=_forward_summary,
        parameters=("x", "W", "b", "A", "B", "alpha"),
        shortcuts=SHORTCUTS["ch14.lora_forward"],
        size=_layer_size,
        explain=_forward_explain,
    ),
    "Checks ``lora_forward(x, W, b, A, B, alpha)``: ``x @ W + b + (alpha / r) * ((x @ A) @ B)`` "
    "against the library's adapter, values and the gradients that reach A and B.",
)
check_lora_merge = register(
    ImplementSpec(
        "ch14.lora_merge",
        "lora_merge",
        _merge_cases,
        _merge_reference,
        cases=60,
        prepare=_merge_prepare,
        call=_merge_call,
        summarize=_merge_summary,
        parameters=("W", "A", "B", "alpha"),
        shortcuts=SHORTCUTS["ch14.lora_merge"],
        size=_layer_size,
        explain=_merge_explain,
    ),
    "Checks ``lora_merge(W, A, B, alpha)``: a new owner ``W + (alpha / r) * (A @ B)``, W left "
    "as it was, against the library's merge.",
)
check_count_trainable = register(
    ImplementSpec(
        "ch14.count_trainable",
        "count_trainable",
        _count_cases,
        _count_reference,
        cases=60,
        summarize=_count_summary,
        parameters=("shapes", "rank"),
        shortcuts=SHORTCUTS["ch14.count_trainable"],
        size=lambda shapes, rank: (len(shapes), rank),
        explain=_count_explain,
    ),
    "Checks ``count_trainable(shapes, rank) -> int``: the numbers rank-r adapters train on "
    "layers of the given [in, out] weight shapes.",
)

#: Exercise id -> check (chapter 14).
FINETUNE_CHECKS: dict[str, Callable[..., CheckReport]] = {
    "ch14.lora_forward": check_lora_forward,
    "ch14.lora_merge": check_lora_merge,
    "ch14.count_trainable": check_count_trainable,
}

__all__ = [
    "FINETUNE_CHECKS",
    "TOLERANCE",
    "check_count_trainable",
    "check_lora_forward",
    "check_lora_merge",
]
