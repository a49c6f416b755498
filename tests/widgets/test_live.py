"""The ipywidgets layer: selection and the row chooser; text reprs for notebook validation."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ipywidgets", reason="the widgets need ipywidgets (pip install '.[course]')")

from llmfs.tensor import Tensor
from llmfs.widgets import (
    OffsetTable,
    PredictThenRun,
    TraceTable,
    check,
    predict,
    trace,
)
from llmfs.widgets.examples import SEED_OPERATIONS, seed_fixture, seed_trace
from llmfs.widgets.storage import StorageDiagram
from tests.course.exercises.exercisekit import RIGHT


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


def test_the_old_exercise_widget_has_no_boxes_and_only_points_to_the_record(
    attempts_log: Path,
) -> None:
    # A notebook saved with the earlier widget still runs: the cell shows static text (no
    # ipywidget, so nothing reads "model not found" later) pointing to the predict(...) cell.
    stand_in = PredictThenRun(exercise_id="ch02.q1", namespace={"base": seed_fixture()})
    assert not hasattr(stand_in, "inputs") and not hasattr(stand_in, "_repr_mimebundle_")
    assert repr(stand_in).startswith("ch02.q1: answer in the exercise's predict(...) cell")
    assert "saved with the notebook" in stand_in._repr_html_()


def test_the_old_exercise_widget_repeats_the_latest_check_of_its_exercise(
    attempts_log: Path,
) -> None:
    scope = {"base": seed_fixture()}
    comparison = check(
        predict("base.transpose(0, 1)", exercise_id="ch02.q1", **{**RIGHT, "strides": [2, 1]}),
        scope,
    )
    stand_in = PredictThenRun(exercise_id="ch02.q1")
    assert repr(stand_in) == repr(comparison)
    assert stand_in._repr_html_() == comparison._repr_html_()
