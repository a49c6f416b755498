"""Course tooling: the manifest, the student-notebook build, ``llmfs start`` and exercise attempts.

Every failure a course command reports to its user is a :class:`CourseError` whose message names
the file (notebook or manifest), the cell where there is one, and the violated condition.
"""

from __future__ import annotations

__all__ = ["CourseError"]


class CourseError(Exception):
    """A course file (manifest, notebook, attempts log) or a course command's input is invalid.

    The message always names the file, the cell or line when there is one, and the condition that
    does not hold, so that an author can fix it without a traceback.
    """
