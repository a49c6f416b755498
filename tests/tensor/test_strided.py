"""The fast strided copies: the same values as NumPy's copy, whichever tile a stride gets."""

from __future__ import annotations

import numpy as np
import pytest

from llmfs.tensor import strided
from llmfs.tensor.layout import Layout
from llmfs.tensor.strided import copy_strided, gather, numpy_view, writable_view


def _source(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    "rows",
    [
        2048,  # rows 8 KiB apart: every row in the same cache set, narrow tiles
        2000,  # 8000 bytes: rows spread over the sets, wide tiles
        1031,  # an odd stride, ragged edge tiles
        96,  # small: one NumPy call
    ],
)
def test_gather_of_a_transpose_equals_numpy(rows: int) -> None:
    data = _source((rows, 300))
    storage = data.reshape(-1)
    got = gather(storage, Layout((300, rows), (1, 300), 0))
    np.testing.assert_array_equal(got, data.T)
    flipped = gather(storage, Layout((300, rows), (-1, 300), 299))  # a flipped transpose
    np.testing.assert_array_equal(flipped, data.T[::-1])


def test_gather_of_a_batched_transpose_equals_numpy() -> None:
    data = _source((3, 200, 128))
    got = gather(data.reshape(-1), Layout((3, 128, 200), (200 * 128, 1, 128), 0))
    np.testing.assert_array_equal(got, data.transpose(0, 2, 1))


def test_strips_are_narrow_for_aliasing_strides_and_wide_otherwise() -> None:
    assert strided._strip_columns(8192) == strided.ROWS_PER_SET_GROUP  # a multiple of 4 KiB
    assert strided._strip_columns(2048) == 2 * strided.ROWS_PER_SET_GROUP  # two set groups
    assert strided._strip_columns(8000) == strided.MAX_STRIP_COLUMNS  # spread over the sets


@pytest.mark.parametrize("transposed_target", [False, True])
def test_copy_strided_writes_through_either_layout(transposed_target: bool) -> None:
    data = _source((600, 700))
    owner = np.full(600 * 700, -1.0, dtype=np.float64)
    if transposed_target:  # a contiguous source written into a transposed target, with a cast
        target = writable_view(owner, Layout((700, 600), (1, 700), 0))
        copy_strided(target, data.T.copy())
        np.testing.assert_array_equal(owner.reshape(600, 700), data)
    else:
        target = writable_view(owner, Layout((700, 600), (600, 1), 0))
        copy_strided(target, numpy_view(data.reshape(-1), Layout((700, 600), (1, 700), 0)))
        np.testing.assert_array_equal(owner.reshape(700, 600), data.T)


def test_numpy_view_is_read_only_and_shares_memory() -> None:
    storage = np.arange(12, dtype=np.float32)
    view = numpy_view(storage, Layout((3, 2), (-2, 5), 4))
    assert view.tolist() == [[4, 9], [2, 7], [0, 5]]
    assert np.shares_memory(view, storage) and not view.flags.writeable
