"""What the exercise engine's tests share: a throwaway course with chapter 2 exercises, its
attempts log (the ``attempts_log`` fixture, made available by ``conftest.py``) and the course's
example tensor."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmfs.tensor import Tensor

MANIFEST = """\
format = 1

[[chapters]]
id = "ch02"
title = "Shared-storage views and explicit copying"
status = "published"
solution = "solutions/ch02.ipynb"
notebook = "notebooks/ch02.ipynb"
objectives = ["Predict views"]

[[chapters.exercises]]
id = "ch02.q1"
kind = "predict"
points = 1
title = "Predict reshape and transpose"
expression = "base.transpose(0, 1)"
fields = ["shape", "strides", "offsets"]
hints = ["A transpose swaps sizes and strides.", "Row 0 of the result is column 0."]

[[chapters.exercises.mistakes]]
field = "offsets"
answer = [0, 1, 2, 3, 4, 5]
message = "Course-specific: that is the source's walk."

[[chapters.exercises]]
id = "ch02.q2"
kind = "predict"
points = 1
title = "Predict a slice's layout"
expression = "base.slice(1, 1, 3)"
fields = ["base_offset", "contiguous"]

[[chapters.exercises]]
id = "ch02.why"
kind = "explain"
points = 1
title = "Explain"
hints = ["Think about strides."]
rubric = ["first point", "second point", "third point"]
"""


@pytest.fixture
def attempts_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A course root whose manifest lists ``ch02.q1``, and the attempts log path in use."""
    root = tmp_path / "course_root"
    (root / "course").mkdir(parents=True)
    (root / "course" / "manifest.toml").write_text(MANIFEST, encoding="utf-8")
    log = tmp_path / "attempts.jsonl"
    monkeypatch.setenv("LLMFS_COURSE_ROOT", str(root))
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(log))
    return log


def seed_fixture() -> Tensor:
    """The course's example tensor: shape [2, 3], storage [10, 11, 12, 20, 21, 22] (a new owner
    each call; the same tensor as :func:`llmfs.widgets.examples.seed_fixture`)."""
    return Tensor.from_vec([2, 3], [10.0, 11.0, 12.0, 20.0, 21.0, 22.0])


#: A wrong and the right prediction of ``ch02.q1`` (``base.transpose(0, 1)`` of the example).
WRONG = {"shape": [3, 2], "strides": [2, 1], "offsets": [0, 1, 2, 3, 4, 5]}
RIGHT = {"shape": [3, 2], "strides": [1, 3], "offsets": [0, 3, 1, 4, 2, 5]}
#: Three distinct wrong predictions of ``ch02.q1`` (strides and offsets wrong in each): three
#: tries, where the same prediction checked three times is one.
WRONGS = (
    WRONG,
    {"shape": [3, 2], "strides": [3, 1], "offsets": [0, 2, 4, 1, 3, 5]},
    {"shape": [3, 2], "strides": [1, 2], "offsets": [5, 4, 3, 2, 1, 0]},
)
