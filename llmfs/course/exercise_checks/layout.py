"""Checks of the "implement it" exercises about layouts and broadcasting (chapters 1 to 4).

Each check runs the learner's function on many random cases drawn from the exercise's
:class:`~llmfs.course.exercise_checks.spec.ImplementSpec` and compares every outcome with the
library's answer (:mod:`llmfs.tensor.layout`, the traversal and the view methods), never with
arithmetic written here, so a check and the library cannot disagree, and a table of the visible
cases cannot pass (the grader draws other seeds).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmfs.course.exercise_checks.report import CheckReport
from llmfs.course.exercise_checks.spec import SPECS, run_spec


def _checker(exercise_id: str, doc: str) -> Callable[..., CheckReport]:
    spec = SPECS[exercise_id]

    def check(
        fn: Any, *, seed: int | None = None, cases: int | None = None, record_attempt: bool = True
    ) -> CheckReport:
        return run_spec(spec, fn, seed=seed, cases=cases, record_attempt=record_attempt)

    check.__name__ = (
        f"check_{spec.function}" if exercise_id != "ch02.q5_fix" else ("check_reshape_after_copy")
    )
    check.__qualname__ = check.__name__
    check.__doc__ = doc + (
        f"\n\n``seed`` (default {spec.visible_seed}, the notebook's) and ``cases`` (default "
        f"{spec.cases}) choose the random cases; the report shows the smallest failing case first."
    )
    return check


check_compute_strides = _checker(
    "ch01.compute_strides",
    "Checks ``compute_strides(shape) -> strides`` (row-major, a size-0 axis counted as 1).",
)
check_flat_index = _checker(
    "ch01.flat_index",
    "Checks ``flat_index(shape, coordinate) -> offset`` of a row-major tensor: ``IndexError`` for "
    "a component outside its axis, ``ValueError`` for a coordinate of the wrong length.",
)
check_is_contiguous = _checker(
    "ch01.is_contiguous",
    "Checks ``is_contiguous(shape, strides) -> bool``: size-1 axes may carry any stride, a layout "
    "with no values (or a scalar) is contiguous.",
)
check_copying_transpose = _checker(
    "ch02.copying_transpose",
    "Checks ``copying_transpose(values, shape) -> values``: the row-major storage of the "
    "transpose of a row-major ``[rows, cols]`` matrix.",
)
check_permute_layout = _checker(
    "ch02.permute_layout",
    "Checks ``permute_layout(shape, strides, axes) -> (shape, strides)``; ``ValueError`` unless "
    "``axes`` holds each axis exactly once.",
)
check_logical_offsets = _checker(
    "ch02.logical_offsets",
    "Checks the offset cursor ``logical_offsets(shape, strides, base_offset) -> offsets`` in "
    "logical row-major order (negative strides included).",
)
check_slice_layout = _checker(
    "ch02.slice_layout",
    "Checks ``slice_layout(shape, strides, base_offset, axis, start, stop) -> (shape, strides, "
    "base_offset)``; ``ValueError`` unless ``0 <= start <= stop <= size``.",
)
check_reshape_after_copy = _checker(
    "ch02.q5_fix",
    "Checks ``flatten_copy(view)``: a tensor of shape ``[count]`` holding the view's values in "
    "logical order, in storage of its own (a new owner, not the view's).",
)
check_materialize = _checker(
    "ch02.materialize",
    "Checks ``materialize(storage, shape, strides, base_offset) -> values``: the view's values in "
    "logical row-major order, read through the offset cursor.",
)
check_can_reshape_without_copy = _checker(
    "ch03.can_reshape",
    "Checks ``can_reshape_without_copy(shape, strides, new_shape) -> bool`` against the library's "
    "reshape plan; ``ValueError`` when the element counts differ.",
)
check_merge_layout = _checker(
    "ch03.merge_layout",
    "Checks ``merge_layout(shape, strides, start, end) -> (shape, strides)``; ``ValueError`` when "
    "the axes are not neighbours in storage.",
)
check_broadcast_shape = _checker(
    "ch04.broadcast_shape",
    "Checks ``broadcast_shape(a, b) -> shape``: NumPy's broadcast shape of two shapes (aligned on "
    "the right; on each axis the sizes are equal or one is 1); ``ValueError`` otherwise.",
)
check_broadcast_strides = _checker(
    "ch04.broadcast_strides",
    "Checks ``broadcast_strides(shape, strides, target) -> strides``: the strides of ``expand`` "
    "(0 for a new or grown axis); ``ValueError`` for a target of lower rank or an axis of size "
    "other than 1 asked to change size.",
)
check_softmax_rows = _checker(
    "ch04.softmax",
    "Checks ``softmax_rows(x) -> tensor``: the softmax of each row of a 2-D tensor, against a "
    "NumPy reference (values within a relative 1e-6), large scores included; a row with no "
    "values is an error (``ValueError``, as ``EmptyReductionError`` is one).",
)

__all__ = [
    "check_broadcast_shape",
    "check_broadcast_strides",
    "check_can_reshape_without_copy",
    "check_compute_strides",
    "check_copying_transpose",
    "check_flat_index",
    "check_is_contiguous",
    "check_logical_offsets",
    "check_materialize",
    "check_merge_layout",
    "check_permute_layout",
    "check_reshape_after_copy",
    "check_slice_layout",
    "check_softmax_rows",
]
