"""The work limit: no op reads more values from one view than memory could hold.

A real array holds at most as many values as memory (and NumPy's largest array) allows, so a view
with more is a broadcast or a self-overlapping layout, and an op that reads it value by value
would run for hours. The rule (``strided.check_reads``, on the byte limit ``strided.byte_limit``
that allocations use too): such an op is refused with a ViewTooLargeError naming the op, the
count and the bytes. An op whose result is that large is already refused by the allocation guard.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import llmfs.tensor as lt
import llmfs.tensor.strided as strided
from llmfs.tensor import Tensor, ViewTooLargeError, ops

HUGE = 2**40


def huge(dtype: str = "float32", value: object = 1) -> lt.TensorView:
    return Tensor.full([1], value, dtype).expand([HUGE])


# Every op that reads a whole operand into a smaller result, on a 2**40-value broadcast.
READERS: dict[str, Callable[[lt.TensorView], Any]] = {
    **{name: getattr(ops, name) for name in ("sum", "prod", "max", "min", "mean", "any", "all")},
    **{f"reduce-{op}": (lambda v, op=op: ops.reduce(v, "i", "", op)) for op in ops._REDUCTIONS},
    "sum-keepdims": lambda v: ops.sum(v, 0, keepdims=True),
    "einsum-sum": lambda v: lt.einsum("i->", v),
    "einsum-dot": lambda v: lt.einsum("i,i->", v, v),
    "einsum-plan": lambda v: lt.EinsumPlan("i->", v).execute(v),
    "matmul-inner": lambda v: ops.matmul(v, v),
    "take-ids": lambda v: ops.take(
        Tensor.zeros([2, 0]), ops.astype(v[:1], "int64").expand([HUGE]), 0
    ),
}


@pytest.mark.parametrize("dtype", ["bool", "int32", "float16", "float64"])
@pytest.mark.parametrize("reader", READERS, ids=list(READERS))
def test_reading_a_view_larger_than_memory_is_refused_at_once(reader: str, dtype: str) -> None:
    view = huge("int64" if reader == "take-ids" else dtype)
    with pytest.raises(ViewTooLargeError) as info:
        READERS[reader](view)
    error = info.value
    assert error.count == HUGE and error.nbytes == HUGE * view.dtype.itemsize
    assert f"would read {HUGE} values of {view.dtype.name}" in str(error)


@pytest.mark.parametrize("size", [1, 7, 4096])
def test_a_broadcast_that_fits_is_read_as_numpy_reads_it(size: int) -> None:
    view = Tensor.full([1, 3], 2, "int32").expand([size, 3])
    expected = np.broadcast_to(np.full((1, 3), 2, np.int32), (size, 3))
    assert ops.sum(view).item() == expected.sum()
    assert ops.max(view, 0).tolist() == expected.max(0).tolist()
    assert lt.einsum("ij->j", view).tolist() == np.einsum("ij->j", expected).tolist()


def test_the_limit_is_the_byte_limit_of_allocations(monkeypatch: pytest.MonkeyPatch) -> None:
    # On a machine with 2**31 bytes, 2**32 bools cannot be held, 2**30 can: the limit follows
    # the memory, the same number the allocation guard uses.
    monkeypatch.setattr(strided, "_physical_memory", lambda: 2**31)
    with pytest.raises(ViewTooLargeError, match="this machine has 2147483648 bytes of memory"):
        strided.check_reads(2**32, np.bool_, "a test")
    with pytest.raises(lt.AllocationError, match="this machine has 2147483648 bytes of memory"):
        strided.check_allocation(2**32, np.bool_)
    strided.check_reads(2**30, np.bool_, "a test")
    strided.check_allocation(2**30, np.bool_)
    assert strided.byte_limit(2**63) == "NumPy arrays hold at most 9223372036854775807 bytes"
    assert strided.MAX_ARRAY_BYTES == lt.layout.INDEX_MAX  # one 64-bit maximum


def test_checks_over_a_broadcast_read_each_stored_value_once() -> None:
    # astype's float-to-int check, take's id check and power's exponent check ask about the set
    # of values, so a huge broadcast costs what its stored values cost; the result alone is
    # then refused by the allocation guard, not by NumPy.
    with pytest.raises(lt.AllocationError):
        ops.astype(huge("float32", np.nan), "int32")
    with pytest.raises(lt.AllocationError):
        ops.power(huge("int32"), huge("int32"))
    values = Tensor.from_vec([2], [1.5, np.inf]).view().unsqueeze(0).expand([1000, 2])
    with pytest.raises(lt.TensorError, match="the value inf has no int32 counterpart"):
        ops.astype(values, "int32")
    ids = Tensor.from_vec([2], [0, 5]).view().unsqueeze(0).expand([1000, 2])
    with pytest.raises(lt.IndexOutOfBoundsError, match="5"):
        ops.take(Tensor.zeros([3]), ids)
