"""What the learner has done on each exercise: wrong tries per field, reveals, hints, attempts.

One :class:`ExerciseState` per exercise and attempts log, rebuilt from the log when first asked
for (so a restarted kernel keeps its tries, hints and reveals), then kept up to date by
``check``, ``hint`` and the widgets, which notify each other through its listeners.
:func:`record` appends a judged attempt to the log (history, not the answer: the answer is the
notebook's own text, read by :mod:`llmfs.course.exercises.record`).

**A try is a distinct prediction.** A complete prediction is identified by
:func:`prediction_key`: each answered field's entry in canonical form (``"3,2"``, ``(3, 2)`` and
``[3, 2]`` are one shape; an error named by a unique beginning is its full name). A check whose
key equals that of an earlier try at the exercise is not a try: nothing is logged, no wrong try
is counted, nothing is revealed, and the check shows the same verdict again. So re-running a
check, Run All, a kernel restart and ``llmfs check`` spend nothing; only a new prediction does.
The state is rebuilt from the log by the same rule (an attempt whose answers repeat an earlier
attempt's counts once), so a log written before the rule reads the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmfs.course.attempts import attempts_path, load_attempts, load_events, record_attempt
from llmfs.course.exercises.entries import predict_exercise
from llmfs.course.exercises.judge import FieldVerdict, resolve_error_name
from llmfs.course.exercises.reveals import reveals_allowed

if TYPE_CHECKING:
    from llmfs.course.exercises.api import Comparison


@dataclass
class ExerciseState:
    """What the learner has done on one exercise: wrong tries per field, the fields revealed,
    the hints seen, the attempts made and the latest answers. Built from the attempts log when
    first asked for (so a restarted kernel keeps it), then kept up to date by :func:`check`, the
    widget and :func:`hint`, which notify each other through ``listeners``.

    ``tried`` holds the :func:`prediction_key` of every try (as :func:`key_text`): ``attempts``
    and ``wrong_tries`` count each distinct prediction once."""

    exercise_id: str
    wrong_tries: dict[str, int]
    revealed: set[str]
    hints_seen: int
    attempts: int
    answers: dict[str, Any]
    last: Comparison | None = None
    listeners: list[Callable[[ExerciseState], None]] | None = None
    tried: set[str] = field(default_factory=set)

    def count_try(self, answers: Mapping[str, str], fields: Mapping[str, bool]) -> bool:
        """Counts a judged prediction (``answers``: its :func:`prediction_key`; ``fields``: each
        answered field right or wrong) as a try and returns True, unless the same prediction
        was tried before: then nothing changes and it returns False."""
        key = key_text(answers)
        if key in self.tried:
            return False
        self.tried.add(key)
        self.attempts += 1
        for name, right in fields.items():
            if not right:
                self.wrong_tries[name] = self.wrong_tries.get(name, 0) + 1
        return True

    def tries_left(self, field: str, max_tries: int) -> int:
        """Wrong tries left at ``field`` before its answer is shown."""
        return max(max_tries - self.wrong_tries.get(field, 0), 0)

    def notify(self) -> None:
        """Tells every listener (a widget showing this exercise) that the state changed."""
        for listener in list(self.listeners or ()):
            listener(self)


_STATES: dict[tuple[str, str], ExerciseState] = {}


def _canonical(verdict: FieldVerdict) -> str:
    value = verdict.value
    if verdict.field == "error" and isinstance(value, str) and value != "none":
        value = resolve_error_name(value) or value
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)


def prediction_key(verdicts: Sequence[FieldVerdict]) -> dict[str, str]:
    """Field -> the entry in canonical form, for each answered (right or wrong) field: what
    identifies a prediction, and what an attempt logs as its ``answers``. Two spellings of one
    answer (``"3,2"`` and ``[3, 2]``; ``"noncontiguous"`` and ``NonContiguousReshapeError``)
    have one key; a long list is written in full, never shortened."""
    return {v.field: _canonical(v) for v in verdicts if v.answered}


def key_text(answers: Mapping[str, str]) -> str:
    """One string for a :func:`prediction_key` (fields in sorted order)."""
    return json.dumps(dict(answers), sort_keys=True, ensure_ascii=False)


def exercise_state(exercise_id: str, path: Path | None = None) -> ExerciseState:
    """The state of ``exercise_id`` for the attempts log at ``path`` (default: the current log).
    Raises :class:`~llmfs.course.CourseError` for a malformed log."""
    log = Path(path) if path is not None else attempts_path()
    key = (str(log.resolve()), exercise_id)
    if key not in _STATES:
        state = ExerciseState(exercise_id, {}, set(), 0, 0, {}, None, [])
        for attempt in load_attempts(log):
            if attempt.exercise == exercise_id:
                state.revealed.update(attempt.revealed)
                # A repeated prediction is not a try (the module docstring's rule).
                state.count_try(attempt.answers, attempt.fields)
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
    path: Any = None,
    manifest: Any = None,
    hints: int = 0,
    revealed: Sequence[str] = (),
) -> bool:
    """Records an attempt (exercise id, each answered field right or wrong, the entries as
    :func:`prediction_key` writes them, the hints seen and the fields revealed before it) in
    the course's attempts log (:func:`llmfs.course.attempts.record_attempt`; ``path`` and
    ``manifest`` are passed on).
    Returns False when there is no exercise id or no answered field. Raises
    :class:`~llmfs.course.CourseError` for an exercise id not in the manifest."""
    fields = {v.field: v.status == "right" for v in verdicts if v.answered}
    if not exercise_id or not fields:
        return False
    record_attempt(
        exercise_id,
        fields,
        answers=prediction_key(verdicts),
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


__all__ = [
    "ExerciseState",
    "exercise_finished",
    "exercise_state",
    "key_text",
    "prediction_key",
    "record",
]
