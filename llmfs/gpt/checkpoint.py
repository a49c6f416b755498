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
import json
import warnings
import zipfile
from pathlib import Path

import numpy as np

from llmfs.gpt.errors import ChecksumMismatchError, WeightsError
from llmfs.gpt.model import (
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


#: The published GPT-2 sizes: ``(n_embd, n_layer) -> n_head`` (small, medium, large, XL, and
#: Hugging Face's distilgpt2).
GPT2_HEADS: dict[tuple[int, int], int] = {
    (768, 12): 12,
    (1024, 24): 16,
    (1280, 36): 20,
    (1600, 48): 25,
    (768, 6): 12,
}

#: The name of the optional ``.npz`` member holding the number of heads (a 0-d int array).
N_HEAD_MEMBER = "n_head"


class HeadCountUnverifiedWarning(UserWarning):
    """:func:`load_gpt2` took ``n_head`` as given: nothing in the file or its folder confirms it."""


def _recorded_n_head(path: Path, raw: Params) -> tuple[int, str] | None:
    """The number of heads the file itself records (an ``n_head`` member), else a Hugging Face
    ``config.json`` in its folder (its ``n_head``), with where it was read; None when neither."""
    if N_HEAD_MEMBER in raw:
        value = raw[N_HEAD_MEMBER]
        if value.shape != () or not np.issubdtype(value.dtype, np.integer):
            raise WeightsError(
                f"{path}: member {N_HEAD_MEMBER!r} must be one int (the number of heads), got "
                f"shape {list(value.shape)} of {value.dtype}"
            )
        return int(value), f"the file's {N_HEAD_MEMBER!r} member"
    config_path = path.with_name("config.json")
    if config_path.is_file():
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise WeightsError(f"{config_path} is not a JSON config: {exc}") from None
        count = config.get("n_head") if isinstance(config, dict) else None
        if isinstance(count, bool) or not isinstance(count, int):
            raise WeightsError(f"{config_path} has no integer n_head (got {count!r})")
        return count, str(config_path)
    return None


def load_gpt2(path: Path | str, n_head: int | None = None) -> tuple[Params, GPTConfig]:
    """GPT-2 weights the learner already has on disk, as ``(params, config)`` with this package's
    names. Never downloads anything.

    **A folder** is read as Hugging Face writes it (``config.json`` and ``model.safetensors``;
    :func:`llmfs.gpt.hf_folder.load_folder`, where its checks and errors are listed): what
    ``hf download gpt2 --local-dir DIR`` or ``save_pretrained(DIR)`` leaves. float16
    and bfloat16 weights load as float32. ``n_head``, when given, must equal the config's.

    **A file** is an ``.npz`` of a Hugging Face GPT-2 state dict, written on the learner's machine,
    for example::

        from transformers import GPT2LMHeadModel      # with weights already in the local cache
        model = GPT2LMHeadModel.from_pretrained("gpt2")
        sd = model.state_dict()
        np.savez("gpt2.npz", n_head=model.config.n_head, **{k: v.numpy() for k, v in sd.items()})

    A ``transformer.`` prefix is removed; ``lm_head.weight`` (the tied head, equal to
    ``wte.weight``) and the causal-mask buffers ``attn.bias``/``attn.masked_bias`` are dropped.

    **The number of heads.** The shapes give every size but ``n_head``: the packed ``c_attn``
    weight is ``[C, 3C]`` whatever the split into heads, and a wrong split runs without error
    and gives wrong logits. So ``n_head`` is checked against what the file says, in this order:

    1. an ``n_head`` member of the ``.npz`` (the recipe above writes it), else the ``n_head`` of
       a Hugging Face ``config.json`` in the same folder: the answer when ``n_head`` is not
       given, and a :class:`WeightsError` when a given ``n_head`` differs;
    2. else the published GPT-2 sizes (:data:`GPT2_HEADS`, by ``n_embd`` and ``n_layer``): the
       answer when ``n_head`` is not given, and a :class:`WeightsError` when a given one differs
       (a model of GPT-2's shape with other heads records its ``n_head`` in the file);
    3. else a given ``n_head`` is used as it is, with a :class:`HeadCountUnverifiedWarning`
       saying that nothing could check it (only that it divides ``n_embd``), and a missing one
       is a :class:`WeightsError`.

    What is never checked: that the weights were TRAINED with this split (no shape or statistic
    of the weights reveals it), the LayerNorm epsilon (1e-5, GPT-2's) and the activation (GELU,
    tanh form). Raises :class:`WeightsError` when the file is absent or does not hold a GPT-2,
    :class:`~llmfs.gpt.errors.ConfigError` when ``n_head`` does not divide ``n_embd``.
    """
    # Imported here: the folder reader brings in safetensors and the tokenizer, which the
    # package's other users (the capstone's .npz, the course engine) never need.
    from llmfs.gpt import hf_folder

    path = Path(path)
    if path.is_dir():
        loaded, folder_config = hf_folder.load_folder(path)
        if n_head is not None and n_head != folder_config.n_head:
            raise WeightsError(
                f"n_head={n_head} was given, but {path / hf_folder.CONFIG_FILE} records "
                f"n_head={folder_config.n_head}: a wrong split into heads gives wrong logits "
                f"without any error"
            )
        return loaded, folder_config
    if path.suffix == ".safetensors":
        raise WeightsError(
            f"{path} is a safetensors file: pass the folder that holds it with its "
            f"{hf_folder.CONFIG_FILE} ({path.parent}), which gives the model's sizes"
        )
    raw = load_params(path)
    recorded = _recorded_n_head(path, raw)
    params: Params = {}
    for name, value in raw.items():
        name = name.removeprefix("transformer.")
        if name == N_HEAD_MEMBER or name == "lm_head.weight":
            continue
        if name.endswith((".attn.bias", ".attn.masked_bias")):
            continue
        params[name] = value
    # The sizes the shapes do give (one head stands in until the count is settled).
    shapes = config_from_params(params, n_head=1)
    published = GPT2_HEADS.get((shapes.n_embd, shapes.n_layer))
    if recorded is not None:
        heads, source = recorded
        if n_head is not None and n_head != heads:
            raise WeightsError(
                f"n_head={n_head} was given, but {source} records n_head={heads}: a wrong split "
                f"into heads gives wrong logits without any error"
            )
    elif published is not None:
        heads = published
        if n_head is not None and n_head != heads:
            raise WeightsError(
                f"n_head={n_head} was given, but weights of GPT-2's shape (n_embd={shapes.n_embd}, "
                f"n_layer={shapes.n_layer}) have n_head={heads}; a model of this shape with other "
                f"heads records its count in the file (np.savez(..., {N_HEAD_MEMBER}=...))"
            )
    elif n_head is not None:
        heads = n_head
        warnings.warn(
            f"n_head={n_head} is taken as given: the weights' shapes do not determine it "
            f"(n_embd={shapes.n_embd}, n_layer={shapes.n_layer} is no published GPT-2), and "
            f"{path.name} has no {N_HEAD_MEMBER!r} member and no config.json beside it; a wrong "
            f"count gives wrong logits without any error",
            HeadCountUnverifiedWarning,
            stacklevel=2,
        )
    else:
        raise WeightsError(
            f"the number of heads of {path} cannot be read from its shapes (n_embd="
            f"{shapes.n_embd}, n_layer={shapes.n_layer} is no published GPT-2) and the file "
            f"records none: pass n_head=..., or store it (np.savez(..., {N_HEAD_MEMBER}=...))"
        )
    config = config_from_params(params, n_head=heads)
    if "lm_head.weight" in raw and not np.array_equal(raw["lm_head.weight"], params["wte.weight"]):
        raise WeightsError("lm_head.weight differs from wte.weight: the model's head is not tied")
    check_params(params, config)
    return params, config


__all__ = [
    "GPT2_HEADS",
    "N_HEAD_MEMBER",
    "TINY_GPT_PATH",
    "TINY_GPT_RECORD_PATH",
    "TINY_GPT_SHA256_PATH",
    "WEIGHTS_DIR",
    "HeadCountUnverifiedWarning",
    "load_gpt2",
    "load_params",
    "load_tiny_gpt",
    "save_params",
    "sha256_of",
    "verify_checksum",
    "write_checksum",
]
