"""The copy threads: a count set like PyTorch's, tasks that all finish before the caller goes on,
errors that arrive on the calling thread, and a pool that survives ``fork``."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from llmfs.tensor import TensorError
from llmfs.tensor.backends import threads
from llmfs.tensor.backends.threads import get_num_threads, run_all, set_num_threads


@pytest.fixture(autouse=True)
def restore_count() -> Iterator[None]:
    before = get_num_threads()
    yield
    set_num_threads(before)


def test_the_count_is_set_and_read_back() -> None:
    set_num_threads(3)
    assert get_num_threads() == 3
    set_num_threads(1)
    assert get_num_threads() == 1


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_a_count_that_is_not_a_whole_number_of_at_least_one_is_refused(bad: object) -> None:
    with pytest.raises(TensorError, match=r"whole number >= 1, got"):
        set_num_threads(bad)  # type: ignore[arg-type]


def test_the_default_count_comes_from_the_environment_or_the_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(threads.ENVIRONMENT_VARIABLE, "3")
    assert threads._default_count() == 3
    monkeypatch.setenv(threads.ENVIRONMENT_VARIABLE, "many")
    with pytest.raises(TensorError, match=r"LLMFS_NUM_THREADS must be a whole number >= 1, got"):
        threads._default_count()
    monkeypatch.delenv(threads.ENVIRONMENT_VARIABLE)
    assert 1 <= threads._default_count() <= threads.DEFAULT_MAX_THREADS


def test_every_task_runs_and_the_work_is_shared_between_threads() -> None:
    set_num_threads(3)
    names: list[str] = []
    lock = threading.Lock()

    def task() -> None:
        time.sleep(0.05)  # long enough that one thread cannot run them all first
        with lock:
            names.append(threading.current_thread().name)

    run_all([task] * 3)
    assert len(names) == 3
    assert threading.current_thread().name in names  # the caller runs the first task itself
    assert len(set(names)) >= 2


def test_one_thread_runs_every_task_on_the_caller() -> None:
    set_num_threads(1)
    names: list[str] = []
    run_all([lambda: names.append(threading.current_thread().name)] * 4)
    assert names == [threading.current_thread().name] * 4


def test_an_error_reaches_the_caller_after_every_task_has_finished() -> None:
    set_num_threads(2)
    finished: list[int] = []

    def slow() -> None:
        time.sleep(0.1)
        finished.append(1)

    def broken() -> None:
        raise TensorError("piece 0 failed")

    with pytest.raises(TensorError, match="piece 0 failed"):
        run_all([broken, slow])
    assert finished == [1]


def test_a_task_that_runs_tasks_runs_them_serially_instead_of_waiting_on_the_pool() -> None:
    set_num_threads(2)
    inner: list[str] = []

    def outer() -> None:
        run_all([lambda: inner.append(threading.current_thread().name)] * 2)

    run_all([lambda: None, outer])
    assert len(inner) == 2 and len(set(inner)) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork exists on POSIX systems only")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork with threads: ours are remade
def test_a_forked_child_makes_its_own_pool() -> None:
    set_num_threads(2)
    run_all([lambda: None, lambda: None])  # the parent's pool exists before the fork
    pid = os.fork()
    if pid == 0:  # the child: its copy of the pool has no threads
        done: list[int] = []
        try:
            run_all([lambda: done.append(1), lambda: done.append(2)])
            os._exit(0 if sorted(done) == [1, 2] else 1)
        except BaseException:
            os._exit(2)
    deadline = time.monotonic() + 60
    while (waited := os.waitpid(pid, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:  # a child waiting on its parent's dead threads hangs
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child's copy did not finish in 60 s: it used a dead pool")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(waited[1]) == 0
