"""An implement check's report tells the truth, and its cases are the ones the chapters teach.

The headline counts every case run; the table shows distinct cases, the smallest first; an error
shows its class and message; the smallest failing case of a layout exercise is drawn as the
chapters' offset table. Every layout exercise's cases include scalars, empty axes, size-1 axes
and negative strides, wherever its function takes them; chapter 3's reference answers agree with
the library on all of them. Each chapter registers its exercises one way (``register``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from solutionkit import SOLUTIONS

from llmfs.course import CourseError
from llmfs.course.exercise_checks import (
    CHECKS,
    SPECS,
    check_can_reshape_without_copy,
    check_compute_strides,
    check_merge_layout,
    check_permute_layout,
    check_slice_layout,
    register,
    run_spec,
)
from llmfs.course.exercise_checks.cases import EDGE_KINDS, edge_kinds, view_layout, view_over
from llmfs.course.exercise_checks.report import CELL_MESSAGE_LIMIT, as_typed, error_text
from llmfs.course.exercise_checks.spec import case_label, case_order, draw_cases, expected_outcome
from llmfs.tensor import TensorError, layout


@pytest.fixture(autouse=True)
def attempts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "attempts.jsonl"
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(log))
    return log


def row_major(shape: list[int]) -> list[int]:
    """Row-major strides written out here (the library's would be a refused shortcut)."""
    strides = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        strides[k] = strides[k + 1] * max(shape[k + 1], 1)
    return strides


# -- the headline and the table ------------------------------------------------------------------


def test_the_headline_counts_every_case_run_not_the_cases_shown() -> None:
    drawn = draw_cases(SPECS["ch01.compute_strides"])
    wrong = sum(1 for (shape,) in drawn if 0 in shape)
    assert 0 < wrong < len(drawn)

    def zeros_for_empty(shape):  # right, except that an empty tensor gets zero strides
        return [0] * len(shape) if 0 in shape else row_major(shape)

    report = check_compute_strides(zeros_for_empty, record_attempt=False)
    assert (report.right, report.total) == (len(drawn) - wrong, len(drawn))
    first = repr(report).splitlines()[0]
    assert (
        first
        == f"check ch01.compute_strides: {len(drawn) - wrong} of {len(drawn)} right: ✗ not yet"
    )
    assert report.note.startswith(f"{wrong} of {len(drawn)} random cases (seed 0) wrong")
    passing = check_compute_strides(row_major, record_attempt=False)
    assert repr(passing).splitlines()[0].endswith(f"{len(drawn)} of {len(drawn)} right: ✓ passed")


def _smallest_distinct(
    exercise_id: str, cases: list[tuple[Any, ...]], key: Callable[[tuple[Any, ...]], str]
) -> list[str]:
    """The labels of the smallest case of each distinct ``key``, smallest first (three)."""
    spec = SPECS[exercise_id]
    seen: dict[str, str] = {}
    for args in sorted(cases, key=lambda args: case_order(spec, args)):
        seen.setdefault(key(args), case_label(spec, args))
    return list(seen.values())[:3]


def test_a_passing_run_shows_the_smallest_case_of_three_kinds_of_answer() -> None:
    spec = SPECS["ch01.compute_strides"]
    drawn = draw_cases(spec)
    assert len({json.dumps(args) for args in drawn}) < len(drawn)  # [] and [1] come up often
    report = check_compute_strides(row_major, record_attempt=False)
    labels = [case.label for case in report.cases]
    assert len(set(labels)) == 3
    # One case per number of strides: numbers do not make another kind of answer.
    by_kind = _smallest_distinct(spec.exercise_id, drawn, lambda a: str(len(a[0])))
    assert labels == by_kind
    assert labels[0] == "compute_strides([])"  # a scalar: no axes, total size 0
    assert "right; the smallest of each kind shown" in report.note
    reshape = check_can_reshape_without_copy(SOLUTIONS["ch03.can_reshape"], record_attempt=False)
    kinds = {case.expected.split(":")[0].split(" (")[0] for case in reshape.cases}
    assert kinds == {"true", "false", "raises ReshapeElementCountMismatchError"}


def test_failing_cases_are_shown_distinct_and_smallest_first() -> None:
    spec = SPECS["ch01.compute_strides"]

    def column_major(shape):
        strides, step = [], 1
        for size in shape:
            strides.append(step)
            step *= max(size, 1)
        return strides

    failing = [
        args
        for args in draw_cases(spec)
        if expected_outcome(spec, args)["value"] != column_major(*args)
    ]
    report = check_compute_strides(column_major, record_attempt=False)
    by_case = _smallest_distinct(spec.exercise_id, failing, json.dumps)
    assert [case.label for case in report.cases] == by_case
    orders = [case_order(spec, json.loads(f"[{c.label[16:-1]}]")) for c in report.cases]
    assert orders == sorted(orders)


def test_smallest_first_compares_sizes_then_rank_not_digits() -> None:
    spec = SPECS["ch01.compute_strides"]
    # Sizes summed, then the rank: [] < [1] < [2] < [1, 1] < [3] < [2, 3] < [0, 9, 7].
    shapes = [[0, 9, 7], [2, 3], [3], [1, 1], [2], [1], []]
    assert sorted(shapes, key=lambda s: case_order(spec, (s,))) == shapes[::-1]
    gpt = SPECS["ch08.layer_norm"]
    small, large = ({"shape": [2], "seed": 999999},), ({"shape": [7], "seed": 1},)
    assert case_order(gpt, small) < case_order(gpt, large)  # the seed is not a size


# -- errors ----------------------------------------------------------------------------------------


def test_a_learners_exception_shows_its_class_and_message() -> None:
    def refuses(shape, strides, axes):
        raise ValueError("these axes are not a permutation")

    report = check_permute_layout(refuses, record_attempt=False)
    assert {case.got for case in report.cases} == {
        "raised ValueError: these axes are not a permutation"
    }


def test_a_library_error_shows_the_llmfs_class_and_what_it_counts_as() -> None:
    raised: dict[str, str] = {}

    def checked(shape, strides, axes):  # lets the library refuse a bad permutation
        try:
            layout.check_permutation(axes, len(shape))
        except TensorError as error:
            raised[json.dumps([shape, strides, axes])] = type(error).__name__
            raise
        return [shape[a] for a in axes], [strides[a] for a in axes]

    report = check_permute_layout(checked, record_attempt=False)
    out_of_range = [c for c in report.cases if "AxisOutOfRangeError" in c.got]
    assert out_of_range, repr(report)
    # The library's class, then the learner-facing class it is compared as: an IndexError is
    # not the ValueError the exercise asks for, so the case is wrong and says why.
    assert all(
        c.got.startswith("raised AxisOutOfRangeError (an IndexError): ") for c in out_of_range
    )
    assert not any(c.ok for c in out_of_range)
    assert any(name == "AxisOutOfRangeError" for name in raised.values())


def test_the_expected_error_shows_the_librarys_message_and_long_messages_are_cut() -> None:
    def never_refuses(shape, strides, base, axis, start, stop):
        size = max(stop - start, 0)
        return (
            [*shape[:axis], size, *shape[axis + 1 :]],
            strides,
            base + start * strides[axis],
        )

    report = check_slice_layout(never_refuses, record_attempt=False)
    refusals = [c for c in report.cases if c.expected.startswith("raises ValueError: ")]
    assert refusals, repr(report)
    for case in refusals:
        assert len(case.expected) <= CELL_MESSAGE_LIMIT
    # The smallest failing case repeats both sides in full under the table.
    assert "\n  expected: raises ValueError: " in report.note

    error = ValueError("x" * 500)
    assert error_text(error, limit=40) == "raised ValueError: " + "x" * 20 + "…"
    assert error_text(error, limit=25) == "raised ValueError"  # too little room: the class only
    assert error_text(ValueError()) == "raised ValueError"
    assert error_text(IndexError("a\n b"), "IndexError", expected=True) == "raises IndexError: a b"


# -- the edge cases the chapters teach -------------------------------------------------------------

Layouts = Callable[..., list[tuple[list[int], list[int] | None]]]


def _descriptor(linear_index: int, d: list[int]) -> list[tuple[list[int], list[int] | None]]:
    rank = d[0]
    return [(d[2 : 2 + rank], d[2 + rank : 2 + 2 * rank])]


ALL = set(EDGE_KINDS)
NO_STRIDES = {"scalar", "empty", "size-1"}
#: Layout exercise -> (the layouts in a case's arguments, the edge kinds its cases must contain).
#: No scalar where the function needs an axis (a slice, a merge, a matrix), no negative stride
#: where it takes no strides, no empty view where it needs a value to point at.
LAYOUT_EXERCISES: dict[str, tuple[Layouts, set[str]]] = {
    "ch01.compute_strides": (lambda s: [(s, None)], NO_STRIDES),
    "ch01.flat_index": (lambda s, c: [(s, None)], NO_STRIDES),
    "ch01.is_contiguous": (lambda s, t: [(s, t)], ALL),
    "ch02.copying_transpose": (lambda v, s: [(s, None)], {"empty", "size-1"}),
    "ch02.permute_layout": (lambda s, t, a: [(s, t)], ALL),
    "ch02.logical_offsets": (lambda s, t, b: [(s, t)], ALL),
    "ch02.slice_layout": (lambda s, t, *rest: [(s, t)], ALL - {"scalar"}),
    "ch02.q5_fix": (lambda v, s, t, b: [(s, t)], ALL),
    "ch02.materialize": (lambda v, s, t, b: [(s, t)], ALL),
    "ch03.can_reshape": (lambda s, t, n: [(s, t), (n, None)], ALL),
    "ch03.merge_layout": (lambda s, t, a, b: [(s, t)], ALL - {"scalar"}),
    "ch04.broadcast_shape": (lambda a, b: [(a, None), (b, None)], NO_STRIDES),
    "ch04.broadcast_strides": (lambda s, t, g: [(s, t), (g, None)], ALL),
    "ch05.view_offset": (_descriptor, ALL - {"empty"}),
    "ch05.scale": (lambda v, s, t, b, alpha, grid: [(s, t)], ALL),
    "ch05.broadcast_add": (lambda a, s, b, t, grid: [(s, None), (t, None)], NO_STRIDES),
}


@pytest.mark.parametrize("exercise_id", sorted(LAYOUT_EXERCISES))
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_every_layout_exercise_draws_the_edge_cases_its_chapter_teaches(
    exercise_id: str, seed: int | None
) -> None:
    layouts, wanted = LAYOUT_EXERCISES[exercise_id]
    seen: set[str] = set()
    for args in draw_cases(SPECS[exercise_id], seed):
        for shape, strides in layouts(*args):
            seen |= edge_kinds(shape, strides)
    assert wanted <= seen, f"{exercise_id} never draws {sorted(wanted - seen)}"


def test_the_merge_cases_draw_size_1_axes_inside_the_merged_run() -> None:
    cases = draw_cases(SPECS["ch03.merge_layout"])
    inside = [c for c in cases if 1 in c[0][c[2] : c[3] + 1]]
    assert len(inside) >= 20


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_a_drawn_view_layout_is_a_valid_view_of_its_owner(seed: int) -> None:
    rng = random.Random(seed)
    shape, strides, base, owner_len = view_layout(rng, negative=True, scalar=0.2, empty=0.2)
    view = view_over(shape, strides, base, [0] * owner_len)  # raises for an invalid layout
    assert list(view.shape) == shape and view.size == layout.element_count(shape)


def test_the_layout_generator_draws_every_edge_kind() -> None:
    rng = random.Random(3)
    seen: set[str] = set()
    for _ in range(300):
        shape, strides, _, _ = view_layout(rng, negative=True, scalar=0.1, empty=0.1)
        seen |= edge_kinds(shape, strides)
    assert seen == ALL
    assert edge_kinds([], []) == {"scalar"}
    assert edge_kinds([2, 0, 1], [-1, 1, 1]) == {"empty", "size-1", "negative stride"}


# -- chapter 3: the reference answers agree with the library --------------------------------------


def old_can_reshape(shape, strides, new_shape):
    """Chapter 3's reference before it knew empty layouts: its runs of a size-0 axis never
    balance, and it runs past the end of the axes (IndexError)."""
    count = layout.element_count(shape)
    if count != layout.element_count(new_shape):
        raise ValueError("counts differ")
    old = [(size, stride) for size, stride in zip(shape, strides) if size != 1]
    new = [size for size in new_shape if size != 1]
    i = j = 0
    while i < len(old) and j < len(new):
        end, old_product, new_product = i + 1, old[i][0], new[j]
        j += 1
        while old_product != new_product:
            if old_product < new_product:
                old_product *= old[end][0]
                end += 1
            else:
                new_product *= new[j]
                j += 1
        for k in range(i, end - 1):
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return False
        i = end
    return True


def test_the_chapter_3_reference_agrees_with_the_library_on_empty_scalar_and_size_1_cases() -> None:
    solution = SOLUTIONS["ch03.can_reshape"]
    spec = replace(SPECS["ch03.can_reshape"], shortcuts=None)
    for seed in (None, 1):
        cases = draw_cases(spec, seed)
        assert ([0, 3], [3, 1], [3, 0]) in cases  # every run tries the case the old answer broke
        for args in cases:
            try:
                got: Any = {"value": solution(*args)}
            except ValueError:
                got = {"error": "ValueError"}
            assert got == expected_outcome(spec, args), args
    assert solution([0, 3], [3, 1], [3, 0]) is True


def test_a_reference_that_breaks_on_empty_layouts_fails_the_check() -> None:
    report = check_can_reshape_without_copy(old_can_reshape, record_attempt=False)
    assert report.status == "failed"
    assert "raised IndexError: list index out of range" in report.cases[0].got
    assert "0" in report.cases[0].label.split("],")[0]  # the smallest failing shape is empty


def test_a_merge_may_give_any_stride_where_no_offset_depends_on_it() -> None:
    solution = SOLUTIONS["ch03.merge_layout"]

    def other_free_strides(shape, strides, start, end):
        new_shape, new_strides = solution(shape, strides, start, end)
        empty = 0 in new_shape
        return new_shape, [99 if empty or n == 1 else s for n, s in zip(new_shape, new_strides)]

    def wrong_strides(shape, strides, start, end):
        new_shape, new_strides = solution(shape, strides, start, end)
        return new_shape, [s + 1 if n > 1 else s for n, s in zip(new_shape, new_strides)]

    assert check_merge_layout(other_free_strides, record_attempt=False).passed
    assert check_merge_layout(wrong_strides, record_attempt=False).status == "failed"
    report = check_merge_layout(solution, record_attempt=False)
    assert report.passed, repr(report)


# -- one registration path -------------------------------------------------------------------------


def test_every_chapter_registers_its_exercises_one_way() -> None:
    assert set(CHECKS) == set(SPECS)
    for check in CHECKS.values():
        assert check.__name__.startswith("check_")
        assert check.__doc__ and "seed" in check.__doc__
    assert CHECKS["ch02.q5_fix"].__name__ == "check_reshape_after_copy"
    with pytest.raises(CourseError, match="registered twice"):
        register(SPECS["ch01.compute_strides"], "again")


def test_a_check_runs_its_own_spec() -> None:
    spec = SPECS["ch01.flat_index"]
    report = CHECKS["ch01.flat_index"](SOLUTIONS["ch01.flat_index"], seed=5, record_attempt=False)
    again = run_spec(spec, SOLUTIONS["ch01.flat_index"], seed=5, record_attempt=False)
    assert repr(report) == repr(again) and report.passed


def test_a_report_too_wide_for_a_notebook_output_lists_one_block_per_case() -> None:
    """A case named by its whole input (a long label) would make the table wrap in a 900 px
    output: each case becomes a block, and only a label runs past the table width."""
    from llmfs.course.exercise_checks.report import TABLE_WIDTH, CaseResult, CheckReport

    long_label = "f(" + ", ".join(f"{k}" for k in range(60)) + ")"
    wide = CheckReport(
        "ch09.view_backward",
        "failed",
        (
            CaseResult(long_label, "[0, -9]", "[0, -4]", False),
            CaseResult("f(1)", "[1]", "[1]", True),
        ),
    )
    text = repr(wide)
    assert f"case {long_label}\n  expected  [0, -9]\n  got       [0, -4]\n" in text
    assert all(
        len(line) <= TABLE_WIDTH for line in text.splitlines() if not line.startswith("case ")
    )
    narrow = CheckReport("ch01.q1", "passed", (CaseResult("f(1)", "[1]", "[1]", True),))
    assert repr(narrow).splitlines()[1].split() == ["case", "expected", "got", "verdict"]


# -- strings as the learner typed them -------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.text() | st.integers() | st.booleans(), st.lists, max_leaves=6))
def test_a_case_shows_its_data_as_typed_and_reads_back(value: Any) -> None:
    """Every printable character of a string shows as itself (an emoji, an accent, CJK), the
    text reads back as the same value, and nothing in it is invisible."""
    text = as_typed(value)
    assert json.loads(text) == value
    assert all(char.isprintable() for char in text)
    for string in _strings(value):
        for char in string:
            if char.isprintable() and char not in '"\\':
                assert char in text


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("\U0001f642", '"\U0001f642"'),  # an emoji, not its surrogate escapes
        ("\u00e9t\u00e9", '"\u00e9t\u00e9"'),
        ("a\u200bb", '"a\\u200bb"'),  # a zero-width space would hide: escaped
        ("\n\t", '"\\n\\t"'),
        ("\U000e0001", '"\\udb40\\udc01"'),  # an invisible tag character, past the BMP
    ],
)
def test_only_what_would_not_show_is_escaped(value: str, shown: str) -> None:
    assert as_typed(value) == shown


def test_a_case_label_writes_each_argument_as_typed() -> None:
    from llmfs.course.exercise_checks import SPECS

    spec = SPECS["ch11.train_bpe"]
    assert case_label(spec, ("\U0001f642", 0)) == 'train_bpe("\U0001f642", 0)'
