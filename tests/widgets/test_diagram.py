"""The storage diagram's model: every cell, offset, line and label comes from the library."""

from __future__ import annotations

import pytest

from llmfs.course import CourseError
from llmfs.tensor import Tensor, layout
from llmfs.widgets.diagram import (
    STRIP_LIMIT,
    build,
    cursor_steps,
    diagram,
    formula,
    jumps_text,
)
from llmfs.widgets.examples import seed_fixture


def reshape_vs_transpose():
    base = seed_fixture()
    return diagram(
        base.view(),
        ["view.reshape([3, 2])", "view.transpose(0, 1)"],
        name="view",
        owner="base",
    )


def slice_copy_and_refusal():
    return diagram(
        seed_fixture(),
        ["sliced = base.view().slice(1, 1, 3)", "sliced.materialize()", "sliced.reshape([4])"],
    )


def test_every_logical_cell_reads_the_cursors_offset_with_its_formula() -> None:
    view = seed_fixture().view().slice(1, 1, 3)
    panel = build([("sliced", view)]).panels[0]
    assert [c.offset for c in panel.cells] == list(view.logical_offsets())
    assert [c.coordinate for c in panel.cells] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [c.value for c in panel.cells] == [11.0, 12.0, 21.0, 22.0]
    assert panel.cells[2].formula == "1 + 1·3 + 0·1 = 4"
    assert [c.place for c in panel.cells] == [
        (0, 0, 0, 0),
        (0, 0, 0, 1),
        (0, 0, 1, 0),
        (0, 0, 1, 1),
    ]
    assert panel.jumps == "+3 per row, +1 per column"


def test_two_views_of_one_owner_share_one_strip_and_draw_a_line_per_cell() -> None:
    d = reshape_vs_transpose()
    assert [s.name for s in d.strips] == ["base"]
    assert [p.side for p in d.panels] == ["above", "below"]
    reads = d.read_lines()
    assert len(reads) == sum(len(p.cells) for p in d.panels) == 12
    transpose = [line.offset for line in reads if line.cell.startswith("p1")]
    assert transpose == [0, 3, 1, 4, 2, 5]
    assert [len(slot.readers) for slot in d.strips[0].slots] == [2] * 6


def test_a_copy_gets_its_own_strip_with_a_mapping_back_to_the_source() -> None:
    d = slice_copy_and_refusal()
    base, copy = d.strips
    assert (base.kind, copy.kind) == ("shared", "copy")
    assert copy.title == "◆ copy 1: new owner made by sliced.materialize(), 4 values"
    assert copy.source == "base"
    assert copy.mapping == ((0, 1), (1, 2), (2, 4), (3, 5))
    assert [(line.offset, line.source_offset) for line in d.copy_lines()] == list(copy.mapping)


def test_unread_storage_is_labelled_skipped_inside_the_view_and_not_read_outside() -> None:
    strip = slice_copy_and_refusal().strips[0]
    assert [s.status for s in strip.slots] == ["unread", "read", "read", "skipped", "read", "read"]
    assert strip.notes == (
        "offset 0 is not read: before the first offset read, 1",
        "offset 3 is skipped: not contiguous",
    )


def test_a_refused_reshape_names_the_gap_no_single_stride_can_jump() -> None:
    d = slice_copy_and_refusal()
    [rejection] = d.rejections
    assert rejection.error == "NonContiguousReshapeError"
    assert rejection.condition == "reshape without copying"
    assert rejection.gap == (2, 4)
    assert rejection.panel == 0 and rejection.strip == "base"
    assert "+1 per step, then +2 from offset 2 to 4; no single stride jumps both" in rejection.words
    assert "3 != 2*1" in rejection.words


def test_a_refusal_without_a_gap_still_says_the_condition() -> None:
    d = diagram(seed_fixture(), ["v = base.view()", "v.reshape([4, 2])"])
    [rejection] = d.rejections
    assert rejection.gap is None
    assert rejection.words.startswith("violated: element counts match")


def test_zero_strides_draw_many_lines_into_one_offset() -> None:
    d = build([("expanded", seed_fixture().view().expand([2, 2, 3]))])
    panel = d.panels[0]
    assert panel.jumps == "+0 per block (repeats), +3 per row, +1 per column"
    assert panel.notes and "stride 0 on axis 0" in panel.notes[0]
    assert [len(s.readers) for s in d.strips[0].slots] == [2] * 6
    assert [label for _, label in panel.blocks] == ["[0, :, :]", "[1, :, :]"]
    assert len(d.read_lines()) == 12


def test_rank_four_is_drawn_as_blocks_of_grids() -> None:
    view = Tensor.arange(24).reshape([2, 2, 2, 3])
    panel = build([view]).panels[0]
    assert [label for _, label in panel.blocks] == [
        "[0, 0, :, :]",
        "[0, 1, :, :]",
        "[1, 0, :, :]",
        "[1, 1, :, :]",
    ]
    assert panel.cells[-1].place == (1, 1, 1, 2)


def test_large_views_are_summarised_with_their_first_and_last_cells() -> None:
    view = Tensor.arange(10**6).reshape([1000, 1000]).transpose(0, 1)
    d = build([view])
    panel, strip = d.panels[0], d.strips[0]
    assert panel.summarised and panel.omitted == 10**6 - 12
    assert [c.offset for c in panel.cells[:3]] == [0, 1000, 2000]
    assert panel.cells[-1].offset == 999999
    assert panel.steps == ()
    assert len(strip.slots) < 2 * STRIP_LIMIT
    assert {s.status for s in strip.slots} <= {"read", "undrawn", "elided"}
    assert sum(s.elided for s in strip.slots) + sum(s.offset is not None for s in strip.slots) == (
        10**6
    )


def test_cursor_steps_follow_logical_offsets_and_say_the_carry() -> None:
    view = seed_fixture().view().slice(1, 1, 3)
    steps = cursor_steps(view)
    assert [s.offset for s in steps] == list(view.logical_offsets())
    assert steps[0].carry == "start at the base offset 1"
    assert steps[2].carry == (
        "column 1→0 wraps (−1), carry into row 0→1 (+3): offset 2 − 1 + 3 = 4"
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda t: t.view().flip(1),
        lambda t: t.view().expand([2, 2, 3]),
        lambda t: t.view().transpose(0, 1),
        lambda t: t.view().slice(1, 0, 3, 2),
    ],
)
def test_the_carry_arithmetic_in_words_equals_the_cursor(make) -> None:
    view = make(seed_fixture())
    for step in cursor_steps(view)[1:]:
        words = step.carry.split(": offset ", 1)[1]
        expression, result = words.split(" = ")
        tokens = expression.replace("−", "-").split()
        total = int(tokens[0])
        for sign, number in zip(tokens[1::2], tokens[2::2]):
            total += int(number) if sign == "+" else -int(number)
        assert total == int(result) == step.offset


def test_formula_and_jumps_words() -> None:
    assert formula(1, (1, 0), (3, 1), 4) == "1 + 1·3 + 0·1 = 4"
    assert formula(2, (1,), (-1,), 1) == "2 + 1·(-1) = 1"
    assert jumps_text((), ()) == "one value, no strides"
    assert jumps_text((4,), (2,)) == "+2 per step"
    assert jumps_text((2, 3), (-3, 1)) == "-3 per row, +1 per column"


def test_offsets_agree_with_layout_for_every_cell() -> None:
    view = Tensor.arange(60).reshape([3, 4, 5]).permute([2, 0, 1]).slice(0, 1, 4)
    for cell in build([view]).panels[0].cells:
        expected = layout.storage_offset(
            view.shape, view.strides, view.base_offset, cell.coordinate
        )
        assert cell.offset == expected


def test_the_text_form_is_deterministic_and_shows_cells_in_their_shape() -> None:
    first, second = repr(reshape_vs_transpose()), repr(reshape_vs_transpose())
    assert first == second
    assert "  [0, 0] 10 → 0 | [0, 1] 20 → 3" in first
    assert "jumps: +1 per row, +3 per column" in first
    text = repr(slice_copy_and_refusal())
    assert "offset 3 is skipped: not contiguous" in text
    assert "copied from base: new offset←source offset 0←1, 1←2, 2←4, 3←5" in text
    assert "× sliced.reshape([4])  rejected (NonContiguousReshapeError)" in text


def test_bad_items_are_course_errors() -> None:
    with pytest.raises(CourseError, match="draw a TensorView"):
        build([42])  # type: ignore[list-item]
    with pytest.raises(CourseError, match="no cell"):
        reshape_vs_transpose().cell("p9c0")


def test_empty_views_and_scalars_are_drawn_in_words() -> None:
    empty = build([Tensor.zeros([0, 3])])
    assert empty.panels[0].cells == () and empty.read_lines() == ()
    assert empty.panels[0].notes[0].startswith("no values")
    scalar = build([Tensor.arange(6).view().slice(0, 2, 3).reshape([])])
    [cell] = scalar.panels[0].cells
    assert (cell.coordinate, cell.offset, cell.formula) == ((), 2, "2 = 2")
