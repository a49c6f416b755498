"""The text model's data: its files, the corpus of the course's prose, the tokenizer and the
token streams it is trained and measured on (the split, the training windows, the held-out loss
and the baselines). The whole story is told in :mod:`llmfs.gpt.text_model`."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from llmfs.gpt import reference
from llmfs.gpt.checkpoint import (
    WEIGHTS_DIR,
)
from llmfs.gpt.errors import GPTError
from llmfs.gpt.experiment import (
    TrainConfig,
)
from llmfs.gpt.model import GPTConfig, Params
from llmfs.gpt.tokenizer import BPETokenizer


class TextModelError(GPTError):
    """A corpus source that is missing or unreadable, a token stream too short for the split or
    the windows, or a shipped record that does not describe its files."""


# --------------------------------------------------------------------------------------------
# The files
# --------------------------------------------------------------------------------------------

#: The corpus and the tokenizer, shipped beside this module.
DATA_DIR = Path(__file__).resolve().parent / "data"
CORPUS_PATH = DATA_DIR / "corpus.txt"
VOCAB_PATH = DATA_DIR / "vocab.json"
MERGES_PATH = DATA_DIR / "merges.txt"
#: The shipped weights (float32), their checksum and the training record.
TEXT_GPT_PATH = WEIGHTS_DIR / "text_gpt.npz"
TEXT_GPT_SHA256_PATH = WEIGHTS_DIR / "text_gpt.sha256"
TEXT_GPT_RECORD_PATH = WEIGHTS_DIR / "text_gpt.json"

#: The corpus's sources, relative to a checkout's root, in corpus order.
SOURCES: tuple[str, ...] = (
    "notebooks/ch01_storage_shape_strides.ipynb",
    "notebooks/ch02_shared_storage_views.ipynb",
    "notebooks/ch03_merge_split_reshape.ipynb",
    "notebooks/ch04_broadcasting_reductions.ipynb",
    "notebooks/ch05_elementwise_metal_kernels.ipynb",
    "notebooks/ch06_einsum_contraction_plans.ipynb",
    "notebooks/ch07_attention_heads.ipynb",
    "notebooks/ch08_tiny_gpt.ipynb",
    "notebooks/ch09_gradients_through_views.ipynb",
    "notebooks/ch10_train_the_adder.ipynb",
    "course/learner_guide.md",
    "README.md",
)

#: The commit whose :data:`SOURCES` gave the shipped corpus (``git show COMMIT:PATH`` reads them
#: back; the corpus of a later commit differs wherever the prose was edited since).
SOURCES_COMMIT = "a02e6f92c10e7e85c33d5328d92d4b93ba210748"

#: The tokenizer's size: 256 bytes, 511 merges, ``<|endoftext|>``.
VOCAB_SIZE = 768
#: Tokens per block of the split, and which blocks are held out (every tenth).
SPLIT_BLOCK = 1024
HELD_OUT_EVERY = 10

#: The shipped model: 4 blocks of 4 heads over 128 features, 128 positions.
TEXT_CONFIG = GPTConfig(vocab_size=VOCAB_SIZE, n_ctx=128, n_embd=128, n_head=4, n_layer=4)
#: Its training run.
TEXT_TRAIN = TrainConfig(
    seed=0,
    steps=1000,
    batch_size=16,
    learning_rate=2e-3,
    warmup_steps=100,
    min_lr_ratio=0.05,
    beta1=0.9,
    beta2=0.99,
    adam_eps=1e-8,
    weight_decay=0.1,
    log_every=25,
    eval_every=100,
)

# --------------------------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")


def _tidy(text: str) -> str:
    """``\\n`` line ends, no trailing spaces, at most one blank line in a row, no blank lines
    at either end."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def markdown_prose(text: str) -> str:
    """A markdown text without its fenced code blocks (from a line opening a fence, three
    backticks or tildes, to the line that closes it, both included), tidied."""
    kept: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
        elif fence is not None and match and match.group(1) == fence:
            fence = None
        elif fence is None:
            kept.append(line)
    return _tidy("\n".join(kept))


def notebook_prose(text: str, source: str = "the notebook") -> str:
    """The markdown cells of a notebook's JSON, in order, each without fenced code, separated by
    one blank line. Raises :class:`TextModelError` when ``text`` is not a notebook."""
    try:
        notebook = json.loads(text)
        cells = notebook["cells"]
        parts = []
        for cell in cells:
            if cell.get("cell_type") != "markdown":
                continue
            body = cell["source"]
            parts.append(markdown_prose("".join(body) if isinstance(body, list) else body))
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as error:
        raise TextModelError(f"{source} is not a notebook's JSON: {error!r}") from None
    return "\n\n".join(part for part in parts if part)


def corpus_of(documents: Sequence[tuple[str, str]]) -> str:
    """The corpus of ``(name, text)`` sources: the prose of each (a name ending in ``.ipynb``:
    :func:`notebook_prose`; any other: :func:`markdown_prose`), in order, separated by one blank
    line, ending in one newline. A pure function of the names and texts."""
    parts = [
        notebook_prose(text, name) if name.endswith(".ipynb") else markdown_prose(text)
        for name, text in documents
    ]
    return "\n\n".join(parts) + "\n"


def extract_corpus(root: Path | str, sources: Sequence[str] = SOURCES) -> str:
    """The corpus (:func:`corpus_of`) of ``sources`` read from the checkout at ``root``. Raises
    :class:`TextModelError` naming a source that is missing or not UTF-8."""
    root = Path(root)
    documents = []
    for name in sources:
        try:
            documents.append((name, (root / name).read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as error:
            raise TextModelError(
                f"corpus source {name} cannot be read under {root}: {error}"
            ) from None
    return corpus_of(documents)


def checkout_root() -> Path:
    """The root of the checkout this module lies in (the corpus's sources are there)."""
    return Path(__file__).resolve().parent.parent.parent


def corpus_text() -> str:
    """The shipped corpus, the model's training text (UTF-8)."""
    return CORPUS_PATH.read_text(encoding="utf-8")


def sha256_text(text: str) -> str:
    """Hex SHA-256 of ``text``'s UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------
# The tokenizer and the token streams
# --------------------------------------------------------------------------------------------


def tokenizer_files() -> tuple[Path, Path]:
    """The shipped tokenizer's ``(vocab.json, merges.txt)``, GPT-2's file format."""
    return VOCAB_PATH, MERGES_PATH


def train_tokenizer(text: str, vocab_size: int = VOCAB_SIZE) -> BPETokenizer:
    """The tokenizer of ``text``: :meth:`BPETokenizer.train` with ``vocab_size`` ids."""
    return BPETokenizer.train(text, vocab_size)


def load_tokenizer() -> BPETokenizer:
    """The shipped tokenizer, read from its files."""
    return BPETokenizer.from_files(*tokenizer_files())


@dataclass(frozen=True)
class Split:
    """The training and held-out token streams (int64) of a corpus."""

    train: np.ndarray
    held_out: np.ndarray


def split(
    ids: Sequence[int] | np.ndarray, block: int = SPLIT_BLOCK, every: int = HELD_OUT_EVERY
) -> Split:
    """Cuts ``ids`` into blocks of ``block`` tokens (the last may be shorter); block ``i`` is held
    out when ``i % every == every - 1``. Each part is its blocks concatenated in order. Raises
    :class:`TextModelError` when either part would be empty."""
    stream = np.asarray(ids, dtype=np.int64)
    if block < 1 or every < 2:
        raise TextModelError(f"split needs block >= 1 and every >= 2, got {block} and {every}")
    index = np.arange(len(stream)) // block
    held = index % every == every - 1
    if not held.any() or held.all():
        raise TextModelError(
            f"{len(stream)} tokens in blocks of {block} leave no held-out block "
            f"(block {every - 1} is the first held out)"
        )
    return Split(stream[~held], stream[held])


def windows(stream: np.ndarray, n_ctx: int, cfg: TrainConfig) -> Iterator[np.ndarray]:
    """The ``cfg.steps`` batches of a run, in order: ``[cfg.batch_size, n_ctx + 1]`` windows of
    ``stream`` at starts drawn uniformly from ``0..len - n_ctx - 1`` by a NumPy ``Generator``
    seeded with ``cfg.seed``. Raises :class:`TextModelError` when the stream is shorter than one
    window."""
    last = len(stream) - n_ctx - 1
    if last < 0:
        raise TextModelError(f"a stream of {len(stream)} tokens holds no window of {n_ctx + 1}")
    rng = np.random.default_rng(cfg.seed)
    offsets = np.arange(n_ctx + 1)
    for _ in range(cfg.steps):
        starts = rng.integers(0, last + 1, size=cfg.batch_size)
        yield stream[starts[:, None] + offsets]


def held_out_windows(stream: np.ndarray, n_ctx: int) -> np.ndarray:
    """``[n, n_ctx + 1]``: the windows ``stream[i * n_ctx : i * n_ctx + n_ctx + 1]`` that fit, so
    that every token after the first is predicted exactly once (over windows of ``n_ctx``
    inputs). Raises :class:`TextModelError` when none fits."""
    count = (len(stream) - 1) // n_ctx
    if count < 1:
        raise TextModelError(f"a stream of {len(stream)} tokens holds no window of {n_ctx + 1}")
    starts = np.arange(count) * n_ctx
    return np.asarray(stream[starts[:, None] + np.arange(n_ctx + 1)], dtype=np.int64)


def held_out_loss(
    params: Params, config: GPTConfig, stream: np.ndarray, batch_size: int = 16
) -> float:
    """The mean cross-entropy (nats per token) of every next token of :func:`held_out_windows`,
    by the float64 NumPy reference (:func:`llmfs.gpt.reference.forward`)."""
    data = held_out_windows(stream, config.n_ctx)
    total, count = 0.0, 0
    for begin in range(0, len(data), batch_size):
        chunk = data[begin : begin + batch_size]
        logits = reference.forward(params, config, chunk[:, :-1])
        shift = logits.max(axis=-1, keepdims=True)
        log_z = np.log(np.exp(logits - shift).sum(axis=-1)) + shift[..., 0]
        picked = np.take_along_axis(logits, chunk[:, 1:, None], axis=-1)[..., 0]
        total += float((log_z - picked).sum())
        count += picked.size
    return total / count


def unigram_baselines(parts: Split, vocab_size: int) -> dict[str, float]:
    """What a model that ignores context scores on the held-out tokens (nats per token):
    ``train_unigram``, the cross-entropy under the training stream's token frequencies with one
    added to every count (no token gets probability 0), and ``held_out_entropy``, the held-out
    tokens' own unigram entropy, the least any single distribution over the vocabulary can
    score on them."""
    train_counts = np.bincount(parts.train, minlength=vocab_size).astype(np.float64) + 1.0
    log_p = np.log(train_counts / train_counts.sum())
    held_counts = np.bincount(parts.held_out, minlength=vocab_size).astype(np.float64)
    freq = held_counts / held_counts.sum()
    nonzero = freq > 0
    return {
        "train_unigram": float(-log_p[parts.held_out].mean()),
        "held_out_entropy": float(-(freq[nonzero] * np.log(freq[nonzero])).sum()),
    }
