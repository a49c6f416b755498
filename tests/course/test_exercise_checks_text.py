"""Chapter 11's byte-map and top-p checks: GPT-2's map passes and a map that keeps the space as
itself fails naming the rule; top-p as Hugging Face keeps passes, and one that stops before
reaching top_p or keeps nothing at top_p = 0 fails."""

from __future__ import annotations

from typing import Any

import numpy as np

from llmfs.course.exercise_checks.text import (
    OTHERS,
    PRINTABLE,
    check_bytes_to_unicode,
    check_top_p_keep,
)
from llmfs.gpt.tokenizer import bytes_to_unicode


def gpt2_map() -> dict[int, str]:
    spelled = {b: chr(b) for b in PRINTABLE}
    for extra, b in enumerate(OTHERS):
        spelled[b] = chr(256 + extra)
    return spelled


def test_the_printable_and_other_bytes_are_gpt2s_188_and_68() -> None:
    assert len(PRINTABLE) == 188 and len(OTHERS) == 68
    assert gpt2_map() == bytes_to_unicode()
    assert bytes_to_unicode()[32] == "Ġ"


def test_gpt2s_map_passes_and_a_space_kept_as_itself_fails() -> None:
    assert check_bytes_to_unicode(gpt2_map, record_attempt=False).passed

    def spaced() -> dict[int, str]:
        table = gpt2_map()
        table[32] = " "
        return table

    report = check_bytes_to_unicode(spaced, record_attempt=False)
    assert not report.passed and "from U+0100 on" in " ".join(repr(report).split())


def test_the_librarys_own_map_is_refused() -> None:
    assert not check_bytes_to_unicode(bytes_to_unicode, record_attempt=False).passed


def keep(probs: Any, top_p: float) -> list[int]:
    order = np.argsort(-probs, kind="stable")
    before = np.cumsum(probs[order]) - probs[order]
    kept = order[before < top_p]
    return sorted({int(i) for i in kept} | {int(order[0])})


def short(probs: Any, top_p: float) -> list[int]:
    order = np.argsort(-probs, kind="stable")
    return sorted(int(i) for i in order[np.cumsum(probs[order]) < top_p])


def test_top_p_as_hugging_face_keeps_passes_and_a_short_set_fails() -> None:
    assert check_top_p_keep(keep, record_attempt=False).passed
    assert check_top_p_keep(keep, seed=9, record_attempt=False).passed
    report = check_top_p_keep(short, record_attempt=False)
    assert not report.passed
    text = " ".join(repr(report).split())
    assert "REACH top_p" in text or "at least one id" in text
