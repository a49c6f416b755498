"""The ipywidgets layer: thin live views over the table model (imported only when used).

* :class:`OffsetTable`: a view's storage diagram (:class:`~llmfs.widgets.storage.StorageDiagram`:
  logical cells with coordinates, the owner's storage once, a line per cell); selecting a logical
  cell marks the offset it reads, selecting an offset marks every cell that reads it (``▶``, bold
  and an outline, not only a colour), and the offset table underneath follows the selection.
* :class:`TraceTable`: the trace table with clickable rows; the chosen row's storage
  diagram (or a rejected row's explanation) opens right under the table.

Both compute nothing themselves: rows and offsets come from :mod:`~llmfs.widgets.model`, and the
markup from :mod:`~llmfs.widgets.html`. Their ``repr`` is the text renderer's output, so notebook
validation compares deterministic text, never widget model ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

import ipywidgets as widgets

from llmfs.course import CourseError
from llmfs.tensor import Tensor, TensorError, TensorView
from llmfs.widgets.html import (
    MARK_WORDS,
    mark,
    render_offsets_html,
    render_trace_html,
    wrap,
)
from llmfs.widgets.model import Step, Trace, format_number, offset_entries
from llmfs.widgets.style import STYLESHEET
from llmfs.widgets.text import format_ints, render_offsets, render_trace


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
    """A live offset table: the view's storage diagram over the table coordinate -> storage
    offset -> value.

    ``OffsetTable(view_or_tensor, owner="base")``. Storage is shown once, in the diagram: click
    a logical cell (it shows its coordinate and value) to see the offset it reads and its formula,
    or a storage offset to see every cell that reads it; the table row of the selection is marked
    ``▶`` and outlined, and nothing shifts. Large views show their first and last cells and a
    count. Raises :class:`~llmfs.tensor.StaleViewError` for a stale view.
    """

    def __init__(self, item: TensorView | Tensor, owner: str = "base", **kwargs: Any) -> None:
        # anywidget (the diagram widget's base) loads only when a diagram is drawn.
        from llmfs.widgets.storage import StorageDiagram

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
        self.diagram = StorageDiagram([("logical cells", view)], owners={owner: view})
        self._status = widgets.HTML()
        self._status.add_class("llmfs-selection")
        self._table = widgets.HTML()
        super().__init__([self.diagram, self._status, self._table], **kwargs)
        self.add_class("llmfs-offset-table")
        self.diagram.observe(self._follow, names=["selected", "selected_slot"])
        self._refresh()

    def select(self, index: int | None) -> None:
        """Selects the logical cell at row-major position ``index`` (``None`` clears)."""
        entry = next((e for e in self._entries if e.index == index), None)
        self.diagram.select(f"p0c{entry.index}" if entry else None)
        self._follow()

    def select_offset(self, offset: int | None) -> None:
        """Selects storage offset ``offset``: every logical cell that reads it is marked."""
        if offset is not None and self.diagram.diagram.strips[0].slot_of(offset) is not None:
            self.diagram.select_offset(offset)
            self._follow()
            return
        self.diagram.select(None)
        self.selected_offset = offset
        readers = [e.index for e in self._entries if e.offset == offset]
        self.selected_index = readers[0] if readers else None
        self._refresh()

    def _follow(self, _change: Any = None) -> None:
        # The diagram holds the selection (a click in the browser or select() here).
        key, slot = self.diagram.selected, self.diagram.selected_slot
        if key:
            cell = self.diagram.diagram.cell(key)
            self.selected_index, self.selected_offset = cell.index, cell.offset
        elif slot:
            self.selected_offset = int(slot.rsplit(":", 1)[1])
            readers = [e.index for e in self._entries if e.offset == self.selected_offset]
            self.selected_index = readers[0] if readers else None
        else:
            self.selected_index = self.selected_offset = None
        self._refresh()

    def _refresh(self) -> None:
        self._status.value = wrap(
            "llmfs-status", f'<p role="status">{escape(self._selection_text())}</p>'
        )
        self._table.value = wrap(
            "llmfs-offsets-box",
            render_offsets_html(self.view, self.owner_name, self.selected_index, strip=False),
        )

    def status(self) -> str:
        """The selection in words (what the status line under the diagram says)."""
        return self._selection_text()

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


ROWS_ESM = r"""
function render({ model, el }) {
  el.classList.add("llmfs", "llmfs-trace-rows");
  function draw() {
    el.innerHTML = model.get("html");
    for (const row of el.querySelectorAll("tr[data-row]")) {
      const k = Number(row.dataset.row);
      const choose = () => {
        model.set("chosen", model.get("chosen") === k ? -1 : k);
        model.save_changes();
      };
      row.addEventListener("click", (event) => {
        if (event.target.closest("summary")) event.preventDefault();
        choose();
      });
      row.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          choose();
        }
      });
    }
    const chosen = el.querySelector("tr[data-row][aria-selected=true]");
    if (chosen && el.dataset.focus === "1") chosen.focus();
  }
  el.addEventListener("focusin", () => { el.dataset.focus = "1"; });
  el.addEventListener("focusout", (event) => {
    if (!el.contains(event.relatedTarget)) el.dataset.focus = "0";
  });
  model.on("change:html", draw);
  draw();
}
export default { render };
"""


def _rows_widget() -> Any:
    import anywidget
    import traitlets

    class TraceRows(anywidget.AnyWidget):
        """The trace table with clickable rows (``chosen`` is the row index, -1 for none)."""

        _esm = ROWS_ESM
        _css = STYLESHEET
        html = traitlets.Unicode("").tag(sync=True)
        chosen = traitlets.Int(-1).tag(sync=True)

    return TraceRows


class TraceTable(_TextRepr, widgets.VBox):
    """The trace table, live: ``TraceTable(trace(base, [...]))`` or
    ``TraceTable(steps)`` with :class:`~llmfs.widgets.model.Step` objects or ``(label, result)``
    pairs. Click a row (or Tab to it and press Enter): it is marked ``▶`` and outlined, and its
    storage diagram opens right under the table (a copy with dashed lines back to its source);
    a rejected row opens to its violated condition and the library's message."""

    def __init__(
        self,
        steps: Trace | Iterable[Step | tuple[str, Any]],
        *,
        owners: Mapping[str, Tensor | TensorView] | None = None,
        **kwargs: Any,
    ) -> None:
        self.trace = steps if isinstance(steps, Trace) else Trace.from_steps(steps, owners)
        self._rows = _rows_widget()(html=self._html(-1))
        self._rows.add_class("llmfs-trace-rows-widget")
        self._detail = widgets.VBox()
        self._rows.observe(self._show, names="chosen")
        super().__init__([self._rows, self._detail], **kwargs)
        self.add_class("llmfs-trace-table")

    @property
    def chosen(self) -> int:
        """The chosen row (-1 when none)."""
        return int(self._rows.chosen)

    def _html(self, chosen: int) -> str:
        return render_trace_html(self.trace, chosen if chosen >= 0 else None, rows_clickable=True)

    def show_row(self, index: int) -> None:
        """Opens row ``index`` (``-1`` closes it), as a click on the row does."""
        self._rows.chosen = index
        self._show({"new": index})

    def _show(self, change: dict[str, Any]) -> None:
        index = int(change["new"])
        self._rows.html = self._html(index)
        rows = self.trace.rows
        if index < 0 or index >= len(rows):
            self._detail.children = []
            return
        row = rows[index]
        heading = widgets.HTML(
            wrap(
                "llmfs-detail-heading",
                f"<p>▶ row {index + 1}: <code>{escape(row.label)}</code> "
                f"{mark(row.status)} {escape(MARK_WORDS[row.status])}</p>",
            )
        )
        if row.rejected:
            explanation = widgets.HTML(
                wrap(
                    "llmfs-rejection",
                    f'<p data-status="rejected">{mark("rejected")} violated: '
                    f"<strong>{escape(row.condition or '')}</strong> "
                    f"(<code>{escape(row.error or '')}</code>)</p>"
                    f'<p class="llmfs-message">{escape(row.message or "")}</p>',
                )
            )
            self._detail.children = [heading, explanation]
            return
        self._detail.children = [heading, self._diagram_of(index)]

    def _diagram_of(self, index: int) -> Any:
        # anywidget (the diagram widget's base) loads only when a diagram is drawn.
        from llmfs.widgets.storage import StorageDiagram

        row = self.trace.rows[index]
        view = self.trace.views[index]
        if view is None:
            raise CourseError(f"row {index} of the trace has no view to draw")
        sources = self.trace.copied_from
        source = sources[index] if index < len(sources) else None
        if source is not None and row.mapping_source:
            return StorageDiagram(
                [(f"copied view of {row.mapping_source}", source), (row.label, view, source)],
                owners={row.mapping_source: source},
            )
        return StorageDiagram([(row.label, view)], owners={row.owner or "base": view})

    def _text(self) -> str:
        return render_trace(self.trace)


__all__ = ["OffsetTable", "TraceTable"]
