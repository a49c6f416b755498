"""Acceptance: ``llmfs grade`` on a class of real, empty, partial and hostile submissions.

The submissions are built from the course's own student notebook of the chapter that exercises
the most of the grader (see :func:`gradingkit.grading_chapter`), with answers taken from the
solution notebook. One grading run (executed kernels, two jobs, short timeouts) fills a gradebook;
each test reads what it says about one submission. Every hostile notebook must score exactly
what it answered right, say what happened in its row, and never stop the run.
"""

from __future__ import annotations

import contextlib
import html
import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gradingkit as kit
import pytest

from llmfs.cli import main as llmfs_main
from llmfs.course.exercise_checks.spec import expected_outcome, outcome_of, outcomes_match
from llmfs.course.grading.gradebook import Gradebook
from llmfs.course.grading.reports import feedback_file

pytestmark = pytest.mark.notebooks

CHAPTER = kit.grading_chapter()
KEY = kit.key_of(CHAPTER)
SEED = 20260101
CASES = 40
LIMITS = ["--cell-timeout", "5", "--timeout", "90", "--memory-mb", "1024", "--cases", str(CASES)]
# The scores do not depend on the sandbox: without bubblewrap these tests grade unsandboxed (the
# hostile suite, test_grading_hostile.py, needs the sandbox and skips without it).
if shutil.which("bwrap") is None:
    LIMITS.append("--no-sandbox")
PREDICTS = [item for item in KEY.exercises if item.exercise.kind == "predict"]
EXPLAINS = [item for item in KEY.exercises if item.exercise.kind == "explain"]
IMPLEMENTS = kit.checked_implements(KEY)
# A table of the visible cases keyed by their JSON arguments needs arguments that are JSON, and
# a function no other exercise calls (a table breaks its callers on the hidden cases too).
TABLED = [
    item
    for item in IMPLEMENTS
    if getattr(item.spec, "prepare", None) is None
    and not any(
        f"{item.function}(" in other.solution_source for other in IMPLEMENTS if other is not item
    )
]
CHECKED = {item.exercise.id for item in [*PREDICTS, *IMPLEMENTS]}
FULL = sum(item.exercise.points for item in KEY.exercises if item.exercise.id in CHECKED)
FIRST = PREDICTS[0]


def _partial() -> tuple[dict[str, Any], float]:
    notebook = kit.student_notebook(CHAPTER)
    expected = 0.0
    for item in PREDICTS:
        names = list(item.answers)
        keep = (len(names) + 1) // 2
        values = {
            name: item.answers[name] if n < keep else kit.wrong_value(item.answers[name])
            for n, name in enumerate(names)
        }
        notebook = kit.set_source(
            notebook, item.exercise.id, kit.fill_fields(item.blank_source, values)
        )
        if item.scoring == "per_field":
            expected += item.exercise.points * keep / len(names)
        elif keep == len(names):
            expected += item.exercise.points
    for item in IMPLEMENTS:
        source = f"def {item.function}(*args):\n    return 'not the answer'\n"
        notebook = kit.set_source(notebook, item.exercise.id, source)
    for item in EXPLAINS:
        text = item.blank_source + "\n\nA view shares the storage, so the strides differ.\n"
        notebook = kit.set_source(notebook, item.exercise.id, text)
    return notebook, expected


def _duplicated() -> dict[str, Any]:
    notebook = kit.correct_notebook(CHAPTER)
    position = kit.extract.tagged_cells(notebook)[FIRST.exercise.id][0]
    copy_cell = json.loads(json.dumps(notebook["cells"][position - 1]))
    wrong = {name: kit.wrong_value(value) for name, value in FIRST.answers.items()}
    copy_cell["source"] = kit.fill_fields(FIRST.blank_source, wrong)
    copy_cell["id"] = "duplicated"
    notebook["cells"].insert(position, copy_cell)
    return notebook


def _deleted() -> dict[str, Any]:
    notebook = kit.correct_notebook(CHAPTER)
    position = kit.extract.tagged_cells(notebook)[FIRST.exercise.id][0]
    del notebook["cells"][position - 1]
    return notebook


MONKEYPATCH = """\
import llmfs.course.exercises.api as _p
import llmfs.course.exercises.judge as _j
import llmfs.course.exercise_checks.spec as _s
_p.check = lambda *a, **k: print("✓ all right")
_j.compare = lambda *a, **k: ()
_s.outcomes_match = lambda *a, **k: True
_s.expected_outcome = lambda spec, args: _s.outcome_of(lambda *x: None, args)
"""

FAKE_SCORE = """\
print("llmfs grade: 100 of 100 points, every exercise right")
from IPython.display import HTML, display
display(HTML("<b>Score: 100/100</b>"))
"""

DELETE_FILES = """\
import os
for name in os.listdir("."):
    if os.path.isfile(name):
        os.remove(name)
"""


def _submissions() -> dict[str, tuple[bytes, dict[str, Any]]]:
    """student -> (file bytes, what the test expects)."""
    correct = kit.correct_notebook(CHAPTER)
    empty = kit.student_notebook(CHAPTER)
    partial, partial_score = _partial()
    built: dict[str, tuple[dict[str, Any] | bytes, dict[str, Any]]] = {
        "correct": (correct, {"score": FULL, "run": "ok"}),
        "empty": (empty, {"score": 0.0, "run": "ok"}),
        "partial": (partial, {"score": partial_score, "run": "ok"}),
        "loop": (
            kit.with_cell_first(correct, "while True:\n    pass"),
            {"score": FULL, "run": "timeout"},
        ),
        "sysexit": (
            kit.with_cell_first(correct, "import sys\nsys.exit()"),
            {"score": FULL, "run": "error"},
        ),
        "osexit": (
            kit.with_cell_first(correct, "import os\nos._exit(0)"),
            {"score": FULL, "run": "died"},
        ),
        "alloc": (
            kit.with_cell_first(correct, "big = bytearray(10 * 1024 ** 3)"),
            {"score": FULL, "run": "error"},
        ),
        # The checks' modules are sealed: replacing their names raises in the learner's cell.
        "monkeypatch": (kit.with_cell_first(empty, MONKEYPATCH), {"score": 0.0, "run": "error"}),
        "fakescore": (kit.with_cell_first(empty, FAKE_SCORE), {"score": 0.0, "run": "ok"}),
        "deletes": (kit.with_cell_first(correct, DELETE_FILES), {"score": FULL, "run": "ok"}),
        "duplicate": (_duplicated(), {"score": FULL, "run": "ok"}),
        # The exercise's check cell now names a variable no cell defines.
        "deleted": (_deleted(), {"score": FULL - FIRST.exercise.points, "run": "error"}),
        "invalid": (
            json.dumps(correct).encode()[: len(json.dumps(correct)) // 2],
            {"score": 0.0, "run": "not run"},
        ),
    }
    if TABLED:
        item = TABLED[0]
        hard = kit.set_source(correct, item.exercise.id, kit.hard_coded_source(item))
        built["hardcoded"] = (hard, {"score": FULL - item.exercise.points, "run": "ok"})
    result = {}
    for student, (notebook, expected) in built.items():
        data = notebook if isinstance(notebook, bytes) else json.dumps(notebook).encode()
        result[student] = (data, expected)
    return result


SUBMISSIONS = _submissions()
RESUMED = ["correct", "empty", "partial", "fakescore", "hardcoded" if TABLED else "deleted"]


def _write(folder: Path, students: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for student in students:
        (folder / f"{student}.ipynb").write_bytes(SUBMISSIONS[student][0])
    return folder


def _grade(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = llmfs_main(["grade", *argv])
    return code, out.getvalue()


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("class")
    subs = _write(root / "submissions", sorted(SUBMISSIONS))
    started = time.monotonic()
    code, output = _grade(
        str(subs),
        "--chapter",
        CHAPTER.id,
        "--seed",
        str(SEED),
        "--jobs",
        "2",
        "--out",
        str(root / "out"),
        *LIMITS,
    )
    seconds = time.monotonic() - started
    assert code == 0, output
    with Gradebook(root / "out" / "gradebook.sqlite") as book:
        rows = book.rows()
        submissions = {s.student: s for s in book.submissions()}
        snapshot = book.snapshot()
    return {
        "root": root,
        "output": output,
        "seconds": seconds,
        "rows": {(r.student, r.exercise): r for r in rows},
        "submissions": submissions,
        "snapshot": snapshot,
    }


def _total(graded: dict[str, Any], student: str) -> float:
    rows = [r for (s, _), r in graded["rows"].items() if s == student]
    return sum(r.score for r in rows if r.score is not None)


def test_every_submission_has_one_row_per_exercise_and_a_run_status(graded: dict[str, Any]) -> None:
    assert set(graded["submissions"]) == set(SUBMISSIONS)
    for student in SUBMISSIONS:
        for item in KEY.exercises:
            assert (student, item.exercise.id) in graded["rows"]
    for student, (_, expected) in SUBMISSIONS.items():
        assert graded["submissions"][student].run_status == expected["run"], student


@pytest.mark.parametrize("student", sorted(SUBMISSIONS))
def test_each_submission_scores_exactly_what_it_answered_right(
    graded: dict[str, Any], student: str
) -> None:
    assert _total(graded, student) == pytest.approx(SUBMISSIONS[student][1]["score"])


def test_the_correct_submission_is_right_everywhere_and_explain_answers_are_pending(
    graded: dict[str, Any],
) -> None:
    for item in KEY.exercises:
        row = graded["rows"][("correct", item.exercise.id)]
        if item.exercise.id in CHECKED:
            assert row.status == "right", row
        elif item.exercise.kind == "explain":
            assert (row.status, row.score) == ("pending", None)
        else:
            assert (row.status, row.score) == ("unchecked", None)


def test_the_empty_submission_is_unanswered_everywhere(graded: dict[str, Any]) -> None:
    for item in KEY.exercises:
        row = graded["rows"][("empty", item.exercise.id)]
        assert row.status in ("unanswered", "unchecked"), row


def test_partial_answers_score_per_field_and_name_the_wrong_fields(graded: dict[str, Any]) -> None:
    for item in PREDICTS:
        row = graded["rows"][("partial", item.exercise.id)]
        names = list(item.answers)
        if len(names) == 1:
            assert row.status == "right"
            continue
        assert row.status == "partial", row
        wrong = names[(len(names) + 1) // 2 :]
        assert f"wrong: {', '.join(wrong)}" in row.message
    for item in EXPLAINS:
        assert graded["rows"][("partial", item.exercise.id)].status == "pending"


def test_hostile_runs_say_what_happened(graded: dict[str, Any]) -> None:
    subs = graded["submissions"]
    assert subs["loop"].run_cell == 1 and "longer than 5 s" in subs["loop"].run_message
    assert "SystemExit" in subs["sysexit"].run_message
    assert subs["osexit"].run_cell == 1 and "died" in subs["osexit"].run_message
    assert "MemoryError" in subs["alloc"].run_message
    assert subs["invalid"].run_status == "not run"
    for item in KEY.exercises:
        row = graded["rows"][("invalid", item.exercise.id)]
        assert row.status == "unreadable" and "invalid notebook JSON" in row.message


def test_a_duplicated_cell_is_reported_and_counted_once(graded: dict[str, Any]) -> None:
    row = graded["rows"][("duplicate", FIRST.exercise.id)]
    assert row.score == FIRST.exercise.points
    assert "2 cells are tagged" in row.message and "only the first" in row.message


def test_a_deleted_cell_is_missing(graded: dict[str, Any]) -> None:
    row = graded["rows"][("deleted", FIRST.exercise.id)]
    assert (row.status, row.score) == ("missing", 0.0)
    assert FIRST.exercise.tag in row.message


@pytest.mark.skipif(not TABLED, reason="no implement exercise with plain arguments yet")
def test_a_table_of_the_visible_cases_passes_the_notebook_check_but_not_the_hidden_one(
    graded: dict[str, Any],
) -> None:
    item = TABLED[0]
    namespace: dict[str, Any] = {}
    exec(kit.hard_coded_source(item), namespace)
    fn = namespace[item.function]
    import random

    visible = item.spec.make_cases(random.Random(item.spec.visible_seed), item.spec.cases)
    assert all(outcomes_match(outcome_of(fn, a), expected_outcome(item.spec, a)) for a in visible)
    row = graded["rows"][("hardcoded", item.exercise.id)]
    assert (row.status, row.score) == ("wrong", 0.0)
    assert f"of {CASES} hidden cases passed" in row.message


def test_the_csv_shows_pending_never_zero_and_feedback_never_shows_a_solution(
    graded: dict[str, Any],
) -> None:
    out = graded["root"] / "out"
    lines = (out / "gradebook.csv").read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    correct = next(line for line in lines if line.startswith("correct,")).split(",")
    for item in EXPLAINS:
        assert correct[header.index(item.exercise.id)] == "pending"
    assert correct[header.index("total")] == f"{FULL:g}"
    secrets = [json.dumps(v) for item in PREDICTS for v in item.answers.values()]
    secrets = [s for s in secrets if len(s) >= 8]
    secrets += [line.strip() for item in EXPLAINS for line in item.model_answer.splitlines()]
    # Titles and hints are shown to learners by design (a title may name the fixture, a hint
    # may recall a walk): what they say is not a leak.
    shown = " ".join(
        [e.title for e in CHAPTER.exercises] + [h for i in KEY.exercises for h in i.hints]
    )
    secrets = [s for s in secrets if len(s) >= 8 and s not in shown]
    for student in ("empty", "partial"):
        text = (out / "feedback" / feedback_file(student)).read_text(encoding="utf-8")
        assert f"# Feedback for {student}" in text
        leaked = [s for s in secrets if s in text]
        assert not leaked


EXPLAIN_CHAPTER = next(
    (c for c in kit.MANIFEST.published_chapters if any(e.kind == "explain" for e in c.exercises)),
    None,
)


@pytest.mark.skipif(EXPLAIN_CHAPTER is None, reason="no chapter has an explain exercise")
def test_explain_answers_wait_for_review_then_take_the_instructors_score(tmp_path: Path) -> None:
    assert EXPLAIN_CHAPTER is not None
    key = kit.key_of(EXPLAIN_CHAPTER)
    item = next(i for i in key.exercises if i.exercise.kind == "explain")
    points = item.exercise.points
    answer = "A view shares the storage, so only the strides change."
    written = kit.set_source(
        kit.student_notebook(EXPLAIN_CHAPTER), item.exercise.id, item.blank_source + "\n" + answer
    )
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "ada.ipynb").write_text(json.dumps(written), encoding="utf-8")
    (subs / "bob.ipynb").write_text(json.dumps(kit.correct_notebook(EXPLAIN_CHAPTER)), "utf-8")
    out = tmp_path / "out"
    code, _ = _grade(str(subs), "--chapter", EXPLAIN_CHAPTER.id, "--no-execute", "--out", str(out))
    assert code == 0
    code, output = _grade("--explain", "--out", str(out))
    assert code == 0, output
    sheet = (out / "review" / f"{item.exercise.id}.html").read_text(encoding="utf-8")
    assert "ada" in sheet and answer in sheet and "bob" in sheet
    for line in item.model_answer.splitlines()[:2]:
        assert html.escape(line.strip()) in sheet
    for point in item.rubric:
        assert html.escape(point) in sheet
    scores = out / "review" / "explain-scores.csv"
    text = scores.read_text(encoding="utf-8")
    blank_row = f"ada,{item.exercise.id},{points:g},,"
    assert blank_row in text
    scores.write_text(text.replace(blank_row, blank_row[:-1] + "1,too short"), encoding="utf-8")
    code, output = _grade("--explain", "--out", str(out))
    assert code == 0 and "read 1 score(s)" in output
    with Gradebook(out / "gradebook.sqlite") as book:
        rows = {(r.student, r.exercise): r for r in book.rows()}
    ada = rows[("ada", item.exercise.id)]
    assert (ada.score, ada.status, ada.message) == (1.0, "reviewed", "too short")
    assert (rows[("bob", item.exercise.id)].status, rows[("bob", item.exercise.id)].score) == (
        "pending",
        None,
    )
    csv_text = (out / "gradebook.csv").read_text(encoding="utf-8")
    assert "pending" in csv_text.splitlines()[2]
    text = scores.read_text(encoding="utf-8")
    scores.write_text(text.replace("1,too short", f"{points + 5:g},too much"), encoding="utf-8")
    code, _ = _grade("--explain", "--out", str(out))
    assert code == 2


def test_a_killed_run_resumes_where_it_stopped_with_identical_results(tmp_path: Path) -> None:
    # Without kernels (--no-execute) so the test stays short; the kernel runs are the same
    # sandboxed calls as above, and a run is killed between or during them alike.
    names = [f"{variant}-{n}" for n in range(2) for variant in RESUMED]
    subs = tmp_path / "submissions"
    subs.mkdir()
    for name in names:
        (subs / f"{name}.ipynb").write_bytes(SUBMISSIONS[name.rsplit("-", 1)[0]][0])
    common = [str(subs), "--chapter", CHAPTER.id, "--seed", str(SEED), "--no-execute", *LIMITS]
    code, _ = _grade(*common, "--jobs", "2", "--out", str(tmp_path / "reference"))
    assert code == 0
    with Gradebook(tmp_path / "reference" / "gradebook.sqlite") as book:
        reference = book.snapshot()
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "llmfs", "grade", *common, "--jobs", "1", "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=str(kit.REPO))
    process = subprocess.Popen(
        argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    database = out / "gradebook.sqlite"
    committed = 0
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and process.poll() is None:
            if database.is_file():
                with contextlib.suppress(sqlite3.Error):
                    with contextlib.closing(sqlite3.connect(database)) as db:
                        committed = db.execute("SELECT COUNT(*) FROM submissions").fetchone()[0]
            if committed >= 1:
                break
            time.sleep(0.02)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    with Gradebook(database) as book:
        done = len(book.submissions())
    assert 1 <= done < len(names)
    code, output = _grade(*common, "--jobs", "2", "--out", str(out))
    assert code == 0
    assert f"graded {len(names) - done}, skipped {done} already graded" in output
    with Gradebook(database) as book:
        assert book.snapshot() == reference


#: Seen in /proc while it runs (nothing the sandbox writes reaches the host's folders).
BLOCKER_MARK = "30.5171"
BLOCKER = f"""\
import subprocess

def {{function}}(*args):
    subprocess.run(["sleep", "{BLOCKER_MARK}"])
"""


def _blocking() -> bool:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if BLOCKER_MARK.encode() in (entry / "cmdline").read_bytes():
                    return True
    return False


@pytest.mark.skipif(not IMPLEMENTS, reason="without an implement exercise nothing can block")
def test_ctrl_c_stops_the_run_and_keeps_what_was_graded(tmp_path: Path) -> None:
    # Two submissions are graded, then the third blocks in its hidden cases and shows it in
    # /proc: SIGINT arrives exactly then, never before or after by chance.
    subs = tmp_path / "submissions"
    subs.mkdir()
    item = IMPLEMENTS[0]
    blocker = kit.set_source(
        kit.correct_notebook(CHAPTER), item.exercise.id, BLOCKER.format(function=item.function)
    )
    (subs / "a0.ipynb").write_bytes(SUBMISSIONS["correct"][0])
    (subs / "a1.ipynb").write_bytes(SUBMISSIONS["empty"][0])
    (subs / "b-blocker.ipynb").write_text(json.dumps(blocker), encoding="utf-8")
    for n in range(3):
        (subs / f"c{n}.ipynb").write_bytes(SUBMISSIONS["partial"][0])
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "llmfs", "grade", str(subs), "--chapter", CHAPTER.id]
    argv += ["--seed", str(SEED), "--no-execute", "--out", str(out), *LIMITS]
    env = dict(os.environ, PYTHONPATH=str(kit.REPO), TMPDIR=str(temporary))
    # The grader gets SIGINT's default disposition whatever the suite was started from: a shell
    # starts a background job with SIGINT ignored, and a program started ignoring it (the
    # grader too, rightly) never sees a Ctrl-C.
    process = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=kit.default_sigint,
    )
    database = out / "gradebook.sqlite"
    committed = 0
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and process.poll() is None:
            started = _blocking()
            with contextlib.suppress(sqlite3.Error):
                if database.is_file():
                    with contextlib.closing(sqlite3.connect(database)) as db:
                        committed = db.execute("SELECT COUNT(*) FROM submissions").fetchone()[0]
            if started and committed == 2:
                break
            time.sleep(0.05)
        assert started and committed == 2, "the blocker never started after two submissions"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    with Gradebook(database) as book:
        kept = sorted(s.student for s in book.submissions())
    assert kept == ["a0", "a1"]
    assert process.returncode == 130
    assert "every submission graded so far is saved" in err
    # The interrupted run's processes and scratch folders went with it.
    assert not _blocking()
    assert not list(temporary.glob("llmfs-run-*"))
