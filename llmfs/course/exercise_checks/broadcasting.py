"""Checks of chapter 4's "implement it" exercises: broadcasting and a stable softmax.

* ``broadcast_shape(a, b) -> shape``: NumPy's broadcast shape of two shapes, ``ValueError``
  otherwise (scalars and empty axes included);
* ``broadcast_strides(shape, strides, target) -> strides``: the strides of ``expand`` (0 for a
  new or grown axis; negative strides kept), ``ValueError`` for a target of lower rank or an
  axis of size other than 1 asked to change size;
* ``softmax_rows(x) -> tensor``: the softmax of each row of a 2-D tensor against a NumPy
  reference (values within a relative :data:`SOFTMAX_RTOL`), large scores included; a row with
  no values is an error.
"""

from __future__ import annotations

import random
from typing import Any

from llmfs.course.exercise_checks.cases import shape, shape_size, views_at
from llmfs.course.exercise_checks.shortcuts import forbid
from llmfs.course.exercise_checks.spec import ImplementSpec, register
from llmfs.tensor import Tensor, TensorView, layout


def _broadcast_shape_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([], [2, 3]), ([0], [1]), ([0], [2])]
    while len(cases) < n:
        out = shape(rng, low=0 if rng.random() < 0.1 else 1, high=4, rank=(0, 4))
        a, b = (
            [size if rng.random() < 0.6 else 1 for size in out[rng.randint(0, len(out)) :]]
            for _ in range(2)
        )
        common = min(len(a), len(b))
        if common and rng.random() < 0.25:  # sizes that are neither equal nor 1
            k = rng.randint(1, common)
            a[-k] = rng.randint(2, 5)
            b[-k] = rng.choice([v for v in range(0, 6) if v not in (1, a[-k])])
        case = (a, b) if rng.random() < 0.5 else (b, a)
        if case not in cases:
            cases.append(case)
    return cases


def _broadcast_shape(a: list[int], b: list[int]) -> list[int]:
    return list(layout.broadcast_shapes(a, b))  # BroadcastError is a ValueError


def _broadcast_strides_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([], [], []), ([3], [1], [2, 3]), ([2, 1], [1, 1], [2, 3])]
    while len(cases) < n:
        shape = [rng.choice((1, 1, 2, 3, 4)) for _ in range(rng.randint(0, 3))]
        if shape and rng.random() < 0.05:
            shape[rng.randrange(len(shape))] = 0
        strides = [rng.randint(-6, 6) for _ in shape]
        target = [rng.randint(0, 4) for _ in range(rng.choice((0, 0, 1, 2)))]
        target += [rng.randint(0, 4) if size == 1 else size for size in shape]
        roll = rng.random()
        grown = [k for k, size in enumerate(shape) if size != 1]
        if roll < 0.15 and grown:  # an axis of size other than 1 asked to change size
            k = rng.choice(grown)
            target[len(target) - len(shape) + k] = shape[k] + rng.randint(1, 3)
        elif roll < 0.22 and shape:  # fewer target axes than source axes
            target = target[len(target) - len(shape) + 1 :]
        if (shape, strides, target) not in cases:
            cases.append((shape, strides, target))
    return cases


def _broadcast_strides(shape: list[int], strides: list[int], target: list[int]) -> list[int]:
    return list(layout.broadcast_layout(shape, strides, target)[1])


def _softmax_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([[1.0, 2.0, 3.0]],), ([[1000.0, 1001.0, 1002.0]],), ([[]],)]
    while len(cases) < n:
        rows, cols = rng.randint(1, 4), rng.randint(1, 5)
        roll = rng.random()
        if roll < 0.2:
            low, high = 700.0, 1000.0  # exp overflows: the direct formula gives inf / inf
        elif roll < 0.33:
            low, high = -1000.0, -700.0  # exp underflows to 0: the direct formula gives 0 / 0
        else:
            low, high = -5.0, 5.0
        cases.append(
            ([[round(rng.uniform(low, high), 2) for _ in range(cols)] for _ in range(rows)],)
        )
    return cases


def _softmax_reference(rows: list[list[float]]) -> Any:
    """Row softmax in NumPy, the stable way (the maximum subtracted first)."""
    import numpy as np

    x = np.array(rows, dtype=np.float64).reshape(len(rows), -1 if rows and rows[0] else 0)
    if x.shape[1] == 0:
        raise ValueError("a row with no values has no maximum")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).tolist()


def _softmax_prepare(rows: list[list[float]]) -> tuple[Any, ...]:
    cols = len(rows[0]) if rows else 0
    return (Tensor.from_vec([len(rows), cols], [v for row in rows for v in row]),)


#: Relative tolerance of a softmax value: float64 rounding differs with the order of operations.
SOFTMAX_RTOL = 1e-6


def _softmax_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    """The learner's result as nested lists, each value within :data:`SOFTMAX_RTOL` of the
    reference read as the reference's (so an exact comparison tolerates rounding, and a wrong
    value is shown as it is)."""
    import math

    if not isinstance(result, (Tensor, TensorView)):
        return {"not a tensor": type(result).__name__}
    source: Tensor = call_args[0]
    view = result.view() if isinstance(result, Tensor) else result
    if list(view.shape) != list(source.shape):
        return {"shape": list(view.shape)}
    try:
        want = _softmax_reference(source.tolist())
    except ValueError:  # the reference refuses (an empty row): the values stay as they are
        return view.tolist()

    def snap(got: Any, expected: Any) -> Any:
        if isinstance(got, list):
            return [snap(g, e) for g, e in zip(got, expected)]
        close = math.isclose(float(got), expected, rel_tol=SOFTMAX_RTOL, abs_tol=1e-12)
        return expected if close else float(got)

    return snap(view.tolist(), want)


check_broadcast_shape = register(
    ImplementSpec(
        "ch04.broadcast_shape",
        "broadcast_shape",
        _broadcast_shape_cases,
        _broadcast_shape,
        parameters=("a", "b"),
        shortcuts=forbid(
            ".broadcast_shapes",
            "numpy.broadcast_shapes",
            instead="the two shapes padded on the left and compared axis by axis",
        ),
        size=shape_size(0, 1),
    ),
    "Checks ``broadcast_shape(a, b) -> shape``: NumPy's broadcast shape of two shapes (aligned on "
    "the right; on each axis the sizes are equal or one is 1); ``ValueError`` otherwise.",
)
check_broadcast_strides = register(
    ImplementSpec(
        "ch04.broadcast_strides",
        "broadcast_strides",
        _broadcast_strides_cases,
        _broadcast_strides,
        parameters=("shape", "strides", "target"),
        shortcuts=forbid(".Layout.expand", instead="the shape aligned with the end of the target"),
        size=shape_size(0, 2),
        views=views_at(0, 1),
    ),
    "Checks ``broadcast_strides(shape, strides, target) -> strides``: the strides of ``expand`` "
    "(0 for a new or grown axis); ``ValueError`` for a target of lower rank or an axis of size "
    "other than 1 asked to change size.",
)
check_softmax_rows = register(
    ImplementSpec(
        "ch04.softmax",
        "softmax_rows",
        _softmax_cases,
        _softmax_reference,
        parameters=("x",),
        prepare=_softmax_prepare,
        summarize=_softmax_summary,
        shortcuts=forbid(
            "llmfs.gpt.tensor_model.softmax",
            "llmfs.gpt.reference.softmax",
            "llmfs.tensor.functional.softmax",
            instead="ops.max, ops.exp and ops.sum",
        ),
    ),
    "Checks ``softmax_rows(x) -> tensor``: the softmax of each row of a 2-D tensor, against a "
    "NumPy reference (values within a relative 1e-6), large scores included; a row with no "
    "values is an error (``ValueError``, as ``EmptyReductionError`` is one).",
)

__all__ = [
    "SOFTMAX_RTOL",
    "check_broadcast_shape",
    "check_broadcast_strides",
    "check_softmax_rows",
]
