"""Fine-tuning the shipped adder on a task it was not trained on: LoRA against full fine-tuning,
and the loss on the response only (instruction masking).

**The new task** (:func:`msd_sequences`): the same prompts and vocabulary, the sum written most
significant digit first, ``"37+45=082"``, where the shipped model writes ``"280"``. Writing the
most significant digit first needs the carry BEFORE it is written, which the trained order never
asked for, so the adder must change what it computes, not only relabel its outputs. The shipped
weights already answer the problems whose zero-padded sum reads the same both ways (``"000"``,
``"121"``): about a tenth of the held-out set.

**The runs** (:func:`fine_tune`): from the shipped weights, ``method="full"`` trains every
parameter; ``method="lora"`` freezes them all and trains rank-``r`` adapters
(:mod:`llmfs.gpt.lora`) on the chosen linear layers, through the same forward pass
(:func:`llmfs.gpt.tensor_model.forward`), the same loss and the same AdamW
(:mod:`llmfs.gpt.tensor_train`), the same batches for the same seed. The result records the
numbers trained, the loss of every step, the held-out exact-match accuracy before and after, and
the wall time (the one value that differs between runs).

**Instruction masking**: the loss is chapter 10's weighted cross-entropy with weight 1 on the
positions whose next token is an answer digit and 0 on the prompt's
(:func:`~llmfs.gpt.experiment.answer_weights`): the model is taught to answer, not to predict
the operands of the question, which are random. ``mask_prompt=False`` weighs every position
equally (the prompt's five next-token targets and the answer's three): most of the gradient then
goes to predicting random digits, which no model can learn, and the answer is learned more
slowly. Measured (LoRA of rank 4 on every block linear, 300 steps, the defaults): held-out exact
match 0.105 -> 0.84 with the mask, 0.105 -> 0.135 without it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from llmfs.gpt import lora, task
from llmfs.gpt import tensor_model as tm
from llmfs.gpt.checkpoint import load_tiny_gpt
from llmfs.gpt.errors import ConfigError
from llmfs.gpt.experiment import answer_weights, blas_threads
from llmfs.gpt.model import GPTConfig, Params
from llmfs.gpt.tensor_train import AdamW, cross_entropy
from llmfs.tensor import Tensor, use_backend

#: The fine-tuning methods :func:`fine_tune` runs.
METHODS = ("full", "lora")
#: Each method's default learning rate. Measured on the new task from the shipped weights (batch
#: 64, float32, one thread of a shared machine): 300 steps of full fine-tuning (101,376 numbers)
#: reach 0.91 held-out exact match in 95 s, LoRA of rank 4 on every block linear (8,192 numbers)
#: 0.84 in 75 s, from 0.105; at 150 steps both are near 0.33, and rank 1 has not yet moved.
LEARNING_RATES = {"full": 1e-3, "lora": 1e-2}


def msd_answer(a: int, b: int) -> str:
    """The new task's answer to ``a + b``: the sum zero-padded to three digits, most significant
    digit first (``msd_answer(37, 45) == "082"``). Raises :class:`~llmfs.gpt.errors.TaskError`
    for an operand outside ``0..99`` (through :func:`llmfs.gpt.task.prompt`)."""
    task.prompt(a, b)
    return f"{int(a) + int(b):03d}"


def msd_sequences(problems: np.ndarray | Iterable[Iterable[int]]) -> np.ndarray:
    """``[n, 9]`` token ids: each problem's prompt, then its :func:`msd_answer`."""
    rows = [task.encode(task.prompt(a, b) + msd_answer(a, b)) for a, b in problems]
    return np.array(rows, dtype=np.int64).reshape(-1, task.SEQUENCE_LENGTH)


def loss_weights(batch_size: int, mask_prompt: bool = True) -> np.ndarray:
    """``[batch_size, 8]`` weights of the next-token losses: the answer's positions only
    (instruction masking, :func:`~llmfs.gpt.experiment.answer_weights`), or every position when
    ``mask_prompt`` is false."""
    if mask_prompt:
        return answer_weights(batch_size)
    return np.ones((batch_size, task.SEQUENCE_LENGTH - 1))


def exact_match(w: tm.TensorParams, config: GPTConfig, sequences: np.ndarray) -> float:
    """The fraction of ``sequences`` (``[n, 9]``) whose three answer tokens the model writes
    exactly, greedily, after their prompt."""
    prompts = sequences[:, : task.PROMPT_LENGTH]
    got = tm.generate(w, config, prompts, task.ANSWER_LENGTH)
    return float((got[:, task.PROMPT_LENGTH :] == sequences[:, task.PROMPT_LENGTH :]).all(1).mean())


@dataclass
class FineTuneResult:
    """One fine-tuning run: the method, how many numbers it trained, every step's loss, the
    held-out accuracy before and after, the wall time, and the weights after (a plain dict of
    tensors: a LoRA run's merged, so both methods' results run as the base model does)."""

    method: str
    trainable: int
    accuracy_before: float
    accuracy_after: float
    seconds: float
    weights: dict[str, Tensor]
    losses: list[float] = field(default_factory=list)


class FineTuneRun:
    """One fine-tuning run that can be trained a few steps at a time (a notebook spreads a run
    over several cells, each short): ``FineTuneRun(params, config, train, held_out, ...)`` takes
    :func:`fine_tune`'s arguments except ``steps`` and ``on_step``, prepares the model and the
    optimiser and measures the held-out accuracy before; :meth:`train_until` trains up to a step
    number; :meth:`result` measures the accuracy after and returns the
    :class:`FineTuneResult`. Training 300 steps in parts of 100 gives the same weights, losses
    and accuracy as 300 in one call (the same batches, drawn from one generator), bit for bit.
    It trains and measures on one BLAS thread (:func:`~llmfs.gpt.experiment.blas_threads`): for
    the adder's small products a second thread only waits, spinning, and one thread gives the
    same numbers whatever the machine's core count. Not across BLAS kernels: OpenBLAS sums a
    product in an order chosen for the CPU, and the chapter's runs, which learn the task suddenly
    between steps 130 and 250, grow that last-bit difference into another loss and accuracy
    (LoRA's held-out accuracy 0.868 on OpenBLAS's Haswell kernel, 0.786 on its SkylakeX kernel).

    Raises :class:`~llmfs.gpt.errors.ConfigError` as :func:`fine_tune` does.
    """

    def __init__(
        self,
        params: Params,
        config: GPTConfig,
        train: np.ndarray,
        held_out: np.ndarray,
        *,
        method: str = "lora",
        rank: int = 4,
        alpha: float | None = None,
        layers: Iterable[str] = lora.BLOCK_LINEARS,
        batch_size: int = 64,
        learning_rate: float | None = None,
        seed: int = 0,
        mask_prompt: bool = True,
        dtype: object = np.float32,
        backend: str = "numpy",
    ) -> None:
        if method not in METHODS:
            raise ConfigError(f"method must be one of {METHODS}, got {method!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive int, got {batch_size!r}")
        if learning_rate is None:
            learning_rate = LEARNING_RATES[method]
        if not learning_rate > 0:
            raise ConfigError(f"learning_rate must be positive, got {learning_rate!r}")
        self.method, self.config, self.backend = method, config, backend
        self.train_rows, self.held_out, self.batch_size = train, held_out, batch_size
        self.rng = np.random.default_rng(seed)
        self.weights = loss_weights(batch_size, mask_prompt)
        #: Steps trained so far.
        self.step = 0
        self.losses: list[float] = []
        #: Seconds spent in training steps (not in measuring accuracy).
        self.seconds = 0.0
        with use_backend(backend), blas_threads(1):
            w = tm.tensor_params(params, dtype)
            trained: dict[str, Tensor]
            if method == "full":
                for tensor in w.values():
                    tensor.requires_grad_()
                self.model: tm.TensorParams = w
                trained = dict(w)
            else:
                names = lora.layer_names(config.n_layer, layers)
                adapted = lora.adapt(w, names, rank, 2.0 * rank if alpha is None else alpha)
                self.model, trained = adapted, adapted.trainable()
            #: How many numbers the run trains.
            self.trainable = sum(int(np.prod(t.shape)) for t in trained.values())
            self.accuracy_before = exact_match(self.model, config, held_out)
            self.optimizer = AdamW(trained, lr=learning_rate, weight_decay=0.0)

    def train_until(
        self, until: int, on_step: Callable[[int, float], object] | None = None
    ) -> None:
        """Trains while :attr:`step` is below ``until`` (nothing when it is not);
        ``on_step(step, loss)`` after each step. Raises
        :class:`~llmfs.gpt.errors.ConfigError` for an ``until`` that is not a non-negative int."""
        if isinstance(until, bool) or not isinstance(until, int) or until < 0:
            raise ConfigError(f"until must be a non-negative int, got {until!r}")
        with use_backend(self.backend), blas_threads(1):
            while self.step < until:
                start = time.perf_counter()
                rows = self.train_rows[self.rng.integers(0, len(self.train_rows), self.batch_size)]
                logits = tm.forward(self.model, self.config, rows[:, :-1])
                loss = cross_entropy(logits, rows[:, 1:], self.weights)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
                self.seconds += time.perf_counter() - start
                self.losses.append(float(loss.item()))
                self.step += 1
                if on_step is not None:
                    on_step(self.step - 1, self.losses[-1])

    def result(self) -> FineTuneResult:
        """The run so far: the held-out accuracy measured now, the weights (a LoRA run's merged
        into new owners, so both methods' results run as the base model does)."""
        with use_backend(self.backend), blas_threads(1):
            after = exact_match(self.model, self.config, self.held_out)
            model = self.model
            final = model.merged() if isinstance(model, lora.LoRAParams) else dict(model)
        return FineTuneResult(
            self.method,
            self.trainable,
            self.accuracy_before,
            after,
            self.seconds,
            final,
            list(self.losses),
        )


def fine_tune(
    params: Params,
    config: GPTConfig,
    train: np.ndarray,
    held_out: np.ndarray,
    *,
    method: str = "lora",
    rank: int = 4,
    alpha: float | None = None,
    layers: Iterable[str] = lora.BLOCK_LINEARS,
    steps: int = 300,
    batch_size: int = 64,
    learning_rate: float | None = None,
    seed: int = 0,
    mask_prompt: bool = True,
    dtype: object = np.float32,
    backend: str = "numpy",
    on_step: Callable[[int, float], object] | None = None,
) -> FineTuneResult:
    """Fine-tunes a copy of ``params`` on the sequences ``train`` (``[n, 9]``) and measures the
    exact-match accuracy on ``held_out`` (``[m, 9]``) before and after.

    ``method="full"`` trains every parameter; ``"lora"`` trains rank-``rank`` adapters (scale
    ``alpha / rank``, ``alpha`` defaulting to ``2 * rank``) on the block linears ``layers`` of
    every block and nothing else. Both run ``steps`` AdamW steps (no weight decay, a constant
    ``learning_rate``: by default :data:`LEARNING_RATES` of the method, LoRA's larger, as its
    update starts at zero and moves only through the small ``A`` and ``B``) on batches of
    ``batch_size`` rows drawn with replacement from a generator seeded with ``seed``: the same
    batches for both methods. ``on_step(step, loss)`` is called
    after each step (a progress display). ``params`` itself is never changed.
    (:class:`FineTuneRun` is the same run, trained in parts.)

    Raises :class:`~llmfs.gpt.errors.ConfigError` for an unknown method, a bad rank or alpha, an
    unknown layer, or a step count, batch size or learning rate out of range.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ConfigError(f"steps must be a positive int, got {steps!r}")
    run = FineTuneRun(
        params,
        config,
        train,
        held_out,
        method=method,
        rank=rank,
        alpha=alpha,
        layers=layers,
        batch_size=batch_size,
        learning_rate=learning_rate,
        seed=seed,
        mask_prompt=mask_prompt,
        dtype=dtype,
        backend=backend,
    )
    run.train_until(steps, on_step)
    return run.result()


#: The chapter's runs: the shipped adder, every training problem, every fourth held-out one.
CHAPTER_STEPS = 300
_SHARED: dict[tuple[str, int, bool], FineTuneRun] = {}


def chapter_data() -> tuple[Params, GPTConfig, np.ndarray, np.ndarray]:
    """The shipped adder's weights and config, and the new task's training and held-out
    sequences: every training problem of :func:`llmfs.gpt.task.split`, every fourth held-out
    problem (257)."""
    params, config = load_tiny_gpt()
    problems = task.split()
    return params, config, msd_sequences(problems.train), msd_sequences(problems.held_out[::4])


def shared_run(method: str = "lora", rank: int = 4, mask_prompt: bool = True) -> FineTuneRun:
    """The chapter's run of these settings (the other arguments :class:`FineTuneRun`'s
    defaults, on :func:`chapter_data`), ONE per process: every caller trains the same object, so
    a notebook can train it in parts over several cells and a later question reads the same
    run (:meth:`FineTuneRun.train_until` a step it has reached does nothing)."""
    key = (method, int(rank) if method == "lora" else 0, bool(mask_prompt))
    if key not in _SHARED:
        params, config, train, held_out = chapter_data()
        _SHARED[key] = FineTuneRun(
            params, config, train, held_out, method=method, rank=rank, mask_prompt=mask_prompt
        )
    return _SHARED[key]


__all__ = [
    "CHAPTER_STEPS",
    "LEARNING_RATES",
    "METHODS",
    "FineTuneResult",
    "FineTuneRun",
    "chapter_data",
    "exact_match",
    "fine_tune",
    "loss_weights",
    "msd_answer",
    "msd_sequences",
    "shared_run",
]
