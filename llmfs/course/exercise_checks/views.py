"""Checks of chapter 2's "implement it" exercises: views over shared storage.

* ``copying_transpose(values, shape) -> values``: the row-major storage of the transpose of a
  row-major ``[rows, cols]`` matrix (empty and single-row or single-column matrices included);
* ``permute_layout(shape, strides, axes) -> (shape, strides)``, ``ValueError`` unless ``axes``
  holds each axis exactly once;
* ``logical_offsets(shape, strides, base_offset) -> offsets``, the offset cursor in logical
  row-major order;
* ``slice_layout(shape, strides, base_offset, axis, start, stop) -> (shape, strides,
  base_offset)``, ``ValueError`` unless ``0 <= start <= stop <= size``;
* ``flatten_copy(view)`` (the fix of ``ch02.q5``): a tensor of shape ``[count]`` in storage of
  its own;
* ``materialize(storage, shape, strides, base_offset) -> values``.

Layouts come from :func:`~llmfs.course.exercise_checks.cases.view_layout` with scalars (where the
function takes no axis), empty axes, size-1 axes and flipped axes; answers from the library.
"""

from __future__ import annotations

import random
from typing import Any

from llmfs.course.exercise_checks.cases import (
    shape_size,
    storage,
    view_layout,
    view_over,
    views_at,
)
from llmfs.course.exercise_checks.shortcuts import STRIDED_READERS, forbid
from llmfs.course.exercise_checks.spec import ImplementSpec, register, to_json
from llmfs.tensor import Tensor, TensorError, TensorView, copying_transpose, layout
from llmfs.tensor.layout import Layout
from llmfs.tensor.traversal import StridedOffsets

#: How often a layout case is a scalar or has an empty axis.
SCALAR, EMPTY = 0.08, 0.08


def _transpose_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([], [0, 3]), ([], [2, 0])]
    while len(cases) < n:
        rows, cols = rng.randint(1, 5), rng.randint(1, 5)
        if rng.random() < 0.05:
            rows, cols = (0, cols) if rng.random() < 0.5 else (rows, 0)
        cases.append((storage(rng, rows * cols), [rows, cols]))
    return cases


def _transpose(values: list[int], sizes: list[int]) -> list[Any]:
    owner = Tensor.from_vec(sizes, values)
    return [to_json(v) for v in copying_transpose(owner).as_slice().tolist()]


def _permute_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([], [], [])]
    while len(cases) < n:
        sizes, strides, _, _ = view_layout(rng, negative=True, scalar=SCALAR, empty=EMPTY)
        axes = list(range(len(sizes)))
        rng.shuffle(axes)
        roll = rng.random()
        if roll < 0.08 and len(axes) > 1:
            axes[0] = axes[1]  # a duplicate axis
        elif roll < 0.14 and axes:
            axes = axes[:-1]  # too few axes
        elif roll < 0.2:
            if axes:
                axes[rng.randrange(len(axes))] = len(axes) + rng.randint(0, 2)  # out of range
            else:
                axes = [0]  # an axis a scalar does not have
        cases.append((sizes, strides, axes))
    return cases


def _permute(sizes: list[int], strides: list[int], axes: list[int]) -> Any:
    try:
        checked = layout.check_permutation(axes, len(sizes))
    except TensorError as error:
        raise ValueError(str(error)) from None  # the exercise asks for ValueError
    permuted = Layout(tuple(sizes), tuple(strides)).permute(checked)
    return [list(permuted.shape), list(permuted.strides)]


def _offsets_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([], [], 3), ([2, 0, 3], [3, 3, 1], 0)]
    while len(cases) < n:
        sizes, strides, base, _ = view_layout(rng, negative=True, scalar=SCALAR, empty=EMPTY)
        cases.append((sizes, strides, base))
    return cases


def _offsets(sizes: list[int], strides: list[int], base: int) -> list[int]:
    bounds = layout.offset_bounds(sizes, strides, base)
    if bounds is None:  # no values
        return []
    return list(StridedOffsets(Layout(tuple(sizes), tuple(strides), base), bounds[1] + 1))


def _slice_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    # No scalars: a slice needs an axis.
    cases: list[tuple[Any, ...]] = []
    while len(cases) < n:
        sizes, strides, base, _ = view_layout(rng, negative=True, empty=EMPTY)
        axis = rng.randrange(len(sizes))
        start = rng.randint(0, sizes[axis])
        stop = rng.randint(start, sizes[axis])
        roll = rng.random()
        if roll < 0.1:
            stop = sizes[axis] + rng.randint(1, 3)  # past the end
        elif roll < 0.18 and start > 0:
            start, stop = stop + 1, start  # start after stop
        cases.append((sizes, strides, base, axis, start, stop))
    return cases


def _slice(
    sizes: list[int], strides: list[int], base: int, axis: int, start: int, stop: int
) -> Any:
    try:
        sliced = Layout(tuple(sizes), tuple(strides), base).slice(axis, start, stop)
    except TensorError as error:
        raise ValueError(str(error)) from None  # the exercise asks for ValueError
    return [list(sliced.shape), list(sliced.strides), sliced.offset]


def _strided_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    # A scalar at an offset and an empty view first: the short run of ch02.q5_fix has both too.
    cases: list[tuple[Any, ...]] = [
        ([10, 21, 32], [], [], 2),
        ([10, 21, 32, 43], [2, 0], [2, 1], 0),
    ]
    while len(cases) < n:
        sizes, strides, base, owner_len = view_layout(
            rng, negative=True, scalar=SCALAR, empty=EMPTY
        )
        cases.append((storage(rng, owner_len), sizes, strides, base))
    return cases


def _view_of(values: list[int], sizes: list[int], strides: list[int], base: int) -> TensorView:
    return view_over(sizes, strides, base, values)


def _materialize(values: list[int], sizes: list[int], strides: list[int], base: int) -> list[Any]:
    return [
        to_json(v) for v in _view_of(values, sizes, strides, base).materialize().as_slice().tolist()
    ]


def _flatten_reference(values: list[int], sizes: list[int], strides: list[int], base: int) -> Any:
    flat = _materialize(values, sizes, strides, base)
    return {"shape": [len(flat)], "values": flat, "new_owner": True}


def _flatten_prepare(
    values: list[int], sizes: list[int], strides: list[int], base: int
) -> tuple[Any, ...]:
    return (_view_of(values, sizes, strides, base),)


def _flatten_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    source: TensorView = call_args[0]
    if not isinstance(result, (Tensor, TensorView)):
        return {"not a tensor": type(result).__name__}
    owner = result if isinstance(result, Tensor) else result.owner
    view = result.view() if isinstance(result, Tensor) else result
    return {
        "shape": list(view.shape),
        "values": [to_json(v) for v in view.materialize().as_slice().tolist()],
        "new_owner": owner is not source.owner,
    }


check_copying_transpose = register(
    ImplementSpec(
        "ch02.copying_transpose",
        "copying_transpose",
        _transpose_cases,
        _transpose,
        parameters=("values", "shape"),
        shortcuts=forbid(
            "llmfs.tensor.view.copying_transpose",
            *STRIDED_READERS,
            instead="two loops over the plain list of values",
        ),
        size=shape_size(1, storage_at=0),
        views=views_at(1, storage_at=0, name="values"),
    ),
    "Checks ``copying_transpose(values, shape) -> values``: the row-major storage of the "
    "transpose of a row-major ``[rows, cols]`` matrix.",
)
check_permute_layout = register(
    ImplementSpec(
        "ch02.permute_layout",
        "permute_layout",
        _permute_cases,
        _permute,
        parameters=("shape", "strides", "axes"),
        shortcuts=forbid(".Layout.permute", instead="list indexing with axes"),
        size=shape_size(0),
        views=views_at(0, 1),
    ),
    "Checks ``permute_layout(shape, strides, axes) -> (shape, strides)``; ``ValueError`` unless "
    "``axes`` holds each axis exactly once.",
)
check_logical_offsets = register(
    ImplementSpec(
        "ch02.logical_offsets",
        "logical_offsets",
        _offsets_cases,
        _offsets,
        parameters=("shape", "strides", "base_offset"),
        shortcuts=forbid(*STRIDED_READERS, instead="a coordinate you step and carry yourself"),
        size=shape_size(0),
        views=views_at(0, 1, 2),
    ),
    "Checks the offset cursor ``logical_offsets(shape, strides, base_offset) -> offsets`` in "
    "logical row-major order (negative strides included).",
)
check_slice_layout = register(
    ImplementSpec(
        "ch02.slice_layout",
        "slice_layout",
        _slice_cases,
        _slice,
        parameters=("shape", "strides", "base_offset", "axis", "start", "stop"),
        shortcuts=forbid(".Layout.slice", instead="plain list arithmetic on the layout"),
        size=shape_size(0),
        views=views_at(0, 1, 2),
    ),
    "Checks ``slice_layout(shape, strides, base_offset, axis, start, stop) -> (shape, strides, "
    "base_offset)``; ``ValueError`` unless ``0 <= start <= stop <= size``.",
)
check_reshape_after_copy = register(
    ImplementSpec(
        "ch02.q5_fix",
        "flatten_copy",
        _strided_cases,
        _flatten_reference,
        cases=40,
        prepare=_flatten_prepare,
        summarize=_flatten_summary,
        parameters=("view",),
        size=shape_size(1, storage_at=0),
        views=views_at(1, 2, 3, storage_at=0, name="view"),
    ),
    "Checks ``flatten_copy(view)``: a tensor of shape ``[count]`` holding the view's values in "
    "logical order, in storage of its own (a new owner, not the view's).",
    name="check_reshape_after_copy",
)
check_materialize = register(
    ImplementSpec(
        "ch02.materialize",
        "materialize",
        _strided_cases,
        _materialize,
        parameters=("storage", "shape", "strides", "base_offset"),
        shortcuts=forbid(*STRIDED_READERS, instead="your logical_offsets and the list"),
        size=shape_size(1, storage_at=0),
        views=views_at(1, 2, 3, storage_at=0, name="storage"),
    ),
    "Checks ``materialize(storage, shape, strides, base_offset) -> values``: the view's values in "
    "logical row-major order, read through the offset cursor.",
)

__all__ = [
    "check_copying_transpose",
    "check_logical_offsets",
    "check_materialize",
    "check_permute_layout",
    "check_reshape_after_copy",
    "check_slice_layout",
]
