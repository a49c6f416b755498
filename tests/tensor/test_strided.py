"""The core's NumPy arrays of storage: views over the same memory, and the read-only export type.

The export (``as_slice()``, ``numpy_view()``) is read-only by NumPy's own flag; every write that
reaches it through Python is refused with our error, which says how to write, and the storage
never changes. Results computed from an export are plain, writable ndarrays.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmfs.tensor import Tensor, TensorError
from llmfs.tensor.layout import Layout
from llmfs.tensor.strided import ReadOnlyArray, numpy_view

READ_ONLY = r"read-only export of a tensor's storage .*: write through tensor\.as_mut_slice\(\)"

#: Every in-place operator Python has, with an operand each dtype accepts.
IN_PLACE: list[tuple[str, Callable[[Any, Any], Any], object]] = [
    ("+=", operator.iadd, 1),
    ("-=", operator.isub, 1),
    ("*=", operator.imul, 2),
    ("/=", operator.itruediv, 2),
    ("//=", operator.ifloordiv, 2),
    ("%=", operator.imod, 2),
    ("**=", operator.ipow, 2),
    ("<<=", operator.ilshift, 1),
    (">>=", operator.irshift, 1),
    ("&=", operator.iand, 1),
    ("|=", operator.ior, 1),
    ("^=", operator.ixor, 1),
]


def test_numpy_view_is_read_only_and_shares_memory() -> None:
    storage = np.arange(12, dtype=np.float32)
    view = numpy_view(storage, Layout((3, 2), (-2, 5), 4))
    assert view.tolist() == [[4, 9], [2, 7], [0, 5]]
    assert np.shares_memory(view, storage) and not view.flags.writeable
    assert type(view) is np.ndarray  # the library's own reads carry no export type


@pytest.mark.parametrize(("name", "apply", "operand"), IN_PLACE, ids=[row[0] for row in IN_PLACE])
def test_every_in_place_operator_on_an_export_is_refused(
    name: str, apply: Callable[[Any, Any], Any], operand: object
) -> None:
    tensor = Tensor.arange(4)  # int64: every operator above has a meaning
    exported = tensor.as_slice()
    with pytest.raises(TensorError, match=READ_ONLY):
        apply(exported, operand)
    with pytest.raises(TensorError, match=READ_ONLY):
        apply(tensor.view()[1:].numpy_view(), operand)
    assert tensor.tolist() == [0, 1, 2, 3] and tensor.version == 0


def test_a_matrix_product_in_place_is_refused() -> None:
    tensor = Tensor.from_vec([2, 2], [1.0, 2.0, 3.0, 4.0])
    exported = tensor.view().numpy_view()
    with pytest.raises(TensorError, match=READ_ONLY):
        exported @= np.eye(2)
    assert tensor.tolist() == [[1.0, 2.0], [3.0, 4.0]]


WRITES: dict[str, Callable[[np.ndarray], object]] = {
    "item": lambda a: a.__setitem__(0, 9),
    "slice": lambda a: a.__setitem__(slice(None), 9),
    "part": lambda a: a[1:].__setitem__(0, 9),  # a NumPy view of the export is an export too
    "reshaped": lambda a: a.reshape(2, 2).__setitem__((0, 0), 9),
    "ufunc-out": lambda a: np.add(a, 1, out=a),
    "ufunc-out-tuple": lambda a: np.negative(a, out=(a,)),
    "ufunc-at": lambda a: np.add.at(a, [0], 1),
    "reduce-out": lambda a: np.add.reduce(np.ones((2, 4)), axis=0, out=a),
    "divmod-second-out": lambda a: np.divmod(np.ones(4), 2, out=(np.empty(4), a)),
    "fill": lambda a: a.fill(9),
    "put": lambda a: a.put([0], [9]),
    "sort": lambda a: a.sort(),
    "partition": lambda a: a.partition(1),
}


@pytest.mark.parametrize("write", WRITES.values(), ids=list(WRITES))
def test_every_python_level_write_into_an_export_is_our_error(
    write: Callable[[np.ndarray], object],
) -> None:
    tensor = Tensor.from_vec([4], [3.0, 1.0, 2.0, 0.0])
    for exported in (tensor.as_slice(), tensor.view().numpy_view()):
        with pytest.raises(TensorError, match=READ_ONLY):
            write(exported)
    assert tensor.tolist() == [3.0, 1.0, 2.0, 0.0] and tensor.version == 0


def test_a_write_from_numpys_c_code_is_still_refused_by_the_flag() -> None:
    tensor = Tensor.arange(3)
    with pytest.raises(ValueError, match="read-only"):
        np.copyto(tensor.as_slice(), 5)
    assert tensor.tolist() == [0, 1, 2]


@given(
    st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=12),
    st.sampled_from(["add", "multiply", "maximum", "subtract"]),
)
def test_computing_from_an_export_gives_plain_ndarrays_with_numpys_values(
    values: list[float], name: str
) -> None:
    tensor = Tensor.from_vec([len(values)], values)
    exported = tensor.view().numpy_view()
    plain = np.asarray(values)
    ufunc = getattr(np, name)
    result = ufunc(exported, exported[::-1])
    assert type(result) is np.ndarray and result.flags.writeable
    np.testing.assert_array_equal(result, ufunc(plain, plain[::-1]))
    total = exported.sum()
    assert not isinstance(total, np.ndarray) and total == plain.sum()
    out = np.empty(len(values))
    assert ufunc(exported, 2.0, out=out) is out  # a writable output of the caller's own
    np.testing.assert_array_equal(out, ufunc(plain, 2.0))


def test_a_copy_of_an_export_is_the_learners_own_writable_array() -> None:
    tensor = Tensor.arange(4)
    copied = tensor.as_slice().copy()
    assert isinstance(copied, ReadOnlyArray) and copied.flags.writeable
    copied += 10
    copied[0] = -1
    copied.sort()
    assert copied.tolist() == [-1, 11, 12, 13] and tensor.tolist() == [0, 1, 2, 3]
