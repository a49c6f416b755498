"""Grading and self-checking the exercises: ``llmfs grade``, ``llmfs check``, ``llmfs key``.

How a submission is graded (every step is a plain function of the submission's bytes, the course's
checks and a seed, so the same inputs always give the same gradebook rows):

1. :mod:`~llmfs.course.grading.extract` reads the answers *statically* from the exercise cells
   (``ast.literal_eval`` of each ``predict(...)`` field, the markdown text of an explain cell,
   the source of an implement function and the definitions it needs). Nothing the learner's code
   prints or computes can change an answer.
2. :mod:`~llmfs.course.grading.key` reads the expected answers from the *solution* notebooks.
3. :mod:`~llmfs.course.grading.sandbox` runs the whole notebook in a fresh kernel (per-cell and
   total timeouts, memory and output limits, a scratch folder), only to report whether it runs,
   and runs each implement function on hidden random cases in a separate limited process that
   answers each case with one plain JSON outcome (:mod:`~llmfs.course.grading.channel`); both
   inside the bubblewrap sandbox of :mod:`~llmfs.course.grading.isolation` (no network, nothing
   of the grader's files, nothing left running).
4. :mod:`~llmfs.course.grading.score` compares everything in the grader's own process and
   :mod:`~llmfs.course.grading.gradebook` stores one row per student and exercise in SQLite.

:mod:`~llmfs.course.grading.reports` writes ``gradebook.csv``, the feedback files and the explain
review sheets; :mod:`~llmfs.course.grading.grade`, :mod:`~llmfs.course.grading.selfcheck` and
:mod:`~llmfs.course.grading.key` are the ``llmfs grade``, ``llmfs check`` and ``llmfs key``
commands. The sandboxed children are :mod:`~llmfs.course.grading.runner` (a notebook),
:mod:`~llmfs.course.grading.kernel` (its limited kernel) and :mod:`~llmfs.course.grading.worker`
(implement functions).

Importing this package is cheap: the kernel machinery is imported only when a notebook runs.
"""

from __future__ import annotations
