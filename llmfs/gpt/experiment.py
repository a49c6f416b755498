"""What both training engines share: the hyperparameters, the batches, the learning-rate
schedule, which parameters decay, the log of a run, and the BLAS environment a record names.

The ``numpy`` engine (:mod:`llmfs.gpt.train`, backpropagation by hand) and the ``tensor`` engine
(:mod:`llmfs.gpt.tensor_train`, :mod:`llmfs.tensor` autograd) both train from these, so a run of
one is the same experiment as a run of the other: same seed, same batches in the same order,
same schedule, same points logged.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from llmfs.gpt import task
from llmfs.gpt.errors import ConfigError
from llmfs.gpt.model import Params


@dataclass(frozen=True)
class TrainConfig:
    """Hyperparameters of a training run (the shipped weights use the defaults).

    Invariants (checked on construction, :class:`ConfigError` otherwise): ``steps``,
    ``batch_size``, ``log_every`` and ``eval_every`` are positive ints, ``warmup_steps`` is at
    least 0, the betas lie in ``[0, 1)``, and the learning rate, ``adam_eps``, ``weight_decay``
    and ``min_lr_ratio`` are at least 0."""

    seed: int = 0
    steps: int = 1200
    batch_size: int = 128
    learning_rate: float = 3e-3
    warmup_steps: int = 100
    min_lr_ratio: float = 0.05
    beta1: float = 0.9
    beta2: float = 0.98
    adam_eps: float = 1e-8
    weight_decay: float = 0.01
    #: Steps averaged into one point of the recorded loss curve.
    log_every: int = 25
    #: Steps between held-out accuracy measurements during training.
    eval_every: int = 100

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "log_every", "eval_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            raise ConfigError(f"warmup_steps must be an int >= 0, got {self.warmup_steps!r}")
        for name in ("beta1", "beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"{name} must lie in [0, 1), got {getattr(self, name)}")
        for name in ("learning_rate", "adam_eps", "weight_decay", "min_lr_ratio"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"{name} must be at least 0, got {getattr(self, name)}")


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up over ``warmup_steps``, then cosine decay to ``min_lr_ratio * lr``."""
    if step < cfg.warmup_steps:
        return cfg.learning_rate * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return cfg.learning_rate * (cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * cosine)


def decays(name: str) -> bool:
    """Whether AdamW's weight decay applies: the blocks' matrices only."""
    return name.startswith("h.") and name.endswith(".weight") and ".ln_" not in name


def answer_weights(batch: int) -> np.ndarray:
    """``[batch, 8]``: 1 at the three positions whose next token is an answer digit."""
    w = np.zeros((batch, task.SEQUENCE_LENGTH - 1))
    w[:, task.PROMPT_LENGTH - 1 :] = 1.0
    return w


def training_data(
    train_problems: np.ndarray | None = None, held_out: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The training sequences (``[n, 9]`` tokens) and the held-out problems (``[m, 2]``);
    each defaults to its half of the shipped split (:func:`llmfs.gpt.task.split`)."""
    if train_problems is None or held_out is None:
        parts = task.split()
        train_problems = parts.train if train_problems is None else train_problems
        held_out = parts.held_out if held_out is None else held_out
    return task.sequences(train_problems), np.asarray(held_out)


def batches(data: np.ndarray, cfg: TrainConfig) -> Iterator[np.ndarray]:
    """The ``cfg.steps`` batches of a run, in order: ``cfg.batch_size`` rows of ``data`` drawn with
    replacement by a NumPy ``Generator`` seeded with ``cfg.seed`` (the same seed, the same
    batches, whichever engine trains on them)."""
    rng = np.random.default_rng(cfg.seed)
    for _ in range(cfg.steps):
        yield data[rng.integers(0, len(data), size=cfg.batch_size)]


@dataclass
class TrainResult:
    """What a training run returns: the float64 parameters and the record of the run."""

    params: Params
    losses: list[float] = field(default_factory=list)
    curve: list[tuple[int, float]] = field(default_factory=list)
    accuracy_curve: list[tuple[int, float]] = field(default_factory=list)


class RunLog:
    """The log of a run: every step's loss, the mean of every ``log_every`` steps (the loss
    curve, and the last step's window however short), and the held-out accuracy every
    ``eval_every`` steps and at the last step. ``log``, when given, gets one line per logged
    point."""

    def __init__(self, cfg: TrainConfig, log: Callable[[str], Any] | None = None) -> None:
        self.cfg = cfg
        self.log = log
        self.losses: list[float] = []
        self.curve: list[tuple[int, float]] = []
        self.accuracy_curve: list[tuple[int, float]] = []
        self._window: list[float] = []

    def step(self, step: int, loss: float, lr: float, accuracy: Callable[[], float]) -> None:
        """Records step ``step``'s (0-based) ``loss``; ``accuracy()`` is called only at the
        steps where the held-out accuracy is measured."""
        cfg = self.cfg
        self.losses.append(loss)
        self._window.append(loss)
        done = step + 1
        if done % cfg.log_every != 0 and done != cfg.steps:
            return
        mean = float(np.mean(self._window))
        self._window = []
        self.curve.append((done, mean))
        line = f"step {done:5d}  lr {lr:.2e}  loss {mean:.5f}"
        if done % cfg.eval_every == 0 or done == cfg.steps:
            acc = accuracy()
            self.accuracy_curve.append((done, acc))
            line += f"  held-out accuracy {acc:.4f}"
        if self.log is not None:
            self.log(line)

    def result(self, params: Params) -> TrainResult:
        """The run's :class:`TrainResult` with the final ``params``."""
        return TrainResult(params, self.losses, self.curve, self.accuracy_curve)


def time_left_text(seconds: float) -> str:
    """``about 40 s left`` / ``about 2 min left``: a rounded estimate, never a false precision
    (under 10 s: ``a few seconds left``)."""
    if seconds < 10:
        return "a few seconds left"
    if seconds < 120:
        return f"about {round(seconds / 5.0) * 5} s left"
    return f"about {round(seconds / 60.0)} min left"


class ProgressBar:
    """A one-line progress bar with the running loss, redrawn in place (``\\r``) on a terminal::

        step  340/1200 [########................]  loss 1.21034  12.3 s

    Only when ``stream`` (default ``sys.stdout``) is a terminal; otherwise every method does
    nothing, so logs written to a file or a pipe stay one line per logged point. The running
    loss is an exponential moving average (factor 0.9) of the steps' losses."""

    WIDTH = 28

    def __init__(self, total: int, stream: TextIO | None = None, clock: Any = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(isatty is not None and isatty())
        self.total = total
        self.done = 0
        self.running: float | None = None
        self._clock = clock or time.perf_counter
        self._start = self._clock()

    def line(self) -> str:
        """The bar as it is drawn now (without the ``\\r``)."""
        filled = self.WIDTH * self.done // max(1, self.total)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        loss = "" if self.running is None else f"  loss {self.running:.5f}"
        seconds = self._clock() - self._start
        return f"step {self.done:4d}/{self.total} [{bar}]{loss}  {seconds:.1f} s"

    def update(self, loss: float) -> None:
        """One more step done, with its ``loss``."""
        self.done += 1
        self.running = loss if self.running is None else 0.9 * self.running + 0.1 * loss
        if self.enabled:
            self.stream.write("\r" + self.line())
            self.stream.flush()

    def write(self, text: str) -> None:
        """Prints ``text`` on its own line above the bar (the bar is redrawn after it)."""
        if self.enabled:
            self.stream.write("\r\x1b[2K" + text + "\n" + self.line())
            self.stream.flush()
        else:
            self.stream.write(text + "\n")

    def close(self) -> None:
        """Ends the bar's line (on a terminal)."""
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def blas_environment() -> dict[str, Any]:
    """What decides the matrix products' summation order on this machine: NumPy's version, its
    BLAS library and the BLAS variables set in the environment (for the record; nothing here is
    a time or a machine name)."""
    info: dict[str, Any] = {"numpy": np.__version__}
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        info["blas"] = f"{blas.get('name')} {blas.get('version')}"
    except Exception:  # the layout of show_config is NumPy's; a change must not stop training
        info["blas"] = "unknown"
    core = openblas_core()
    if core is not None:
        info["blas_core"] = core
    for key in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE", "MKL_NUM_THREADS"):
        if key in os.environ:
            info[key] = os.environ[key]
    return info


def openblas_core() -> str | None:
    """The name of the OpenBLAS kernel NumPy's products run on here (``Haswell``, ``SkylakeX``,
    ...; ``OPENBLAS_CORETYPE`` overrides the choice), read from the loaded library; ``None``
    where it cannot be read (another BLAS, or no ``/proc/self/maps``, as on macOS)."""
    try:
        maps = Path("/proc/self/maps").read_text().split()
        library = next(m for m in maps if "openblas" in m and m.endswith(".so"))
        lib = ctypes.CDLL(library)
    except (OSError, StopIteration):
        return None
    for symbol in ("scipy_openblas_get_corename64_", "openblas_get_corename64_"):
        if hasattr(lib, symbol):
            function = getattr(lib, symbol)
            function.restype = ctypes.c_char_p
            name = function()
            return name.decode() if isinstance(name, bytes) else None
    return None


def _openblas() -> ctypes.CDLL | None:
    # The OpenBLAS library NumPy loaded (Linux: read from /proc/self/maps), or None.
    try:
        maps = Path("/proc/self/maps").read_text().split()
        return ctypes.CDLL(next(m for m in maps if "openblas" in m and m.endswith(".so")))
    except (OSError, StopIteration):
        return None


@contextlib.contextmanager
def blas_threads(count: int) -> Iterator[None]:
    """Runs the block with NumPy's OpenBLAS limited to ``count`` threads, then restores the
    count it had. For the small models' matrix products a second thread costs more than it
    saves (and spins while it waits, which a busy machine pays for in seconds). The count can
    change a product's last bits (OpenBLAS picks its kernels and splits its work by the thread
    count; chapter 13's losses differed in their last digits between one and two threads), so a
    run whose numbers must repeat whatever the core count runs on one thread. (The BLAS kernel,
    which OpenBLAS chooses by CPU, changes them too; no thread count undoes that.) Does nothing
    where NumPy's BLAS is not an OpenBLAS this can reach (another BLAS, or no
    ``/proc/self/maps``, as on macOS). Raises ``ValueError`` for a count below 1."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"blas_threads needs a count of at least 1, got {count!r}")
    lib = _openblas()
    names = (
        ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
        ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
        ("openblas_get_num_threads", "openblas_set_num_threads"),
    )
    found = next(
        (
            (getattr(lib, g), getattr(lib, s))
            for g, s in names
            if hasattr(lib, g) and hasattr(lib, s)
        ),
        None,
    )
    if found is None:
        yield
        return
    get, put = found
    before = int(get())
    put(count)
    try:
        yield
    finally:
        put(before)


__all__ = [
    "ProgressBar",
    "RunLog",
    "TrainConfig",
    "TrainResult",
    "answer_weights",
    "batches",
    "blas_environment",
    "blas_threads",
    "decays",
    "learning_rate",
    "openblas_core",
    "time_left_text",
    "training_data",
]
