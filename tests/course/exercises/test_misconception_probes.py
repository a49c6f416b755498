"""The misconception probes: plausible wrong answers a learner gives, over every chapter, and
what the feedback says about them.

Each probe (:data:`PROBES`) is an exercise of the course manifest, one field, a wrong value and
the misconception it shows. The probes are written from how learners think, not taken from the
manifest's ``mistakes`` catalogue (a test checks that none is a catalogued mistake), so the share
of them that gets a named explanation measures the general detectors
(:mod:`llmfs.course.exercises.detectors`), not the per-exercise lists. Each exercise runs in the
names its chapter defines before it (:data:`SETUPS`, checked against the solution's answers).

Every explanation, of a probe and of every catalogued mistake, names a rule and never states the
exercise's answer: the answer search is the one the hints are held to
(:func:`test_chapters.states_answer`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from llmfs.course.exercises.compare import same_answer
from llmfs.course.exercises.describe import ExpressionError
from llmfs.course.exercises.entries import UnreadableEntry, is_plain, normalize, plain_value
from llmfs.course.exercises.judge import FieldVerdict, compare
from llmfs.course.exercises.misconceptions import MISCONCEPTIONS, Context
from llmfs.course.exercises.run import Outcome, run
from llmfs.course.manifest import Chapter, Exercise, load_manifest

# The chapter tests hold the answer search and read the solutions' answers: one implementation.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_chapters import solution_answers, states_answer

REPO = Path(__file__).resolve().parents[3]
MANIFEST = load_manifest(REPO / "course" / "manifest.toml")

#: What each chapter's notebook defines before its exercises (the names the expressions use).
SETUPS: dict[str, str] = {
    "ch01": """
from llmfs.tensor import Tensor
x = Tensor.from_vec([2, 3, 4], [100 + k for k in range(24)])
""",
    "ch02": """
from llmfs.tensor import Tensor
base = Tensor.from_vec([2, 3], [10, 11, 12, 20, 21, 22])
view = base.view()
cube = Tensor.from_vec([2, 3, 4], [100 + k for k in range(24)])
sliced = view.slice(1, 1, 3)
owner = Tensor.from_vec([2], [10.0, 20.0])
early = owner.view()
owner.as_mut_slice()[0] = 99.0
x = Tensor.from_vec([1, 3, 4], [100 + k for k in range(12)])
attention_out = Tensor.from_vec([1, 2, 3, 2], [100 + k for k in range(12)])
qkv = Tensor.from_vec([1, 3, 12], [100 + k for k in range(36)])
""",
    "ch03": """
from llmfs.tensor import Tensor
t4 = Tensor.from_vec([2, 3, 4, 5], [100 + k for k in range(120)])
t2 = Tensor.from_vec([3, 20], [100 + k for k in range(60)])
m = Tensor.from_vec([4, 6], [100 + k for k in range(24)])
mt = m.transpose(0, 1)
row = Tensor.from_vec([10], [100 + k for k in range(10)])
grid = Tensor.from_vec([2, 3], [100 + k for k in range(6)])
""",
    "ch04": """
from llmfs.tensor import Tensor, copyto, ops
base = Tensor.from_vec([2, 3], [10, 11, 12, 20, 21, 22])
view = base.view()
b = Tensor.from_vec([3], [1, 2, 3])
c = Tensor.from_vec([2, 1], [100, 200])
wide = b.view().expand([2, 3])
empty = Tensor.zeros([0, 3])
""",
    "ch05": """
from llmfs.tensor import Tensor, add, relu, use_backend
KERNELS = "metal-emulator"
offsets = Tensor.from_vec([2, 3], [0, 1, 2, 3, 4, 5], dtype="float32")
def kernel_walk(v):
    with use_backend(KERNELS):
        out = relu(v)
    return {"reads": [int(r) for r in out.to_numpy().reshape(-1)], "out_strides": list(out.strides)}
def narrowed(value):
    x32 = Tensor.from_vec([1], [value], dtype="float32")
    with use_backend(KERNELS):
        plus_one = add(x32, 1.0)
    return {"stored": x32.tolist()[0], "plus_one": plus_one.tolist()[0]}
""",
    "ch06": """
from llmfs.tensor import EinsumPlan, Tensor, einsum, reduce
a = Tensor.from_vec([2, 3], [1, 2, 3, 4, 5, 6])
b = Tensor.from_vec([3, 2], [1, 0, 0, 1, 1, 1])
plan = EinsumPlan("ik,kj->ij", a, b)
at = Tensor.from_vec([3, 2], [1, 4, 2, 5, 3, 6]).view().transpose(0, 1)
out = Tensor.zeros(plan.output_shape, dtype=plan.output_dtype)
""",
    "ch07": """
import math
from llmfs.tensor import Tensor, exp, ops
qkv = Tensor.from_vec([1, 3, 12], [100 + k for k in range(36)])
q = qkv.slice(2, 0, 4).split(2, [2, 2]).permute([0, 2, 1, 3])
kt = qkv.slice(2, 4, 8).split(2, [2, 2]).permute([0, 2, 3, 1])
v = qkv.slice(2, 8, 12).split(2, [2, 2]).permute([0, 2, 1, 3])
scaled = (q @ kt) * (1 / math.sqrt(2))
causal = Tensor.from_vec(
    [3, 3], [0.0 if j <= i else -math.inf for i in range(3) for j in range(3)]
)
def softmax(x, axis):
    shifted = x - ops.max(x, axis, keepdims=True)
    e = exp(shifted)
    return e / ops.sum(e, axis, keepdims=True)
masked = scaled + causal.expand([1, 2, 3, 3])
y = softmax(masked, -1) @ v
""",
    "ch08": """
import llmfs.tensor as lt
from llmfs.gpt.checkpoint import load_tiny_gpt
from llmfs.gpt.tensor_model import tensor_params
params, config = load_tiny_gpt()
wte = tensor_params(params)["wte.weight"]
qkv = lt.Tensor.zeros([1, 6, 192])
heads = lt.Tensor.zeros([1, 4, 6, 16])
""",
    "ch09": """
import numpy as np
import llmfs.tensor as lt
def gradient_of(owner, loss_fn):
    owner.grad = None
    loss_fn().backward()
    grad = owner.grad.to_numpy()
    cells = [int(k) for k in np.flatnonzero(grad.reshape(-1))]
    return {"grad_shape": list(grad.shape), "grad": grad.tolist(), "cells": cells}
row = lt.Tensor.from_numpy(np.array([1.0, 2.0, 3.0]), requires_grad=True)
grid = lt.Tensor.from_numpy(np.arange(12.0).reshape(4, 3))
x = lt.Tensor.from_numpy(np.arange(10.0), requires_grad=True)
w3 = lt.Tensor.from_numpy(np.array([10.0, 20.0, 30.0]))
m = lt.Tensor.from_numpy(np.arange(6.0).reshape(2, 3), requires_grad=True)
u = lt.Tensor.from_numpy(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
x4 = lt.Tensor.from_numpy(np.array([1.0, 2.0, 3.0, 4.0]), requires_grad=True)
""",
    "ch10": """
import numpy as np
from llmfs.course.exercise_checks.training import cross_entropy_reference
from llmfs.gpt import task
from llmfs.gpt.train import answer_weights
batch = task.sequences(task.split().train)[:64]
def equal_logits_loss():
    logits = np.zeros((len(batch), batch.shape[1] - 1, 12))
    return cross_entropy_reference(logits, batch[:, 1:], answer_weights(len(batch)))[0]
""",
    "ch11": """
import llmfs.tensor as lt
cache = lt.Tensor.zeros([2, 2, 4, 16, 8])
t = 5
""",
    "ch12": """
from llmfs.course.exercise_checks.cooperate import global_reads, missing_barrier, thread_census
""",
    "ch13": """
from llmfs.gpt.text_corpus import load_tokenizer
from llmfs.gpt.text_eval import perplexity, uniform_loss
V = load_tokenizer().vocab_size
""",
    "ch14": """
from llmfs.gpt import lora
from llmfs.gpt import tensor_model as tm
from llmfs.gpt.finetune import chapter_data
adder, config, train_rows, held_out = chapter_data()
def capstone_trainable(rank):
    names = lora.layer_names(config.n_layer, lora.BLOCK_LINEARS)
    return lora.adapt(tm.tensor_params(adder), names, rank, 2 * rank).trainable_parameters()
""",
}


@dataclass(frozen=True)
class Probe:
    """A plausible wrong answer: ``value`` for ``field`` of exercise ``exercise``, showing
    ``misconception`` (what the learner thought)."""

    exercise: str
    field: str
    value: Any
    misconception: str


#: Written from how learners think about each request, not from the manifest's catalogue.
PROBES: tuple[Probe, ...] = (
    Probe("ch01.q1", "strides", [1, 10, 90, 450], "column-major strides"),
    Probe("ch01.q2", "base_offset", 6, "the indices summed without their strides"),
    Probe("ch01.get_error", "error", "IndexError", "the base class named"),
    Probe("ch01.get_error", "error", "none", "get clamps a coordinate past its axis"),
    Probe("ch01.q3", "base_offset", 1, "the row index alone moves the start"),
    Probe("ch01.q3", "base_offset", 0, "a slice's base offset is 0"),
    Probe("ch01.q4", "shape", [1], "a scalar has one axis of size 1"),
    Probe("ch01.q4", "strides", [1], "a scalar has stride 1"),
    Probe("ch01.q5", "offsets", [0], "an empty tensor still visits offset 0"),
    Probe("ch02.q1", "strides", [1, 3], "the transpose's strides given for the reshape"),
    Probe("ch02.q1", "offsets", [0, 3, 1, 4, 2, 5], "the transpose's walk given for the reshape"),
    Probe("ch02.q2", "strides", [3, 1], "a transpose keeps the source's strides"),
    Probe("ch02.q2", "offsets", [0, 1, 2, 3, 4, 5], "the reshape's walk given for the transpose"),
    Probe("ch02.q3", "shape", [3, 4, 2], "the inverse permutation (sizes)"),
    Probe("ch02.q3", "strides", [4, 1, 12], "the inverse permutation (strides)"),
    Probe("ch02.q4", "shape", [2, 3], "the slice's stop kept"),
    Probe("ch02.q4", "base_offset", 0, "a slice's base offset is 0"),
    Probe("ch02.q4", "contiguous", True, "a view is always contiguous"),
    Probe("ch02.q6", "strides", [3, 1], "a copy keeps its source's strides"),
    Probe("ch02.q7_stale", "error", "none", "none for a stale view"),
    Probe("ch02.heads_split", "shape", [1, 3, 2, 2], "head-axis order"),
    Probe("ch02.heads_split", "contiguous", True, "a view is always contiguous"),
    Probe("ch02.qkv", "strides", [12, 4, 1], "a slice is a block of its own"),
    Probe("ch03.q1", "strides", [60, 20, 1], "the merged axis steps like its outer axis"),
    Probe("ch03.q2", "strides", [20, 1, 4], "the split's new axes column-major"),
    Probe("ch03.q3", "error", "ValueError", "the base class named"),
    Probe("ch03.q4", "error", "NonContiguousReshapeError", "transposes never reshape"),
    Probe("ch03.q4", "strides", [12, 4, 1], "a reshape of a view is a new row-major owner"),
    Probe("ch03.q5", "error", "none", "a transpose flattens like its source"),
    Probe("ch03.q6", "shape", [3], "floor instead of ceil for the step"),
    Probe("ch03.q7", "strides", [3, 1], "a flip keeps the stride's direction"),
    Probe("ch03.q7", "base_offset", 0, "a flip starts at offset 0"),
    Probe("ch04.q2", "strides", [1, 1], "expand keeps a stride for the stretched axis"),
    Probe("ch04.q4", "shape", "raises BroadcastError", "broadcasting aligned from the left"),
    Probe("ch04.q6", "shape", "raises BroadcastError", "broadcasting aligned from the left"),
    Probe("ch04.q7", "owner", "shared", "materialize is a view"),
    Probe("ch04.q8", "shape", [1, 3], "keepdims added"),
    Probe("ch04.q9", "values", [[30, 32, 34]], "reduced over the wrong axis (kept)"),
    Probe("ch04.q10", "shape", [1, 2], "keepdims added"),
    Probe("ch04.q11", "error", "ValueError", "a Python error for the refusal"),
    Probe("ch04.q12", "shape", [3], "reduce sums over the labels it lists"),
    Probe("ch05.thread_reads", "out_strides", [3, 1], "the result keeps the owner's strides"),
    Probe("ch05.narrowing", "stored", 16777216.5, "float32 keeps a fraction at any size"),
    Probe("ch06.q2", "shape", [3], "reduce sums over the labels it lists"),
    Probe("ch06.q3", "offsets", [0, 3, 1, 4, 2, 5], "einsum's result walked like a view"),
    Probe("ch06.q6", "error", "IndexError", "a Python error for the refusal"),
    Probe("ch06.q12", "error", "TensorError", "the base class named"),
    Probe("ch06.q14", "strides", [2, 1], "the output view is a new row-major owner"),
    Probe("ch07.q1", "shape", [1, 3, 2, 2], "head-axis order"),
    Probe("ch07.q2", "strides", [36, 1, 12, 2], "the inverse permutation"),
    Probe("ch07.q3", "base_offset", 0, "a slice's base offset is 0"),
    Probe("ch07.q5", "strides", [1, 1, 3, 1], "expand keeps a stride for the new axes"),
    Probe(
        "ch07.q6",
        "values",
        [[[[1, 0, 0], [0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3]]] * 2],
        "uniform causal averaging",
    ),
    Probe("ch07.q8", "owner", "shared", "a reshape after materialize is still the source's"),
    Probe("ch08.q2", "owner", "new", "a transpose copies"),
    Probe("ch08.q3", "shape", [1, 6, 4, 16], "head-axis order"),
    Probe("ch02.q3", "strides", [2, 0, 1], "the permutation's own numbers given as strides"),
    Probe("ch04.q8", "values", [[30, 32, 34]], "keepdims added"),
    Probe("ch06.q1", "shape", [2, 3], "a product keeps its first operand's shape"),
    Probe(
        "ch09.q1",
        "grad",
        [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]],
        "a broadcast's gradient left in the view's shape",
    ),
    Probe("ch09.q2", "cells", [1, 2, 3], "a slice reads consecutive cells"),
    Probe("ch09.q3", "grad_shape", [2, 2], "the gradient takes the other operand's shape"),
    Probe("ch10.q1", "loss", 1.0, "one unit of loss per wrong guess"),
    Probe("ch11.q3", "contiguous", True, "a view is always contiguous"),
    Probe("ch11.q3", "base_offset", 0, "a slice's base offset is 0"),
    Probe("ch12.q2", "tiled", 32, "one tile's reads counted twice over"),
    Probe("ch12.q3", "launched", 160, "only the rows rounded up to whole tiles"),
    # Numbers: another log base, a factor too many or too few, the sign.
    Probe("ch10.q1", "loss", 1.08, "log10 instead of the natural log"),
    Probe("ch13.q1", "loss", 2.89, "log10 instead of the natural log"),
    Probe("ch14.q2", "trainable", 16384, "the adapter's alpha (2r = 8) taken for its rank"),
    Probe("ch10.q1", "loss", -2.48, "log p instead of -log p"),
    Probe("ch10.q1", "loss", 7.45, "the three answer positions summed, not averaged"),
    Probe("ch12.q2", "naive", 256, "the reads and the write of each product counted"),
    Probe("ch05.narrowing", "plus_one", 16777219, "the rounded value, then 1 added exactly"),
    Probe("ch03.q7", "base_offset", -2, "a flip starts before the owner's first cell"),
    Probe("ch04.q8", "values", [15, 16, 17], "the mean over the axis, not the sum"),
)

#: The share of probes that must get a named explanation.
TARGET = 0.95


def _exercise(exercise_id: str) -> tuple[Chapter, Exercise]:
    for chapter in MANIFEST.published_chapters:
        for exercise in chapter.exercises:
            if exercise.id == exercise_id:
                return chapter, exercise
    raise KeyError(exercise_id)


@cache
def _names(chapter_id: str) -> Mapping[str, Any]:
    names: dict[str, Any] = {"__name__": "probes"}
    exec(SETUPS[chapter_id], names)
    return names


@cache
def outcome(exercise_id: str) -> Outcome:
    """The exercise's outcome in its chapter's names."""
    chapter, exercise = _exercise(exercise_id)
    plain = is_plain(exercise.fields)
    return run(exercise.expression, dict(_names(chapter.id)), plain=plain)


def verdict(probe: Probe) -> FieldVerdict:
    """The verdict on the probe's field, every other field answered right."""
    chapter, exercise = _exercise(probe.exercise)
    answers = {**solution_answers(chapter, exercise), probe.field: probe.value}
    _, exercise = _exercise(probe.exercise)
    (found,) = [
        v
        for v in compare(answers, outcome(probe.exercise), mistakes=exercise.mistakes)
        if v.field == probe.field
    ]
    return found


def _probe_id(probe: Probe) -> str:
    return f"{probe.exercise}.{probe.field}={probe.value!r}"[:60]


def test_the_probes_cover_every_chapter_and_are_not_the_catalogue() -> None:
    assert len(PROBES) >= 30
    assert {p.exercise.split(".")[0] for p in PROBES} == {c.id for c in MANIFEST.published_chapters}
    for probe in PROBES:
        _, exercise = _exercise(probe.exercise)
        plain = is_plain(exercise.fields)
        for mistake in exercise.mistakes:
            if mistake.field == probe.field:
                assert not same_answer(
                    _read(plain, probe.field, mistake.answer),
                    _read(plain, probe.field, probe.value),
                ), probe


def _read(plain: bool, field: str, value: Any) -> Any:
    try:
        return plain_value(value) if plain else normalize(field, value)
    except UnreadableEntry:  # "raises BroadcastError" is an entry no catalogue answer is
        return value


@pytest.mark.parametrize("exercise_id", sorted({p.exercise for p in PROBES}))
def test_each_setup_gives_the_solutions_answers(exercise_id: str) -> None:
    """The probes' names are the notebook's: every field's truth is the solution's answer."""
    chapter, exercise = _exercise(exercise_id)
    answers = solution_answers(chapter, exercise)
    verdicts = compare(answers, outcome(exercise_id))
    assert all(v.status == "right" for v in verdicts), [(v.field, v.status) for v in verdicts]


@pytest.mark.parametrize("probe", PROBES, ids=_probe_id)
def test_each_probe_is_wrong_and_every_detector_reads_it_without_failing(probe: Probe) -> None:
    found = verdict(probe)
    assert found.status == "wrong", found
    given = {probe.field: probe.value}
    context = Context(outcome(probe.exercise), given)
    truth = outcome(probe.exercise).truth(probe.field)
    for misconception in MISCONCEPTIONS:
        if misconception.field == probe.field and found.value is not None:
            misconception.detect(found.value, truth, context)  # raises nothing


def test_at_least_95_percent_of_the_probes_get_a_named_explanation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    unnamed = [probe for probe in PROBES if not verdict(probe).mistakes]
    named = len(PROBES) - len(unnamed)
    with capsys.disabled():
        print(f"\nmisconception probes named: {named}/{len(PROBES)} ({named / len(PROBES):.0%})")
    listing = "\n".join(f"  {p.exercise} {p.field}={p.value!r}: {p.misconception}" for p in unnamed)
    assert named >= TARGET * len(PROBES), f"{named}/{len(PROBES)} named; unnamed:\n{listing}"


def _leaks(exercise_id: str, message: str) -> list[str]:
    chapter, exercise = _exercise(exercise_id)
    found = []
    for name, answer in solution_answers(chapter, exercise).items():
        if how := states_answer(name, answer, exercise.expression, message):
            found.append(f"{exercise_id}: states {name} = {answer!r} {how}: {message}")
    return found


@pytest.mark.parametrize("probe", PROBES, ids=_probe_id)
def test_no_probe_explanation_states_the_answer(probe: Probe) -> None:
    leaks = [
        leak for message in verdict(probe).mistakes for leak in _leaks(probe.exercise, message)
    ]
    assert not leaks, "\n".join(leaks)


WITH_MISTAKES = [
    (exercise.id, mistake.message)
    for chapter in MANIFEST.published_chapters
    for exercise in chapter.exercises
    for mistake in exercise.mistakes
]


@pytest.mark.parametrize(
    ("exercise_id", "message"), WITH_MISTAKES, ids=[e for e, _ in WITH_MISTAKES]
)
def test_no_catalogued_mistake_message_states_the_answer(exercise_id: str, message: str) -> None:
    leaks = _leaks(exercise_id, message)
    assert not leaks, "\n".join(leaks)


def test_the_answer_search_catches_the_arithmetic_and_labelled_forms() -> None:
    assert states_answer("values", 123, "x[1, 2, 3]", "the value stored there is 100 + 23")
    assert states_answer("base_offset", 12, "x[1]", "start × stride = 1 × 12")
    assert states_answer("shape", [4], "row.slice(0, 0, 10, 3)", "the size is ceil((10 - 0) / 3)")
    assert states_answer("shape", [], 'einsum("ij->", a)', "An output: shape [], a scalar")
    assert states_answer("base_offset", 4, "q", "K's first value lives at offset 4")
    assert not states_answer("shape", [4], "row.slice(0, 0, 10, 3)", "ceil((stop - start) / step)")
    assert not states_answer("values", 123, "x[1, 2, 3]", "the value is 100 + the offset")


CATALOGUED = [
    (exercise.id, mistake.field, mistake.answer, mistake.message)
    for chapter in MANIFEST.published_chapters
    for exercise in chapter.exercises
    for mistake in exercise.mistakes
    if exercise.kind == "predict"
]
#: The catalogued mistakes of exercises the probes' setups can run (most of the course).
MIN_CATALOGUED_RUN = 70


def test_a_catalogued_mistake_is_said_once() -> None:
    """No sentence twice: the answer a mistake of the manifest names gets that mistake's
    sentence alone, not the general rules' restatement of it beside it. Run for every
    catalogued mistake whose exercise the probes' setups (:data:`SETUPS`) can evaluate."""
    said: dict[str, tuple[str, ...]] = {}
    for exercise_id, field, answer, message in CATALOGUED:
        try:
            found = verdict(Probe(exercise_id, field, answer, "the catalogue's own"))
        except ExpressionError:
            continue  # names the probes' setup does not define
        said[f"{exercise_id}.{field}={answer!r}"] = found.mistakes
        assert found.mistakes == (message,), (exercise_id, field, answer, found.mistakes)
    assert len(said) >= MIN_CATALOGUED_RUN, sorted(said)
