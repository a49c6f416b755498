"""Checks of chapter 8's "implement it" exercises: the capstone GPT's layers on ``llmfs.tensor``.

A case is one plain JSON object naming the sizes and a seed, e.g. ``{"shape": [2, 5], "seed":
4711}``; the spec's ``prepare`` turns it into the tensors the learner's function takes (random
inputs and random weights, float64, drawn from the seed), and the learner's result is summarized
as its shape and its largest difference from the NumPy reference (:mod:`llmfs.gpt.reference`) on
the same inputs: ``"< 1e-09"`` when it agrees. Generation is compared token by token. A
hard-coded answer fails, since every case draws new values, and the grader draws other seeds.

Two rules are checked beyond the values:

* ``ch08.attention`` makes at most one copy (one ``materialize``, merging the heads) and never
  reads tensors out of the library (``to_numpy``, ``numpy_view``, ``tolist``, ``np.asarray``,
  ``as_slice``, ``item``: see :data:`~llmfs.course.exercise_checks.attention.READ_OUT_METHODS`),
  both counted while the learner's function runs; the report names the rule broken.
* ``ch08.generate`` draws, among its cases, multi-layer models on which generating WITHOUT the
  causal mask gives other tokens (each drawn until it does), so an answer that forgets the mask
  fails on every seed. (With one layer greedy generation cannot tell: the last position attends
  to every position with or without the mask.)
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import numpy as np

from llmfs.course import CourseError
from llmfs.course.exercise_checks.attention import Counted, counted_call
from llmfs.course.exercise_checks.report import CheckReport
from llmfs.course.exercise_checks.shortcuts import Shortcuts
from llmfs.course.exercise_checks.spec import ImplementSpec, register, to_json
from llmfs.gpt import reference
from llmfs.gpt.model import GPTConfig, init_params
from llmfs.tensor import Tensor, TensorView

#: Largest absolute difference from the reference that counts as equal (float64 throughout).
TOLERANCE = 1e-9
AGREES = f"< {TOLERANCE:g}"
ERROR_KEY = "max |difference| from NumPy"
PREFIX_ATTN = "h.0.attn."
PREFIX_MLP = "h.0.mlp."
EPS = 1e-5


def _tensor(array: np.ndarray) -> Tensor:
    return Tensor.from_numpy(np.asarray(array, dtype=np.float64))


def _compare(result: Any, expected: np.ndarray) -> dict[str, Any]:
    """The shape of ``result`` and its largest difference from ``expected``."""
    if not isinstance(result, (Tensor, TensorView)):
        return {"result": f"a {type(result).__name__}, not a Tensor or TensorView"}
    got = result.to_numpy().astype(np.float64)
    if got.shape != expected.shape:
        return {"shape": list(got.shape), ERROR_KEY: "shapes differ"}
    error = float(np.abs(got - expected).max()) if got.size else 0.0
    return {"shape": list(got.shape), ERROR_KEY: AGREES if error <= TOLERANCE else f"{error:.3g}"}


def _agrees(expected: np.ndarray) -> dict[str, Any]:
    return {"shape": list(expected.shape), ERROR_KEY: AGREES}


def _config(t: int, n_head: int, head_size: int, n_layer: int = 1, vocab: int = 12) -> GPTConfig:
    return GPTConfig(
        vocab_size=vocab, n_ctx=t, n_embd=n_head * head_size, n_head=n_head, n_layer=n_layer
    )


def _params(config: GPTConfig, seed: int) -> dict[str, np.ndarray]:
    """GPT-2's initialisation plus noise, so every weight (LayerNorm's too) matters."""
    rng = np.random.default_rng(seed)
    return {n: v + rng.normal(0.0, 0.3, v.shape) for n, v in init_params(config, seed).items()}


# -- layer_norm(x, weight, bias, eps) ---------------------------------------------------------


def _ln_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    return [
        (
            {
                "shape": [rng.randint(1, 3) for _ in range(rng.randint(0, 2))]
                + [rng.randint(2, 8)],
                "seed": rng.randrange(10**6),
            },
        )
        for _ in range(n)
    ]


def _ln_arrays(shape: list[int], seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    features = shape[-1]
    x = rng.normal(rng.uniform(-3, 3), rng.uniform(0.5, 4), size=shape)
    return x, rng.normal(1, 0.5, features), rng.normal(0, 0.5, features)


def _ln_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    x, w, b = _ln_arrays(case["shape"], case["seed"])
    return _tensor(x), _tensor(w), _tensor(b), EPS


# -- gelu(x) ----------------------------------------------------------------------------------


def _gelu_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    return [
        (
            {
                "shape": [rng.randint(1, 4) for _ in range(rng.randint(1, 3))],
                "seed": rng.randrange(10**6),
            },
        )
        for _ in range(n)
    ]


def _gelu_array(shape: list[int], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-6, 6, size=shape)


# -- causal_self_attention(x, w, prefix, config), mlp(x, w, prefix), block(x, w, i, config) ----


def _block_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    return [
        (
            {
                "batch": rng.randint(1, 2),
                "positions": rng.randint(1, 5),
                "heads": rng.randint(1, 3),
                "head_size": rng.randint(1, 4),
                "seed": rng.randrange(10**6),
            },
        )
        for _ in range(n)
    ]


def _block_arrays(
    batch: int, positions: int, heads: int, head_size: int, seed: int
) -> tuple[np.ndarray, dict[str, np.ndarray], GPTConfig]:
    config = _config(positions, heads, head_size)
    x = np.random.default_rng(seed + 1).normal(0, 1, size=(batch, positions, config.n_embd))
    return x, _params(config, seed), config


def _attn_prepare(case: dict[str, int]) -> tuple[Any, ...]:
    x, params, config = _block_arrays(**case)
    return _tensor(x), {k: _tensor(v) for k, v in params.items()}, PREFIX_ATTN, config


def _mlp_prepare(case: dict[str, int]) -> tuple[Any, ...]:
    x, params, _ = _block_arrays(**case)
    return _tensor(x), {k: _tensor(v) for k, v in params.items()}, PREFIX_MLP


def _block_prepare(case: dict[str, int]) -> tuple[Any, ...]:
    x, params, config = _block_arrays(**case)
    return _tensor(x), {k: _tensor(v) for k, v in params.items()}, 0, config


# -- gpt_forward(w, config, tokens), generate(w, config, tokens, max_new_tokens) ---------------


def _model_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for _ in range(n):
        n_ctx = rng.randint(2, 6)
        case = {
            "layers": rng.randint(1, 2),
            "heads": rng.randint(1, 2),
            "head_size": rng.randint(2, 4),
            "n_ctx": n_ctx,
            "batch": rng.randint(1, 2),
            "positions": rng.randint(1, n_ctx),
            "seed": rng.randrange(10**6),
        }
        cases.append((case,))
    return cases


def _model(
    layers: int, heads: int, head_size: int, n_ctx: int, batch: int, positions: int, seed: int
) -> tuple[dict[str, np.ndarray], GPTConfig, np.ndarray]:
    config = _config(n_ctx, heads, head_size, layers)
    rng = np.random.default_rng(seed + 2)
    tokens = rng.integers(0, config.vocab_size, size=(batch, positions))
    return _params(config, seed), config, tokens


def _forward_prepare(case: dict[str, int]) -> tuple[Any, ...]:
    params, config, tokens = _model(**case)
    return {k: _tensor(v) for k, v in params.items()}, config, tokens


def _generate_prepare(case: dict[str, int]) -> tuple[Any, ...]:
    params, config, tokens = _model(**case)
    new = config.n_ctx + 1 - tokens.shape[1]
    return {k: _tensor(v) for k, v in params.items()}, config, tokens, new


def _generate_reference(case: dict[str, int]) -> Any:
    params, config, tokens = _model(**case)
    new = config.n_ctx + 1 - tokens.shape[1]
    # The package's generate returns prompt and new tokens; the exercise returns the new ones.
    return reference.generate(params, config, tokens, new)[:, tokens.shape[1] :].tolist()


def _generate_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    if isinstance(result, (Tensor, TensorView)):
        result = result.to_numpy()
    if isinstance(result, np.ndarray):
        if not np.issubdtype(result.dtype, np.integer) and not np.array_equal(
            result, np.round(result)
        ):
            return {"result": f"an array of {result.dtype} that are not token ids"}
        return result.astype(np.int64).tolist()
    return to_json(result)


# -- the attention's copies and read-outs --------------------------------------------------------

#: Copies (``materialize`` calls) the attention exercise allows: the merge of the heads.
COPIES_ALLOWED = 1
COPIES_KEY = "copies (materialize)"
READ_OUTS_KEY = "reads out of the library"
_WITHIN_ALLOWED = f"at most {COPIES_ALLOWED}"
_NO_READ_OUTS = "none"


def _attention_reference(*args: Any) -> Any:
    expected = reference.attention(*(_np(a) for a in args))
    return {**_agrees(expected), COPIES_KEY: _WITHIN_ALLOWED, READ_OUTS_KEY: _NO_READ_OUTS}


def _attention_summary(counted: Counted, call_args: tuple[Any, ...]) -> Any:
    if counted.result is None:  # the stub's None: "not implemented yet"
        return None
    count = counted.count
    outcome = _compare(counted.result, reference.attention(*(_np(a) for a in call_args)))
    outcome[COPIES_KEY] = _WITHIN_ALLOWED if count.copies <= COPIES_ALLOWED else count.copies
    outcome[READ_OUTS_KEY] = (
        f"{count.read_outs}: {', '.join(count.read_out_names)}"
        if count.read_outs
        else _NO_READ_OUTS
    )
    return outcome


def _attention_explain(got: Any, want: Any) -> str | None:
    if not isinstance(got, dict):
        return None
    reads = got.get(READ_OUTS_KEY, _NO_READ_OUTS)
    if reads != _NO_READ_OUTS:
        return (
            f"causal_self_attention read tensors out of the library ({reads}): the exercise is "
            "computed on llmfs tensors, with views, @ and the given softmax and causal_mask, so "
            "a round trip through NumPy or Python numbers does not count"
        )
    copies = got.get(COPIES_KEY, _WITHIN_ALLOWED)
    if copies != _WITHIN_ALLOWED:
        return (
            f"causal_self_attention made {copies} copies (materialize calls) and the exercise "
            f"allows {COPIES_ALLOWED}, to merge the heads: Q, K, V, their heads and K^T are "
            "views of the projection, and an op's result is a new tensor, not a copy"
        )
    return None


# -- generation cases where the causal mask matters ---------------------------------------------

#: Tries per mask-sensitive case before the draw gives up (never reached in practice: about one
#: draw in three already generates other tokens without the mask).
_MASK_TRIES = 200


def _attention_without_mask(
    x: np.ndarray, params: dict[str, np.ndarray], prefix: str, config: GPTConfig
) -> np.ndarray:
    """:func:`reference.attention` with every position seeing every other: the mistake a
    mask-sensitive case exists to catch."""
    b, t, c = x.shape
    h, d = config.n_head, config.head_size
    qkv = x @ params[prefix + "c_attn.weight"] + params[prefix + "c_attn.bias"]
    q, k, v = (
        qkv[..., i * c : (i + 1) * c].reshape(b, t, h, d).transpose(0, 2, 1, 3) for i in range(3)
    )
    y = reference.softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)) @ v
    y = y.transpose(0, 2, 1, 3).reshape(b, t, c)
    return y @ params[prefix + "c_proj.weight"] + params[prefix + "c_proj.bias"]


def generate_without_mask(
    params: dict[str, np.ndarray], config: GPTConfig, tokens: np.ndarray, max_new_tokens: int
) -> np.ndarray:
    """Greedy generation by the reference's layers with the causal mask left out (``[B, new]``
    ids): what an answer forgetting the mask generates."""
    ids = np.asarray(tokens)
    eps = config.layer_norm_eps
    new = []
    for _ in range(max_new_tokens):
        x = reference.embed(ids, params, config)
        for i in range(config.n_layer):
            p = f"h.{i}."
            ln_1 = reference.layer_norm(x, params[p + "ln_1.weight"], params[p + "ln_1.bias"], eps)
            x = x + _attention_without_mask(ln_1, params, p + "attn.", config)
            ln_2 = reference.layer_norm(x, params[p + "ln_2.weight"], params[p + "ln_2.bias"], eps)
            x = x + reference.mlp(ln_2, params, p + "mlp.")
        x = reference.layer_norm(x, params["ln_f.weight"], params["ln_f.bias"], eps)
        nxt = (x @ params["wte.weight"].T)[:, -1, :].argmax(axis=-1)
        new.append(nxt)
        ids = np.concatenate([ids, nxt[:, None]], axis=1)
    return np.stack(new, axis=1)


def mask_matters(case: dict[str, int]) -> bool:
    """True when generating on ``case`` without the causal mask gives other tokens."""
    params, config, tokens = _model(**case)
    new = config.n_ctx + 1 - tokens.shape[1]
    expected = reference.generate(params, config, tokens, new)[:, tokens.shape[1] :]  # new ids
    return not np.array_equal(generate_without_mask(params, config, tokens, new), expected)


def _mask_case(rng: random.Random) -> dict[str, int]:
    """A multi-layer case on which the causal mask changes the generated tokens."""
    for _ in range(_MASK_TRIES):
        n_ctx = rng.randint(3, 6)
        case = {
            "layers": rng.randint(2, 3),
            "heads": rng.randint(1, 2),
            "head_size": rng.randint(2, 4),
            "n_ctx": n_ctx,
            "batch": rng.randint(1, 2),
            # At least two positions reach the last layer, and at least two steps are generated.
            "positions": rng.randint(1, n_ctx - 1),
            "seed": rng.randrange(10**6),
        }
        if mask_matters(case):
            return case
    raise CourseError(f"no mask-sensitive generation case in {_MASK_TRIES} draws")


def _generate_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    """:func:`_model_cases`, of which every fifth (at least one) is a mask-sensitive case."""
    masked = max(1, n // 5) if n else 0
    cases = _model_cases(rng, n - masked)
    return cases + [(_mask_case(rng),) for _ in range(masked)]


# -- specs --------------------------------------------------------------------------------------


def _np(value: Any) -> Any:
    if isinstance(value, (Tensor, TensorView)):
        return value.to_numpy()
    if isinstance(value, dict):
        return {k: _np(v) for k, v in value.items()}
    return value


def _model_layers(*layers: str, instead: str) -> Shortcuts:
    """The package's own model is the solution: its ``layers`` may not be called, neither the
    tensor model's (:mod:`llmfs.gpt.tensor_model`) nor the NumPy reference's, nor the tensor
    library's single-op layer of the same name (:mod:`llmfs.tensor.functional`)."""
    return Shortcuts(
        tuple(f"llmfs.gpt.{module}.{layer}" for layer in layers for module in MODEL_MODULES)
        + tuple(f"llmfs.tensor.functional.{layer}" for layer in layers if layer in FUSED_LAYERS),
        instead,
    )


#: The modules holding the package's own GPT, layer by layer.
MODEL_MODULES = ("tensor_model", "reference")
#: The layers :mod:`llmfs.tensor.functional` computes as one op.
FUSED_LAYERS = ("gelu", "layer_norm", "softmax", "log_softmax")

#: What each exercise may not call: its own layer, and the layers it is built from (the earlier
#: exercises of the chapter, written by the learner).
SHORTCUTS: dict[str, Shortcuts] = {
    "ch08.layer_norm": _model_layers("layer_norm", instead="lt.mean, lt.sqrt and arithmetic"),
    "ch08.gelu": _model_layers("gelu", instead="lt.tanh and arithmetic"),
    "ch08.attention": _model_layers(
        "attention", instead="views of qkv, @, softmax and causal_mask"
    ),
    "ch08.mlp": _model_layers("mlp", "gelu", instead="two x @ W + b layers and your gelu"),
    "ch08.block": _model_layers(
        "block", "attention", "mlp", "layer_norm", "gelu", instead="your own layers"
    ),
    "ch08.forward": _model_layers(
        "forward", "block", "attention", "mlp", "layer_norm", "gelu", instead="your own block"
    ),
    "ch08.generate": _model_layers("generate", "forward", "block", instead="your gpt_forward"),
}


def case_size(case: dict[str, Any]) -> tuple[int, ...]:
    """How big a case is, for showing the smallest first: the values of its input (the shape's
    count, or batch x positions x heads x head size, times the layers), then its rank. The seed
    is not a size."""
    if "shape" in case:
        sizes = case["shape"]
        return (int(np.prod(sizes)), len(sizes))
    values = case["batch"] * case["positions"] * case["heads"] * case["head_size"]
    return (values * case.get("layers", 1), 3)


def _tensor_spec(
    exercise_id: str,
    function: str,
    make: Callable[[random.Random, int], list[tuple[Any, ...]]],
    prepare: Callable[..., tuple[Any, ...]],
    expected: Callable[..., np.ndarray],
    parameters: str,
    cases: int,
) -> ImplementSpec:
    """A spec whose outcome is the result's shape and its largest difference from ``expected``
    (the NumPy reference applied to the very arguments the learner's function was given)."""

    def reference_outcome(*args: Any) -> Any:
        return _agrees(expected(*(_np(a) for a in prepare(*args))))

    def summarize(result: Any, call_args: tuple[Any, ...]) -> Any:
        return _compare(result, expected(*(_np(a) for a in call_args)))

    return ImplementSpec(
        exercise_id,
        function,
        make,
        reference_outcome,
        cases=cases,
        prepare=prepare,
        summarize=summarize,
        parameters=tuple(parameters.split()),
        shortcuts=SHORTCUTS[exercise_id],
        size=case_size,
    )


check_layer_norm = register(
    _tensor_spec(
        "ch08.layer_norm",
        "layer_norm",
        _ln_cases,
        _ln_prepare,
        reference.layer_norm,
        "x weight bias eps",
        100,
    ),
    "Checks ``layer_norm(x, weight, bias, eps) -> Tensor`` (over the last axis, biased variance) "
    "against the NumPy reference on random inputs, to 1e-9.",
)
check_gelu = register(
    _tensor_spec(
        "ch08.gelu",
        "gelu",
        _gelu_cases,
        lambda case: (_tensor(_gelu_array(case["shape"], case["seed"])),),
        reference.gelu,
        "x",
        100,
    ),
    "Checks ``gelu(x) -> Tensor`` (tanh form) against the NumPy reference, to 1e-9.",
)
check_gpt_attention = register(
    ImplementSpec(
        "ch08.attention",
        "causal_self_attention",
        _block_cases,
        lambda case: _attention_reference(*_attn_prepare(case)),
        cases=40,
        prepare=_attn_prepare,
        summarize=lambda counted, args: _attention_summary(counted, args),
        parameters=("x", "w", "prefix", "config"),
        call=counted_call,
        shortcuts=SHORTCUTS["ch08.attention"],
        size=case_size,
        explain=lambda got, want, *args: _attention_explain(got, want),
    ),
    "Checks ``causal_self_attention(x, w, prefix, config) -> Tensor`` on random ``[B, T, C]`` "
    "inputs and random weights against the NumPy reference, to 1e-9, with at most one copy and "
    "no read-out of the tensors to NumPy.",
    name="check_gpt_attention",
)
check_mlp = register(
    _tensor_spec("ch08.mlp", "mlp", _block_cases, _mlp_prepare, reference.mlp, "x w prefix", 40),
    "Checks ``mlp(x, w, prefix) -> Tensor`` against the NumPy reference, to 1e-9.",
)
check_block = register(
    _tensor_spec(
        "ch08.block", "block", _block_cases, _block_prepare, reference.block, "x w i config", 30
    ),
    "Checks ``block(x, w, i, config) -> Tensor`` (pre-LayerNorm residual block) against the NumPy "
    "reference, to 1e-9.",
)
check_gpt_forward = register(
    _tensor_spec(
        "ch08.forward",
        "gpt_forward",
        _model_cases,
        _forward_prepare,
        lambda w, config, tokens: reference.forward(w, config, tokens),
        "w config tokens",
        20,
    ),
    "Checks ``gpt_forward(w, config, tokens) -> logits`` on random small models against the NumPy "
    "reference, to 1e-9.",
)
check_generate = register(
    ImplementSpec(
        "ch08.generate",
        "generate",
        _generate_cases,
        _generate_reference,
        cases=20,
        prepare=_generate_prepare,
        summarize=_generate_summary,
        parameters=("w", "config", "tokens", "max_new_tokens"),
        shortcuts=SHORTCUTS["ch08.generate"],
        size=case_size,
    ),
    "Checks ``generate(w, config, tokens, max_new_tokens) -> new token ids`` (greedy) against the "
    "reference's tokens, one by one, on cases that include multi-layer models where leaving out "
    "the causal mask changes the tokens.",
)

#: Exercise id -> check (chapter 8's part of the package's CHECKS).
GPT_CHECKS: dict[str, Callable[..., CheckReport]] = {
    "ch08.layer_norm": check_layer_norm,
    "ch08.gelu": check_gelu,
    "ch08.attention": check_gpt_attention,
    "ch08.mlp": check_mlp,
    "ch08.block": check_block,
    "ch08.forward": check_gpt_forward,
    "ch08.generate": check_generate,
}

__all__ = [
    "AGREES",
    "COPIES_ALLOWED",
    "COPIES_KEY",
    "ERROR_KEY",
    "GPT_CHECKS",
    "MODEL_MODULES",
    "READ_OUTS_KEY",
    "SHORTCUTS",
    "TOLERANCE",
    "case_size",
    "check_block",
    "check_gelu",
    "check_generate",
    "check_gpt_attention",
    "check_gpt_forward",
    "check_layer_norm",
    "check_mlp",
    "generate_without_mask",
    "mask_matters",
]
