"""What the learner has done on each exercise: wrong tries per field, reveals, hints, attempts.

One :class:`ExerciseState` per exercise and attempts log, rebuilt from the log when first asked
for (so a restarted kernel keeps its tries, hints and reveals), then kept up to date by
``check``, ``hint`` and the widgets, which notify each other through its listeners.
:func:`record` appends a judged attempt to the log (history, not the answer: the answer is the
notebook's own text, read by :mod:`llmfs.course.exercises.record`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmfs.course.attempts import attempts_path, load_attempts, load_events, record_attempt
from llmfs.course.exercises.entries import predict_exercise
from llmfs.course.exercises.judge import FieldVerdict
from llmfs.course.exercises.reveals import reveals_allowed

if TYPE_CHECKING:
    from llmfs.course.exercises.api import Comparison


@dataclass
class ExerciseState:
    """What the learner has done on one exercise: wrong tries per field, the fields revealed,
    the hints seen, the attempts made and the latest answers. Built from the attempts log when
    first asked for (so a restarted kernel keeps it), then kept up to date by :func:`check`, the
    widget and :func:`hint`, which notify each other through ``listeners``."""

    exercise_id: str
    wrong_tries: dict[str, int]
    revealed: set[str]
    hints_seen: int
    attempts: int
    answers: dict[str, Any]
    last: Comparison | None = None
    listeners: list[Callable[[ExerciseState], None]] | None = None

    def tries_left(self, field: str, max_tries: int) -> int:
        """Wrong tries left at ``field`` before its answer is shown."""
        return max(max_tries - self.wrong_tries.get(field, 0), 0)

    def notify(self) -> None:
        """Tells every listener (a widget showing this exercise) that the state changed."""
        for listener in list(self.listeners or ()):
            listener(self)


_STATES: dict[tuple[str, str], ExerciseState] = {}


def exercise_state(exercise_id: str, path: Path | None = None) -> ExerciseState:
    """The state of ``exercise_id`` for the attempts log at ``path`` (default: the current log).
    Raises :class:`~llmfs.course.CourseError` for a malformed log."""
    log = Path(path) if path is not None else attempts_path()
    key = (str(log.resolve()), exercise_id)
    if key not in _STATES:
        state = ExerciseState(exercise_id, {}, set(), 0, 0, {}, None, [])
        for attempt in load_attempts(log):
            if attempt.exercise == exercise_id:
                state.attempts += 1
                for name, right in attempt.fields.items():
                    if not right:
                        state.wrong_tries[name] = state.wrong_tries.get(name, 0) + 1
                state.revealed.update(attempt.revealed)
        for event in load_events(log):
            if event.exercise == exercise_id:
                if event.kind == "hint":
                    state.hints_seen = max(state.hints_seen, event.number)
                else:
                    state.revealed.update(event.fields)
        _STATES[key] = state
    return _STATES[key]


def record(
    exercise_id: str | None,
    verdicts: Sequence[FieldVerdict],
    *,
    answers: Mapping[str, str] | None = None,
    path: Any = None,
    manifest: Any = None,
    hints: int = 0,
    revealed: Sequence[str] = (),
) -> bool:
    """Records an attempt (exercise id, each answered field right or wrong, the entries as text,
    the hints seen and the fields revealed before it) in the course's attempts log
    (:func:`llmfs.course.attempts.record_attempt`; ``path`` and ``manifest`` are passed on).
    Returns False when there is no exercise id or no answered field. Raises
    :class:`~llmfs.course.CourseError` for an exercise id not in the manifest."""
    fields = {v.field: v.status == "right" for v in verdicts if v.answered}
    if not exercise_id or not fields:
        return False
    typed = {k: str(v) for k, v in (answers or {}).items()}
    entered = {f: typed.get(f, v.predicted) for f, v in ((v.field, v) for v in verdicts)}
    entered = {f: entered[f] for f in fields}
    record_attempt(
        exercise_id,
        fields,
        answers=entered,
        path=path,
        manifest=manifest,
        hints=hints,
        revealed=revealed,
    )
    return True


def exercise_finished(exercise_id: str) -> bool:
    """True when the predict exercise ``exercise_id`` is finished in the current attempts log:
    every field was right in some attempt or its answer was shown; with reveals off (graded
    work) only right fields count, so a guarded cell never shows an answer the learner did not
    find. Raises :class:`CourseError` for an unknown exercise or a malformed log."""

    reveals = reveals_allowed()
    state = exercise_state(exercise_id)
    if state.last is not None and state.last.finished:
        return True
    fields = set(predict_exercise(exercise_id).fields)
    done = set(state.revealed) if reveals else set()
    for attempt in load_attempts(attempts_path()):
        if attempt.exercise == exercise_id:
            done.update(name for name, right in attempt.fields.items() if right)
            if reveals:
                done.update(attempt.revealed)
    return fields <= done


__all__ = ["ExerciseState", "exercise_finished", "exercise_state", "record"]
