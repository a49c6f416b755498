"""Checks of chapter 1's "implement it" exercises: row-major strides, offsets and contiguity.

* ``compute_strides(shape) -> strides``: row-major, a size-0 axis counted as 1;
* ``flat_index(shape, coordinate) -> offset`` of a row-major tensor, ``IndexError`` for a
  component outside its axis (every coordinate of an empty axis is), ``ValueError`` for a
  coordinate of the wrong length;
* ``is_contiguous(shape, strides) -> bool``: size-1 axes may carry any stride, a layout with no
  values (or a scalar) is contiguous.

The cases include scalars (shape ``[]``), empty axes, size-1 axes and, for ``is_contiguous``,
negative strides; each is compared with the library's answer (:mod:`llmfs.tensor.layout`).
"""

from __future__ import annotations

import random
from typing import Any

from llmfs.course.exercise_checks.cases import row_major, shape, shape_size, views_at
from llmfs.course.exercise_checks.shortcuts import forbid
from llmfs.course.exercise_checks.spec import ImplementSpec, register
from llmfs.tensor import layout


def _strides_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([],), ([2, 0, 3],), ([1, 4],)]
    while len(cases) < n:
        cases.append((shape(rng, low=0 if rng.random() < 0.15 else 1, high=9, rank=(0, 5)),))
    return cases[:n]


def _flat_index_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([], []), ([3, 0], [1, 0])]
    while len(cases) < n:
        sizes = shape(rng, high=6, rank=(0, 4))
        if sizes and rng.random() < 0.06:
            sizes[rng.randrange(len(sizes))] = 0  # no coordinate is inside an empty axis
        coordinate = [rng.randrange(size) if size else 0 for size in sizes]
        roll = rng.random()
        if roll < 0.15 and sizes:
            axis = rng.randrange(len(sizes))
            coordinate[axis] = sizes[axis] + rng.randint(0, 2)
        elif roll < 0.22 and sizes:
            coordinate[rng.randrange(len(sizes))] = -rng.randint(1, 3)
        elif roll < 0.3:
            coordinate = coordinate[:-1] if coordinate else [0]
        cases.append((sizes, coordinate))
    return cases


def _flat_index(sizes: list[int], coordinate: list[int]) -> int:
    return layout.storage_offset(sizes, row_major(sizes), 0, coordinate)


def _contiguous_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([], []), ([2, 0, 3], [7, 1, 5]), ([1, 4], [99, 1])]
    while len(cases) < n:
        sizes = shape(rng, low=0 if rng.random() < 0.1 else 1, high=4, rank=(1, 4))
        strides = row_major(sizes)
        roll = rng.random()
        axis = rng.randrange(len(sizes))
        if roll < 0.25:
            strides[axis] = rng.randint(1, 30)  # a size-1 axis may carry any stride
        elif roll < 0.45 and len(sizes) > 1:
            other = rng.randrange(len(sizes))
            sizes[axis], sizes[other] = sizes[other], sizes[axis]
        elif roll < 0.6:
            strides[axis] *= 2
        elif roll < 0.7:
            strides[axis] = -strides[axis]
        cases.append((sizes, strides))
    return cases


check_compute_strides = register(
    ImplementSpec(
        "ch01.compute_strides",
        "compute_strides",
        _strides_cases,
        row_major,
        parameters=("shape",),
        shortcuts=forbid(".row_major_strides", instead="a loop over the axes, last to first"),
        size=shape_size(0),
        views=views_at(0),
    ),
    "Checks ``compute_strides(shape) -> strides`` (row-major, a size-0 axis counted as 1).",
)
check_flat_index = register(
    ImplementSpec(
        "ch01.flat_index",
        "flat_index",
        _flat_index_cases,
        _flat_index,
        parameters=("shape", "coordinate"),
        shortcuts=forbid(
            ".Layout.storage_offset", instead="your compute_strides and a sum of index * stride"
        ),
        size=shape_size(0),
        views=views_at(0),
    ),
    "Checks ``flat_index(shape, coordinate) -> offset`` of a row-major tensor: ``IndexError`` for "
    "a component outside its axis, ``ValueError`` for a coordinate of the wrong length.",
)
check_is_contiguous = register(
    ImplementSpec(
        "ch01.is_contiguous",
        "is_contiguous",
        _contiguous_cases,
        layout.is_contiguous,
        parameters=("shape", "strides"),
        # The module function and view.is_contiguous() both reach the Layout method.
        shortcuts=forbid(
            ".is_contiguous",
            ".Layout.is_contiguous",
            instead="a loop comparing each stride with the row-major one",
        ),
        size=shape_size(0),
        views=views_at(0, 1),
    ),
    "Checks ``is_contiguous(shape, strides) -> bool``: size-1 axes may carry any stride, a layout "
    "with no values (or a scalar) is contiguous.",
)

__all__ = ["check_compute_strides", "check_flat_index", "check_is_contiguous"]
