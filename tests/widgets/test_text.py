# ruff: noqa: E501  (the expected tables are wider than a code line)
"""The text renderer: the fixed-width tables notebook validation compares."""

from __future__ import annotations

from llmfs.tensor import Tensor
from llmfs.widgets import offset_table, trace
from llmfs.widgets.examples import seed_fixture, seed_trace

SEED_TABLE = """\
Shared-storage views and explicit copies
step                               owner       shape   strides  base offset  contiguous  offsets             values
---------------------------------  ----------  ------  -------  -----------  ----------  ------------------  ------------------------------
view = base.view()                 ◇ base      [2, 3]  [3, 1]   0            Yes         [0, 1, 2, 3, 4, 5]  [[10, 11, 12], [20, 21, 22]]
view.reshape([3, 2])               ◇ base      [3, 2]  [2, 1]   0            Yes         [0, 1, 2, 3, 4, 5]  [[10, 11], [12, 20], [21, 22]]
transposed = view.transpose(0, 1)  ◇ base      [3, 2]  [1, 3]   0            No          [0, 3, 1, 4, 2, 5]  [[10, 20], [11, 21], [12, 22]]
sliced = view.slice(1, 1, 3)       ◇ base      [2, 2]  [3, 1]   1            No          [1, 2, 4, 5]        [[11, 12], [21, 22]]
sliced.materialize()               ◆ copy 1    [2, 2]  [2, 1]   0            Yes         [0, 1, 2, 3]        [[11, 12], [21, 22]]
view.reshape([4, 2])               × rejected  violated: element counts match (ReshapeElementCountMismatchError)
transposed.reshape([2, 3])         × rejected  violated: reshape without copying (NonContiguousReshapeError)
view.slice(1, 1, 4)                × rejected  violated: end <= size (SliceEndOutOfBoundsError)
◇ reads the storage of an existing owner   ◆ new owner (a copy)   × rejected request

mapping ◆ copy 1 <- ◇ base  (sliced.materialize())
new offset in copy 1  source offset in base
--------------------  ---------------------
0                     1
1                     2
2                     4
3                     5
new offsets [0, 1, 2, 3] -> source offsets [1, 2, 4, 5]"""

TRANSPOSE_OFFSETS = """\
shape [3, 2], strides [1, 3], base offset 0, contiguous No, owner base
coordinate  offset  value
----------  ------  -----
[0, 0]      0       10
[0, 1]      3       20
[1, 0]      1       11
[1, 1]      4       21
[2, 0]      2       12
[2, 1]      5       22
storage of base   0   1   2   3   4   5
----------------  --  --  --  --  --  --
value             10  11  12  20  21  22
read by position  0   2   4   1   3   5"""


def test_the_seed_trace_table_prints_exactly() -> None:
    assert repr(seed_trace()) == SEED_TABLE


def test_the_text_is_deterministic_and_has_no_trailing_spaces() -> None:
    first, second = repr(seed_trace()), repr(seed_trace())
    assert first == second
    assert all(line == line.rstrip() for line in first.splitlines())


def test_the_offset_table_lists_coordinate_offset_value_and_the_storage_strip() -> None:
    assert offset_table(seed_fixture().transpose(0, 1)) == TRANSPOSE_OFFSETS


def test_the_strip_marks_storage_the_view_skips() -> None:
    text = offset_table(seed_fixture().slice(1, 1, 3))
    assert text.splitlines()[-1].split() == ["read", "by", "position", "·", "0", "1", "·", "2", "3"]


def test_a_large_view_shows_its_first_and_last_rows_and_a_count() -> None:
    big = Tensor.arange(10**6).reshape([1000, 1000])
    text = offset_table(big)
    lines = text.splitlines()
    assert lines[3].split() == ["[0,", "0]", "0", "0"]
    assert "… 999988 more …" in text
    assert "[999, 999]" in lines[-2]
    assert lines[-1] == "storage of base: 1000000 values (strip shown up to 24)"
    assert len(lines) < 25


def test_a_large_trace_row_elides_offsets_and_values_in_its_cells() -> None:
    table = trace(Tensor.arange(1000), ["base.reshape([10, 100]).transpose(0, 1)"])
    row_line = repr(table).splitlines()[2]
    assert "[0, 100, 200, 300, … 994 more …, 899, 999]" in row_line
    assert "(1000 values)" in row_line
    assert len(row_line) < 200


def test_floats_print_as_learners_write_them() -> None:
    table = trace(Tensor.from_vec([3], [0.5, -2.0, float("nan")]), ["base.view()"])
    assert "[0.5, -2, nan]" in repr(table)
