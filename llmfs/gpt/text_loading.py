"""The shipped text model: its weights, checked against their checksum, record and
tokenizer before use (:func:`load_text_model`), and sampling from it (see
:mod:`llmfs.gpt.text_model`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmfs.gpt import reference
from llmfs.gpt.checkpoint import (
    load_params,
    sha256_of,
    verify_checksum,
)
from llmfs.gpt.errors import ChecksumMismatchError, ConfigError
from llmfs.gpt.model import GPTConfig, Params, check_params
from llmfs.gpt.text_corpus import (
    TEXT_GPT_PATH,
    TextModelError,
    tokenizer_files,
)
from llmfs.gpt.tokenizer import BPETokenizer

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
    top_p: float | None = None,
    stop_at_end_of_text: bool = False,
) -> str:
    """The prompt and ``max_new_tokens`` tokens after it, decoded: :func:`llmfs.gpt.generate`
    (the NumPy reference, KV cache on) of the prompt's encoding. ``top_p`` is nucleus sampling;
    with ``stop_at_end_of_text`` generation ends at the tokenizer's ``<|endoftext|>`` (kept in
    the text, as the token that ended it)."""
    ids = model.tokenizer.encode(prompt)
    out = reference.generate(
        model.weights,
        model.config,
        ids,
        max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        seed=seed,
        top_p=top_p,
        stop_token=model.tokenizer.end_of_text_id if stop_at_end_of_text else None,
    )
    return model.tokenizer.decode(out[0].tolist())
