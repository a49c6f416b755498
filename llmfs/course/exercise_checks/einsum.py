"""The "implement it" exercise of chapter 6: a naive two-operand einsum over strided storage.

The learner writes ``naive_einsum(expression, x, y) -> (shape, values)``: ``expression`` is
``"<term>,<term>-><output>"`` (each term names every axis of its operand once; the output is
explicit), ``x`` and ``y`` are ``[storage, shape, strides, base_offset]`` layouts over plain
lists, and the result is the output's shape and its values in row-major order. A label shared
by the two operands must have the same size in both, else ``ValueError``.

The random cases mix free labels (one operand, kept), batch labels (both operands, kept),
contracted labels (both operands, summed) and private summed labels (one operand, summed), with
scalar operands and scalar outputs, over non-contiguous layouts (permuted axes, stepped and offset
slices, flipped axes), plus a few shared labels of unequal sizes. The reference is the library's
:func:`~llmfs.tensor.einsum.functions.einsum` on views of the same storage, so the check and
the library cannot disagree.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from llmfs.course.exercise_checks.cases import shape_size
from llmfs.course.exercise_checks.shortcuts import forbid
from llmfs.course.exercise_checks.spec import ImplementSpec, register
from llmfs.tensor import Tensor, TensorView, as_strided, einsum

#: The labels the random expressions use.
LETTERS = "ijklmn"

#: The chapter's fixture as layouts: a = [[1, 2, 3], [4, 5, 6]], b = [[1, 0], [0, 1], [1, 1]].
_A = [[1, 2, 3, 4, 5, 6], [2, 3], [3, 1], 0]
_B = [[1, 0, 0, 1, 1, 1], [3, 2], [2, 1], 0]


def strided_operand(rng: random.Random, shape: Sequence[int]) -> list[Any]:
    """A random non-contiguous layout of ``shape`` over a fresh storage list:
    ``[storage, shape, strides, base_offset]``. The axes are stored in a random order, some are
    read with a step of 2 or from a start of 1, and some are flipped (a negative stride)."""
    rank = len(shape)
    order = list(range(rank))
    rng.shuffle(order)  # order[p] is the axis stored at position p (outermost first)
    steps = [rng.choice((1, 1, 1, 2)) for _ in range(rank)]
    starts = [rng.choice((0, 0, 1)) for _ in range(rank)]
    owner_sizes = [shape[axis] * steps[axis] + starts[axis] for axis in order]
    owner_strides = [1] * rank
    for position in range(rank - 2, -1, -1):
        owner_strides[position] = owner_strides[position + 1] * owner_sizes[position + 1]
    strides = [0] * rank
    base = 0
    for position, axis in enumerate(order):
        strides[axis] = owner_strides[position] * steps[axis]
        base += starts[axis] * owner_strides[position]
    for axis in range(rank):
        if shape[axis] > 1 and rng.random() < 0.2:
            base += (shape[axis] - 1) * strides[axis]
            strides[axis] = -strides[axis]
    count = 1
    for size in owner_sizes:
        count *= size
    storage = [rng.randint(-3, 9) for _ in range(count)]
    return [storage, list(shape), strides, base]


def _expression(rng: random.Random) -> tuple[str, str, str, dict[str, int]]:
    labels = rng.sample(LETTERS, rng.randint(1, 5))
    sizes = {label: rng.randint(1, 3) for label in labels}
    left: list[str] = []
    right: list[str] = []
    out: list[str] = []
    for label in labels:
        role = rng.choice(("left", "right", "batch", "contracted", "private"))
        if role in ("left", "batch", "contracted") or (role == "private" and rng.random() < 0.5):
            left.append(label)
        if role in ("right", "batch", "contracted") or (role == "private" and label not in left):
            right.append(label)
        if role in ("left", "right", "batch"):
            out.append(label)
    # At most three axes per operand keeps each storage list short.
    left, right = left[:3], right[:3]
    out = [label for label in out if label in left or label in right]
    for term in (left, right, out):
        rng.shuffle(term)
    return "".join(left), "".join(right), "".join(out), sizes


def naive_einsum_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    """The visible fixture and edge cases first, then random expressions and layouts."""
    cases: list[tuple[Any, ...]] = [
        ("ik,kj->ij", _A, _B),
        ("ij,jk->", _A, _B),
        (",ij->ji", [[10], [], [], 0], _A),
        ("ij,kj->ik", _A, _A),
        ("ij,ij->ij", _A, [[1, 2, 3], [2, 3], [0, 1], 0]),  # the second one broadcasts rows
    ]
    # The last visible case reads storage [1, 2, 3] with a 0 row stride: both rows are [1, 2, 3].
    while len(cases) < n:
        left, right, out, sizes = _expression(rng)
        shape_x = [sizes[label] for label in left]
        shape_y = [sizes[label] for label in right]
        shared = [label for label in left if label in right]
        if shared and rng.random() < 0.08:
            # A shared label of unequal sizes (neither 1, so it cannot broadcast): ValueError.
            label = rng.choice(shared)
            axis = right.index(label)
            shape_x[left.index(label)] = max(2, sizes[label])
            shape_y[axis] = shape_x[left.index(label)] + 1
        x = strided_operand(rng, shape_x)
        y = strided_operand(rng, shape_y)
        cases.append((f"{left},{right}->{out}", x, y))
    return cases[:n]


def _view(operand: Sequence[Any]) -> TensorView:
    storage, shape, strides, base = operand
    owner = Tensor.from_vec([len(storage)], [float(v) for v in storage], dtype="float64")
    return as_strided(owner, shape, strides, base)


def naive_einsum_reference(expression: str, x: Sequence[Any], y: Sequence[Any]) -> list[Any]:
    """The library's answer for one case: ``[shape, values in row-major order]``."""
    result = einsum(expression, _view(x), _view(y))
    values = result.view().materialize().as_slice().tolist()
    return [list(result.shape), values]


def _size(expression: str, x: Sequence[Any], y: Sequence[Any]) -> tuple[int, ...]:
    # As the layout chapters' cases: the operands' sizes summed, then their ranks (an operand is
    # [storage, shape, strides, base]).
    return shape_size(0, 1)(x[1], y[1])


def _views(expression: str, x: Sequence[Any], y: Sequence[Any]) -> list[tuple[str, TensorView]]:
    return [("x", _view(x)), ("y", _view(y))]


check_naive_einsum = register(
    ImplementSpec(
        "ch06.naive_einsum",
        "naive_einsum",
        naive_einsum_cases,
        naive_einsum_reference,
        parameters=("expression", "x", "y"),
        shortcuts=forbid(
            "llmfs.tensor.einsum.functions.einsum",
            "llmfs.tensor.einsum.plan.EinsumPlan",
            "llmfs.tensor.einsum.contraction.ContractionPlan",
            "numpy.einsum",
            instead="loops over the output's and the summed labels' coordinates",
        ),
        size=_size,
        views=_views,
    ),
    "Checks ``naive_einsum(expression, x, y) -> (shape, values)`` against the library's "
    "``einsum`` on random expressions (free, batch, contracted and private labels; scalar "
    "operands and outputs) over random non-contiguous layouts; ``ValueError`` for a shared label "
    "of unequal sizes.",
)


__all__ = [
    "LETTERS",
    "check_naive_einsum",
    "naive_einsum_cases",
    "naive_einsum_reference",
    "strided_operand",
]
