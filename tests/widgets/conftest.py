"""Widget test fixtures: a throwaway course with a chapter 2 exercise, and its attempts log."""

from __future__ import annotations

from pathlib import Path

import pytest

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
