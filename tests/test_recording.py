"""Checked attempts go through ``llmfs.recording``; importing llmfs installs the course's log."""

from __future__ import annotations

import pytest

import llmfs
from llmfs import recording
from llmfs.course import CourseError, attempts
from llmfs.errors import CourseError as BaseCourseError


def test_importing_llmfs_installs_the_course_attempts_log() -> None:
    assert llmfs.__version__
    previous = recording.install_recorder(None)
    try:
        assert previous is attempts.record_attempt
    finally:
        recording.install_recorder(previous)


def test_record_attempt_goes_to_the_installed_recorder() -> None:
    seen: list[tuple[object, ...]] = []
    previous = recording.install_recorder(lambda *args, **kwargs: seen.append((args, kwargs)))
    try:
        recording.record_attempt("ch02.q1", {"shape": True}, answers={"shape": "(3, 2)"})
    finally:
        recording.install_recorder(previous)
    assert seen == [
        (
            ("ch02.q1", {"shape": True}),
            {"answers": {"shape": "(3, 2)"}, "path": None, "manifest": None},
        )
    ]


def test_without_a_recorder_recording_is_a_course_error() -> None:
    previous = recording.install_recorder(None)
    try:
        with pytest.raises(CourseError, match="no attempts log is installed"):
            recording.record_attempt("ch02.q1", {"shape": True})
    finally:
        recording.install_recorder(previous)


def test_course_error_is_one_class_for_widgets_and_course() -> None:
    assert CourseError is BaseCourseError
