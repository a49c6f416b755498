"""Running an exercise's expression: a refusal is an outcome, owners are shared or new."""

from __future__ import annotations

from exercisekit import seed_fixture

from llmfs.course.exercises.judge import compare
from llmfs.course.exercises.run import run


def test_a_rejected_request_is_an_outcome_to_predict() -> None:
    outcome = run("base.transpose(0, 1).reshape([2, 3])", {"base": seed_fixture()})
    right = compare({"error": "NonContiguousReshapeError", "shape": "2,3"}, outcome)
    assert [(v.field, v.status) for v in right] == [("shape", "wrong"), ("error", "right")]
    assert right[0].truth == "— (rejected)"
    for spelling in ("NonContiguousReshape", "noncontiguousreshapeerror"):
        assert compare({"error": spelling}, outcome)[0].status == "right"
    assert compare({"error": "none"}, outcome)[0].status == "wrong"
    ok = run("base.reshape([3, 2])", {"base": seed_fixture()})
    assert compare({"error": "none"}, ok)[0].status == "right"
    assert compare({"error": "NonContiguousReshapeError"}, ok)[0].status == "wrong"


def test_owner_is_shared_for_views_and_new_for_materialize() -> None:
    scope = {"base": seed_fixture()}
    assert run("base.slice(1, 1, 3)", scope).truth("owner") == "shared"
    assert run("base.slice(1, 1, 3).materialize()", scope).truth("owner") == "new"
