"""The ipywidgets layer: thin live views over the table model (imported only when used).

* :class:`OffsetTable`: a view's logical cells and its owner's storage cells as buttons; selecting
  a logical cell marks the storage cell it reads, selecting a storage cell marks every logical
  cell that reads it (``▶`` in the label and bold text, not only a colour), and the offset table
  underneath follows the selection.
* :class:`TraceTable`: the trace table, with a chooser that opens any row's offset table.
* :class:`PredictThenRun`: one input box per predicted field and a Run button; Run evaluates the
  expression and shows, field by field, the prediction, the truth and ``✓ right``/``✗ wrong``,
  then the offset table; the attempt is recorded when the widget has an exercise id.

All three compute nothing themselves: rows, offsets and verdicts come from
:mod:`~llmfs.widgets.model` and :func:`~llmfs.widgets.predict.compare`, and the markup from
:mod:`~llmfs.widgets.html`. Their ``repr`` is the text renderer's output, so notebook
validation compares deterministic text, never widget model ids.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from html import escape
from typing import Any

import ipywidgets as widgets

from llmfs.errors import CourseError
from llmfs.tensor import Tensor, TensorError, TensorView
from llmfs.widgets.html import render_comparison_html, render_offsets_html, render_trace_html
from llmfs.widgets.model import Step, Trace, format_number, offset_entries
from llmfs.widgets.predict import (
    HINTS,
    LABELS,
    Comparison,
    compare,
    field_name,
    record,
    run,
)
from llmfs.widgets.text import format_ints, render_comparison, render_offsets, render_trace

#: Most logical or storage cells drawn as buttons; beyond it the first and last are shown.
MAX_BUTTONS = 48


class _TextRepr:
    """Gives a widget a deterministic, untruncated text/plain representation."""

    def _text(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self._text()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]
        if bundle is not None:
            bundle["text/plain"] = self._text()
        return bundle


class OffsetTable(_TextRepr, widgets.VBox):
    """A live offset table: logical coordinate -> storage offset -> value, with the storage strip.

    ``OffsetTable(view_or_tensor, owner="base")``. Click a logical cell to see which storage cell
    it reads, or a storage cell to see which logical cells read it. Views longer than
    :data:`MAX_BUTTONS` show their first and last cells and a count. Raises
    :class:`~llmfs.tensor.StaleViewError` for a stale view.
    """

    def __init__(self, item: TensorView | Tensor, owner: str = "base", **kwargs: Any) -> None:
        view = item.view() if isinstance(item, Tensor) else item
        if not isinstance(view, TensorView):
            raise TensorError(
                f"OffsetTable shows a Tensor or TensorView, got {type(item).__name__}"
            )
        self.view = view
        self.owner_name = owner
        self.selected_index: int | None = None
        self.selected_offset: int | None = None
        entries = offset_entries(view)
        self._entries = [*entries.head, *entries.tail]
        self._head_len = len(entries.head)
        storage = view.owner.as_slice()
        self._storage_size = storage.size
        self._logical_buttons = [self._button(e.index) for e in self._entries[:MAX_BUTTONS]]
        shown_storage = min(storage.size, MAX_BUTTONS)
        self._storage_buttons = [self._storage_button(k) for k in range(shown_storage)]
        self._status = widgets.HTML(layout=widgets.Layout(margin="2px 0"))
        self._table = widgets.HTML()
        logical = self._logical_box(entries.omitted)
        strip = widgets.HBox(
            self._storage_buttons
            + (
                [widgets.Label(f"… {storage.size - shown_storage} more")]
                if storage.size > shown_storage
                else []
            ),
            layout=widgets.Layout(flex_flow="row wrap"),
        )
        meta = (
            f"<b>logical cells</b> of shape {format_ints(view.shape)}, strides "
            f"{format_ints(view.strides)}, base offset {view.base_offset} (click one)"
        )
        super().__init__(
            [
                widgets.HTML(meta),
                logical,
                widgets.HTML(f"<b>storage of {escape(owner)}</b> (offset: value; click one)"),
                strip,
                self._status,
                self._table,
            ],
            **kwargs,
        )
        self.add_class("llmfs-offset-table")
        self._refresh()

    def _button(self, index: int) -> widgets.Button:
        entry = next(e for e in self._entries if e.index == index)
        button = widgets.Button(
            description=format_number(entry.value),
            tooltip=f"coordinate {format_ints(entry.coordinate)} reads offset {entry.offset}",
            layout=widgets.Layout(width="auto", min_width="52px"),
        )
        button.add_class("llmfs-logical-cell")
        button.on_click(lambda _b, i=index: self.select(i))
        return button

    def _storage_button(self, offset: int) -> widgets.Button:
        value = format_number(float(self.view.owner.as_slice()[offset]))
        button = widgets.Button(
            description=f"{offset}: {value}",
            tooltip=f"storage offset {offset} holds {value}",
            layout=widgets.Layout(width="auto", min_width="60px"),
        )
        button.add_class("llmfs-storage-cell")
        button.on_click(lambda _b, k=offset: self.select_offset(k))
        return button

    def _logical_box(self, omitted: int) -> widgets.Box:
        buttons: list[widgets.Widget] = list(self._logical_buttons)
        if len(self.view.shape) == 2 and omitted == 0 and self.view.shape[1] > 0:
            columns = self.view.shape[1]
            return widgets.GridBox(
                buttons,
                layout=widgets.Layout(
                    grid_template_columns=f"repeat({columns}, max-content)", grid_gap="2px"
                ),
            )
        if omitted:
            buttons.insert(min(self._head_len, len(buttons)), widgets.Label(f"… {omitted} more …"))
        return widgets.HBox(buttons, layout=widgets.Layout(flex_flow="row wrap"))

    def select(self, index: int | None) -> None:
        """Selects the logical cell at row-major position ``index`` (``None`` clears)."""
        entry = next((e for e in self._entries if e.index == index), None)
        self.selected_index = entry.index if entry else None
        self.selected_offset = entry.offset if entry else None
        self._refresh()

    def select_offset(self, offset: int | None) -> None:
        """Selects storage offset ``offset``: every logical cell that reads it is marked."""
        self.selected_offset = offset
        readers = [e.index for e in self._entries if e.offset == offset]
        self.selected_index = readers[0] if readers else None
        self._refresh()

    def _refresh(self) -> None:
        offset = self.selected_offset
        for button, entry in zip(self._logical_buttons, self._entries):
            on = offset is not None and entry.offset == offset
            button.description = ("▶ " if on else "") + format_number(entry.value)
            button.button_style = "info" if on else ""
            button.style.font_weight = "bold" if on else ""
        for k, button in enumerate(self._storage_buttons):
            on = k == offset
            value = format_number(float(self.view.owner.as_slice()[k]))
            button.description = ("▶ " if on else "") + f"{k}: {value}"
            button.button_style = "info" if on else ""
            button.style.font_weight = "bold" if on else ""
        self._status.value = escape(self._selection_text())
        self._table.value = render_offsets_html(self.view, self.owner_name, self.selected_index)

    def _selection_text(self) -> str:
        if self.selected_offset is None:
            return "nothing selected"
        readers = [e for e in self._entries if e.offset == self.selected_offset]
        if not readers:
            return f"storage offset {self.selected_offset} is read by no logical cell of this view"
        cells = ", ".join(format_ints(e.coordinate) for e in readers)
        value = format_number(readers[0].value)
        return f"coordinate {cells} reads storage offset {self.selected_offset} (value {value})"

    def _text(self) -> str:
        return render_offsets(self.view, self.owner_name)


class TraceTable(_TextRepr, widgets.VBox):
    """The trace table, live: ``TraceTable(trace(base, [...]))`` or
    ``TraceTable(steps)`` with :class:`~llmfs.widgets.model.Step` objects or ``(label, result)``
    pairs. A chooser under the table opens the offset table of any accepted row."""

    def __init__(
        self,
        steps: Trace | Iterable[Step | tuple[str, Any]],
        *,
        owners: Mapping[str, Tensor | TensorView] | None = None,
        **kwargs: Any,
    ) -> None:
        self.trace = steps if isinstance(steps, Trace) else Trace.from_steps(steps, owners)
        self._table = widgets.HTML(render_trace_html(self.trace))
        options = [("(choose a row)", -1)] + [
            (row.label, k) for k, row in enumerate(self.trace.rows) if not row.rejected
        ]
        self._chooser = widgets.Dropdown(
            options=options, value=-1, description="offsets of", layout={"width": "max-content"}
        )
        self._detail = widgets.VBox()
        self._chooser.observe(self._show, names="value")
        super().__init__([self._table, self._chooser, self._detail], **kwargs)
        self.add_class("llmfs-trace-table")

    def show_row(self, index: int) -> None:
        """Opens the offset table of row ``index`` (``-1`` closes it)."""
        self._chooser.value = index

    def _show(self, change: dict[str, Any]) -> None:
        index = change["new"]
        views = self.trace.views
        if index < 0 or index >= len(views) or views[index] is None:
            self._detail.children = []
            return
        owner = self.trace.rows[index].owner or "base"
        self._detail.children = [OffsetTable(views[index], owner)]  # type: ignore[arg-type]

    def _text(self) -> str:
        return render_trace(self.trace)


class PredictThenRun(_TextRepr, widgets.VBox):
    """The predict-then-run exercise: type predictions, press Run, compare field by field.

    ``PredictThenRun("base.reshape([3, 2])", fields=["shape", "strides", "offsets"],
    exercise_id="ch02.q1")``. ``expression`` is Python source (names come from ``namespace``,
    or the notebook's globals when omitted) or a no-argument callable. Entries are read
    forgivingly (``[3, 2]``, ``(3,2)``, ``3,2``, ``yes``, ``shared``); an unreadable entry gets a
    message in its row. A rejected request is a legitimate outcome: predict it with the ``error``
    field. Raises :class:`~llmfs.widgets.predict.PredictionError` for an unknown field.
    """

    def __init__(
        self,
        expression: str | Callable[[], Any],
        fields: Sequence[str] = ("shape", "strides", "offsets"),
        *,
        namespace: Mapping[str, Any] | None = None,
        exercise_id: str | None = None,
        label: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.expression = expression
        self.fields = tuple(field_name(f) for f in fields)
        if namespace is None and isinstance(expression, str):
            namespace = sys._getframe(1).f_globals
        self.namespace = namespace
        self.exercise_id = exercise_id
        self.label = label or (expression.strip() if isinstance(expression, str) else None)
        self.comparison: Comparison | None = None
        self.inputs = {
            f: widgets.Text(
                description=LABELS[f],
                placeholder=HINTS[f],
                style={"description_width": "120px"},
                layout=widgets.Layout(width="420px"),
            )
            for f in self.fields
        }
        for f, box in self.inputs.items():
            box.add_class(f"llmfs-input-{f}")
        self.button = widgets.Button(description="Run", button_style="primary", icon="play")
        self.button.add_class("llmfs-run")
        self.button.on_click(lambda _b: self.run())
        self.result = widgets.HTML()
        self.result.add_class("llmfs-result")
        title = escape(self.label or "expression")
        header = widgets.HTML(f"<b>Predict, then run:</b> <code>{title}</code>")
        super().__init__([header, *self.inputs.values(), self.button, self.result], **kwargs)
        self.add_class("llmfs-predict-then-run")

    def entries(self) -> dict[str, str]:
        """What the learner typed, per field."""
        return {f: box.value for f, box in self.inputs.items()}

    def run(self) -> Comparison | None:
        """Evaluates the expression, compares, shows the result and records the attempt.

        Returns the comparison, or ``None`` when the expression itself is broken (the message is
        shown instead of a traceback).
        """
        try:
            outcome = run(self.expression, self.namespace, label=self.label)
        except CourseError as error:
            self.comparison = None
            self.result.value = f'<p class="llmfs-error">cannot run: {escape(str(error))}</p>'
            return None
        verdicts = compare(self.entries(), outcome, self.fields)
        note = ""
        try:
            recorded = record(self.exercise_id, verdicts, answers=self.entries())
        except CourseError as error:
            recorded = False
            note = f'<p class="llmfs-error">attempt not recorded: {escape(str(error))}</p>'
        self.comparison = Comparison(outcome, verdicts, recorded)
        self.result.value = render_comparison_html(self.comparison) + note
        return self.comparison

    def _text(self) -> str:
        fields = ", ".join(LABELS[f] for f in self.fields)
        head = f"predict, then run: {self.label or 'expression'} (fields: {fields})"
        if self.comparison is None:
            return head + "\n(type your predictions, then press Run)"
        return head + "\n" + render_comparison(self.comparison)


__all__ = ["MAX_BUTTONS", "OffsetTable", "PredictThenRun", "TraceTable"]
