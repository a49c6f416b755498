"""The table model: trace rows, owner names, mappings, rejections and sampling."""

from __future__ import annotations

import subprocess
import sys

import pytest

from llmfs.course import CourseError
from llmfs.tensor import NonContiguousReshapeError, Tensor, copying_transpose
from llmfs.widgets import ExpressionError, Step, Trace, offset_entries, trace
from llmfs.widgets.examples import SEED_OPERATIONS, seed_fixture, seed_trace
from llmfs.widgets.model import OwnerNames, Sampled, evaluate


def row_by_label(table: Trace, label: str):
    return next(row for row in table.rows if row.label == label)


def test_the_seed_trace_has_one_row_per_operation_in_order() -> None:
    table = seed_trace()
    assert [row.label for row in table.rows] == list(SEED_OPERATIONS)
    assert [row.status for row in table.rows] == ["shared"] * 4 + ["copy"] + ["rejected"] * 3


def test_views_name_the_owner_base_and_the_materialized_slice_names_a_new_owner() -> None:
    table = seed_trace()
    assert [row.owner for row in table.rows[:5]] == ["base", "base", "base", "base", "copy 1"]
    assert [row.marker for row in table.rows] == ["◇"] * 4 + ["◆"] + ["×"] * 3
    assert [row.new_owner for row in table.rows[:5]] == [False] * 4 + [True]


def test_reshape_and_transpose_share_a_shape_but_not_the_offsets() -> None:
    table = seed_trace()
    reshaped = row_by_label(table, "view.reshape([3, 2])")
    transposed = row_by_label(table, "transposed = view.transpose(0, 1)")
    assert reshaped.shape == transposed.shape == (3, 2)
    assert reshaped.strides == (2, 1) and transposed.strides == (1, 3)
    assert reshaped.offsets.items() == (0, 1, 2, 3, 4, 5)
    assert transposed.offsets.items() == (0, 3, 1, 4, 2, 5)
    assert reshaped.nested_values == [[10, 11], [12, 20], [21, 22]]
    assert transposed.nested_values == [[10, 20], [11, 21], [12, 22]]
    assert (reshaped.contiguous, transposed.contiguous) == (True, False)


def test_the_slice_moves_the_base_offset_and_skips_offset_3() -> None:
    sliced = row_by_label(seed_trace(), "sliced = view.slice(1, 1, 3)")
    assert (sliced.shape, sliced.strides, sliced.base_offset) == ((2, 2), (3, 1), 1)
    assert sliced.offsets.items() == (1, 2, 4, 5)
    assert sliced.contiguous is False


def test_the_copy_maps_new_offsets_0_to_3_to_source_offsets_1_2_4_5() -> None:
    table = seed_trace()
    copy = row_by_label(table, "sliced.materialize()")
    assert (copy.shape, copy.strides, copy.base_offset, copy.contiguous) == (
        (2, 2),
        (2, 1),
        0,
        True,
    )
    assert copy.offsets.items() == (0, 1, 2, 3)
    assert copy.mapping.items() == ((0, 1), (1, 2), (2, 4), (3, 5))
    assert copy.mapping_source == "base"
    assert table.copies == (copy,)


def test_the_three_rejected_requests_name_their_violated_conditions() -> None:
    rejected = [row for row in seed_trace().rows if row.rejected]
    assert [(row.error, row.condition) for row in rejected] == [
        ("ReshapeElementCountMismatchError", "element counts match"),
        ("NonContiguousReshapeError", "reshape without copying"),
        ("SliceEndOutOfBoundsError", "end <= size"),
    ]
    assert all(row.shape is None and row.offsets is None for row in rejected)
    assert "[4, 2]" in rejected[0].message


def test_a_trace_built_from_steps_matches_the_expression_trace() -> None:
    base = seed_fixture()
    view = base.view()
    sliced = view.slice(1, 1, 3)
    try:
        view.transpose(0, 1).reshape([2, 3])
    except NonContiguousReshapeError as error:
        refusal = error
    table = Trace.from_steps(
        [
            ("view", view),
            Step("copy", sliced.materialize(), copied_from=sliced),
            ("refused", refusal),
        ],
        owners={"base": base},
    )
    assert [row.status for row in table.rows] == ["shared", "copy", "rejected"]
    assert table.rows[1].mapping.items() == ((0, 1), (1, 2), (2, 4), (3, 5))


def test_owner_names_follow_first_appearance_never_addresses() -> None:
    base = seed_fixture()
    names = OwnerNames({"base": base})
    first, second = base.view().materialize(), base.view().materialize()
    assert names.name(base) == ("base", False)
    assert names.name(second) == ("copy 1", True)
    assert names.name(first) == ("copy 2", True)
    assert names.name(second) == ("copy 1", False)
    assert "0x" not in repr(seed_trace())


def test_a_view_of_a_copy_reads_shared_storage_of_that_copy() -> None:
    table = trace(seed_fixture(), ["m = base.slice(1, 1, 3).materialize()", "m.reshape([4])"])
    assert [(row.owner, row.status) for row in table.rows] == [
        ("copy 1", "copy"),
        ("copy 1", "shared"),
    ]


def test_copying_transpose_maps_each_new_offset_to_its_source_column() -> None:
    table = trace(seed_fixture(), ["copying_transpose(base)"])
    assert table.rows[0].mapping.items() == ((0, 0), (1, 3), (2, 1), (3, 4), (4, 2), (5, 5))
    assert table.rows[0].nested_values == copying_transpose(seed_fixture()).tolist()


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("base.reshap([3, 2])", "AttributeError"),
        ("nothing.view()", "NameError"),
        ("base.reshape([3, 2]", "cannot read"),
        ("len(base)", "gave a int"),
        ("import os", "give an expression"),
    ],
)
def test_python_mistakes_in_expressions_are_expression_errors(expression, message) -> None:
    with pytest.raises(ExpressionError, match=message):
        trace(seed_fixture(), [expression])


def test_assignments_bind_names_for_later_operations() -> None:
    scope = {"base": seed_fixture()}
    name, result, copied = evaluate("t = base.transpose(0, 1)", scope)
    assert name == "t" and scope["t"] is result and copied is None


def test_large_views_are_sampled_not_walked() -> None:
    big = Tensor.arange(10**6).reshape([1000, 1000]).transpose(0, 1)
    entries = offset_entries(big)
    assert entries.total == 10**6 and entries.omitted == 10**6 - 12
    assert [e.offset for e in entries.head[:3]] == [0, 1000, 2000]
    assert entries.tail[-1].coordinate == (999, 999) and entries.tail[-1].offset == 999_999
    with pytest.raises(CourseError, match="only 12 of 1000000"):
        entries.items()


def test_sampled_sequences_report_what_they_left_out() -> None:
    assert Sampled((1, 2), (), 2).complete
    assert Sampled((1,), (9,), 10).omitted == 8


def test_scalars_and_empty_views_have_one_and_zero_offsets() -> None:
    table = trace(Tensor.from_vec([], [7.0]), ["base.view()"])
    assert table.rows[0].offsets.items() == (0,) and table.rows[0].nested_values == 7.0
    empty = trace(Tensor.from_vec([2, 0, 3], []), ["base.view()"])
    assert empty.rows[0].offsets.items() == () and empty.rows[0].contiguous is True


def test_importing_the_package_imports_neither_ipywidgets_nor_matplotlib() -> None:
    code = (
        "import sys, llmfs.widgets, llmfs.demo\n"
        "llmfs.widgets.trace(llmfs.widgets.examples.seed_fixture(), ['base.view()'])\n"
        "print(sorted(m for m in ('ipywidgets', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_operations_may_be_labelled_callables() -> None:
    base = seed_fixture()
    table = trace(
        base,
        [("transpose", lambda: base.transpose(0, 1)), ("too long", lambda: base.slice(1, 0, 9))],
    )
    assert [(row.label, row.status) for row in table.rows] == [
        ("transpose", "shared"),
        ("too long", "rejected"),
    ]
    with pytest.raises(ExpressionError, match="expression string or a \\(label, callable\\)"):
        trace(base, [42])  # type: ignore[list-item]


def test_unnamed_owner_never_displaces_a_variable_named_base() -> None:
    from llmfs.widgets.model import owners_in

    base = Tensor.from_vec([2], [1, 2])
    other = Tensor.from_vec([2], [3, 4])
    names = owners_in({"base": base, "v": other.view()})
    assert names["base"] is base
    assert names["base 2"] is other
