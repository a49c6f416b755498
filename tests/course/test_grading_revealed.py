"""``llmfs grade`` notes the answers a submission's saved outputs show (field names only)."""

from __future__ import annotations

from dataclasses import replace

import gradingkit as kit

from llmfs.course.exercises.reveals import REVEAL_MIME, model_answer_heading
from llmfs.course.grading.limits import Limits
from llmfs.course.grading.score import grade_notebook

CHAPTER = kit.MANIFEST.chapter("ch02")


def _output(data: dict) -> dict:
    return {"output_type": "execute_result", "data": data, "metadata": {}, "execution_count": 1}


def test_the_grader_names_the_fields_revealed_in_the_saved_outputs() -> None:
    key = kit.key_of(CHAPTER)
    # The predict and explain rows only: no implement function needs to run here.
    key = replace(key, exercises=tuple(i for i in key.exercises if i.exercise.kind != "implement"))
    predicts = [i.exercise for i in key.exercises if i.exercise.kind == "predict"]
    explains = [i.exercise for i in key.exercises if i.exercise.kind == "explain"]
    assert len(predicts) >= 2 and explains  # the chapter has both kinds
    shown, clean = predicts[0], predicts[1]
    notebook = kit.correct_notebook(CHAPTER)
    first_code = next(c for c in notebook["cells"] if c["cell_type"] == "code")
    first_code["outputs"] = [
        _output({"text/plain": "…", REVEAL_MIME: {"exercise": shown.id, "fields": ["strides"]}}),
    ]
    first_code["outputs"].append(
        _output({"text/plain": model_answer_heading(explains[0].id) + "\n\nmodel answer:"})
    )
    rows = {r.exercise: r for r in grade_notebook(notebook, key, 1, Limits())}
    note = "revealed in the notebook before it was handed in"
    assert rows[shown.id].message.endswith(f"{note}: strides")
    assert rows[shown.id].score == rows[shown.id].points  # a note: the score is the record's
    assert note not in rows[clean.id].message
    assert rows[explains[0].id].message.endswith(f"{note}: answer")
    unshown = {
        r.exercise: r for r in grade_notebook(kit.correct_notebook(CHAPTER), key, 1, Limits())
    }
    assert all(note not in r.message for r in unshown.values())
