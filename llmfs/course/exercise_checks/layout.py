"""Checks of the "implement it" exercises about layouts (chapters 1 to 3).

Every expected answer comes from the library (:mod:`llmfs.tensor.layout` and the view methods),
never from arithmetic written here, so a check and the library cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from llmfs.course.exercise_checks.report import CaseResult, CheckReport, record, run_cases, show
from llmfs.tensor import Tensor, TensorError, TensorView, layout

# Shapes that cover the course's (10, 9, 5, 13) example, scalars, size-1 and size-0 axes and a
# rank-5 shape.
STRIDE_SHAPES: tuple[tuple[int, ...], ...] = (
    (10, 9, 5, 13),
    (2, 3, 4),
    (6,),
    (),
    (1, 5, 1),
    (2, 0, 3),
    (3, 1, 2, 4, 5),
)

# (shape, coordinate): the course's [1][2][3] in [2, 3, 4], corners, a scalar, and bad coordinates.
FLAT_INDEX_CASES: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = (
    ((2, 3, 4), (1, 2, 3)),
    ((2, 3, 4), (0, 0, 0)),
    ((2, 3, 4), (1, 0, 0)),
    ((2, 3, 4), (0, 2, 1)),
    ((10, 9, 5, 13), (1, 2, 3, 4)),
    ((6,), (5,)),
    ((), ()),
    ((2, 3, 4), (0, 3, 0)),
    ((2, 3, 4), (2, 0, 0)),
    ((2, 3, 4), (1, 2)),
)

# (shape, strides, start, end): plain, whole, transposed, sliced, stepped and size-1 layouts.
MERGE_CASES: tuple[tuple[tuple[int, ...], tuple[int, ...], int, int], ...] = (
    ((2, 3, 4, 5), (60, 20, 5, 1), 1, 2),
    ((2, 3, 4, 5), (60, 20, 5, 1), 0, 3),
    ((2, 3, 4, 5), (60, 20, 5, 1), 2, 3),
    ((3, 2), (1, 3), 0, 1),
    ((2, 2), (3, 1), 0, 1),
    ((2, 3), (12, 2), 0, 1),
    ((2, 3), (6, 2), 0, 1),
    ((4, 2, 3), (1, 12, 4), 1, 2),
    ((2, 1, 3), (3, 99, 1), 0, 2),
)


def _library_error(error: TensorError) -> type[Exception]:
    # The exercises ask for Python's built-in errors; map the library's refusal to the one asked.
    if isinstance(error, IndexError):
        return IndexError
    return ValueError


def _ints(got: Any) -> list[int] | None:
    if not isinstance(got, (list, tuple)):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in got):
        return None
    return list(got)


def _same_ints(got: Any, expected: Any) -> bool:
    return _ints(got) == list(expected)


def check_compute_strides(
    compute_strides: Callable[[list[int]], Any], *, record_attempt: bool = True
) -> CheckReport:
    """Checks ``compute_strides(shape) -> strides`` (row-major, in elements) against
    :func:`llmfs.tensor.layout.row_major_strides` on :data:`STRIDE_SHAPES`.

    The answer may be a list or tuple of ints. A size-0 axis counts as 1, as in the library.
    """
    cases = [
        (f"compute_strides({show(list(shape))})", (list(shape),), layout.row_major_strides(shape))
        for shape in STRIDE_SHAPES
    ]
    return run_cases(
        "ch01.compute_strides",
        compute_strides,
        cases,
        name="compute_strides",
        same=_same_ints,
        record_attempt=record_attempt,
    )


def check_flat_index(
    flat_index: Callable[[list[int], list[int]], Any], *, record_attempt: bool = True
) -> CheckReport:
    """Checks ``flat_index(shape, coordinate) -> offset`` of a row-major tensor against
    :func:`llmfs.tensor.layout.storage_offset` on :data:`FLAT_INDEX_CASES`.

    A coordinate outside its axis must raise :class:`IndexError`; a coordinate of the wrong
    length must raise :class:`ValueError` (the library raises its own subclasses of both).
    """
    cases: list[tuple[str, tuple[Any, ...], Any]] = []
    for shape, coordinate in FLAT_INDEX_CASES:
        strides = layout.row_major_strides(shape)
        expected: Any
        try:
            expected = layout.storage_offset(shape, strides, 0, coordinate)
        except TensorError as error:
            expected = _library_error(error)
        label = f"flat_index({show(list(shape))}, {show(list(coordinate))})"
        cases.append((label, (list(shape), list(coordinate)), expected))
    return run_cases(
        "ch01.flat_index",
        flat_index,
        cases,
        name="flat_index",
        same=lambda got, want: isinstance(got, int) and not isinstance(got, bool) and got == want,
        record_attempt=record_attempt,
    )


def check_merge_layout(
    merge_layout: Callable[[list[int], list[int], int, int], Any], *, record_attempt: bool = True
) -> CheckReport:
    """Checks ``merge_layout(shape, strides, start, end) -> (shape, strides)`` (axes ``start``
    to ``end`` inclusive fused into one, no copy) against the library's reshape planner
    (:func:`llmfs.tensor.layout.plan_reshape`) on :data:`MERGE_CASES`.

    When the axes cannot be merged without a copy the function must raise :class:`ValueError`.
    The answer may use lists or tuples.
    """
    cases: list[tuple[str, tuple[Any, ...], Any]] = []
    for shape, strides, start, end in MERGE_CASES:
        merged = (*shape[:start], layout.element_count(shape[start : end + 1]), *shape[end + 1 :])
        expected: Any
        try:
            expected = layout.plan_reshape(shape, strides, merged)
        except TensorError as error:
            expected = _library_error(error)
        label = f"merge_layout({show(list(shape))}, {show(list(strides))}, {start}, {end})"
        cases.append((label, (list(shape), list(strides), start, end), expected))
    return run_cases(
        "ch03.merge_layout",
        merge_layout,
        cases,
        name="merge_layout",
        same=_same_layout,
        record_attempt=record_attempt,
    )


def _same_layout(got: Any, expected: Sequence[Sequence[int]]) -> bool:
    if not isinstance(got, (list, tuple)) or len(got) != 2:
        return False
    return _same_ints(got[0], expected[0]) and _same_ints(got[1], expected[1])


def check_reshape_after_copy(
    flat: Any, sliced: TensorView, *, record_attempt: bool = True
) -> CheckReport:
    """Checks chapter 2's two safe steps: ``flat`` must hold ``sliced``'s values, in logical
    order, as shape ``[4]``, in storage of its own (a copy), while ``sliced`` still reads its
    owner unchanged. ``flat = None`` (the stub) is "not implemented yet".
    """
    exercise = "ch02.q5_fix"
    if flat is None:
        return CheckReport(exercise, "not implemented", (), "flat is still None")
    is_tensor = isinstance(flat, (Tensor, TensorView))
    values = sliced.materialize().as_slice().tolist()
    cases = [
        CaseResult(
            "flat is a tensor or a view",
            "Tensor or TensorView",
            type(flat).__name__,
            is_tensor,
        )
    ]
    if is_tensor:
        owner = flat if isinstance(flat, Tensor) else flat.owner
        got_values = flat.tolist()
        cases += [
            CaseResult("shape", show([4]), show(list(flat.shape)), list(flat.shape) == [4]),
            CaseResult("values", show(values), show(got_values), got_values == values),
            CaseResult(
                "owner",
                "a new owner (copy)",
                "shared with sliced" if owner is sliced.owner else "a new owner (copy)",
                owner is not sliced.owner,
            ),
        ]
    cases.append(
        CaseResult(
            "sliced unchanged",
            "shape [2, 2], strides [3, 1], base offset 1",
            f"shape {show(list(sliced.shape))}, strides {show(list(sliced.strides))}, "
            f"base offset {sliced.base_offset}",
            (list(sliced.shape), list(sliced.strides), sliced.base_offset) == ([2, 2], [3, 1], 1),
        )
    )
    report = CheckReport(
        exercise, "passed" if all(case.ok for case in cases) else "failed", tuple(cases)
    )
    return record(report) if record_attempt else report


__all__ = [
    "FLAT_INDEX_CASES",
    "MERGE_CASES",
    "STRIDE_SHAPES",
    "check_compute_strides",
    "check_flat_index",
    "check_merge_layout",
    "check_reshape_after_copy",
]
