"""``llmfs.widgets``: see where each logical value lives.

The drawing of the exercise engine's rows and verdicts (:mod:`llmfs.course.exercises`, which
decides everything and imports no widget): one table model (:mod:`llmfs.widgets.model`) and its
renderers: fixed-width text (the
``repr`` that notebook validation compares), HTML, matplotlib figures, and thin ipywidgets.

Notebook API (all importable from ``llmfs.widgets``):

* ``trace(base, ["view = base.view()", "view.reshape([3, 2])", ...])`` -> :class:`Trace`, seed
  002's trace table (refused requests become ``×`` rows);
* ``offset_table(view)`` -> text; ``OffsetTable(view)``, ``TraceTable(trace_or_steps)``: live
  widgets;
* ``predict(expression, exercise_id=..., shape=..., ...)`` then ``check(prediction)``: a predict
  exercise, answered in the text of the ``predict(...)`` cell (the one record, saved with the
  notebook; :mod:`llmfs.course.exercises.record`), judged in the exercise's fixture and counted
  once per distinct prediction; ``hint(exercise_id, n)`` shows its hint ``n`` (1 by default),
  each counted once;
  ``model_answer(exercise_id)`` shows an explain exercise's model answer and rubric once written.
* ``StorageDiagram(view)`` or ``StorageDiagram(base, ["sliced = base.slice(1, 1, 3)",
  "sliced.materialize()"])``: the drawn storage diagram (logical cells, one strip per owner, a
  line from every cell to the offset it reads), live; ``storage_diagram(...)`` is its pure model
  (text ``repr``, static SVG in notebooks); ``gradient_diagram([(label, view, grad), ...])`` the
  same drawing with a gradient flowing back from each view position to the storage cell it
  reads, each cell showing the sum it accumulated.

ipywidgets, anywidget and matplotlib are imported only when a widget or figure is made; importing
this package needs only :mod:`llmfs.tensor`.
"""

from __future__ import annotations

from typing import Any

from llmfs.course.exercises.api import Comparison, Prediction, after, check, predict
from llmfs.course.exercises.entries import FIELDS, PredictionError, normalize
from llmfs.course.exercises.hints import hint, model_answer
from llmfs.course.exercises.judge import FieldVerdict, compare
from llmfs.course.exercises.run import Outcome, run
from llmfs.widgets.comparison import (
    PredictThenRun,
    render_comparison_html,
    render_comparison_text,
)
from llmfs.widgets.diagram import Diagram, build, gradient_diagram
from llmfs.widgets.diagram import diagram as storage_diagram
from llmfs.widgets.model import (
    ExpressionError,
    OwnerNames,
    Sampled,
    Step,
    Trace,
    TraceRow,
    describe,
    offset_entries,
    trace,
)
from llmfs.widgets.text import render_offsets as offset_table

_LIVE = ("OffsetTable", "TraceTable")


def __getattr__(name: str) -> Any:
    if name == "StorageDiagram":
        # The widget classes pull in ipywidgets/anywidget, so they load on first use only.
        from llmfs.widgets import storage

        return storage.StorageDiagram
    if name in _LIVE:
        # The widget classes pull in ipywidgets, so they load on first use only.
        from llmfs.widgets import live

        return getattr(live, name)
    raise AttributeError(f"module 'llmfs.widgets' has no attribute {name!r}")


__all__ = [
    "FIELDS",
    "Comparison",
    "Diagram",
    "ExpressionError",
    "FieldVerdict",
    "OffsetTable",
    "Outcome",
    "OwnerNames",
    "PredictThenRun",
    "Prediction",
    "PredictionError",
    "Sampled",
    "Step",
    "StorageDiagram",
    "Trace",
    "TraceRow",
    "TraceTable",
    "after",
    "build",
    "check",
    "compare",
    "describe",
    "gradient_diagram",
    "hint",
    "model_answer",
    "normalize",
    "offset_entries",
    "offset_table",
    "predict",
    "render_comparison_html",
    "render_comparison_text",
    "run",
    "storage_diagram",
    "trace",
]
