"""Widget test fixtures: the exercise engine's throwaway course and its attempts log."""

from __future__ import annotations

from tests.course.exercises.exercisekit import MANIFEST, attempts_log

__all__ = ["MANIFEST", "attempts_log"]
