"""The capstone task: add two 2-digit numbers, writing the sum's digits in reverse.

A problem is a pair ``(a, b)`` with ``0 <= a, b <= 99``. It is written as text with both operands
zero-padded to two digits, and the answer is the sum zero-padded to three digits and written
least significant digit first, the order in which you add by hand (the carry flows from one
answer digit to the next, so each digit the model writes depends only on the prompt and the
digits it has already written)::

    37 + 45 = 82   ->   prompt "37+45="   answer "280"   whole sequence "37+45=280"

Tokens are single characters of :data:`VOCAB` (12 of them), so every sequence has
:data:`SEQUENCE_LENGTH` = 9 tokens: 6 of prompt, 3 of answer.

The split into training and held-out problems is a pure function of the seed and the unordered
pair ``{a, b}``: a SHA-256 hash decides, so it is the same on every machine and NumPy version, and
both ``a+b`` and ``b+a`` land on the same side (no held-out problem is the mirror image of a
training problem). Held-out problems are never seen in training.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from llmfs.gpt.errors import TaskError

#: The tokens, in id order: the ten digits, then ``+`` and ``=``.
VOCAB = "0123456789+="
#: Largest operand (operands are 0..MAX_OPERAND, two digits).
MAX_OPERAND = 99
#: Prompt tokens: two digits, ``+``, two digits, ``=``.
PROMPT_LENGTH = 6
#: Answer tokens: the sum's three digits, least significant first.
ANSWER_LENGTH = 3
SEQUENCE_LENGTH = PROMPT_LENGTH + ANSWER_LENGTH
#: Fraction of unordered pairs held out by :func:`split` unless told otherwise.
HELD_OUT_FRACTION = 0.1
#: Seed of the split the shipped weights were trained with.
SPLIT_SEED = 0

_IDS = {ch: i for i, ch in enumerate(VOCAB)}


def encode(text: str) -> list[int]:
    """Token ids of ``text`` (one per character). Raises :class:`TaskError` on a character
    outside :data:`VOCAB`."""
    bad = sorted({ch for ch in text if ch not in _IDS})
    if bad:
        raise TaskError(f"characters {bad} are not in the vocabulary {VOCAB!r}")
    return [_IDS[ch] for ch in text]


def decode(ids: Iterable[int]) -> str:
    """The text of token ids. Raises :class:`TaskError` on an id outside ``0..len(VOCAB)-1``."""
    out = []
    for i in ids:
        i = int(i)
        if not 0 <= i < len(VOCAB):
            raise TaskError(f"token id {i} is outside the vocabulary 0..{len(VOCAB) - 1}")
        out.append(VOCAB[i])
    return "".join(out)


def _check_operands(a: int, b: int) -> None:
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            raise TaskError(f"operand {name} must be an int, got {type(value).__name__}")
        if not 0 <= int(value) <= MAX_OPERAND:
            raise TaskError(f"operand {name} = {value} is outside 0..{MAX_OPERAND}")


def prompt(a: int, b: int) -> str:
    """The prompt text of ``a + b``: ``prompt(7, 45) == "07+45="``."""
    _check_operands(a, b)
    return f"{int(a):02d}+{int(b):02d}="


def answer(a: int, b: int) -> str:
    """The answer text of ``a + b``, least significant digit first: ``answer(37, 45) == "280"``."""
    _check_operands(a, b)
    return f"{int(a) + int(b):03d}"[::-1]


def read_answer(text: str) -> int | None:
    """The number an answer text stands for (``"280"`` -> 82), or ``None`` when ``text`` is not
    exactly :data:`ANSWER_LENGTH` digits."""
    if len(text) != ANSWER_LENGTH or not all(ch in "0123456789" for ch in text):
        return None
    return int(text[::-1])


def is_correct(a: int, b: int, generated: str) -> bool:
    """Whether ``generated`` (the answer tokens a model wrote, as text) is exactly the answer of
    ``a + b``: all three digits, in reversed order, nothing more or less."""
    return generated == answer(a, b)


def all_problems() -> np.ndarray:
    """Every problem ``(a, b)`` in lexicographic order: shape ``[10000, 2]``, int64."""
    a, b = np.meshgrid(np.arange(MAX_OPERAND + 1), np.arange(MAX_OPERAND + 1), indexing="ij")
    return np.stack([a.ravel(), b.ravel()], axis=1).astype(np.int64)


def _held_out(a: int, b: int, seed: int, fraction: float) -> bool:
    lo, hi = min(a, b), max(a, b)
    digest = hashlib.sha256(f"llmfs-gpt-split:{seed}:{lo}+{hi}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < fraction * 2**64


@dataclass(frozen=True)
class Split:
    """Disjoint problem sets: ``train`` and ``held_out``, each ``[n, 2]`` int64 in lexicographic
    order; together they are :func:`all_problems`."""

    train: np.ndarray
    held_out: np.ndarray


def split(seed: int = SPLIT_SEED, held_out_fraction: float = HELD_OUT_FRACTION) -> Split:
    """Splits every problem into training and held-out sets.

    An unordered pair ``{a, b}`` is held out when the SHA-256 of the seed and the pair falls below
    ``held_out_fraction`` of the hash range, so about that fraction of pairs is held out, the same
    everywhere. Raises :class:`TaskError` unless ``0 < held_out_fraction < 1``.
    """
    if not 0.0 < float(held_out_fraction) < 1.0:
        raise TaskError(
            f"held_out_fraction = {held_out_fraction} must lie strictly between 0 and 1"
        )
    problems = all_problems()
    mask = _held_out_mask(int(seed), float(held_out_fraction))
    # Boolean indexing copies, so callers never share (or can change) the cached mask.
    return Split(train=problems[~mask], held_out=problems[mask])


@functools.lru_cache(maxsize=8)
def _held_out_mask(seed: int, fraction: float) -> np.ndarray:
    problems = all_problems()
    mask = np.array([_held_out(int(a), int(b), seed, fraction) for a, b in problems])
    mask.flags.writeable = False
    return mask


def sequences(problems: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
    """Token ids of the whole sequences (prompt then answer) of ``problems``: ``[n, 9]`` int64."""
    rows = [encode(prompt(int(a), int(b)) + answer(int(a), int(b))) for a, b in problems]
    return np.asarray(rows, dtype=np.int64).reshape(len(rows), SEQUENCE_LENGTH)


def prompts(problems: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
    """Token ids of the prompts of ``problems``: ``[n, 6]`` int64."""
    return sequences(problems)[:, :PROMPT_LENGTH]


def digest(problems: np.ndarray) -> str:
    """SHA-256 of ``problems`` as little-endian int64 bytes: pins a split (the training record
    stores the held-out set's digest)."""
    return hashlib.sha256(np.ascontiguousarray(problems, dtype="<i8").tobytes()).hexdigest()


def solve_with(generate: Callable[[np.ndarray, int], np.ndarray], a: int, b: int) -> str:
    """The answer text a model gives to ``a + b`` (three digits, least significant first):
    ``generate(ids, n)`` appends ``n`` tokens to the ``[T]`` prompt ``ids`` and returns the
    ``[1, T + n]`` sequence (either model's ``generate``)."""
    ids = np.asarray(encode(prompt(a, b)), dtype=np.int64)
    return decode(generate(ids, ANSWER_LENGTH)[0, len(ids) :])


def accuracy_with(
    generate: Callable[[np.ndarray, int], np.ndarray],
    problems: np.ndarray | Sequence[Sequence[int]],
    batch_size: int | None = None,
) -> float:
    """Fraction of ``problems`` (``[n, 2]``) whose generated answer is exactly right, computed
    now with ``generate`` (as in :func:`solve_with`, on ``[B, T]`` prompts) in batches of
    ``batch_size`` problems (all at once when ``None``).

    Raises :class:`TaskError` for no problems or a ``batch_size`` below 1."""
    problems = np.asarray(problems)
    if len(problems) == 0:
        raise TaskError("accuracy of no problems is undefined: problems is empty")
    if batch_size is not None and batch_size < 1:
        raise TaskError(f"batch_size must be at least 1, got {batch_size}")
    size = len(problems) if batch_size is None else batch_size
    right = 0
    for start in range(0, len(problems), size):
        chunk = problems[start : start + size]
        generated = generate(prompts(chunk), ANSWER_LENGTH)[:, PROMPT_LENGTH:]
        expected = sequences(chunk)[:, PROMPT_LENGTH:]
        right += int((generated == expected).all(axis=1).sum())
    return right / len(problems)
