"""The grader's side of the sandbox: start a limited child process, wait, kill, read plain data.

* :func:`run_notebook` runs a whole notebook in a fresh kernel (via
  :mod:`~llmfs.course.grading.runner` and :mod:`~llmfs.course.grading.kernel`) in a scratch
  folder and returns how the run went (:class:`RunOutcome`).
* :func:`run_functions` runs learners' implement functions in
  :mod:`~llmfs.course.grading.worker`, one case per request, and returns the outcomes as JSON
  data (:class:`FunctionRun`).

With an :class:`~llmfs.course.grading.isolation.Isolation` every child runs inside bubblewrap
(no network, read-only system, nothing of the grader's files, its own PID namespace: see
:mod:`~llmfs.course.grading.isolation`); without one (``llmfs check`` on the learner's own
notebook, ``llmfs grade --no-sandbox``) it is a plain child process with the same limits.

Every child starts in a new session (process group) so that a timeout ends it together with
anything it started; :func:`kill_all` ends every child still alive (the grader calls it on
Ctrl-C). Every scratch folder lives in this process's
:class:`~llmfs.course.grading.isolation.RunFolder`, removed at exit and, after a SIGKILL, by the
next run. Nothing a child writes is trusted beyond its shape: a verdict that is not what was
asked for, a reply the worker was not asked for, or one that is not an outcome, is reported as
such.

The notebook runner's verdict comes back through a pipe the grader made (never a file in the
scratch folder, which the kernel can write): it is read with a deadline and a size cap, and
counts only when the runner then exits with status 0 having written exactly one verdict. Every
wait of the grader's is in short slices that watch :func:`stop_all`, so Ctrl-C ends a run at
once whatever the sandbox does.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmfs.course.grading import cgroups, channel
from llmfs.course.grading.isolation import Isolation, RunFolder
from llmfs.course.grading.limits import Limits, sandbox_env

_LIVE: set[subprocess.Popen[Any]] = set()
_LIVE_LOCK = threading.Lock()
#: Set by :func:`stop_all` (an interrupted run): from then on no process is started, so a
#: submission's grading cannot start a fresh worker after the one it ran was killed.
_STOPPED = threading.Event()


class GradingStopped(RuntimeError):
    """Raised instead of starting a process once :func:`stop_all` has run."""


_KERNELS: dict[int, int] = {}  # an unsandboxed runner's pid -> its kernel's pid
_GROUPS: dict[int, cgroups.Group] = {}  # a sandbox's pid -> its control group
#: The most bytes a notebook runner's verdict pipe may carry (two small frames).
VERDICT_BYTES = 64 * 1024
#: How often a wait of the grader's looks whether the run was interrupted (seconds).
_SLICE = 0.1

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


_RUN: RunFolder | None = None
_RUN_LOCK = threading.Lock()


def run_folder() -> RunFolder:
    """This process's run folder (created on first use, removed at exit); creating it removes
    what runs killed earlier left behind."""
    global _RUN
    with _RUN_LOCK:
        if _RUN is None:
            _RUN = RunFolder()
            atexit.register(_RUN.close)
        return _RUN


def _start(
    argv: list[str],
    isolation: Isolation | None,
    *,
    scratch: Path,
    workdir: Path,
    env: dict[str, str],
    limits: Limits,
    inputs: tuple[Path, ...] = (),
    **kwargs: Any,
) -> subprocess.Popen[Any]:
    group = None
    cwd = workdir
    if isolation is not None:
        isolation.share(*inputs)
        argv = isolation.command(
            argv, scratch=scratch, workdir=workdir, env=env, inputs=inputs, disk_mb=limits.disk_mb
        )
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        group = isolation.group(limits)
        if group is not None:
            argv = cgroups.wrap(argv, group)
        cwd = scratch  # the workdir exists inside the sandbox only
    if _STOPPED.is_set():
        if group is not None:
            group.close()
        raise GradingStopped("the grading was interrupted: no new process is started")
    try:
        process = subprocess.Popen(
            argv, start_new_session=True, env=env, cwd=str(cwd), close_fds=True, **kwargs
        )
    except BaseException:
        if group is not None:
            group.close()
        raise
    with _LIVE_LOCK:
        _LIVE.add(process)
        if group is not None:
            _GROUPS[process.pid] = group
        stopped = _STOPPED.is_set()
    if stopped:  # stop_all ran while this one started: it was not among those it ended
        _end(process)
        raise GradingStopped("the grading was interrupted: no new process is started")
    return process


def _end(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
    with _LIVE_LOCK:
        _LIVE.discard(process)
        group = _GROUPS.pop(process.pid, None)
    if group is not None:
        group.close()


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            kill(pid, signal.SIGKILL)


def allow_starts() -> None:
    """Lets processes start again (a new grading run, after an interrupted one)."""
    _STOPPED.clear()


def stop_all() -> None:
    """No process starts from now on (until :func:`allow_starts`), and every one still running
    is ended: what an interrupted run calls, so that it ends at once."""
    with _LIVE_LOCK:
        _STOPPED.set()
    kill_all()


def kill_all() -> None:
    """Ends every sandboxed process still running (their groups, and their kernels)."""
    with _LIVE_LOCK:
        processes = list(_LIVE)
        kernels = list(_KERNELS.values())
    for kernel in kernels:
        _kill_group(kernel)
    for process in processes:
        _end(process)


def _scratch_env(scratch: Path, isolation: Isolation | None) -> dict[str, str]:
    """Where a child's home, temporary files and Jupyter runtime files go: inside the sandbox,
    its private /tmp (gone with it); else the scratch folder (gone with the run folder)."""
    home = scratch / "home"
    home.mkdir(exist_ok=True)
    temporary = "/tmp" if isolation is not None else str(scratch / "tmp")
    if isolation is None:
        Path(temporary).mkdir(exist_ok=True)
    return {
        "HOME": str(home),
        "TMPDIR": temporary,
        "IPYTHONDIR": str(home / ".ipython"),
        "JUPYTER_RUNTIME_DIR": f"{temporary}/jupyter-runtime",
        "MPLCONFIGDIR": str(home / ".matplotlib"),
    }


def run_notebook(
    notebook: dict[str, Any],
    limits: Limits,
    *,
    env: dict[str, str] | None = None,
    isolation: Isolation | None = None,
) -> RunOutcome:
    """Runs ``notebook`` (JSON data) top to bottom in a fresh limited kernel and says how it went.

    The kernel's working folder is a new scratch folder holding only a copy of the notebook;
    ``env`` adds environment variables (by default the attempts log points into that folder, so
    the run never writes to the caller's log); ``isolation`` runs it all inside the sandbox.
    Never raises for anything the notebook does.
    """
    scratch = run_folder().scratch("notebook-")
    try:
        return _run_notebook_in(scratch, notebook, limits, env or {}, isolation)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_notebook_in(
    scratch: Path,
    notebook: dict[str, Any],
    limits: Limits,
    env: dict[str, str],
    isolation: Isolation | None,
) -> RunOutcome:
    workdir = scratch / "work"
    workdir.mkdir()
    # Beside the working folder, not in it: mounted read-only, and the kernel's folder is its own.
    notebook_file = scratch / "submission.ipynb"
    notebook_file.write_text(json.dumps(notebook), encoding="utf-8")
    sandboxed = isolation is not None
    reader, writer = os.pipe()
    job = {
        "notebook": str(notebook_file),
        "workdir": str(workdir),
        "scratch": str(scratch),
        "cell_timeout": limits.cell_timeout,
        "memory_mb": limits.memory_mb,
        "cpu_seconds": limits.total_timeout + 5,
        "file_mb": limits.file_mb,
        "output_mb": limits.output_mb,
        # RLIMIT_NPROC counts every process of the user's outside a sandbox's user namespace.
        "processes": limits.processes if sandboxed else None,
        "verdict_fd": writer,
    }
    job_file = scratch / "job.json"
    job_file.write_text(json.dumps(job), encoding="utf-8")
    extra = _scratch_env(scratch, isolation)
    extra["LLMFS_ATTEMPTS"] = str(workdir / ".llmfs" / "attempts.jsonl")
    extra.update(env)
    try:
        process = _start(
            [sys.executable, "-m", "llmfs.course.grading.runner", str(job_file)],
            isolation,
            scratch=scratch,
            workdir=workdir,
            env=sandbox_env(extra),
            limits=limits,
            inputs=(job_file, notebook_file),
            pass_fds=(writer,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    finally:
        os.close(writer)  # the runner's copy is the only writer left
    try:
        return _await_verdict(process, reader, limits, sandboxed)
    finally:
        os.close(reader)
        kernel = _KERNELS.get(process.pid)
        if kernel is not None:
            _kill_group(kernel)
        _end(process)
        if kernel is not None:
            _kill_group(kernel)
        with _LIVE_LOCK:
            _KERNELS.pop(process.pid, None)


def _died(why: str) -> RunOutcome:
    return RunOutcome("died", None, f"the notebook runner ended without a verdict ({why})")


def _await_verdict(
    process: subprocess.Popen[Any], reader: int, limits: Limits, sandboxed: bool
) -> RunOutcome:
    """Reads the runner's frames from ``reader`` until it closes, then waits for its exit; the
    verdict, or why there is none. Never blocks longer than :data:`_SLICE` at a time."""
    deadline = time.monotonic() + limits.total_timeout
    stopped = RunOutcome("not run", None, "the grading was interrupted")
    buffer = b""
    frames: list[dict[str, Any]] = []
    while True:
        if _STOPPED.is_set():
            return stopped
        left = deadline - time.monotonic()
        if left <= 0:
            return RunOutcome(
                "timeout", None, f"the notebook ran longer than {limits.total_timeout:g} s in all"
            )
        ready, _, _ = select.select([reader], [], [], min(_SLICE, left))
        if not ready:
            continue
        chunk = os.read(reader, 1 << 16)
        if not chunk:
            break
        buffer += chunk
        if len(buffer) > VERDICT_BYTES:
            return _died(f"it wrote more than {VERDICT_BYTES} bytes")
        try:
            while (found := channel.split(buffer)) is not None:
                frame, buffer = found
                frames.append(frame)
                kernel = frame.get("kernel")
                if not sandboxed and len(frames) == 1 and _is_int(kernel) and kernel > 1:
                    with _LIVE_LOCK:  # outside a sandbox the grader ends the kernel by its pid
                        _KERNELS[process.pid] = int(kernel)
        except channel.FrameError as error:
            return _died(str(error))
    while process.poll() is None:  # the pipe closed: the runner is ending
        if _STOPPED.is_set():
            return stopped
        if time.monotonic() > deadline:
            return RunOutcome(
                "timeout", None, f"the notebook ran longer than {limits.total_timeout:g} s in all"
            )
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=_SLICE)
    if process.returncode != 0:
        return _died(f"exit status {process.returncode}")
    if buffer:
        return _died("a truncated frame")
    verdicts = [frame for frame in frames if "kernel" not in frame]
    if len(verdicts) != 1 or len(frames) - len(verdicts) > 1:
        return _died(f"{len(verdicts)} verdicts where one is written")
    return _verdict(verdicts[0])


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _verdict(data: dict[str, Any]) -> RunOutcome:
    """The verdict in ``data``, checked to be one: a known status, a cell position or none, a
    message (kept to its first line, 300 characters)."""
    status, cell, message = data.get("status"), data.get("cell"), data.get("message")
    if set(data) != {"status", "cell", "message"}:
        return _died("a verdict with other keys")
    if status not in RUN_STATUSES or not isinstance(message, str):
        return RunOutcome("died", None, "the notebook runner wrote an unreadable verdict")
    if not (cell is None or _is_int(cell)):
        cell = None
    lines = message.splitlines()
    return RunOutcome(str(status), cell, (lines[0] if lines else "")[:300])


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
    *,
    isolation: Isolation | None = None,
) -> FunctionRun:
    """Runs one function on its cases in a fresh limited worker (see :func:`run_functions`)."""
    task = FunctionTask(exercise or "exercise", source, function, tuple(cases))
    return run_functions([task], limits, isolation=isolation)[task.exercise]


def run_functions(
    tasks: list[FunctionTask], limits: Limits, *, isolation: Isolation | None = None
) -> dict[str, FunctionRun]:
    """Runs every task in a limited worker process, in order; returns exercise -> run.

    One worker runs the tasks one after the other (one interpreter start for a whole
    submission), one case per request. A task that ends the worker, takes longer than
    ``limits.implement_timeout`` in all, or gets a reply that is not one outcome for the case
    asked (more than one reply, a reply that is not an outcome, not JSON) gets a
    :class:`FunctionRun` with ``outcomes=None`` and a ``problem`` naming what happened, and a
    fresh worker runs the tasks after it. Never raises for anything the learner's code does.
    """
    results: dict[str, FunctionRun] = {}
    remaining = list(tasks)
    while remaining:
        done = _run_worker(remaining, limits, results, isolation)
        remaining = remaining[done:]
    return results


#: The keys an outcome may carry, and their types (``value`` is any JSON data).
_OUTCOME_KEYS = {"value": object, "error": str, "shortcut": str, "via": str, "type": str}


def outcome_problem(reply: Any) -> str:
    """Why ``reply`` is not one case's outcome (``""`` when it is one)."""
    if not isinstance(reply, dict):
        return "not a JSON object"
    unknown = sorted(set(reply) - set(_OUTCOME_KEYS))
    if unknown:
        return f"unknown keys {', '.join(map(repr, unknown))[:80]}"
    if ("value" in reply) == ("error" in reply):
        return "neither one value nor one error"
    for key, kind in _OUTCOME_KEYS.items():
        if key in reply and not isinstance(reply[key], kind):
            return f"{key!r} is not {kind.__name__}"
    return ""


class _Channel:
    """The grader's end of a worker's pipes: one request, then exactly one reply."""

    def __init__(self, process: subprocess.Popen[Any]) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.requests = process.stdin
        self.replies = process.stdout.fileno()
        self.buffer = b""

    def ask(self, message: dict[str, Any], deadline: float) -> tuple[dict[str, Any] | None, str]:
        """Sends ``message`` and reads its reply before ``deadline``: (reply, "") or (None, why)
        with why one of ``timeout``, ``ended``, ``forged: ...``, ``malformed: ...``."""
        # Each request carries a fresh number its reply must repeat: a reply written for an
        # earlier request, or before the worker read this one, does not fit.
        number = secrets.token_hex(8)
        try:
            self.requests.write(channel.encode({**message, "id": number}))
            self.requests.flush()
        except (BrokenPipeError, OSError, ValueError):
            return None, "ended"
        while True:
            try:
                found = channel.split(self.buffer)
            except channel.FrameError as error:
                return None, f"malformed: {error}"
            if found is not None:
                reply, self.buffer = found
                break
            left = deadline - time.monotonic()
            if left <= 0:
                return None, "timeout"
            ready, _, _ = select.select([self.replies], [], [], min(left, _SLICE))
            if not ready:
                if _STOPPED.is_set():  # an interrupted run: its worker is being ended
                    return None, "ended"
                continue
            chunk = os.read(self.replies, 1 << 16)
            if not chunk:
                return None, "malformed: a truncated reply" if self.buffer else "ended"
            self.buffer += chunk
        if reply.get("id") != number:
            return None, "forged: a reply to a request not made"
        # An honest worker now waits for the next request: anything more was not asked for.
        if self.buffer or self._pending():
            return None, "forged: more than one reply to one request"
        del reply["id"]
        return reply, ""

    def _pending(self) -> bool:
        ready, _, _ = select.select([self.replies], [], [], 0)
        if not ready:
            return False
        chunk = os.read(self.replies, 1 << 16)
        self.buffer += chunk
        return bool(chunk)


def _problem_text(why: str, limits: Limits, process: subprocess.Popen[Any]) -> str:
    if why == "timeout":
        return f"the hidden cases ran longer than {limits.implement_timeout:g} s"
    if why == "ended":
        _end(process)
        return f"the function ended its process (exit status {process.returncode})"
    kind, _, detail = why.partition(": ")
    return f"the worker's reply was {kind}: {detail}"


def _run_worker(
    tasks: list[FunctionTask],
    limits: Limits,
    results: dict[str, FunctionRun],
    isolation: Isolation | None,
) -> int:
    """Runs ``tasks`` in one worker until it finishes or fails; returns how many got a result."""
    scratch = run_folder().scratch("implement-")
    try:
        workdir = scratch / "work"
        workdir.mkdir()
        process = _start(
            [sys.executable, "-m", "llmfs.course.grading.worker"],
            isolation,
            scratch=scratch,
            workdir=workdir,
            env=sandbox_env(_scratch_env(scratch, isolation)),
            limits=limits,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        try:
            return _drive(process, tasks, limits, results, sandboxed=isolation is not None)
        finally:
            _end(process)
            for stream in (process.stdin, process.stdout):
                with contextlib.suppress(OSError):
                    if stream is not None:
                        stream.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _drive(
    process: subprocess.Popen[Any],
    tasks: list[FunctionTask],
    limits: Limits,
    results: dict[str, FunctionRun],
    *,
    sandboxed: bool,
) -> int:
    link = _Channel(process)
    setup = {
        "memory_mb": limits.memory_mb,
        "cpu_seconds": (limits.implement_timeout + limits.compile_timeout) * len(tasks) + 10,
        "file_mb": limits.file_mb,
        "case_timeout": limits.case_timeout,
        "compile_timeout": limits.compile_timeout,
        # RLIMIT_NPROC counts every process of the user's outside a sandbox's user namespace.
        "processes": limits.processes if sandboxed else None,
    }
    # Starting an interpreter and importing the library is not the learner's time.
    ready, why = link.ask({"setup": setup}, time.monotonic() + max(60.0, limits.implement_timeout))
    if ready is None or ready != {"ready": True}:
        results[tasks[0].exercise] = FunctionRun(
            None, _problem_text(why or "malformed: not ready", limits, process)
        )
        return 1
    for count, task in enumerate(tasks):
        # Defining may compile a kernel: that has its own limit, and the cases' time starts after.
        deadline = time.monotonic() + limits.implement_timeout + limits.compile_timeout
        request = {"exercise": task.exercise, "source": task.source, "function": task.function}
        defined, why = link.ask({"define": request}, deadline)
        deadline = time.monotonic() + limits.implement_timeout
        if defined is None:
            results[task.exercise] = FunctionRun(None, _problem_text(why, limits, process))
            return count + 1
        if isinstance(defined.get("load_error"), str) and len(defined) == 1:
            results[task.exercise] = FunctionRun(None, defined["load_error"][:200])
            continue
        if defined != {"defined": True}:
            problem = _problem_text("malformed: not a definition's reply", limits, process)
            results[task.exercise] = FunctionRun(None, problem)
            return count + 1
        outcomes: list[dict[str, Any]] = []
        for number, args in enumerate(task.cases, start=1):
            reply, why = link.ask({"case": list(args)}, deadline)
            if reply is not None:
                shape = outcome_problem(reply)
                if shape:
                    reply, why = None, f"malformed: {shape}"
            if reply is None:
                problem = _problem_text(why, limits, process)
                results[task.exercise] = FunctionRun(
                    None, f"{problem} (case {number} of {len(task.cases)})"
                )
                return count + 1
            outcomes.append(reply)
        results[task.exercise] = FunctionRun(tuple(outcomes))
    return len(tasks)
