"""A training checkpoint: everything a run needs to continue exactly where it stopped.

Weights alone are not enough to resume. A run's next step also reads AdamW's two moments per
parameter (``exp_avg``, ``exp_avg_sq``) and its step count (the bias correction divides by
``1 - beta ** t``), the step number (the learning-rate schedule), and the state of the random
stream the batches are drawn from (else the resumed run sees other windows). A
:class:`TrainState` holds all four; :func:`save_state` writes it to one ``.npz`` (arrays stored
exactly, in their dtype; the rest as JSON, no pickle) and :func:`load_state` rebuilds it, in
another process too. Training ``2N`` steps then equals training ``N``, saving, loading and
training ``N`` more, bit for bit (on one machine and BLAS kernel).

A checkpoint loaded with ``optimizer=False`` keeps the weights, the step and the stream but
starts AdamW from zero moments at ``t = 0``: its first update is then the bias-corrected ratio of
ONE gradient, about ``lr`` per value in the sign of that gradient, whatever the moments had
learned about each value's scale, a jolt that the loss shows.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llmfs.gpt.errors import ConfigError, GPTError
from llmfs.gpt.experiment import TrainConfig
from llmfs.gpt.model import GPTConfig, check_params, init_params
from llmfs.gpt.tensor_train import AdamW, to_numpy_params, trainable
from llmfs.tensor import Tensor

#: The checkpoint file's format number (in its JSON).
FORMAT = 1


class CheckpointError(GPTError):
    """A checkpoint file that is missing, not a checkpoint, of another format, or whose arrays
    do not match its own record."""


@dataclass
class TrainState:
    """A run in progress: the parameters ``w`` (tensors that require grad), their ``optimizer``,
    the number of finished ``step`` s, the batches' random stream ``rng``, and the model and
    training configurations it was started with."""

    w: dict[str, Tensor]
    optimizer: AdamW
    step: int
    rng: np.random.Generator
    config: GPTConfig
    cfg: TrainConfig


def start_state(config: GPTConfig, cfg: TrainConfig, dtype: object = np.float64) -> TrainState:
    """A run before its first step: :func:`~llmfs.gpt.model.init_params` of ``cfg.seed`` as
    ``dtype`` tensors on the backend in use, AdamW of ``cfg`` with zero moments, step 0, and
    ``np.random.default_rng(cfg.seed)`` for the batches."""
    w, optimizer = trainable(init_params(config, seed=cfg.seed), cfg, dtype)
    return TrainState(w, optimizer, 0, np.random.default_rng(cfg.seed), config, cfg)


def _meta(state: TrainState) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "step": state.step,
        "optimizer_steps": state.optimizer.steps,
        "rng": state.rng.bit_generator.state,
        "config": asdict(state.config),
        "train": asdict(state.cfg),
        "dtype": np.dtype(next(iter(state.w.values())).dtype.name).name,
    }


def save_state(path: Path | str, state: TrainState) -> Path:
    """Writes ``state`` to the ``.npz`` at ``path`` (replacing it only once the new file is
    complete): ``weights/NAME``, ``exp_avg/NAME``, ``exp_avg_sq/NAME`` arrays in the parameters'
    dtype and ``meta``, the JSON of the step, AdamW's step count, the stream's state and both
    configurations. Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    for name, tensor in state.w.items():
        arrays[f"weights/{name}"] = tensor.to_numpy()
        if name in state.optimizer.exp_avg:
            arrays[f"exp_avg/{name}"] = state.optimizer.exp_avg[name].to_numpy()
            arrays[f"exp_avg_sq/{name}"] = state.optimizer.exp_avg_sq[name].to_numpy()
    meta = json.dumps(_meta(state), sort_keys=True).encode("utf-8")
    arrays["meta"] = np.frombuffer(meta, dtype=np.uint8)
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as handle:
        np.savez(handle, **arrays)  # type: ignore[arg-type]
    os.replace(partial, path)
    return path


def _read(path: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    if not path.is_file():
        raise CheckpointError(f"no checkpoint file at {path}")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
        meta = json.loads(arrays.pop("meta").tobytes().decode("utf-8"))
    except KeyError:
        raise CheckpointError(f"{path} holds no 'meta' record: not a training checkpoint") from None
    except (OSError, ValueError, zipfile.BadZipFile, UnicodeDecodeError) as error:
        raise CheckpointError(f"{path} is not a training checkpoint: {error}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        got = meta.get("format") if isinstance(meta, dict) else meta
        raise CheckpointError(f"{path} has checkpoint format {got!r}; this reads format {FORMAT}")
    return arrays, meta


def load_state(path: Path | str, optimizer: bool = True) -> TrainState:
    """The :class:`TrainState` saved at ``path``, as tensors on the backend in use, in the dtype
    they were saved in. With ``optimizer=False`` AdamW starts afresh (zero moments, ``t = 0``)
    over the saved weights; the step and the stream are restored either way. Raises
    :class:`CheckpointError` for a file that is missing or not a checkpoint of this format,
    or whose weights or moments do not match its configuration."""
    path = Path(path)
    arrays, meta = _read(path)
    try:
        config = GPTConfig(**meta["config"])
        cfg = TrainConfig(**meta["train"])
        step, steps = int(meta["step"]), int(meta["optimizer_steps"])
        rng = np.random.Generator(np.random.PCG64())
        rng.bit_generator.state = meta["rng"]
    except (KeyError, TypeError, ValueError, ConfigError) as error:
        raise CheckpointError(f"{path} has an unreadable record: {error!r}") from None
    weights = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("weights/")}
    try:
        check_params(weights, config)
    except GPTError as error:
        raise CheckpointError(f"{path}: the weights do not fit its config: {error}") from None
    dtype = next(iter(weights.values())).dtype
    w, adamw = trainable(weights, cfg, dtype)
    if optimizer:
        for name, tensor in w.items():
            first, second = arrays.get(f"exp_avg/{name}"), arrays.get(f"exp_avg_sq/{name}")
            if first is None and second is None and steps == 0:
                continue
            if first is None or second is None or first.shape != tensor.shape:
                raise CheckpointError(
                    f"{path}: AdamW's moments of {name!r} are missing or not of shape "
                    f"{list(tensor.shape)}"
                )
            adamw.exp_avg[name] = Tensor.from_numpy(first, dtype=dtype)
            adamw.exp_avg_sq[name] = Tensor.from_numpy(second, dtype=dtype)
        adamw.steps = steps
    return TrainState(w, adamw, step, rng, config, cfg)


def state_params(state: TrainState) -> dict[str, np.ndarray]:
    """The state's parameters read back as float64 NumPy arrays."""
    return to_numpy_params(state.w)


__all__ = [
    "FORMAT",
    "CheckpointError",
    "TrainState",
    "load_state",
    "save_state",
    "start_state",
    "state_params",
]
