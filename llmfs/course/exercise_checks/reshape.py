"""Checks of chapter 3's "implement it" exercises: merging axes and reshaping without a copy.

* ``can_reshape_without_copy(shape, strides, new_shape) -> bool``, against the library's reshape
  plan (:func:`~llmfs.tensor.layout.plan_reshape`); ``ValueError`` when the element counts
  differ. A layout with no values reshapes to any shape with no values.
* ``merge_layout(shape, strides, start, end) -> (shape, strides)``, ``ValueError`` when the
  axes are not neighbours in storage; a layout with no values merges any axes.

The views come from :func:`~llmfs.course.exercise_checks.cases.view_layout` with scalars (for the
reshape), empty axes, size-1 axes and flipped axes. A stride that no offset depends on (that of a
size-1 axis, or any stride of a layout with no values) is compared as ``"any"``: both the
library's answer and the learner's are read that way (:func:`free_strides`), since the library
picks one value where every value is right.
"""

from __future__ import annotations

import random
from typing import Any

from llmfs.course.exercise_checks.cases import shape_size, view_layout, views_at
from llmfs.course.exercise_checks.shortcuts import forbid
from llmfs.course.exercise_checks.spec import ImplementSpec, register, to_json
from llmfs.tensor import layout
from llmfs.tensor.errors import NonContiguousReshapeError

#: How often a reshape case is a scalar, and how often a case has an empty axis.
SCALAR, EMPTY = 0.08, 0.1

#: A stride no offset depends on, as the merge check compares it.
ANY_STRIDE = "any"

#: Edge cases every run starts with: an empty view (an axis of size 0), a scalar grown to size-1
#: axes and back, and size-1 axes with strides of their own.
_RESHAPE_FIXED: list[tuple[Any, ...]] = [
    ([0, 3], [3, 1], [3, 0]),
    ([2, 0], [1, 2], [0]),
    ([], [], [1, 1]),
    ([1, 1], [7, 3], []),
    ([3, 1, 2], [1, 99, 3], [6]),
]


def _reshape_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases = list(_RESHAPE_FIXED)
    while len(cases) < n:
        sizes, strides, _, _ = view_layout(rng, negative=True, scalar=SCALAR, empty=EMPTY)
        count = layout.element_count(sizes)
        new_shape = _factorize(rng, count)
        if rng.random() < 0.08:
            new_shape = [*new_shape, 2]  # a count mismatch
        cases.append((sizes, strides, new_shape))
    return cases[:n]


def _factorize(rng: random.Random, count: int) -> list[int]:
    """A random shape of ``count`` values (for 0, sizes with a 0 among them)."""
    if count == 0:
        sizes = [rng.randint(1, 4) for _ in range(rng.randint(0, 2))]
        sizes.insert(rng.randint(0, len(sizes)), 0)
        return sizes
    factors = []
    rest = count
    while rest > 1:
        divisors = [d for d in range(2, rest + 1) if rest % d == 0]
        d = rng.choice(divisors)
        factors.append(d)
        rest //= d
    rng.shuffle(factors)
    grouped: list[int] = []
    for f in factors:
        if grouped and rng.random() < 0.4:
            grouped[-1] *= f
        else:
            grouped.append(f)
    if rng.random() < 0.2:
        grouped.insert(rng.randint(0, len(grouped)), 1)
    return grouped


def _can_reshape(sizes: list[int], strides: list[int], new_shape: list[int]) -> bool:
    try:
        layout.plan_reshape(sizes, strides, new_shape)
    except NonContiguousReshapeError:
        return False
    return True


def _merge_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([1, 4], [9, 1], 0, 1), ([2, 0, 3], [1, 2, 5], 0, 2)]
    while len(cases) < n:
        sizes, strides, _, _ = view_layout(rng, negative=True, empty=EMPTY, rank=(2, 4))
        start = rng.randrange(len(sizes) - 1)
        end = rng.randint(start + 1, len(sizes) - 1)
        cases.append((sizes, strides, start, end))
    return cases


def free_strides(result: Any) -> Any:
    """A ``(shape, strides)`` answer with every stride no offset depends on read as
    :data:`ANY_STRIDE`: a size-1 axis's, and all of them when the shape has no values. Anything
    else is returned as plain JSON data, unchanged."""
    data = to_json(result)
    if not (isinstance(data, list) and len(data) == 2 and all(isinstance(p, list) for p in data)):
        return data
    sizes, strides = data
    if len(sizes) != len(strides) or not all(isinstance(v, int) for v in sizes):
        return data
    empty = 0 in sizes
    return [sizes, [ANY_STRIDE if empty or size == 1 else s for size, s in zip(sizes, strides)]]


def _merge(sizes: list[int], strides: list[int], start: int, end: int) -> Any:
    merged = (*sizes[:start], layout.element_count(sizes[start : end + 1]), *sizes[end + 1 :])
    new_shape, new_strides = layout.plan_reshape(sizes, strides, merged)
    return free_strides([list(new_shape), list(new_strides)])


check_can_reshape_without_copy = register(
    ImplementSpec(
        "ch03.can_reshape",
        "can_reshape_without_copy",
        _reshape_cases,
        _can_reshape,
        parameters=("shape", "strides", "new_shape"),
        shortcuts=forbid(
            ".Layout.reshape", instead="runs of axes compared by their sizes and strides"
        ),
        size=shape_size(0),
        views=views_at(0, 1),
    ),
    "Checks ``can_reshape_without_copy(shape, strides, new_shape) -> bool`` against the library's "
    "reshape plan; ``ValueError`` when the element counts differ.",
)
check_merge_layout = register(
    ImplementSpec(
        "ch03.merge_layout",
        "merge_layout",
        _merge_cases,
        _merge,
        parameters=("shape", "strides", "start", "end"),
        shortcuts=forbid(".Layout.reshape", instead="a stride check of neighbouring axes"),
        summarize=lambda result, call_args: free_strides(result),
        size=shape_size(0),
        views=views_at(0, 1),
    ),
    "Checks ``merge_layout(shape, strides, start, end) -> (shape, strides)``; ``ValueError`` when "
    "the axes are not neighbours in storage. A stride no offset depends on (a size-1 axis's, or "
    "any of a layout with no values) may be anything.",
)

__all__ = [
    "ANY_STRIDE",
    "check_can_reshape_without_copy",
    "check_merge_layout",
    "free_strides",
]
