"""Training the capstone model on :mod:`llmfs.tensor`: the forward pass of
:mod:`llmfs.gpt.tensor_model`, gradients by the library's autograd, and AdamW on llmfs tensors.

This is the ``tensor`` engine of ``python -m llmfs.gpt.train --engine tensor``; the ``numpy``
engine (:func:`llmfs.gpt.train.train`) writes every backward pass by hand. The two run the same
experiment, so that one can be held to the other step by step:

* the same model and initialisation (:func:`llmfs.gpt.model.init_params` with the run's seed);
* the same batches, in the same order (:func:`llmfs.gpt.experiment.batches`: one seeded NumPy
  ``Generator``);
* the same loss (:func:`cross_entropy`: the answer tokens only), the same optimiser
  (:class:`AdamW`, the NumPy engine's update, in place on each parameter's storage) and the
  same learning-rate schedule (:func:`llmfs.gpt.experiment.learning_rate`);
* the same log: a loss point every ``log_every`` steps, the held-out accuracy every
  ``eval_every`` steps, both measured by the same NumPy evaluator
  (:func:`llmfs.gpt.reference.accuracy` on the parameters read back), so the curves compare.

In float64 on the numpy backend the two engines' losses agree to rounding (about 1e-16) at
every step; they are not equal bit for bit, because autograd sums a gradient's terms in another
order than the hand-written backward does, and training amplifies such differences (the
README's capstone section says how far). ``backend`` chooses where the arithmetic runs
(``numpy``; ``reference``, the pure-Python loops, for a few steps of a small model;
``metal-emulator`` in float32 only).

One training step, as a learner writes it::

    logits = tensor_model.forward(w, config, inputs)        # recorded on the tape
    loss = cross_entropy(logits, targets, weights)
    loss.backward()                                         # w[name].grad for every parameter
    optimizer.step(lr)                                      # AdamW, in place, recording nothing
    optimizer.zero_grad()
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

import llmfs.tensor as lt
from llmfs.gpt import reference, task, tensor_model
from llmfs.gpt.errors import ConfigError, TaskError
from llmfs.gpt.experiment import (
    ProgressBar,
    RunLog,
    TrainConfig,
    TrainResult,
    answer_weights,
    batches,
    decays,
    learning_rate,
    training_data,
)
from llmfs.gpt.model import TINY_CONFIG, GPTConfig, Params, init_params
from llmfs.tensor import Tensor, TensorView, ops, use_backend
from llmfs.tensor import functional as F
from llmfs.tensor.autograd import Context, Grad, grad_array, needs_grad, register_rule
from llmfs.tensor.tape import differentiable, save_for_backward

Operand = Tensor | TensorView

# --------------------------------------------------------------------------------------------
# The loss
# --------------------------------------------------------------------------------------------


def log_softmax(logits: Operand, axis: int = -1) -> Tensor:
    """``log(softmax(logits))`` along ``axis`` by the log-sum-exp trick: ``z - m - log(sum(exp(z -
    m)))`` with ``m`` the maximum along ``axis``. Subtracting ``m`` changes nothing
    mathematically (softmax is unchanged by a shift) but keeps every ``exp`` at most 1, so no
    logit overflows it and the largest term of the sum is exactly 1 (its log never sees 0). One
    recorded op with its analytic gradient, ``g - softmax * sum(g)`` (the shift gets none), as
    PyTorch's ``log_softmax``: :func:`llmfs.tensor.functional.log_softmax`."""
    return F.log_softmax(logits, axis)


def cross_entropy(logits: Operand, targets: np.ndarray, weights: np.ndarray) -> Tensor:
    """The weighted mean cross-entropy of :func:`llmfs.gpt.train.loss_and_grads`, on llmfs tensors:
    ``-sum(weights * log_softmax(logits)[..., targets]) / sum(weights)``, a 0-d tensor that
    autograd differentiates.

    ``logits`` is ``[B, T, V]``; ``targets`` (ints in ``0..V-1``) and ``weights`` (1 where a
    position counts, 0 where it does not) are NumPy ``[B, T]``. Recorded as ONE op (as
    PyTorch's ``cross_entropy`` is): its forward is :func:`log_softmax` then each position's
    target log-probability times ``-weight / sum(weights)``, summed; its backward
    (:func:`_picked_backward`) is ``(softmax - onehot) * weights / sum(weights)``, as the NumPy
    engine writes it.

    Raises :class:`TaskError` when the shapes differ, a target is outside the vocabulary, or the
    weights do not add up to a positive number (the mean of nothing)."""
    shape = tuple(logits.shape)
    targets = np.asarray(targets)
    weights = np.asarray(weights, dtype=np.float64)
    if len(shape) < 1 or targets.shape != shape[:-1] or weights.shape != shape[:-1]:
        raise TaskError(
            f"cross_entropy needs targets and weights of the logits' leading shape "
            f"{list(shape[:-1])}, got targets {list(targets.shape)} and weights "
            f"{list(weights.shape)}"
        )
    vocab = shape[-1]
    if not np.issubdtype(targets.dtype, np.integer):
        raise TaskError(f"targets must be integer token ids, got dtype {targets.dtype}")
    if targets.size and (targets.min() < 0 or targets.max() >= vocab):
        raise TaskError(
            f"targets {int(targets.min())}..{int(targets.max())} fall outside 0..{vocab - 1}"
        )
    total = float(weights.sum())
    if not total > 0:
        raise TaskError(f"the weights must add up to a positive number, got {total}")
    # Each position's target, as an index into the row-major log-probabilities, and its scale
    # (in the logits' dtype, so float32 stays float32).
    flat = np.arange(targets.size, dtype=np.int64) * vocab + targets.reshape(-1)
    scale = (-(weights / total)).astype(np.dtype(logits.dtype.name)).reshape(-1)
    return _picked_loss(logits, flat, scale)


@differentiable("cross_entropy")
def _picked_loss(logits: Operand, flat: np.ndarray, scale: np.ndarray) -> Tensor:
    """``sum(log_softmax(logits).flat[flat] * scale)``: the loss of :func:`cross_entropy`, one
    recorded op. Only ``B * T`` of the ``B * T * V`` log-probabilities are read: a product with a
    dense one-hot would write (and its gradient read) ``V`` times as many values. Keeps the
    log-probabilities for the backward rule."""
    logp = F.log_softmax(logits, -1)
    save_for_backward("cross_entropy", logp)
    picked = Tensor.from_numpy(grad_array(logp).reshape(-1)[flat], dtype=logits.dtype)
    return lt.sum(picked * Tensor.from_numpy(scale, dtype=logits.dtype))


def _picked_backward(ctx: Context, g: Tensor) -> list[tuple[TensorView, Grad]]:
    """``g * scale`` at each position's target minus ``softmax(logits) * (g * scale)`` of its
    row: the gradient of the picked log-probabilities (``g * scale`` at the targets, zero
    elsewhere) through :func:`llmfs.tensor.functional.log_softmax`'s rule
    (``d - softmax * sum(d)``, the row sum of ``d`` being its one nonzero value). The same
    operations, in the same dtype, as autograd of a product with a dense one-hot of those
    scales (``-0.0`` elsewhere) gives, so every nonzero value keeps its bits (a zero of a row
    whose weight is 0 may carry the other sign); the targets' values are added into the
    result's own new storage."""
    logits, flat, scale = ctx.arg(0), ctx.arg(1), ctx.arg(2)
    if not needs_grad(logits):
        return []
    (logp,) = ctx.saved
    rows = ops.mul(g, Tensor.from_numpy(scale, dtype=g.dtype))  # [B * T]
    per_row = ops.mul(ops.exp(logp), rows.reshape((*logp.shape[:-1], 1)))
    # Where the one-hot holds -0.0, the product's gradient is g * -0.0, and that minus the row
    # term is the result there; at a target, (g * -0.0 - term) + g * scale is g * scale - term
    # bit for bit (subtracting is adding the negation; -0.0 - x is exactly -x).
    grad = ops.sub(ops.mul(g, Tensor.from_numpy(np.array(-0.0, dtype=g.dtype.name))), per_row)
    grad_array(grad).reshape(-1)[flat] += grad_array(rows)  # one target per row: no index twice
    return [(logits, grad)]


register_rule("cross_entropy", _picked_backward)


# --------------------------------------------------------------------------------------------
# The optimiser
# --------------------------------------------------------------------------------------------


class AdamW:
    """Adam with decoupled weight decay (Loshchilov & Hutter), as ``torch.optim.AdamW``, over
    named llmfs tensors that require grad. For each parameter ``p`` with gradient ``g`` at step
    ``t`` (1, 2, ...)::

        m = beta1 * m + (1 - beta1) * g              # running mean of the gradient
        v = beta2 * v + (1 - beta2) * g * g          # running mean of its square
        m_hat = m / (1 - beta1 ** t)                 # bias correction: m and v start at 0
        v_hat = v / (1 - beta2 ** t)
        p = p * (1 - lr * weight_decay)              # decoupled: not part of the gradient
        p = p - lr * m_hat / (sqrt(v_hat) + eps)

    Weight decay applies to the parameters for which ``decay(name)`` is true (default: all; the
    capstone decays only the blocks' matrices, :func:`llmfs.gpt.experiment.decays`), as PyTorch's
    parameter groups with ``weight_decay=0`` exclude the others. The update is not part of any
    graph (nothing is recorded): it is written IN PLACE, with NumPy arithmetic, into each
    parameter's own storage and into the moments (``exp_avg``, ``exp_avg_sq``: tensors of the
    parameter's shape and dtype), inside their ``mutate()`` windows, as PyTorch's ``foreach``
    kernels update in place; so a model holding the same tensors sees the new values, views of
    a parameter taken before the step are stale after it, and the update costs a few NumPy
    calls per parameter on any backend. A parameter whose ``.grad`` is ``None`` is skipped, as
    in PyTorch. The arithmetic is the NumPy engine's (:func:`llmfs.gpt.train.adamw_update`),
    operation for operation and in the parameter's dtype, so the same gradients give the same
    parameters bit for bit.

    Raises :class:`ConfigError` for a learning rate, ``eps`` or weight decay below 0, a beta
    outside ``[0, 1)``, or a parameter that does not require grad.
    """

    def __init__(
        self,
        params: Mapping[str, Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        decay: Callable[[str], bool] | None = None,
    ) -> None:
        if not lr >= 0:
            raise ConfigError(f"the learning rate must be at least 0, got {lr}")
        if not eps >= 0:
            raise ConfigError(f"eps must be at least 0, got {eps}")
        if not weight_decay >= 0:
            raise ConfigError(f"weight_decay must be at least 0, got {weight_decay}")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ConfigError(f"betas[{i}] must lie in [0, 1), got {beta}")
        for name, p in params.items():
            if not p.requires_grad:
                raise ConfigError(f"parameter {name!r} does not require grad: nothing to train")
        self.params = dict(params)
        self.lr = lr
        self.betas = betas
        self.eps = eps
        self.weight_decay = weight_decay
        self.decay = decay
        #: Steps taken (``t`` of the bias correction).
        self.steps = 0
        #: The first and second moments, per parameter name (created on its first step).
        self.exp_avg: dict[str, Tensor] = {}
        self.exp_avg_sq: dict[str, Tensor] = {}

    def zero_grad(self) -> None:
        """Forgets every parameter's gradient (``.grad = None``, PyTorch's default), so the next
        ``backward()`` starts from nothing instead of adding to the last one."""
        for p in self.params.values():
            p.grad = None

    def step(self, lr: float | None = None) -> None:
        """One update of every parameter that has a gradient, with ``lr`` (default: the
        optimiser's ``lr``; a schedule passes each step's)."""
        rate = self.lr if lr is None else lr
        beta1, beta2 = self.betas
        self.steps += 1
        t = self.steps
        # Python floats: weak scalars, so a float32 parameter is updated in float32.
        keep = 1.0 - rate * self.weight_decay
        first, second = 1 - beta1**t, 1 - beta2**t
        for name, p in self.params.items():
            g = p.grad
            if g is None:
                continue
            grad = np.asarray(g.numpy_view())  # read in place (a plain read-only array)
            if name not in self.exp_avg:  # the moments start at 0
                self.exp_avg[name] = Tensor.zeros(p.shape, dtype=p.dtype)
                self.exp_avg_sq[name] = Tensor.zeros(p.shape, dtype=p.dtype)
            with self.exp_avg[name].mutate() as m_storage:
                m = m_storage._array().reshape(p.shape)
                m *= beta1  # m = beta1 * m + (1 - beta1) * g
                m += (1 - beta1) * grad
                step = m / first  # m_hat, then lr * m_hat / (sqrt(v_hat) + eps)
            with self.exp_avg_sq[name].mutate() as v_storage:
                v = v_storage._array().reshape(p.shape)
                square = (1 - beta2) * grad
                square *= grad
                v *= beta2  # v = beta2 * v + (1 - beta2) * g * g
                v += square
                denominator = v / second  # v_hat
            np.sqrt(denominator, out=denominator)
            denominator += self.eps
            step *= rate
            step /= denominator
            with p.mutate() as p_storage:
                value = p_storage._array().reshape(p.shape)  # a Tensor is row-major
                if self.weight_decay and (self.decay is None or self.decay(name)):
                    value *= keep  # decoupled: not part of the gradient
                value -= step


# --------------------------------------------------------------------------------------------
# The training loop
# --------------------------------------------------------------------------------------------


def to_numpy_params(w: Mapping[str, Tensor]) -> Params:
    """The parameters read back as float64 NumPy arrays (for saving and for evaluating)."""
    return {name: t.to_numpy().astype(np.float64) for name, t in w.items()}


def trainable(
    params: Params, cfg: TrainConfig, dtype: object = np.float64
) -> tuple[dict[str, Tensor], AdamW]:
    """``params`` as tensors of ``dtype`` (on the backend in use) that require grad, and the
    :class:`AdamW` of ``cfg`` over them (its learning rate, betas, eps and weight decay, the
    decay applied as :func:`~llmfs.gpt.experiment.decays` says): what every tensor-engine run
    starts from."""
    w = tensor_model.tensor_params(params, dtype)
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
    return w, optimizer


def held_out_accuracy(w: Mapping[str, Tensor], config: GPTConfig, held_out: np.ndarray) -> float:
    """The accuracy on ``held_out`` measured as the NumPy engine measures it
    (:func:`llmfs.gpt.reference.accuracy` of the parameters read back), so that the two engines'
    curves compare."""
    return reference.accuracy(to_numpy_params(w), config, held_out)


def train(
    config: GPTConfig = TINY_CONFIG,
    cfg: TrainConfig | None = None,
    train_problems: np.ndarray | None = None,
    held_out: np.ndarray | None = None,
    log: Callable[[str], Any] | None = None,
    backend: str = "numpy",
    dtype: object = np.float64,
    progress: ProgressBar | None = None,
) -> TrainResult:
    """Trains like :func:`llmfs.gpt.train.train` (same initialisation, batches, loss, AdamW,
    schedule and log) with the forward pass of :mod:`llmfs.gpt.tensor_model` and autograd, on
    ``backend`` in ``dtype`` (float64 or float32). Returns the parameters as float64 NumPy
    arrays and the record of the run. ``log`` gets one line per logged point; ``progress``, when
    given, is advanced once per step with the loss."""
    cfg = cfg or TrainConfig()
    data, held_out = training_data(train_problems, held_out)
    start = init_params(config, seed=cfg.seed)
    weights = answer_weights(cfg.batch_size)
    with use_backend(backend):
        w, optimizer = trainable(start, cfg, dtype)
        run = RunLog(cfg, log)
        for step, batch in enumerate(batches(data, cfg)):
            loss = cross_entropy(
                tensor_model.forward(w, config, batch[:, :-1]), batch[:, 1:], weights
            )
            loss.backward()
            lr = learning_rate(step, cfg)
            optimizer.step(lr)
            optimizer.zero_grad()
            value = float(loss.item())
            if progress is not None:
                progress.update(value)
            run.step(step, value, lr, lambda: held_out_accuracy(w, config, held_out))
        params = to_numpy_params(w)
    return run.result(params)


def step_time(
    params: Params,
    config: GPTConfig,
    batch_size: int = 64,
    dtype: object = np.float64,
    backend: str = "numpy",
) -> Callable[[], None]:
    """One training step of the tensor engine from ``params`` (forward, ``backward()``, AdamW)
    as a function to time: each call trains the same tensors one more step on the same batch."""
    data = task.sequences(task.split().train)
    batch = data[np.random.default_rng(1).integers(0, len(data), size=batch_size)]
    weights = answer_weights(batch_size)
    with use_backend(backend):
        w, optimizer = trainable(params, TrainConfig(learning_rate=1e-4), dtype)

    def run() -> None:
        with use_backend(backend):
            loss = cross_entropy(
                tensor_model.forward(w, config, batch[:, :-1]), batch[:, 1:], weights
            )
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

    return run


__all__ = [
    "AdamW",
    "cross_entropy",
    "log_softmax",
    "step_time",
    "to_numpy_params",
    "train",
    "trainable",
]
