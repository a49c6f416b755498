"""Hostile submissions against the sandbox: what a student's code tries, and what it gets.

One class of submissions of the grading chapter (see :func:`gradingkit.grading_chapter`) is
graded twice in the bubblewrap sandbox. Each hostile submission is a correct notebook with one
attack added (a first code cell for the notebook run, or one implement exercise's function for
the hidden cases), and each must score exactly what it answered right, with a row or run status
naming what happened:

* a cell that rewrites the gradebook, another student's notebook, the package and the solutions
  (paths known exactly, and found again through ``/proc``): every file outside the scratch folder
  is unchanged (hashed before and after), the other student keeps full marks;
* a cell that starts a child in a new session: nothing it started is alive after the run;
* a cell that connects to a socket this test listens on at 127.0.0.1: no connection arrives;
* a cell that prints 1 GiB: the run stops at the output cap, named in the run status;
* implement functions that walk the stack to the checks' reference answer, reach it through
  ``sys.modules``, call the listed library function from a helper thread, forge the worker's
  replies and end its process, or answer with garbage: each scores 0 and says why;
* a notebook nested 200 000 levels deep (unreadable: its rows say so, the class is graded) and
  a predict cell longer than the parser reads (that exercise scores 0 and says why);
* a probe function that answers right only when it cannot see the solutions, the grader's
  arguments in ``/proc`` or the network: full marks in the sandbox, and 0 in a ``--no-sandbox``
  control run (so the probe can fail).

A second grading of the same folder gives an identical gradebook.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any

import gradingkit as kit
import pytest

from llmfs.cli import main as llmfs_main
from llmfs.course.exercise_checks.shortcuts import resolve
from llmfs.course.exercise_checks.spec import draw_cases, expected_outcome, to_json
from llmfs.course.exercises.record import MAX_SOURCE_CHARS
from llmfs.course.grading.gradebook import Gradebook
from llmfs.course.grading.isolation import package_dir

pytestmark = [
    pytest.mark.notebooks,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed"),
]

CHAPTER = kit.grading_chapter()
KEY = kit.key_of(CHAPTER)
SEED = 424242
LIMITS = ["--cell-timeout", "20", "--timeout", "120", "--memory-mb", "1024", "--cases", "20"]
# A hostile function breaks its callers too: only functions no other exercise's solution calls.
IMPLEMENTS = [
    item
    for item in kit.checked_implements(KEY)
    if not any(
        f"{item.function}(" in other.solution_source
        for other in kit.checked_implements(KEY)
        if other is not item
    )
]
CHECKED = {i.exercise.id for i in KEY.exercises if i.exercise.kind in ("predict", "implement")}
FULL = sum(i.exercise.points for i in KEY.exercises if i.exercise.id in CHECKED)
TOKEN = "llmfs-hostile-orphan-7d1f"
SOLUTIONS = kit.REPO / "solutions"


def _plain(item: Any) -> bool:
    spec = item.spec
    return spec.prepare is None and spec.kernel is None and spec.call is None


# The checks' own reference answer, written in the course's checks module, for a function taking
# plain JSON arguments: the target of the stack walk and of the sys.modules bypass.
REFERENCED = [
    i
    for i in IMPLEMENTS
    if _plain(i) and str(i.spec.reference.__module__).startswith("llmfs.course.")
]


def _thread_target() -> tuple[Any, str, bool] | None:
    """An implement exercise and a listed library function that answers its cases by itself
    (with list arguments as tuples, or not): what a helper thread would call."""
    for item in IMPLEMENTS:
        if not _plain(item) or item.spec.shortcuts is None:
            continue
        cases = draw_cases(item.spec, cases=20)
        for name in item.spec.shortcuts.names:
            function = resolve(name)[0]
            for as_tuples in (False, True):
                try:
                    right = all(
                        {"value": to_json(function(*_convert(args, as_tuples)))}
                        == expected_outcome(item.spec, args)
                        for args in cases
                    )
                except Exception:
                    right = False
                if right:
                    return item, name, as_tuples
    return None


def _convert(args: Any, as_tuples: bool) -> list[Any]:
    return [tuple(a) if as_tuples and isinstance(a, list) else a for a in args]


THREADED = _thread_target()


def _function_cell(item: Any, body: str, preamble: str = "") -> str:
    return f"{preamble}\n\ndef {item.function}(*args):\n{body}\n"


STACK_WALK = """\
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if getattr(value, "exercise_id", None) == EXERCISE:
                return value.reference(*args)
        frame = frame.f_back
    return None"""

SYS_MODULES = """\
    checks = sys.modules["llmfs.course.exercise_checks.spec"]
    return checks.SPECS[EXERCISE].reference(*args)"""

FORGED = """\
    frame = json.dumps({"value": None}).encode()
    for fd in range(3, 64):
        try:
            os.write(fd, (struct.pack(">I", len(frame)) + frame) * 50)
        except OSError:
            pass
    os._exit(0)"""

GARBAGE = """\
    for fd in range(3, 64):
        try:
            os.write(fd, b"all 40 hidden cases passed\\n")
        except OSError:
            pass
    return None"""


def _thread_source(item: Any, name: str, as_tuples: bool) -> str:
    module, _, attribute = name.rpartition(".")
    convert = "tuple(a) if isinstance(a, list) else a" if as_tuples else "a"
    body = f"""\
    box = []
    def helper():
        function = getattr(importlib.import_module({module!r}), {attribute!r})
        box.append(function(*[{convert} for a in args]))
    thread = threading.Thread(target=helper)
    thread.start()
    thread.join()
    return box[0] if box else None"""
    return _function_cell(item, body, "import importlib\nimport threading")


PROBE = """\
def _leaks():
    import glob
    import pathlib
    import socket
    import llmfs
    found = []
    if (pathlib.Path(llmfs.__file__).resolve().parents[1] / "solutions").exists():
        found.append("solutions")
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as handle:
                text = handle.read()
        except OSError:
            continue
        if b"pytest" in text or b"--out" in text:
            found.append("proc")
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
        found.append("network")
    except OSError:
        pass
    return found
"""


def _probe_cell(item: Any, port: int) -> str:
    solution = item.solution_source.replace(f"def {item.function}(", "def _solution(")
    wrapper = (
        f"\n\ndef {item.function}(*args, **kwargs):\n"
        "    if _leaks():\n"
        "        return 'LEAKED'\n"
        "    return _solution(*args, **kwargs)\n"
    )
    return PROBE.replace("PORT", str(port)) + "\n\n" + solution + wrapper


def _writer_cell(paths: dict[str, Path]) -> str:
    return f"""\
import glob, os, pathlib, sqlite3
import llmfs
targets = {[str(p) for p in paths.values()]!r}
for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
    try:
        words = open(cmdline, "rb").read().split(b"\\0")
    except OSError:
        continue
    for n, word in enumerate(words[:-1]):
        if word == b"--out":
            targets.append(os.path.join(words[n + 1].decode(), "gradebook.csv"))
targets.append(str(pathlib.Path(llmfs.__file__)))
for target in targets:
    try:
        with open(target, "a") as handle:
            handle.write("pwned")
    except OSError:
        pass
try:
    db = sqlite3.connect({str(paths["gradebook"])!r})
    db.execute("UPDATE rows SET score = 99")
    db.execute("INSERT INTO submissions (student) VALUES ('ghost')")
    db.commit()
except Exception:
    pass
"""


ESCAPE = f"""\
import subprocess, sys
subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(600)  # {TOKEN}"],
    start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
"""

NETWORK = """\
import socket
try:
    connection = socket.create_connection(("127.0.0.1", PORT), timeout=2)
    connection.sendall(b"hello from a submission")
    connection.close()
except OSError:
    pass
"""

PRINT_1GIB = """\
line = "x" * (1 << 20)
for _ in range(1024):
    print(line)
"""


class Listener:
    """A socket on 127.0.0.1 that records every connection it accepts."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(16)
        self.socket.settimeout(0.2)
        self.port = self.socket.getsockname()[1]
        self.accepted: list[Any] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                connection, address = self.socket.accept()
            except OSError:
                continue
            self.accepted.append(address)
            connection.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.socket.close()


def _hashes(*folders: Path) -> dict[str, str]:
    found = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _orphans() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if TOKEN.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def _grade(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = llmfs_main(["grade", *argv])
    return code, out.getvalue() + err.getvalue()


def _class(root: Path, port: int) -> tuple[Path, dict[str, tuple[dict[str, Any], float]]]:
    """The submissions folder and student -> (notebook, expected score)."""
    correct = kit.correct_notebook(CHAPTER)
    subs = root / "submissions"
    out = root / "out"
    paths = {
        "victim": subs / "correct.ipynb",
        "gradebook": out / "gradebook.sqlite",
        "csv": out / "gradebook.csv",
        "canary": out / "canary.txt",
        "solution": kit.REPO / CHAPTER.solution,
        "package": package_dir() / "__init__.py",
    }
    built: dict[str, tuple[dict[str, Any], float]] = {
        "correct": (correct, FULL),
        "writer": (kit.with_cell_first(correct, _writer_cell(paths)), FULL),
        "escape": (kit.with_cell_first(correct, ESCAPE), FULL),
        "network": (kit.with_cell_first(correct, NETWORK.replace("PORT", str(port))), FULL),
        "print1gib": (kit.with_cell_first(correct, PRINT_1GIB), FULL),
    }
    if REFERENCED:
        item = REFERENCED[0]
        head = f"import sys\nEXERCISE = {item.exercise.id!r}"
        lost = FULL - item.exercise.points
        for name, body in (("stackwalk", STACK_WALK), ("sysmodules", SYS_MODULES)):
            cell = _function_cell(item, body, head)
            built[name] = (kit.set_source(correct, item.exercise.id, cell), lost)
    if THREADED is not None:
        item, target, as_tuples = THREADED
        cell = _thread_source(item, target, as_tuples)
        built["thread"] = (
            kit.set_source(correct, item.exercise.id, cell),
            FULL - item.exercise.points,
        )
    if IMPLEMENTS:
        item = IMPLEMENTS[0]
        lost = FULL - item.exercise.points
        forged = _function_cell(item, FORGED, "import json\nimport os\nimport struct")
        built["forged"] = (kit.set_source(correct, item.exercise.id, forged), lost)
        garbage = _function_cell(item, GARBAGE, "import os")
        built["garbage"] = (kit.set_source(correct, item.exercise.id, garbage), lost)
        probe = _probe_cell(item, port)
        built["probe"] = (kit.set_source(correct, item.exercise.id, probe), FULL)
    predict = next(i for i in KEY.exercises if i.exercise.kind == "predict")
    cell = next(
        c for c in correct["cells"] if predict.exercise.tag in c["metadata"].get("tags", [])
    )
    padded = "".join(cell["source"]) + "\n_pad = [" + "0, " * (MAX_SOURCE_CHARS // 3) + "]"
    built["longcell"] = (
        kit.set_source(correct, predict.exercise.id, padded),
        FULL - predict.exercise.points,
    )
    subs.mkdir(parents=True)
    out.mkdir()
    paths["canary"].write_text("the instructor's own file\n", encoding="utf-8")
    for student, (notebook, _) in built.items():
        (subs / f"{student}.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    # A notebook nested far deeper than the JSON parser's stack: unreadable, never an abort.
    deep = json.dumps(correct)[:-1] + ', "x": ' + "[" * 200_000 + "]" * 200_000 + "}"
    (subs / "deepjson.ipynb").write_text(deep, encoding="utf-8")
    built["deepjson"] = ({}, 0.0)
    return subs, built


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("hostile")
    listener = Listener()
    try:
        subs, built = _class(root, listener.port)
        watched = (package_dir(), SOLUTIONS, subs)
        before = _hashes(*watched)
        canary = (root / "out" / "canary.txt").read_bytes()
        common = [str(subs), "--chapter", CHAPTER.id, "--seed", str(SEED), "--jobs", "2", *LIMITS]
        code, output = _grade(*common, "--out", str(root / "out"))
        assert code == 0, output
        after = _hashes(*watched)
        orphans = _orphans()
        code2, output2 = _grade(*common, "--out", str(root / "again"))
        assert code2 == 0, output2
        with Gradebook(root / "out" / "gradebook.sqlite") as book:
            rows = {(r.student, r.exercise): r for r in book.rows()}
            submissions = {s.student: s for s in book.submissions()}
            snapshot = book.snapshot()
        with Gradebook(root / "again" / "gradebook.sqlite") as book:
            again = book.snapshot()
        yield {
            "root": root,
            "built": built,
            "rows": rows,
            "submissions": submissions,
            "before": before,
            "after": after,
            "canary": canary,
            "orphans": orphans,
            "accepted": list(listener.accepted),
            "snapshot": snapshot,
            "again": again,
        }
    finally:
        listener.close()
        for pid in _orphans():
            with contextlib.suppress(OSError):
                os.kill(pid, 9)


def _total(hostile: dict[str, Any], student: str) -> float:
    rows = [r for (s, _), r in hostile["rows"].items() if s == student]
    return sum(r.score for r in rows if r.score is not None)


def _messages(hostile: dict[str, Any], student: str) -> str:
    return " | ".join(r.message for (s, _), r in hostile["rows"].items() if s == student)


def test_every_hostile_submission_scores_exactly_what_it_answered_right(
    hostile: dict[str, Any],
) -> None:
    for student, (_, expected) in hostile["built"].items():
        assert _total(hostile, student) == pytest.approx(expected), (
            student,
            _messages(hostile, student),
            hostile["submissions"][student].run_message,
        )


def test_an_unreadable_or_oversized_notebook_is_its_students_rows_never_an_abort(
    hostile: dict[str, Any],
) -> None:
    deep = [r for (s, _), r in hostile["rows"].items() if s == "deepjson"]
    assert deep and all(r.status == "unreadable" and "nested deeper" in r.message for r in deep)
    long = _messages(hostile, "longcell")
    assert f"more than the {MAX_SOURCE_CHARS} read" in long, long


def test_no_file_outside_the_scratch_folder_changes(hostile: dict[str, Any]) -> None:
    assert hostile["after"] == hostile["before"]
    out = hostile["root"] / "out"
    assert (out / "canary.txt").read_bytes() == hostile["canary"]
    assert "pwned" not in (out / "gradebook.csv").read_text(encoding="utf-8")
    assert "ghost" not in hostile["submissions"]
    assert all(r.score != 99 for r in hostile["rows"].values())


def test_nothing_a_submission_started_outlives_the_run(hostile: dict[str, Any]) -> None:
    assert hostile["orphans"] == []
    assert hostile["submissions"]["escape"].run_status == "ok"


def test_no_connection_to_127_0_0_1_succeeds_from_student_code(hostile: dict[str, Any]) -> None:
    assert hostile["accepted"] == []


def test_a_1_gib_print_stops_at_the_output_cap_and_says_so(hostile: dict[str, Any]) -> None:
    run = hostile["submissions"]["print1gib"]
    assert run.run_status == "error" and run.run_cell == 1
    assert "printed more than" in run.run_message


@pytest.mark.skipif(not REFERENCED, reason="no reference answer of the checks takes plain data")
@pytest.mark.parametrize("student", ["stackwalk", "sysmodules"])
def test_reaching_the_checks_reference_answer_scores_nothing_and_says_so(
    hostile: dict[str, Any], student: str
) -> None:
    row = hostile["rows"][(student, REFERENCED[0].exercise.id)]
    assert (row.status, row.score) == ("wrong", 0.0)
    assert "the checks' answer" in row.message


@pytest.mark.skipif(THREADED is None, reason="no listed function answers a case by itself")
def test_a_helper_thread_does_not_escape_the_shortcut_guard(hostile: dict[str, Any]) -> None:
    assert THREADED is not None
    item, target, _ = THREADED
    row = hostile["rows"][("thread", item.exercise.id)]
    assert (row.status, row.score) == ("wrong", 0.0)
    assert target in row.message


@pytest.mark.skipif(not IMPLEMENTS, reason="no implement exercise with a hidden check")
def test_forged_or_garbage_worker_replies_score_nothing_and_say_so(hostile: dict[str, Any]) -> None:
    exercise = IMPLEMENTS[0].exercise.id
    forged = hostile["rows"][("forged", exercise)]
    assert (forged.status, forged.score) == ("wrong", 0.0)
    assert "forged" in forged.message
    garbage = hostile["rows"][("garbage", exercise)]
    assert (garbage.status, garbage.score) == ("wrong", 0.0)
    assert "malformed" in garbage.message


def test_a_second_grading_of_the_same_folder_is_identical(hostile: dict[str, Any]) -> None:
    assert hostile["again"] == hostile["snapshot"]


@pytest.mark.skipif(not IMPLEMENTS, reason="no implement exercise with a hidden check")
def test_the_probe_sees_nothing_in_the_sandbox_and_everything_without_it(
    hostile: dict[str, Any], tmp_path: Path
) -> None:
    exercise = IMPLEMENTS[0].exercise.id
    assert hostile["rows"][("probe", exercise)].score == IMPLEMENTS[0].exercise.points
    listener = Listener()
    try:
        subs = tmp_path / "subs"
        subs.mkdir()
        correct = kit.correct_notebook(CHAPTER)
        probe = kit.set_source(correct, exercise, _probe_cell(IMPLEMENTS[0], listener.port))
        (subs / "probe.ipynb").write_text(json.dumps(probe), encoding="utf-8")
        argv = [str(subs), "--chapter", CHAPTER.id, "--seed", str(SEED), "--no-execute"]
        code, output = _grade(*argv, *LIMITS, "--no-sandbox", "--out", str(tmp_path / "out"))
        assert code == 0, output
        assert "WARNING: --no-sandbox" in output
    finally:
        listener.close()
    with Gradebook(tmp_path / "out" / "gradebook.sqlite") as book:
        rows = {r.exercise: r for r in book.rows()}
    assert rows[exercise].score == 0.0 and "LEAKED" in rows[exercise].message
    assert all("--no-sandbox" in r.message for r in rows.values())


def test_no_scratch_folder_or_connection_file_is_left_behind(hostile: dict[str, Any]) -> None:
    from llmfs.course.grading.sandbox import run_folder

    # Every scratch folder (and, outside a sandbox, every kernel connection file) lives in the
    # run folder; after the runs only its lock is left.
    folder = run_folder().path
    assert sorted(p.name for p in folder.iterdir()) == ["run.lock"]


SLEEPER = """\
import time
time.sleep(120)
"""


def _kernel_under(marker: str) -> bool:
    """Whether a grading kernel runs with an ancestor whose command line holds ``marker``."""
    for pid in _sandbox_processes("llmfs.course.grading.kernel"):
        for _ in range(20):
            try:
                stat = Path(f"/proc/{pid}/stat").read_bytes()
                pid = int(stat.rsplit(b")", 1)[1].split()[1])
                if pid <= 1:
                    break
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return True
            except (OSError, ValueError, IndexError):
                break
    return False


def _sandbox_processes(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


def test_a_killed_grader_takes_its_sandboxes_along_and_the_next_run_cleans_up(
    tmp_path: Path,
) -> None:
    import signal
    import subprocess
    import sys

    subs = tmp_path / "submissions"
    subs.mkdir()
    sleeper = kit.with_cell_first(kit.correct_notebook(CHAPTER), SLEEPER)
    (subs / "sleeper.ipynb").write_text(json.dumps(sleeper), encoding="utf-8")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = dict(os.environ, PYTHONPATH=str(kit.REPO), TMPDIR=str(temporary))
    argv = [sys.executable, "-m", "llmfs", "grade", str(subs), "--chapter", CHAPTER.id]
    argv += ["--seed", str(SEED), *LIMITS]
    process = subprocess.Popen(
        [*argv, "--out", str(tmp_path / "out")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # The sandbox's folders are its own (nothing it writes reaches the host): its kernel
        # running, seen in /proc under a sandbox of this run, tells the sleeper has started.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not _kernel_under(str(temporary)):
            assert process.poll() is None
            time.sleep(0.05)
        assert _kernel_under(str(temporary))
        time.sleep(3)
        assert process.poll() is None
        # The kernel runs now: its connection file (with its key) is in the sandbox's own /tmp.
        assert list(temporary.rglob("kernel-*.json")) == []
        assert _sandbox_processes(str(temporary))
    finally:
        os.kill(process.pid, signal.SIGKILL)  # the grader alone, not its process group
        process.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _sandbox_processes(str(temporary)):
        time.sleep(0.1)
    assert _sandbox_processes(str(temporary)) == []
    assert len(list(temporary.glob("llmfs-run-*"))) == 1  # what the killed run left
    (subs / "sleeper.ipynb").unlink()
    (subs / "empty.ipynb").write_text(json.dumps(kit.student_notebook(CHAPTER)), encoding="utf-8")
    done = subprocess.run(
        [*argv, "--no-execute", "--out", str(tmp_path / "out2")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert list(temporary.iterdir()) == []
