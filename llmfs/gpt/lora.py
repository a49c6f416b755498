"""LoRA: fine-tuning a linear layer through a low-rank update beside its frozen weight
(Hu et al., 2021), on :mod:`llmfs.tensor`.

A linear layer here is GPT-2's ``Conv1D``: ``y = x @ W + b`` with ``W`` of shape ``[in, out]``
(:mod:`llmfs.gpt.model`). Its adapter of rank ``r`` adds two small owners, ``A`` (``[in, r]``)
and ``B`` (``[r, out]``), and computes::

    y = x @ W + (alpha / r) * ((x @ A) @ B) + b

which is the paper's ``W x + (alpha/r) B A x`` written for row vectors (every matrix
transposed). Invariants:

* ``B`` starts at zero, so the adapted layer starts EQUAL to the base layer (``A`` starts random:
  were both zero, the gradient of each would be zero and neither would ever move).
* ``W`` is frozen: the adapter reads it through a detached view (:meth:`TensorView.detach
  <llmfs.tensor.TensorView.detach>`) made at each call, so no gradient ever reaches it, whatever
  its owner's ``requires_grad``, and only ``A`` and ``B`` are trained. It is the same owner as the
  base model's (no copy): a write to it between a forward pass and its ``backward()`` is refused
  there, as any write to a tensor an op saved is
  (:class:`~llmfs.tensor.errors.SavedTensorModifiedError`).
* ``x @ A`` is ``[..., r]``: the update costs ``r * (in + out)`` multiply-adds per row instead of
  ``in * out``, and trains ``r * (in + out)`` numbers instead of ``in * out``
  (:meth:`LoRA.trainable_parameters`).

:meth:`LoRA.merge` folds the update into a NEW owner ``W + (alpha/r) * (A @ B)``: a model served
after fine-tuning then costs exactly what the base did. It cannot be a view: a view is only a new
layout over storage that already holds its values, and no storage holds ``W + (alpha/r) A B``
(almost every one of its ``in * out`` values differs from ``W``'s, and ``A @ B`` has its own
values too); and writing the sum into ``W``'s storage would destroy the frozen weight that the
adapter, and every other model sharing it, still reads.

:class:`LoRAParams` plugs adapters into :func:`llmfs.gpt.tensor_model.forward` (and so training,
generation and the KV cache) without a second model: it is the same dict of weights, plus the
adapters by layer name, and the forward's linear layers ask it for theirs
(:func:`llmfs.gpt.tensor_model.linear`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

import llmfs.tensor as lt
from llmfs.gpt.errors import ConfigError, WeightsError
from llmfs.tensor import Tensor, TensorView

Operand = Tensor | TensorView

#: The linear layers of a GPT-2 block, by their name under ``h.{i}.``.
BLOCK_LINEARS = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
#: The layers the LoRA paper adapts by default: attention's (here the packed Q, K, V
#: projection, and the output projection).
ATTENTION_LINEARS = ("attn.c_attn", "attn.c_proj")


def _check_rank_alpha(rank: object, alpha: object) -> tuple[int, float]:
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 1:
        raise ConfigError(f"the LoRA rank must be a positive int, got {rank!r}")
    if (
        isinstance(alpha, bool)
        or not isinstance(alpha, (int, float, np.integer, np.floating))
        or not math.isfinite(float(alpha))
        or float(alpha) <= 0
    ):
        raise ConfigError(f"the LoRA alpha must be a positive finite number, got {alpha!r}")
    return int(rank), float(alpha)


class LoRA:
    """A low-rank adapter of one linear layer (``x @ W + b``, ``W`` of shape ``[in, out]``).

    ``LoRA(weight, rank, alpha, seed=0)`` keeps ``weight`` (a float :class:`Tensor`, the frozen
    base, not copied) and makes ``A`` (``[in, rank]``, uniform in ``±1/sqrt(in)``, PEFT's
    default, drawn from ``seed``) and ``B`` (``[rank, out]``, zeros), both owners of ``weight``'s
    dtype that require grad. ``scale`` is ``alpha / rank``.

    Raises :class:`~llmfs.gpt.errors.ConfigError` for a rank that is not a positive int or an
    alpha that is not a positive finite number, and :class:`~llmfs.gpt.errors.WeightsError` for a
    weight that is not a 2-D float tensor.
    """

    def __init__(self, weight: Tensor, rank: int, alpha: float, *, seed: int = 0) -> None:
        self.rank, self.alpha = _check_rank_alpha(rank, alpha)
        if not isinstance(weight, Tensor) or weight.ndim != 2 or weight.dtype.kind != "f":
            if isinstance(weight, TensorView):
                shown = f"a view of shape {list(weight.shape)} (adapt the weight's owner)"
            elif isinstance(weight, Tensor):
                shown = f"a {weight.dtype.name} tensor of shape {list(weight.shape)}"
            else:
                shown = type(weight).__name__
            raise WeightsError(f"LoRA adapts a 2-D float Tensor (an owner), got {shown}")
        fan_in, fan_out = weight.shape
        bound = 1.0 / math.sqrt(fan_in)
        values = np.random.default_rng(seed).uniform(-bound, bound, size=(fan_in, self.rank))
        #: The frozen base weight (the base model's own owner).
        self.base = weight
        #: ``[in, rank]``, trained.
        self.A = Tensor.from_numpy(values, dtype=weight.dtype, requires_grad=True)
        #: ``[rank, out]``, trained; zeros at first, so the adapted layer starts equal to the base.
        self.B = Tensor.zeros((self.rank, fan_out), dtype=weight.dtype, requires_grad=True)

    @property
    def scale(self) -> float:
        """``alpha / rank``: the update's weight (so changing the rank keeps its size)."""
        return self.alpha / self.rank

    @property
    def shape(self) -> tuple[int, int]:
        """``(in, out)``: the adapted layer's weight shape."""
        rows, cols = self.base.shape
        return rows, cols

    def __call__(self, x: Operand) -> Tensor:
        """``x @ W + scale * ((x @ A) @ B)`` for ``x`` of shape ``[..., in]`` (no bias: the
        caller adds the layer's). ``W`` is read through a detached view, so gradients reach
        ``A``, ``B`` and ``x``, never ``W``."""
        frozen = self.base.detach()
        low_rank = (x @ self.A) @ self.B
        result: Tensor = x @ frozen + low_rank * self.scale
        return result

    def delta(self) -> Tensor:
        """``scale * (A @ B)``: the ``[in, out]`` update, a new owner (recorded, so it has
        gradients to ``A`` and ``B`` when they require grad)."""
        result: Tensor = (self.A @ self.B) * self.scale
        return result

    def merge(self) -> Tensor:
        """A NEW owner ``W + scale * (A @ B)`` that does not require grad: the fine-tuned weight,
        for a model that runs without the adapter. A copy, not a view (see the module docstring);
        ``W``, ``A`` and ``B`` are left as they are."""
        with lt.no_grad():
            merged: Tensor = self.base + (self.A @ self.B) * self.scale
        return merged

    def trainable_parameters(self) -> int:
        """``rank * (in + out)``: the numbers fine-tuning changes (``A``'s and ``B``'s)."""
        fan_in, fan_out = self.shape
        return self.rank * (fan_in + fan_out)

    def __repr__(self) -> str:
        fan_in, fan_out = self.shape
        return (
            f"LoRA(in={fan_in}, out={fan_out}, rank={self.rank}, alpha={self.alpha:g}, "
            f"trainable={self.trainable_parameters()} of {fan_in * fan_out})"
        )


class LoRAParams(dict[str, Tensor]):
    """A model's weights with LoRA adapters on some of its linear layers: the SAME dict of tensors
    (names as in :mod:`llmfs.gpt.model`, the same owners, nothing copied), plus :attr:`adapters`,
    by layer name (``"h.0.attn.c_attn"``). :func:`llmfs.gpt.tensor_model.forward` and everything
    built on it (training, generation with the KV cache) runs it as it runs the plain dict, each
    adapted layer computing ``x @ W + scale * ((x @ A) @ B) + b``.

    Build it with :func:`adapt`. ``adapters[name].base`` is ``self[name + ".weight"]``.
    """

    adapters: dict[str, LoRA]

    def __init__(self, weights: Mapping[str, Tensor], adapters: Mapping[str, LoRA]) -> None:
        super().__init__(weights)
        for name, adapter in adapters.items():
            weight = self.get(name + ".weight")
            if weight is None or adapter.base is not weight:
                raise WeightsError(
                    f"the adapter of {name!r} must adapt {name + '.weight'!r} of these weights "
                    f"(the same owner)"
                )
        self.adapters = dict(adapters)

    def trainable(self) -> dict[str, Tensor]:
        """Every adapter's ``A`` and ``B``, named ``"{layer}.lora_A"``/``"{layer}.lora_B"``: what
        an optimiser (:class:`llmfs.gpt.tensor_train.AdamW`) updates."""
        out: dict[str, Tensor] = {}
        for name, adapter in self.adapters.items():
            out[name + ".lora_A"] = adapter.A
            out[name + ".lora_B"] = adapter.B
        return out

    def trainable_parameters(self) -> int:
        """How many numbers fine-tuning changes: the sum of the adapters' ``r * (in + out)``."""
        return sum(a.trainable_parameters() for a in self.adapters.values())

    def merged(self) -> dict[str, Tensor]:
        """A plain weights dict: each adapted layer's weight replaced by its :meth:`LoRA.merge`
        (a new owner), every other tensor the same owner as here. Its forward pass equals this
        one's (to rounding)."""
        out = dict(self)
        for name, adapter in self.adapters.items():
            out[name + ".weight"] = adapter.merge()
        return out


def layer_names(n_layer: int, which: Iterable[str] = ATTENTION_LINEARS) -> list[str]:
    """The names ``"h.{i}.{layer}"`` of the given block linears (default: attention's) of every
    block ``0..n_layer - 1``."""
    chosen = list(which)
    unknown = [w for w in chosen if w not in BLOCK_LINEARS]
    if unknown:
        raise ConfigError(f"{unknown} are not linear layers of a block; they are {BLOCK_LINEARS}")
    return [f"h.{i}.{layer}" for i in range(n_layer) for layer in chosen]


def adapt(
    weights: Mapping[str, Tensor],
    layers: Iterable[str],
    rank: int,
    alpha: float,
    *,
    seed: int = 0,
) -> LoRAParams:
    """``weights`` with an adapter of ``rank`` and ``alpha`` on each layer of ``layers`` (names
    such as ``"h.0.attn.c_attn"``, :func:`layer_names`), adapter ``k`` drawing its ``A`` from
    ``seed + k``. The base model is frozen, as PEFT freezes it: every tensor of ``weights`` that
    requires grad stops requiring it (in place: they are the caller's owners, not copies), so only
    the adapters' ``A`` and ``B`` are trained; the adapted weights are also read detached.

    Raises :class:`~llmfs.gpt.errors.WeightsError` naming a layer whose ``.weight``/``.bias`` the
    dict lacks or a layer given twice, and :class:`~llmfs.gpt.errors.ConfigError` for a bad rank
    or alpha.
    """
    rank, alpha = _check_rank_alpha(rank, alpha)
    for tensor in weights.values():
        if tensor.requires_grad:
            tensor.requires_grad_(False)
    adapters: dict[str, LoRA] = {}
    for k, name in enumerate(layers):
        if name in adapters:
            raise WeightsError(f"layer {name!r} is given twice")
        for part in (".weight", ".bias"):
            if name + part not in weights:
                raise WeightsError(f"the weights have no {name + part!r}: {name!r} is no layer")
        adapters[name] = LoRA(weights[name + ".weight"], rank, alpha, seed=seed + k)
    return LoRAParams(weights, adapters)


__all__ = [
    "ATTENTION_LINEARS",
    "BLOCK_LINEARS",
    "LoRA",
    "LoRAParams",
    "adapt",
    "layer_names",
]
