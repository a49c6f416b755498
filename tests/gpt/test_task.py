"""The capstone task: exact answers, a 12-token vocabulary, a split that never overlaps."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from llmfs.gpt import task
from llmfs.gpt.checkpoint import TINY_GPT_RECORD_PATH
from llmfs.gpt.errors import GPTError, TaskError


def test_a_problem_is_written_with_padded_operands_and_a_reversed_sum() -> None:
    assert task.prompt(37, 45) == "37+45="
    assert task.answer(37, 45) == "280"
    assert task.prompt(7, 5) == "07+05="
    assert task.answer(7, 5) == "210"
    assert task.answer(99, 99) == "891"
    assert task.read_answer("891") == 198


def test_the_checker_accepts_only_the_exact_answer() -> None:
    assert task.is_correct(37, 45, "280")
    assert not task.is_correct(37, 45, "082")  # the sum written the usual way round
    assert not task.is_correct(37, 45, "28")
    assert not task.is_correct(37, 45, "2800")
    assert task.read_answer("28") is None and task.read_answer("2+0") is None


def test_encode_and_decode_are_inverse_over_the_vocabulary() -> None:
    assert task.VOCAB == "0123456789+="
    ids = task.encode("37+45=280")
    assert ids == [3, 7, 10, 4, 5, 11, 2, 8, 0]
    assert task.decode(ids) == "37+45=280"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: task.encode("3-4"), "['-'] are not in the vocabulary"),
        (lambda: task.decode([3, 12]), "token id 12 is outside the vocabulary 0..11"),
        (lambda: task.prompt(100, 1), "operand a = 100 is outside 0..99"),
        (lambda: task.answer(1, -1), "operand b = -1 is outside 0..99"),
        (lambda: task.split(held_out_fraction=1.0), "held_out_fraction = 1.0 must lie strictly"),
    ],
)
def test_bad_input_is_a_task_error_naming_the_numbers(call, message: str) -> None:
    with pytest.raises(TaskError, match=None) as info:
        call()
    assert isinstance(info.value, GPTError) and isinstance(info.value, ValueError)
    assert message in str(info.value)


def test_sequences_are_prompt_then_answer_tokens() -> None:
    seqs = task.sequences(np.array([[37, 45], [0, 0]]))
    assert seqs.shape == (2, task.SEQUENCE_LENGTH) and seqs.dtype == np.int64
    assert task.decode(seqs[0]) == "37+45=280"
    assert task.decode(seqs[1]) == "00+00=000"
    assert task.decode(task.prompts(np.array([[37, 45]]))[0]) == "37+45="


def test_the_split_is_deterministic_disjoint_and_covers_every_problem() -> None:
    first, second = task.split(), task.split()
    assert np.array_equal(first.train, second.train)
    assert np.array_equal(first.held_out, second.held_out)
    train = {tuple(p) for p in first.train.tolist()}
    held = {tuple(p) for p in first.held_out.tolist()}
    assert not train & held
    assert len(train) + len(held) == 10_000 == len(train | held)
    # About a tenth is held out, and a mirror image never crosses the split.
    assert 800 <= len(held) <= 1200
    assert all((b, a) in held for a, b in held)


def test_another_seed_gives_another_split() -> None:
    assert not np.array_equal(task.split(seed=1).held_out, task.split().held_out)


def test_the_split_is_the_one_the_shipped_weights_were_trained_on() -> None:
    record = json.loads(TINY_GPT_RECORD_PATH.read_text())
    held_out = task.split().held_out
    assert len(held_out) == record["split"]["held_out_problems"]
    assert task.digest(held_out) == record["split"]["held_out_sha256"]
    expected = hashlib.sha256(np.ascontiguousarray(held_out, dtype="<i8").tobytes()).hexdigest()
    assert task.digest(held_out) == expected
