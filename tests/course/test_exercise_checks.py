"""The checks of the "implement it" exercises: stubs are "not implemented yet", right code passes,
wrong code is reported case by case (never a traceback), and verdicts come from the library."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmfs.course import CourseError
from llmfs.course.attempts import load_attempts
from llmfs.course.exercise_checks import (
    CHECKS,
    check_compute_strides,
    check_flat_index,
    check_for,
    check_merge_layout,
    check_reshape_after_copy,
    check_values,
)
from llmfs.course.manifest import load_manifest
from llmfs.tensor import Tensor, layout

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def attempts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "attempts.jsonl"
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(log))
    return log


def strides_by_library(shape: list[int]) -> list[int]:
    return list(layout.row_major_strides(shape))


def flat_index_by_library(shape: list[int], coordinate: list[int]) -> int:
    if len(coordinate) != len(shape):
        raise ValueError("wrong length")
    if any(not 0 <= i < n for i, n in zip(coordinate, shape)):
        raise IndexError("outside")
    return layout.storage_offset(shape, layout.row_major_strides(shape), 0, coordinate)


def merge_by_library(shape: list[int], strides: list[int], start: int, end: int):
    merged = [*shape[:start], layout.element_count(shape[start : end + 1]), *shape[end + 1 :]]
    try:
        return layout.plan_reshape(shape, strides, merged)
    except Exception as error:
        raise ValueError(str(error)) from None


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
        (check_compute_strides, strides_by_library),
        (check_flat_index, flat_index_by_library),
        (check_merge_layout, merge_by_library),
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


def test_the_seed_examples_are_cases() -> None:
    report = check_compute_strides(strides_by_library, record_attempt=False)
    assert ("compute_strides([10, 9, 5, 13])", "[585, 65, 13, 1]") in [
        (case.label, case.expected) for case in report.cases
    ]
    report = check_flat_index(flat_index_by_library, record_attempt=False)
    assert ("flat_index([2, 3, 4], [1, 2, 3])", "23") in [
        (case.label, case.expected) for case in report.cases
    ]


def test_wrong_code_is_reported_per_case_without_a_traceback(attempts: Path) -> None:
    def column_major(shape):  # a classic mistake: the first axis changes fastest
        strides, step = [], 1
        for size in shape:
            strides.append(step)
            step *= max(size, 1)
        return strides

    report = check_compute_strides(column_major)
    assert report.status == "failed" and report.recorded
    wrong = [case for case in report.cases if not case.ok]
    assert wrong and wrong[0].label == "compute_strides([10, 9, 5, 13])"
    assert wrong[0].got == "[1, 10, 90, 450]" and wrong[0].verdict == "✗ wrong"

    def crashing(shape, coordinate):
        return 1 // 0

    report = check_flat_index(crashing)
    assert report.status == "failed"
    assert {case.got for case in report.cases} == {"raises ZeroDivisionError"}
    [attempt, _] = load_attempts(attempts)
    assert not attempt.correct


def test_a_missing_bounds_check_fails_only_the_error_cases() -> None:
    def unchecked(shape, coordinate):
        return sum(i * s for i, s in zip(coordinate, layout.row_major_strides(shape)))

    report = check_flat_index(unchecked, record_attempt=False)
    failed = [case.expected for case in report.cases if not case.ok]
    assert failed == ["raises IndexError", "raises IndexError", "raises ValueError"]


def test_merge_refusals_must_be_value_errors() -> None:
    report = check_merge_layout(
        lambda shape, strides, a, b: layout.plan_reshape(
            shape,
            strides,
            [*shape[:a], layout.element_count(shape[a : b + 1]), *shape[b + 1 :]],
        ),
        record_attempt=False,
    )
    # The library's NonContiguousReshapeError is a ValueError, so the library itself passes.
    assert report.passed, repr(report)


def test_the_two_safe_steps_need_a_copy_of_the_slice() -> None:
    base = Tensor.from_vec([2, 3], [10, 11, 12, 20, 21, 22])
    sliced = base.view().slice(1, 1, 3)
    assert check_reshape_after_copy(None, sliced).status == "not implemented"
    assert check_reshape_after_copy(sliced.materialize().reshape([4]), sliced).passed
    shared = base.view().reshape([6]).slice(0, 0, 4)  # shape [4], but the wrong values, no copy
    report = check_reshape_after_copy(shared, sliced, record_attempt=False)
    assert report.status == "failed"
    assert {case.label for case in report.cases if not case.ok} == {"values", "owner"}


def test_check_values_reads_predictions_key_by_key(attempts: Path) -> None:
    truth = {"a": True, "b": False, "max": 839}
    unanswered = check_values("ch03.q8", {"a": None, "b": None, "max": None}, truth)
    assert unanswered.status == "not answered" and not unanswered.recorded
    partly = check_values("ch03.q8", {"a": True, "b": None, "max": 842}, truth)
    assert [case.verdict for case in partly.cases] == ["✓ right", "not answered yet", "✗ wrong"]
    assert partly.status == "failed" and "1 of 2 right, 1 not answered yet" in repr(partly)
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
