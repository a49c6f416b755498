"""The checks of the "implement it" exercises: stubs are "not implemented yet", right code passes,
wrong code is reported case by case (never a traceback), and verdicts come from the library."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from solutionkit import SOLUTIONS

from llmfs.course import CourseError
from llmfs.course.attempts import load_attempts
from llmfs.course.exercise_checks import (
    CHECKS,
    SPECS,
    check_broadcast_shape,
    check_broadcast_strides,
    check_compute_strides,
    check_flat_index,
    check_for,
    check_logical_offsets,
    check_merge_layout,
    check_reshape_after_copy,
    check_softmax_rows,
    check_values,
    run_spec,
)
from llmfs.course.exercise_checks.cases import view_over
from llmfs.course.exercise_checks.spec import (
    ImplementSpec,
    draw_cases,
    error_name,
    expected_outcome,
    outcome_of,
    outcomes_match,
)
from llmfs.course.manifest import load_manifest
from llmfs.tensor import layout, ops
from llmfs.widgets.text import render_offsets

# Seconds in all (every check on many seeds, kernel cases launched in subprocesses): the file is
# scheduled early (conftest.py).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def attempts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "attempts.jsonl"
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(log))
    return log


def without_shortcuts(exercise_id: str) -> ImplementSpec:
    """The exercise's spec with no forbidden calls: to test the cases and the reference with the
    library's own function standing in for the learner's."""
    return replace(SPECS[exercise_id], shortcuts=None)


def test_a_stub_that_raises_or_returns_none_is_not_implemented_and_not_recorded(
    attempts: Path,
) -> None:
    def raising(shape):
        raise NotImplementedError("ch01.compute_strides: replace this line with your code")

    for stub in (raising, lambda shape: None):
        report = check_compute_strides(stub)
        assert report.status == "not implemented" and not report.passed
        assert repr(report).startswith("check ch01.compute_strides: not implemented yet")
    assert repr(check_flat_index(lambda s, c: None)).endswith("(flat_index still has its stub)")
    assert check_merge_layout(None).status == "not implemented"
    assert load_attempts(attempts) == []


def test_right_code_passes_every_case_and_one_attempt_is_recorded(attempts: Path) -> None:
    for check, function in (
        (check_compute_strides, SOLUTIONS["ch01.compute_strides"]),
        (check_flat_index, SOLUTIONS["ch01.flat_index"]),
        (check_merge_layout, SOLUTIONS["ch03.merge_layout"]),
    ):
        report = check(function)
        assert report.passed, repr(report)
        assert report.recorded
        assert "✓ passed" in repr(report).splitlines()[0]
    recorded = load_attempts(attempts)
    assert [a.exercise for a in recorded] == [
        "ch01.compute_strides",
        "ch01.flat_index",
        "ch03.merge_layout",
    ]
    assert all(a.correct for a in recorded)


def test_the_visible_cases_include_the_edge_cases() -> None:
    labels = [args for args in draw_cases(SPECS["ch01.compute_strides"])]
    assert ([],) in labels and ([2, 0, 3],) in labels
    layouts = draw_cases(SPECS["ch02.logical_offsets"])
    assert ([], [], 3) in layouts  # a scalar still has one offset
    assert any(any(s < 0 for s in strides) for _, strides, _ in layouts)  # flipped axes


def test_wrong_code_is_reported_smallest_case_first_without_a_traceback(attempts: Path) -> None:
    def column_major(shape):  # a classic mistake: the first axis changes fastest
        strides, step = [], 1
        for size in shape:
            strides.append(step)
            step *= max(size, 1)
        return strides

    report = check_compute_strides(column_major)
    assert report.status == "failed" and report.recorded
    first = report.cases[0]
    assert not first.ok and first.verdict == "✗ wrong"
    assert first.label == "compute_strides([2, 1])"  # sizes summed: 3, the smallest wrong one
    assert "random cases (seed 0) wrong; the 3 smallest shown" in report.note

    def crashing(shape, coordinate):
        return 1 // 0

    report = check_flat_index(crashing)
    assert report.status == "failed"
    # A cell shows the class and the start of the message; the note repeats it in full.
    assert all(c.got.startswith("raised ZeroDivisionError: integer division") for c in report.cases)
    assert "  got:      raised ZeroDivisionError: integer division or modulo by zero" in report.note
    [attempt, _] = load_attempts(attempts)
    assert not attempt.correct and attempt.fields == {"random cases": False}


def test_a_failing_layout_case_shows_its_offset_table() -> None:
    def no_carry(shape, strides, base_offset):  # forgets to rewind an axis when it wraps
        offsets, offset = [], base_offset
        for _ in range(layout.element_count(shape)):
            offsets.append(offset)
            offset += strides[-1] if strides else 0
        return offsets

    report = check_logical_offsets(no_carry, record_attempt=False)
    assert report.status == "failed"
    smallest = json.loads("[" + report.cases[0].label.removeprefix("logical_offsets(")[:-1] + "]")
    # The chapters' own offset table (widgets.text.render_offsets) of the smallest failing case.
    table = render_offsets(view_over(*smallest), owner="input")
    assert f"its input, as an offset table:\n{table}" in report.note
    assert "coordinate  offset  value" in table


def test_a_missing_bounds_check_fails_only_the_error_cases() -> None:
    def unchecked(shape, coordinate):
        return sum(i * s for i, s in zip(coordinate, layout.row_major_strides(shape)))

    report = check_flat_index(unchecked, record_attempt=False)
    assert report.status == "failed"
    assert {case.expected.split()[0] for case in report.cases} == {"raises"}


def test_merge_refusals_must_be_value_errors() -> None:
    report = run_spec(
        without_shortcuts("ch03.merge_layout"),
        lambda shape, strides, a, b: layout.plan_reshape(
            shape,
            strides,
            [*shape[:a], layout.element_count(shape[a : b + 1]), *shape[b + 1 :]],
        ),
        record_attempt=False,
    )
    # The library's NonContiguousReshapeError is a ValueError, so the library itself passes.
    assert report.passed, repr(report)


def test_the_two_safe_steps_need_a_copy() -> None:
    assert check_reshape_after_copy(None).status == "not implemented"
    good = check_reshape_after_copy(
        lambda v: v.materialize().reshape([v.materialize().as_slice().size])
    )
    assert good.passed, repr(good)

    def no_copy(view):  # a view of the same owner: shape right, storage shared
        count = view.materialize().as_slice().size
        return view.owner.view().reshape([view.owner.as_slice().size]).slice(0, 0, count)

    report = check_reshape_after_copy(no_copy, record_attempt=False)
    assert report.status == "failed"
    assert '"new_owner": true' in report.cases[0].expected


def test_outcomes_are_plain_json_and_compare_strictly() -> None:
    spec = SPECS["ch02.slice_layout"]
    args = ([2, 3], [3, 1], 0, 1, 1, 3)
    expected = expected_outcome(spec, args)
    assert expected == {"value": [[2, 2], [3, 1], 1]}
    assert json.loads(json.dumps(expected)) == expected
    got = outcome_of(lambda *a: ((2, 2), (3, 1), 1.0), args)
    assert outcomes_match(got, expected)
    assert outcome_of(lambda *a: 1 // 0, args) == {"error": "ZeroDivisionError"}
    assert expected_outcome(spec, ([2, 3], [3, 1], 0, 1, 2, 1)) == {"error": "ValueError"}
    assert not outcomes_match({"value": [True]}, {"value": [1]})
    assert not outcomes_match({"error": "IndexError"}, {"error": "ValueError"})
    assert error_name(IndexError()) == "IndexError"


def _needs_kernels(spec: ImplementSpec) -> None:
    from llmfs.tensor.backends.metal import emulator_available, is_available

    if spec.kernel is not None and not (emulator_available() or is_available()):
        pytest.skip("kernel checks need the Metal emulator's C++ compiler or a Metal device")


@pytest.mark.parametrize("exercise_id", sorted(SPECS))
def test_the_solution_passes_on_many_seeds(exercise_id: str) -> None:
    spec = SPECS[exercise_id]
    _needs_kernels(spec)
    function = SOLUTIONS[exercise_id]
    # A kernel case is a compiled launch in a subprocess: fewer seeds, the same rule.
    for seed in (0, 1) if spec.kernel is not None else (0, 1, 2, 3):
        report = run_spec(spec, function, seed=seed, record_attempt=False)
        assert report.passed, repr(report)


@pytest.mark.parametrize("exercise_id", sorted(i for i in SPECS if SPECS[i].kernel is None))
def test_a_table_of_the_visible_cases_fails_the_graders_seeds(exercise_id: str) -> None:
    spec = SPECS[exercise_id]
    solution = SOLUTIONS[exercise_id]
    visible = {}
    for args in draw_cases(spec):
        visible[json.dumps(args)] = outcome_of(solution, args, spec)

    def table(*args):
        if spec.prepare is not None:
            raise NotImplementedError  # a view is not a key; it can only be looked up by value
        found = visible.get(json.dumps(list(args)))
        if found is None:
            return None
        if "error" in found:
            raise ValueError(found["error"])
        return found["value"]

    if spec.prepare is None:
        assert run_spec(spec, table, record_attempt=False).status in ("passed", "failed")
    for seed in (1, 2):
        report = run_spec(spec, table, seed=seed, record_attempt=False)
        assert not report.passed


def test_every_implement_exercise_of_the_manifest_has_a_spec_and_its_function() -> None:
    manifest = load_manifest(REPO / "course" / "manifest.toml")
    for exercise in manifest.exercises():
        if exercise.kind == "implement":
            assert SPECS[exercise.id].function == exercise.function
            assert exercise.id in SOLUTIONS
    assert len(SPECS) >= 10


def test_check_values_reads_predictions_key_by_key(attempts: Path) -> None:
    truth = {"a": True, "b": False, "max": 839}
    unanswered = check_values("ch03.q8", {"a": None, "b": None, "max": None}, truth)
    assert unanswered.status == "not answered" and not unanswered.recorded
    partly = check_values("ch03.q8", {"a": True, "b": None, "max": 842}, truth)
    assert [case.verdict for case in partly.cases] == ["✓ right", "not answered yet", "✗ wrong"]
    assert partly.status == "failed" and "1 of 2 right, 1 not answered yet" in repr(partly)
    assert [case.expected for case in partly.cases] == ["True", "hidden", "hidden"]
    assert check_values("ch03.q8", {"a": 1, "b": False, "max": 839}, truth).status == "failed"
    with pytest.raises(CourseError, match="differ"):
        check_values("ch03.q8", {"a": True}, truth)
    assert [a.fields for a in load_attempts(attempts)] == [
        {"a": True, "max": False},
        {"a": False, "b": True, "max": True},
    ]


def test_every_implement_exercise_of_the_manifest_has_a_check() -> None:
    manifest = load_manifest(REPO / "course" / "manifest.toml")
    implement = {e.id for e in manifest.exercises() if e.kind == "implement"}
    assert implement == set(CHECKS)
    assert check_for("ch01.flat_index") is check_flat_index
    with pytest.raises(CourseError, match=r"no check for exercise 'ch01\.q1'"):
        check_for("ch01.q1")


# -- chapter 4: broadcasting and the stable softmax ----------------------------------------------


def test_a_left_aligned_broadcast_shape_fails_and_the_library_rule_passes() -> None:
    def left_aligned(a, b):  # pads on the RIGHT: the classic mistake
        rank = max(len(a), len(b))
        a, b = list(a) + [1] * (rank - len(a)), list(b) + [1] * (rank - len(b))
        if any(x != y and 1 not in (x, y) for x, y in zip(a, b)):
            raise ValueError("no")
        return [y if x == 1 else x for x, y in zip(a, b)]

    assert check_broadcast_shape(left_aligned, record_attempt=False).status == "failed"
    library = run_spec(
        without_shortcuts("ch04.broadcast_shape"),
        lambda a, b: list(layout.broadcast_shapes(a, b)),
        record_attempt=False,
    )
    assert library.passed, repr(library)
    cases = draw_cases(SPECS["ch04.broadcast_shape"])
    assert len({json.dumps(case) for case in cases}) == len(cases)  # no case twice
    assert (
        sum(
            expected_outcome(SPECS["ch04.broadcast_shape"], c) == {"error": "ValueError"}
            for c in cases
        )
        >= 20
    )  # incompatible pairs are drawn too


def test_broadcast_strides_that_keep_a_grown_axis_stride_fail() -> None:
    def keeps_stride(shape, strides, target):  # forgets that a grown size-1 axis gets stride 0
        lead = len(target) - len(shape)
        if lead < 0 or any(s not in (1, t) for s, t in zip(shape, target[lead:])):
            raise ValueError("no")
        return [0] * lead + list(strides)

    report = check_broadcast_strides(keeps_stride, record_attempt=False)
    assert report.status == "failed"
    assert "its input, as an offset table:\nshape [" in report.note


def _rows(x):
    return ops.max(x, axis=1, keepdims=True)


def test_the_direct_softmax_fails_on_large_scores_and_the_stable_one_passes() -> None:
    def direct(x):  # no maximum subtracted: exp overflows to inf, inf / inf is nan
        e = ops.exp(x)
        return ops.div(e, ops.sum(e, axis=1, keepdims=True))

    report = check_softmax_rows(direct, record_attempt=False)
    assert report.status == "failed"
    assert "[[NaN]]" in repr(report)  # a single large score: exp overflows
    # The empty row has no maximum: the reference's error, with its message.
    assert report.cases[0].expected == "raises ValueError: a row with no values has no maximum"

    def stable(x):
        e = ops.exp(ops.sub(x, _rows(x)))
        return ops.div(e, ops.sum(e, axis=1, keepdims=True))

    assert check_softmax_rows(stable, record_attempt=False).passed


def test_a_softmax_without_keepdims_is_reported_without_a_traceback() -> None:
    def flat_max(x):  # the [rows] maximum meets the columns: refused, or wrong when square
        e = ops.exp(ops.sub(x, ops.max(x, axis=1)))
        return ops.div(e, ops.sum(e, axis=1, keepdims=True))

    report = check_softmax_rows(flat_max, record_attempt=False)
    assert report.status == "failed"
    # A [2, 1] input broadcasts its [2] maxima into a [2, 2] result: a wrong shape, shown.
    assert report.cases[0].got == '{"shape": [2, 2]}'
    assert "wrong; the 3 smallest shown" in report.note


def test_softmax_values_compare_within_a_relative_tolerance() -> None:
    spec = SPECS["ch04.softmax"]
    args = ([[1.0, 2.0, 3.0]],)
    expected = expected_outcome(spec, args)
    nudged = outcome_of(lambda x: ops.mul(_softmax_of(x), 1 + 1e-9), args, spec)
    assert outcomes_match(nudged, expected)
    off = outcome_of(lambda x: ops.mul(_softmax_of(x), 1 + 1e-4), args, spec)
    assert not outcomes_match(off, expected)
    assert outcome_of(lambda x: [[0.09, 0.245, 0.665]], args, spec) == {
        "value": {"not a tensor": "list"}
    }
    assert outcome_of(lambda x: _softmax_of(x).view().reshape([3]), args, spec) == {
        "value": {"shape": [3]}
    }


def _softmax_of(x):
    e = ops.exp(ops.sub(x, _rows(x)))
    return ops.div(e, ops.sum(e, axis=1, keepdims=True))
