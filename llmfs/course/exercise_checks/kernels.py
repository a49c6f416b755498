"""Checks of the "implement it" exercises about Metal kernels (chapter 5).

A kernel exercise's learner function takes no arguments and returns the MSL source of one kernel
(a learner may also pass the source string itself). Its check compiles that source once and runs
it on random inputs and shapes through
:func:`~llmfs.tensor.backends.metal.run_kernel`: on the emulator wherever a C++ compiler is
found (isolated, so a missing bounds guard is a :class:`~llmfs.tensor.KernelMemoryError`, never
a crash, with the threads in a shuffled order), else on Metal. Every case is compared with
NumPy computing the same thing on the layout the library builds (descriptors from
:func:`~llmfs.tensor.backends.metal.ops.view_descriptor`, broadcast strides from
:func:`~llmfs.tensor.layout.broadcast_layout`). Each case launches more threads than there are
values now and then, so the guard is tested too.

Cases are JSON data (values, shapes, strides, the grid size), so a grader can run a learner's
kernel in another process on its own seeds. ``view_offset`` is a plain Python function checked
against the library's own offset walk.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import numpy as np

from llmfs.course.exercise_checks.cases import shape_size, view_layout, view_over, views_at
from llmfs.course.exercise_checks.shortcuts import Shortcuts
from llmfs.course.exercise_checks.spec import ImplementSpec, register, to_json
from llmfs.tensor import TensorView, layout
from llmfs.tensor.layout import Layout
from llmfs.tensor.traversal import StridedOffsets

#: Random cases per kernel check: each launch is a subprocess of the emulator (about 30 ms).
KERNEL_CASES = 16

#: The thread order the checks run the emulator's threads in (a kernel must not depend on it).
SHUFFLE_SEED = 5


def _launch(source: str, name: str, buffers: list[Any], grid: int) -> None:
    # The Metal backend probes for a compiler when loaded: only kernel checks pay for it.
    from llmfs.tensor.backends.metal import emulator_available, run_kernel

    if emulator_available():
        run_kernel(source, name, buffers, grid, backend="metal-emulator", shuffle=SHUFFLE_SEED)
    else:
        run_kernel(source, name, buffers, grid, backend="metal")


def _floats(values: np.ndarray) -> list[Any]:
    return [to_json(float(v)) for v in values.tolist()]


def _values(rng: random.Random, count: int) -> list[float]:
    # Quarters are exact in float32, so a result is compared exactly.
    return [rng.randint(-16, 16) / 4 for _ in range(count)]


def _extra_threads(rng: random.Random) -> int:
    return rng.choice((0, 0, 1, 2, 3, 7))


# --------------------------------------------------------------------------------------------
# relu: buffers 0 x, 1 out, 2 count
# --------------------------------------------------------------------------------------------


def _relu_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    # No values at all, with threads launched past them: only the guard runs. NaN and the
    # infinities come up in the fixed case and in about a third of the random ones: relu keeps
    # NaN (np.maximum(x, 0) and torch.relu do), which a kernel built on one comparison may not.
    cases: list[tuple[Any, ...]] = [
        ([-2.0, -1.0, 0.0, 1.0, 2.0, 3.0], 8),
        ([], 3),
        ([math.nan, -1.5, math.inf, -math.inf], 5),
    ]
    while len(cases) < n:
        count = rng.randint(1, 12)
        values = _values(rng, count)
        if rng.random() < 0.35:
            values[rng.randrange(count)] = rng.choice((math.nan, math.nan, math.inf, -math.inf))
        cases.append((values, count + _extra_threads(rng)))
    return cases[:n]


def _relu_reference(values: list[float], grid: int) -> list[Any]:
    return _floats(np.maximum(np.array(values, dtype=np.float32), np.float32(0)))


def _relu_explain(got: Any, want: Any, values: list[float], grid: int) -> str | None:
    """The NaN rule, when a wrong result turned a NaN input into a number."""
    if not isinstance(got, list) or len(got) != len(values):
        return None
    for value, result in zip(values, got):
        lost = isinstance(result, (int, float)) and not math.isnan(result)
        if math.isnan(value) and lost:
            return (
                "relu keeps NaN, as NumPy's np.maximum(x, 0) and PyTorch's torch.relu do: a NaN "
                "is a missing or broken value, and turning it into a number would hide it from "
                "every later check. Every comparison with NaN is false, so a kernel that keeps x "
                "only when a comparison is true sends NaN to the other branch; and MSL's max "
                "(like fmax) returns the operand that is not NaN. Let NaN take the branch that "
                "keeps x, or test isnan(x)."
            )
    return None


def _run_relu(source: str, values: list[float], grid: int) -> list[Any]:
    x = np.array(values, dtype=np.float32)
    out = np.full(len(values), np.nan, dtype=np.float32)
    _launch(source, "relu", [x, out, np.uint32(len(values))], grid)
    return _floats(out)


# --------------------------------------------------------------------------------------------
# view_offset(linear_index, descriptor): the kernels' helper, in Python
# --------------------------------------------------------------------------------------------


def descriptor_of(shape: Sequence[int], strides: Sequence[int], base_offset: int) -> list[int]:
    """The descriptor a kernel reads a view through: ``[rank, base_offset, *shape, *strides]``
    (the library's :func:`~llmfs.tensor.backends.metal.ops.view_descriptor`, as a list)."""
    # As above: the Metal backend is loaded only when a kernel exercise is checked.
    from llmfs.tensor.backends.metal.ops import view_descriptor

    layout_ = Layout(tuple(shape), tuple(strides), base_offset)
    return [int(v) for v in view_descriptor(layout_).tolist()]


def _view_offset_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [(3, [2, 1, 2, 2, 3, 1]), (0, [0, 4])]
    while len(cases) < n:
        shape, strides, base, _ = view_layout(rng, negative=True, scalar=0.08)
        if rng.random() < 0.25 and shape:
            strides[rng.randrange(len(shape))] = 0  # a broadcast axis
        count = layout.element_count(shape)
        cases.append((rng.randrange(count), descriptor_of(shape, strides, base)))
    return cases[:n]


def _view_offset_reference(linear_index: int, descriptor: list[int]) -> int:
    rank, base = descriptor[0], descriptor[1]
    shape = descriptor[2 : 2 + rank]
    strides = descriptor[2 + rank : 2 + 2 * rank]
    bounds = layout.offset_bounds(shape, strides, base)
    high = bounds[1] if bounds is not None else base
    walk = StridedOffsets(Layout(tuple(shape), tuple(strides), base), high + 1)
    for position, offset in enumerate(walk):
        if position == linear_index:
            return int(offset)
    raise IndexError(f"linear index {linear_index} is outside the view")


def _descriptor_layout(descriptor: list[int]) -> tuple[list[int], list[int], int]:
    rank = descriptor[0]
    return descriptor[2 : 2 + rank], descriptor[2 + rank : 2 + 2 * rank], descriptor[1]


def _view_offset_size(linear_index: int, descriptor: list[int]) -> tuple[int, ...]:
    shape, _, _ = _descriptor_layout(descriptor)
    return (sum(shape), len(shape))


def _view_offset_views(linear_index: int, descriptor: list[int]) -> list[tuple[str, TensorView]]:
    return [("descriptor", view_over(*_descriptor_layout(descriptor)))]


# --------------------------------------------------------------------------------------------
# scale: buffers 0 src, 1 out, 2 view descriptor, 3 count, 4 alpha
# --------------------------------------------------------------------------------------------


def _scale_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    fixture = [10.0, 11.0, 12.0, 20.0, 21.0, 22.0]
    cases: list[tuple[Any, ...]] = [
        (fixture, [2, 2], [3, 1], 1, 2.0, 4),
        ([10.0, 11.0, 12.0], [], [], 1, 2.0, 3),  # a scalar view at offset 1
        ([10.0, 11.0, 12.0], [2, 0], [1, 1], 0, 2.0, 2),  # an empty view
    ]
    while len(cases) < n:
        shape, strides, base, owner_len = view_layout(rng, negative=True, scalar=0.1, empty=0.1)
        count = layout.element_count(shape)
        alpha = rng.choice((-2.0, -1.0, 0.5, 2.0, 3.0, 0.25))
        cases.append(
            (_values(rng, owner_len), shape, strides, base, alpha, count + _extra_threads(rng))
        )
    return cases[:n]


def _strided(storage: list[float], shape: list[int], strides: list[int], base: int) -> np.ndarray:
    array = np.array(storage, dtype=np.float32)
    return np.array(
        [
            array[o]
            for o in StridedOffsets(Layout(tuple(shape), tuple(strides), base), len(storage))
        ],
        dtype=np.float32,
    )


def _scale_reference(
    storage: list[float], shape: list[int], strides: list[int], base: int, alpha: float, grid: int
) -> list[Any]:
    return _floats(np.float32(alpha) * _strided(storage, shape, strides, base))


def _run_scale(
    source: str,
    storage: list[float],
    shape: list[int],
    strides: list[int],
    base: int,
    alpha: float,
    grid: int,
) -> list[Any]:
    count = layout.element_count(shape)
    src = np.array(storage, dtype=np.float32)
    out = np.full(count, np.nan, dtype=np.float32)
    view = np.array(descriptor_of(shape, strides, base), dtype=np.int32)
    _launch(source, "scale", [src, out, view, np.uint32(count), np.float32(alpha)], grid)
    return _floats(out)


# --------------------------------------------------------------------------------------------
# add with broadcasting: buffers 0 a, 1 b, 2 out, 3 view_a, 4 view_b, 5 count
# --------------------------------------------------------------------------------------------


def _broadcast_pair(rng: random.Random) -> tuple[list[int], list[int]]:
    shape = [rng.randint(1, 4) for _ in range(rng.randint(1, 3))]
    a = [size if rng.random() < 0.7 else 1 for size in shape]
    b = [size if rng.random() < 0.5 else 1 for size in shape]
    b = b[rng.randint(0, len(b) - 1) :] if rng.random() < 0.5 else b  # fewer axes: right-aligned
    if rng.random() < 0.5:
        a, b = b, a
    return a, b


def _add_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [
        ([10.0, 11.0, 12.0, 20.0, 21.0, 22.0], [2, 3], [1.0, 2.0, 3.0], [3], 6),
        ([5.0], [], [1.0, 2.0], [2], 3),  # a scalar broadcast along a vector
        ([1.5], [1, 1], [], [2, 0], 1),  # a result with no values
    ]
    while len(cases) < n:
        a_shape, b_shape = _broadcast_pair(rng)
        count = layout.element_count(layout.broadcast_shapes(a_shape, b_shape))
        cases.append(
            (
                _values(rng, layout.element_count(a_shape)),
                a_shape,
                _values(rng, layout.element_count(b_shape)),
                b_shape,
                count + _extra_threads(rng),
            )
        )
    return cases[:n]


def broadcast_descriptors(
    a_shape: Sequence[int], b_shape: Sequence[int]
) -> tuple[list[int], list[int], list[int]]:
    """The result shape and the two descriptors the add kernel reads row-major operands of
    ``a_shape`` and ``b_shape`` through (a broadcast axis has stride 0). Raises
    :class:`~llmfs.tensor.BroadcastError` when the shapes do not broadcast."""
    shape = layout.broadcast_shapes(a_shape, b_shape)
    views = []
    for own in (a_shape, b_shape):
        _, strides = layout.broadcast_layout(own, layout.row_major_strides(tuple(own)), shape)
        views.append(descriptor_of(shape, strides, 0))
    return list(shape), views[0], views[1]


def _add_reference(
    a: list[float], a_shape: list[int], b: list[float], b_shape: list[int], grid: int
) -> list[Any]:
    left = np.array(a, dtype=np.float32).reshape(a_shape)
    right = np.array(b, dtype=np.float32).reshape(b_shape)
    return _floats((left + right).reshape(-1))


def _run_add(
    source: str, a: list[float], a_shape: list[int], b: list[float], b_shape: list[int], grid: int
) -> list[Any]:
    shape, view_a, view_b = broadcast_descriptors(a_shape, b_shape)
    count = layout.element_count(shape)
    out = np.full(count, np.nan, dtype=np.float32)
    buffers = [
        np.array(a, dtype=np.float32),
        np.array(b, dtype=np.float32),
        out,
        np.array(view_a, dtype=np.int32),
        np.array(view_b, dtype=np.int32),
        np.uint32(count),
    ]
    _launch(source, "add", buffers, grid)
    return _floats(out)


check_relu_kernel = register(
    ImplementSpec(
        "ch05.relu",
        "relu_kernel",
        _relu_cases,
        _relu_reference,
        cases=KERNEL_CASES,
        parameters=("values", "grid"),
        kernel=_run_relu,
        explain=_relu_explain,
    ),
    "Checks ``relu_kernel() -> MSL``: kernel ``relu`` (buffers 0 x, 1 out, 2 count, all float "
    "but the uint count) writes ``np.maximum(x, 0)`` (NaN kept, as NumPy and PyTorch keep it), "
    "launched with up to 7 threads more than values; inputs include NaN and the infinities.",
)
check_view_offset = register(
    ImplementSpec(
        "ch05.view_offset",
        "view_offset",
        _view_offset_cases,
        _view_offset_reference,
        parameters=("linear_index", "descriptor"),
        shortcuts=Shortcuts(
            (
                "llmfs.tensor.traversal.StridedOffsets",
                "llmfs.tensor.layout.Layout.storage_offset",
            ),
            "a loop over the axes, last to first, with % and //",
        ),
        size=_view_offset_size,
        views=_view_offset_views,
    ),
    "Checks ``view_offset(linear_index, descriptor) -> offset``: the storage offset of the value "
    "at row-major position ``linear_index`` of the view ``[rank, base, *shape, *strides]``.",
)
check_scale_kernel = register(
    ImplementSpec(
        "ch05.scale",
        "scale_kernel",
        _scale_cases,
        _scale_reference,
        cases=KERNEL_CASES,
        parameters=("storage", "shape", "strides", "base_offset", "alpha", "grid"),
        kernel=_run_scale,
        size=shape_size(1, storage_at=0),
        views=views_at(1, 2, 3, storage_at=0, name="src"),
    ),
    "Checks ``scale_kernel() -> MSL``: kernel ``scale`` (buffers 0 src, 1 out, 2 view "
    "descriptor, 3 count, 4 alpha) writes ``alpha * value`` of a strided view in row-major "
    "order, launched with up to 7 threads more than values.",
)
check_add_kernel = register(
    ImplementSpec(
        "ch05.broadcast_add",
        "add_kernel",
        _add_cases,
        _add_reference,
        cases=KERNEL_CASES,
        parameters=("a", "a_shape", "b", "b_shape", "grid"),
        kernel=_run_add,
        size=shape_size(1, 3),
    ),
    "Checks ``add_kernel() -> MSL``: kernel ``add`` (buffers 0 a, 1 b, 2 out, 3 view_a, "
    "4 view_b, 5 count) writes ``a + b`` with both operands read through descriptors of the "
    "result's shape (stride 0 on a broadcast axis).",
)

__all__ = [
    "KERNEL_CASES",
    "SHUFFLE_SEED",
    "broadcast_descriptors",
    "check_add_kernel",
    "check_relu_kernel",
    "check_scale_kernel",
    "check_view_offset",
    "descriptor_of",
]
