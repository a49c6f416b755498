"""General misconception detectors of ops (reductions, broadcasting, attention weights) and of
errors (a base class named, a Python error, success predicted for a refusal, an error whose rule
the request keeps). Like those of :mod:`llmfs.course.exercises.detectors`, each names the rule
the answer broke and never a value of the answer.
"""

from __future__ import annotations

import builtins
import inspect
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from llmfs.course.exercises.detectors import (
    ints,
    is_field,
    method,
    operand,
    redo,
    shows,
    source,
)
from llmfs.course.exercises.entries import error_classes, resolve_error_name
from llmfs.tensor import TensorView, ops

if TYPE_CHECKING:
    from llmfs.course.exercises.misconceptions import Context


# -- reductions and broadcasting --------------------------------------------------------------

_REDUCTIONS = ("sum", "max", "min", "mean", "prod")


def _reduction(context: Context) -> tuple[str, TensorView, int, bool] | None:
    call, x = context.outcome.call, operand(context, 0)
    if call is None or call.method not in _REDUCTIONS or x is None or not x.shape:
        return None
    axis = call.keywords.get("axis", call.args[1] if len(call.args) > 1 else None)
    keepdims = call.keywords.get("keepdims", call.args[2] if len(call.args) > 2 else False)
    if not isinstance(axis, int) or not isinstance(keepdims, bool):
        return None
    return call.method, x, axis % len(x.shape), keepdims


def _reduced(name: str, x: TensorView, axis: int, keepdims: bool) -> TensorView | None:
    return redo(lambda: getattr(ops, name)(x, axis=axis, keepdims=keepdims))


def wrong_axis(value: Any, truth: Any, context: Context) -> str | None:
    """A reduction over another axis than the one asked for."""
    found = _reduction(context)
    if found is None:
        return None
    name, x, axis, keepdims = found
    for other in range(len(x.shape)):
        if other == axis:
            continue
        redone = _reduced(name, x, other, keepdims)
        if any(
            shows(f, value, truth, redone) and is_field(f, truth, context)
            for f in ("shape", "values")
        ):
            return (
                f"That is the {name} over another axis: axis=k names the axis that disappears "
                "(every line of values along it folds into one value), and the other axes stay, "
                "in order."
            )
    return None


def keepdims_flipped(value: Any, truth: Any, context: Context) -> str | None:
    """The reduced axis kept when ``keepdims`` is off, or dropped when it is on."""
    found = _reduction(context)
    if found is None:
        return None
    name, x, axis, keepdims = found
    redone = _reduced(name, x, axis, not keepdims)
    if not any(
        shows(f, value, truth, redone) and is_field(f, truth, context) for f in ("shape", "values")
    ):
        return None
    if keepdims:
        return (
            "keepdims=True keeps the reduced axis, with size 1, so the result still lines up "
            "with its operand for broadcasting."
        )
    return "Without keepdims=True the reduced axis disappears from the result's shape."


def reduce_kept_labels(value: Any, truth: Any, context: Context) -> str | None:
    """``reduce(x, modes_in, modes_out)`` read as "reduce OVER modes_out"."""
    call, x = context.outcome.call, operand(context, 0)
    if call is None or call.method != "reduce" or x is None or len(call.args) < 3:
        return None
    modes_in, modes_out = call.args[1], call.args[2]
    if not isinstance(modes_in, str) or not isinstance(modes_out, str):
        return None
    others = "".join(m for m in modes_in if m not in modes_out)
    redone = redo(lambda: ops.reduce(x, modes_in, others)) if others else None
    if any(
        shows(f, value, truth, redone) and is_field(f, truth, context) for f in ("shape", "values")
    ):
        return (
            "reduce keeps the labels of modes_out, in that order, and sums over the labels it "
            "leaves out: the output labels name what stays, not what is summed."
        )
    return None


_BINARY = frozenset(
    {"add", "sub", "mul", "div", "maximum", "minimum", "power", "equal", "less", "greater"}
)


def _left_aligned(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """The broadcast shape if shapes were aligned on the LEFT (``None``: they would clash)."""
    rank = max(len(a), len(b))
    a, b = (*a, *[1] * (rank - len(a))), (*b, *[1] * (rank - len(b)))
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return tuple(out)


def broadcast_from_left(value: Any, truth: Any, context: Context) -> str | None:
    """Shapes aligned from the left (padded with size-1 axes at the end)."""
    call = context.outcome.call
    a, b = operand(context, 0), operand(context, 1)
    if call is None or call.method not in _BINARY or a is None or b is None:
        return None
    if len(a.shape) == len(b.shape):
        return None
    left = _left_aligned(a.shape, b.shape)
    named = error_class(value) if isinstance(value, str) and value != "raises" else None
    raises = value == "raises" or (named is not None and named.__name__ == "BroadcastError")
    thought = (left is None and raises) or (
        left is not None and ints(value) and tuple(value) == left != tuple(truth or ())
    )
    if not thought:
        return None
    return (
        "Broadcasting compares shapes from the RIGHT: the last axes pair first, and the "
        "shorter shape gets size-1 axes at the front, never at the end."
    )


# -- values -----------------------------------------------------------------------------------


def _rows(value: Any) -> list[list[float]] | None:
    """The last-axis rows of a nested list of numbers."""
    if not isinstance(value, list) or not value:
        return None
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return [[float(v) for v in value]]
    rows: list[list[float]] = []
    for item in value:
        found = _rows(item)
        if found is None:
            return None
        rows.extend(found)
    return rows


def uniform_attention(value: Any, truth: Any, context: Context) -> str | None:
    """Causal attention weights predicted as equal shares: over every key (the mask forgotten),
    or over the keys a query may see (the scores forgotten). The truth must be causal weights:
    rows of [queries, keys] matrices that sum to 1 and give every later key (column j > row i)
    weight 0."""
    got, want = _rows(value), _rows(truth)
    if got is None or want is None or len(got) != len(want) or not want:
        return None
    width = len(want[0])
    if width < 2 or len(want) % width or any(len(g) != width for g in got):
        return None

    def close(a: float, b: float) -> bool:
        return math.isclose(a, b, abs_tol=1e-3)

    causal = all(
        close(sum(w), 1.0) and all(w[j] == 0.0 for j in range(r % width + 1, width))
        for r, w in enumerate(want)
    )
    if not causal:
        return None
    if all(close(x, 1 / width) for g in got for x in g):
        return (
            "The causal mask adds -inf to the scores of later keys, so softmax gives them "
            "weight 0: a query never averages over keys after its own position."
        )
    shares = [
        [1 / (r % width + 1) if j <= r % width else 0.0 for j in range(width)]
        for r in range(len(got))
    ]
    equal = all(close(x, y) for g, row in zip(got, shares) for x, y in zip(g, row))
    if equal and not all(close(x, y) for g, w in zip(got, want) for x, y in zip(g, w)):
        return (
            "The mask only removes the later keys; among the keys a query may see, softmax "
            "weights each by exp(score), so different scores get different weights, not equal "
            "shares."
        )
    return None


# -- errors -----------------------------------------------------------------------------------


def error_class(name: str) -> type[BaseException] | None:
    """The llmfs error class ``name`` names (in any case, by a unique prefix), or the Python
    built-in exception of that name; ``None`` for neither."""

    full = resolve_error_name(name)
    if full is not None:
        return error_classes()[full]
    found = getattr(builtins, name, None)
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def _truth_error(truth: Any, context: Context) -> type[BaseException] | None:
    exception = context.outcome.exception
    if exception is not None:
        return type(exception)
    if isinstance(truth, str) and truth != "none":  # a plain key holding an error class name
        return error_class(truth)
    return None


def rule_of(cls: type[BaseException]) -> str:
    """The rule an error class stands for, from the first paragraph of its docstring."""
    doc = inspect.getdoc(cls) or ""
    first = doc.split("\n\n")[0].replace("\n", " ")
    first = re.sub(r":\w+:`~?([^`]+)`", lambda m: m.group(1).rsplit(".", 1)[-1], first)
    first = first.replace("``", "")
    return first[:1].lower() + first[1:].rstrip(".")


def base_class(value: Any, truth: Any, context: Context) -> str | None:
    """The base class of the true error named instead of the error itself."""
    wanted = _truth_error(truth, context)
    named = error_class(value) if isinstance(value, str) and value != "none" else None
    if wanted is None or named is None or named is wanted or not issubclass(wanted, named):
        return None
    if named.__module__ == "builtins":
        return f"{named.__name__} is its base class: name the llmfs class."
    return f"{named.__name__} is a base class of the error: name the class itself."


def foreign_error(value: Any, truth: Any, context: Context) -> str | None:
    """A Python built-in exception that the true error does not derive from."""
    wanted = _truth_error(truth, context)
    named = error_class(value) if isinstance(value, str) and value != "none" else None
    if named is None or named.__module__ != "builtins" or wanted is None:
        return None
    if issubclass(wanted, named):
        return None
    return (
        "The library raises its own errors (each a TensorError, itself a ValueError), and "
        "this request breaks a rule of the library: name the llmfs class."
    )


def refused_request(value: Any, truth: Any, context: Context) -> str | None:
    """ "none" (it succeeds) for a request the library refuses."""
    wanted = _truth_error(truth, context)
    if value != "none" or wanted is None:
        return None
    if wanted.__name__ == "StaleViewError":
        return (
            "A view made before its owner was written to is stale: the library checks the "
            "owner's version on every use and refuses the old view, so nothing reads values "
            "that changed under it."
        )
    return f"The library refuses this request because {rule_of(wanted)}."


def wrong_refusal(value: Any, truth: Any, context: Context) -> str | None:
    """An llmfs error named for a request that succeeds or that breaks another rule."""
    named = error_class(value) if isinstance(value, str) and value != "none" else None
    if named is None or named.__module__ == "builtins":
        return None
    wanted = _truth_error(truth, context)
    if wanted is not None and issubclass(wanted, named):
        return None  # a base class: base_class says so
    if wanted is None and named.__name__ == "NonContiguousReshapeError":
        view = source(context)
        if method(context) == "reshape" and view is not None and not view.is_contiguous():
            return (
                "A view that is not contiguous can still be reshaped without a copy when the "
                "reshape only splits an axis or merges axes whose strides chain (stride[k] == "
                "size[k + 1] × stride[k + 1]): check the axes the reshape touches, not the whole "
                "view's contiguity."
            )
    if (
        wanted is None
        and named.__name__ == "BroadcastError"
        and broadcast_from_left(value, truth, context)
    ):
        return None  # broadcast_from_left says why
    return (
        f"{named.__name__} is raised when {rule_of(named)}. Check whether this request breaks "
        "that rule."
    )


__all__ = [
    "base_class",
    "broadcast_from_left",
    "error_class",
    "foreign_error",
    "keepdims_flipped",
    "reduce_kept_labels",
    "refused_request",
    "rule_of",
    "uniform_attention",
    "wrong_axis",
    "wrong_refusal",
]
