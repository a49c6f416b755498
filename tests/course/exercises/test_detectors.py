"""The general misconception detectors, one by one: each fires on its misconception, and stays
silent on the right answer and on an unrelated wrong answer. Then the "raises X" predictions of a
tensor field, and the request a detector reads."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmfs.course.exercises import detectors as d
from llmfs.course.exercises import op_detectors as od
from llmfs.course.exercises.entries import normalize
from llmfs.course.exercises.judge import compare
from llmfs.course.exercises.misconceptions import MISCONCEPTIONS, Context, predicted_raise
from llmfs.course.exercises.run import run
from llmfs.tensor import Tensor, einsum, ops, reduce


def _names() -> dict[str, Any]:
    base = Tensor.from_vec([2, 3], [10, 11, 12, 20, 21, 22])
    owner = Tensor.from_vec([2], [10.0, 20.0])
    stale = owner.view()
    owner.as_mut_slice()[0] = 99.0
    weights = [1, 0, 0, 0.25, 0.75, 0, 0.2, 0.3, 0.5]
    return {
        "Tensor": Tensor,
        "ops": ops,
        "einsum": einsum,
        "reduce": reduce,
        "base": base,
        "view": base.view(),
        "cube": Tensor.from_vec([2, 3, 4], [100 + k for k in range(24)]),
        "t2": Tensor.from_vec([3, 20], [100 + k for k in range(60)]),
        "grid": Tensor.from_vec([2, 3], [100 + k for k in range(6)]),
        "row": Tensor.from_vec([10], [100 + k for k in range(10)]),
        "b": Tensor.from_vec([3], [1, 2, 3]),
        "packed": Tensor.zeros([1, 6, 4, 16]),
        "stale": stale,
        "weights": Tensor.from_vec([3, 3], weights),
    }


@dataclass(frozen=True)
class Case:
    """``detector`` fires on ``wrong`` for ``field`` of ``expression`` (its message contains
    ``says``) and is silent on the truth and on ``unrelated`` (``None``: a field with two
    values has no unrelated wrong answer)."""

    detector: str
    expression: str
    field: str
    wrong: Any
    unrelated: Any
    says: str


THIRD = 1 / 3
CASES = (
    Case("reversed_order", "Tensor.zeros([2, 3, 4])", "strides", [1, 4, 12], [12, 4, 2], "reverse"),
    Case("column_major", "Tensor.zeros([2, 3, 4])", "strides", [1, 2, 6], [12, 4, 2], "Fortran"),
    Case("inverse_permutation", "cube.permute([2, 0, 1])", "shape", [3, 4, 2], [4, 3, 2], "back"),
    Case(
        "inverse_permutation", "cube.permute([2, 0, 1])", "strides", [4, 1, 12], [1, 1, 1], "back"
    ),
    Case("kept_source_layout", "view.transpose(0, 1)", "strides", [3, 1], [5, 1], "own entries"),
    Case("dims_for_strides", "cube.permute([2, 0, 1])", "strides", [2, 0, 1], [5, 5, 5], "numbers"),
    Case("transpose_for_reshape", "view.reshape([3, 2])", "strides", [1, 3], [3, 3], "transpose"),
    Case(
        "transpose_for_reshape",
        "view.reshape([3, 2])",
        "offsets",
        [0, 3, 1, 4, 2, 5],
        [0, 1, 2, 3, 4, 6],
        "order in which the values are walked",
    ),
    Case(
        "view_as_new_owner",
        "view.transpose(0, 1).reshape([3, 2])",
        "strides",
        [2, 1],
        [5, 5],
        "a view of its source's storage",
    ),
    Case(
        "copy_keeps_source",
        "view.transpose(0, 1).materialize()",
        "strides",
        [1, 3],
        [4, 4],
        "storage of its own",
    ),
    Case(
        "new_owner_walk",
        "view.transpose(0, 1).materialize()",
        "offsets",
        [1, 0, 2, 3, 4, 5],
        [0, 1, 2, 3, 4, 9],
        "row-major",
    ),
    Case("owner_kind", "view.transpose(0, 1)", "owner", "new", None, "shares"),
    Case("owner_kind", "ops.add(base, b)", "owner", "shared", None, "new owner"),
    Case("contiguity", "view.transpose(0, 1)", "contiguous", True, None, "does not make"),
    Case("contiguity", "Tensor.zeros([2, 3])", "contiguous", False, None, "gap-free"),
    Case("scalar_axes", "Tensor.from_vec([], [7.0])", "shape", [1], [2], "no axes"),
    Case("zero_size_products", "Tensor.zeros([2, 0, 3])", "strides", [0, 3, 1], [5, 5, 5], "as 1"),
    Case("expand_zero_stride", "b.view().expand([2, 3])", "strides", [1, 1], [0, 2], "stride 0"),
    Case(
        "head_axis_order",
        "packed.permute([0, 2, 1, 3])",
        "shape",
        [1, 6, 4, 16],
        [1, 4, 6, 15],
        "heads",
    ),
    Case("merge_outer_stride", "cube.view().merge(1, 2)", "strides", [12, 4], [12, 2], "INNER"),
    Case(
        "split_column_major",
        "t2.view().split(1, [4, 5])",
        "strides",
        [20, 1, 4],
        [20, 5, 2],
        "LAST",
    ),
    Case("flip_keeps_direction", "grid.view().flip(1)", "strides", [3, 1], [3, -2], "backwards"),
    Case("flip_keeps_direction", "grid.view().flip(1)", "base_offset", 0, 5, "LAST index"),
    Case("index_without_strides", "cube[1, 2, 3]", "base_offset", 6, 7, "index × stride"),
    Case("slice_base_offset_zero", "view.slice(1, 1, 3)", "base_offset", 0, 2, "first kept"),
    Case("slice_end_off_by_one", "row.slice(0, 2, 7)", "shape", [6], [8], "stop itself"),
    Case(
        "slice_end_off_by_one",
        "row.slice(0, 2, 7)",
        "offsets",
        [2, 3, 4, 5, 6, 7],
        [2, 4, 6],
        "stop itself",
    ),
    Case("wrong_axis", "ops.sum(base, axis=0)", "values", [33, 63], [1, 2, 3], "another axis"),
    Case("keepdims_flipped", "ops.sum(base, axis=0)", "shape", [1, 3], [4], "keepdims"),
    Case(
        "keepdims_flipped",
        "ops.sum(base, axis=1)",
        "values",
        [[33], [63]],
        [[1], [2]],
        "disappears",
    ),
    Case("reduce_kept_labels", 'reduce(base, "ij", "i")', "shape", [3], [7], "modes_out"),
    Case(
        "broadcast_from_left",
        "ops.add(base, b)",
        "error",
        "BroadcastError",
        "StaleViewError",
        "RIGHT",
    ),
    Case(
        "broadcast_from_left",
        "ops.add(Tensor.zeros([3, 1, 2]), Tensor.zeros([3, 1]))",
        "shape",
        [3, 1, 2],
        [9, 9, 9],
        "RIGHT",
    ),
    Case(
        "uniform_attention",
        "weights.view()",
        "values",
        [[1, 0, 0], [0.5, 0.5, 0], [THIRD, THIRD, THIRD]],
        [[0, 0, 1], [0, 1, 0], [1, 0, 0]],
        "exp(score)",
    ),
    Case(
        "uniform_attention",
        "weights.view()",
        "values",
        [[THIRD] * 3] * 3,
        [[0, 0, 1], [0, 1, 0], [1, 0, 0]],
        "weight 0",
    ),
    Case(
        "base_class", "cube.view().get([0, 3, 0])", "error", "IndexError", "StaleViewError", "base"
    ),
    Case(
        "foreign_error", "cube.view().get([0, 3, 0])", "error", "TypeError", "BroadcastError", "own"
    ),
    Case("refused_request", "stale[0]", "error", "none", "BroadcastError", "stale"),
    Case("refused_request", "cube.view().get([0, 3, 0])", "error", "none", "TypeError", "outside"),
    Case(
        "wrong_refusal",
        "view.transpose(0, 1).reshape([3, 2])",
        "error",
        "NonContiguousReshapeError",
        "IndexError",
        "not the whole view's contiguity",
    ),
    Case(
        "wrong_refusal",
        "cube.view().get([0, 3, 0])",
        "error",
        "StaleViewError",
        "IndexError",
        "StaleViewError is raised when a view is used after its owner was mutated",
    ),
)


def _detector(name: str) -> Any:
    return getattr(d, name, None) or getattr(od, name)


def _case_id(case: Case) -> str:
    return f"{case.detector}-{case.field}-{case.wrong!r}"[:70]


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_each_detector_fires_on_its_misconception_only(case: Case) -> None:
    detect = _detector(case.detector)
    outcome = run(case.expression, _names())
    truth = outcome.truth(case.field)
    context = Context(outcome, {})

    def read(value: Any) -> Any:
        return normalize(case.field, value)

    message = detect(read(case.wrong), truth, context)
    assert message is not None and case.says in message, message
    assert detect(truth, truth, context) is None
    if case.unrelated is not None:
        assert detect(read(case.unrelated), truth, context) is None
    # and the judge shows the message for that wrong answer
    (verdict,) = compare({case.field: case.wrong}, outcome)
    assert verdict.status == "wrong" and message in verdict.mistakes


#: Detectors of numbers and of plain results (a dict of values, no traced request): each case's
#: expression gives a dict, and ``field`` is one of its keys.
PLAIN_CASES: tuple[Case, ...] = (
    Case("other_log_base", '{"loss": round(math.log(12), 2)}', "loss", 1.08, 1.24, "base"),
    Case("other_log_base", '{"loss": round(math.log(12), 2)}', "loss", 3.58, 2.5, "natural"),
    Case("flipped_sign", '{"loss": round(math.log(12), 2)}', "loss", -2.48, -1.0, "sign"),
    Case("flipped_sign", '{"offset": 2}', "offset", -2, -3, "sign"),
    Case("counted_several_times", '{"reads": 16}', "reads", 32, 24, "multiple"),
    Case("counted_several_times", '{"reads": 16}', "reads", 8, 12, "fraction"),
    Case("counted_several_times", '{"loss": 2.48}', "loss", 7.45, 7.0, "mean"),
    Case("float32_spacing", '{"stored": 16777216.0}', "stored", 16777216.5, 16777218.0, "2 or"),
    Case("probability_for_loss", '{"loss": 2.48}', "loss", 0.5, 1.5, "probability"),
    Case(
        "gradient_shape",
        '{"grad": [[1, 1], [1, 1]]}',
        "grad",
        [1, 1, 1, 1],
        [[1, 2], [3, 4]],
        "shape of the tensor",
    ),
    Case("gradient_shape_named", '{"grad_shape": [2, 3]}', "grad_shape", [3, 2], None, "own shape"),
    Case("neighbouring_cells", '{"cells": [1, 4, 7]}', "cells", [1, 2, 3], [1, 4, 8], "stride"),
)


@pytest.mark.parametrize("case", PLAIN_CASES, ids=_case_id)
def test_each_number_and_plain_detector_fires_on_its_misconception_only(case: Case) -> None:
    detect = _detector(case.detector)
    outcome = run(case.expression, {"math": math}, plain=True)
    truth = outcome.truth(case.field)
    context = Context(outcome, {})
    message = detect(case.wrong, truth, context)
    assert message is not None and case.says in message, message
    assert detect(truth, truth, context) is None
    if case.unrelated is not None:
        assert detect(case.unrelated, truth, context) is None
    (verdict,) = compare({case.field: case.wrong}, outcome)
    assert verdict.status == "wrong" and message in verdict.mistakes


def test_a_product_shape_and_scaled_values_are_named() -> None:
    a = Tensor.from_vec([2, 3], [1, 2, 3, 4, 5, 6])
    b = Tensor.from_vec([3, 2], [1, 0, 0, 1, 1, 1])
    product = run('einsum("ik,kj->ij", a, b)', {"einsum": einsum, "a": a, "b": b})
    context = Context(product, {})
    assert "one operand" in (d.product_keeps_operand_shape((2, 3), (2, 2), context) or "")
    assert d.product_keeps_operand_shape((3, 3), (2, 2), context) is None
    summed = run("ops.sum(base, axis=0)", _names())
    truth = summed.truth("values")
    assert "mean where" in (d.scaled_values([15, 16, 17], truth, Context(summed, {})) or "")
    assert "sum where" in (d.scaled_values([60, 64, 68], truth, Context(summed, {})) or "")
    assert d.scaled_values([15, 16, 18], truth, Context(summed, {})) is None


def test_every_general_detector_of_the_catalogue_has_a_case() -> None:
    modules = {d.__name__, od.__name__}
    general = {m.detect.__name__ for m in MISCONCEPTIONS if m.detect.__module__ in modules}
    covered = {case.detector for case in (*CASES, *PLAIN_CASES)}
    assert general == covered | {"product_keeps_operand_shape", "scaled_values"}


def test_no_detector_message_states_a_number_of_the_truth() -> None:
    """The messages name rules: none contains a number of the answer it explains (the probe
    tests check the same against the course's exercises with the hints' answer search)."""
    for case in CASES:
        outcome = run(case.expression, _names())
        truth = outcome.truth(case.field)
        message = _detector(case.detector)(
            normalize(case.field, case.wrong), truth, Context(outcome, {})
        )
        numbers = {
            str(int(n)) for n in _leaves(truth) if isinstance(n, (int, float)) and abs(n) >= 2
        }
        stated = [n for n in numbers if f" {n} " in f" {message} "]
        assert not stated, (case.detector, message)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value] if isinstance(value, (int, float)) and math.isfinite(value) else []


# -- predicting that a request raises ---------------------------------------------------------

BROADCAST = "ops.add(Tensor.zeros([2, 3]), Tensor.zeros([2]))"  # raises: 3 meets 2


def _verdicts(expression: str, **fields: Any) -> dict[str, Any]:
    return {v.field: v for v in compare(fields, run(expression, _names()))}


def test_a_tensor_field_may_be_predicted_as_the_error_the_request_raises() -> None:
    found = _verdicts(BROADCAST, shape="raises BroadcastError", error="BroadcastError")
    assert found["shape"].status == "right" and found["shape"].predicted == "raises BroadcastError"
    assert found["error"].status == "right"
    assert _verdicts(BROADCAST, shape="raises")["shape"].status == "right"
    assert _verdicts(BROADCAST, shape="broadcast error")["shape"].status == "unreadable"
    assert _verdicts(BROADCAST, strides="error: broadcast")["strides"].status == "right"


def test_a_blank_field_stands_for_the_error_field_when_that_names_an_error() -> None:
    found = _verdicts(BROADCAST, shape=None, error="BroadcastError")
    assert found["shape"].status == "right" and found["shape"].predicted == "raises BroadcastError"
    # it succeeds: the blank shape is wrong, and only the error field explains why
    found = _verdicts(
        "ops.add(Tensor.zeros([3, 1, 2]), Tensor.zeros([3, 1]))", shape=None, error="BroadcastError"
    )
    assert found["shape"].status == "wrong" and not found["shape"].mistakes
    assert found["error"].status == "wrong" and found["error"].mistakes
    assert _verdicts(BROADCAST, shape=None, error="none")["shape"].status == "unanswered"
    assert _verdicts(BROADCAST, shape=None)["shape"].status == "unanswered"


def test_a_raise_predicted_in_a_tensor_field_is_explained_as_an_error_prediction() -> None:
    found = _verdicts("cube.view().get([0, 3, 0])", values="raises IndexError")
    assert found["values"].status == "wrong"
    assert "IndexError is its base class: name the llmfs class." in found["values"].mistakes
    succeeds = _verdicts("view.reshape([3, 2])", shape="raises NonContiguousReshapeError")
    assert succeeds["shape"].status == "wrong" and succeeds["shape"].mistakes
    assert _verdicts("view.reshape([3, 2])", shape="raises")["shape"].status == "wrong"


@given(st.text(max_size=40))
def test_reading_a_raise_never_fails_and_numbers_are_never_a_raise(text: str) -> None:
    found = predicted_raise(text)
    assert found is None or isinstance(found, str)
    assert predicted_raise(text, error=text) is None or isinstance(predicted_raise(text), str)


@given(st.lists(st.integers(-5, 50), max_size=5))
def test_a_list_of_numbers_is_a_value_not_a_raise(values: list[int]) -> None:
    assert predicted_raise(values) is None
    assert predicted_raise(str(values)) is None
    assert predicted_raise(", ".join(map(str, values))) is None


# -- what a detector may read of the request --------------------------------------------------


class Counter:
    """A receiver whose method has an effect: a detector must never make it run again."""

    def __init__(self) -> None:
        self.calls = 0
        self.tensor = Tensor.zeros([2, 3])

    def bump(self) -> Tensor:
        self.calls += 1
        return self.tensor


def test_only_side_effect_free_receivers_and_operands_are_evaluated_again() -> None:
    counter = Counter()
    outcome = run("counter.bump().view().transpose(0, 1)", {"counter": counter})
    assert counter.calls == 1 and outcome.call is not None and outcome.call.source is None
    outcome = run("ops.sum(counter.bump(), axis=0)", {"counter": counter, "ops": ops})
    assert counter.calls == 2 and outcome.call is not None and outcome.call.operands == (None,)
    outcome = run("ops.sum(view.transpose(0, 1), axis=0, keepdims=True)", _names())
    assert outcome.call is not None
    (operand,) = outcome.call.operands
    assert operand is not None and list(operand.shape) == [3, 2]
    assert dict(outcome.call.keywords) == {"axis": 0, "keepdims": True}
    outcome = run('reduce(base, "ij", "i")', _names())
    assert outcome.call is not None and outcome.call.method == "reduce"
    assert outcome.call.source is None and outcome.call.operands[0] is not None
