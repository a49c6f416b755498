"""The run-time borrow rule: a view may not be used after its owner is mutated."""

from __future__ import annotations

import pytest

from llmfs.tensor import StaleViewError, Tensor, TensorError


def test_every_write_through_as_mut_slice_moves_the_version() -> None:
    tensor = Tensor.arange(4)
    handle = tensor.as_mut_slice()
    assert tensor.version == 0
    handle[0] = 10.0
    handle[1:3] = [20.0, 30.0]
    assert tensor.version == 2
    assert tensor.as_slice().tolist() == [10.0, 20.0, 30.0, 3.0]


def test_views_made_before_a_write_go_stale() -> None:
    tensor = Tensor.arange(4)
    view = tensor.view()
    derived = view.reshape([2, 2])
    tensor.as_mut_slice()[0] = 1.0
    for use in (
        view.tolist,
        derived.materialize,
        lambda: view.get([0]),
        lambda: view.reshape([4]),
        lambda: list(view.logical_offsets()),
        lambda: view[0],
    ):
        with pytest.raises(StaleViewError):
            use()
    assert view.is_stale
    fresh = tensor.view()
    assert fresh.tolist() == [1.0, 1.0, 2.0, 3.0]


def test_kept_handle_cannot_change_new_views_silently() -> None:
    tensor = Tensor.arange(4)
    handle = tensor.as_mut_slice()
    view = tensor.view()  # made while the handle is still around
    assert view.tolist() == [0.0, 1.0, 2.0, 3.0]
    handle[3] = 99.0
    with pytest.raises(StaleViewError):
        view.tolist()


def test_mutate_window() -> None:
    tensor = Tensor.arange(3)
    before = tensor.view()
    with tensor.mutate() as buffer:
        with pytest.raises(StaleViewError, match="mutate\\(\\) window is open"):
            tensor.view().tolist()
        buffer[:] = [7.0, 8.0, 9.0]
        buffer.fill(1.0)
        buffer[2] = 5.0
    with pytest.raises(StaleViewError):
        before.tolist()
    assert tensor.view().tolist() == [1.0, 1.0, 5.0]
    with pytest.raises(TensorError):
        buffer[0] = 0.0


def test_nested_windows_are_refused() -> None:
    tensor = Tensor.arange(2)
    with tensor.mutate(), pytest.raises(TensorError, match="already open"):
        with tensor.mutate():
            pass


def test_materialized_copy_is_independent() -> None:
    tensor = Tensor.arange(4)
    copy = tensor.view().slice(0, 1, 3).materialize()
    tensor.as_mut_slice()[1] = 100.0
    assert copy.tolist() == [1.0, 2.0]
    copy.as_mut_slice()[0] = -1.0
    assert tensor.tolist() == [0.0, 100.0, 2.0, 3.0]
    assert not copy.view().shares_storage(tensor)


def test_handle_reports_bad_writes() -> None:
    handle = Tensor.arange(3).as_mut_slice()
    with pytest.raises(TensorError, match="storage index 3 is out of bounds"):
        handle[3] = 1.0
    with pytest.raises(TensorError, match="holds 3 values but 2 values assigned"):
        handle[0:3] = [1.0, 2.0]
    assert handle[1] == 1.0
    assert len(handle) == 3


def test_read_only_slice() -> None:
    tensor = Tensor.arange(3)
    with pytest.raises(ValueError):
        tensor.as_slice()[0] = 5.0
