"""The ipywidgets layer: selection, row chooser, Run; text reprs for notebook validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("ipywidgets", reason="the widgets need ipywidgets (pip install '.[course]')")

from llmfs.course import CourseError
from llmfs.tensor import Tensor
from llmfs.widgets import (
    OffsetTable,
    PredictionError,
    PredictThenRun,
    TraceTable,
    check,
    predict,
    trace,
)
from llmfs.widgets.examples import SEED_OPERATIONS, seed_fixture, seed_trace
from llmfs.widgets.storage import StorageDiagram


def test_selecting_a_logical_cell_marks_the_storage_cell_it_reads() -> None:
    table = OffsetTable(seed_fixture().transpose(0, 1))
    table.select(1)  # coordinate [0, 1] of the transpose reads offset 3
    assert table.selected_offset == 3
    assert table.diagram.selected == "p0c1"
    assert table.status() == "coordinate [0, 1] reads storage offset 3 (value 20)"
    assert '<tr data-index="1" data-offset="3" class="llmfs-on">' in table._table.value
    table.select(None)
    assert table.selected_offset is None and table.diagram.selected == ""


def test_a_click_in_the_diagram_moves_the_table_selection() -> None:
    table = OffsetTable(seed_fixture().transpose(0, 1))
    table.diagram.selected = "p0c3"  # what the browser's click sets
    assert (table.selected_index, table.selected_offset) == (3, 4)
    assert '<tr data-index="3" data-offset="4" class="llmfs-on">' in table._table.value


def test_selecting_a_storage_cell_marks_every_reader() -> None:
    table = OffsetTable(seed_fixture().view().expand([2, 2, 3]))
    table.select_offset(4)
    assert table.diagram.selected_slot == "base:4"
    assert table.status().startswith("coordinate [0, 1, 1], [1, 1, 1] reads storage offset 4")


def test_a_skipped_storage_cell_says_no_one_reads_it() -> None:
    table = OffsetTable(seed_fixture().slice(1, 1, 3))
    table.select_offset(3)
    assert table.status() == "storage offset 3 is read by no logical cell of this view"


def test_storage_is_shown_once_and_cells_show_coordinates() -> None:
    table = OffsetTable(seed_fixture().transpose(0, 1))
    assert '<table class="llmfs-strip"' not in table._table.value  # storage: the diagram only
    svg = table.diagram.svg
    assert svg.count('class="llmfs-strip ') == 1
    assert 'data-coordinate="[0,1]"' in svg


def test_a_large_view_draws_a_bounded_diagram() -> None:
    table = OffsetTable(Tensor.arange(10**6).reshape([1000, 1000]).transpose(0, 1))
    assert len(table.diagram.svg) < 60_000
    assert "… 999988 more …" in repr(table)


def test_the_offset_table_repr_is_the_text_table() -> None:
    table = OffsetTable(seed_fixture().transpose(0, 1))
    bundle = table._repr_mimebundle_()
    assert bundle["text/plain"] == repr(table)
    assert repr(table).splitlines()[0].startswith("shape [3, 2], strides [1, 3]")
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_the_trace_table_shows_the_seed_table_and_opens_a_rows_diagram() -> None:
    table = TraceTable(trace(seed_fixture(), SEED_OPERATIONS))
    assert repr(table) == repr(seed_trace()).replace(
        "Shared-storage views and explicit copies\n", ""
    )
    html = table._rows.html
    assert 'data-status="rejected"' in html
    assert html.count('tabindex="0"') == len(SEED_OPERATIONS)
    table.show_row(2)
    assert table.chosen == 2
    assert 'data-row="2" tabindex="0" aria-selected="true" class="llmfs-on"' in table._rows.html
    heading, detail = table._detail.children
    assert "row 3: <code>transposed = view.transpose(0, 1)</code>" in heading.value
    assert isinstance(detail, StorageDiagram)
    assert detail.diagram.panels[0].strides == (1, 3)
    table.show_row(-1)
    assert table._detail.children == ()
    assert 'aria-selected="true"' not in table._rows.html


def test_a_click_on_a_row_opens_it_and_a_copy_row_shows_its_source() -> None:
    table = TraceTable(trace(seed_fixture(), SEED_OPERATIONS))
    table._rows.chosen = 4  # what the browser's click sets: sliced.materialize()
    _, detail = table._detail.children
    strips = detail.diagram.strips
    assert [s.kind for s in strips] == ["shared", "copy"]
    assert strips[1].mapping == ((0, 1), (1, 2), (2, 4), (3, 5))


def test_a_rejected_row_opens_to_its_explanation() -> None:
    table = TraceTable(trace(seed_fixture(), SEED_OPERATIONS))
    table.show_row(6)  # transposed.reshape([2, 3])
    assert "<details open>" in table._rows.html
    _, explanation = table._detail.children
    assert "reshape without copying" in explanation.value
    assert "not adjacent in storage" in explanation.value


def test_a_trace_table_accepts_labelled_results() -> None:
    base = seed_fixture()
    table = TraceTable([("view", base.view()), ("copy", base.view().materialize())])
    assert [row.status for row in table.trace.rows] == ["shared", "copy"]


def test_run_with_an_empty_box_lists_it_and_shows_nothing_of_the_truth() -> None:
    widget = PredictThenRun(
        "base.transpose(0, 1)", ["shape", "strides", "owner"], namespace={"base": seed_fixture()}
    )
    widget.inputs["shape"].value = "(3,2)"
    widget.inputs["strides"].value = "[2, 1]"
    comparison = widget.run()
    assert [v.status for v in comparison.verdicts] == ["right", "wrong", "unanswered"]
    html = widget.result.value
    assert "still to answer" in html and "owner: not answered yet" in html
    for leak in ("✓", "✗", "[1, 3]", 'data-offset="3"'):
        assert leak not in html and leak not in repr(widget)


def test_run_marks_each_field_and_shows_the_result_once_all_are_right() -> None:
    widget = PredictThenRun(
        "base.transpose(0, 1)", ["shape", "strides", "owner"], namespace={"base": seed_fixture()}
    )
    widget.inputs["shape"].value = "(3,2)"
    widget.inputs["strides"].value = "[2, 1]"
    widget.inputs["owner"].value = "shared"
    widget.run()
    html = widget.result.value
    assert 'data-field="shape" data-status="right"' in html and "✓ right" in html
    assert 'data-field="strides" data-status="wrong"' in html and "✗ wrong" in html
    assert "[1, 3]" not in html and 'data-offset="3"' not in html
    widget.inputs["strides"].value = "1, 3"
    assert widget.run().all_right
    assert 'data-offset="3"' in widget.result.value  # the offset table of the result
    assert "✓ right" in repr(widget)


def test_an_unreadable_entry_gets_a_message_not_a_traceback() -> None:
    widget = PredictThenRun("base.view()", ["contiguous"], namespace={"base": seed_fixture()})
    widget.inputs["contiguous"].value = "perhaps"
    widget.run()
    assert "could not read &#x27;perhaps&#x27; (expected yes or no" in widget.result.value


def test_a_broken_expression_shows_a_message() -> None:
    widget = PredictThenRun("bsae.view()", ["shape"], namespace={"base": seed_fixture()})
    assert widget.run() is None
    assert "cannot run" in widget.result.value and "NameError" in widget.result.value


def test_a_rejected_request_can_be_predicted() -> None:
    widget = PredictThenRun(
        "base.transpose(0, 1).reshape([2, 3])", ["error"], namespace={"base": seed_fixture()}
    )
    widget.inputs["error"].value = "NonContiguousReshapeError"
    assert widget.run().all_right
    assert "violated <strong>reshape without copying</strong>" in widget.result.value


def test_the_widget_reads_the_notebook_globals_by_default() -> None:
    global base
    base = seed_fixture()
    try:
        widget = PredictThenRun("base.slice(1, 1, 3)", ["base_offset"])
        widget.inputs["base_offset"].value = "1"
        assert widget.run().all_right
    finally:
        del base


def test_an_exercise_widget_takes_its_expression_and_fields_from_the_manifest(
    attempts_log: Path,
) -> None:
    widget = PredictThenRun(exercise_id="ch02.q1", namespace={"base": seed_fixture()})
    assert widget.expression == "base.transpose(0, 1)"
    assert widget.fields == ("shape", "strides", "offsets")
    with pytest.raises(CourseError, match="does not ask for"):
        PredictThenRun(fields=["values"], exercise_id="ch02.q1", namespace={})
    with pytest.raises(CourseError, match="asks about"):
        PredictThenRun("base.view()", exercise_id="ch02.q1", namespace={})


def test_run_records_a_complete_attempt(attempts_log: Path) -> None:
    widget = PredictThenRun(exercise_id="ch02.q1", namespace={"base": seed_fixture()})
    widget.inputs["shape"].value = "3, 2"
    widget.inputs["strides"].value = "1,3"
    assert widget.run() is not None and not attempts_log.exists()  # offsets still empty
    widget.inputs["offsets"].value = "0 3 1 4 2 5"
    assert widget.run().recorded
    record = json.loads(attempts_log.read_text())
    assert record["fields"] == {"shape": True, "strides": True, "offsets": True}
    assert record["answers"] == {"shape": "3, 2", "strides": "1,3", "offsets": "0 3 1 4 2 5"}


def test_hint_and_show_answer_buttons(attempts_log: Path) -> None:
    widget = PredictThenRun(exercise_id="ch02.q1", namespace={"base": seed_fixture()})
    widget.hint_button.click()
    assert "hint 1 of 2: A transpose swaps sizes and strides." in widget.hints.value
    widget.hint_button.click()
    assert "hint 2 of 2" in widget.hints.value
    widget.inputs["shape"].value = "3, 2"
    widget.reveal_button.click()
    assert "strides (revealed): [1, 3]" in widget.result.value
    kinds = [json.loads(line).get("event") for line in attempts_log.read_text().splitlines()]
    assert kinds == ["hint", "hint", "reveal"]


def test_the_widget_and_the_text_form_share_one_exercise_state(attempts_log: Path) -> None:
    scope = {"base": seed_fixture()}
    widget = PredictThenRun(exercise_id="ch02.q1", namespace=scope)
    check(
        predict(
            "base.transpose(0, 1)",
            exercise_id="ch02.q1",
            shape=[3, 2],
            strides=[2, 1],
            offsets=[0, 3, 1, 4, 2, 5],
        ),
        scope,
    )
    assert widget.inputs["strides"].value == "[2, 1]"
    assert 'data-field="strides" data-status="wrong"' in widget.result.value
    widget.inputs["strides"].value = "[2, 1]"
    widget.run()
    widget.run()
    # Three wrong tries in all, from both views: the text form now shows the answer.
    text = repr(
        check(
            predict(
                "base.transpose(0, 1)",
                exercise_id="ch02.q1",
                shape=[3, 2],
                strides=[2, 1],
                offsets=[0, 3, 1, 4, 2, 5],
            ),
            scope,
        )
    )
    assert "strides: answer: [1, 3]" in text


def test_an_unknown_exercise_is_a_course_error(attempts_log: Path) -> None:
    with pytest.raises(CourseError, match=r"ch09\.zz"):
        PredictThenRun(exercise_id="ch09.zz", namespace={"base": seed_fixture()})


def test_unknown_fields_fail_when_the_widget_is_made() -> None:
    with pytest.raises(PredictionError):
        PredictThenRun("base.view()", ["colour"], namespace={})
