"""Errors of the course side of llmfs: course files, course commands, widgets and exercise checks.

:class:`CourseError` lives here, below both the widgets and the course tooling, so that both
raise the same class without the widgets importing the course (imports run one way: the course
builds on the widgets). ``llmfs.course.CourseError`` is this class.
"""

from __future__ import annotations

__all__ = ["CourseError"]


class CourseError(Exception):
    """A course file (manifest, notebook, attempts log) or a course command's input is invalid.

    The message always names the file, the cell or line when there is one, and the condition that
    does not hold, so that an author can fix it without a traceback.
    """
