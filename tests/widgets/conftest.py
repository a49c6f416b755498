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
