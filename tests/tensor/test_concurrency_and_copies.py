"""What a tensor promises to threads (one writer, no reader meanwhile) and to copy and pickle.

The thread tests force each interleaving with events (a read paused inside the backend or the
gather while another thread writes), so they do not depend on timing: the outcome is decided by
the order the events impose. One property test runs a writer and a reader freely and checks the
promise that holds for every interleaving: a read either fails with StaleViewError or returns
the values of one version.
"""

from __future__ import annotations

import copy
import pickle
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import llmfs.tensor.backends as registry
import llmfs.tensor.backends.numpy_backend as numpy_backend
from llmfs.tensor import (
    ConcurrentWriteError,
    StaleViewError,
    Tensor,
    TensorError,
    TensorView,
    copyto,
    dispatch,
    einsum,
    matmul,
    mul,
    sum,
    use_backend,
)
from llmfs.tensor.backends.numpy_backend import NumpyBackend

TIMEOUT = 30  # seconds an event may take before the test fails (never reached when it passes)


def _in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as error:  # reported by the test, not lost in the thread
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


class PausingBackend(NumpyBackend):
    """The numpy backend, except that each primitive signals ``reading`` and waits for
    ``resume`` either before it reads its operands (``after = False``: the op has checked them)
    or after it computed its result (``after = True``: the values are read)."""

    name = "pausing"

    def __init__(self) -> None:
        super().__init__()
        self.reading = threading.Event()
        self.resume = threading.Event()
        self.after = False

    def _paused(self, compute: Callable[[], Tensor]) -> Tensor:
        if self.after:
            result = compute()
        self.reading.set()
        assert self.resume.wait(TIMEOUT)
        return result if self.after else compute()

    def reduce(self, *args: Any, **kwargs: Any) -> Tensor:
        return self._paused(lambda: super(PausingBackend, self).reduce(*args, **kwargs))

    def binary(self, *args: Any, **kwargs: Any) -> Tensor:
        return self._paused(lambda: super(PausingBackend, self).binary(*args, **kwargs))

    def matmul(self, *args: Any, **kwargs: Any) -> Tensor:
        return self._paused(lambda: super(PausingBackend, self).matmul(*args, **kwargs))

    def copy(self, *args: Any, **kwargs: Any) -> Tensor:
        return self._paused(lambda: super(PausingBackend, self).copy(*args, **kwargs))


@pytest.fixture
def pausing() -> Iterator[PausingBackend]:
    backend = PausingBackend()
    registry.register_backend("pausing", lambda: backend)
    yield backend
    registry._loaders.pop("pausing", None)
    registry._loaded.pop("pausing", None)


OPS: dict[str, Callable[[Tensor], Any]] = {
    "sum": lambda t: sum(t.view(), 0),
    "mul": lambda t: mul(t.view(), 2.0),
    "matmul": lambda t: matmul(t.view().reshape([2, 2]), t.view().reshape([2, 2])),
    "einsum": lambda t: einsum("i,i->", t.view(), Tensor.zeros([4])),
    "materialize": lambda t: t.view().materialize(),
}


@pytest.mark.parametrize("after", [False, True], ids=["before-reading", "after-reading"])
@pytest.mark.parametrize("op", OPS, ids=list(OPS))
def test_an_op_whose_operand_another_thread_writes_during_the_read_is_refused(
    pausing: PausingBackend, op: str, after: bool
) -> None:
    # Paused before reading, the backend's own read finds the view stale; paused after, the op's
    # check after the read finds the version moved: a StaleViewError either way, never a result.
    pausing.after = after
    tensor = Tensor.from_vec([4], [1.0, 2.0, 3.0, 4.0])

    def read() -> None:
        with use_backend("pausing"):
            OPS[op](tensor)

    reader, errors = _in_thread(read)
    assert pausing.reading.wait(TIMEOUT)  # the op checked its operands and is reading
    tensor.as_mut_slice()[:] = [9.0, 9.0, 9.0, 9.0]  # another thread's write, during the read
    pausing.resume.set()
    reader.join(TIMEOUT)
    assert len(errors) == 1 and isinstance(errors[0], StaleViewError), errors
    if after or op == "materialize":  # materialize's copy reads through the gather unchecked
        assert isinstance(errors[0], ConcurrentWriteError)
        assert "written by another thread while it was being read" in str(errors[0])
    assert sum(tensor).item() == 36.0  # the next read sees the one new version


def test_a_gather_overlapping_a_write_is_refused_for_views_and_owners(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tensor = Tensor.arange(6)
    real_gather = numpy_backend.gather  # the numpy backend's copy, behind every copying read

    def gather_during_a_write(storage: np.ndarray, layout: Any) -> np.ndarray:
        writer, errors = _in_thread(lambda: tensor.as_mut_slice().fill(5))
        writer.join(TIMEOUT)
        assert not errors
        return real_gather(storage, layout)

    monkeypatch.setattr(numpy_backend, "gather", gather_during_a_write)
    with dispatch.suspended():  # the full path: a small read is otherwise one planned copy
        for read in (lambda: tensor.view().tolist(), tensor.tolist, lambda: np.asarray(tensor)):
            with pytest.raises(ConcurrentWriteError, match="while it was being read"):
                read()
    monkeypatch.setattr(numpy_backend, "gather", real_gather)
    assert tensor.tolist() == [5] * 6


def test_while_another_thread_writes_nothing_reads_or_writes_the_tensor() -> None:
    tensor = Tensor.arange(4)
    view = tensor.view()
    opened, close = threading.Event(), threading.Event()

    def write() -> None:
        with tensor.mutate() as buffer:
            buffer[0] = 7
            opened.set()
            assert close.wait(TIMEOUT)

    writer, errors = _in_thread(write)
    assert opened.wait(TIMEOUT)
    window = r"another thread is writing the owner .* may not be read until that write ends"
    for read in (
        view.tolist,
        tensor.tolist,
        tensor.view,
        lambda: sum(tensor),
        lambda: copy.copy(tensor),
    ):
        with pytest.raises(ConcurrentWriteError, match=window):
            read()
    with pytest.raises(TensorError, match="another thread is writing this tensor"):
        tensor.as_mut_slice()[1] = 1  # one writer at a time
    close.set()
    writer.join(TIMEOUT)
    assert not errors
    assert tensor.tolist() == [7, 1, 2, 3] and tensor.view().tolist() == [7, 1, 2, 3]
    with pytest.raises(StaleViewError):
        view.tolist()  # made before the write: stale, as in one thread


def test_the_writing_thread_reads_its_own_window_as_before() -> None:
    tensor = Tensor.arange(3)
    with tensor.mutate() as buffer:
        buffer[0] = 5
        tensor.as_mut_slice()[1] = 6  # a storage write inside the window, same thread
        assert tensor.tolist() == [5, 6, 2] and tensor.get([0]) == 5
        with pytest.raises(StaleViewError, match="a mutate\\(\\) window is open"):
            tensor.view().tolist()
    assert tensor.view().tolist() == [5, 6, 2]


def test_no_read_returns_values_of_two_versions_under_a_free_running_writer() -> None:
    # The promise for every interleaving: each read fails with StaleViewError or sees one
    # version (all values equal, as every write fills the storage with one number).
    count = 1 << 16
    tensor = Tensor.zeros([count])
    done = threading.Event()

    def write() -> None:
        k = 0
        while not done.is_set():
            k += 1
            tensor.as_mut_slice()[:] = float(k)

    writer, errors = _in_thread(write)
    seen = refused = 0
    try:
        for _ in range(60):
            try:
                values = tensor.view().to_numpy()
                total = sum(tensor.view()).item()
            except StaleViewError:
                refused += 1
                continue
            assert values.min() == values.max()  # one version
            assert total == count * int(total / count)  # one version summed
            seen += 1
    finally:
        done.set()
        writer.join(TIMEOUT)
    assert not errors and seen + refused == 60


# -- copies and pickling -------------------------------------------------------------------


@pytest.mark.parametrize(
    "duplicate", [copy.copy, copy.deepcopy, lambda t: pickle.loads(pickle.dumps(t))]
)
@pytest.mark.parametrize("dtype", ["bool", "int32", "int64", "float16", "float32", "float64"])
def test_a_copied_or_pickled_tensor_owns_its_own_storage(
    duplicate: Callable[[Tensor], Tensor], dtype: str
) -> None:
    rng = np.random.default_rng(len(dtype))
    values = rng.integers(0, 2, size=(2, 3)).astype(dtype)
    tensor = Tensor.from_numpy(values)
    tensor.as_mut_slice()[0] = values.reshape(-1)[0]  # version 1
    old = tensor.view()
    twin = duplicate(tensor)
    assert type(twin) is Tensor and twin is not tensor and not twin.shares_storage(tensor)
    assert twin.shape == tensor.shape and twin.dtype == tensor.dtype and twin.version == 0
    np.testing.assert_array_equal(twin.to_numpy(), values)
    twin.as_mut_slice()[:] = values.reshape(-1)[::-1]
    assert not old.is_stale and old.to_numpy().tolist() == values.tolist()


def test_pickling_inside_a_write_window_gives_an_unlocked_tensor() -> None:
    tensor = Tensor.arange(3)
    with tensor.mutate() as buffer:
        buffer[2] = 9
        restored = pickle.loads(pickle.dumps(tensor))
        copied = copy.copy(tensor)
    for twin in (restored, copied):
        assert twin.view().tolist() == [0, 1, 9]  # no window open: views work
        with twin.mutate() as handle:  # and a window opens
            handle[0] = 4
        assert twin.tolist() == [4, 1, 9]
    assert tensor.tolist() == [0, 1, 9]


def test_copying_or_pickling_a_view_keeps_its_layout_and_its_owner_sharing() -> None:
    tensor = Tensor.arange(6).reshape([2, 3]).materialize()
    first, second = tensor.view().T, tensor[1]
    assert copy.copy(first).owner is tensor and copy.copy(first).tolist() == first.tolist()
    deep = copy.deepcopy(first)
    assert deep.owner is not tensor and deep.tolist() == first.tolist()
    assert deep.strides == first.strides
    one, other = pickle.loads(pickle.dumps([first, second]))
    assert one.owner is other.owner  # one owner, unpickled once
    assert one.tolist() == first.tolist() and other.tolist() == second.tolist()
    with one.owner.mutate() as buffer:
        buffer[0] = 8
    assert one.is_stale and not first.is_stale


@pytest.mark.parametrize("duplicate", [copy.copy, copy.deepcopy, pickle.dumps])
def test_copying_or_pickling_a_stale_view_is_refused(duplicate: Callable[[Any], Any]) -> None:
    tensor = Tensor.arange(3)
    view = tensor.view()
    tensor.as_mut_slice()[0] = 1
    with pytest.raises(StaleViewError):
        duplicate(view)


def test_copyto_through_a_copied_tensor_leaves_the_original_alone() -> None:
    tensor = Tensor.arange(4)
    view = tensor.view()
    twin = copy.copy(tensor)
    copyto(twin.view()[1:3], 0)
    assert twin.tolist() == [0, 0, 0, 3] and view.tolist() == [0, 1, 2, 3]
    assert isinstance(copy.copy(view), TensorView)
