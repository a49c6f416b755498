"""The misconception catalogue: a typical wrong answer produces its message."""

from __future__ import annotations

from pathlib import Path

from exercisekit import RIGHT, seed_fixture

from llmfs.course.exercises.api import check, predict
from llmfs.course.exercises.judge import compare
from llmfs.course.exercises.misconceptions import MISCONCEPTIONS
from llmfs.course.exercises.run import run


def _wrong(expression: str, scope: dict, **fields: object) -> dict[str, tuple[str, ...]]:
    verdicts = compare(fields, run(expression, scope))
    assert all(v.status == "wrong" for v in verdicts), [(v.field, v.status) for v in verdicts]
    return {v.field: v.mistakes for v in verdicts}


def _says(messages: tuple[str, ...], text: str) -> bool:
    return any(text in message for message in messages)


def test_row_major_strides_for_a_transpose_or_permute() -> None:
    scope = {"base": seed_fixture()}
    found = _wrong("base.transpose(0, 1)", scope, strides=[2, 1])
    assert _says(found["strides"], "row-major strides of the result's shape, what a reshape")
    from llmfs.tensor import Tensor

    cube = {"cube": Tensor.from_vec([2, 3, 4], list(range(24)))}
    found = _wrong("cube.permute([2, 0, 1])", cube, strides=[6, 3, 1])
    assert _says(found["strides"], "a transpose or permute keeps each axis's own stride")


def test_the_reshape_offsets_given_for_a_transpose() -> None:
    found = _wrong("base.transpose(0, 1)", {"base": seed_fixture()}, offsets=[0, 1, 2, 3, 4, 5])
    assert _says(found["offsets"], "the offsets in the source's own order")


def test_the_base_offset_without_start_times_stride() -> None:
    scope = {"base": seed_fixture()}
    found = _wrong("base.slice(0, 1, 2)", scope, base_offset=1)
    assert _says(found["base_offset"], "moves by start × stride along the sliced axis")
    from llmfs.tensor import Tensor

    x = {"x": Tensor.from_vec([2, 3, 4], list(range(24)))}
    assert _says(_wrong("x[1]", x, base_offset=1)["base_offset"], "not by the start index alone")


def test_a_slice_treated_as_contiguous() -> None:
    scope = {"base": seed_fixture()}
    found = _wrong(
        "base.slice(1, 1, 3)", scope, strides=[2, 1], offsets=[1, 2, 3, 4], contiguous=True
    )
    assert _says(found["strides"], "as if the slice were a contiguous block")
    assert _says(found["offsets"], "one gap-free run, as if the slice were contiguous")
    assert _says(found["contiguous"], "leaves gaps between its rows")


def test_floor_instead_of_ceil_for_a_step() -> None:
    from llmfs.tensor import Tensor

    row = {"row": Tensor.arange(10)}
    found = _wrong("row.slice(0, 0, 10, 3)", row, shape=[3])
    assert _says(found["shape"], "the size is ceil((stop - start) / step)")


def test_the_shape_given_where_strides_are_asked() -> None:
    found = _wrong("base.reshape([3, 2])", {"base": seed_fixture()}, strides=[3, 2])
    assert _says(found["strides"], "That is the shape")


def test_a_count_mismatch_across_fields() -> None:
    scope = {"base": seed_fixture()}
    found = _wrong("base.reshape([3, 2])", scope, shape=[2, 2], offsets=[0, 1, 2, 3, 4])
    assert _says(found["offsets"], "5 entries for the shape you predicted, which holds 4")
    found = _wrong("base.view()", scope, offsets=[0, 1, 2, 3])
    assert _says(found["offsets"], "4 entries for the result's shape, which holds 6")


def test_offsets_given_for_values() -> None:
    from llmfs.tensor import Tensor

    x = {"x": Tensor.from_vec([2, 2], [100, 101, 102, 103])}
    assert _says(_wrong("x.view()", x, values=[0, 1, 2, 3])["values"], "the storage offsets")


def test_every_misconception_of_the_per_request_wording_is_tested_above() -> None:
    # The general detectors are tested one by one in test_detectors.py.
    tested = {
        "row-major strides for a transpose or permute",
        "reshape offsets for a transpose",
        "base offset without start*stride",
        "slice treated as contiguous (strides)",
        "slice treated as contiguous (offsets)",
        "slice treated as contiguous",
        "floor instead of ceil for a step",
        "shape given for strides",
        "count mismatch across fields",
        "offsets given for values",
    }
    assert tested <= {m.name for m in MISCONCEPTIONS}


def test_an_exercise_can_declare_its_own_expected_mistakes(attempts_log: Path) -> None:
    prediction = predict(
        "base.transpose(0, 1)", exercise_id="ch02.q1", **{**RIGHT, "offsets": [0, 1, 2, 3, 4, 5]}
    )
    text = repr(check(prediction, {"base": seed_fixture()}))
    assert "Course-specific: that is the source's walk." in text
