"""Reading a submission under a budget: a notebook is read first by a limited child process.

Reading a notebook (JSON, then every exercise cell's Python, then the implement modules
rebuilt from it) is the grader's own code, but its cost is the submission's choice: a 24 MiB
JSON of nested ``[]`` takes gigabytes to load, and 100,000-character f-strings take
``ast.unparse`` minutes. So before the grader reads a submission itself, a reader process
does exactly that reading (:func:`vet`) under :data:`READ_MEMORY_MB` of address space and
:data:`READ_SECONDS` of wall-clock time; a notebook it cannot read within them gets a row
saying so, and the grader never touches it. The grader's own reading of a vetted notebook then
costs what the reader's did, bounded.

One reader per grading thread, started once (importing the library takes seconds) and reused;
a reader that ran out of time or memory is ended and the next notebook gets a fresh one.
``python -m llmfs.course.grading.reader`` speaks :mod:`~llmfs.course.grading.channel` frames
on stdin and stdout: a setup frame (answered ``{"ready": true}`` once the library is imported,
so the import is never a notebook's time), then per notebook a frame ``{"label": ...,
"size": N}`` followed by ``N`` raw bytes; each answered by ``{"problem": ""}`` or
``{"problem": "why"}``.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from llmfs.course.grading import channel

#: CPU seconds one notebook's reading may take (an honest chapter notebook: well under 1).
READ_SECONDS = 10.0
#: Address space of the reader process (MiB): the library it imports, and the notebook read.
READ_MEMORY_MB = 512
#: The reader's wall-clock time, at most, as a multiple of its CPU budget (a starved reader).
WALL_FACTOR = 6.0
#: How long the reader may take to start (import the library), before any notebook's time.
STARTUP_SECONDS = 120.0


class Reader:
    """The grader's end of one reader process (started on first use)."""

    def __init__(self, setup: dict[str, Any], seconds: float, memory_mb: int) -> None:
        self.setup = {**setup, "memory_mb": memory_mb}
        self.seconds = seconds
        self.memory_mb = memory_mb
        self.process: subprocess.Popen[bytes] | None = None
        self.scratch: Path | None = None
        self.buffer = b""

    def _spawn(self) -> subprocess.Popen[bytes]:
        from llmfs.course.grading import sandbox  # the live-process registry: Ctrl-C ends it

        scratch = sandbox.run_folder().scratch("reader-")
        self.scratch = scratch
        process = sandbox._start(
            [sys.executable, "-m", "llmfs.course.grading.reader"],
            None,
            scratch=scratch,
            workdir=scratch,
            env=sandbox.sandbox_env({"HOME": str(scratch), "TMPDIR": str(scratch)}),
            limits=sandbox.Limits(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.buffer = b""
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(channel.encode(self.setup))
        process.stdin.flush()
        # Starting Python and importing the library is not the notebook's time.
        ready = self._reply(process.stdout.fileno(), time.monotonic() + STARTUP_SECONDS)
        if ready != {"ready": True}:
            sandbox._end(process)
            raise OSError("the notebook reader did not start")
        return process

    def close(self) -> None:
        """Ends the reader process."""
        if self.process is not None:
            from llmfs.course.grading import sandbox

            sandbox._end(self.process)
            for stream in (self.process.stdin, self.process.stdout):
                with contextlib.suppress(OSError):
                    if stream is not None:
                        stream.close()
            self.process = None
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def vet(self, data: bytes, label: str) -> str:
        """``""`` when the notebook in ``data`` was read within the budget (readable or not:
        an unreadable one gets its reason from the grader's own reading), else why not."""
        if self.process is None or self.process.poll() is not None:
            self.close()
            try:
                self.process = self._spawn()
            except OSError as error:
                return f"{label}: not graded ({error})"
        process = self.process
        assert process.stdin is not None and process.stdout is not None
        # The budget is the reader's CPU time (a loaded machine does not make an honest notebook
        # over budget); the wall clock only bounds a reader that gets no CPU at all.
        deadline = time.monotonic() + WALL_FACTOR * self.seconds
        spent = _cpu_seconds(process.pid)
        budget = (spent + self.seconds) if spent is not None else None
        # Writing may block on a full pipe while the reader is busy: a thread writes, so the
        # deadline holds either way.
        header = channel.encode({"label": label, "size": len(data)})

        def send() -> None:
            with contextlib.suppress(OSError, ValueError):
                assert process.stdin is not None
                process.stdin.write(header + data)
                process.stdin.flush()

        writer = threading.Thread(target=send, daemon=True)
        writer.start()
        reply = self._reply(process.stdout.fileno(), deadline, process.pid, budget)
        if reply is None:
            ended = process.poll() is not None
            self.close()
            writer.join(timeout=1)
            if ended:
                return _over_memory(label, self.memory_mb)
            return (
                f"{label}: reading the notebook took longer than {self.seconds:g} s of CPU time "
                "(the grader reads a notebook within that): not graded"
            )
        writer.join(timeout=1)
        problem = reply.get("problem")
        return problem if isinstance(problem, str) else f"{label}: the reader failed"

    def _reply(
        self, fd: int, deadline: float, pid: int | None = None, budget: float | None = None
    ) -> dict[str, Any] | None:
        from llmfs.course.grading.sandbox import _STOPPED

        while True:
            try:
                found = channel.split(self.buffer)
            except channel.FrameError:
                return None
            if found is not None:
                reply, self.buffer = found
                return dict(reply)
            left = deadline - time.monotonic()
            if left <= 0 or _STOPPED.is_set():
                return None
            if pid is not None and budget is not None:
                spent = _cpu_seconds(pid)
                if spent is not None and spent > budget:
                    return None
            ready, _, _ = select.select([fd], [], [], min(left, 0.1))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk


def _over_memory(label: str, memory_mb: int) -> str:
    return (
        f"{label}: reading the notebook took more than {memory_mb} MiB of memory (the grader "
        "reads a notebook within that): not graded"
    )


def _cpu_seconds(pid: int) -> float | None:
    """The CPU time a process has used (user and system), from ``/proc``; None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


_LOCAL = threading.local()
_ALL: list[Reader] = []
_ALL_LOCK = threading.Lock()


def reader_for(setup: dict[str, Any]) -> Reader:
    """This thread's reader for ``setup`` (a new one when the setup changed)."""
    reader = getattr(_LOCAL, "reader", None)
    if reader is None or reader.setup.get("key") != setup.get("key"):
        if reader is not None:
            reader.close()
        reader = Reader(setup, READ_SECONDS, READ_MEMORY_MB)
        _LOCAL.reader = reader
        with _ALL_LOCK:
            _ALL.append(reader)
    return reader


def close_all() -> None:
    """Ends every reader process (a grading run's end)."""
    with _ALL_LOCK:
        readers = list(_ALL)
        _ALL.clear()
    for reader in readers:
        reader.close()
    _LOCAL.__dict__.clear()


# --------------------------------------------------------------------------------------------
# the reader process
# --------------------------------------------------------------------------------------------


def read_like_the_grader(data: bytes, label: str, setup: dict[str, Any]) -> str:
    """Reads ``data`` as the grader does (the notebook, every exercise of the chapter, what its
    outputs reveal); ``""`` once done, readable or not (an unreadable notebook's reason is the
    grader's to give, from its own reading, which costs no more than this one)."""
    from llmfs.course import CourseError
    from llmfs.course.exercises.reveals import revealed_in
    from llmfs.course.grading import extract
    from llmfs.course.manifest import load_manifest

    manifest = load_manifest(setup["manifest"])
    try:
        notebook = extract.parse_notebook(data, label)
    except CourseError as error:
        if isinstance(error.__context__, MemoryError):  # the budget, not the notebook
            return _over_memory(label, int(setup.get("memory_mb", READ_MEMORY_MB)))
        return ""  # read within the budget: the grader's own reading gives the same reason
    tagged = extract.tagged_cells(notebook)
    exercises = {e.id: e for e in manifest.exercises()}
    for item in setup["exercises"]:
        exercise = exercises.get(item["id"])
        if exercise is None:
            continue
        extract.find_exercise(
            notebook,
            exercise,
            blank_source=item["blank_source"],
            function=item["function"],
            tagged=tagged,
        )
    revealed_in(notebook)
    return ""


def main() -> None:
    """Entry point: ``python -m llmfs.course.grading.reader`` (see the module docstring)."""
    from llmfs.course.grading.limits import apply_limits

    requests = sys.stdin.buffer
    replies = os.fdopen(os.dup(1), "wb")
    setup = channel.read_frame(requests)
    if setup is None:
        return
    apply_limits(int(setup.get("memory_mb", READ_MEMORY_MB)), 3600.0, 1)
    import llmfs.course.exercises.reveals
    import llmfs.course.grading.extract  # noqa: F401  (imported once, before any notebook)

    replies.write(channel.encode({"ready": True}))
    replies.flush()
    while True:
        request = channel.read_frame(requests)
        if request is None:
            return
        size = int(request.get("size", 0))
        data = requests.read(size) if size else b""
        if len(data) != size:
            return
        label = str(request.get("label", "notebook"))
        try:
            problem = read_like_the_grader(data, label, setup)
        except MemoryError:
            problem = _over_memory(label, int(setup.get("memory_mb", READ_MEMORY_MB)))
        except RecursionError:
            problem = f"{label}: nested deeper than the grader reads"
        except Exception as error:  # the grader's own reading would fail the same way
            problem = f"{label}: cannot be read ({type(error).__name__})"
        del data
        replies.write(channel.encode({"problem": problem}))
        replies.flush()


if __name__ == "__main__":
    main()
