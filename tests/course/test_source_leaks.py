"""Nothing written above an exercise gives its answer away, and no stub hint is its solution.

A learner reads a student notebook from the top, and scrolls on while predicting. So for every
predict exercise, the source of every cell of the student notebook from the first cell down to
the next exercise's cell (markdown and code, comments included: the next exercise's question is
on screen too), every hint of the exercise as ``hint(id)`` prints it (the manifest's), and the
chapter's objectives in the manifest, must not state that exercise's answers. The answers are
the literals of the solution's ``predict(...)`` cell (read by :func:`answerkit.solution_answers`,
as the output search of ``test_chapters.py`` reads them). What explains a result lives in the
solution's ``explains:<id>`` cells, which the build leaves out of the student notebook (the
check shows them once the exercise is finished); outputs gated by ``if after(...)`` show only
after the check (``test_chapters.py`` runs the notebooks for those).

Text is read as a learner reads it: markdown emphasis and code backticks dropped, whitespace
single, and numbers compared in one spelling (:func:`answerkit.canonical`: a Python list or
tuple, NumPy's ``[585 65 13 1]`` and ``[585. 65. 13. 1.]`` read the same). A field's answer is
**stated** by text that contains

1. **a list of at least three numbers** (or a flat Python repr of at least nine characters,
   ``[120, 40]``), other than a shape, anywhere: in any bracket spelling, and a flat list also
   without brackets (``585, 65, 13, 1``). Not counted: a nested list's entries without
   brackets (only its storage order, which chapters show on purpose) and the literal list
   arguments of a tensor-making call in a code cell (``Tensor.from_vec([2, 3], [1, 2, 3, 4, 5,
   6])``: the data the exercise works on);
2. **the error class name** of an error answer, as a whole word, in the exercise's *lead-in*
   (the cells after the chapter's previous exercise cell, down to this one, and under it) or
   next to the exercise (rule 3). An error named in a chapter's survey of its rules, above an
   earlier exercise, is the rule being taught, not this exercise's answer;
3. **any answer next to the exercise**: in one sentence that names the exercise, within
   :data:`WINDOW` characters on either side of the name. Its names are its expression and the
   code spans of its question cell that look like an expression (a call, an attribute or an
   index: ``x[1]``, ``[1][2][3]``; not a shape or a list of axis names), of at least four
   characters. Next to a name, these state an answer: a number of two or more digits
   (``[1][2][3] in [2, 3, 4] -> 23``), a single digit right after ``=``, ``->``, ``→``,
   ``is``, ``gives`` or ``reads``; the list in any spelling (also a shape, also two entries);
   the error name; a yes/no field's word with its value (``not contiguous``, ``is
   contiguous``, ``contiguous: False``); an owner's words (``shared``: ``is a view``, ``a view
   of``, ``shares``, ``no copy``, ``without a copy``; ``new``: ``a copy``, ``new owner``,
   ``allocates``, ``owns its``); for an error answer of ``"none"`` the words of success
   (``works``, ``succeeds``, ``no error``, ``does not raise``, ``never raises``), except as a
   question's condition (``"none" if it succeeds``);
4. **a value next to its field's name in the lead-in**: a number after the field's name
   (``base offset 12``, ``offset: 12``, ``copies: 2``), a shape after ``shape``, a stride the
   rules single out (``stride 0``, ``stride -1``: a zero or negative entry of a strides
   answer), a yes/no field's word with its value, and an owner's words (``shared``: ``is a
   view``, ``no copy``; ``new``: ``a new owner``, ``a copy``, ``one copy``).
5. **any answer in the prose under the exercise, or in a hint**, without naming the exercise
   (this text is about the exercise just asked): what rule 3 finds next to a name, also a
   number of two or more characters (``2.48``, ``126``) and a word answer of at least
   :data:`MIN_BELOW_WORD` letters (``higher``). The prose under an exercise is its markdown
   cells down to the next exercise or section heading (:data:`SECTION`); those cells are part of
   the exercise's lead-in as well (rules 2 and 4).

Left out of every text: the other exercises' expressions (``view.reshape([3, 2])`` is the
question of one exercise, not the shape of another's) and the choices a question offers
(``shared or new``, ``yes or no``). Not stated: a single small number, a two-entry list, a
shape, a yes/no or a short word anywhere else (such text occurs in unrelated sentences), and
a list or an error name the exercise's expression itself contains (``causal.expand([1, 2, 3,
3])`` states its shape). Statements in words only ("merging them needs a copy") are beyond a
search: the chapters' authors keep those below the check.

Every implement exercise's hints, the stub's (``# HINT:`` lines of the student cell) and those
``hint(id)`` gives one at a time (the manifest's), are compared with
the solution's code lines between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` (comments left out,
lines of at least :data:`MIN_LINE_TOKENS` tokens, MSL source lines included): a hint gives the
solution away when runs of at least three tokens it shares with one solution line cover at least
half of that line (case and whitespace ignored). A hint points at the rule, never at the line.

Every notebook imports ``hint`` in its first import cell, so ``hint("<exercise id>")``, which each
introduction offers, works in the cell where a learner types it.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import difflib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from answerkit import canonical, canonical_number, is_number, leaves, solution_answers
from hypothesis import given, settings
from hypothesis import strategies as st

from llmfs.course.manifest import Chapter, Exercise, load_manifest
from llmfs.course.notebooks import Notebook, cell_source, exercise_cells, read_notebook

REPO = Path(__file__).resolve().parents[2]
MANIFEST = load_manifest(REPO / "course" / "manifest.toml")
CHAPTERS = MANIFEST.published_chapters

WINDOW = 60  # characters on either side of an exercise's name that count as "next to" it
MIN_VALUES = 3  # a list of numbers is telling anywhere from this many entries ...
MIN_REPR = 9  # ... or from this long a flat Python repr ("[120, 40]")
MIN_LINE_TOKENS = 8  # a solution line shorter than this ("return offset") says nothing
MIN_NEAR_NUMBER = 10  # a number from two digits is telling next to the exercise on its own
HINT_SHARE = 0.5  # a hint sharing runs of tokens over this much of a solution line gives it


# -- what a learner reads ----------------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    """One cell's source (or one hint) as a learner reads it: ``where`` names it (``cell #3
    (id ...)``, ``hint 2 of 3``), ``lead_in`` says whether it is in the exercise's lead-in (see
    the module docstring), ``code`` whether it is a code cell, ``below`` whether it is prose
    under the exercise's cell, down to the next exercise (rule 5)."""

    where: str
    source: str
    lead_in: bool
    code: bool = False
    below: bool = False


@dataclass(frozen=True)
class Question:
    """One predict exercise as the search sees it: its id, expression, the solution's answers
    per field, and the names a sentence can call it by (its expression first)."""

    id: str
    expression: str
    answers: dict[str, Any]
    names: tuple[str, ...]


def readable(text: str) -> str:
    """``text`` without markdown emphasis, backticks, HTML comments and the ``#`` that starts a
    comment line or a heading, whitespace single."""
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.DOTALL)
    text = re.sub(r"(?m)^\s*#+\s?", " ", text)
    text = text.replace("`", "").replace("**", "").replace("__", "")
    return re.sub(r"\s+", " ", text).strip()


_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)[.;!?](?=\s+[A-Z*`])|\n\s*\n")
_BULLET = re.compile(r"\n\s*(?:[*-]|\d+\.)\s+|\n#+\s")


def sentences(source: str, code: bool = False) -> list[str]:
    """The sentences of a cell's source, each :func:`readable` and :func:`canonical`: split at
    blank lines, list items, markdown headings and sentence ends (``e.g.``, ``i.e.`` and the
    dots of code like ``x.view()`` do not end one). A comment wrapped over several lines of a
    code cell is one text."""
    pieces = []
    if code:
        source = re.sub(r"(?m)^(\s*)#+ ?", r"\1", source)
    for paragraph in _BULLET.split("\n" + source):
        pieces.extend(_SENTENCE_END.split(paragraph))
    return [canonical(readable(piece)) for piece in pieces if readable(piece)]


def flexible(text: str) -> str:
    """A pattern for ``text`` (already canonical) that allows any whitespace where it has
    some, and between its other characters, so ``x[1 2 3]`` also finds ``x[ 1  2 3 ]``, but
    ``[3 1 6]`` does not find ``[3 16]``."""
    return r"\s+".join(r"\s*".join(re.escape(char) for char in word) for word in text.split())


def number_pattern(value: float) -> str:
    """A whole number token of ``value`` in canonical text (not part of a longer number)."""
    return rf"(?<![\w.\-]){re.escape(canonical_number(str(value)))}(?![\w]|\.\d)"


def label(field: str) -> str:
    """The words a sentence uses for a field: ``base_offset`` -> ``base offset``."""
    return field.replace("_", " ")


# -- what states an answer ---------------------------------------------------------------------

OWNER_WORDS = {
    "shared": r"\b(?:is a view|a view of|shares|no copy|without a copy)\b",
    "new": r"\b(?:a copy|new owner|allocates?|owns its)\b",
}
#: The words of success, unless a question asks for them ("none" if it succeeds).
SUCCESS_WORDS = (
    r"(?<!\bif it )(?<!\bwhen it )(?<!\bwhether it )"
    r"\b(?:works|succeeds|no error|does not raise|doesn't raise|never raises)\b"
)
#: How questions offer their choices: no answer in it.
CHOICES = re.compile(
    r"\b(?:shared or new|new or shared|yes or no|True or False)\b"
    r'|"\w+"(?:\s+"\w+")*\s+or\s+"\w+"',  # quoted options ("lower", "same" or "higher")
    re.I,
)


def is_long_list(field: str, answer: Any) -> bool:
    """A list of numbers telling anywhere (rule 1): not a shape, which chapters restate for
    every tensor they make (a shape counts next to its field's name or the exercise)."""
    numbers = leaves(answer)
    return (
        field != "shape"
        and isinstance(answer, list)
        and all(is_number(n) for n in numbers)
        and (len(numbers) >= MIN_VALUES or len(repr(numbers)) >= MIN_REPR)
    )


def list_patterns(answer: list[Any]) -> list[str]:
    """Patterns for a list of numbers in canonical text: bracketed, and a flat list also as a
    bare run of its numbers."""
    text = canonical(repr(answer))
    patterns = [flexible(text)]
    if answer and all(is_number(n) for n in answer):
        run = r"\s+".join(number_pattern(n) for n in answer)
        patterns.append(rf"(?<![\d\[]\s)(?<!\[){run}(?!\s*\d)")
    return patterns


def near_patterns(field: str, answer: Any) -> list[str]:
    """Patterns for ``answer`` written next to the exercise's name (rule 3)."""
    if isinstance(answer, bool):
        word = re.escape(label(field))
        arrow = r"\s*(?:=|:|->|→|is)?\s*"
        if answer:
            return [rf"\bis {word}\b", rf"\b{word}{arrow}(?:True|Yes|yes)\b"]
        return [rf"\b(?:not|non-?|isn't)\s*{word}\b", rf"\b{word}{arrow}(?:False|No|no)\b"]
    if is_number(answer) and abs(answer) >= MIN_NEAR_NUMBER:
        return [number_pattern(answer)]
    if is_number(answer):  # a digit is telling only as what the expression gives
        return [rf"(?:=|->|→|\bis|\bgives|\breads)\s*{number_pattern(answer)}"]
    if isinstance(answer, list):
        return list_patterns(answer) if all(is_number(n) for n in leaves(answer)) else []
    if field == "owner" and answer in OWNER_WORDS:
        return [OWNER_WORDS[answer]]
    if field == "error" and answer == "none":
        return [SUCCESS_WORDS]
    if isinstance(answer, str) and answer not in ("none", "new", "shared"):
        return [rf"\b{re.escape(answer)}\b"]
    return []


def lead_in_patterns(field: str, answer: Any) -> list[str]:
    """Patterns for a value next to its field's name, telling in the exercise's lead-in
    (rule 4), and an error name (rule 2)."""
    words = [label(field)]
    if field == "base_offset":
        words.append("offset")
    if field.endswith("s"):
        words.append(label(field)[:-1])
    names = "|".join(re.escape(word) for word in sorted(words, key=len, reverse=True))
    if isinstance(answer, bool):
        return near_patterns(field, answer)
    if field == "shape" and isinstance(answer, list):
        return [rf"\bshapes?\s*(?:=|:|is|of)?\s*{flexible(canonical(repr(answer)))}"]
    if is_number(answer):
        return [rf"\b(?:{names})\s*(?:=|:|->|→|is|of)?\s*{number_pattern(answer)}"]
    if field == "strides" and isinstance(answer, list):
        singled = sorted({n for n in leaves(answer) if is_number(n) and n <= 0})
        return [rf"\bstrides?\s*(?:of)?\s*{number_pattern(n)}" for n in singled]
    if field == "owner" and answer == "shared":
        return [r"\b(?:is a view|no copy)\b"]
    if field == "owner" and answer == "new":
        return [r"\b(?:a new owner|a copy|one copy)\b"]
    if field == "error" and isinstance(answer, str) and answer != "none":
        return [rf"\b{re.escape(answer)}\b"]
    return []


#: A word answer shorter than this ("same", "none") is an everyday word: not searched below.
MIN_BELOW_WORD = 5


def below_patterns(field: str, answer: Any) -> list[str]:
    """Patterns for ``answer`` anywhere in prose under the exercise (rule 5): what states it
    next to the exercise's name states it here without the name, since this text is about the
    exercise just asked; also a number of two or more characters (``2.48``, ``126``) on its
    own, and a word answer of at least :data:`MIN_BELOW_WORD` letters."""
    if isinstance(answer, bool):
        return near_patterns(field, answer)
    if is_number(answer):
        text = canonical_number(str(answer))
        return [number_pattern(answer)] if len(text.lstrip("-")) >= 2 else []
    if isinstance(answer, str) and answer not in OWNER_WORDS and answer != "none":
        return [rf"\b{re.escape(answer)}\b"] if len(answer) >= MIN_BELOW_WORD else []
    if isinstance(answer, list) and len(leaves(answer)) < 2:  # "[0]": only in brackets,
        return [rf"(?<![\w\]]){flexible(canonical(repr(answer)))}"]  # not an index: size[1]
    return near_patterns(field, answer)


def stated_by_expression(answer: Any, expression: str) -> bool:
    """Whether the exercise's expression itself writes ``answer`` (then it is no secret): a
    list, or an error name. (A number in the expression is only its argument; a sentence that
    writes the number next to the expression is searched like any other.)"""
    shown = canonical(expression)
    if isinstance(answer, bool) or (isinstance(answer, str) and answer in ("none", "new")):
        return False
    if isinstance(answer, list):
        return canonical(repr(answer)) in shown
    return isinstance(answer, str) and answer in expression


def leaks(question: Question, texts: Sequence[Text]) -> list[str]:
    """Every place in ``texts`` that states one of ``question``'s answers (see the module
    docstring), each as ``"<exercise> field <name> (<answer>) in <where>: <how>"``."""
    found = []
    names = [flexible(canonical(readable(name))) for name in question.names]
    for field, answer in question.answers.items():
        if stated_by_expression(answer, question.expression):
            continue
        anywhere = list_patterns(answer) if is_long_list(field, answer) else []
        near = near_patterns(field, answer)
        lead = lead_in_patterns(field, answer)
        under = [p for p in below_patterns(field, answer) if not _in_expression(p, question)]
        for text in texts:
            source = without_fixture_data(text.source) if text.code else text.source
            for sentence in sentences(source, text.code):
                sentence = CHOICES.sub(" ", sentence)
                how = _search(anywhere, sentence)
                if how is None and text.lead_in:
                    how = _search(lead, sentence)
                if how is None:
                    how = _search_near(near, names, sentence)
                if how is None and text.below:
                    how = _search(under, sentence)
                if how is not None:
                    found.append(
                        f"{question.id} field {field} ({answer!r}) in {text.where}: {how} "
                        f"in {sentence[:160]!r}"
                    )
    return found


def _in_expression(pattern: str, question: Question) -> bool:
    """Whether ``pattern`` matches the exercise's expression or one of its names: then the
    text below restates the question, not its answer (``thread_census(13, 10)`` holds 13)."""
    return any(re.search(pattern, canonical(readable(name))) for name in question.names)


#: Calls that make a tensor from literal data: their list arguments are the exercise's data.
FIXTURES = frozenset({"from_vec", "zeros", "ones", "full", "array", "asarray"})


def without_fixture_data(source: str) -> str:
    """A code cell's source with the literal list arguments of tensor-making calls
    (``Tensor.from_vec([2, 3], [1, 2, 3, 4, 5, 6])``) blanked: they are the data the exercise
    works on, which a learner must see, not a statement of a result. A cell that is not
    Python is returned as it is."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", None))
            if name in FIXTURES:
                for arg in node.args:
                    if isinstance(arg, (ast.List, ast.Tuple)) and arg.end_lineno is not None:
                        start = starts[arg.lineno - 1] + len(
                            lines[arg.lineno - 1].encode()[: arg.col_offset].decode()
                        )
                        stop = starts[arg.end_lineno - 1] + len(
                            lines[arg.end_lineno - 1].encode()[: arg.end_col_offset].decode()
                        )
                        spans.append((start, stop))
    outer: list[tuple[int, int]] = []
    for start, stop in sorted(spans):
        if not outer or start >= outer[-1][1]:  # a list inside a blanked list goes with it
            outer.append((start, stop))
    for start, stop in reversed(outer):
        source = source[:start] + "data" + source[stop:]
    return source


def _search(patterns: Sequence[str], sentence: str) -> str | None:
    for pattern in patterns:
        if match := re.search(pattern, sentence):
            return f"{match.group()!r}"
    return None


MARK = "\x00"  # where a sentence named the exercise (no text holds it)


def _search_near(patterns: Sequence[str], names: Sequence[str], sentence: str) -> str | None:
    """Whether a pattern matches within :data:`WINDOW` characters of one of ``names`` in
    ``sentence``; the names themselves (every occurrence of each) are not searched."""
    masked = sentence
    for name in names:
        masked = re.sub(name, MARK, masked)
    for at in re.finditer(MARK, masked):
        around = masked[max(0, at.start() - WINDOW) : at.end() + WINDOW].replace(MARK, " | ")
        for pattern in patterns:
            if match := re.search(pattern, around):
                return f"{match.group()!r} next to the exercise in {around.strip()!r}"
    return None


# -- a chapter's questions and texts -----------------------------------------------------------

_CODE_SPAN = re.compile(r"`([^`]+)`")
_NAME_LIKE = re.compile(r"\(|\.\w|\]\[|\w\[")  # a call, an attribute or an index


def question_names(expression: str, question_cell: str) -> tuple[str, ...]:
    """The exercise's expression and the code spans of its question cell that look like an
    expression: a call, an attribute or an index (``x[1]``, ``[1][2][3]``), of at least four
    characters; not a shape (``[2, 3]``) or a list of axis names."""
    spans = [
        span
        for span in _CODE_SPAN.findall(question_cell)
        if len(span) >= 4 and _NAME_LIKE.search(span) and span != expression
    ]
    return (expression, *dict.fromkeys(spans))


def chapter_questions(chapter: Chapter, student: Notebook) -> Iterator[tuple[Question, list[Text]]]:
    """Each predict exercise of ``chapter`` with the texts a learner sees while predicting it
    in ``student``: the manifest's objectives, every cell from the top of the notebook down to
    the next exercise's cell (its question included: a learner scrolls on before answering),
    and every hint of the exercise, as ``hint(id)`` prints them. The cells under the exercise
    down to the next section heading (:data:`SECTION`) or exercise are its lead-in too, and
    their prose is searched by rule 5. The other exercises'
    expressions are left out of the texts: they are those exercises' questions
    (``view.reshape([3, 2])`` does not state the shape of ``view.transpose(0, 1)``)."""
    positions = exercise_cells(student, chapter.notebook)
    cells = student["cells"]
    objectives = Text("the manifest's objectives", "\n\n".join(chapter.objectives), False)
    predicts = [exercise for exercise in chapter.exercises if exercise.kind == "predict"]
    for exercise in predicts:
        assert exercise.expression is not None
        position = positions[exercise.id]
        previous = max((p for p in positions.values() if p < position), default=0)
        following = min((p for p in positions.values() if p > position), default=len(cells) + 1)
        question = next(
            (
                cell_source(cell)
                for cell in reversed(cells[previous:position])
                if cell["cell_type"] == "markdown"
                and f"Exercise {exercise.id}" in cell_source(cell)
            ),
            "",
        )
        others = sorted(
            (
                e.expression
                for e in predicts
                if e.expression and e.expression != exercise.expression
            ),
            key=len,
            reverse=True,
        )
        section = next(
            (
                at
                for at in range(position + 1, following)
                if cells[at - 1]["cell_type"] == "markdown"
                and SECTION.match(cell_source(cells[at - 1]))
            ),
            following,
        )
        texts = [objectives] + [
            Text(
                f"cell #{at} (id {cell['id']!r})",
                without(others, cell_source(cell)),
                lead_in=previous < at < section,
                code=cell["cell_type"] == "code",
                below=position < at < section and cell["cell_type"] == "markdown",
            )
            for at, cell in enumerate(cells[: following - 1], start=1)
        ]
        texts += [
            Text(f"hint {number} of {len(exercise.hints)}", text, lead_in=True, below=True)
            for number, text in enumerate(exercise.hints, start=1)
        ]
        names = question_names(exercise.expression, question)
        yield Question(exercise.id, exercise.expression, answers(chapter, exercise), names), texts


#: A markdown cell that opens a new section of the chapter (``## 3. LayerNorm``): the text
#: under an exercise belongs to it down to the next section or exercise, whichever comes first.
SECTION = re.compile(r"\s*#{1,2}\s")


def without(expressions: Sequence[str], source: str) -> str:
    """``source`` with every occurrence of each of ``expressions`` blanked."""
    for expression in expressions:
        source = source.replace(expression, " ")
    return source


_ANSWERS: dict[str, dict[str, Any]] = {}


def answers(chapter: Chapter, exercise: Exercise) -> dict[str, Any]:
    """The solution's answers to ``exercise``, read once per session."""
    if exercise.id not in _ANSWERS:
        _ANSWERS[exercise.id] = solution_answers(chapter, exercise)
    return _ANSWERS[exercise.id]


def chapter_leaks(chapter: Chapter, student: Notebook) -> list[str]:
    """Every statement of an answer above its exercise in ``student`` (or the objectives)."""
    return [
        f"{chapter.notebook}: {leak}"
        for question, texts in chapter_questions(chapter, student)
        for leak in leaks(question, texts)
    ]


def _id(chapter: Chapter) -> str:
    return chapter.id


@pytest.mark.parametrize("chapter", CHAPTERS, ids=_id)
def test_no_text_above_an_exercise_states_its_answer(chapter: Chapter) -> None:
    student = read_notebook(REPO / chapter.notebook, chapter.notebook)
    found = chapter_leaks(chapter, student)
    assert not found, "answers written above their exercise:\n" + "\n".join(found)


# -- the search itself: what it finds ... -------------------------------------------------------

Q1 = Question("ch01.q1", "Tensor.zeros([10, 9, 5, 13])", {"strides": [585, 65, 13, 1]}, ())
Q2 = Question(
    "ch01.q2", "x[1, 2, 3]", {"base_offset": 23, "values": 123}, ("x[1, 2, 3]", "[1][2][3]")
)
SLICE = Question(
    "ch02.q4",
    "view.slice(1, 1, 3)",
    {"base_offset": 1, "shape": [2, 2], "strides": [3, 1], "contiguous": False},
    ("view.slice(1, 1, 3)",),
)
ERROR = Question(
    "ch01.get_error",
    "x.view().get([0, 3, 0])",
    {"error": "IndexOutOfBoundsError"},
    ("x.view().get([0, 3, 0])",),
)
MASK = Question(
    "ch07.q5",
    "causal.expand([1, 2, 3, 3])",
    {"shape": [1, 2, 3, 3], "strides": [0, 0, 3, 1], "owner": "shared"},
    ("causal.expand([1, 2, 3, 3])",),
)
TIED = Question("ch08.q2", "wte.T", {"shape": [64, 12], "owner": "shared"}, ("wte.T",))
WORKS = Question("ch03.q4", "mt.reshape([2, 3, 4])", {"error": "none"}, ("mt.reshape([2, 3, 4])",))
COPIES = Question("ch08.q5", "copy_budget(w)", {"copies": 2}, ())
SUM = Question("ch04.q6", "ops.add(base, b)", {"owner": "new"}, ("ops.add(base, b)",))


def far(source: str) -> list[Text]:
    return [Text("cell #1", source, lead_in=False)]


def in_code(source: str) -> list[Text]:
    return [Text("cell #2", source, lead_in=False, code=True)]


def near(source: str) -> list[Text]:
    return [Text("cell #9", source, lead_in=True)]


@pytest.mark.parametrize(
    ("question", "texts"),
    [
        (Q1, far("* compute row-major strides, e.g. `[10, 9, 5, 13] → [585, 65, 13, 1]`;")),
        (Q1, far("The strides are (585, 65, 13, 1).")),
        (Q1, far('print("strides 585, 65, 13, 1")')),
        (Q1, far("array strides: [585  65  13   1]")),
        (Q1, far("[585. 65. 13. 1.]")),
        (Q1, in_code("# the strides,\n# [585, 65,\n#  13, 1], are ...\nx = 1")),
        (Q1, in_code("expected = (585, 65, 13, 1)")),
        (
            Q2,
            far(
                "* compute the storage offset of a coordinate, e.g. `[1][2][3]` in `[2, 3, 4]` → 23"
            ),
        ),
        (Q2, far("`x[1, 2, 3]` reads offset **23**.")),
        (Q2, far("23 is where `x[1, 2, 3]` lives")),
        (
            SLICE,
            far("the slice `view.slice(1, 1, 3)` of section 7 is\nnot contiguous, yet it works"),
        ),
        (SLICE, far("`view.slice(1, 1, 3)` has strides `[3, 1]`")),
        (SLICE, near("A slice of a `[2, 3]` tensor is not contiguous.")),
        (SLICE, near("so its base offset is 1")),
        (ERROR, near("A component outside its axis raises `IndexOutOfBoundsError`.")),
        (ERROR, far("`x.view().get([0, 3, 0])` raises IndexOutOfBoundsError")),
        (MASK, near("Broadcasting it is a **view**: the new axes get stride 0.")),
        (TIED, far("The head is tied: `wte.T` is a view, not a second matrix.")),
        (WORKS, far("`mt.reshape([2, 3, 4])` works: it only splits an axis.")),
        (COPIES, near("so the forward pass makes copies: 2")),
        (SUM, near("An elementwise op writes the result into a **new** owner.")),
        (SUM, far("`ops.add(base, b)` allocates its result")),
    ],
)
def test_the_source_search_finds_each_way_a_text_states_an_answer(
    question: Question, texts: list[Text]
) -> None:
    assert leaks(question, texts), texts[0].source


# -- ... and what it ignores -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "texts"),
    [
        (Q1, far("[585, 65, 13, 10] and [5850, 65, 13, 1] and 585, 65, 13, 10")),
        (Q1, far("the shape [10, 9, 5, 13]; strides 585 and 65 and more")),  # part of a list
        (Q2, far("24 values, 23 of them after the first; see x[0, 0, 1]")),  # no name near
        (Q2, far("`x[1, 2, 3]` is one value.\n\nA scalar holds 23 entries elsewhere.")),
        (
            Q2,
            far(
                "Index `x[1, 2, 3]` with integers, and then think for a long while about"
                " every other thing the chapter says before 23"
            ),
        ),
        (SLICE, far("A slice is not contiguous in general.")),  # not in the lead-in
        (SLICE, near("strides [3, 1] of the base")),  # a two-entry list away from the slice
        (ERROR, far("The errors: `IndexOutOfBoundsError` and others.")),  # far above
        (MASK, near("its strides keep 3 and 1")),
        (MASK, far("Broadcasting is a view: the new axes get stride 0.")),  # not the lead-in
        (MASK, far("`causal.expand([1, 2, 3, 3])` has shape [1, 2, 3, 3]")),  # stated by it
        (TIED, far("`wte` is the token embedding, `[64, 12]`... no, stored [12, 64]")),
        (COPIES, far("copies: 2")),  # a small number far above the exercise
        (Q1, in_code("t = Tensor.from_vec([4], [585, 65, 13, 1])")),  # the exercise's data
        (WORKS, far('Predict the error of `mt.reshape([2, 3, 4])` ("none" if it succeeds).')),
        (TIED, far("Predict the owner (shared or new) of `wte.T`.")),
        (SUM, far("An elementwise op writes the result into a new owner.")),  # not the lead-in
        (Q2, in_code('q2 = predict("x[1, 2, 3]", base_offset=None)  # PREDICTION (2 fields)')),
    ],
)
def test_the_source_search_ignores_text_that_does_not_state_the_answer(
    question: Question, texts: list[Text]
) -> None:
    assert not leaks(question, texts), leaks(question, texts)


SPELLINGS = {
    "list": lambda values: repr(values),
    "tuple": lambda values: repr(tuple(values)),
    "numpy": lambda values: str(np.array(values)),
    "numpy float": lambda values: str(np.array(values, dtype=float)),
    "bare": lambda values: ", ".join(map(str, values)),
    "wrapped": lambda values: "[" + ",\n   ".join(map(str, values)) + "]",
}


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.integers(-999, 999), min_size=3, max_size=8),
    spelling=st.sampled_from(sorted(SPELLINGS)),
    change=st.integers(0, 7),
)
def test_a_long_list_is_found_in_every_spelling_and_a_changed_one_is_not(
    values: list[int], spelling: str, change: int
) -> None:
    question = Question("ch00.q1", "t.view()", {"offsets": values}, ("t.view()",))
    write = SPELLINGS[spelling]
    assert leaks(question, far(f"The offsets are {write(values)} here."))
    other = list(values)
    other[change % len(values)] += 1000 if other[change % len(values)] >= 0 else -1000
    assert not leaks(question, far(f"The offsets are {write(other)} here.")), write(other)


def test_a_name_from_the_question_cell_is_an_expression_like_code_span() -> None:
    question = (
        "Predict the **base offset** of `x[1, 2, 3]` (the value at `k` is `100 + k`): `[1][2][3]`"
    )
    assert question_names("x[1, 2, 3]", question) == ("x[1, 2, 3]", "[1][2][3]")


def test_the_chapter_search_fails_when_an_objective_or_a_heading_states_an_answer() -> None:
    chapter = MANIFEST.chapter("ch01")
    student = read_notebook(REPO / chapter.notebook, chapter.notebook)
    assert chapter_leaks(chapter, student) == []
    doctored = copy.deepcopy(student)
    title = doctored["cells"][0]
    title["source"] = cell_source(title).replace(
        "* compute row-major strides for any shape;",
        "* compute row-major strides for any shape, e.g. `[10, 9, 5, 13] → [585, 65, 13, 1]`;\n"
        "* compute a storage offset, e.g. `[1][2][3]` in `[2, 3, 4]` → 23;",
    )
    position = exercise_cells(doctored, chapter.notebook)["ch01.get_error"]
    question = next(
        cell for cell in reversed(doctored["cells"][:position]) if cell["cell_type"] == "markdown"
    )
    question["source"] = "## 4. The IndexOutOfBoundsError\n\n" + cell_source(question)
    found = chapter_leaks(chapter, doctored)
    assert any("ch01.q1 field strides" in leak and "cell #1 " in leak for leak in found), found
    assert any("ch01.q2 field base_offset" in leak and "cell #1 " in leak for leak in found)
    assert any("ch01.get_error field error" in leak for leak in found), found
    assert len(found) == 3, found


def test_the_objectives_of_the_manifest_are_searched() -> None:
    chapter = MANIFEST.chapter("ch01")
    student = read_notebook(REPO / chapter.notebook, chapter.notebook)
    objectives = (*chapter.objectives, "Compute strides, e.g. [10, 9, 5, 13] -> [585, 65, 13, 1]")
    found = chapter_leaks(dataclasses.replace(chapter, objectives=objectives), student)
    assert [leak for leak in found if "the manifest's objectives" in leak] == found != [], found


# -- stub hints are not the solution -----------------------------------------------------------


def tokens(text: str) -> list[str]:
    """Code read as tokens: words and numbers, and each other character; case ignored."""
    return re.findall(r"\w+|[^\w\s]", text.lower())


def solution_lines(source: str) -> list[str]:
    """The code lines of a solution cell's solution region (comments left out)."""
    region = source.split("# BEGIN SOLUTION", 1)[-1].split("# END SOLUTION", 1)[0]
    lines = [line.strip() for line in region.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def shared_share(hint: str, line: str) -> float:
    """How much of ``line``'s tokens the runs of at least three tokens it shares with ``hint``
    cover (0 to 1)."""
    theirs, ours = tokens(line), tokens(hint)
    matcher = difflib.SequenceMatcher(None, theirs, ours, autojunk=False)
    covered = sum(block.size for block in matcher.get_matching_blocks() if block.size >= 3)
    return covered / len(theirs) if theirs else 0.0


def hint_leaks(hints: Sequence[str], solution: str) -> list[str]:
    """Each hint that holds a solution line or most of one, with that line."""
    found = []
    for line in solution_lines(solution):
        if len(tokens(line)) < MIN_LINE_TOKENS:
            continue
        for text in hints:
            share = shared_share(text, line)
            if share >= HINT_SHARE:
                found.append(f"hint {text!r} holds {share:.0%} of the solution line {line!r}")
    return found


def stub_hints(source: str) -> list[str]:
    """The ``# HINT:`` lines of a student cell, without their marker."""
    return [
        line.strip().removeprefix("# HINT:").strip()
        for line in source.splitlines()
        if line.strip().startswith("# HINT:")
    ]


IMPLEMENTS = [
    (chapter, exercise)
    for chapter in CHAPTERS
    for exercise in chapter.exercises
    if exercise.kind == "implement"
]


@pytest.mark.parametrize(
    ("chapter", "exercise"), IMPLEMENTS, ids=[exercise.id for _, exercise in IMPLEMENTS]
)
def test_no_hint_holds_a_line_of_the_solution(chapter: Chapter, exercise: Exercise) -> None:
    """Neither the stub's ``# HINT:`` lines nor the hints ``hint(id)`` gives one at a time (the
    manifest's) hold a line of the solution, or most of one."""
    solution = read_notebook(REPO / chapter.solution, chapter.solution)
    student = read_notebook(REPO / chapter.notebook, chapter.notebook)
    solved = solution["cells"][exercise_cells(solution, chapter.solution)[exercise.id] - 1]
    stub = student["cells"][exercise_cells(student, chapter.notebook)[exercise.id] - 1]
    found = [
        f"{where} {leak}"
        for where, hints in (
            ("stub", stub_hints(cell_source(stub))),
            ("hint(id)", list(exercise.hints)),
        )
        for leak in hint_leaks(hints, cell_source(solved))
    ]
    assert not found, f"{exercise.id}:\n" + "\n".join(found)


SOLVED = """def relu_kernel():
    # BEGIN SOLUTION
    # HINT: anything
    return '''
    out[gid] = x[gid] > 0.0f ? x[gid] : 0.0f;
'''
    # END SOLUTION
"""


@pytest.mark.parametrize(
    "hint",
    [
        "out[gid] = x[gid] > 0.0f ? x[gid] : 0.0f; (MSL also has max)",
        "write   OUT[gid] = x[gid] > 0.0f ? x[gid] : 0.0f",
        "out[gid] = x[gid] > 0.0f ? x[gid] : 0",  # most of the line
    ],
)
def test_a_hint_holding_a_solution_line_or_most_of_one_is_found(hint: str) -> None:
    assert hint_leaks([hint], SOLVED)


@pytest.mark.parametrize(
    "hint",
    [
        "copy DOUBLE, rename the kernel to relu, and keep the bounds guard",
        "a negative x becomes 0.0f; MSL has a max function",
        "out[gid] is written once",  # a short run of the line, not most of it
    ],
)
def test_a_hint_that_points_at_the_rule_is_not_a_solution_line(hint: str) -> None:
    assert not hint_leaks([hint], SOLVED)


def test_comment_lines_and_short_lines_of_a_solution_are_not_compared() -> None:
    solved = (
        "def f(x):\n    # BEGIN SOLUTION\n    # keep the running product\n    return x\n"
        "    # END SOLUTION\n"
    )
    assert solution_lines(solved) == ["return x"]
    assert not hint_leaks(["keep the running product", "return x"], solved)


# -- hint(...) is importable where the introduction offers it ------------------------------------


def imported_names(source: str, module: str) -> set[str]:
    """The names ``source`` imports ``from module import ...``."""
    return {
        alias.asname or alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module == module
        for alias in node.names
    }


@pytest.mark.parametrize("chapter", CHAPTERS, ids=_id)
def test_the_first_import_cell_brings_hint_before_any_use(chapter: Chapter) -> None:
    """Introductions offer ``hint("<exercise id>")`` in a new cell: the chapter's first import
    cell imports ``hint`` from ``llmfs.widgets`` (as it imports ``predict`` and ``check``), and
    no code cell above it calls ``hint(``."""
    student = read_notebook(REPO / chapter.notebook, chapter.notebook)
    code = [
        (at, cell_source(cell))
        for at, cell in enumerate(student["cells"], start=1)
        if cell["cell_type"] == "code"
    ]
    imports, source = next(
        (at, source) for at, source in code if re.search(r"^(from|import) ", source, re.M)
    )
    assert "hint" in imported_names(source, "llmfs.widgets"), (
        f"{chapter.notebook} cell #{imports}: the first import cell does not import hint"
    )
    calls = [at for at, source in code if re.search(r"\bhint\(", source)]
    assert all(at > imports for at in calls), (chapter.id, calls, imports)


def test_a_notebook_without_the_hint_import_is_found() -> None:
    assert imported_names("from llmfs.widgets import check, hint, predict", "llmfs.widgets") >= {
        "hint"
    }
    assert "hint" not in imported_names("from llmfs.widgets import check, predict", "llmfs.widgets")
    assert "hint" not in imported_names("from llmfs.course import hint", "llmfs.widgets")


# -- an explanation that states an answer is never in the student notebook ----------------------

SLICE_EXERCISE = MANIFEST.exercise("ch02.q4")
SLICE_CHAPTER = dataclasses.replace(
    MANIFEST.chapter("ch02"),
    solution="solutions/synthetic.ipynb",
    notebook="notebooks/synthetic.ipynb",
    objectives=("read the layout of a slice",),
    exercises=(SLICE_EXERCISE,),
)
EXPLANATION = (
    "Offset 3 is skipped between the two rows, so the slice is **not** contiguous even though\n"
    "each row on its own is."
)


def synthetic_solution(explanation_tags: list[str]) -> Notebook:
    """A one-exercise solution notebook: the question, the predict cell, its check, the
    explanation (tagged ``explanation_tags``) and the next section."""

    def cell(kind: str, cell_id: str, source: str, tags: Sequence[str] = ()) -> dict[str, Any]:
        made: dict[str, Any] = {
            "cell_type": kind,
            "id": cell_id,
            "metadata": {"tags": list(tags)} if tags else {},
            "source": source,
        }
        if kind == "code":
            made.update(execution_count=None, outputs=[])
        return made

    predict = (
        'q4 = predict(\n    "view.slice(1, 1, 3)",\n    exercise_id="ch02.q4",\n'
        + "".join(f"    {name}=None,  # PREDICTION\n" for name in SLICE_EXERCISE.fields)
        + ")"
    )
    return {
        "cells": [
            cell("markdown", "title", "# A slice\n\nSlices keep the strides of their owner."),
            cell("markdown", "question", "### Exercise ch02.q4 — a slice\n\nPredict its layout."),
            cell("code", "predict", predict, ["exercise:ch02.q4"]),
            cell("code", "check", "check(q4)"),
            cell("markdown", "after", EXPLANATION, explanation_tags),
            cell("markdown", "next", "## 2. The next section\n\nMore rules."),
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def synthetic_leaks(explanation_tags: list[str]) -> list[str]:
    from llmfs.course.build import student_notebook

    _ANSWERS.setdefault("ch02.q4", answers(MANIFEST.chapter("ch02"), SLICE_EXERCISE))
    solution = synthetic_solution(explanation_tags)
    student = student_notebook(solution, SLICE_CHAPTER.solution, SLICE_CHAPTER)
    return chapter_leaks(SLICE_CHAPTER, student)


def test_an_explanation_put_back_under_its_check_is_a_leak() -> None:
    """The text right under a check is on screen while the learner predicts: as plain markdown
    the explanation states the slice's contiguity, and the search says where."""
    found = synthetic_leaks([])
    assert found and all("ch02.q4 field contiguous" in leak for leak in found), found
    assert any("id 'after'" in leak and "not contiguous" in leak for leak in found), found


def test_an_explanation_tagged_for_its_exercise_leaves_the_student_notebook() -> None:
    assert synthetic_leaks(["explains:ch02.q4"]) == []


@pytest.mark.parametrize(
    ("question", "texts"),
    [
        # under the exercise, prose about the result needs no name to state it (rule 5)
        (Q2, [Text("cell #9", "It reads offset 23, the last of the block.", True, below=True)]),
        (ERROR, [Text("cell #9", "So it raises IndexOutOfBoundsError.", True, below=True)]),
        (WORKS, [Text("cell #9", "The reshape works: it only splits.", True, below=True)]),
        # every hint is read as the learner reads it
        (SLICE, [Text("hint 1 of 2", "Its strides are [3, 1], the owner's.", True, below=True)]),
        (SUM, [Text("hint 2 of 2", "An elementwise op allocates a new owner.", True, below=True)]),
    ],
)
def test_prose_under_an_exercise_and_its_hints_are_searched(
    question: Question, texts: list[Text]
) -> None:
    assert leaks(question, texts), texts[0].source


@pytest.mark.parametrize(
    ("question", "texts"),
    [
        # the same sentences far above the exercise, or past the next section, name nothing
        (Q2, [Text("cell #1", "It reads offset 23, the last of the block.", False)]),
        (WORKS, [Text("cell #1", "The reshape works: it only splits.", False)]),
        # the question's quoted options are not an answer
        (
            Question("ch10.q2", "compare_runs()", {"loss": "higher"}, ("compare_runs()",)),
            [Text("cell #9", 'Predict the loss: "lower", "same" or "higher".', True, below=True)],
        ),
        # a one-value answer is searched in brackets only ("0" is everywhere), not as an index
        (
            Question("ch01.q4", "t.view()", {"offsets": [0]}, ("t.view()",)),
            [Text("cell #9", "An axis of size 0 holds 0 values; see size[0].", True, below=True)],
        ),
    ],
)
def test_the_search_under_an_exercise_ignores_what_states_no_answer(
    question: Question, texts: list[Text]
) -> None:
    assert not leaks(question, texts), leaks(question, texts)
