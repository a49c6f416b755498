"""Random chains of view operations agree with NumPy's own views of the same buffer.

For every chain: the shape, the strides (ignoring size-1 axes, whose strides are arbitrary, and
all strides of empty views), the base offset, every logical offset, every value and contiguity
match what NumPy computes. Offsets are read from NumPy by running the same chain over an array
of storage indices (``arange``): its values *are* the offsets.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmfs.tensor import NonContiguousReshapeError, Tensor, TensorError
from llmfs.tensor.layout import offset_bounds

from .strategies import apply_llmfs, apply_numpy, llmfs_apply, np_apply, view_chains, view_op

# Seconds in all (thousands of generated view chains): the file is scheduled early (conftest.py).
pytestmark = pytest.mark.slow

# "Thousands of random view chains": about 2500 chains per run over the two properties below.
SETTINGS = settings(max_examples=1250, deadline=None)


def meaningful_strides(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int | None, ...]:
    if 0 in shape:
        return ()
    return tuple(None if size == 1 else stride for size, stride in zip(shape, strides))


def numpy_element_strides(array: np.ndarray) -> tuple[int, ...]:
    return tuple(s // array.itemsize for s in array.strides)


@SETTINGS
@given(view_chains())
def test_view_chains_match_numpy_views(case: tuple[Tensor, list]) -> None:
    tensor, ops = case
    view = apply_llmfs(tensor, ops)
    offsets = apply_numpy(np.arange(tensor.size), tensor.shape, ops)
    values = apply_numpy(tensor.as_slice(), tensor.shape, ops)

    assert view.shape == values.shape
    assert meaningful_strides(view.shape, view.strides) == meaningful_strides(
        values.shape, numpy_element_strides(values)
    )
    assert list(view.logical_offsets()) == offsets.reshape(-1).tolist()
    assert view.tolist() == values.tolist()
    assert np.array_equal(view.materialize().to_numpy(), values)
    # NumPy's C_CONTIGUOUS flag ignores the strides of size-1 axes and calls empty arrays
    # contiguous: the same rule as llmfs.
    assert view.is_contiguous() == values.flags.c_contiguous
    if values.size:
        assert view.base_offset == int(offsets.reshape(-1)[0])
        bounds = offset_bounds(view.shape, view.strides, view.base_offset)
        assert bounds == (int(offsets.min()), int(offsets.max()))


@SETTINGS
@given(view_chains(), st.data())
def test_reshape_succeeds_exactly_when_numpy_can_view(
    case: tuple[Tensor, list], data: st.DataObject
) -> None:
    tensor, ops = case
    view = apply_llmfs(tensor, ops)
    op = data.draw(view_op(view.shape, only=("reshape", "merge")))
    offsets = apply_numpy(np.arange(tensor.size), tensor.shape, ops)
    expected = np_apply(offsets, op)
    if expected is None:
        with pytest.raises(NonContiguousReshapeError, match="materialize"):
            llmfs_apply(view, op)
        return
    try:
        result = llmfs_apply(view, op)
    except TensorError as error:  # NumPy refuses an ambiguous -1 too, but with a ValueError
        pytest.fail(f"llmfs refused {op} on {view}: {error}")
    assert result.shape == expected.shape
    assert meaningful_strides(result.shape, result.strides) == meaningful_strides(
        expected.shape, numpy_element_strides(expected)
    )
    assert list(result.logical_offsets()) == expected.reshape(-1).tolist()


@pytest.mark.parametrize(
    ("build", "target", "strides"),
    [
        # transpose then reshape to 1-D fails
        (lambda: Tensor.arange(6).reshape([2, 3]).transpose(0, 1), (6,), None),
        # (2,3,4).permute(1,0,2) reshaped to (3,2,2,2) succeeds with strides (4,12,2,1)
        (
            lambda: Tensor.arange(24).reshape([2, 3, 4]).permute([1, 0, 2]),
            (3, 2, 2, 2),
            (4, 12, 2, 1),
        ),
        # (4,6)[:, :4] reshaped to (4,2,2) succeeds and to (16,) fails
        (lambda: Tensor.arange(24).reshape([4, 6])[:, :4], (4, 2, 2), (6, 2, 1)),
        (lambda: Tensor.arange(24).reshape([4, 6])[:, :4], (16,), None),
        # expand, then reshape: split a broadcast axis (a view), merge it with a real one (a copy)
        (lambda: Tensor.arange(3).reshape([1, 3]).expand([4, 3]), (2, 2, 3), (0, 0, 1)),
        (lambda: Tensor.arange(3).reshape([1, 3]).expand([4, 3]), (12,), None),
    ],
)
def test_named_reshape_cases(build, target, strides) -> None:
    view = build()
    if strides is None:
        with pytest.raises(NonContiguousReshapeError):
            view.reshape(target)
    else:
        assert view.reshape(target).strides == strides


def test_unit_axis_with_odd_stride_is_contiguous() -> None:
    owner = Tensor.zeros([24])
    from llmfs.tensor import as_strided

    view = as_strided(owner, [4, 1, 6], [6, 999, 1], 0)
    assert view.is_contiguous()
    assert view.reshape([24]).strides == (1,)


@settings(max_examples=150, deadline=None)
@given(view_chains(), st.data())
def test_reshape_agrees_with_torch_view(case: tuple[Tensor, list], data: st.DataObject) -> None:
    torch = pytest.importorskip(
        "torch", reason="torch is not installed; NumPy conformance covers the rule"
    )
    tensor, ops = case
    view = apply_llmfs(tensor, ops)
    op = data.draw(view_op(view.shape, only=("reshape",)))
    base = torch.arange(tensor.size).reshape(tensor.shape) if tensor.shape else torch.tensor(0)
    t = (
        base.as_strided(view.shape, view.strides, view.base_offset)
        if min(view.strides, default=0) >= 0
        else None
    )
    if t is None:
        return  # torch has no negative strides
    try:
        expected = t.view(op[1])
    except RuntimeError:
        with pytest.raises(TensorError):
            view.reshape(op[1])
        return
    result = view.reshape(op[1])
    assert list(result.logical_offsets()) == expected.reshape(-1).tolist()
