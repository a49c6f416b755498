"""check_function: how an "implement it" exercise is checked in a notebook."""

from __future__ import annotations

from pathlib import Path

import pytest
from coursekit import chapter_toml, write_manifest

from llmfs.course import CourseError
from llmfs.course.attempts import load_attempts
from llmfs.course.checks import check_function
from llmfs.course.manifest import Manifest, load_manifest

CASES = [(((2, 3, 4),), (12, 4, 1)), (((10, 9, 5, 13),), (585, 65, 13, 1)), (((),), ())]


@pytest.fixture
def manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Manifest:
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(tmp_path / "attempts.jsonl"))
    return load_manifest(
        write_manifest(tmp_path, chapter_toml("ch01", "ch01_a", [("ch01.strides", "implement")]))
    )


def reference(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def test_an_unimplemented_function_is_reported_and_not_recorded(
    manifest: Manifest, capsys: pytest.CaptureFixture[str]
) -> None:
    def compute_strides(shape):
        raise NotImplementedError("ch01.strides: replace this line with your code")

    result = check_function("ch01.strides", compute_strides, CASES, manifest=manifest)
    assert (result.implemented, result.all_right, result.cases) == (False, False, ())
    assert capsys.readouterr().out == "ch01.strides: not implemented yet\n"
    assert load_attempts() == []


def test_a_correct_function_passes_every_case_and_is_recorded(
    manifest: Manifest, capsys: pytest.CaptureFixture[str]
) -> None:
    def compute_strides(shape):
        return list(reference(shape))  # a list answers a tuple question

    assert check_function("ch01.strides", compute_strides, CASES, manifest=manifest).all_right
    assert capsys.readouterr().out == (
        "ch01.strides: 3 of 3 cases right\n"
        "  ✓ right  compute_strides((2, 3, 4)) -> [12, 4, 1]\n"
        "  ✓ right  compute_strides((10, 9, 5, 13)) -> [585, 65, 13, 1]\n"
        "  ✓ right  compute_strides(()) -> []\n"
    )
    [attempt] = load_attempts()
    assert attempt.fields == {"case 1": True, "case 2": True, "case 3": True}


def test_wrong_answers_and_exceptions_are_wrong_cases_not_crashes(
    manifest: Manifest, capsys: pytest.CaptureFixture[str]
) -> None:
    def compute_strides(shape):
        if not shape:
            raise IndexError("empty shape")
        return tuple(1 for _ in shape)

    result = check_function("ch01.strides", compute_strides, CASES, manifest=manifest)
    assert [right for _, right in result.cases] == [False, False, False]
    out = capsys.readouterr().out
    assert "  ✗ wrong  compute_strides((2, 3, 4)) -> (1, 1, 1); expected (12, 4, 1)\n" in out
    assert "  ✗ wrong  compute_strides(()) raised IndexError: empty shape; expected ()\n" in out
    assert load_attempts()[0].correct is False


def test_a_bool_is_not_a_number(manifest: Manifest) -> None:
    result = check_function("ch01.strides", lambda: True, [((), 1)], record=False)
    assert not result.all_right


def test_an_unknown_exercise_is_a_course_error(manifest: Manifest) -> None:
    with pytest.raises(CourseError, match=r"no exercise with id 'ch01\.nope'"):
        check_function("ch01.nope", reference, CASES, manifest=manifest)
