"""A try is a distinct prediction: checking answers already tried (a re-run, Run All, a restarted
kernel, another spelling of the same answer) spends nothing and reveals nothing; the state rebuilt
from the log after a restart counts by the same rule."""

from __future__ import annotations

import json
import random
from pathlib import Path

from exercisekit import RIGHT, WRONG, WRONGS, seed_fixture

from llmfs.course.attempts import load_attempts, load_events
from llmfs.course.exercises import state
from llmfs.course.exercises.api import MAX_WRONG_TRIES, Comparison, check, predict


def _check(answers: dict, **options: object) -> Comparison:
    result = check(
        predict("base.transpose(0, 1)", exercise_id="ch02.q1", **answers),
        {"base": seed_fixture()},
        **options,  # type: ignore[arg-type]
    )
    assert isinstance(result, Comparison)
    return result


def test_the_same_prediction_checked_again_is_shown_again_and_not_counted(
    attempts_log: Path,
) -> None:
    first = _check(WRONG)
    assert first.recorded and not first.repeated
    for _ in range(5):  # re-runs, "Run All" again and again
        again = _check(WRONG)
        assert not again.recorded and again.repeated
        assert [v.status for v in again.verdicts] == [v.status for v in first.verdicts]
        assert again.tries_left == first.tries_left == {"shape": 3, "strides": 2, "offsets": 2}
        assert not any(v.revealed for v in again.verdicts)
        headline = repr(again).split("\npredict ")[0]
        assert "(already tried: not counted again)" in " ".join(headline.split())
        assert all(len(line) <= 88 for line in repr(again).splitlines())
    assert [a.attempt for a in load_attempts(attempts_log)] == [1]
    assert load_events(attempts_log) == []


def test_another_spelling_of_the_same_answer_is_the_same_prediction(attempts_log: Path) -> None:
    _check(WRONG)
    spelled = {"shape": "3, 2", "strides": (2, 1), "offsets": "0 1 2 3 4 5"}
    assert _check(spelled).repeated
    assert len(load_attempts(attempts_log)) == 1


def test_a_restarted_kernel_keeps_the_rule(attempts_log: Path) -> None:
    _check(WRONGS[0])
    state._STATES.clear()  # a kernel restart forgets everything but the log
    assert _check(WRONGS[0]).repeated
    state._STATES.clear()
    second = _check(WRONGS[1])
    assert second.recorded and second.tries_left == {"shape": 3, "strides": 1, "offsets": 1}
    assert [a.attempt for a in load_attempts(attempts_log)] == [1, 2]


def test_a_log_with_repeated_answers_counts_each_distinct_prediction_once(
    attempts_log: Path,
) -> None:
    # A log written before the rule: the same wrong answer three times, then a reveal.
    _check(WRONG)
    line = attempts_log.read_text().splitlines()[0]
    repeated = [json.loads(line) for _ in range(3)]
    for number, record in enumerate(repeated, start=1):
        record.update(attempt=number, first=number == 1)
    attempts_log.write_text("".join(json.dumps(r) + "\n" for r in repeated))
    state._STATES.clear()
    rebuilt = state.exercise_state("ch02.q1")
    assert rebuilt.attempts == 1 and rebuilt.wrong_tries == {"strides": 1, "offsets": 1}


def test_only_distinct_wrong_predictions_lead_to_a_reveal(attempts_log: Path) -> None:
    _check(WRONGS[0])
    _check(WRONGS[1])
    assert not any(v.revealed for v in _check(WRONGS[0]).verdicts)  # tried before: not a try
    third = _check(WRONGS[2])
    revealed = {v.field for v in third.verdicts if v.revealed}
    assert revealed == {"strides", "offsets"}
    assert _check(RIGHT).all_right
    assert [a.attempt for a in load_attempts(attempts_log)] == [1, 2, 3, 4]


def test_an_explicit_reveal_still_works_on_a_repeated_prediction(attempts_log: Path) -> None:
    _check(WRONG)
    shown = _check(WRONG, reveal=True)
    assert shown.repeated and {v.field for v in shown.verdicts if v.revealed} == {
        "strides",
        "offsets",
    }
    assert [e.fields for e in load_events(attempts_log)] == [("offsets", "strides")]


def test_random_sequences_of_checks_count_distinct_predictions(attempts_log: Path) -> None:
    # Any order of re-runs, repeats and restarts: the tries are the distinct predictions, a
    # field's wrong tries the distinct predictions it was wrong in, and a field is revealed
    # exactly when those reach the limit.
    rng = random.Random(20261207)
    pool = [*WRONGS, {"shape": [2, 3], "strides": [2, 1], "offsets": [0, 1, 2, 3, 4, 5]}]
    for _ in range(6):
        attempts_log.unlink(missing_ok=True)
        state._STATES.clear()
        tried: list[int] = []
        for _ in range(rng.randrange(1, 12)):
            if rng.random() < 0.2:
                state._STATES.clear()  # a restart between checks
            pick = rng.randrange(len(pool))
            result = _check(pool[pick])
            assert result.repeated == (pick in tried)
            if pick not in tried:
                tried.append(pick)
            wrong: dict[str, int] = {}
            for index in tried:
                for field, value in pool[index].items():
                    if value != RIGHT[field]:
                        wrong[field] = wrong.get(field, 0) + 1
            shown = {v.field for v in result.verdicts if v.revealed}
            assert shown == {f for f, n in wrong.items() if n >= MAX_WRONG_TRIES}
        assert len(load_attempts(attempts_log)) == len(tried)
