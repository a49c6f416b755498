"""A small GPT that writes the course's own prose: the corpus, its tokenizer, the training run on
the tensor engine, and the shipped weights with their checksum and record.

Everything the model is made from ships in the package and is the project's own:

* **The corpus** (``data/corpus.txt``, :func:`corpus_text`): the prose of the course, extracted
  by :func:`extract_corpus` from the fixed list :data:`SOURCES` of a checkout: the markdown cells
  of the ten STUDENT notebooks (``notebooks/``: what a learner reads before answering; the
  solution notebooks' markdown also holds worked answers, so it is never read), the learner
  guide and the README, fenced code blocks left out. The shipped file is frozen: it is the
  training input, and ``python -m llmfs.gpt.text_model corpus --check`` says whether today's
  sources still give it byte for byte (the course's prose keeps changing; the model was trained
  on the file, which its record pins by SHA-256).
* **The tokenizer** (``data/vocab.json`` and ``data/merges.txt``, GPT-2's file format,
  :func:`tokenizer_files`): :meth:`llmfs.gpt.tokenizer.BPETokenizer.train` on the corpus, with
  :data:`VOCAB_SIZE` ids (the 256 bytes, the merges, ``<|endoftext|>``). A learner's own encoder
  reads the same merges.
* **The split** (:func:`split`): the corpus's token stream cut into blocks of
  :data:`SPLIT_BLOCK` tokens; every :data:`HELD_OUT_EVERY`-th block (indices 9, 19, ...) is held
  out, the rest is the training stream (each part's blocks concatenated in order). The
  tokenizer is trained on the whole corpus (as GPT-2's was on its whole corpus); only the model
  is held to the held-out tokens.
* **Training** (:func:`train`): next-token language modelling as nanoGPT does it: every step
  reads ``batch_size`` windows of ``n_ctx + 1`` tokens at uniformly random starts of the
  training stream (:func:`windows`, one seeded NumPy ``Generator``) and the loss is the mean
  cross-entropy of EVERY position's next token. The model is :mod:`llmfs.gpt.tensor_model`'s
  forward pass, the gradients the library's autograd, the loss
  :func:`llmfs.gpt.tensor_train.cross_entropy`, the optimiser its :class:`AdamW` with the
  capstone's schedule (:func:`llmfs.gpt.experiment.learning_rate`) and decay rule: the
  chapter-10 engine, unchanged, on another task. The held-out loss (:func:`held_out_loss`, by
  the float64 NumPy reference on the weights read back) is logged during training.
* **The shipped files** (``weights/text_gpt.npz``, float32; ``text_gpt.sha256``; the record
  ``text_gpt.json``): :func:`load_text_model` verifies the checksum, the record and the
  tokenizer's hashes before it returns a :class:`TextModel`.

The baselines the record holds (:func:`unigram_baselines`): the cross-entropy of the held-out
tokens under the training stream's token frequencies (add-one smoothed), and the held-out
tokens' own unigram entropy, the least any context-free distribution can score on them. A
held-out loss below both is what the model learned from context.

Determinism: the same corpus, tokenizer, config and seed give the same weights byte for byte on
the same machine and BLAS kernel (one thread); across kernels the sums round differently and the
run ends at other weights, as the adder's record explains (:mod:`llmfs.gpt.train`). The shipped
file is pinned by its checksum and record, not by retraining.

Commands (``python -m llmfs.gpt.text_model ...``): ``corpus`` rewrites the corpus from a
checkout (``--check`` only compares), ``tokenizer`` retrains the tokenizer files from the
shipped corpus, ``train --out PATH`` trains and writes the weights, checksum and record,
``sample`` prints text from the shipped model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from llmfs.gpt import reference, tensor_model
from llmfs.gpt.checkpoint import (
    WEIGHTS_DIR,
    load_params,
    save_params,
    sha256_of,
    verify_checksum,
    write_checksum,
)
from llmfs.gpt.errors import ChecksumMismatchError, ConfigError, GPTError
from llmfs.gpt.experiment import (
    ProgressBar,
    TrainConfig,
    blas_environment,
    decays,
    learning_rate,
)
from llmfs.gpt.model import GPTConfig, Params, check_params, count_parameters, init_params
from llmfs.gpt.tensor_train import AdamW, cross_entropy, to_numpy_params
from llmfs.gpt.tokenizer import BPETokenizer
from llmfs.tensor import use_backend


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
    steps=1200,
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


def extract_corpus(root: Path | str, sources: Sequence[str] = SOURCES) -> str:
    """The corpus from the checkout at ``root``: the prose of each of ``sources`` (notebooks:
    :func:`notebook_prose`; markdown: :func:`markdown_prose`), in order, separated by one blank
    line, ending in one newline. A pure function of the sources' bytes. Raises
    :class:`TextModelError` naming a source that is missing or not UTF-8."""
    root = Path(root)
    documents = []
    for name in sources:
        path = root / name
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise TextModelError(
                f"corpus source {name} cannot be read under {root}: {error}"
            ) from None
        prose = notebook_prose(text, name) if name.endswith(".ipynb") else markdown_prose(text)
        documents.append(prose)
    return "\n\n".join(documents) + "\n"


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


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------


@dataclass
class TextTrainResult:
    """A run's float64 parameters, every step's loss, the loss curve (the mean of every
    ``log_every`` steps) and the held-out loss curve."""

    params: Params
    losses: list[float] = field(default_factory=list)
    curve: list[tuple[int, float]] = field(default_factory=list)
    held_out_curve: list[tuple[int, float]] = field(default_factory=list)


def train(
    config: GPTConfig,
    cfg: TrainConfig,
    parts: Split,
    log: Callable[[str], Any] | None = None,
    backend: str = "numpy",
    dtype: object = np.float32,
    progress: ProgressBar | None = None,
) -> TextTrainResult:
    """Trains ``config``'s model from :func:`~llmfs.gpt.model.init_params` with ``cfg.seed`` on
    :func:`windows` of ``parts.train`` with the tensor engine (forward of
    :mod:`llmfs.gpt.tensor_model`, autograd, :func:`cross_entropy` on every position,
    :class:`AdamW`, :func:`learning_rate`) on ``backend`` in ``dtype``. The loss curve has the
    mean of every ``cfg.log_every`` steps (and of the last, shorter window); the held-out loss
    (:func:`held_out_loss` of ``parts.held_out``) is measured every ``cfg.eval_every`` steps and
    at the last. ``log`` gets one line per logged point; ``progress`` one update per step."""
    start = init_params(config, seed=cfg.seed)
    every = np.ones((cfg.batch_size, config.n_ctx))
    result = TextTrainResult(start)
    window: list[float] = []
    with use_backend(backend):
        w = tensor_model.tensor_params(start, dtype)
        for tensor in w.values():
            tensor.requires_grad_()
        optimizer = AdamW(
            w,
            lr=cfg.learning_rate,
            betas=(cfg.beta1, cfg.beta2),
            eps=cfg.adam_eps,
            weight_decay=cfg.weight_decay,
            decay=decays,
        )
        for step, batch in enumerate(windows(parts.train, config.n_ctx, cfg)):
            loss = cross_entropy(
                tensor_model.forward(w, config, batch[:, :-1]), batch[:, 1:], every
            )
            loss.backward()
            lr = learning_rate(step, cfg)
            optimizer.step(lr)
            optimizer.zero_grad()
            value = float(loss.item())
            result.losses.append(value)
            window.append(value)
            if progress is not None:
                progress.update(value)
            done = step + 1
            if done % cfg.log_every and done != cfg.steps:
                continue
            mean = float(np.mean(window))
            window = []
            result.curve.append((done, mean))
            line = f"step {done:5d}  lr {lr:.2e}  loss {mean:.4f}"
            if done % cfg.eval_every == 0 or done == cfg.steps:
                held = held_out_loss(to_numpy_params(w), config, parts.held_out)
                result.held_out_curve.append((done, held))
                line += f"  held-out loss {held:.4f}"
            if log is not None:
                log(line)
        result.params = to_numpy_params(w)
    return result


# --------------------------------------------------------------------------------------------
# The shipped model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextModel:
    """The shipped text model: ``weights`` (GPT-2-named float32 NumPy arrays, what
    :func:`llmfs.gpt.generate` takes; :func:`llmfs.gpt.tensor_model.tensor_params` makes the
    tensors :func:`llmfs.gpt.tensor_model.generate` takes), ``config``, ``tokenizer`` (the
    shipped :class:`BPETokenizer`) and ``record`` (the training record's dict)."""

    weights: Params
    config: GPTConfig
    tokenizer: BPETokenizer
    record: dict[str, Any]


def _check_hash(path: Path, expected: object, what: str) -> None:
    actual = sha256_of(path)
    if actual != expected:
        raise ChecksumMismatchError(
            f"{path.name} has SHA-256 {actual}, but the record {what} {expected}: the "
            f"tokenizer is not the one the model was trained with"
        )


def load_text_model(path: Path | str | None = None) -> TextModel:
    """The shipped text model (or the one at ``path``, an ``.npz`` with its ``.sha256`` and
    ``.json`` record beside it), after verifying: the weights' SHA-256 against the checksum file
    (:class:`ChecksumMismatchError`), the record's ``sha256`` against it too, the tokenizer
    files' SHA-256 against the record (:class:`ChecksumMismatchError`), and every name and shape
    against the record's config (:class:`~llmfs.gpt.errors.WeightsError`). Raises
    :class:`TextModelError` for a record that is missing or not one of this model."""
    path = Path(path) if path is not None else TEXT_GPT_PATH
    digest = verify_checksum(path)
    record_path = path.with_suffix(".json")
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        model = record["model"]
        config = GPTConfig(**model)
        tokenizer_record = record["tokenizer"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TextModelError(f"the training record {record_path} cannot be read: {error}") from None
    except (KeyError, TypeError, ConfigError) as error:
        raise TextModelError(
            f"the training record {record_path} does not describe a model: {error!r}"
        ) from None
    if record.get("sha256") != digest:
        raise ChecksumMismatchError(
            f"{path.name} has SHA-256 {digest}, but its record {record_path.name} describes "
            f"{record.get('sha256')}: the record belongs to other weights"
        )
    vocab, merges = tokenizer_files()
    _check_hash(vocab, tokenizer_record.get("vocab_sha256"), "names")
    _check_hash(merges, tokenizer_record.get("merges_sha256"), "names")
    tokenizer = BPETokenizer.from_files(vocab, merges)
    if tokenizer.vocab_size != config.vocab_size:
        raise TextModelError(
            f"the tokenizer has {tokenizer.vocab_size} ids, the model {config.vocab_size}"
        )
    params = load_params(path)
    check_params(params, config)
    return TextModel(params, config, tokenizer, record)


def sample(
    model: TextModel,
    prompt: str,
    max_new_tokens: int,
    *,
    temperature: float = 0.8,
    top_k: int | None = 40,
    seed: int | None = 0,
) -> str:
    """The prompt and ``max_new_tokens`` tokens after it, decoded: :func:`llmfs.gpt.generate`
    (the NumPy reference, KV cache on) of the prompt's encoding."""
    ids = model.tokenizer.encode(prompt)
    out = reference.generate(
        model.weights,
        model.config,
        ids,
        max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        seed=seed,
    )
    return model.tokenizer.decode(out[0].tolist())


# --------------------------------------------------------------------------------------------
# The record and the commands
# --------------------------------------------------------------------------------------------

#: How the shipped weights were made (one BLAS thread: one fixed summation order).
COMMAND = (
    "OPENBLAS_NUM_THREADS=1 python -m llmfs.gpt.text_model train --out "
    "llmfs/gpt/weights/text_gpt.npz"
)


def make_record(
    config: GPTConfig,
    cfg: TrainConfig,
    result: TextTrainResult,
    parts: Split,
    corpus: str,
    saved_held_out_loss: float,
    sha256: str,
    *,
    backend: str,
    dtype: str,
    command: str,
    wall_seconds: float | None = None,
    cpu_seconds: float | None = None,
) -> dict[str, Any]:
    """The training record written beside the weights: the command, engine, backend and dtype,
    the corpus (sources, SHA-256, size, split) and tokenizer (size, files' SHA-256), the model,
    the hyperparameters and seed, the loss and held-out loss curves, the unigram baselines,
    the saved weights' held-out loss and checksum, the BLAS environment and (when given) the
    wall and CPU seconds, the fields that differ between two runs of the same command."""
    vocab, merges = tokenizer_files()
    record: dict[str, Any] = {
        "command": command,
        "engine": "tensor",
        "backend": backend,
        "dtype": dtype,
        "task": "next-token language modelling of the course's prose, every position scored",
        "corpus": {
            "file": "llmfs/gpt/data/corpus.txt",
            "sources": list(SOURCES),
            "sha256": sha256_text(corpus),
            "characters": len(corpus),
            "tokens": len(parts.train) + len(parts.held_out),
            "split": {
                "block": SPLIT_BLOCK,
                "held_out_every": HELD_OUT_EVERY,
                "train_tokens": len(parts.train),
                "held_out_tokens": len(parts.held_out),
            },
        },
        "tokenizer": {
            "vocab_size": config.vocab_size,
            "vocab_sha256": sha256_of(vocab),
            "merges_sha256": sha256_of(merges),
        },
        "model": asdict(config),
        "parameters": count_parameters(config),
        "train": asdict(cfg),
        "loss_curve": [[step, round(loss, 6)] for step, loss in result.curve],
        "held_out_loss_curve": [[step, round(loss, 6)] for step, loss in result.held_out_curve],
        "final_loss": round(float(np.mean(result.losses[-cfg.log_every :])), 6),
        "baselines": {
            name: round(value, 6)
            for name, value in unigram_baselines(parts, config.vocab_size).items()
        },
        "saved_dtype": "float32",
        "saved_held_out_loss": round(saved_held_out_loss, 6),
        "sha256": sha256,
        "environment": blas_environment(),
    }
    if wall_seconds is not None:
        record["wall_seconds"] = round(wall_seconds, 2)
    if cpu_seconds is not None:
        record["cpu_seconds"] = round(cpu_seconds, 2)
    return record


def corpus_split(tokenizer: BPETokenizer | None = None, corpus: str | None = None) -> Split:
    """The split of the shipped corpus's tokens (by the shipped tokenizer, by default)."""
    tokenizer = tokenizer or load_tokenizer()
    return split(tokenizer.encode(corpus if corpus is not None else corpus_text()))


def _command_corpus(args: argparse.Namespace) -> int:
    text = extract_corpus(args.root or checkout_root())
    if args.check:
        shipped = corpus_text()
        if text == shipped:
            print(f"{CORPUS_PATH} is what the sources give ({len(text)} characters)")
            return 0
        print(
            f"the sources give another corpus ({len(text)} characters, SHA-256 "
            f"{sha256_text(text)}) than {CORPUS_PATH} ({len(shipped)}, {sha256_text(shipped)})"
        )
        return 1
    CORPUS_PATH.parent.mkdir(parents=True, exist_ok=True)
    CORPUS_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {CORPUS_PATH} ({len(text)} characters, SHA-256 {sha256_text(text)})")
    return 0


def _command_tokenizer(args: argparse.Namespace) -> int:
    tokenizer = train_tokenizer(corpus_text(), args.vocab_size)
    vocab, merges = tokenizer.save(DATA_DIR)
    print(f"wrote {vocab} and {merges} ({tokenizer.vocab_size} ids)")
    return 0


def _command_line(argv: Sequence[str]) -> str:
    """The command that ran, with the BLAS thread count it ran under (part of the result)."""
    threads = os.environ.get("OPENBLAS_NUM_THREADS")
    prefix = f"OPENBLAS_NUM_THREADS={threads} " if threads is not None else ""
    return prefix + "python -m llmfs.gpt.text_model " + " ".join(argv)


def _command_train(args: argparse.Namespace, argv: Sequence[str]) -> int:
    base = TEXT_CONFIG
    try:
        config = GPTConfig(
            vocab_size=base.vocab_size,
            n_ctx=args.n_ctx,
            n_embd=args.n_embd,
            n_head=args.n_head,
            n_layer=args.n_layer,
        )
        cfg = TrainConfig(
            **{
                **asdict(TEXT_TRAIN),
                "seed": args.seed,
                "steps": args.steps,
                "batch_size": args.batch_size,
                "learning_rate": args.lr,
            }
        )
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    corpus = corpus_text()
    tokenizer = load_tokenizer()
    parts = corpus_split(tokenizer, corpus)
    print(
        f"model: {config} ({count_parameters(config)} parameters); tensor engine, backend "
        f"{args.backend}, {args.dtype}; {len(parts.train)} training and {len(parts.held_out)} "
        f"held-out tokens"
    )
    progress = ProgressBar(cfg.steps)
    wall, cpu = time.perf_counter(), time.process_time()
    result = train(
        config,
        cfg,
        parts,
        log=progress.write,
        backend=args.backend,
        dtype=np.dtype(args.dtype),
        progress=progress,
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    progress.close()
    path = save_params(result.params, args.out)
    checksum = write_checksum(path)
    saved = held_out_loss(load_params(path), config, parts.held_out)
    record = make_record(
        config,
        cfg,
        result,
        parts,
        corpus,
        saved,
        checksum.read_text().split()[0],
        backend=args.backend,
        dtype=args.dtype,
        command=_command_line(argv),
        wall_seconds=wall,
        cpu_seconds=cpu,
    )
    record_path = path.with_suffix(".json")
    record_path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    base_line = record["baselines"]
    print(
        f"trained {cfg.steps} steps in {wall:.1f} s ({cpu:.1f} s CPU); final loss "
        f"{record['final_loss']}, held-out loss of the saved weights {saved:.4f} (unigram "
        f"baselines {base_line['train_unigram']:.4f}, {base_line['held_out_entropy']:.4f})"
    )
    print(f"wrote {path} ({path.stat().st_size} bytes), {checksum}, {record_path}")
    return 0


def _command_sample(args: argparse.Namespace) -> int:
    model = load_text_model(args.weights)
    for seed in args.seeds:
        text = sample(
            model,
            args.prompt,
            args.tokens,
            temperature=args.temperature,
            top_k=args.top_k,
            seed=seed,
        )
        print(f"--- seed {seed} ---\n{text}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m llmfs.gpt.text_model {corpus,tokenizer,train,sample}``; returns the exit
    status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="python -m llmfs.gpt.text_model", description=__doc__.split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    corpus = commands.add_parser("corpus", help="write the corpus from a checkout's sources")
    corpus.add_argument("--root", type=Path, default=None, help="the checkout (default: this)")
    corpus.add_argument("--check", action="store_true", help="compare with the shipped corpus")
    tokenizer = commands.add_parser("tokenizer", help="train the tokenizer on the corpus")
    tokenizer.add_argument("--vocab-size", type=int, default=VOCAB_SIZE)
    run = commands.add_parser("train", help="train the model and write weights and record")
    run.add_argument("--out", type=Path, required=True, help="weights file to write (.npz)")
    run.add_argument("--backend", default="numpy", help="the llmfs.tensor backend (numpy)")
    run.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    run.add_argument("--seed", type=int, default=TEXT_TRAIN.seed)
    run.add_argument("--steps", type=int, default=TEXT_TRAIN.steps)
    run.add_argument("--batch-size", type=int, default=TEXT_TRAIN.batch_size)
    run.add_argument("--lr", type=float, default=TEXT_TRAIN.learning_rate)
    run.add_argument("--n-ctx", type=int, default=TEXT_CONFIG.n_ctx)
    run.add_argument("--n-embd", type=int, default=TEXT_CONFIG.n_embd)
    run.add_argument("--n-head", type=int, default=TEXT_CONFIG.n_head)
    run.add_argument("--n-layer", type=int, default=TEXT_CONFIG.n_layer)
    show = commands.add_parser("sample", help="print text from the shipped model")
    show.add_argument("--weights", type=Path, default=None)
    show.add_argument("--prompt", default="A view")
    show.add_argument("--tokens", type=int, default=200)
    show.add_argument("--temperature", type=float, default=0.8)
    show.add_argument("--top-k", type=int, default=40)
    show.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args(argv)
    try:
        if args.command == "corpus":
            return _command_corpus(args)
        if args.command == "tokenizer":
            return _command_tokenizer(args)
        if args.command == "train":
            return _command_train(args, argv)
        return _command_sample(args)
    except GPTError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


__all__ = [
    "COMMAND",
    "CORPUS_PATH",
    "DATA_DIR",
    "HELD_OUT_EVERY",
    "MERGES_PATH",
    "SOURCES",
    "SPLIT_BLOCK",
    "TEXT_CONFIG",
    "TEXT_GPT_PATH",
    "TEXT_GPT_RECORD_PATH",
    "TEXT_GPT_SHA256_PATH",
    "TEXT_TRAIN",
    "VOCAB_PATH",
    "VOCAB_SIZE",
    "Split",
    "TextModel",
    "TextModelError",
    "TextTrainResult",
    "corpus_split",
    "corpus_text",
    "extract_corpus",
    "held_out_loss",
    "held_out_windows",
    "load_text_model",
    "load_tokenizer",
    "main",
    "markdown_prose",
    "notebook_prose",
    "sample",
    "sha256_text",
    "split",
    "tokenizer_files",
    "train",
    "train_tokenizer",
    "unigram_baselines",
    "windows",
]


if __name__ == "__main__":
    sys.exit(main())
