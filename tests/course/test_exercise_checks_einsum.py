"""The check of chapter 6's naive einsum: its cases cover every kind of label and layout, its
answers come from the library's einsum, and the classic mistakes (a contiguous reading, a forgotten
base offset, no size check, an implicit output order) fail it."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from test_exercise_checks import SOLUTIONS

from llmfs.course.exercise_checks import CHECKS, SPECS, check_naive_einsum
from llmfs.course.exercise_checks.einsum import naive_einsum_cases, strided_operand
from llmfs.course.exercise_checks.spec import draw_cases, expected_outcome, run_spec
from llmfs.tensor import Tensor, as_strided, einsum

SPEC = SPECS["ch06.naive_einsum"]


@pytest.fixture(autouse=True)
def attempts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "attempts.jsonl"
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(log))
    return log


def _coordinates(shape: list[int]) -> list[tuple[int, ...]]:
    result: list[tuple[int, ...]] = [()]
    for size in shape:
        result = [(*c, k) for c in result for k in range(size)]
    return result


def naive(expression: str, x: Any, y: Any, *, contiguous: bool = False, base: bool = True) -> Any:
    """A written-out einsum; ``contiguous`` reads as if row-major, ``base=False`` ignores the base
    offset (two classic mistakes)."""
    inputs, output = expression.split("->")
    operands = list(zip(inputs.split(","), (x, y)))
    sizes: dict[str, int] = {}
    for term, (_, shape, _, _) in operands:
        for label, size in zip(term, shape):
            if sizes.setdefault(label, size) != size:
                raise ValueError(label)
    summed = [label for label in sizes if label not in output]
    values = []
    for out in _coordinates([sizes[label] for label in output]):
        total = 0
        for extra in _coordinates([sizes[label] for label in summed]):
            index = {**dict(zip(output, out)), **dict(zip(summed, extra))}
            product = 1
            for term, (storage, shape, strides, base_offset) in operands:
                steps = strides
                if contiguous:
                    steps = [1] * len(shape)
                    for axis in range(len(shape) - 2, -1, -1):
                        steps[axis] = steps[axis + 1] * shape[axis + 1]
                start = base_offset if base else 0
                product *= storage[start + sum(index[lb] * s for lb, s in zip(term, steps))]
            total += product
        values.append(total)
    return [sizes[label] for label in output], values


def test_the_check_is_registered_under_the_exercise_id() -> None:
    assert CHECKS["ch06.naive_einsum"] is check_naive_einsum
    assert SPEC.function == "naive_einsum" and SPEC.parameters == ("expression", "x", "y")


def test_the_visible_cases_start_with_the_chapter_fixture() -> None:
    expression, x, y = draw_cases(SPEC)[0]
    assert expression == "ik,kj->ij"
    assert expected_outcome(SPEC, (expression, x, y)) == {"value": [[2, 2], [4, 5, 10, 11]]}


def test_the_cases_cover_every_kind_of_label_layout_and_refusal() -> None:
    cases = draw_cases(SPEC)
    kinds = set()
    for expression, x, y in cases:
        inputs, output = expression.split("->")
        left, right = inputs.split(",")
        for label in set(left + right):
            shared = label in left and label in right
            kinds.add(
                ("batch" if shared else "free")
                if label in output
                else ("contracted" if shared else "private")
            )
        if not left or not right:
            kinds.add("scalar operand")
        if not output:
            kinds.add("scalar output")
        for _, _shape, strides, base in (x, y):
            if any(s < 0 for s in strides):
                kinds.add("flipped")
            if base > 0:
                kinds.add("offset")
            if list(strides) != sorted(strides, reverse=True):
                kinds.add("permuted")
    assert kinds >= {
        "free",
        "batch",
        "contracted",
        "private",
        "scalar operand",
        "scalar output",
        "flipped",
        "offset",
        "permuted",
    }
    errors = [c for c in cases if "error" in expected_outcome(SPEC, c)]
    assert errors and all(expected_outcome(SPEC, c) == {"error": "ValueError"} for c in errors)


def test_random_layouts_are_valid_views_of_their_storage() -> None:
    rng = random.Random(5)
    for _ in range(200):
        shape = [rng.randint(1, 3) for _ in range(rng.randint(0, 3))]
        storage, got_shape, strides, base = strided_operand(rng, shape)
        owner = Tensor.from_vec([len(storage)], storage, dtype="float64")
        view = as_strided(owner, got_shape, strides, base)  # raises for an invalid layout
        assert list(view.shape) == shape
        assert len(set(view.logical_offsets())) == len(list(view.logical_offsets()))


def test_the_reference_is_the_library_einsum() -> None:
    for expression, x, y in naive_einsum_cases(random.Random(3), 60):
        outcome = expected_outcome(SPEC, (expression, x, y))
        if "error" in outcome:
            continue
        views = [
            as_strided(Tensor.from_vec([len(s)], s, dtype="float64"), sh, st, b)
            for s, sh, st, b in (x, y)
        ]
        result = einsum(expression, *views)
        assert outcome["value"][0] == list(result.shape)
        flat = result.view().materialize().as_slice().tolist()
        assert outcome["value"][1] == [int(v) for v in flat]


def test_right_code_passes_and_the_solution_passes_on_other_seeds() -> None:
    assert check_naive_einsum(naive, record_attempt=False).passed
    for seed in (7, 8):
        assert run_spec(
            SPEC, SOLUTIONS["ch06.naive_einsum"], seed=seed, record_attempt=False
        ).passed


@pytest.mark.parametrize(
    "mistake",
    [
        lambda e, x, y: naive(e, x, y, contiguous=True),
        lambda e, x, y: naive(e, x, y, base=False),
        lambda e, x, y: _no_size_check(e, x, y),
        lambda e, x, y: _sorted_output(e, x, y),
    ],
    ids=["reads-row-major", "ignores-base-offset", "no-size-check", "sorts-the-output"],
)
def test_classic_mistakes_fail_with_the_smallest_case_first(mistake: Any) -> None:
    report = check_naive_einsum(mistake, record_attempt=False)
    assert report.status == "failed", repr(report)
    assert "random cases (seed 0) wrong; the 3 smallest shown" in report.note
    # The smallest failing case is the table's first row, drawn with both operands' offsets.
    assert f"smallest failing case: {report.cases[0].label}\n" in report.note
    assert "its input, as an offset table:\nshape [" in report.note
    assert "owner x\n" in report.note and "owner y\n" in report.note


def _no_size_check(expression: str, x: Any, y: Any) -> Any:
    # Answers something instead of refusing a shared label of two sizes.
    try:
        return naive(expression, x, y)
    except ValueError:
        return [[], [0]]


def _sorted_output(expression: str, x: Any, y: Any) -> Any:
    inputs, output = expression.split("->")
    return naive(f"{inputs}->{''.join(sorted(output))}", x, y)


def test_a_stub_is_not_implemented_and_a_table_of_visible_cases_fails() -> None:
    assert check_naive_einsum(None).status == "not implemented"
    assert check_naive_einsum(lambda e, x, y: None).status == "not implemented"
    visible = {json.dumps(list(c)): expected_outcome(SPEC, c) for c in draw_cases(SPEC)}

    def table(expression: str, x: Any, y: Any) -> Any:
        found = visible.get(json.dumps([expression, x, y]))
        if found is None:
            return None
        if "error" in found:
            raise ValueError(found["error"])
        return found["value"]

    assert run_spec(SPEC, table, record_attempt=False).passed
    assert not run_spec(SPEC, table, seed=1, record_attempt=False).passed
