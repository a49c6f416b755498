"""GPT-2 from the folder Hugging Face writes: ``config.json``, ``model.safetensors``,
``vocab.json`` and ``merges.txt`` (what ``save_pretrained`` writes, what
``hf download gpt2 --local-dir DIR`` leaves, and what the hub cache's snapshot folder
holds). Nothing here downloads anything: the learner fetches the folder, this module only reads it.

* :func:`read_config` reads ``config.json`` into a :class:`~llmfs.gpt.model.GPTConfig`, refusing a
  model this package's forward pass does not compute (another ``model_type`` or architecture, an
  activation other than GELU's tanh form, attention scaled otherwise, an MLP width other than
  ``4 * n_embd``, an untied head).
* :func:`read_safetensors` reads a ``.safetensors`` file with the ``safetensors`` package's NumPy
  reader (the format's reference reader). float32 and float64 tensors keep their dtype;
  **float16 and bfloat16 tensors load as float32** (both convert exactly: every float16 and every
  bfloat16 value is a float32 value). NumPy has no bfloat16, and the NumPy reader refuses it, so
  bfloat16 tensors are read from the file's bytes at the offsets its header records (after the
  reader has checked the header): a bfloat16 is the upper 16 bits of a float32, so each value is
  its 16 bits shifted left by 16.
* :func:`load_folder` reads both and checks every tensor against the config: the names (with or
  without Hugging Face's ``transformer.`` prefix; the causal-mask buffers ``attn.bias`` and
  ``attn.masked_bias`` of older files are dropped), the shapes, and the tied head
  (``lm_head.weight``, when the file holds it, must equal ``wte.weight``).
* :func:`load_tokenizer` reads ``vocab.json``/``merges.txt`` into the byte-level BPE of
  :mod:`llmfs.gpt.tokenizer` (chapter 11's).
* :func:`write_folder` writes such a folder from a parameter dict (and a tokenizer), as
  ``save_pretrained`` lays it out: how the tests, the benchmark and chapter 14 make a small random
  GPT-2 folder without downloading one.

Every refusal is a :class:`~llmfs.gpt.errors.WeightsError` naming the file and the field or
tensor: a missing file, a file that is not what its name says, another architecture, a tensor
that disagrees with ``config.json``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save_file

from llmfs.gpt.errors import ConfigError, WeightsError
from llmfs.gpt.model import GPTConfig, Params, parameter_shapes
from llmfs.gpt.tokenizer import BPETokenizer

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
VOCAB_FILE = "vocab.json"
MERGES_FILE = "merges.txt"

#: The architectures whose weights are a GPT-2 language model's: the model with its (tied) head,
#: and the bare transformer.
ARCHITECTURES = ("GPT2LMHeadModel", "GPT2Model")
#: Hugging Face's names of GELU's tanh form, the activation this package computes.
TANH_GELU = ("gelu_new", "gelu_pytorch_tanh")
#: The prefix ``GPT2LMHeadModel`` puts before the transformer's parameter names.
PREFIX = "transformer."

#: The causal-mask buffers older files store beside the weights.
_BUFFERS = (".attn.bias", ".attn.masked_bias")

#: What a safetensors dtype loads as (float16 and bfloat16 widen to float32, exactly).
_LOADED_DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype(np.float64),
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float32),
    "BF16": np.dtype(np.float32),
}


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise WeightsError(f"{path.parent} has no {path.name}: {_what_is_missing(path)}")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WeightsError(f"{path} is not JSON: {exc}") from None
    except OSError as exc:
        raise WeightsError(f"{path} cannot be read: {exc}") from None
    if not isinstance(value, dict):
        raise WeightsError(f"{path} must hold a JSON object, got a {type(value).__name__}")
    return value


def _what_is_missing(path: Path) -> str:
    """Why the file ``path`` is needed, and what to do, for a missing-file error."""
    if path.name == WEIGHTS_FILE:
        others = sorted(p.name for p in path.parent.glob("*") if p.name != path.name)
        bins = [n for n in others if n.endswith((".bin", ".index.json", ".h5", ".msgpack"))]
        seen = (
            f" (it holds {', '.join(bins)}: only a single model.safetensors is read)"
            if bins
            else ""
        )
        return f"the weights are read from {WEIGHTS_FILE}{seen}"
    needs = {
        CONFIG_FILE: "it gives the model's sizes (n_head, n_embd, n_layer, n_positions, "
        "vocab_size)",
        VOCAB_FILE: "the tokenizer's vocabulary is read from it",
        MERGES_FILE: "the tokenizer's merges are read from it",
    }
    return needs.get(path.name, "it is needed")


def _positive_int(config: dict[str, Any], field: str, path: Path) -> int:
    value = config.get(field)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise WeightsError(f"{path}: {field} must be a positive integer, got {value!r}")
    return value


def read_config(folder: Path | str) -> GPTConfig:
    """The :class:`GPTConfig` of the GPT-2 whose ``config.json`` is in ``folder``.

    Read: ``n_head``, ``n_embd``, ``n_layer``, ``n_positions`` (the config's ``n_ctx``),
    ``vocab_size`` (each required, a positive int), ``layer_norm_epsilon`` (Hugging Face's
    default 1e-5 when absent) and ``activation_function`` (default ``gelu_new``). Checked, because
    this package computes only GPT-2's own forward pass: ``model_type`` is ``gpt2``; each of
    ``architectures`` (when given) is one of :data:`ARCHITECTURES`; the activation is GELU's tanh
    form (:data:`TANH_GELU`); ``scale_attn_weights`` is not false and
    ``scale_attn_by_inverse_layer_idx`` not true (scores are divided by ``sqrt(head size)``, and
    nothing else); ``n_inner`` is absent, null or ``4 * n_embd``; ``add_cross_attention`` is not
    true; ``tie_word_embeddings`` is not false; ``n_embd`` is a multiple of ``n_head``.

    Raises :class:`WeightsError` naming ``config.json`` and the field otherwise, or when the file
    is absent or not a JSON object.
    """
    path = Path(folder) / CONFIG_FILE
    config = _read_json(path)
    model_type = config.get("model_type")
    if model_type != "gpt2":
        raise WeightsError(
            f"{path}: model_type is {model_type!r}, not 'gpt2': this folder holds another "
            f"architecture, and only GPT-2's forward pass is computed here"
        )
    architectures = config.get("architectures")
    if architectures is not None:
        if not isinstance(architectures, list) or not all(
            isinstance(a, str) for a in architectures
        ):
            raise WeightsError(
                f"{path}: architectures must be a list of names, got {architectures!r}"
            )
        other = [a for a in architectures if a not in ARCHITECTURES]
        if other:
            raise WeightsError(
                f"{path}: architectures lists {other}, which are not a GPT-2 language model "
                f"(one of {list(ARCHITECTURES)})"
            )
    activation = config.get("activation_function", "gelu_new")
    if activation not in TANH_GELU:
        raise WeightsError(
            f"{path}: activation_function is {activation!r}; this model computes GELU's tanh "
            f"form ({' or '.join(repr(a) for a in TANH_GELU)}), so its logits would be wrong"
        )
    if config.get("scale_attn_weights", True) is not True:
        raise WeightsError(
            f"{path}: scale_attn_weights is {config['scale_attn_weights']!r}; this model always "
            f"divides the attention scores by sqrt(head size)"
        )
    if config.get("scale_attn_by_inverse_layer_idx", False) is not False:
        raise WeightsError(
            f"{path}: scale_attn_by_inverse_layer_idx is "
            f"{config['scale_attn_by_inverse_layer_idx']!r}; this model scales every layer's "
            f"scores alike"
        )
    if config.get("tie_word_embeddings", True) is not True:
        raise WeightsError(
            f"{path}: tie_word_embeddings is {config['tie_word_embeddings']!r}; this model's head "
            f"is the token embedding (logits are x @ wte.weight.T)"
        )
    if config.get("add_cross_attention", False) is not False:
        raise WeightsError(f"{path}: add_cross_attention is set; this is a decoder-only model")
    sizes = {
        field: _positive_int(config, field, path)
        for field in ("n_head", "n_embd", "n_layer", "n_positions", "vocab_size")
    }
    n_inner = config.get("n_inner")
    if n_inner is not None and n_inner != 4 * sizes["n_embd"]:
        raise WeightsError(
            f"{path}: n_inner is {n_inner!r}, but this model's MLP is 4 * n_embd = "
            f"{4 * sizes['n_embd']} wide"
        )
    eps = config.get("layer_norm_epsilon", 1e-5)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < math.inf:
        raise WeightsError(f"{path}: layer_norm_epsilon must be a positive number, got {eps!r}")
    try:
        return GPTConfig(
            vocab_size=sizes["vocab_size"],
            n_ctx=sizes["n_positions"],
            n_embd=sizes["n_embd"],
            n_head=sizes["n_head"],
            n_layer=sizes["n_layer"],
            layer_norm_eps=float(eps),
        )
    except ConfigError as exc:
        raise WeightsError(f"{path}: {exc}") from None


def _bfloat16_as_float32(path: Path, name: str) -> np.ndarray:
    """Tensor ``name`` of the safetensors file ``path``, stored as bfloat16, as float32: its
    bytes, at the offsets the file's header records, read as little-endian 16-bit words and
    shifted into the upper half of a float32 (exact). The header was checked by the reader."""
    with path.open("rb") as handle:
        length = int.from_bytes(handle.read(8), "little")
        entry = json.loads(handle.read(length))[name]
        begin, end = entry["data_offsets"]
        handle.seek(8 + length + begin)
        raw = np.frombuffer(handle.read(end - begin), dtype="<u2")
    words = (raw.astype(np.uint32) << 16).view(np.float32)
    return words.reshape(tuple(entry["shape"]))


def read_safetensors(path: Path | str, skip: Callable[[str], bool] | None = None) -> Params:
    """Every tensor of the ``.safetensors`` file at ``path`` but those whose name ``skip`` is true
    of (not read at all), as NumPy arrays (owned copies): float64 and float32 as stored, float16
    and bfloat16 as float32 (exactly; see the module docstring). Raises :class:`WeightsError`
    naming the file when it is absent or not a safetensors file, and the tensor when its dtype
    is not a float of those four."""
    path = Path(path)
    if not path.is_file():
        raise WeightsError(f"{path.parent} has no {path.name}: {_what_is_missing(path)}")
    params: Params = {}
    try:
        with safe_open(str(path), framework="np") as handle:
            for name in handle.keys():
                if skip is not None and skip(name):
                    continue
                stored = handle.get_slice(name).get_dtype()
                if stored not in _LOADED_DTYPES:
                    raise WeightsError(
                        f"{path}: tensor {name!r} is stored as {stored}; weights must be one "
                        f"of {', '.join(_LOADED_DTYPES)} (F16 and BF16 load as float32)"
                    )
                if stored == "BF16":
                    params[name] = _bfloat16_as_float32(path, name)
                else:
                    params[name] = np.array(handle.get_tensor(name), dtype=_LOADED_DTYPES[stored])
    except SafetensorError as exc:
        raise WeightsError(f"{path} is not a safetensors file: {exc}") from None
    except OSError as exc:
        raise WeightsError(f"{path} cannot be read: {exc}") from None
    return params


def _expected_by(name: str) -> str:
    """The config fields that give parameter ``name``'s shape, for an error message."""
    if name == "wte.weight":
        return "vocab_size and n_embd"
    if name == "wpe.weight":
        return "n_positions and n_embd"
    return "n_embd"


_LAYER = re.compile(r"h\.(\d+)\.")


def load_folder(folder: Path | str) -> tuple[Params, GPTConfig]:
    """GPT-2 from a Hugging Face folder, as ``(params, config)`` with this package's parameter
    names (:mod:`llmfs.gpt.model`); float32 unless the file stores float64. Reads
    ``config.json`` (:func:`read_config`) and ``model.safetensors`` (:func:`read_safetensors`).

    Each tensor name loses a ``transformer.`` prefix (``GPT2LMHeadModel``'s files have it, the
    hub's ``gpt2`` file does not); the causal-mask buffers ``attn.bias``/``attn.masked_bias`` are
    dropped. ``lm_head.weight``, when present, must equal ``wte.weight`` (the head is tied: logits
    are ``x @ wte.weight.T``), and is then dropped too.

    Raises :class:`WeightsError` naming the file and the field or tensor when a file is missing,
    when ``config.json`` describes another model (:func:`read_config`), when the same parameter
    appears with and without the prefix, when the file lacks a parameter the config needs or
    holds one it has no place for (a block beyond ``n_layer``, another model's tensor), when a
    shape disagrees with the config, or when the head is not tied.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise WeightsError(f"no folder at {folder}")
    config = read_config(folder)
    path = folder / WEIGHTS_FILE
    # The causal-mask buffers (bool in some files) are not weights: not read at all.
    raw = read_safetensors(path, skip=lambda name: name.endswith(_BUFFERS))
    params: Params = {}
    head: np.ndarray | None = None
    for stored, value in raw.items():
        name = stored.removeprefix(PREFIX)
        if name == "lm_head.weight":
            head = value
            continue
        if name in params:
            raise WeightsError(f"{path} holds {name!r} both with and without the {PREFIX!r} prefix")
        params[name] = value
    shapes = parameter_shapes(config)
    extra = sorted(n for n in params if n not in shapes)
    if extra:
        beyond = sorted({int(m.group(1)) for n in extra if (m := _LAYER.match(n)) is not None})
        why = (
            f"blocks {beyond} are beyond config.json's n_layer={config.n_layer}"
            if beyond
            else "they are not parameters of a GPT-2"
        )
        raise WeightsError(
            f"{path} holds {len(extra)} tensors this model has no place for, {extra[:4]}"
            f"{' ...' if len(extra) > 4 else ''}: {why}"
        )
    missing = [n for n in shapes if n not in params]
    if missing:
        raise WeightsError(
            f"{path} lacks {len(missing)} tensors that config.json (n_layer={config.n_layer}) "
            f"needs: {missing[:4]}{' ...' if len(missing) > 4 else ''}"
        )
    for name, shape in shapes.items():
        got = tuple(params[name].shape)
        if got != shape:
            raise WeightsError(
                f"{path}: {name} has shape {list(got)}, but config.json's {_expected_by(name)} "
                f"({_fields(config, name)}) make it {list(shape)}"
            )
    if head is not None and not np.array_equal(head, params["wte.weight"]):
        shown = list(head.shape)
        raise WeightsError(
            f"{path}: lm_head.weight (shape {shown}) differs from wte.weight: the head is not "
            f"tied to the token embedding, and this model computes logits as x @ wte.weight.T"
        )
    return params, config


def _fields(config: GPTConfig, name: str) -> str:
    values = {
        "vocab_size": config.vocab_size,
        "n_positions": config.n_ctx,
        "n_embd": config.n_embd,
    }
    return ", ".join(f"{f}={values[f]}" for f in _expected_by(name).split(" and "))


def load_tokenizer(folder: Path | str, config: GPTConfig | None = None) -> BPETokenizer:
    """The byte-level BPE of ``folder``'s ``vocab.json`` and ``merges.txt`` (chapter 11's
    tokenizer). With ``config``, its ids must all be ids of the model: a vocabulary larger than
    ``config.vocab_size`` is a :class:`WeightsError` (a model may have more rows than the
    tokenizer has ids, never fewer). Raises :class:`WeightsError` naming a missing file, and the
    tokenizer's :class:`~llmfs.gpt.tokenizer.TokenizerFileError` naming the file and line of a
    malformed one."""
    folder = Path(folder)
    vocab, merges = folder / VOCAB_FILE, folder / MERGES_FILE
    for path in (vocab, merges):
        if not path.is_file():
            raise WeightsError(f"{folder} has no {path.name}: {_what_is_missing(path)}")
    tokenizer = BPETokenizer.from_files(vocab, merges)
    if config is not None and tokenizer.vocab_size > config.vocab_size:
        raise WeightsError(
            f"{vocab} has {tokenizer.vocab_size} tokens, but config.json's vocab_size is "
            f"{config.vocab_size}: ids {config.vocab_size}..{tokenizer.vocab_size - 1} have no "
            f"embedding row"
        )
    return tokenizer


def write_folder(
    folder: Path | str,
    params: Params,
    config: GPTConfig,
    tokenizer: BPETokenizer | None = None,
    *,
    dtype: type[np.floating] | np.dtype = np.float32,
    prefix: str = PREFIX,
) -> Path:
    """Writes ``params`` (this package's names, cast to ``dtype``) as a Hugging Face GPT-2 folder:
    ``config.json`` (``GPT2LMHeadModel``, GELU's tanh form, no dropout) and ``model.safetensors``
    (names with ``prefix``, as ``save_pretrained`` writes them; the tied head is not stored),
    plus ``vocab.json``/``merges.txt`` when ``tokenizer`` is given. Creates ``folder`` if needed
    and returns it. :func:`load_folder` reads the same values back, and so does Hugging Face's
    ``GPT2LMHeadModel.from_pretrained``.

    Raises :class:`WeightsError` when ``params`` does not fit ``config`` (names or shapes), and
    when the tokenizer has more ids than ``config.vocab_size``."""
    shapes = parameter_shapes(config)
    if set(params) != set(shapes):
        raise WeightsError(
            f"params do not fit the config: missing {sorted(set(shapes) - set(params))[:4]}, "
            f"unexpected {sorted(set(params) - set(shapes))[:4]}"
        )
    for name, shape in shapes.items():
        if tuple(np.shape(params[name])) != shape:
            raise WeightsError(
                f"{name} has shape {list(np.shape(params[name]))}, the config needs {list(shape)}"
            )
    if tokenizer is not None and tokenizer.vocab_size > config.vocab_size:
        raise WeightsError(
            f"the tokenizer has {tokenizer.vocab_size} ids, more than vocab_size="
            f"{config.vocab_size}"
        )
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    hf_config: dict[str, Any] = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "activation_function": "gelu_new",
        "n_head": config.n_head,
        "n_embd": config.n_embd,
        "n_layer": config.n_layer,
        "n_positions": config.n_ctx,
        "n_ctx": config.n_ctx,
        "n_inner": None,
        "vocab_size": config.vocab_size,
        "layer_norm_epsilon": config.layer_norm_eps,
        "attn_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "resid_pdrop": 0.0,
        "tie_word_embeddings": True,
    }
    if tokenizer is not None and tokenizer.end_of_text_id is not None:
        hf_config["bos_token_id"] = hf_config["eos_token_id"] = tokenizer.end_of_text_id
    (folder / CONFIG_FILE).write_text(json.dumps(hf_config, indent=2) + "\n", encoding="utf-8")
    tensors = {prefix + name: np.ascontiguousarray(params[name], dtype=dtype) for name in shapes}
    save_file(tensors, str(folder / WEIGHTS_FILE), metadata={"format": "pt"})
    if tokenizer is not None:
        tokenizer.save(folder)
    return folder


__all__ = [
    "ARCHITECTURES",
    "CONFIG_FILE",
    "MERGES_FILE",
    "PREFIX",
    "TANH_GELU",
    "VOCAB_FILE",
    "WEIGHTS_FILE",
    "load_folder",
    "load_tokenizer",
    "read_config",
    "read_safetensors",
    "write_folder",
]
