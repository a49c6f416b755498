"""The live StorageDiagram (anywidget): thin over the model, offline, text and SVG without JS."""

from __future__ import annotations

import pytest

pytest.importorskip("anywidget", reason="the storage diagram widget needs anywidget (.[course])")

from llmfs.course import CourseError
from llmfs.widgets import StorageDiagram, storage_diagram
from llmfs.widgets.examples import seed_fixture
from llmfs.widgets.storage import ESM, status_text
from llmfs.widgets.svg import render_diagram_svg, svg_of_html


def test_the_widget_script_is_bundled_and_imports_nothing() -> None:
    assert "export default" in ESM
    assert "import " not in ESM and "http" not in ESM and "require(" not in ESM


def test_selecting_a_cell_gives_its_formula_with_numbers() -> None:
    widget = StorageDiagram(seed_fixture().view().slice(1, 1, 3))
    assert widget.select("p0c2") == "[1,0] reads offset 4 of base: 1 + 1·3 + 0·1 = 4 (value 21)"
    assert widget.selected == "p0c2" and widget.step == -1
    assert widget.select(None) == "" and widget.selected == ""
    with pytest.raises(CourseError):
        widget.select("p0c9")


def test_stepping_walks_the_cursor_in_logical_offsets_order() -> None:
    view = seed_fixture().view().transpose(0, 1)
    widget = StorageDiagram(view)
    offsets = []
    for _ in range(6):
        widget.step_forward()
        offsets.append(widget.steps["0"][widget.step][1])
        assert widget.selected == f"p0c{widget.step}"
    assert offsets == list(view.logical_offsets())
    assert widget.step_forward().startswith("step 6 of 6")  # stays on the last step


def test_operations_copies_and_refusals_as_in_trace() -> None:
    widget = StorageDiagram(
        seed_fixture(),
        ["sliced = base.view().slice(1, 1, 3)", "sliced.materialize()", "sliced.reshape([4])"],
    )
    assert [s.name for s in widget.diagram.strips] == ["base", "copy 1"]
    assert widget.labels == {
        "0": "sliced = base.view().slice(1, 1, 3)",
        "1": "sliced.materialize()",
    }
    assert widget.svg == render_diagram_svg(widget.diagram)


def test_the_output_carries_text_and_static_svg_besides_the_widget() -> None:
    widget = StorageDiagram(seed_fixture().view().transpose(0, 1))
    bundle = widget._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert data["text/plain"] == repr(widget) == repr(widget.diagram)
    assert svg_of_html(data["text/html"]) == widget.svg
    assert "application/vnd.jupyter.widget-view+json" in data


def test_a_diagram_a_list_of_items_and_bad_input() -> None:
    base = seed_fixture()
    d = storage_diagram(base, ["base.view()"])
    assert StorageDiagram(d).diagram is d
    two = StorageDiagram([("a", base.view()), ("b", base.view().transpose(0, 1))])
    assert len(two.diagram.strips) == 1 and len(two.diagram.panels) == 2
    with pytest.raises(CourseError, match="StorageDiagram draws"):
        StorageDiagram("base")  # type: ignore[arg-type]
    with pytest.raises(CourseError, match="operations run on"):
        StorageDiagram([base.view()], ["x"])  # type: ignore[arg-type]


def test_status_text_matches_the_svg_title() -> None:
    d = storage_diagram(seed_fixture(), ["base.view().transpose(0, 1)"])
    assert status_text(d, "p0c1") == "[0,1] reads offset 3 of base: 0 + 0·1 + 1·3 = 3 (value 20)"


def test_a_diagram_after_an_exercise_stays_words_until_the_exercise_is_finished(
    attempts_log,
) -> None:
    from llmfs.widgets import check, predict

    base = seed_fixture()
    widget = StorageDiagram(base, ["base.view().transpose(0, 1)"], after="ch02.q1")
    assert widget.locked and "<svg" not in widget.svg and widget.steps == {}
    text = repr(widget)
    assert text.startswith("This diagram shows the answer to ch02.q1")
    bundle = widget._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert (
        "<svg" not in data["text/html"]
        and "data:image" not in data["text/html"]
        and "[0, 1] 20 → 3" not in data["text/plain"]
    )
    with pytest.raises(CourseError, match=r"answer to ch02\.q1"):
        widget.select("p0c1")
    # A wrong complete attempt does not open it; the right one does, live.
    check(
        predict(
            "base.transpose(0, 1)",
            exercise_id="ch02.q1",
            shape=[3, 2],
            strides=[2, 1],
            offsets=[0, 3, 1, 4, 2, 5],
        ),
        {"base": base},
    )
    assert widget.locked
    check(
        predict(
            "base.transpose(0, 1)",
            exercise_id="ch02.q1",
            shape=[3, 2],
            strides=[1, 3],
            offsets=[0, 3, 1, 4, 2, 5],
        ),
        {"base": base},
    )
    assert not widget.locked and widget.svg.startswith("<svg")
    assert "[0, 1] 20 → 3" in repr(widget)
    # A diagram made after the exercise is finished is drawn at once.
    assert not StorageDiagram(base, ["base.view()"], after="ch02.q1").locked
