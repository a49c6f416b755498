"""``StorageDiagram``: the live storage diagram, a thin anywidget over the static SVG.

The widget computes nothing: the markup is :func:`~llmfs.widgets.svg.render_diagram_svg` of a
:class:`~llmfs.widgets.diagram.Diagram`, and its script (bundled below as ``_esm``, no imports,
so it works offline in JupyterLab, VS Code and Colab) only toggles classes and writes the status
line from the ``data-*`` attributes the SVG already carries:

* click, hover or focus (Tab, then Enter) a logical cell: the cell, its line and the storage
  offset it reads are highlighted (thick outline, bold text and a ``▶`` glyph, not only colour)
  and the status line (``aria-live``) says ``[1, 0] reads offset 4: 1 + 1·3 + 0·1 = 4``;
* click or focus a storage offset: every cell that reads it is highlighted with its line (a
  zero stride lights several), and the status says what the offset holds and who reads it;
* the step buttons walk the offset cursor of a view one offset at a time, in the order of
  ``view.logical_offsets()`` (the steps come from :func:`~llmfs.widgets.diagram.cursor_steps`),
  saying how each step advanced or carried.

``selected`` (a cell key such as ``"p0c3"``) and ``step`` are synced both ways, so Python can
drive the widget and tests can read it.

A diagram that shows an exercise's answer takes ``after="ch02.q2"``: until that predict exercise
is finished (every field right, or its answer shown) the output is one sentence saying so, never
the drawing; the live widget draws itself as soon as the exercise's check finishes it.

Outside a browser the widget's output still carries the
deterministic text form (``text/plain``) and the static SVG (``text/html``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

import anywidget
import traitlets

from llmfs.course import CourseError
from llmfs.course.exercises.state import exercise_finished, exercise_state
from llmfs.tensor import Tensor, TensorView
from llmfs.widgets.diagram import Diagram, ItemLike, build, diagram, render_diagram_text
from llmfs.widgets.html import wrap
from llmfs.widgets.model import format_number
from llmfs.widgets.style import STYLESHEET
from llmfs.widgets.svg import render_diagram_html, render_diagram_svg

ESM = r"""
function render({ model, el }) {
  el.classList.add("llmfs", "llmfs-storage-diagram");
  const scroll = document.createElement("div");
  scroll.className = "llmfs-diagram-scroll";
  const controls = document.createElement("div");
  controls.className = "llmfs-controls";
  const status = document.createElement("p");
  status.className = "llmfs-status";
  status.setAttribute("aria-live", "polite");
  status.setAttribute("role", "status");
  el.append(scroll, controls, status);

  const svg = () => scroll.querySelector("svg");
  const cellOf = (key) => scroll.querySelector(`g.llmfs-cell[data-cell="${key}"]`);
  const describe = (cell) => `${cell.dataset.coordinate} reads offset ${cell.dataset.offset}` +
    ` of ${cell.dataset.strip}: ${cell.dataset.formula} (value ${cell.dataset.value})`;

  function mark(key) {
    scroll.querySelectorAll(".llmfs-on").forEach((node) => node.classList.remove("llmfs-on"));
    scroll.querySelectorAll("g.llmfs-cell[aria-pressed]").forEach(
      (node) => node.setAttribute("aria-pressed", "false"));
    const cell = key ? cellOf(key) : null;
    if (!cell) return null;
    cell.classList.add("llmfs-on");
    cell.setAttribute("aria-pressed", "true");
    const line = scroll.querySelector(`line[data-line="l-${key}"]`);
    if (line) line.classList.add("llmfs-on");
    for (const slot of scroll.querySelectorAll("g.llmfs-slot")) {
      const same = slot.dataset.strip === cell.dataset.strip;
      if (same && slot.dataset.offset === cell.dataset.offset) {
        slot.classList.add("llmfs-on");
      }
    }
    return cell;
  }

  function markSlot(strip, offset) {
    mark(null);
    let found = null;
    for (const slot of scroll.querySelectorAll("g.llmfs-slot")) {
      if (slot.dataset.strip === strip && slot.dataset.offset === String(offset)) found = slot;
    }
    if (!found) return null;
    found.classList.add("llmfs-on");
    for (const key of (found.dataset.readers || "").split(" ").filter(Boolean)) {
      const cell = cellOf(key);
      if (cell) {
        cell.classList.add("llmfs-on");
        cell.setAttribute("aria-pressed", "true");
      }
      const line = scroll.querySelector(`line[data-line="l-${key}"]`);
      if (line) line.classList.add("llmfs-on");
    }
    return found;
  }

  function stepText(panel, k) {
    const steps = (model.get("steps")[String(panel)] || []);
    if (k < 0 || k >= steps.length) return null;
    const [key, offset, carry] = steps[k];
    return { key, offset, text: `step ${k + 1} of ${steps.length}: ${carry}` };
  }

  function show() {
    const k = model.get("step");
    const panel = model.get("step_panel");
    const step = stepText(panel, k);
    const key = step ? step.key : model.get("selected");
    const chosenSlot = model.get("selected_slot");
    if (!key && chosenSlot) {
      const cut = chosenSlot.lastIndexOf(":");
      const slot = markSlot(chosenSlot.slice(0, cut), chosenSlot.slice(cut + 1));
      if (slot) {
        status.textContent = slot.querySelector("title").textContent;
        return;
      }
    }
    const cell = mark(key);
    if (step && cell) status.textContent = `${step.text} (${describe(cell)})`;
    else if (cell) status.textContent = describe(cell);
    else if (!svg()) status.textContent = "";
    else status.textContent = "Click or focus a cell (or a storage offset) to see what it reads.";
    for (const button of controls.querySelectorAll("button[data-action]")) {
      const pressed = button.dataset.action === "next" && step !== null &&
        String(panel) === button.dataset.panel;
      button.setAttribute("aria-pressed", pressed ? "true" : "false");
    }
  }

  function choose(key) {
    model.set("step", -1);
    model.set("selected_slot", "");
    model.set("selected", key);
    model.save_changes();
    show();
  }

  function chooseSlot(slot) {
    model.set("step", -1);
    model.set("selected", "");
    model.set("selected_slot", `${slot.dataset.strip}:${slot.dataset.offset}`);
    model.save_changes();
    show();
  }

  function draw() {
    scroll.innerHTML = model.get("svg");
    for (const cell of scroll.querySelectorAll("g.llmfs-cell")) {
      cell.setAttribute("aria-pressed", "false");
      cell.setAttribute("aria-label", describe(cell));
      cell.addEventListener("click", () => choose(cell.dataset.cell));
      cell.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          choose(cell.dataset.cell);
        }
      });
      const preview = () => {
        mark(cell.dataset.cell);
        status.textContent = describe(cell);
      };
      cell.addEventListener("mouseenter", preview);
      cell.addEventListener("focus", preview);
      cell.addEventListener("mouseleave", show);
    }
    for (const slot of scroll.querySelectorAll("g.llmfs-slot")) {
      slot.setAttribute("tabindex", "0");
      slot.setAttribute("role", "button");
      slot.setAttribute("aria-label", slot.querySelector("title").textContent);
      slot.addEventListener("click", () => chooseSlot(slot));
      slot.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          chooseSlot(slot);
        }
      });
    }
    controls.innerHTML = "";
    const labels = model.get("labels");
    for (const panel of Object.keys(model.get("steps"))) {
      const group = document.createElement("span");
      group.className = "llmfs-step-group";
      const name = document.createElement("span");
      name.textContent = `walk the offset cursor of ${labels[panel]}:`;
      group.append(name);
      for (const [action, text] of [["back", "◀ back"], ["next", "step ▶"], ["reset", "↺ reset"]]) {
        const button = document.createElement("button");
        button.type = "button";
        button.textContent = text;
        button.dataset.action = action;
        button.dataset.panel = panel;
        button.className = `llmfs-step-${action}`;
        const words = text.replace(/[◀▶↺] ?/g, "").trim();
        button.setAttribute("aria-label", `${words}: cursor of ${labels[panel]}`);
        button.addEventListener("click", () => {
          const steps = model.get("steps")[panel];
          const current = String(model.get("step_panel")) === panel ? model.get("step") : -1;
          let k = current;
          if (action === "next") k = Math.min(current + 1, steps.length - 1);
          if (action === "back") k = Math.max(current - 1, -1);
          if (action === "reset") k = -1;
          model.set("step_panel", Number(panel));
          model.set("step", k);
          model.set("selected", k >= 0 ? steps[k][0] : "");
          model.set("selected_slot", "");
          model.save_changes();
          show();
        });
        group.append(button);
      }
      controls.append(group);
    }
    show();
  }

  model.on("change:svg", draw);
  model.on("change:selected", show);
  model.on("change:selected_slot", show);
  model.on("change:step", show);
  draw();
}
export default { render };
"""


class StorageDiagram(anywidget.AnyWidget):
    """A drawn, live diagram of views over shared storage and copies into new storage.

    ``StorageDiagram(view)`` draws one view; ``StorageDiagram([("a", view_a), ("b", view_b)])``
    several (views of one owner share its strip); ``StorageDiagram(base, ["view = base.view()",
    "sliced = view.slice(1, 1, 3)", "sliced.materialize()", "sliced.reshape([4])"])`` draws
    Python operations as :func:`~llmfs.widgets.model.trace` does (a copy gets its own ◆ strip,
    a refused request its violated condition). A ready :class:`Diagram` is accepted too.

    ``name`` binds ``source`` in the operations; ``owner`` names its owner (default ``name``);
    ``owners`` names the owners of items (default: the first is ``base``). Raises
    :class:`~llmfs.widgets.model.ExpressionError` for a Python error in an operation and
    :class:`CourseError` for something that cannot be drawn.
    """

    _esm = ESM
    _css = STYLESHEET
    svg = traitlets.Unicode("").tag(sync=True)
    steps = traitlets.Dict().tag(sync=True)
    labels = traitlets.Dict().tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    #: ``"owner:offset"`` of a chosen storage offset (``""`` when a cell or nothing is chosen).
    selected_slot = traitlets.Unicode("").tag(sync=True)
    step = traitlets.Int(-1).tag(sync=True)
    step_panel = traitlets.Int(0).tag(sync=True)

    def __init__(
        self,
        source: Diagram | Tensor | TensorView | Iterable[ItemLike],
        operations: Sequence[str] | None = None,
        *,
        name: str = "base",
        owner: str | None = None,
        owners: Mapping[str, Tensor | TensorView] | None = None,
        namespace: Mapping[str, Any] | None = None,
        title: str = "",
        after: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.diagram = _diagram_of(source, operations, name, owner, owners, namespace, title)
        super().__init__(**kwargs)
        self.after = after
        if after is not None and not exercise_finished(after):
            self.svg = f'<p class="llmfs-locked">{escape(self._locked_text())}</p>'
            state = exercise_state(after)
            if state.listeners is None:
                state.listeners = []
            state.listeners.append(self._unlock)
        else:
            self._draw()

    def _draw(self) -> None:
        self.steps = {
            str(p.number): [[f"p{p.number}c{s.position}", s.offset, s.carry] for s in p.steps]
            for p in self.diagram.panels
            if p.steps
        }
        self.labels = {str(p.number): p.label for p in self.diagram.panels}
        self.svg = render_diagram_svg(self.diagram)

    def _unlock(self, _state: Any) -> None:
        if self.locked and self.after is not None and exercise_finished(self.after):
            self._draw()

    @property
    def locked(self) -> bool:
        """True while the exercise named by ``after`` is not finished (nothing is drawn)."""
        return not self.svg.startswith("<svg")

    def _locked_text(self) -> str:
        return (
            f"This diagram shows the answer to {self.after}: it is drawn once that exercise is "
            f"finished (every field right, or its answer shown). Run its check, then this cell."
        )

    # -- driving it from Python (the same state the buttons change) ---------------------------

    def select(self, key: str | None) -> str:
        """Selects the cell ``key`` (``"p0c3"``; ``None`` clears) and returns the status text.
        Raises :class:`CourseError` while the diagram is locked."""
        self._check_unlocked()
        self.step, self.selected_slot = -1, ""
        if key is None:
            self.selected = ""
            return ""
        cell = self.diagram.cell(key)
        self.selected = key
        return status_text(self.diagram, cell.key)

    def select_offset(self, offset: int | None, strip: str | None = None) -> tuple[str, ...]:
        """Chooses storage ``offset`` of ``strip`` (default: the first strip); every cell that
        reads it is highlighted. Returns the keys of those cells (none for unread storage)."""
        self.step, self.selected = -1, ""
        if offset is None:
            self.selected_slot = ""
            return ()
        name = strip if strip is not None else self.diagram.strips[0].name
        found = self.diagram.strip(name)
        position = found.slot_of(offset)
        if position is None:
            raise CourseError(f"offset {offset} of {name} is not drawn (storage of {found.size})")
        self.selected_slot = f"{name}:{offset}"
        return found.slots[position].readers

    def step_forward(self, panel: int = 0) -> str:
        """Moves the offset cursor of ``panel`` one step; returns the step's words."""
        self._check_unlocked()
        steps = self.steps.get(str(panel))
        if not steps:
            raise CourseError(f"panel {panel} has no cursor steps (missing or summarised)")
        k = self.step + 1 if self.step_panel == panel else 0
        k = min(k, len(steps) - 1)
        self.step_panel = panel
        self.step = k
        self.selected = steps[k][0]
        return f"step {k + 1} of {len(steps)}: {steps[k][2]}"

    def _check_unlocked(self) -> None:
        if self.locked:
            raise CourseError(self._locked_text())

    # -- output ----------------------------------------------------------------------------

    def __repr__(self) -> str:
        if self.locked:
            return self._locked_text()
        return render_diagram_text(self.diagram)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle: Any = super()._repr_mimebundle_(**kwargs) or {}
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, None)
        data = dict(data)
        data["text/plain"] = repr(self)
        data["text/html"] = (
            wrap("llmfs-locked", f"<p>{escape(self._locked_text())}</p>")
            if self.locked
            else render_diagram_html(self.diagram)
        )
        return (data, metadata) if metadata is not None else data


def status_text(diagram_: Diagram, key: str) -> str:
    """What the status line says for a cell: ``[1,0] reads offset 4 of base: 1 + 1·3 + 0·1 = 4
    (value 21)`` (the same words the widget's script writes from the SVG's attributes)."""
    cell = diagram_.cell(key)
    panel = diagram_.panels[cell.panel]
    coordinate = "[" + ",".join(str(c) for c in cell.coordinate) + "]"
    return (
        f"{coordinate} reads offset {cell.offset} of {panel.owner}: {cell.formula} "
        f"(value {format_number(cell.value)})"
    )


def _diagram_of(
    source: Any,
    operations: Sequence[str] | None,
    name: str,
    owner: str | None,
    owners: Mapping[str, Tensor | TensorView] | None,
    namespace: Mapping[str, Any] | None,
    title: str,
) -> Diagram:
    if isinstance(source, Diagram):
        return source
    if operations is not None:
        if not isinstance(source, (Tensor, TensorView)):
            raise CourseError(
                f"operations run on a Tensor or TensorView source, got {type(source).__name__}"
            )
        return diagram(source, operations, name=name, owner=owner, namespace=namespace, title=title)
    if isinstance(source, (Tensor, TensorView)):
        given = owners or {owner or "base": source}
        return build([source], owners=given, title=title)
    if isinstance(source, (str, bytes)) or not isinstance(source, Iterable):
        raise CourseError(
            f"StorageDiagram draws a view, a tensor, a list of (label, view) items or a Diagram, "
            f"got {type(source).__name__}"
        )
    return build(list(source), owners=owners, title=title)


__all__ = ["ESM", "StorageDiagram", "exercise_finished", "status_text"]
