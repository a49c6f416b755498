"""Chapter acceptance: the published chapters as the manifest lists them, in both versions.

* every exercise of the manifest lives in a cell of the right kind in the solution AND the student
  notebook, and the student cell is the blanked form of the solution cell;
* each solution answer passes its own check: the solution's code cells are run in-process, in
  order, and the check displayed after each exercise (a prediction comparison or a check report)
  must be all right;
* the student notebook, run unanswered, answers nothing and reveals nothing: every predict check
  lists the fields still to answer and no truth value of its exercise, every implement check says
  "not implemented yet", no model answer is shown, nothing is recorded in its attempts log, and
  no output at or after a predict exercise (printed, displayed or shown as a value) contains
  that exercise's answer;
* every predict exercise, answered wrong three times and then right, follows the retry and reveal
  rules and logs each attempt;
* the committed student notebooks are exactly what ``llmfs build`` generates.

Each notebook runs once, in-process, against its own fresh attempts log, as a learner's first
"Run All" would. nbval (the root conftest) separately compares every stored solution output, and
``llmfs check`` runs every student notebook in its kernel (``test_grading_selfcheck_blank.py``);
these tests say what the outputs must mean.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from answerkit import (
    NUMBER,
    canonical,
    canonical_number,
    is_number,
    leaves,
    solution_answers,
)
from runkit import RUNS, Shown

from llmfs.course.attempts import load_attempts
from llmfs.course.build import stale_notebooks
from llmfs.course.exercise_checks import CHECKS, CheckReport
from llmfs.course.exercises.api import Comparison, check, predict
from llmfs.course.exercises.entries import LABELS, display, is_plain, normalize
from llmfs.course.exercises.hints import ModelAnswer, model_answer
from llmfs.course.manifest import Chapter, Exercise, Manifest, load_manifest
from llmfs.course.notebooks import (
    cell_source,
    chapter_disagreements,
    exercise_cells,
    read_notebook,
)

# Every course notebook is executed in-process (scheduled early), each chapter's on the worker
# that runs that chapter's tests (conftest.py splits this file by chapter).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
MANIFEST = load_manifest(REPO / "course" / "manifest.toml")
CHAPTERS = MANIFEST.published_chapters
EXERCISES = [(chapter, exercise) for chapter in CHAPTERS for exercise in chapter.exercises]


def _id(item: Any) -> str:
    return item.id if isinstance(item, (Chapter, Exercise)) else str(item)


def _exercise_ids(pairs: list[tuple[Chapter, Exercise]]) -> list[str]:
    return [exercise.id for _, exercise in pairs]


def first_check_after(shown: list[Shown], position: int) -> Comparison | CheckReport:
    """The first comparison or check report displayed at or after the exercise's cell."""
    for item in shown:
        if item.position >= position and isinstance(item.value, (Comparison, CheckReport)):
            return item.value
    raise AssertionError(f"no check is displayed after cell #{position}")


@pytest.fixture(scope="module")
def attempts_logs() -> dict[str, Path]:
    """The attempts log of each notebook's run (each run has its own fresh log, so no run
    finishes another's exercises: a student run must find every ``after`` gate closed)."""

    class _Logs(dict):  # type: ignore[type-arg]
        def __missing__(self, relative: str) -> Path:
            return RUNS[relative].attempts_log

    return _Logs()


@pytest.fixture(scope="module")
def executed() -> dict[str, list[Shown]]:
    """Every published solution and student notebook, executed once per test process
    (:data:`runkit.RUNS`, on first use), each against its own attempts log."""

    class _Shown(dict):  # type: ignore[type-arg]
        def __missing__(self, relative: str) -> list[Shown]:
            return RUNS[relative].shown

    return _Shown()


def test_the_chapters_are_published_in_order_with_at_least_six_exercises() -> None:
    ids = [chapter.id for chapter in CHAPTERS]
    assert ids == [
        "ch01",
        "ch02",
        "ch03",
        "ch04",
        "ch05",
        "ch06",
        "ch07",
        "ch08",
        "ch09",
        "ch10",
        "ch11",
        "ch12",
        "ch13",
        "ch14",
    ]
    for chapter in CHAPTERS:
        assert len(chapter.exercises) >= (8 if chapter.id >= "ch06" else 6), chapter.id
        assert {exercise.kind for exercise in chapter.exercises} >= {"predict", "implement"}


def test_chapter_2_has_all_seven_questions_of_its_seed() -> None:
    ids = {exercise.id for exercise in MANIFEST.chapter("ch02").exercises}
    assert {f"ch02.q{n}" for n in range(1, 8)} <= ids


@pytest.mark.parametrize("chapter", CHAPTERS, ids=_id)
def test_both_versions_tag_exactly_the_manifest_exercises(chapter: Chapter) -> None:
    for relative in (chapter.solution, chapter.notebook):
        notebook = read_notebook(REPO / relative, relative)
        assert chapter_disagreements(chapter, notebook, relative) == []


@pytest.mark.parametrize(("chapter", "exercise"), EXERCISES, ids=_exercise_ids(EXERCISES))
def test_each_exercise_cell_has_its_kind_in_both_versions(
    chapter: Chapter, exercise: Exercise
) -> None:
    solution = read_notebook(REPO / chapter.solution)
    student = read_notebook(REPO / chapter.notebook)
    solved = solution["cells"][exercise_cells(solution, chapter.solution)[exercise.id] - 1]
    blank = student["cells"][exercise_cells(student, chapter.notebook)[exercise.id] - 1]
    assert solved["id"] == blank["id"]
    text, student_text = cell_source(solved), cell_source(blank)
    if exercise.kind == "predict":
        assert solved["cell_type"] == "code"
        blanked = re.compile(r"=\s*None,?\s+# PREDICTION")
        assert "# PREDICTION" in text and not blanked.search(text)
        assert len(blanked.findall(student_text)) == text.count("# PREDICTION")
    elif exercise.kind == "implement":
        assert solved["cell_type"] == "code"
        assert "# BEGIN SOLUTION" in text and "# YOUR CODE HERE" in student_text
        assert "# BEGIN SOLUTION" not in student_text
        assert exercise.id in CHECKS, f"{exercise.id} has no check the grader can run"
    else:
        assert solved["cell_type"] == "markdown" and exercise.kind == "explain"
        assert "<!-- BEGIN SOLUTION -->" in text and "_Your answer here._" in student_text
        answer = text.split("<!-- BEGIN SOLUTION -->")[1].split("<!-- END SOLUTION -->")[0]
        assert len(answer.split()) >= 30, "an explain exercise's model answer is written out"
        assert answer.split("<!-- HINT")[0].strip() not in student_text


@pytest.mark.parametrize(
    ("chapter", "exercise"),
    [pair for pair in EXERCISES if pair[1].kind != "explain"],
    ids=_exercise_ids([pair for pair in EXERCISES if pair[1].kind != "explain"]),
)
def test_each_solution_answer_passes_its_own_check(
    chapter: Chapter, exercise: Exercise, executed: dict[str, list[Shown]]
) -> None:
    solution = read_notebook(REPO / chapter.solution)
    position = exercise_cells(solution, chapter.solution)[exercise.id]
    result = first_check_after(executed[chapter.solution], position)
    if isinstance(result, Comparison):
        assert result.all_right, repr(result)
        assert result.recorded
    else:
        assert result.exercise_id == exercise.id
        assert result.passed, repr(result)


@pytest.mark.parametrize(
    ("chapter", "exercise"),
    [pair for pair in EXERCISES if pair[1].kind != "explain"],
    ids=_exercise_ids([pair for pair in EXERCISES if pair[1].kind != "explain"]),
)
def test_the_unanswered_student_notebook_answers_nothing(
    chapter: Chapter, exercise: Exercise, executed: dict[str, list[Shown]]
) -> None:
    student = read_notebook(REPO / chapter.notebook)
    position = exercise_cells(student, chapter.notebook)[exercise.id]
    result = first_check_after(executed[chapter.notebook], position)
    if isinstance(result, Comparison):
        assert result.verdicts and all(v.status == "unanswered" for v in result.verdicts)
        assert not result.complete and not result.recorded
        text, html = repr(result), result._repr_html_()
        headline, question, *rest = text.splitlines()
        assert re.fullmatch(r"\S+: not checked yet: \d+ of \d+ fields? still to answer", headline)
        labels = "|".join(re.escape(v.label) for v in result.verdicts)
        allowed = re.compile(
            rf"still to answer:|  ({labels}): not answered yet|"
            r"\(nothing is checked until every field has an answer\)"
        )
        assert all(allowed.fullmatch(line) for line in rest), text
        for truth in solution_truths(chapter, exercise).values():
            if truth not in exercise.expression and truth not in question:
                assert truth not in html, f"{exercise.id}: {truth} shown before any attempt"
    else:
        assert result.status in ("not implemented", "not answered"), repr(result)
        assert "yet" in repr(result).splitlines()[0]


def field_block(text: str, label: str) -> list[str]:
    """The lines a check shows for one field: its ``✓``/``✗`` line and the teaching lines
    indented under it."""
    lines = text.splitlines()
    start = next(
        k for k, line in enumerate(lines) if re.match(rf"  [✓✗] {re.escape(label)}:", line)
    )
    end = next(
        (k for k in range(start + 1, len(lines)) if not lines[k].startswith("      ")), len(lines)
    )
    return lines[start:end]


def solution_truths(chapter: Chapter, exercise: Exercise) -> dict[str, str]:
    """The solution's answers as the check would display them (long enough to be telling)."""
    plain = is_plain(exercise.fields)
    shown = {}
    for field, value in solution_answers(chapter, exercise).items():
        text = display(field, value if plain else normalize(field, value))
        # A yes/no or shared/new field is revealed by any wrong answer; only telling truths count.
        if len(text) >= 3 and text not in ("Yes", "True", "False", "none", "new", "shared"):
            shown[field] = text
    return shown


def wrong_answer(value: Any, step: int = 1) -> Any:
    """A readable answer that differs from ``value``; answers of different ``step`` differ from
    each other too, except where a field has one wrong answer only (a yes/no, shared/new)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + step
    if isinstance(value, list):
        return [wrong_answer(value[0], step), *value[1:]] if value else [step]
    if value in ("new", "shared"):
        return {"new": "shared", "shared": "new"}[value]
    others = [
        name
        for name in ("NonContiguousReshapeError", "none", "DTypeError", "SqueezeError")
        if name != value
    ]
    return others[(step - 1) % len(others)]


def varies(value: Any) -> bool:
    """True when :func:`wrong_answer` gives ``value`` several distinct wrong answers."""
    return not isinstance(value, bool) and value not in ("new", "shared")


PREDICTS = [pair for pair in EXERCISES if pair[1].kind == "predict"]


@pytest.mark.parametrize(("chapter", "exercise"), PREDICTS, ids=_exercise_ids(PREDICTS))
def test_each_predict_exercise_answered_wrong_then_right_retries_reveals_and_logs(
    chapter: Chapter,
    exercise: Exercise,
    executed: dict[str, list[Shown]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = tmp_path / "attempts.jsonl"
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(log))
    solution = read_notebook(REPO / chapter.solution)
    position = exercise_cells(solution, chapter.solution)[exercise.id]
    names = next(s.names for s in executed[chapter.solution] if s.position >= position)
    right = solution_answers(chapter, exercise)
    # A try is a distinct prediction: three different wrong predictions (one, when every field
    # has a single wrong answer) reveal, and checking the same prediction again counts nothing.
    limit = 3 if any(varies(value) for value in right.values()) else 1
    wrongs = [
        {field: wrong_answer(value, step) for field, value in right.items()}
        for step in range(1, limit + 1)
    ]
    truths = solution_truths(chapter, exercise)
    for tries, wrong in enumerate(wrongs, start=1):
        prediction = predict(exercise.expression, exercise_id=exercise.id, **wrong)
        comparison = check(prediction, names, max_tries=limit)
        text = repr(comparison)
        assert comparison.complete and comparison.recorded
        assert all(v.status == "wrong" for v in comparison.verdicts), text
        if tries < limit:
            again = check(prediction, names, max_tries=limit)  # the same cell run again
            assert (
                again.repeated
                and not again.recorded
                and again.tries_left == (comparison.tries_left)
            )
            assert all(v.shown_truth == "hidden" for v in comparison.verdicts), text
            assert f"{limit - tries} more wrong tr" in text
            assert "coordinate  offset  value" not in text  # no offset table of the result yet
            for v in comparison.verdicts:
                truth = truths.get(v.field)
                feedback = field_block(text, v.label)
                if truth and truth not in exercise.expression:
                    assert all(truth not in line for line in feedback), (truth, feedback)
        else:
            # One "answer: ..." line per field (an explanation may use the word in a sentence).
            shown = [line for line in text.splitlines() if line.lstrip().startswith("answer: ")]
            assert len(shown) == len(right), text
    final = check(predict(exercise.expression, exercise_id=exercise.id, **right), names)
    assert final.all_right, repr(final)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    reveals = [line for line in lines if line.get("event") == "reveal"]
    assert [line["fields"] for line in reveals] == [sorted(right)]
    records = [line for line in lines if "event" not in line]
    assert [(r["attempt"], r["first"], r["correct"]) for r in records] == [
        (n, n == 1, n == limit + 1) for n in range(1, limit + 2)
    ]
    assert records[limit]["revealed"] == sorted(right)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=_id)
def test_only_solution_runs_record_attempts_and_each_exercise_once(
    chapter: Chapter, executed: dict[str, list[Shown]], attempts_logs: dict[str, Path]
) -> None:
    assert executed[chapter.solution] and executed[chapter.notebook]  # both ran: logs written
    solution_log = attempts_logs[chapter.solution]
    recorded = [attempt.exercise for attempt in load_attempts(solution_log, MANIFEST)]
    checked = [exercise.id for exercise in chapter.exercises if exercise.kind != "explain"]
    assert sorted(recorded) == sorted(checked)
    assert all(attempt.correct for attempt in load_attempts(solution_log))
    student_log = attempts_logs[chapter.notebook]
    assert not student_log.exists() or student_log.read_text(encoding="utf-8") == ""


@pytest.mark.parametrize("chapter", CHAPTERS, ids=_id)
def test_no_model_answer_is_shown_in_an_unanswered_notebook(
    chapter: Chapter, executed: dict[str, list[Shown]]
) -> None:
    answers = [s.value for s in executed[chapter.notebook] if isinstance(s.value, ModelAnswer)]
    explains = [e for e in chapter.exercises if e.kind == "explain"]
    assert len(answers) == len(explains)
    assert all(not answer.shown and "write your answer" in repr(answer) for answer in answers)


EXPLAINS = [pair for pair in EXERCISES if pair[1].kind == "explain"]


@pytest.mark.parametrize(("chapter", "exercise"), EXPLAINS, ids=_exercise_ids(EXPLAINS))
def test_the_model_answer_needs_an_answer_written_in_the_notebook(
    chapter: Chapter, exercise: Exercise, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(tmp_path / "attempts.jsonl"))
    blank = model_answer(exercise.id, notebook=REPO / chapter.notebook)
    assert not blank.shown and "0 of at least 15 words" in repr(blank)
    written = model_answer(exercise.id, notebook=REPO / chapter.solution)
    assert written.shown and written.rubric == exercise.rubric
    assert len(written.answer.split()) >= 30 and "<!--" not in written.answer


def test_every_exercise_has_hints_and_every_explain_exercise_a_rubric() -> None:
    for _, exercise in EXERCISES:
        if exercise.kind == "explain":
            assert 3 <= len(exercise.rubric) <= 4, exercise.id
        else:
            assert exercise.hints, exercise.id
        if exercise.kind == "predict":
            assert exercise.expression and exercise.fields, exercise.id
        if exercise.kind == "implement":
            assert exercise.function, exercise.id


def test_exercise_ids_run_in_notebook_order() -> None:
    for chapter in CHAPTERS:
        solution = read_notebook(REPO / chapter.solution)
        cells = exercise_cells(solution, chapter.solution)
        in_notebook = sorted(cells, key=cells.__getitem__)
        assert in_notebook == [exercise.id for exercise in chapter.exercises]
        numbered = [
            int(e[len(chapter.id) + 2 :]) for e in in_notebook if re.fullmatch(r"ch\d\d\.q\d+", e)
        ]
        assert numbered == sorted(numbered), chapter.id


@pytest.mark.parametrize("chapter", CHAPTERS, ids=_id)
def test_fixture_values_differ_from_their_offsets(chapter: Chapter) -> None:
    text = "".join(cell_source(c) for c in read_notebook(REPO / chapter.solution)["cells"])
    assert not re.search(r"Tensor\.from_vec\([^\n]*list\(range\(", text)
    assert "Tensor.arange(" not in text


def test_chapter_3_needs_no_broadcasting() -> None:
    text = "".join(
        cell_source(c) for c in read_notebook(REPO / MANIFEST.chapter("ch03").solution)["cells"]
    )
    assert "broadcast" not in text.lower()
    assert not re.search(r"\[[^\]]*\b0, [^\]]*\]\)", text.split("layouts = {")[1].split("}")[0])


def test_the_student_notebooks_are_what_llmfs_build_generates() -> None:
    assert stale_notebooks(MANIFEST, REPO) == []


#: tempfile's calls whose file or folder nothing removes.
KEPT_BY_TEMPFILE = ("mkdtemp", "mkstemp", "mktemp")


def files_left_behind(source: str) -> list[str]:
    """The calls in ``source`` that make a temporary file or folder nothing removes: tempfile's
    ``mkdtemp``, ``mkstemp`` and ``mktemp``, and a ``NamedTemporaryFile`` or
    ``TemporaryDirectory`` made with ``delete=False``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        called = node.func
        name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
        kept = any(
            word.arg == "delete" and isinstance(word.value, ast.Constant) and not word.value.value
            for word in node.keywords
        )
        if name in KEPT_BY_TEMPFILE or (
            kept and name in ("NamedTemporaryFile", "TemporaryDirectory")
        ):
            found.append(f"{name}() on line {node.lineno}")
    return found


def test_the_search_for_files_left_behind_finds_each_form() -> None:
    assert files_left_behind("import tempfile\nd = tempfile.mkdtemp(prefix='x')") == [
        "mkdtemp() on line 2"
    ]
    assert files_left_behind("from tempfile import mkstemp\nfd, name = mkstemp()") == [
        "mkstemp() on line 2"
    ]
    assert files_left_behind("f = tempfile.NamedTemporaryFile(delete=False)") == [
        "NamedTemporaryFile() on line 1"
    ]
    assert files_left_behind("s = tempfile.TemporaryDirectory(prefix='x')") == []
    assert files_left_behind("with tempfile.TemporaryDirectory() as d:\n    pass") == []


@pytest.mark.parametrize("chapter", CHAPTERS, ids=_id)
def test_a_chapter_leaves_no_temporary_file_once_its_kernel_stops(chapter: Chapter) -> None:
    """A run's scratch files (checkpoints, a model folder the chapter writes) live in a
    ``TemporaryDirectory``, which Python removes when the kernel stops or restarts; a ``mkdtemp``
    folder would stay in the learner's temporary folder after every run of the chapter."""
    for relative in (chapter.solution, chapter.notebook):
        for position, cell in enumerate(read_notebook(REPO / relative)["cells"], start=1):
            if cell["cell_type"] == "code":
                left = files_left_behind(cell_source(cell))
                assert not left, f"{relative} cell #{position}: {', '.join(left)}"


def test_the_manifest_loader_reads_this_manifest() -> None:
    assert isinstance(MANIFEST, Manifest) and MANIFEST.root == REPO


WITH_MISTAKES = [pair for pair in PREDICTS if pair[1].mistakes]


@pytest.mark.parametrize(("chapter", "exercise"), WITH_MISTAKES, ids=_exercise_ids(WITH_MISTAKES))
def test_each_expected_mistake_of_the_manifest_gets_its_message(
    chapter: Chapter,
    exercise: Exercise,
    executed: dict[str, list[Shown]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(tmp_path / "attempts.jsonl"))
    solution = read_notebook(REPO / chapter.solution)
    position = exercise_cells(solution, chapter.solution)[exercise.id]
    names = next(s.names for s in executed[chapter.solution] if s.position >= position)
    right = solution_answers(chapter, exercise)
    for mistake in exercise.mistakes:
        answers = {**right, mistake.field: mistake.answer}
        comparison = check(predict(exercise.expression, exercise_id=exercise.id, **answers), names)
        (verdict,) = [v for v in comparison.verdicts if v.field == mistake.field]
        assert verdict.status == "wrong" and mistake.message in verdict.mistakes


# -- nothing of an answer in any output before its attempt ------------------------------------

MIN_VALUES = 3  # a list of numbers is telling from this many entries ...
MIN_REPR = 9  # ... or from this long a flat Python repr ("[120, 40]")
MIN_COLUMN = 4  # ... and read down a column of printed lines from this many rows
MIN_PAIR_COLUMN = 10  # two rows make a telling column only of numbers from two digits
MIN_NUMBER = 100  # a lone number is telling from three digits
MIN_TEXT = 10  # a text answer (an error name) is telling from this long


@dataclass
class Needle:
    """The telling ways one answer shows in printed text: ``text``, its canonical rendering
    (see :func:`canonical`); ``words``, patterns for the raw text; ``column``, its numbers read
    down consecutive lines. ``novel``: it is telling only where it had not been shown before
    the exercise's cell (a short answer, which earlier text may well contain by chance)."""

    text: str | None = None
    words: tuple[re.Pattern[str], ...] = ()
    column: tuple[str, ...] = ()
    novel: bool = False


def needle(name: str, answer: Any, question: str) -> Needle | None:
    """The telling renderings of the answer ``answer`` to the field ``name``, or None when it
    cannot be told apart from unrelated text (a yes/no, ``new``/``shared``, a short word, a
    single entry) or the question states it."""
    if isinstance(answer, str):
        if len(answer) < MIN_TEXT or answer in question:
            return None
        return Needle(words=(re.compile(rf"\b{re.escape(answer)}\b"),))
    if is_number(answer):
        labels = {LABELS.get(name, name.replace("_", " "))}
        if name == "base_offset":
            labels.add("offset")  # a tensor repr's layout line says "offset 12"
        number = rf"{re.escape(canonical_number(str(answer)))}(?:\.0*)?(?!\w|\.\d)"
        label = "|".join(map(re.escape, sorted(labels)))
        words = [re.compile(rf"\b(?:{label})\s*[:=]?\s*{number}")]
        if abs(answer) >= MIN_NUMBER:
            words.append(re.compile(rf"(?<![\w.]){number}"))
        return Needle(words=tuple(words), novel=True)
    numbers = leaves(answer)
    if not isinstance(answer, list) or not all(is_number(n) for n in numbers) or len(numbers) < 2:
        return None
    text = canonical(repr(answer))
    if text in canonical(question):
        return None
    column = tuple(canonical_number(str(n)) for n in numbers)
    if len(numbers) >= MIN_VALUES or len(repr(numbers)) >= MIN_REPR:
        return Needle(text, column=column if len(numbers) >= MIN_COLUMN else ())
    # Single digits run down the index and offset columns of any table: no column of those.
    pair = all(abs(n) >= MIN_PAIR_COLUMN for n in numbers)
    return Needle(text, column=column if pair else (), novel=True)


def unseen(found: Needle, before: str) -> Needle | None:
    """``found`` without the renderings that ``before`` already shows; None if none is left."""
    text = found.text if found.text is not None and found.text not in canonical(before) else None
    words = tuple(word for word in found.words if not word.search(before))
    column = found.column if found.column and not shows_column(before, found.column) else ()
    if text is None and not words and not column:
        return None
    return Needle(text, words, column, found.novel)


def shows_column(printed: str, column: tuple[str, ...]) -> bool:
    """Whether the numbers of ``column`` are read down consecutive lines of ``printed``, each
    at the same place among its line's numbers (counted from the start or from the end), as a
    trace or an offset table prints one entry per row."""
    rows = [
        [canonical_number(number) for number in NUMBER.findall(line)]
        for line in printed.splitlines()
    ]
    size = len(column)
    for start in range(len(rows) - size + 1):
        window = rows[start : start + size]
        width = min(len(row) for row in window)
        for place in [*range(width), *range(-width, 0)]:
            if all(row[place] == entry for row, entry in zip(window, column)):
                return True
    return False


def shows(printed: str, found: Needle) -> str | None:
    """How ``printed`` shows the answer (a short description), or None."""
    for word in found.words:
        if match := word.search(printed):
            return f"as {match.group()!r}"
    if found.text is not None and found.text in canonical(printed):
        return f"as {found.text}"
    if found.column and shows_column(printed, found.column):
        return f"as a column {' / '.join(found.column)}"
    return None


@pytest.mark.parametrize("chapter", CHAPTERS, ids=_id)
def test_an_unanswered_student_notebook_shows_no_answer_in_any_output(
    chapter: Chapter, executed: dict[str, list[Shown]]
) -> None:
    """Run unanswered from top to bottom, the student notebook shows no answer of a predict
    exercise in any output at or after that exercise's cell (the text printed, displayed, or
    shown as the cell's value), so "Run All" reveals nothing a learner has yet to predict.

    An answer is a field written in the solution's ``predict(...)`` cell. The exercises' own
    questions (their expressions, which widgets and checks print) are not outputs and are left
    out. An answer counts as shown when an output contains:

    * a list of numbers with at least three entries, or a Python repr of at least nine
      characters, rendered any way a learner reads it: a Python list or tuple repr, NumPy's
      ``[1 2 3]``, or a tensor repr's values (see :func:`canonical`); from four entries also
      its numbers read down consecutive printed lines at the same place in each line (a trace
      or an offset table prints one entry per row);
    * a text answer (an error name) of at least ten characters, as a whole word;
    * a shorter answer that had not been shown before the exercise's cell: a two-entry list
      rendered as above or read down two lines (numbers of two digits or more: single
      digits run down any table's index and offset columns), a number next to its field's name
      (``base offset 12``, ``copies: 2``), or a number of three or more digits on its own.

    A single small number, yes/no, ``new``/``shared`` or a short rendering already on screen
    before the question also occur in unrelated text, so finding them would say nothing, and
    an answer the exercise's expression states is no secret."""
    student = read_notebook(REPO / chapter.notebook)
    positions = exercise_cells(student, chapter.notebook)
    sources = {
        position: cell_source(cell).splitlines()
        for position, cell in enumerate(student["cells"], start=1)
    }
    predicts = [exercise for exercise in chapter.exercises if exercise.kind == "predict"]
    outputs = []
    for item in executed[chapter.notebook]:
        text = item.printed
        for exercise in predicts:
            text = text.replace(exercise.expression, " ")
        outputs.append((item.position, text))
    found = []
    for exercise in predicts:
        position = positions[exercise.id]
        before = "\n".join(text for at, text in outputs if at < position)
        for name, answer in solution_answers(chapter, exercise).items():
            telling = needle(name, answer, exercise.expression)
            if telling is not None and telling.novel:
                telling = unseen(telling, before)
            if telling is None:
                continue
            for at, text in outputs:
                how = at >= position and shows(text, telling)
                if how:
                    found.append(
                        f"{chapter.id} {exercise.id} field {name!r} ({answer!r}) is shown {how} "
                        f"by cell #{at}: {(sources[at] or [''])[0]}"
                    )
    assert not found, "answers shown before an attempt:\n" + "\n".join(found)


TABLE = "[0, 0]  0  10\n[0, 1]  3  20\n[1, 0]  1  11\n[1, 1]  4  21\n"


@pytest.mark.parametrize(
    ("name", "answer", "printed"),
    [
        ("offsets", [0, 3, 1, 4, 2, 5], "transpose [0, 3, 1, 4, 2, 5]"),
        ("offsets", [0, 3, 1, 4, 2, 5], "transpose (0, 3, 1, 4, 2, 5)"),
        ("offsets", [0, 3, 1, 4, 2, 5], "[0 3 1 4 2 5]"),
        ("values", [[10, 20], [11, 21]], "TensorView([[10., 20.],\n            [11., 21.]])"),
        ("values", [[1, 0], [0, 1]], "array([[ 1,  0],\n       [ 0,  1]])"),
        ("offsets", [0, 3, 1, 4], TABLE),
        ("values", [10, 20, 11, 21], TABLE),
        ("error", "NonContiguousReshapeError", "NonContiguousReshapeError: cannot merge"),
        ("base_offset", 12, "shape [3, 4], strides [4, 1], base offset 12, contiguous Yes"),
        ("base_offset", 12, "layout: shape (3, 4), strides (4, 1), offset 12; dtype int64"),
        ("copies", 2, "copies: 2"),
        ("max_offset_211", 842, "the largest reachable offset is 842 but the storage"),
        ("values", [6, 15], "[6, 15]"),
        ("values", [[33], [63]], "output 0 sums: 33\noutput 1 sums: 63\n"),
    ],
)
def test_the_answer_search_finds_each_way_a_learner_reads_an_answer(
    name: str, answer: Any, printed: str
) -> None:
    found = needle(name, answer, "the question")
    assert found is not None and shows(printed, found), (answer, printed)


@pytest.mark.parametrize(
    ("name", "answer", "printed"),
    [
        ("offsets", [0, 3, 1, 4, 2, 5], "[10, 3, 1, 4, 2, 5] [0, 3, 1, 4, 2, 50]"),
        ("offsets", [0, 3, 1, 4], "[0, 3, 1, 4, 2, 5]"),  # a longer list is another answer
        ("offsets", [0, 3, 1, 4], TABLE.replace("  4  ", "  5  ")),
        ("strides", [0, 1], "output 0 sums: 33\noutput 1 sums: 63\n"),  # index columns
        ("base_offset", 12, "offset 120, base offset 1.2, 12 values"),
        ("max_offset_211", 842, "8420 values, offset 84.2"),
        ("error", "EinsumError", "PlanMismatchError: EinsumErrors"),
    ],
)
def test_the_answer_search_ignores_text_that_only_resembles_an_answer(
    name: str, answer: Any, printed: str
) -> None:
    found = needle(name, answer, "the question")
    assert found is not None and not shows(printed, found), (answer, printed)


@pytest.mark.parametrize(
    ("name", "answer", "question"),
    [
        ("contiguous", False, "x"),
        ("owner", "shared", "x"),
        ("error", "none", "x"),
        ("base_offset", 0, "x"),
        ("shape", [12], "x"),
        ("shape", [1, 2, 3, 3], "causal.expand([1, 2, 3, 3])"),  # the question states it
    ],
)
def test_an_answer_too_short_to_tell_or_stated_by_its_question_is_not_searched(
    name: str, answer: Any, question: str
) -> None:
    if is_number(answer):  # a small number counts only next to its field's name
        found = needle(name, answer, question)
        assert found is not None and not shows(f"{answer} values, axis {answer}", found)
    else:
        assert needle(name, answer, question) is None


def test_a_short_answer_already_on_screen_before_its_exercise_is_not_telling() -> None:
    found = needle("shape", [3, 4], "x[1]")
    assert found is not None and found.novel
    assert shows("shape [3, 4], strides [4, 1]", found)
    assert unseen(found, "t: shape (3, 4)") is None
    assert unseen(found, "t: shape (4, 3)") == found
    long = needle("offsets", [0, 3, 1, 4, 2, 5], "view.transpose(0, 1)")
    assert long is not None and not long.novel


FORMULA = re.compile(
    r"(?:(?:ceil|floor)\s*)?[(\s]*-?\d+(?:\s*[-+×*/·]\s*(?:(?:ceil|floor)\s*)?[(\s]*-?\d+[)\s]*)+"
)


def formula_values(text: str) -> list[float]:
    """The values of the arithmetic written in ``text`` (``100 + 23``, ``1 × 12``,
    ``ceil((10 - 0) / 3)``): arithmetic a learner can work out states its result as plainly as
    the number itself."""
    values = []
    for match in FORMULA.finditer(text):
        written = match.group().strip().replace("×", "*").replace("·", "*")
        while written.count("(") > written.count(")") and written.startswith("("):
            written = written[1:]
        while written.count(")") > written.count("(") and written.endswith(")"):
            written = written[:-1]
        written = re.sub(r"(ceil|floor)", r"math.\1", written)
        try:
            values.append(float(eval(written, {"__builtins__": {}, "math": __import__("math")})))
        except (SyntaxError, ZeroDivisionError, TypeError, NameError):
            continue
    return values


def states_answer(name: str, answer: Any, question: str, text: str) -> str | None:
    """How ``text`` states the answer ``answer`` to the field ``name`` of an exercise asking
    ``question`` (a short description), or None. The output search's renderings
    (:func:`needle`), made stricter because the text (a hint, an explanation of a wrong answer)
    speaks of this exercise alone: every list answer of two or more numbers counts, and so do a
    number answer of two digits or more standing on its own (``12``), a short list next to its
    field's name (``shape []``, ``shape [4]``) and arithmetic whose result is a number answer or
    a one-entry list's entry (``100 + 23``, ``ceil((10 - 0) / 3)``)."""
    found = needle(name, answer, question)
    if found is not None and (how := shows(text, found)):
        return how
    if is_number(answer) and abs(answer) >= 10:
        lone = re.compile(rf"(?<![\w.]){re.escape(canonical_number(str(answer)))}(?!\w|\.\d)")
        if match := lone.search(text):
            return f"as {match.group()!r}"
    numbers = leaves(answer) if isinstance(answer, list) else []
    if isinstance(answer, list) and len(numbers) < 2 and all(is_number(n) for n in numbers):
        label = re.escape(LABELS.get(name, name.replace("_", " ")))
        rendering = (
            r"\[\s*" + "".join(re.escape(canonical_number(str(n))) for n in numbers) + r"\s*\]"
        )
        if (match := re.search(rf"\b{label}\s*[:=]?\s*{rendering}", text)) and (
            match.group() not in question
        ):
            return f"as {match.group()!r}"
    targets = [answer] if is_number(answer) else numbers if len(numbers) == 1 else []
    for value in formula_values(text):
        if any(is_number(t) and abs(value - t) < 1e-9 for t in targets):
            return f"as arithmetic giving {canonical_number(str(value))}"
    return None


@pytest.mark.parametrize(("chapter", "exercise"), PREDICTS, ids=_exercise_ids(PREDICTS))
def test_no_hint_states_its_exercises_answer(chapter: Chapter, exercise: Exercise) -> None:
    """``hint(id)`` can be asked for before any attempt, so a hint points at the rule and never
    states a field's answer (:func:`states_answer`)."""
    stated = []
    for name, answer in solution_answers(chapter, exercise).items():
        for number, text in enumerate(exercise.hints, start=1):
            if how := states_answer(name, answer, exercise.expression, text):
                stated.append(
                    f"hint {number} of {exercise.id} states {name} = {answer!r} {how}: {text}"
                )
    assert not stated, "\n".join(stated)
