"""``llmfs grade`` on chapter 11: its solution scores full marks, its unanswered student notebook
scores nothing, a BPE trainer that breaks ties toward the pair counted first loses exactly that
exercise on the grader's hidden cases (and the notebook's check names the rule), a sampler that
calls the library's is refused, and a wrong prediction gets its misconception. ``llmfs check`` on
the solution is ``test_grading_selfcheck_solutions.py``'s, run once for every chapter."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import gradingkit as kit
import pytest

from llmfs.course.exercise_checks import check_train_bpe
from llmfs.gpt.tokenizer import pretokenize

pytestmark = pytest.mark.notebooks

CHAPTER = kit.MANIFEST.chapter("ch11")
NAME = Path(CHAPTER.notebook).name
# --no-execute: the scores never depend on the notebook's run, and nothing here asserts how
# it went. The grader's notebook runs are the acceptance and hostile tests', and every
# chapter's solution runs to its end under llmfs check (test_grading_selfcheck_solutions.py).
LIMITS = kit.sandbox_limits("--no-execute", "--memory-mb", "2048", "--cases", "30")

# Ties go to the pair counted first (Counter.most_common), not to the smallest pair.
FIRST_SEEN = """def train_bpe(text, num_merges):
    counts = Counter(pretokenize(text))
    ids = [list(word.encode("utf-8")) for word in counts]
    freqs = list(counts.values())
    merges = []
    for new in range(256, 256 + num_merges):
        pairs = Counter()
        for word, freq in zip(ids, freqs):
            for pair in zip(word, word[1:]):
                pairs[pair] += freq
        if not pairs:
            break
        best = pairs.most_common(1)[0][0]
        merges.append(best)
        out = []
        for word in ids:
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    merged.append(new)
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            out.append(merged)
        ids = out
    return merges
"""
BORROWED = """def sample_next(logits, temperature, top_k, rng):
    return Sampler(float(temperature), top_k, rng).choose(logits)
"""
HOTTER = """def sample_next(logits, temperature, top_k, rng):
    z = np.asarray(logits, dtype=np.float64)
    if temperature == 0 or top_k == 1:
        return z.argmax(axis=-1)
    k = z.shape[1] if top_k is None else top_k
    out = []
    for row in z:
        candidates = np.argsort(-row, kind="stable")[:k]
        scaled = row[candidates] / (1.3 * temperature)
        weights = np.exp(scaled - scaled.max())
        out.append(candidates[rng.choice(k, p=weights / weights.sum())])
    return np.array(out)
"""


def _points(exercise_id: str) -> int:
    return kit.MANIFEST.exercise(exercise_id).points


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    solved = kit.solution_notebook(CHAPTER)
    stale = kit.set_source(
        solved,
        "ch11.q4",
        'q4 = predict(\n    "stale_after_write()",\n    exercise_id="ch11.q4",\n'
        "    before=False,\n    slot=True,\n    layer1=False,\n    after=False,\n)",
    )
    submissions = {
        "solved": solved,
        "blank": kit.student_notebook(CHAPTER),
        "first_seen": kit.set_source(solved, "ch11.train_bpe", FIRST_SEEN),
        "borrowed": kit.set_source(solved, "ch11.sample_next", BORROWED),
        "hotter": kit.set_source(solved, "ch11.sample_next", HOTTER),
        "per_cell": stale,
    }
    root = tmp_path_factory.mktemp("ch11-class")
    return kit.grade_class(root, CHAPTER, submissions, "--seed", "7", *LIMITS)


def test_the_solution_scores_every_checked_point(graded: dict[tuple[str, str], Any]) -> None:
    kit.scores_every_checked_point(graded, CHAPTER, "solved")


def test_the_blank_notebook_scores_nothing(graded: dict[tuple[str, str], Any]) -> None:
    kit.scores_nothing(graded, CHAPTER, "blank")


def _others_kept(graded: dict[tuple[str, str], Any], student: str, lost: str) -> None:
    kit.scores_every_checked_point(graded, CHAPTER, student, but=(lost,))


def test_a_trainer_with_ties_to_the_first_counted_pair_loses_it_and_is_told_the_rule(
    graded: dict[tuple[str, str], Any],
) -> None:
    row = graded[("first_seen", "ch11.train_bpe")]
    assert row.score == 0 and row.status == "wrong", row
    _others_kept(graded, "first_seen", "ch11.train_bpe")
    # The grader says right or wrong; the notebook's check of the same code names the rule.
    names: dict[str, Any] = {"Counter": Counter, "pretokenize": pretokenize}
    exec(FIRST_SEEN, names)
    report = " ".join(repr(check_train_bpe(names["train_bpe"], record_attempt=False)).split())
    assert "the smallest (left id, right id) is merged, not the one counted first" in report


def test_a_sampler_that_calls_the_librarys_is_refused(graded: dict[tuple[str, str], Any]) -> None:
    row = graded[("borrowed", "ch11.sample_next")]
    assert row.score == 0
    assert "Sampler.choose" in row.message, row.message
    _others_kept(graded, "borrowed", "ch11.sample_next")


def test_a_sampler_with_a_wrong_temperature_loses_exactly_it(
    graded: dict[tuple[str, str], Any],
) -> None:
    # Drawn its own way (rng.choice), judged on its distribution: the temperature is what fails.
    assert graded[("hotter", "ch11.sample_next")].score == 0
    _others_kept(graded, "hotter", "ch11.sample_next")


def test_staleness_per_cell_gets_its_misconception(graded: dict[tuple[str, str], Any]) -> None:
    row = graded[("per_cell", "ch11.q4")]
    assert row.score < _points("ch11.q4") and "wrong: before" in row.message, row
    # The grader names the misconception the manifest gives that value, as the notebook does.
    assert "Staleness is per owner, not per cell" in row.message, row.message
    _others_kept(graded, "per_cell", "ch11.q4")


def test_the_notebooks_check_names_the_per_cell_misconception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(tmp_path / "attempts.jsonl"))
    notebook = kit.solution_notebook(CHAPTER)
    [setup] = ["".join(c["source"]) for c in notebook["cells"] if c["id"] == "ch11-stale-setup"]
    names: dict[str, Any] = {"__name__": "learner"}
    exec("import numpy as np\nimport llmfs.tensor as lt\n" + setup, names)
    exec(
        "from llmfs.widgets import check, predict\n"
        'q4 = predict("stale_after_write()", exercise_id="ch11.q4", before=False, slot=True,'
        " layer1=False, after=False)\n"
        "text = repr(check(q4))",
        names,
    )
    assert "Staleness is per owner, not per cell" in names["text"], names["text"]
    assert "✗ before" in names["text"] and "✓ slot" in names["text"], names["text"]
