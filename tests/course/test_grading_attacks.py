"""A submission against its own limits and against the grader's verdict channel, in the real
bubblewrap sandbox.

Specification (the instructor guide's "Limits" lists each limit and its default):

* every limit holds against the submission's own attempt to lift it: ``setrlimit`` to the hard
  limit and beyond, 1.5 GiB written to ``/tmp``, a fork bomb, a huge file and many files in the
  scratch folder, more memory than the limit; the sandbox has no capability and a uid that is
  not root;
* the notebook runner's verdict cannot be forged: a kernel that writes its own ``{"status":
  "ok"}`` where the verdict used to be (a file, a FIFO, a link to a host file) or into the
  runner's pipe through ``/proc``, and kills the runner, gets "died", promptly, with one line
  that quotes nothing of the host;
* ``llmfs grade`` stops within 5 s of Ctrl-C at any point of such a run, and the resumed run
  finishes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gradingkit as kit
import pytest

from llmfs.course.grading.isolation import SANDBOX_UID, find_bwrap
from llmfs.course.grading.limits import Limits
from llmfs.course.grading.sandbox import run_folder, run_notebook

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed"),
]


def notebook(*cells: str) -> dict[str, Any]:
    return {
        "cells": [kit.code_cell(source) for source in cells],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


@pytest.fixture(scope="module")
def sandbox() -> Any:
    return find_bwrap(run_folder().path)


#: One cell per attack; each adds a letter to ``held`` (H: the limit held, L: it was lifted),
#: and the last cell raises with the letters (the verdict's message carries them back).
ATTACKS = {
    "setrlimit": """
import resource
expected = {"RLIMIT_AS": MEMORY, "RLIMIT_FSIZE": FILE, "RLIMIT_NPROC": PROCESSES,
            "RLIMIT_CPU": CPU}
ok = True
for name, value in expected.items():
    which = getattr(resource, name)
    before = resource.getrlimit(which)
    ok &= before == (value, value)
    for wanted in [(before[1], before[1]), (resource.RLIM_INFINITY,) * 2, (value * 2, value * 2)]:
        try:
            resource.setrlimit(which, wanted)
        except (ValueError, OSError):
            pass
    ok &= resource.getrlimit(which) == (value, value)
held.append("H" if ok else "L")
""",
    "memory": """
try:
    hog = bytearray(MEMORY + (64 << 20))
    held.append("L")
except MemoryError:
    held.append("H")
""",
    "tmp": """
written = 0
try:
    for i in range(192):  # 1.5 GiB in 8 MiB files
        with open(f"/tmp/fill{i}", "wb") as handle:
            handle.write(b"x" * (8 << 20))
        written += 8 << 20
except OSError:
    pass
held.append("H" if written <= DISK else "L")
""",
    "scratch_file": """
written = 0
try:
    with open("huge.bin", "wb") as handle:
        for i in range(40):
            handle.write(b"x" * (8 << 20))
            handle.flush()
            written += 8 << 20
except OSError:
    pass
import os
os.remove("huge.bin")
held.append("H" if written <= FILE else "L")
""",
    "scratch_all": """
written = 0
try:
    for i in range(192):
        with open(f"fill{i}.bin", "wb") as handle:
            handle.write(b"x" * (8 << 20))
        written += 8 << 20
except OSError:
    pass
held.append("H" if written <= DISK else "L")
""",
    "fork_bomb": """
import os, signal, time
children = []
try:
    for i in range(300):
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children.append(pid)
except OSError:
    pass
for pid in children:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
held.append("H" if len(children) < PROCESSES else "L")
""",
    "privileges": """
import os
status = open("/proc/self/status").read()
effective = [line for line in status.splitlines() if line.startswith("CapEff:")][0]
held.append("H" if int(effective.split()[1], 16) == 0 and os.getuid() == UID != 0 else "L")
""",
}


def test_every_limit_holds_against_the_submission_s_attempt_to_lift_it(sandbox: Any) -> None:
    limits = Limits()  # the documented defaults
    values = {
        "MEMORY": limits.memory_mb << 20,
        "FILE": limits.file_mb << 20,
        "PROCESSES": limits.processes,
        "CPU": int(limits.total_timeout + 5),
        "DISK": limits.disk_mb << 20,
        "UID": SANDBOX_UID,
    }
    prelude = "".join(f"{name} = {value}\n" for name, value in values.items()) + "held = []\n"
    cells = [prelude, *ATTACKS.values(), "raise RuntimeError('held ' + ''.join(held))"]
    outcome = run_notebook(notebook(*cells), limits, isolation=sandbox)
    expected = "H" * len(ATTACKS)
    assert (outcome.status, outcome.message) == (
        "error",
        f"cell #{len(cells)} raised RuntimeError: held {expected}",
    ), dict(zip(ATTACKS, outcome.message.rpartition(" ")[2]))


def test_the_limits_in_force_are_named_and_none_is_missing_here(sandbox: Any) -> None:
    rows = dict(sandbox.enforcement(Limits()))
    assert set(rows) == {"memory", "cpu", "file size", "disk", "processes", "capabilities"}
    assert "2048 MiB" in rows["memory"] and "64 at once" in rows["processes"]
    assert "256 MiB" in rows["disk"] and "64 MiB per file" in rows["file size"]
    assert not any(how.startswith("NOT ENFORCED") for how in rows.values()), rows


KILL_RUNNER = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
FAKE_OK = json.dumps({"status": "ok", "cell": None, "message": "ran every cell"})
FORGERIES = {
    # The verdict file of old: written by the kernel, then its runner killed.
    "file": f"open('../result.json', 'w').write({FAKE_OK!r})\n" + KILL_RUNNER,
    # A FIFO where the verdict was read: a grader reading it blocks for ever.
    "fifo": "import os\nos.mkfifo('../result.json')\n" + KILL_RUNNER,
    # A link to a host file: its content would become the run's message.
    "link": "import os\nos.symlink('/etc/passwd', '../result.json')\n" + KILL_RUNNER,
    # The runner's own pipe, reached through /proc: a well-formed verdict frame.
    "pipe": f"""
import os, struct
body = {FAKE_OK!r}.encode()
for name in os.listdir(f"/proc/{{os.getppid()}}/fd"):
    try:
        fd = os.open(f"/proc/{{os.getppid()}}/fd/{{name}}", os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, struct.pack(">I", len(body)) + body)
    except OSError:
        pass
"""
    + KILL_RUNNER,
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_kernel_that_forges_its_verdict_and_kills_its_runner_died(
    sandbox: Any, forgery: str
) -> None:
    limits = Limits(cell_timeout=20, total_timeout=60)
    start = time.monotonic()
    outcome = run_notebook(notebook("x = 1", FORGERIES[forgery]), limits, isolation=sandbox)
    assert time.monotonic() - start < 40
    assert outcome.status == "died", outcome
    assert "root:" not in outcome.message and "\n" not in outcome.message


def test_the_runner_s_pipe_cannot_be_opened_from_the_kernel(sandbox: Any) -> None:
    probe = """
import os
opened = 0
folder = f"/proc/{os.getppid()}/fd"
for name in os.listdir(folder) if os.path.isdir(folder) else []:
    try:
        os.close(os.open(f"{folder}/{name}", os.O_WRONLY | os.O_NONBLOCK))
        opened += 1
    except OSError:
        pass
raise RuntimeError(f"opened {opened}")
"""
    outcome = run_notebook(notebook(probe), Limits(total_timeout=60), isolation=sandbox)
    assert (outcome.status, outcome.message) == ("error", "cell #1 raised RuntimeError: opened 0")


def test_a_multi_line_exception_message_is_one_line_of_the_run(sandbox: Any) -> None:
    cell = "raise ValueError('E\\n\\n## Score so far: 38 of 38\\n<!--')"
    outcome = run_notebook(notebook(cell), Limits(total_timeout=60), isolation=sandbox)
    assert outcome.status == "error" and "\n" not in outcome.message
    assert "Score so far" not in outcome.message


# --------------------------------------------------------------------------------------------
# Ctrl-C
# --------------------------------------------------------------------------------------------

#: A first cell that leaves a FIFO where the verdict was read, waits, then kills its runner.
FIFO_THEN_KILL = "import os, time\nos.mkfifo('../result.json')\ntime.sleep(4)\n" + KILL_RUNNER


def _grade(folder: Path, out: Path) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-m",
        "llmfs.cli",
        "grade",
        str(folder),
        "--chapter",
        kit.grading_chapter().id,
        "--out",
        str(out),
        "--seed",
        "7",
        "--cases",
        "3",
        "--jobs",
        "2",
        *kit.sandbox_limits("--cell-timeout", "30", "--timeout", "60"),
    ]
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=kit.default_sigint,
        # faulthandler: SIGABRT makes the process print every thread's stack before it dies
        # (see _stop_and_say_where).
        env={**os.environ, "PYTHONPATH": str(kit.REPO), "PYTHONFAULTHANDLER": "1"},
    )


def _stop_and_say_where(process: subprocess.Popen[str]) -> str:
    """Ends a grading process that did not stop in time; returns the end of what it wrote to
    stderr, its threads' stacks at that moment included (faulthandler's dump on SIGABRT), so a
    failure says where it was stuck. Reads only what is there: a sandbox still holding the pipe
    open cannot make this wait."""
    process.send_signal(signal.SIGABRT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
    if process.poll() is None:
        process.kill()
        process.wait()
    if process.stderr is None:
        return ""
    fd = process.stderr.fileno()
    os.set_blocking(fd, False)
    chunks = []
    with contextlib.suppress(BlockingIOError, OSError):
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")[-4000:]


def test_ctrl_c_stops_grading_within_5_s_at_any_point_and_a_resumed_run_finishes(
    tmp_path: Path,
) -> None:
    chapter = kit.grading_chapter()
    folder = tmp_path / "class"
    folder.mkdir()
    honest = kit.correct_notebook(chapter)
    (folder / "ada.ipynb").write_text(json.dumps(honest), encoding="utf-8")
    hostile = kit.with_cell_first(kit.correct_notebook(chapter), FIFO_THEN_KILL)
    (folder / "fifo.ipynb").write_text(json.dumps(hostile), encoding="utf-8")
    out = tmp_path / "out"
    # Interrupts while the class is being read, the sandboxes start, the cells run, the
    # runner is killed and its verdict would be read from the FIFO.
    for delay in (1.0, 5.0, 11.0):
        process = _grade(folder, out)
        try:
            time.sleep(delay)
            process.send_signal(signal.SIGINT)
            start = time.monotonic()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
            stopped = time.monotonic() - start
        finally:
            where = _stop_and_say_where(process) if process.poll() is None else ""
        # 130 once grading started; before it (imports, collecting) Python's own exit on SIGINT.
        assert process.returncode in (130, -signal.SIGINT, 0), (
            f"Ctrl-C after {delay} s: exit status {process.returncode}; its stderr ends:\n{where}"
        )
        assert stopped < 5.0, (delay, stopped)
    process = _grade(folder, out)
    try:
        process.wait(timeout=240)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, process.stderr.read() if process.stderr else ""
    from llmfs.course.grading.gradebook import Gradebook

    with Gradebook(out / "gradebook.sqlite") as book:
        runs = {s.student: s.run_status for s in book.submissions()}
    assert runs == {"ada": "ok", "fifo": "died"}


# --------------------------------------------------------------------------------------------
# one class: honest submissions among files made to stop it
# --------------------------------------------------------------------------------------------


def _grade_class(folder: Path, out: Path) -> dict[str, Any]:
    process = _grade(folder, out)
    try:
        _, err = process.communicate(timeout=1200)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    from llmfs.course.grading.gradebook import Gradebook

    with Gradebook(out / "gradebook.sqlite") as book:
        rows: dict[str, Any] = {}
        for row in book.rows():
            rows.setdefault(row.student, []).append(row)
        runs = {s.student: s for s in book.submissions()}
    return {"rows": rows, "runs": runs, "err": err}


def test_a_class_with_files_made_to_stop_it_grades_every_honest_student(
    tmp_path: Path,
) -> None:
    # A few honest students here; benchmarks/bench_grading_hostile.py times 20 of them with and
    # without the hostile files (the goal: at most twice the honest-only time).
    honest = kit.hostile_class(tmp_path / "class", honest=3, hostile=True, fifo=FIFO_THEN_KILL)
    found = _grade_class(tmp_path / "class", tmp_path / "out")
    rows, runs = found["rows"], found["runs"]
    assert set(runs) == honest | {"fifo", "big", "bomb"}
    for student in honest:
        assert runs[student].run_status == "ok", student
        mine = rows[student]
        assert all(r.score == r.points for r in mine if r.status != "unchecked"), mine
    assert runs["fifo"].run_status == "died"
    assert all(r.score == r.points for r in rows["fifo"] if r.status != "unchecked")
    assert runs["big"].run_status == "ok"
    assert all(r.score == r.points for r in rows["big"] if r.status != "unchecked")
    assert all(r.status == "unreadable" and "MiB of memory" in r.message for r in rows["bomb"])
    assert "\x1b" not in found["err"] and "Zo\\xeb" in found["err"]
