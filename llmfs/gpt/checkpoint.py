"""Checkpoints: saving and loading parameter dicts; the shipped capstone weights (in the
``weights/`` folder beside this module) and their checksum.

Files are ``.npz`` archives (one ``.npy`` member per parameter name) written by :func:`save_params`
with fixed member order and zip timestamps, so the same values always give the same bytes (NumPy's
own ``np.savez`` stamps the current time into the archive). Any ``.npz`` whose members are named as
in :mod:`llmfs.gpt.model` loads with :func:`load_params`; nothing is ever downloaded.

The shipped file ``weights/tiny_gpt.npz`` sits beside ``weights/tiny_gpt.sha256`` (``sha256sum``
format). :func:`load_tiny_gpt` refuses a file whose SHA-256 differs
(:class:`ChecksumMismatchError`): the weights are reproduced by ``python -m llmfs.gpt.train``, but
floating-point sums may round differently on another machine's BLAS, so the checksum, not a
retraining, is what pins the shipped bytes.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import numpy as np

from llmfs.gpt.errors import ChecksumMismatchError, WeightsError
from llmfs.gpt.model import (
    GPT2_SMALL_CONFIG,
    TINY_CONFIG,
    GPTConfig,
    Params,
    check_params,
    config_from_params,
)

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
#: The shipped capstone weights (float32).
TINY_GPT_PATH = WEIGHTS_DIR / "tiny_gpt.npz"
#: Its checksum, ``"<sha256 hex>  tiny_gpt.npz"``.
TINY_GPT_SHA256_PATH = WEIGHTS_DIR / "tiny_gpt.sha256"
#: The training record: config, hyperparameters, loss curve, held-out accuracy.
TINY_GPT_RECORD_PATH = WEIGHTS_DIR / "tiny_gpt.json"

_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def save_params(params: Params, path: Path | str, dtype: np.dtype | type = np.float32) -> Path:
    """Writes ``params`` (cast to ``dtype``) to ``path`` as a byte-reproducible ``.npz``: members
    in sorted name order, fixed timestamps, no compression. Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in sorted(params):
            buffer = io.BytesIO()
            np.lib.format.write_array(
                buffer, np.ascontiguousarray(params[name], dtype=dtype), allow_pickle=False
            )
            info = zipfile.ZipInfo(name + ".npy", date_time=_ZIP_TIME)
            info.external_attr = 0o644 << 16
            archive.writestr(info, buffer.getvalue())
    return path


def load_params(path: Path | str) -> Params:
    """The parameter dict stored in the ``.npz`` at ``path`` (dtypes as stored). Raises
    :class:`WeightsError` when the file is absent or not an ``.npz`` of plain arrays."""
    path = Path(path)
    if not path.is_file():
        raise WeightsError(f"no weights file at {path}")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise WeightsError(f"{path} is not an .npz of plain arrays: {exc}") from exc


def sha256_of(path: Path | str) -> str:
    """Hex SHA-256 of the file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_checksum(weights: Path | str, checksum: Path | str | None = None) -> Path:
    """Writes ``"<sha256>  <file name>"`` for ``weights`` to ``checksum`` (default: the same path
    with suffix ``.sha256``). Returns the checksum path."""
    weights = Path(weights)
    checksum = Path(checksum) if checksum is not None else weights.with_suffix(".sha256")
    checksum.write_text(f"{sha256_of(weights)}  {weights.name}\n", encoding="utf-8")
    return checksum


def verify_checksum(weights: Path | str, checksum: Path | str | None = None) -> str:
    """Returns the SHA-256 of ``weights`` after checking it against ``checksum`` (default: the
    ``.sha256`` beside it). Raises :class:`ChecksumMismatchError` naming both digests when they
    differ, :class:`WeightsError` when either file is missing."""
    weights = Path(weights)
    checksum = Path(checksum) if checksum is not None else weights.with_suffix(".sha256")
    for p in (weights, checksum):
        if not p.is_file():
            raise WeightsError(f"no file at {p}")
    expected = checksum.read_text(encoding="utf-8").split()[0].lower()
    actual = sha256_of(weights)
    if actual != expected:
        raise ChecksumMismatchError(
            f"{weights.name} has SHA-256 {actual}, but {checksum.name} records {expected}: "
            f"the file was changed or damaged (regenerate it with `python -m llmfs.gpt.train`)"
        )
    return actual


def load_tiny_gpt(
    path: Path | str | None = None, checksum: Path | str | None = None
) -> tuple[Params, GPTConfig]:
    """The shipped capstone weights (float32, as stored) and :data:`TINY_CONFIG`, after verifying
    the checksum (:class:`ChecksumMismatchError` on a mismatch) and every name and shape
    (:class:`WeightsError`). ``path``/``checksum`` default to the shipped files."""
    path = Path(path) if path is not None else TINY_GPT_PATH
    verify_checksum(path, checksum)
    params = load_params(path)
    check_params(params, TINY_CONFIG)
    return params, TINY_CONFIG


def load_gpt2(path: Path | str, n_head: int = GPT2_SMALL_CONFIG.n_head) -> tuple[Params, GPTConfig]:
    """GPT-2 weights the learner already has on disk, as ``(params, config)`` with this package's
    names. Never downloads anything.

    The file is an ``.npz`` of a Hugging Face GPT-2 state dict, written on the learner's machine,
    for example::

        from transformers import GPT2LMHeadModel      # with weights already in the local cache
        sd = GPT2LMHeadModel.from_pretrained("gpt2").state_dict()
        np.savez("gpt2.npz", **{k: v.numpy() for k, v in sd.items()})

    A ``transformer.`` prefix is removed; ``lm_head.weight`` (the tied head, equal to
    ``wte.weight``) and the causal-mask buffers ``attn.bias``/``attn.masked_bias`` are dropped.
    ``n_head`` cannot be read from the shapes (12 for GPT-2 small). Raises :class:`WeightsError`
    when the file is absent or does not hold a GPT-2.
    """
    raw = load_params(path)
    params: Params = {}
    for name, value in raw.items():
        name = name.removeprefix("transformer.")
        if name == "lm_head.weight" or name.endswith((".attn.bias", ".attn.masked_bias")):
            continue
        params[name] = value
    config = config_from_params(params, n_head=n_head)
    if "lm_head.weight" in raw and not np.array_equal(raw["lm_head.weight"], params["wte.weight"]):
        raise WeightsError("lm_head.weight differs from wte.weight: the model's head is not tied")
    check_params(params, config)
    return params, config


__all__ = [
    "TINY_GPT_PATH",
    "TINY_GPT_RECORD_PATH",
    "TINY_GPT_SHA256_PATH",
    "WEIGHTS_DIR",
    "load_gpt2",
    "load_params",
    "load_tiny_gpt",
    "save_params",
    "sha256_of",
    "verify_checksum",
    "write_checksum",
]
