"""Course tooling: the manifest, the student-notebook build, ``llmfs start`` and exercise attempts.

Every failure a course command reports to its user is a :class:`CourseError` whose message names
the file (notebook or manifest), the cell where there is one, and the violated condition.
"""

from __future__ import annotations

from llmfs.errors import CourseError

__all__ = ["CourseError"]
