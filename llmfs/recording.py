"""Where a checked exercise attempt goes.

The widgets (``check(...)``, ``PredictThenRun``) compare a learner's prediction with the truth and
hand the attempt to :func:`record_attempt` here. Writing it down is the course's job: the attempts
log and the manifest that names the exercises belong to :mod:`llmfs.course.attempts`, which sits
above the widgets, so the widgets do not import it. Instead the course's writer is installed
here, and ``llmfs/__init__.py`` installs it whenever any part of llmfs is imported, so every
notebook records its attempts however it imported the widgets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from llmfs.errors import CourseError

#: ``recorder(exercise_id, fields, *, answers=..., path=..., manifest=...)`` writes one attempt.
Recorder = Callable[..., Any]

_recorder: Recorder | None = None


def install_recorder(recorder: Recorder | None) -> Recorder | None:
    """Makes ``recorder`` the writer of attempts (``None`` uninstalls); returns the previous one."""
    global _recorder
    previous, _recorder = _recorder, recorder
    return previous


def record_attempt(
    exercise_id: str,
    fields: Mapping[str, bool],
    *,
    answers: Mapping[str, str] | None = None,
    path: Any = None,
    manifest: Any = None,
) -> Any:
    """Writes one attempt through the installed recorder and returns what it returns.

    Raises :class:`CourseError` when no recorder is installed, and whatever the recorder raises
    (the course's raises :class:`CourseError` for an exercise id not in the manifest).
    """
    if _recorder is None:
        raise CourseError(
            f"cannot record the attempt at {exercise_id}: no attempts log is installed "
            "(importing llmfs installs the course's; install_recorder() sets another)"
        )
    return _recorder(exercise_id, fields, answers=answers, path=path, manifest=manifest)
