"""The exercise engine: what a predict exercise asks, how a learner's answer reads, runs and is
judged, the named misconceptions, the learner's state, hints and the text API.

One idea per module, imports running down this list:

* :mod:`~llmfs.course.exercises.compare`: :func:`same_answer`, the course's one answer equality;
* :mod:`~llmfs.course.exercises.rows` and :mod:`~llmfs.course.exercises.describe`: the plain rows
  that say what an expression did (owner, layout, offsets, values, or the refusal);
* :mod:`~llmfs.course.exercises.entries`: field names, aliases, reading what a learner types;
* :mod:`~llmfs.course.exercises.run`: running the expression (:class:`Outcome`, its truth);
* :mod:`~llmfs.course.exercises.fixtures`: the context an exercise's expression runs in, built
  from the chapter's ``fixture`` cells, never the learner's kernel;
* :mod:`~llmfs.course.exercises.misconceptions`: named mistakes recognised from a wrong answer;
* :mod:`~llmfs.course.exercises.judge`: :class:`FieldVerdict`, :func:`judge`, :func:`compare`;
* :mod:`~llmfs.course.exercises.verdict`: the one :class:`Verdict` of an exercise,
  :func:`judge_predict` and :func:`judge_implement`, which the notebook's check, ``llmfs check``
  and ``llmfs grade`` all call;
* :mod:`~llmfs.course.exercises.tables`: the fixed-width text tables a check's report draws;
* :mod:`~llmfs.course.exercises.state`: tries (each a distinct prediction), reveals and hints per
  exercise (the attempts log);
* :mod:`~llmfs.course.exercises.feedback`: the text of a comparison;
* :mod:`~llmfs.course.exercises.record`: the answer, which is the text of the exercise's cell;
* :mod:`~llmfs.course.exercises.api`: ``predict``, ``check``, ``after``;
* :mod:`~llmfs.course.exercises.hints`: ``hint`` and ``model_answer``.

The engine imports no widget: :mod:`llmfs.widgets` draws what the engine decides (and re-exports
the text API for notebooks), and the grader and ``llmfs check`` use the engine alone. This
package's ``__init__`` imports nothing, so the grader can load :mod:`compare` without the tensor
library.
"""
