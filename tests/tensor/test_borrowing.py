"""The run-time borrow rule: a view may not be used after its owner is mutated."""

from __future__ import annotations

import contextlib

import numpy as np
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


# -- a closed mutate() window leaves no writable handle ------------------------------------------


def test_the_window_array_is_written_back_when_the_window_closes() -> None:
    tensor = Tensor.from_vec([4], [0.0, 1.0, 2.0, 3.0])
    with tensor.mutate() as buffer:
        raw = buffer.writable_array()
        assert buffer.writable_array() is raw  # one array per window
        raw[0] = 10.0
        buffer[1] = 11.0  # the handle and the array stay in step, in the order written
        raw[2] = buffer[1] + 1.0
        assert buffer[0] == 10.0
    assert tensor.tolist() == [10.0, 11.0, 12.0, 3.0]
    assert tensor.version == 2  # moved when the window opened and when it closed


def test_no_write_through_a_closed_windows_array_reaches_the_tensor() -> None:
    tensor = Tensor.from_vec([4], [0.0, 1.0, 2.0, 3.0])
    with tensor.mutate() as buffer:
        raw = buffer.writable_array()
        part = raw[1:]  # a NumPy view of it, made inside the window
        raw[3] = 30.0
    version = tensor.version
    view = tensor.view()
    attempts = [
        lambda: raw.__setitem__(0, 5.0),
        lambda: np.add(raw, 1.0, out=raw),
        lambda: raw.fill(7.0),
    ]
    for attempt in attempts:
        with pytest.raises(ValueError, match="read-only"):
            attempt()
    part[...] = 9.0  # writable or not, it is no longer the tensor's storage
    raw.flags.writeable = True  # even switched back on, it is the window's copy
    raw[...] = -1.0
    assert tensor.tolist() == [0.0, 1.0, 2.0, 30.0]
    assert tensor.version == version and view.tolist() == [0.0, 1.0, 2.0, 30.0]


def test_a_window_array_kept_past_the_window_cannot_change_a_gradient() -> None:
    import llmfs.tensor as lt

    x = Tensor.from_vec([3], [0.3, -1.2, 0.8], requires_grad=True)
    with x.mutate() as buffer:
        raw = buffer.writable_array()
    loss = lt.sum(x * x)
    with pytest.raises(ValueError, match="read-only"):
        raw[0] = 5.0
    loss.backward()
    assert x.grad is not None and np.allclose(x.grad.to_numpy(), [0.6, -2.4, 1.6])


@pytest.mark.parametrize("seed", range(20))
def test_random_writes_in_a_window_land_and_none_after_it(seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 9))
    model = rng.standard_normal(size)
    tensor = Tensor.from_numpy(model.copy())
    kept: list[np.ndarray] = []
    with tensor.mutate() as buffer:
        for _ in range(int(rng.integers(1, 12))):
            where = int(rng.integers(size))
            value = float(rng.standard_normal())
            how = int(rng.integers(4))
            if how == 0:
                buffer[where] = value
            elif how == 1:
                buffer.writable_array()[where] = value
            elif how == 2:
                kept.append(buffer.writable_array()[where:])
                kept[-1][0] = value
            else:
                buffer.fill(value)
                model[:] = value
                continue
            model[where] = value
            assert buffer[where] == value
    assert tensor.tolist() == model.tolist()
    version = tensor.version
    for array in kept:  # NumPy views of the window's array, made while it was open
        with contextlib.suppress(ValueError):  # writable or not, they are not the storage
            array.flags.writeable = True
        array[...] = 123.0
    with pytest.raises(TensorError):
        buffer[0] = 1.0
    assert tensor.tolist() == model.tolist() and tensor.version == version


def test_a_window_that_raises_still_closes_and_keeps_what_was_written() -> None:
    tensor = Tensor.from_vec([2], [1.0, 2.0])
    with pytest.raises(ZeroDivisionError), tensor.mutate() as buffer:
        buffer.writable_array()[0] = 4.0
        raise ZeroDivisionError
    assert tensor.tolist() == [4.0, 2.0] and tensor.version == 2
    with tensor.mutate():  # the window is closed: another may open
        pass


def test_an_as_mut_slice_handle_gives_no_array() -> None:
    handle = Tensor.arange(3, dtype="float64").as_mut_slice()
    with pytest.raises(TensorError, match="mutate"):
        handle.writable_array()
