"""An implement exercise cannot be passed by calling the library function it re-implements: the
check refuses the call wherever it happens while the learner's function runs, says which function
was called and what to use instead, and the solutions (which write the function) still pass."""

from __future__ import annotations

import contextlib
import io
import json
import math
import threading
from pathlib import Path
from typing import Any

import gradingkit as kit
import numpy as np
import pytest
import tamperkit
from solutionkit import SOLUTIONS

import llmfs.tensor as lt
from llmfs.cli import main as llmfs_main
from llmfs.course import CourseError
from llmfs.course.attempts import load_attempts
from llmfs.course.exercise_checks import CHECKS, SPECS, run_spec
from llmfs.course.exercise_checks import training as training_checks
from llmfs.course.exercise_checks.accumulate import whole_batch_grads
from llmfs.course.exercise_checks.attention import attention_numpy
from llmfs.course.exercise_checks.shortcuts import (
    Shortcuts,
    also_refusing,
    call_guarded,
    resolve,
    targets_of,
    watching,
)
from llmfs.course.exercise_checks.spec import SHORTCUT, outcome_of
from llmfs.course.grading import reports
from llmfs.course.grading.gradebook import Gradebook
from llmfs.gpt import (
    grad_clip,
    lora,
    reference,
    sampling,
    tensor_train,
    text_batches,
    text_eval,
    text_training,
    train_state,
)
from llmfs.gpt import tensor_model as tm
from llmfs.gpt import train as numpy_train
from llmfs.gpt.model import GPTConfig
from llmfs.gpt.sampling import Sampler, nucleus
from llmfs.gpt.tokenizer import BPETokenizer, bytes_to_unicode
from llmfs.tensor import Layout, Tensor, as_strided, autograd, einsum, finite_difference, layout
from llmfs.tensor.backends.metal.ops import KERNEL_DIR, kernel_source
from llmfs.tensor.layout import row_major_strides  # bound by name BEFORE any check starts
from llmfs.tensor.traversal import StridedOffsets

# Seconds in all (every check run under its shortcut rule): the file is scheduled early
# (conftest.py).
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def attempts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "attempts.jsonl"
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(log))
    return log


def _view(storage: list[Any], shape: list[int], strides: list[int], base: int) -> Any:
    return as_strided(Tensor.from_vec([len(storage)], storage), shape, strides, base)


def _operand(x: list[Any]) -> Any:
    storage, shape, strides, base = x
    return _view([float(v) for v in storage], shape, strides, base)


def _can_reshape(shape: list[int], strides: list[int], new_shape: list[int]) -> bool:
    try:
        layout.plan_reshape(shape, strides, new_shape)
    except lt.NonContiguousReshapeError:
        return False
    return True


def _split_with_the_model(qkv: Any, heads: int) -> Any:
    c = qkv.shape[-1] // 3
    return tuple(tm.split_heads(qkv.slice(2, i * c, (i + 1) * c), heads) for i in range(3))


def _forward_then_argmax(w: Any, config: Any, tokens: Any, new: int) -> Any:
    tokens = np.asarray(tokens)
    out = []
    for _ in range(new):
        ids = tm.forward(w, config, tokens)[:, -1, :].to_numpy().argmax(axis=-1)
        out.append(ids)
        tokens = np.concatenate([tokens, ids[:, None]], axis=1)
    return np.stack(out, axis=1)


def _write_with_the_cache(cache: Any, pos: int, k: Any, v: Any) -> None:
    # Chapter 11's cache write through the library's KVCache, over the learner's owner.
    from llmfs.gpt.kv_cache import KVCache
    from llmfs.gpt.model import GPTConfig

    _, _, heads, n_ctx, size = cache.shape
    kv_cache = KVCache(GPTConfig(64, n_ctx, heads * size, heads, 1), 1)
    kv_cache.layers = [cache]
    kv_cache.write(0, pos, Tensor.from_numpy(np.stack([k.to_numpy(), v.to_numpy()])))


#: Exercise id -> (a shortcut answer, the listed function it must be refused for).
SHORTCUT_ANSWERS: dict[str, tuple[Any, str]] = {
    "ch01.compute_strides": (lambda shape: list(row_major_strides(shape)), "row_major_strides"),
    "ch01.flat_index": (
        lambda shape, c: layout.storage_offset(shape, row_major_strides(shape), 0, c),
        "storage_offset",
    ),
    "ch01.is_contiguous": (layout.is_contiguous, "is_contiguous"),
    "ch02.copying_transpose": (
        lambda values, shape: (
            lt.copying_transpose(Tensor.from_vec(shape, values)).as_slice().tolist()
        ),
        "copying_transpose",
    ),
    "ch02.permute_layout": (
        lambda shape, strides, axes: Layout(tuple(shape), tuple(strides)).permute(axes),
        "permute_layout",
    ),
    "ch02.logical_offsets": (
        lambda shape, strides, base: list(
            StridedOffsets(Layout(tuple(shape), tuple(strides), base), 10**6)
        ),
        "StridedOffsets",
    ),
    "ch02.slice_layout": (
        lambda shape, strides, base, axis, start, stop: Layout(
            tuple(shape), tuple(strides), base
        ).slice(axis, start, stop),
        "slice_layout",
    ),
    "ch02.materialize": (
        lambda storage, shape, strides, base: (
            _view(storage, shape, strides, base).materialize().as_slice().tolist()
        ),
        "materialize",
    ),
    "ch03.can_reshape": (_can_reshape, "plan_reshape"),
    "ch03.merge_layout": (
        lambda shape, strides, a, b: layout.plan_reshape(
            shape, strides, [*shape[:a], math.prod(shape[a : b + 1]), *shape[b + 1 :]]
        ),
        "plan_reshape",
    ),
    "ch04.broadcast_shape": (lambda a, b: list(np.broadcast_shapes(a, b)), "broadcast_shapes"),
    "ch04.broadcast_strides": (
        lambda shape, strides, target: layout.broadcast_layout(shape, strides, target)[1],
        "broadcast_layout",
    ),
    "ch04.softmax": (lambda x: tm.softmax(x, axis=1), "softmax"),
    "ch05.view_offset": (
        lambda k, d: next(
            o
            for i, o in enumerate(
                StridedOffsets(Layout(tuple(d[2 : 2 + d[0]]), tuple(d[2 + d[0] :]), d[1]), 10**6)
            )
            if i == k
        ),
        "StridedOffsets",
    ),
    "ch06.naive_einsum": (
        lambda e, x, y: (lambda r: [list(r.shape), r.view().materialize().as_slice().tolist()])(
            einsum(e, _operand(x), _operand(y))
        ),
        "einsum",
    ),
    "ch07.split_heads": (_split_with_the_model, "split_heads"),
    "ch07.merge_heads": (tm.merge_heads, "merge_heads"),
    "ch07.attention": (
        lambda qkv, heads: (
            Tensor.from_numpy(attention_numpy(qkv.to_numpy(), heads)).view().materialize()
        ),
        "attention_numpy",
    ),
    "ch08.layer_norm": (tm.layer_norm, "layer_norm"),
    "ch08.gelu": (
        lambda x: Tensor.from_numpy(reference.gelu(x.to_numpy())),
        "reference.gelu",
    ),
    "ch08.attention": (tm.attention, "attention"),
    "ch08.mlp": (tm.mlp, "mlp"),
    "ch08.block": (tm.block, "block"),
    "ch08.forward": (tm.forward, "forward"),
    "ch08.generate": (_forward_then_argmax, "tensor_model.forward"),
    "ch09.view_backward": (lambda grad, view: _by_autograd(grad, view), "autograd.backward"),
    "ch09.expand_backward": (lambda g, shape: autograd.unbroadcast(g, shape), "unbroadcast"),
    "ch09.softmax_backward": (
        lambda y, g, axis: _leaf_grad(lambda x: tm.softmax(x, axis), np.log(y.to_numpy()), g),
        "autograd.backward",
    ),
    "ch09.layer_norm_backward": (
        lambda x, weight, eps, g: (
            _leaf_grad(lambda t: tm.layer_norm(t, weight, weight * 0.0, eps), x.to_numpy(), g),
            weight,
            weight,
        ),
        "autograd.backward",
    ),
    "ch09.gradcheck": (lambda fn, x, eps, atol: lt.gradcheck(fn, [x], eps, atol), "gradcheck"),
    "ch10.cross_entropy": (
        lambda logits, targets, weights: lt.sum(lt.log(tm.softmax(logits))),
        "tensor_model.softmax",
    ),
    "ch10.learning_rate": (numpy_train.learning_rate, "train.learning_rate"),
    "ch10.adamw_step": (lambda *args: training_checks.adamw_reference(*args), "adamw_reference"),
    "ch10.train": (
        lambda config, cfg, data, on_step=None: training_checks.train_reference(config, cfg, data),
        "train_reference",
    ),
    # chapter 11
    "ch11.train_bpe": (
        lambda text, n: [
            (t.vocab[a], t.vocab[b])
            for t in [BPETokenizer.train(text, 257 + n)]
            for a, b in t.merges
        ],
        "BPETokenizer.train",
    ),
    "ch11.bpe_encode": (
        lambda text, merges: BPETokenizer.train("", 257).encode(text),
        "BPETokenizer.encode",
    ),
    "ch11.sample_next": (
        lambda logits, t, k, rng: Sampler(float(t), k, rng).choose(logits),
        "Sampler.choose",
    ),
    "ch11.cache_write": (_write_with_the_cache, "KVCache.write"),
    "ch11.cached_step": (
        lambda q, cache, t: tm.cached_attention(q, {}, "", None, None, 0, t),  # type: ignore[arg-type]
        "cached_attention",
    ),
    "ch12.tiled_matmul": (lambda: kernel_source("matmul"), "kernel_source"),
    "ch09.backward_pass": (lambda loss, inputs, rule: loss.backward(), "autograd.backward"),
    "ch09.matmul_backward": (
        lambda a, b, g: _matmul_by_autograd(a, b, g),
        "autograd.backward",
    ),
    "ch10.cross_entropy_grad": (
        lambda logits, targets, weights: training_checks.cross_entropy_reference(
            logits, targets, weights
        )[1],
        "cross_entropy_reference",
    ),
    "ch10.accumulate_grads": (
        lambda leaves, parts, loss_of: whole_batch_grads({}),
        "whole_batch_grads",
    ),
    "ch11.bytes_to_unicode": (bytes_to_unicode, "bytes_to_unicode"),
    "ch11.top_p_keep": (
        lambda probs, top_p: list(np.flatnonzero(nucleus(probs[None, :], top_p)[0])),
        "nucleus",
    ),
    # chapter 13
    "ch13.get_batch": (text_batches.get_batch, "text_batches.get_batch"),
    "ch13.estimate_loss": (text_eval.estimate_loss, "text_eval.estimate_loss"),
    "ch13.clip_grad_norm": (grad_clip.clip_grad_norm, "grad_clip.clip_grad_norm"),
    "ch13.save_and_load": (
        lambda state, path: train_state.load_state(train_state.save_state(path, state)),
        "train_state.save_state",
    ),
    "ch13.train": (
        lambda state, stream, until, clip=None, on_step=None: text_training.train_steps(
            state, stream, until, clip
        ),
        "text_training.train_steps",
    ),
    # chapter 14
    "ch14.lora_forward": (
        lambda x, W, b, A, B, alpha: _library_adapter(W, A, B, alpha)(x) + b,
        "LoRA.__call__",
    ),
    "ch14.lora_merge": (
        lambda W, A, B, alpha: _library_adapter(W, A, B, alpha).merge(),
        "LoRA.merge",
    ),
    "ch14.count_trainable": (
        lambda shapes, rank: sum(
            lora.LoRA(Tensor.zeros(tuple(shape)), rank, 1.0).trainable_parameters()
            for shape in shapes
        ),
        "LoRA.trainable_parameters",
    ),
}


def _library_adapter(W: Any, A: Any, B: Any, alpha: float) -> Any:
    """The library's LoRA layer holding the given A and B (a door to its forward and merge)."""
    adapter = lora.LoRA(W, A.shape[1], alpha)
    adapter.A, adapter.B = A, B
    return adapter


def _matmul_by_autograd(a: Any, b: Any, g: Any) -> Any:
    left = Tensor.from_numpy(a.to_numpy(), requires_grad=True)
    right = Tensor.from_numpy(b.to_numpy(), requires_grad=True)
    (left @ right).backward(g)
    return left.grad, right.grad


def _by_autograd(grad: np.ndarray, view: Any) -> Any:
    # The library's view rule, reached through backward() on a fresh owner of the same layout.
    owner = Tensor.from_numpy(view.owner.to_numpy(), requires_grad=True)
    as_strided(owner, list(view.shape), list(view.strides), view.base_offset).backward(
        Tensor.from_numpy(grad)
    )
    return owner.grad.to_numpy() if owner.grad is not None else None


def _leaf_grad(fn: Any, values: np.ndarray, g: Any) -> Any:
    leaf = Tensor.from_numpy(values, requires_grad=True)
    fn(leaf).backward(g)
    return leaf.grad


def _scatter_added(grad: Any, view: Any, backend: str) -> np.ndarray:
    """The view rule through a backend's own primitive (a door to the library's view rule)."""
    buffer = np.zeros(view.owner.size)
    lt.get_backend(backend).scatter_add(buffer, view.layout, np.asarray(grad, dtype=np.float64))
    return buffer


GUARDED = sorted(e for e, spec in SPECS.items() if spec.shortcuts is not None)


def test_every_implement_exercise_but_the_kernels_and_the_copy_fix_lists_its_shortcuts() -> None:
    # Kernels are MSL source (the tiled matmul's may not be the library's own), and ch02.q5_fix
    # asks for a copy through the library (materialize).
    expected = {e for e, s in SPECS.items() if s.kernel is None and e != "ch02.q5_fix"}
    expected |= {"ch12.tiled_matmul"}
    assert set(GUARDED) == expected
    assert set(SHORTCUT_ANSWERS) == expected


@pytest.mark.parametrize("exercise_id", GUARDED)
def test_every_listed_name_resolves_to_python_functions(exercise_id: str) -> None:
    shortcuts = SPECS[exercise_id].shortcuts
    assert shortcuts is not None and shortcuts.names and shortcuts.instead
    for name in shortcuts.names:
        assert resolve(name), name


@pytest.mark.parametrize("exercise_id", GUARDED)
def test_a_shortcut_fails_with_a_message_naming_the_call(exercise_id: str) -> None:
    answer, listed = SHORTCUT_ANSWERS[exercise_id]
    spec = SPECS[exercise_id]
    report = CHECKS[exercise_id](answer, record_attempt=False)
    text = repr(report)
    assert report.status == "failed", text
    assert listed in text and "the work this exercise asks you to write yourself" in text, text
    assert f"instead, use {spec.shortcuts.instead}" in text  # type: ignore[union-attr]
    # Nothing of the answer is shown: the expected column is not a value.
    assert [case.expected for case in report.cases] == ["(your own code)"]


@pytest.mark.parametrize("exercise_id", GUARDED)
def test_the_solution_still_passes_under_its_shortcut_rule(exercise_id: str) -> None:
    report = run_spec(SPECS[exercise_id], SOLUTIONS[exercise_id], seed=7, record_attempt=False)
    assert report.passed, repr(report)


def test_a_name_imported_before_the_check_began_is_caught_at_any_depth() -> None:
    # row_major_strides was bound with ``from ... import`` when this module was imported; a
    # helper of the learner's, a list and the library itself (Tensor.zeros) are all caught.
    table = [row_major_strides]

    def helper(shape):  # type: ignore[no-untyped-def]
        return table[0](tuple(shape))

    for answer, entry in (
        (lambda shape: list(helper(shape)), "llmfs.tensor.layout.row_major_strides"),
        (lambda shape: list(Tensor.zeros(shape).strides), "llmfs.tensor.tensor.Tensor.zeros"),
    ):
        outcome = outcome_of(answer, ([2, 3],), SPECS["ch01.compute_strides"])
        assert outcome == {
            "error": SHORTCUT,
            "shortcut": "llmfs.tensor.layout.row_major_strides",
            "via": entry,
        }
    text = repr(CHECKS["ch01.compute_strides"](lambda s: list(Tensor.zeros(s).strides)))
    assert "calls the library's llmfs.tensor.tensor.Tensor.zeros, which runs" in text


def test_numpys_strided_view_is_a_shortcut_for_reading_strided_storage() -> None:
    def materialize(storage, shape, strides, base_offset):  # type: ignore[no-untyped-def]
        values = np.asarray(storage)
        size = values.itemsize
        view = np.lib.stride_tricks.as_strided(
            values[base_offset:], shape, [s * size for s in strides]
        )
        return view.ravel().tolist()

    report = CHECKS["ch02.materialize"](materialize, record_attempt=False)
    assert report.status == "failed"
    assert "calls the library's numpy.lib.stride_tricks.as_strided" in repr(report)


def test_a_views_own_contiguity_test_is_a_shortcut_too() -> None:
    def is_contiguous(shape, strides):  # type: ignore[no-untyped-def]
        return Layout(tuple(shape), tuple(strides), 0).is_contiguous()

    report = CHECKS["ch01.is_contiguous"](is_contiguous, record_attempt=False)
    assert "calls the library's llmfs.tensor.layout.Layout.is_contiguous" in repr(report)


#: Other public doors to the same answers: each must be refused too (a refactor of the library
#: that stops one of them from reaching its listed function fails here, not in a classroom).
OTHER_DOORS: list[tuple[str, Any]] = [
    ("ch01.compute_strides", lambda shape: list(Tensor.zeros(shape).strides)),
    ("ch01.compute_strides", lambda shape: list(Layout.row_major(shape).strides)),
    ("ch01.flat_index", lambda shape, c: Tensor.zeros(shape).storage_offset(c)),
    ("ch01.is_contiguous", lambda shape, strides: layout.is_contiguous(shape, strides)),
    (
        "ch01.is_contiguous",
        lambda shape, strides: as_strided(Tensor.zeros([10**4]), shape, strides).is_contiguous(),
    ),
    ("ch02.copying_transpose", lambda v, shape: Tensor.from_vec(shape, v).T.tolist()),
    ("ch02.copying_transpose", lambda v, shape: Tensor.from_vec(shape, v).T.copy().tolist()),
    ("ch02.permute_layout", lambda sh, st, axes: Layout(tuple(sh), tuple(st), 0).permute(axes)),
    (
        "ch02.logical_offsets",
        lambda sh, st, b: _view(list(range(10**4)), sh, st, b).to_numpy().ravel().tolist(),
    ),
    (
        "ch02.logical_offsets",
        lambda sh, st, b: list(_view(list(range(10**4)), sh, st, b).logical_offsets()),
    ),
    ("ch02.materialize", lambda *args: np.asarray(_view(*args)).ravel().tolist()),
    ("ch02.materialize", lambda *args: _view(*args).to_numpy().ravel().tolist()),
    ("ch02.materialize", lambda *args: _view(*args).numpy_view().ravel().tolist()),
    ("ch02.slice_layout", lambda sh, st, b, a, i, j: _view([0] * 10**4, sh, st, b).slice(a, i, j)),
    ("ch03.can_reshape", lambda sh, st, new: bool(Tensor.zeros([10**4]).view().reshape(new))),
    (
        "ch03.merge_layout",
        lambda sh, st, a, b: as_strided(Tensor.zeros([10**4]), sh, st).merge(a, b),
    ),
    ("ch04.broadcast_shape", lambda a, b: list(layout.broadcast_shapes(a, b))),
    ("ch04.broadcast_strides", lambda sh, st, t: as_strided(Tensor.zeros([99]), sh, st).expand(t)),
    ("ch06.naive_einsum", lambda e, x, y: np.einsum(e, np.ones(x[1]), np.ones(y[1]))),
    ("ch06.naive_einsum", lambda e, x, y: lt.EinsumPlan(e, _operand(x), _operand(y))),
    ("ch08.forward", lambda w, config, tokens: tm.block(tm.embed(tokens, w, config), w, 0, config)),
    ("ch08.generate", lambda w, config, tokens, new: tm.generate(w, config, tokens, new)),
    (
        "ch09.view_backward",
        lambda grad, view: autograd.view_backward(
            grad, view.layout, view.owner.size, np.dtype(np.float64)
        ),
    ),
    ("ch09.view_backward", lambda grad, view: _scatter_added(grad, view, "numpy")),
    ("ch09.view_backward", lambda grad, view: _scatter_added(grad, view, "reference")),
    (
        "ch09.expand_backward",
        lambda g, shape: _leaf_grad(lambda t: t.expand(list(g.shape)), np.zeros(shape), g),
    ),
    (
        "ch09.gradcheck",
        lambda fn, x, eps, atol: (
            finite_difference._central_difference(fn, [x], x, 0, eps) is not None
        ),
    ),
    (
        "ch10.cross_entropy",
        lambda logits, targets, weights: tensor_train.cross_entropy(logits, targets, weights),
    ),
    (
        "ch10.cross_entropy",
        lambda logits, targets, weights: lt.sum(
            lt.log(lt.Tensor.from_numpy(reference.softmax(logits.to_numpy())))
        ),
    ),
    (
        "ch10.train",
        lambda config, cfg, data, on_step=None: (lambda r: (r.params, r.losses))(
            numpy_train.train(config, cfg, data[:, :2] % 10, data[:1, :2] % 10)
        ),
    ),
    # chapter 11
    ("ch11.bpe_encode", lambda text, merges: BPETokenizer.train("", 257).tokens(text)),
    (
        "ch11.sample_next",
        lambda logits, t, k, rng: sampling.check_sampler(
            GPTConfig(logits.shape[1], 8, 4, 1, 1), t, k, 0
        ).choose(logits),
    ),
    # The library's matmul kernel read from its file, or renamed: the text is the shortcut.
    ("ch12.tiled_matmul", lambda: (KERNEL_DIR / "matmul.metal").read_text()),
    (
        "ch12.tiled_matmul",
        lambda: kernel_source("matmul").replace(
            "kernel void matmul_f32", "kernel void tiled_matmul"
        ),
    ),
]


@pytest.mark.parametrize(
    ("exercise_id", "answer"), OTHER_DOORS, ids=[f"{e}-{k}" for k, (e, _) in enumerate(OTHER_DOORS)]
)
def test_every_public_door_to_a_listed_function_is_refused(exercise_id: str, answer: Any) -> None:
    report = CHECKS[exercise_id](answer, record_attempt=False)
    assert "that is the work this exercise asks you to write yourself" in repr(report), repr(report)


def test_catching_every_exception_does_not_hide_the_call() -> None:
    def swallowing(shape):  # type: ignore[no-untyped-def]
        try:
            return list(row_major_strides(tuple(shape)))
        except BaseException:
            return [1] * len(shape)

    outcome = outcome_of(swallowing, ([2, 3],), SPECS["ch01.compute_strides"])
    assert outcome["error"] == SHORTCUT


def test_a_helper_thread_is_refused_too_and_the_guards_are_gone_after_the_check() -> None:
    code = row_major_strides.__code__
    seen: list[Any] = []

    def helper(shape: list[int]) -> None:
        try:
            seen.append(row_major_strides(tuple(shape)))
        except BaseException as error:  # the refusal ends the helper thread, not the check
            seen.append(type(error).__name__)

    def answer(shape):  # type: ignore[no-untyped-def]
        # The listed function called from a thread the learner's function starts.
        worker = threading.Thread(target=helper, args=(shape,))
        worker.start()
        worker.join(5)
        return list(seen[0]) if isinstance(seen[0], tuple) else [1] * len(shape)

    guarded = call_guarded(SPECS["ch01.compute_strides"].shortcuts, answer, [2, 3])
    assert guarded.shortcut is not None
    assert guarded.shortcut.target.endswith("row_major_strides")
    assert seen == ["ShortcutUsed"]
    # Outside the window every thread gets the original function again.
    after: list[Any] = []
    thread = threading.Thread(target=lambda: after.append(row_major_strides((4, 5))))
    thread.start()
    thread.join(5)
    assert after == [(5, 1)]
    assert row_major_strides.__code__ is code and row_major_strides((2, 3)) == (3, 1)


def test_a_window_for_other_threads_leaves_the_opening_thread_free() -> None:
    targets = targets_of(SPECS["ch01.compute_strides"].shortcuts)
    seen: list[Any] = []

    def helper() -> None:
        try:
            seen.append(row_major_strides((2, 3)))
        except BaseException as error:
            seen.append(type(error).__name__)

    with watching(targets, exclude=threading.get_ident()) as window:
        assert row_major_strides((2, 3)) == (3, 1)  # the worker's own thread
        thread = threading.Thread(target=helper)
        thread.start()
        thread.join(5)
    assert seen == ["ShortcutUsed"] and window.hit is not None


def test_also_refusing_adds_function_objects_to_every_window() -> None:
    def reference(shape: list[int]) -> list[int]:
        return list(row_major_strides(tuple(shape)))

    def answer(shape):  # type: ignore[no-untyped-def]
        return reference(shape)

    with also_refusing({reference: "the checks' reference"}):
        guarded = call_guarded(None, answer, [2, 3])
    assert guarded.shortcut is not None and guarded.shortcut.target == "the checks' reference"
    assert call_guarded(None, answer, [2, 3]).result == [3, 1]


def test_an_interrupt_or_a_timeout_propagates_and_the_guards_are_removed_first() -> None:
    code = row_major_strides.__code__

    def interrupted(shape):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt  # as the grader's per-case timer or Ctrl+C in a notebook would

    with pytest.raises(KeyboardInterrupt):
        call_guarded(SPECS["ch01.compute_strides"].shortcuts, interrupted, [2])
    assert row_major_strides.__code__ is code


def _make_counter() -> Any:
    calls: list[int] = []

    def counted(x: int) -> int:
        calls.append(x)
        return len(calls)

    return counted


#: A function with a free variable (its closure): a guard's code must keep the closure's cells.
counted_closure = _make_counter()


def test_a_function_with_a_closure_is_guarded_and_keeps_its_state() -> None:
    assert counted_closure(1) == 1
    shortcuts = Shortcuts((f"{__name__}.counted_closure",), "")
    guarded = call_guarded(shortcuts, lambda: counted_closure(2))
    assert guarded.shortcut is not None and guarded.shortcut.target.endswith("counted_closure")
    assert counted_closure(3) == 2  # the refused call never ran; the closure is intact
    keyword = call_guarded(shortcuts, lambda: 5)
    assert keyword.result == 5 and keyword.shortcut is None


def test_a_name_that_is_not_a_python_function_is_refused_when_resolved() -> None:
    with pytest.raises(CourseError, match="not a Python function"):
        resolve("numpy.exp")
    with pytest.raises(CourseError, match="no attribute path"):
        resolve("llmfs.tensor.layout.no_such_function")
    guarded = call_guarded(Shortcuts(("llmfs.tensor.layout.is_contiguous",), ""), lambda: 3)
    assert guarded.result == 3 and guarded.shortcut is None


def test_a_refused_call_is_recorded_as_a_wrong_attempt(attempts: Path) -> None:
    report = CHECKS["ch01.is_contiguous"](layout.is_contiguous)
    assert report.recorded and not report.passed
    (attempt,) = load_attempts(attempts)
    assert attempt.exercise == "ch01.is_contiguous" and not attempt.correct


def test_a_grader_gives_a_shortcut_zero_and_names_the_call(tmp_path: Path) -> None:
    chapter = kit.MANIFEST.chapter("ch01")
    shortcut = (
        "from llmfs.tensor.layout import row_major_strides\n\n\n"
        "def compute_strides(shape):\n"
        "    return list(row_major_strides(shape))\n"
    )
    notebook = kit.set_source(kit.correct_notebook(chapter), "ch01.compute_strides", shortcut)
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "ann.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    argv = ["grade", str(tmp_path / "subs"), "--chapter", "1", "--seed", "3", "--no-execute"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert llmfs_main([*argv, "--out", str(tmp_path / "out")]) == 0
    with Gradebook(tmp_path / "out" / "gradebook.sqlite") as book:
        rows = {row.exercise: row for row in book.rows()}
    row = rows["ch01.compute_strides"]
    assert row.score == 0.0 and row.status == "wrong"
    assert "llmfs.tensor.layout.row_major_strides" in row.message
    assert "the work this exercise asks you to write yourself" in row.message
    # The other implement exercises, the solution's code, still score (flat_index even uses the
    # shortcut compute_strides: row_major_strides is not what flat_index re-implements).
    assert rows["ch01.flat_index"].score == rows["ch01.flat_index"].points
    feedback = (tmp_path / "out" / "feedback" / reports.feedback_file("ann")).read_text(
        encoding="utf-8"
    )
    assert "calls the library's llmfs.tensor.layout.row_major_strides" in feedback


# -- refusals a learner's code cannot reach ----------------------------------------------------
# Each trick below got the library's answer (or a wrong one) accepted before the checks were
# sealed: it changes the checks themselves. Both the notebook's check (a fresh interpreter, as a
# kernel) and the grader's worker refuse every one of them.


@pytest.mark.parametrize(
    ("name", "exercise", "function", "source"),
    tamperkit.TRICKS + tamperkit.DEEP_TRICKS,
    ids=[t[0] for t in tamperkit.TRICKS + tamperkit.DEEP_TRICKS],
)
def test_a_trick_that_changes_the_checks_is_refused_in_the_notebook_and_the_grader(
    name: str, exercise: str, function: str, source: str, tmp_path: Path
) -> None:
    notebook = tamperkit.notebook_check(source, exercise, function)
    assert not notebook["passed"], (name, notebook)
    refused = ("ChecksChanged", "AttributeError")
    assert (
        notebook["raised"] in refused
        or "was changed while the check ran" in notebook["text"]
        or "calls the library's" in notebook["text"]
        or "wrong" in notebook["text"]
    ), (name, notebook)
    replies, expected = tamperkit.worker_replies(tmp_path, source, exercise, function)
    assert not tamperkit.worker_accepts(replies, expected), (name, replies)


def test_the_sealed_checks_refuse_each_way_of_changing_them() -> None:
    from llmfs.course.exercise_checks import sentinel
    from llmfs.course.exercise_checks import spec as spec_module

    with pytest.raises(sentinel.ChecksChanged):
        spec_module.call_guarded = lambda *args: None  # type: ignore[assignment]
    with pytest.raises(sentinel.ChecksChanged):
        del spec_module.run_case
    with pytest.raises(TypeError):
        vars(spec_module)["call_guarded"] = None  # a read-only mapping
    with pytest.raises(sentinel.ChecksChanged):
        spec_module.run_case.__code__ = (lambda: None).__code__
    with pytest.raises(sentinel.ChecksChanged):
        layout.row_major_strides.__defaults__ = ()
    assert "call_guarded" in dir(spec_module)  # reading still works
    # The checks still pass a right answer after all of this was refused.
    check, solution = CHECKS["ch01.compute_strides"], SOLUTIONS["ch01.compute_strides"]
    assert check(solution, record_attempt=False).passed
    # A class's attribute can be set (no audit event before Python 3.12): the check that runs
    # while it is changed refuses to count, and counts again once it is back.
    passed = spec_module.CheckReport.__dict__["passed"]
    spec_module.CheckReport.passed = True  # type: ignore[misc]
    try:
        report = check(solution, record_attempt=False)
    finally:
        spec_module.CheckReport.passed = passed  # type: ignore[misc]
    assert report.status == "failed" and "CheckReport was changed" in report.note, repr(report)
    assert check(solution, record_attempt=False).passed
