"""same_answer: the course's one answer equality (the rules of its module docstring)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from llmfs.course.exercises.compare import ABS_TOL, REL_TOL, same_answer

# Answers as the course has them: numbers, booleans, words, None, and lists or dicts of them.
scalars = st.one_of(
    st.integers(-(10**15), 10**15),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=5),
    st.none(),
)
answers = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=3), inner, max_size=3),
    ),
    max_leaves=12,
)


@given(answers)
def test_every_answer_is_its_own_answer(a: object) -> None:
    assert same_answer(a, a)


@given(answers, answers)
def test_it_is_symmetric_and_never_raises(a: object, b: object) -> None:
    assert same_answer(a, b) == same_answer(b, a)


def test_a_boolean_is_only_a_boolean() -> None:
    assert same_answer(True, True) and not same_answer(True, False)
    assert not same_answer(True, 1) and not same_answer(1, True)
    assert not same_answer(False, 0.0) and not same_answer([True], [1])


@given(st.integers(-(10**18), 10**18), st.integers(1, 1000))
def test_whole_numbers_are_equal_only_exactly(n: int, step: int) -> None:
    # No tolerance for counts: 10**18 and 10**18 + 1 are different offsets.
    assert same_answer(n, n) and not same_answer(n, n + step)


@given(st.floats(-1e6, 1e6, allow_nan=False))
def test_floats_are_equal_within_the_tolerance_only(x: float) -> None:
    near = x + max(abs(x) * REL_TOL, ABS_TOL) / 4
    far = x + max(abs(x) * REL_TOL, ABS_TOL) * 4 + 1e-9
    assert same_answer(x, near)
    assert not same_answer(x, far)


def test_an_int_and_a_float_compare_by_value() -> None:
    assert same_answer(3, 3.0) and same_answer(0.1 + 0.2, 0.3)
    assert not same_answer(3, 3.5)


def test_nan_is_nan_and_an_infinity_only_itself() -> None:
    assert same_answer(math.nan, float("nan"))
    assert not same_answer(math.nan, 0.0) and not same_answer(0.0, math.nan)
    assert same_answer(math.inf, math.inf) and not same_answer(math.inf, -math.inf)
    assert not same_answer(math.inf, 1e308)


def test_lists_and_tuples_are_sequences_compared_in_order() -> None:
    assert same_answer((3, 2), [3, 2]) and same_answer([[1.0, 2]], ([1, 2.0],))
    assert not same_answer([3, 2], [2, 3]) and not same_answer([3, 2], [3, 2, 1])
    assert not same_answer([3], 3) and not same_answer([], None)


def test_mappings_need_the_same_keys_and_values() -> None:
    assert same_answer({"a": 1, "b": [2.0]}, {"b": [2], "a": 1.0})
    assert not same_answer({"a": 1}, {"a": 1, "b": 2}) and not same_answer({"a": 1}, {"a": 2})
    assert not same_answer({"a": 1}, [("a", 1)])


def test_other_values_need_equal_values_of_one_type() -> None:
    assert same_answer("shared", "shared") and not same_answer("shared", "Shared")
    assert same_answer(None, None) and not same_answer(None, 0) and not same_answer("1", 1)


def test_numpy_numbers_are_numbers() -> None:
    assert same_answer(np.float32(0.5), 0.5) and same_answer(np.int64(7), 7)
    assert not same_answer(np.int64(7), 8) and not same_answer(np.bool_(True), 1)
