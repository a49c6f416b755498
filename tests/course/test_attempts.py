"""The attempts log that exercise widgets write and the self-check and grader read."""

from __future__ import annotations

from pathlib import Path

import pytest
from coursekit import chapter_toml, write_manifest

from llmfs.course import CourseError
from llmfs.course.attempts import (
    Event,
    attempts_path,
    latest_attempts,
    load_attempts,
    load_events,
    record_attempt,
    record_event,
)
from llmfs.course.manifest import Manifest, load_manifest


@pytest.fixture
def manifest(tmp_path: Path) -> Manifest:
    return load_manifest(
        write_manifest(
            tmp_path / "course_src",
            chapter_toml("ch02", "ch02_a", [("ch02.q1", "predict"), ("ch02.q2", "predict")]),
        )
    )


def test_attempts_are_appended_as_deterministic_json_lines(tmp_path: Path, manifest) -> None:
    log = tmp_path / "learner" / ".llmfs" / "attempts.jsonl"
    first = record_attempt(
        "ch02.q1",
        {"strides": False, "shape": True},
        answers={"shape": "(3, 2)", "strides": "2,1"},
        path=log,
        manifest=manifest,
    )
    record_attempt("ch02.q2", {"offsets": True}, path=log, manifest=manifest)
    second = record_attempt(
        "ch02.q1", {"shape": True, "strides": True}, path=log, manifest=manifest
    )
    assert (first.attempt, first.correct, second.attempt, second.correct) == (1, False, 2, True)
    assert log.read_text().splitlines()[0] == (
        '{"answers": {"shape": "(3, 2)", "strides": "2,1"}, "attempt": 1, "correct": false, '
        '"exercise": "ch02.q1", "fields": {"shape": true, "strides": false}, "first": true, '
        '"format": 1, "hints": 0, "revealed": []}'
    )
    loaded = load_attempts(log, manifest)
    assert (loaded[0], loaded[2]) == (first, second)
    assert (loaded[1].exercise, loaded[1].attempt, loaded[1].answers) == ("ch02.q2", 1, {})
    assert [a.exercise for a in load_attempts(log)] == ["ch02.q1", "ch02.q2", "ch02.q1"]
    assert latest_attempts(load_attempts(log))["ch02.q1"] == second


def test_the_log_path_comes_from_the_environment_or_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LLMFS_ATTEMPTS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert attempts_path() == tmp_path / ".llmfs" / "attempts.jsonl"
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(tmp_path / "elsewhere.jsonl"))
    assert attempts_path() == tmp_path / "elsewhere.jsonl"


def test_recording_uses_the_environment_path_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, manifest
) -> None:
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(tmp_path / "log.jsonl"))
    record_attempt("ch02.q2", {"offsets": False}, manifest=manifest)
    assert [a.fields for a in load_attempts()] == [{"offsets": False}]


def test_unknown_exercises_and_bad_fields_are_course_errors(tmp_path: Path, manifest) -> None:
    log = tmp_path / "log.jsonl"
    with pytest.raises(CourseError, match=r"no exercise with id 'ch02\.q9'"):
        record_attempt("ch02.q9", {"shape": True}, path=log, manifest=manifest)
    with pytest.raises(CourseError, match="fields must be a non-empty mapping"):
        record_attempt("ch02.q1", {}, path=log, manifest=manifest)
    with pytest.raises(CourseError, match=r"field 'shape' -> 1: .* values True or False"):
        record_attempt("ch02.q1", {"shape": 1}, path=log, manifest=manifest)  # type: ignore[dict-item]
    with pytest.raises(CourseError, match="answers must map field names"):
        record_attempt(
            "ch02.q1", {"shape": True}, answers={"shape": (3, 2)}, path=log, manifest=manifest
        )  # type: ignore[dict-item]
    assert not log.exists()


def test_a_missing_log_means_no_attempts(tmp_path: Path) -> None:
    assert load_attempts(tmp_path / "none.jsonl") == []


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "not a JSON object"),
        ('{"exercise": "ch02.q1"}', "an attempt record has the keys"),
        (
            '{"answers": {}, "attempt": 2, "correct": true, "exercise": "ch02.q1", '
            '"fields": {"shape": true}, "first": true, "format": 1}',
            "'first' is True but 'attempt' is 2",
        ),
        (
            '{"answers": {}, "attempt": 1, "correct": true, "exercise": "ch02.q1", '
            '"fields": {"shape": true}, "format": 1, "hints": -1}',
            "'hints' must be an integer >= 0",
        ),
        ('{"event": "hint", "exercise": 3, "format": 1}', "an event has a kind"),
        (
            '{"answers": {}, "attempt": 1, "correct": true, "exercise": "ch02.q1", '
            '"fields": {"shape": false}, "format": 1}',
            "'correct' is True but the fields say False",
        ),
        (
            '{"answers": {}, "attempt": 0, "correct": true, "exercise": "ch02.q1", '
            '"fields": {"shape": true}, "format": 1}',
            "'attempt' must be >= 1",
        ),
    ],
)
def test_a_malformed_log_line_is_named(tmp_path: Path, line: str, message: str) -> None:
    log = tmp_path / "log.jsonl"
    good = (
        '{"answers": {}, "attempt": 1, "correct": true, "exercise": "ch02.q1", '
        '"fields": {"shape": true}, "format": 1}'
    )
    log.write_text(good + "\n" + line + "\n")
    with pytest.raises(CourseError, match=message) as error:
        load_attempts(log)
        load_events(log)
    assert f"{log} line 2:" in str(error.value)


def test_loading_against_a_manifest_rejects_unknown_exercises(tmp_path: Path, manifest) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(
        '{"answers": {}, "attempt": 1, "correct": true, "exercise": "ch09.q1", '
        '"fields": {"shape": true}, "format": 1}\n'
    )
    assert [a.exercise for a in load_attempts(log)] == ["ch09.q1"]
    with pytest.raises(CourseError, match=rf"{log} line 1: .*no exercise with id 'ch09\.q1'"):
        load_attempts(log, manifest)


def test_the_log_written_before_hints_and_reveals_still_loads(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(
        '{"answers": {}, "attempt": 1, "correct": true, "exercise": "ch02.q1", '
        '"fields": {"shape": true}, "format": 1}\n'
    )
    (attempt,) = load_attempts(log)
    assert (attempt.first, attempt.hints, attempt.revealed) == (True, 0, ())


def test_hints_and_reveals_are_events_beside_the_attempts(tmp_path: Path, manifest) -> None:
    log = tmp_path / "log.jsonl"
    record_event("hint", "ch02.q1", number=1, path=log, manifest=manifest)
    record_attempt(
        "ch02.q1", {"shape": False}, path=log, manifest=manifest, hints=1, revealed=["shape"]
    )
    record_event("reveal", "ch02.q1", fields=["strides", "shape"], path=log, manifest=manifest)
    assert [a.hints for a in load_attempts(log, manifest)] == [1]
    assert load_attempts(log)[0].revealed == ("shape",)
    assert load_events(log) == [
        Event("hint", "ch02.q1", 1),
        Event("reveal", "ch02.q1", 0, ("shape", "strides")),
    ]
    with pytest.raises(CourseError, match="an event is one of"):
        record_event("peek", "ch02.q1", path=log, manifest=manifest)
    with pytest.raises(CourseError, match="no exercise with id"):
        record_event("hint", "ch02.zz", path=log, manifest=manifest)
