"""The numpy backend's fast copies: the same values as NumPy's copy, whichever tile a stride gets
and however many threads a copy is split over."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest

from llmfs.tensor import Tensor
from llmfs.tensor.backends import numpy_copies
from llmfs.tensor.backends.numpy_copies import copy_strided, gather
from llmfs.tensor.backends.threads import get_num_threads, set_num_threads
from llmfs.tensor.layout import Layout
from llmfs.tensor.strided import numpy_view, writable_view


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
    strips, group = numpy_copies._strip_columns, numpy_copies.ROWS_PER_SET_GROUP
    assert strips(8192) == group  # a multiple of 4 KiB
    assert strips(2048) == 2 * group  # two set groups
    assert strips(8000) == numpy_copies.MAX_STRIP_COLUMNS  # spread over the sets


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


@pytest.fixture(params=[1, 2, 3, 5], ids=lambda count: f"{count}threads")
def threads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """Every copy split over ``count`` threads, however small (the threshold is lowered)."""
    monkeypatch.setattr(numpy_copies, "PARALLEL_MIN_VALUES", 1)
    before = get_num_threads()
    set_num_threads(request.param)
    yield request.param
    set_num_threads(before)


@pytest.mark.parametrize(
    ("shape", "strides", "offset", "peer"),
    [
        ((1100, 700), (1, 1100), 0, lambda d: d.T),  # wide strips cut into row blocks
        ((1100, 700), (-1, 1100), 1099, lambda d: d.T[::-1]),  # a flipped transpose
        ((2, 385000), (0, 1), 0, lambda d: np.broadcast_to(d.reshape(-1)[:385000], (2, 385000))),
        ((7, 5), (1, 7), 0, lambda d: d.reshape(-1)[:35].reshape(5, 7).T),  # fewer rows than work
        ((3,), (2,), 1, lambda d: d.reshape(-1)[1:7:2]),  # rank 1: fewer values than threads
    ],
    ids=["transpose", "flipped-transpose", "broadcast", "tiny", "rank1"],
)
def test_gather_is_the_same_for_any_thread_count(
    threads: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    offset: int,
    peer: Callable[[np.ndarray], np.ndarray],
) -> None:
    data = _source((700, 1100))
    got = gather(data.reshape(-1), Layout(shape, strides, offset))
    np.testing.assert_array_equal(got, peer(data))


def test_copy_strided_is_the_same_for_any_thread_count(threads: int) -> None:
    data = _source((900, 1300))
    owner = np.zeros(900 * 1300, dtype=np.float64)
    target = writable_view(owner, Layout((1300, 900), (1, 1300), 0))  # a transposed output
    copy_strided(target, data.T.copy())
    np.testing.assert_array_equal(owner.reshape(900, 1300), data)


def test_materialize_of_a_large_transpose_splits_over_threads(threads: int) -> None:
    data = _source((613, 1031))
    view = Tensor.from_numpy(data).view().T
    np.testing.assert_array_equal(view.materialize().to_numpy(), data.T)


def test_a_copy_whose_source_overlaps_its_target_is_not_split(threads: int) -> None:
    # Shift rows down by one within the same storage: pieces running at once would read rows
    # another piece had already overwritten; one NumPy call buffers the overlap.
    storage = np.arange(600 * 700, dtype=np.float64)
    expected = storage.reshape(600, 700)[:-1].copy()
    target = writable_view(storage, Layout((599, 700), (700, 1), 700))
    source = numpy_view(storage, Layout((599, 700), (700, 1), 0))
    copy_strided(target, source)
    np.testing.assert_array_equal(storage.reshape(600, 700)[1:], expected)
