"""Checks of chapter 11's exercises on GPT-2's byte map and on top-p sampling.

* ``bytes_to_unicode()``: GPT-2's map from each byte to a printable character
  (:func:`llmfs.gpt.tokenizer.bytes_to_unicode`, from GPT-2's ``encoder.py``). A case is a set
  of bytes (always some of the 68 that are not printable, the space among them, and some that
  stand for themselves); the answer is the code point each maps to, and whether the map is a
  bijection of the 256 bytes onto 256 characters. Calling the library's map is a shortcut.
* ``top_p_keep(probs, top_p)``: the ids Hugging Face's ``TopPLogitsWarper`` keeps of one row of
  probabilities: the smallest set of the most probable whose probabilities sum to at least
  ``top_p``, at least one; equal probabilities in increasing id order
  (:func:`llmfs.gpt.sampling.nucleus`). Cases include ties, ``top_p`` of 0 and 1, and ``top_p``
  exactly on a cumulative sum (dyadic probabilities, so the sums are exact).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np

from llmfs.course.exercise_checks.report import CheckReport
from llmfs.course.exercise_checks.shortcuts import Shortcuts
from llmfs.course.exercise_checks.spec import ImplementSpec, register
from llmfs.gpt.sampling import nucleus
from llmfs.gpt.tokenizer import bytes_to_unicode

#: The bytes GPT-2 keeps as themselves: "!".."~", "¡".."¬", "®".."ÿ".
PRINTABLE = [*range(33, 127), *range(161, 173), *range(174, 256)]
OTHERS = [b for b in range(256) if b not in PRINTABLE]


# -- bytes_to_unicode() ------------------------------------------------------------------------


def _map_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for _ in range(n):
        chosen = set(rng.sample(OTHERS, rng.randint(1, 6))) | set(rng.sample(PRINTABLE, 3))
        if rng.random() < 0.5:
            chosen.add(32)  # the space, GPT-2's "Ġ"
        cases.append(({"bytes": sorted(chosen)},))
    return cases


def _map_reference(case: dict[str, Any]) -> dict[str, Any]:
    table = bytes_to_unicode()
    return {
        "code points": {str(b): ord(table[b]) for b in case["bytes"]},
        "bijection": "256 bytes onto 256 characters",
    }


def _map_summary(result: Any, call_args: tuple[Any, ...], case: dict[str, Any]) -> Any:
    if not isinstance(result, dict):
        return {"result": f"a {type(result).__name__}, not a dict from byte to character"}
    points: dict[str, Any] = {}
    for b in case["bytes"]:
        char = result.get(b)
        points[str(b)] = ord(char) if isinstance(char, str) and len(char) == 1 else repr(char)
    keys_ok = sorted(k for k in result if isinstance(k, int)) == list(range(256))
    values = [v for v in result.values() if isinstance(v, str)]
    if keys_ok and len(set(values)) == 256:
        bijection = "256 bytes onto 256 characters"
    elif not keys_ok:
        bijection = "the keys are not the bytes 0..255"
    else:
        bijection = f"{len(set(values))} distinct characters for 256 bytes"
    return {"code points": points, "bijection": bijection}


def _map_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if not isinstance(got, dict) or "code points" not in got:
        return None
    wrong = [
        b for b in case["bytes"] if got["code points"].get(str(b)) != want["code points"][str(b)]
    ]
    if not wrong:
        return "every byte has its own character: a map of all 256 bytes, no two alike"
    if any(b in PRINTABLE for b in wrong):
        return (
            "a printable byte ('!'..'~', '¡'..'¬', '®'..'ÿ') stands for itself: its character "
            "is chr(byte)"
        )
    return (
        "the 68 other bytes take the characters from U+0100 on, one each, in increasing byte order"
    )


# -- top_p_keep(probs, top_p) --------------------------------------------------------------------


def _top_p_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for k in range(n):
        size = rng.randint(1, 8)
        kind = ("random", "ties", "boundary", "edge")[k % 4]
        if kind == "random":
            weights = [rng.random() + 1e-3 for _ in range(size)]
            probs = [w / sum(weights) for w in weights]
        else:
            # Dyadic probabilities (multiples of 1/16): every cumulative sum is exact.
            units = [rng.randint(0 if kind == "ties" else 1, 3) for _ in range(size)]
            units[rng.randrange(size)] += 1
            scale = 16 if sum(units) <= 16 else 32
            units[-1] += scale - sum(units)
            if units[-1] < 0:
                units = [1] * size
                units[-1] += scale - size
            probs = [u / scale for u in units]
        if kind == "boundary":
            ranked = sorted(probs, reverse=True)
            top_p = sum(ranked[: rng.randint(1, size)])
        elif kind == "edge":
            top_p = rng.choice((0.0, 1.0))
        else:
            top_p = round(rng.random(), 3)
        cases.append(({"probs": probs, "top_p": top_p},))
    return cases


def _top_p_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    return np.array(case["probs"], dtype=np.float64), case["top_p"]


def _top_p_reference(case: dict[str, Any]) -> list[int]:
    probs = np.array(case["probs"], dtype=np.float64)
    kept = nucleus(probs[None, :], float(case["top_p"]))[0] > 0
    return [int(i) for i in np.flatnonzero(kept)]


def _top_p_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    try:
        ids = sorted({int(i) for i in np.asarray(result).reshape(-1)})
    except (TypeError, ValueError):
        return {"result": f"a {type(result).__name__}, not a list of ids"}
    return ids


def _top_p_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if not isinstance(got, list) or not isinstance(want, list):
        return None
    if not got:
        return "the most probable id always stays: at least one id is kept, even at top_p = 0"
    if set(want) < set(got):
        return (
            "stop at the first id at which the kept probabilities reach top_p: an id stays "
            "only while the ids more probable than it hold LESS than top_p"
        )
    if set(got) < set(want):
        return (
            "an id stays when the ids more probable than it hold less than top_p: the set "
            "must REACH top_p, so the id that crosses it is kept"
        )
    return "equal probabilities are ranked in increasing id order"


# -- specs -------------------------------------------------------------------------------------


def _map_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    # The learner's function takes no argument; the case (the bytes to look up) rides along
    # for the summary.
    return (case,)


def _map_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    return fn()


def _map_case_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    case = call_args[0]
    return _map_summary(result, call_args, case)


check_bytes_to_unicode = register(
    ImplementSpec(
        "ch11.bytes_to_unicode",
        "bytes_to_unicode",
        _map_cases,
        _map_reference,
        cases=30,
        prepare=_map_prepare,
        call=_map_call,
        summarize=_map_case_summary,
        parameters=("bytes looked up",),
        shortcuts=Shortcuts(("llmfs.gpt.tokenizer.bytes_to_unicode",), "range, chr and a dict"),
        size=lambda case: (len(case["bytes"]),),
        explain=_map_explain,
    ),
    "Checks ``bytes_to_unicode() -> {byte: character}`` (GPT-2's byte map) against the "
    "library's, byte by byte, and that it maps the 256 bytes onto 256 distinct characters.",
)
check_top_p_keep = register(
    ImplementSpec(
        "ch11.top_p_keep",
        "top_p_keep",
        _top_p_cases,
        _top_p_reference,
        cases=120,
        prepare=_top_p_prepare,
        summarize=_top_p_summary,
        parameters=("probs", "top_p"),
        shortcuts=Shortcuts(
            ("llmfs.gpt.sampling.nucleus", "llmfs.gpt.sampling.Sampler.choose"),
            "np.argsort (stable) and np.cumsum",
        ),
        size=lambda case: (len(case["probs"]),),
        explain=_top_p_explain,
    ),
    "Checks ``top_p_keep(probs, top_p) -> ids`` (the smallest set of the most probable ids "
    "whose probabilities reach top_p, at least one) against Hugging Face's top-p rule as the "
    "library's Sampler applies it.",
)

#: Exercise id -> check (chapter 11's byte map and top-p).
TEXT_CHECKS: dict[str, Callable[..., CheckReport]] = {
    "ch11.bytes_to_unicode": check_bytes_to_unicode,
    "ch11.top_p_keep": check_top_p_keep,
}

__all__ = ["OTHERS", "PRINTABLE", "TEXT_CHECKS", "check_bytes_to_unicode", "check_top_p_keep"]
