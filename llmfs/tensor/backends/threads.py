"""How many threads the numpy backend's large copies use, and the pool that runs them.

A large copy of the numpy backend (:mod:`llmfs.tensor.backends.numpy_copies`: ``materialize`` of
a transpose or a broadcast, a result written through a permuted output) is split into
independent pieces, one per thread, each writing its own rows of the result. NumPy releases the
interpreter lock while it copies, so the pieces run on separate cores; a transpose is limited by
how fast one core walks memory in two orders, not by the memory bus, so two threads make it
about twice as fast. Small copies stay on the calling thread: a thread hand-off costs tens of
microseconds. The reference backend copies one value at a time and uses no threads.

The count follows PyTorch's names: :func:`get_num_threads` and :func:`set_num_threads`. It
starts from the environment variable ``LLMFS_NUM_THREADS`` when that is set, else from the cores
this process may run on, at most :data:`DEFAULT_MAX_THREADS`. ``set_num_threads(1)`` makes every
copy single-threaded. Results never depend on the count: the pieces write disjoint rows.

The pool is made on first use and made again after ``fork`` (a forked child has none of its
parent's threads) or after the count changes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from llmfs.tensor.errors import TensorError

#: The default thread count's ceiling: copies are bound by memory traffic, which four cores
#: already saturate on laptops and servers alike.
DEFAULT_MAX_THREADS = 4

#: The environment variable that sets the starting thread count.
ENVIRONMENT_VARIABLE = "LLMFS_NUM_THREADS"


def _checked_count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TensorError(f"{where} must be a whole number >= 1, got {value!r}")
    return value


def _default_count() -> int:
    text = os.environ.get(ENVIRONMENT_VARIABLE)
    if text is not None:
        try:
            value: object = int(text)
        except ValueError:
            value = text
        return _checked_count(value, f"the environment variable {ENVIRONMENT_VARIABLE}")
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity masks
        cores = os.cpu_count() or 1
    return max(1, min(cores, DEFAULT_MAX_THREADS))


class _Pool:
    """The worker threads (count - 1 of them: the calling thread runs one piece itself)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count: int | None = None
        self.executor: ThreadPoolExecutor | None = None
        self.pid = -1
        self.worker = threading.local()

    def threads(self) -> int:
        with self.lock:
            if self.count is None:
                self.count = _default_count()
            return self.count

    def set(self, count: int) -> None:
        with self.lock:
            self.count = count
            self._drop()

    def _drop(self) -> None:
        if self.executor is not None and self.pid == os.getpid():
            self.executor.shutdown(wait=False)
        self.executor = None

    def submit(self, task: Callable[[], None]) -> Future[None]:
        with self.lock:
            if self.executor is None or self.pid != os.getpid():
                self._drop()
                workers = max(1, (self.count or _default_count()) - 1)
                self.executor = ThreadPoolExecutor(
                    workers, thread_name_prefix="llmfs-copy", initializer=self._mark_worker
                )
                self.pid = os.getpid()
            return self.executor.submit(task)

    def _mark_worker(self) -> None:
        self.worker.active = True

    def in_worker(self) -> bool:
        return getattr(self.worker, "active", False)


_POOL = _Pool()


def get_num_threads() -> int:
    """How many threads a large copy is split over (1: the calling thread alone)."""
    return _POOL.threads()


def set_num_threads(count: int) -> None:
    """Sets how many threads a large copy is split over, for the whole process.

    Raises :class:`TensorError` unless ``count`` is a whole number >= 1.
    """
    _POOL.set(_checked_count(count, "set_num_threads' count"))


def run_all(tasks: Sequence[Callable[[], None]]) -> None:
    """Runs independent ``tasks`` at once, the first on the calling thread and the others on the
    pool, and returns when all are done. The first exception raised by any task is raised here,
    after every task has finished (so no task still writes into memory the caller may free).

    A task run from a pool thread runs the rest serially too: the pool never waits on itself.
    """
    if len(tasks) <= 1 or _POOL.in_worker() or _POOL.threads() <= 1:
        for task in tasks:
            task()
        return
    futures = [_POOL.submit(task) for task in tasks[1:]]
    error: BaseException | None = None
    try:
        tasks[0]()
    except BaseException as raised:
        error = raised
    for future in futures:
        try:
            future.result()
        except BaseException as raised:
            error = error or raised
    if error is not None:
        raise error


__all__ = [
    "DEFAULT_MAX_THREADS",
    "ENVIRONMENT_VARIABLE",
    "get_num_threads",
    "run_all",
    "set_num_threads",
]
