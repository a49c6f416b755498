"""Whether an answer may be shown, and which answers a saved notebook shows.

In practice work a predict exercise's answer is shown after a few wrong tries or on request
(``check(q, reveal=True)``), and an explain exercise's model answer once the learner wrote their
own. Graded work turns that off: a notebook built by ``llmfs build --assignment`` (or for a
chapter the manifest marks ``reveal = false``) runs :data:`REVEALS_OFF_SOURCE` in its first code
cell, so every check in that kernel says right or wrong per field, names misconceptions by their
rule, and never shows an answer: no reveal after wrong tries, ``check(q, reveal=True)`` and the
widget's reveal are refused with :data:`REVEALS_OFF`, ``model_answer(...)`` shows only a note.
The setting is the kernel's (a module-level switch), because the notebook's own code is what
runs wherever the notebook is opened: renamed, moved, on a hub or headless.

A check that shows an answer says so in its saved output: the output's mime bundle carries
:data:`REVEAL_MIME`, ``{"exercise": id, "fields": [...]}`` (field names only, never a value),
and a shown model answer starts with :func:`model_answer_heading`. :func:`revealed_in` reads
both back from a notebook file, which is how ``llmfs grade`` reports the answers a submission
saw (clearing the outputs hides them: the report is a note, not a proof).

Imports nothing of the engine, so the build and the grader read it without the tensor library.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: What every refused reveal says.
REVEALS_OFF = "reveals are off for this assignment"
#: The mime type of the saved note that a check showed answers.
REVEAL_MIME = "application/vnd.llmfs.reveal+json"
#: The code the build puts in an assignment notebook's first code cell.
REVEALS_OFF_SOURCE = (
    "# Graded work: each check says right or wrong per field and never shows an answer.\n"
    "from llmfs.course.exercises.reveals import reveals_off\n"
    "\n"
    "reveals_off()"
)
#: The tag of that cell.
REVEALS_OFF_TAG = "reveals-off"

_ALLOWED = [True]


def reveals_off() -> None:
    """Turns reveals off for the rest of this kernel (see the module docstring)."""
    _ALLOWED[0] = False


def allow_reveals(allowed: bool = True) -> None:
    """Sets whether answers may be shown in this kernel (True: practice work, the default)."""
    _ALLOWED[0] = bool(allowed)


def reveals_allowed() -> bool:
    """True unless this kernel ran :func:`reveals_off`."""
    return _ALLOWED[0]


def model_answer_heading(exercise_id: str) -> str:
    """The first line of a shown model answer (what :func:`revealed_in` looks for)."""
    return f"{exercise_id}: compare your answer with the model answer and the rubric"


def reveal_bundle(exercise_id: str | None, fields: Any) -> dict[str, Any]:
    """The mime bundle entry saying that ``fields`` of ``exercise_id`` were shown (empty when
    nothing was, so an output that shows no answer is unchanged)."""
    names = sorted(str(name) for name in fields)
    if not exercise_id or not names:
        return {}
    return {REVEAL_MIME: {"exercise": exercise_id, "fields": names}}


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else value if isinstance(value, str) else ""


def revealed_in(notebook: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Exercise id -> the fields whose answers the notebook's saved outputs show (sorted; an
    explain exercise's model answer is the field ``answer``). Reads outputs only, never runs
    anything; anything malformed is skipped."""
    found: dict[str, set[str]] = {}
    cells = notebook.get("cells")
    for cell in cells if isinstance(cells, list) else []:
        outputs = cell.get("outputs") if isinstance(cell, dict) else None
        for output in outputs if isinstance(outputs, list) else []:
            data = output.get("data") if isinstance(output, dict) else None
            if not isinstance(data, dict):
                continue
            note = data.get(REVEAL_MIME)
            if isinstance(note, dict) and isinstance(note.get("exercise"), str):
                names = note.get("fields")
                if isinstance(names, list):
                    shown = found.setdefault(note["exercise"], set())
                    shown.update(str(name) for name in names)
            first = _text(data.get("text/plain")).split("\n", 1)[0]
            exercise_id, _, rest = first.partition(": ")
            if exercise_id and first == model_answer_heading(exercise_id) and rest:
                found.setdefault(exercise_id, set()).add("answer")
    return {exercise: tuple(sorted(names)) for exercise, names in found.items()}


__all__ = [
    "REVEALS_OFF",
    "REVEALS_OFF_SOURCE",
    "REVEALS_OFF_TAG",
    "REVEAL_MIME",
    "allow_reveals",
    "model_answer_heading",
    "reveal_bundle",
    "revealed_in",
    "reveals_allowed",
    "reveals_off",
]
