"""Chapter 8's implement checks: the library's layers pass, common mistakes and hard-coded answers
fail, and every case is compared with the NumPy reference on the values the function was given."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import llmfs.tensor as lt
from llmfs.course.exercise_checks import (
    CHECKS,
    SPECS,
    check_gelu,
    check_generate,
    check_gpt_attention,
    check_layer_norm,
    check_mlp,
    run_spec,
)
from llmfs.course.exercise_checks import gpt as gpt_checks
from llmfs.course.exercise_checks.attention import READ_OUT_METHODS, counting_copies
from llmfs.course.exercise_checks.gpt import AGREES, COPIES_KEY, ERROR_KEY, generate_without_mask
from llmfs.course.exercise_checks.spec import draw_cases
from llmfs.gpt import reference
from llmfs.gpt import tensor_model as tm
from llmfs.tensor import Tensor

# Seconds in all (GPT cases drawn and generated on sixty seeds): the file is scheduled early
# (conftest.py).
pytestmark = pytest.mark.slow


def test_every_chapter_8_check_is_registered_with_its_spec() -> None:
    ids = {
        "ch08.layer_norm",
        "ch08.gelu",
        "ch08.attention",
        "ch08.mlp",
        "ch08.block",
        "ch08.forward",
        "ch08.generate",
    }
    assert ids <= set(CHECKS) and ids <= set(SPECS)


def test_the_librarys_layers_pass_every_check_once_allowed() -> None:
    # The package's own model is the answer key's twin: it passes every case, but only with the
    # shortcut rule lifted (with it, calling the model is refused: test_shortcuts.py).
    for exercise_id, layer, seed in (
        ("ch08.layer_norm", tm.layer_norm, 0),
        ("ch08.gelu", tm.gelu, 0),
        ("ch08.attention", tm.attention, 0),
        ("ch08.mlp", tm.mlp, 0),
        ("ch08.block", tm.block, 0),
        ("ch08.forward", tm.forward, 5),
        # The exercise returns the new tokens; the package returns the prompt and them.
        ("ch08.generate", lambda w, c, t, n: tm.generate(w, c, t, n)[:, t.shape[1] :], 5),
    ):
        spec = replace(SPECS[exercise_id], shortcuts=None)
        report = run_spec(spec, layer, seed=seed, record_attempt=False)
        assert report.passed, repr(report)


def test_the_unbiased_variance_is_caught() -> None:
    def unbiased(x, weight, bias, eps):  # type: ignore[no-untyped-def]
        n = x.shape[-1]
        mean = lt.mean(x, axis=-1, keepdims=True)
        centered = x - mean
        var = lt.sum(centered * centered, axis=-1, keepdims=True) / max(n - 1, 1)
        return centered / lt.sqrt(var + eps) * weight + bias

    report = check_layer_norm(unbiased, record_attempt=False)
    assert report.status == "failed"
    assert f'"{ERROR_KEY}": "{AGREES}"' in repr(report)  # the expected side
    assert not any(case.ok for case in report.cases)


def test_attention_without_the_causal_mask_is_caught() -> None:
    def unmasked(x, w, prefix, config):  # type: ignore[no-untyped-def]
        c, h, d = config.n_embd, config.n_head, config.head_size
        qkv = x @ w[prefix + "c_attn.weight"] + w[prefix + "c_attn.bias"]
        q, k, v = (
            qkv.slice(2, i * c, (i + 1) * c).split(2, [h, d]).permute([0, 2, 1, 3])
            for i in range(3)
        )
        heads = tm.softmax(q @ k.transpose(2, 3) / d**0.5) @ v
        merged = heads.permute([0, 2, 1, 3]).materialize().merge(2, 3)
        return merged @ w[prefix + "c_proj.weight"] + w[prefix + "c_proj.bias"]

    assert check_gpt_attention(unmasked, record_attempt=False).status == "failed"


def test_hard_coded_and_wrongly_shaped_answers_fail() -> None:
    def zeros_like_input(x, weight, bias, eps):  # type: ignore[no-untyped-def]
        return Tensor.zeros(list(x.shape), np.float64)

    assert check_layer_norm(zeros_like_input, record_attempt=False).status == "failed"
    assert check_gelu(lambda x: x, record_attempt=False).status == "failed"
    assert check_gelu(lambda x: 1.0, record_attempt=False).status == "failed"

    def always_zero(w, config, tokens, max_new_tokens):  # type: ignore[no-untyped-def]
        return np.zeros((tokens.shape[0], max_new_tokens), dtype=np.int64)

    assert check_generate(always_zero, record_attempt=False).status == "failed"
    report = run_spec(
        replace(SPECS["ch08.forward"], shortcuts=None),
        lambda w, c, t: tm.forward(w, c, t)[:, -1, :],
        record_attempt=False,
    )
    assert report.status == "failed" and "shapes differ" in repr(report)
    assert ERROR_KEY in repr(report)


def test_stubs_read_as_not_implemented() -> None:
    def stub(*args):  # type: ignore[no-untyped-def]
        raise NotImplementedError("ch08.mlp: replace this line with your code")

    assert check_mlp(stub, record_attempt=False).status == "not implemented"


# -- the attention's copies and read-outs ----------------------------------------------------


def _attention_parts(x, w, prefix, config):  # type: ignore[no-untyped-def]
    c, h, d = config.n_embd, config.n_head, config.head_size
    qkv = x @ w[prefix + "c_attn.weight"] + w[prefix + "c_attn.bias"]
    q, k, v = (
        qkv.slice(2, i * c, (i + 1) * c).split(2, [h, d]).permute([0, 2, 1, 3]) for i in range(3)
    )
    return q, k, v, d


def _finish(heads, w, prefix):  # type: ignore[no-untyped-def]
    merged = heads.permute([0, 2, 1, 3]).materialize().merge(2, 3)
    return merged @ w[prefix + "c_proj.weight"] + w[prefix + "c_proj.bias"]


def test_attention_with_more_copies_than_allowed_fails_naming_the_rule() -> None:
    def copies_q_k_v(x, w, prefix, config):  # type: ignore[no-untyped-def]
        q, k, v, d = _attention_parts(x, w, prefix, config)
        q, k, v = q.materialize(), k.materialize(), v.materialize()  # three copies too many
        t = x.shape[1]
        scores = q @ k.transpose(2, 3) / d**0.5 + tm.causal_mask(t, q.dtype)
        return _finish(tm.softmax(scores) @ v, w, prefix)

    report = check_gpt_attention(copies_q_k_v, record_attempt=False)
    assert report.status == "failed"
    text = " ".join(repr(report).split())  # the report wraps its sentences
    assert f'"{COPIES_KEY}": 4' in text and f'"{COPIES_KEY}": "at most 1"' in text
    assert "made 4 copies (materialize calls) and the exercise allows 1" in text


@pytest.mark.parametrize("door", ["to_numpy", "numpy_view", "np.asarray", "tolist"])
def test_attention_computed_in_numpy_fails_naming_the_rule(door: str) -> None:
    read = {
        "to_numpy": lambda t: t.to_numpy(),
        "numpy_view": lambda t: np.array(t.numpy_view()),
        "np.asarray": lambda t: np.asarray(t),
        "tolist": lambda t: np.array(t.tolist()),
    }[door]

    def in_numpy(x, w, prefix, config):  # type: ignore[no-untyped-def]
        params = {name: read(value) for name, value in w.items()}
        return Tensor.from_numpy(reference.attention(read(x), params, prefix, config))

    # The reference itself is a shortcut already; lift that rule to see this one.
    spec = replace(SPECS["ch08.attention"], shortcuts=None)
    report = run_spec(spec, in_numpy, record_attempt=False)
    assert report.status == "failed"
    name = {"np.asarray": "__array__"}.get(door, door)
    text = " ".join(repr(report).split())
    assert "read tensors out of the library" in text and name in text
    assert "a round trip through NumPy or Python numbers does not count" in text


def test_the_librarys_own_reads_do_not_count_against_the_answer() -> None:
    def printing(x, w, prefix, config):  # type: ignore[no-untyped-def]
        str(x)  # printing reads values out, inside the library: not the answer's round trip
        return tm.attention(x, w, prefix, config)

    spec = replace(SPECS["ch08.attention"], shortcuts=None)
    assert run_spec(spec, printing, record_attempt=False).passed


def test_counting_copies_restores_every_door() -> None:
    before = {(cls, name): cls.__dict__[name] for cls, name in READ_OUT_METHODS}
    with pytest.raises(RuntimeError), counting_copies():
        raise RuntimeError
    assert before == {(cls, name): cls.__dict__[name] for cls, name in READ_OUT_METHODS}


# -- generation without the causal mask ------------------------------------------------------


def test_every_seed_draws_a_generation_case_the_causal_mask_decides() -> None:
    spec = SPECS["ch08.generate"]
    for seed in range(60):
        cases = draw_cases(spec, seed)
        assert len(cases) == spec.cases
        differing = [
            case
            for (case,) in cases
            if generate_without_mask(*_generate_args(case)).tolist() != spec.reference(case)
        ]
        assert differing, seed
        assert all(case["layers"] >= 2 for case in differing)


def _generate_args(case):  # type: ignore[no-untyped-def]
    params, config, tokens = gpt_checks._model(**case)
    return params, config, tokens, config.n_ctx + 1 - tokens.shape[1]


def test_generation_without_the_causal_mask_fails_on_every_seed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_mask(t, dtype=np.float64):  # type: ignore[no-untyped-def]
        return Tensor.zeros([t, t], dtype)

    def new_tokens(w, config, tokens, new):  # type: ignore[no-untyped-def]
        # Chapter 8's signature, and the whole forward pass at every step (the learner's way),
        # so that the patched mask reaches every position.
        return tm.generate(w, config, tokens, new, kv_cache=False)[:, tokens.shape[1] :]

    monkeypatch.setattr(tm, "causal_mask", no_mask)
    spec = replace(SPECS["ch08.generate"], shortcuts=None)
    for seed in range(8):
        assert run_spec(spec, new_tokens, seed=seed, record_attempt=False).status == "failed"
    monkeypatch.undo()
    assert run_spec(spec, new_tokens, seed=3, record_attempt=False).passed
