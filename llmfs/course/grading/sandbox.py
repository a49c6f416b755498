"""The grader's side of the sandbox: start a limited child process, wait, kill, read plain data.

* :func:`run_notebook` runs a whole notebook in a fresh kernel (via
  :mod:`~llmfs.course.grading.runner` and :mod:`~llmfs.course.grading.kernel`) in a temporary
  folder and returns how the run went (:class:`RunOutcome`).
* :func:`run_function` runs a learner's implement function on cases in
  :mod:`~llmfs.course.grading.worker` and returns its outcomes as JSON data.

Every child starts in a new session (process group) so that a timeout ends it together with
anything it started; :func:`kill_all` ends every child still alive (the grader calls it on
Ctrl-C). Nothing a child prints is trusted beyond its shape: a verdict or outcomes list that is
not what was asked for is reported as such.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmfs.course.grading.limits import Limits, sandbox_env

_LIVE: set[subprocess.Popen[Any]] = set()
_LIVE_LOCK = threading.Lock()
_PID_FILES: dict[int, Path] = {}  # runner pid -> where it writes its kernel's pid

RUN_STATUSES = ("ok", "timeout", "died", "error", "not run")


@dataclass(frozen=True)
class RunOutcome:
    """How a notebook run went: ``status`` in :data:`RUN_STATUSES`, the failing cell's 1-based
    position (None when none failed) and a one-line message."""

    status: str
    cell: int | None
    message: str

    def describe(self) -> str:
        """``ok``, ``timeout in cell #7``, ``died in cell #3``, ``error in cell #5: ...``."""
        if self.status == "ok" or self.cell is None:
            return f"{self.status}: {self.message}" if self.status != "ok" else "ok"
        return f"{self.status} in cell #{self.cell}: {self.message}"


def _start(argv: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    process = subprocess.Popen(argv, start_new_session=True, **kwargs)
    with _LIVE_LOCK:
        _LIVE.add(process)
    return process


def _end(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
    with _LIVE_LOCK:
        _LIVE.discard(process)


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            kill(pid, signal.SIGKILL)


def kill_all() -> None:
    """Ends every sandboxed process still running (their groups, and their kernels)."""
    with _LIVE_LOCK:
        processes = list(_LIVE)
        pid_files = list(_PID_FILES.values())
    for path in pid_files:
        kernel = _kernel_pid(path)
        if kernel is not None:
            _kill_group(kernel)
    for process in processes:
        _end(process)


def run_notebook(
    notebook: dict[str, Any], limits: Limits, *, env: dict[str, str] | None = None
) -> RunOutcome:
    """Runs ``notebook`` (JSON data) top to bottom in a fresh limited kernel and says how it went.

    The kernel's working folder is a new temporary folder holding only a copy of the notebook;
    ``env`` adds environment variables (by default the attempts log points into that folder, so
    the run never writes to the caller's log). Never raises for anything the notebook does.
    """
    with tempfile.TemporaryDirectory(prefix="llmfs-grade-") as scratch_name:
        scratch = Path(scratch_name)
        workdir = scratch / "work"
        workdir.mkdir()
        (workdir / "submission.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
        job = {
            "notebook": str(workdir / "submission.ipynb"),
            "workdir": str(workdir),
            "scratch": str(scratch),
            "cell_timeout": limits.cell_timeout,
            "memory_mb": limits.memory_mb,
            "cpu_seconds": limits.total_timeout + 5,
            "file_mb": limits.file_mb,
            "pid_file": str(scratch / "kernel.pid"),
            "result_file": str(scratch / "result.json"),
        }
        (scratch / "job.json").write_text(json.dumps(job), encoding="utf-8")
        extra = {
            "LLMFS_ATTEMPTS": str(workdir / ".llmfs" / "attempts.jsonl"),
            # Connection files of a killed kernel go away with the temporary folder.
            "JUPYTER_RUNTIME_DIR": str(scratch / "runtime"),
        }
        extra.update(env or {})
        process = _start(
            [sys.executable, "-m", "llmfs.course.grading.runner", str(scratch / "job.json")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=sandbox_env(extra),
            cwd=str(scratch),
        )
        with _LIVE_LOCK:
            _PID_FILES[process.pid] = scratch / "kernel.pid"
        timed_out = False
        try:
            process.wait(timeout=limits.total_timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            kernel = _kernel_pid(scratch / "kernel.pid")
            if kernel is not None and (timed_out or process.poll() is None):
                _kill_group(kernel)
            _end(process)
            if kernel is not None:
                _kill_group(kernel)
            with _LIVE_LOCK:
                _PID_FILES.pop(process.pid, None)
        if timed_out:
            return RunOutcome(
                "timeout", None, f"the notebook ran longer than {limits.total_timeout:g} s in all"
            )
        return _verdict(scratch / "result.json")


def _kernel_pid(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _verdict(path: Path) -> RunOutcome:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return RunOutcome("died", None, "the notebook runner ended without a verdict")
    status = data.get("status") if isinstance(data, dict) else None
    cell = data.get("cell") if isinstance(data, dict) else None
    message = data.get("message") if isinstance(data, dict) else None
    if status not in RUN_STATUSES or not isinstance(message, str):
        return RunOutcome("died", None, "the notebook runner wrote an unreadable verdict")
    if not (cell is None or (isinstance(cell, int) and not isinstance(cell, bool))):
        cell = None
    return RunOutcome(str(status), cell, message[:300])


@dataclass(frozen=True)
class FunctionRun:
    """The outcomes of one implement function on the cases asked (one per case), or why none."""

    outcomes: tuple[dict[str, Any], ...] | None
    problem: str = ""


@dataclass(frozen=True)
class FunctionTask:
    """One implement exercise to run: the learner's module, the function's name, the cases."""

    exercise: str
    source: str
    function: str
    cases: tuple[tuple[Any, ...], ...]


def run_function(
    source: str,
    function: str,
    cases: list[tuple[Any, ...]],
    limits: Limits,
    exercise: str = "",
) -> FunctionRun:
    """Runs one function on its cases in a fresh limited worker (see :func:`run_functions`)."""
    task = FunctionTask(exercise or "exercise", source, function, tuple(cases))
    return run_functions([task], limits)[task.exercise]


def run_functions(tasks: list[FunctionTask], limits: Limits) -> dict[str, FunctionRun]:
    """Runs every task in a limited worker process, in order; returns exercise -> run.

    One worker runs the tasks one after the other (one interpreter start for a whole
    submission). A task that ends the worker, or takes longer than ``limits.implement_timeout``,
    gets a :class:`FunctionRun` with ``outcomes=None`` and a ``problem``, and a fresh worker runs
    the tasks after it. Never raises for anything the learner's code does.
    """
    results: dict[str, FunctionRun] = {}
    remaining = list(tasks)
    while remaining:
        done = _run_worker(remaining, limits, results)
        remaining = remaining[done:]
    return results


def _run_worker(tasks: list[FunctionTask], limits: Limits, results: dict[str, FunctionRun]) -> int:
    """Runs ``tasks`` in one worker until it finishes or fails; returns how many got a result."""
    import queue

    with tempfile.TemporaryDirectory(prefix="llmfs-implement-") as workdir:
        job = {
            "tasks": [
                {
                    "exercise": t.exercise,
                    "source": t.source,
                    "function": t.function,
                    "cases": [list(args) for args in t.cases],
                }
                for t in tasks
            ],
            "memory_mb": limits.memory_mb,
            "cpu_seconds": limits.implement_timeout * len(tasks) + 1,
            "file_mb": limits.file_mb,
            "case_timeout": limits.case_timeout,
            "workdir": workdir,
        }
        process = _start(
            [sys.executable, "-m", "llmfs.course.grading.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=sandbox_env(),
            cwd=workdir,
            text=True,
        )
        lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines.put(line)
            lines.put(None)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            assert process.stdin is not None
            with contextlib.suppress(BrokenPipeError, OSError):
                process.stdin.write(json.dumps(job))
                process.stdin.close()
            for count, task in enumerate(tasks):
                try:
                    line = lines.get(timeout=limits.implement_timeout)
                except queue.Empty:
                    results[task.exercise] = FunctionRun(
                        None, f"the hidden cases ran longer than {limits.implement_timeout:g} s"
                    )
                    return count + 1
                if line is None:
                    _end(process)
                    code = process.returncode
                    results[task.exercise] = FunctionRun(
                        None, f"the function ended its process (exit status {code})"
                    )
                    return count + 1
                results[task.exercise] = _parse_run(line, task)
            return len(tasks)
        finally:
            _end(process)
            reader.join(timeout=5)


def _parse_run(line: str, task: FunctionTask) -> FunctionRun:
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        return FunctionRun(None, "the worker's answer is not JSON")
    if not isinstance(data, dict) or data.get("exercise") != task.exercise:
        return FunctionRun(None, "the worker answered for another exercise")
    if isinstance(data.get("load_error"), str):
        return FunctionRun(None, data["load_error"][:200])
    outcomes = data.get("outcomes")
    if not isinstance(outcomes, list) or len(outcomes) != len(task.cases):
        return FunctionRun(None, "the worker did not answer one outcome per case")
    return FunctionRun(tuple(o if isinstance(o, dict) else {} for o in outcomes))
