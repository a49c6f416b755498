"""The gradebook, its exports and merges, and the implement sandbox, without notebook kernels."""

from __future__ import annotations

import contextlib
import io
import json
import time
from pathlib import Path

import gradingkit as kit
import pytest

from llmfs.cli import main as llmfs_main
from llmfs.course import CourseError
from llmfs.course.grading import reports
from llmfs.course.grading.grade import collect_submissions
from llmfs.course.grading.gradebook import Gradebook, merge_gradebooks
from llmfs.course.grading.limits import Limits
from llmfs.course.grading.sandbox import FunctionTask, RunOutcome, run_function, run_functions
from llmfs.course.grading.score import ExerciseResult, SubmissionResult


def _result(student: str, sha: str, *rows: ExerciseResult) -> SubmissionResult:
    run = RunOutcome("ok", None, "ran every cell")
    return SubmissionResult(student, "ch09", f"{student}.ipynb", sha, 7, "checks", run, rows)


RIGHT = ExerciseResult("ch09.q1", 2.0, 2.0, "right", "2 of 2 fields right", "{}")
WRONG = ExerciseResult("ch09.q1", 2.0, 0.0, "wrong", "0 of 2 fields right; wrong: shape", "{}")
PENDING = ExerciseResult("ch09.why", 2.0, None, "pending", "awaiting", "My answer.", "sha-a")


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
        changed = ExerciseResult("ch09.why", 2.0, None, "pending", "awaiting", "New.", "sha-b")
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
        "student,ch09.q1,ch09.why,total,pending,run",
        "ada,2,pending,2,1,ch09: ok",
        "bob,0,,0,0,ch09: ok",
    ]


def test_feedback_gives_results_and_messages_per_student(tmp_path: Path) -> None:
    with Gradebook(tmp_path / "g.sqlite") as book:
        book.record(_result("a/da", "h1", WRONG, PENDING))
        assert reports.write_feedback(book, kit.MANIFEST, tmp_path / "fb", "html") == 1
    text = (tmp_path / "fb" / "a_da.html").read_text()
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
    assert "holds 0 notebooks" in found[2].problem
    (tmp_path / "ada").mkdir()
    (tmp_path / "ada" / "x.ipynb").write_text("{}")
    with pytest.raises(CourseError, match="two submissions for student 'ada'"):
        collect_submissions([tmp_path], chapter)
    single = collect_submissions([tmp_path / "ada.ipynb"], chapter, student="ada@example")
    assert single[0].student == "ada@example"


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


def test_the_classroom_workflow_template_runs_llmfs_grade_with_options_that_exist() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML reads the workflow template")
    path = kit.REPO / "course" / "templates" / "classroom-grade.yml"
    workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
    steps = workflow["jobs"]["grade"]["steps"]
    script = next(step["run"] for step in steps if step.get("name") == "Grade")
    command = script.split("llmfs grade ", 1)[1].split("|")[0].replace("\\\n", " ")
    values = {"$notebook": "ch.ipynb", "$CHAPTER": "2", "$STUDENT": "ada", "$SEED": "123"}
    for name, value in values.items():
        command = command.replace(f'"{name}"', value)
    from llmfs.cli import build_parser

    args = build_parser().parse_args(["grade", *command.split()])
    assert (args.submissions, args.chapter, args.student, args.seed) == (
        [Path("ch.ipynb")],
        "2",
        "ada",
        123,
    )
    assert (args.checks, args.out) == (Path("course"), Path("grading"))
    # The student's code never runs in the job that holds the solutions and the seed.
    assert args.no_execute
    run_job = " ".join(str(step.get("run", "")) for step in workflow["jobs"]["run"]["steps"])
    assert "llmfs check" in run_job and "secrets." not in json.dumps(workflow["jobs"]["run"])


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
