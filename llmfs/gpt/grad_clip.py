"""Gradient clipping by global norm, as ``torch.nn.utils.clip_grad_norm_``.

The global norm is the Euclidean norm of ALL the gradients taken together as one vector,
``sqrt(sum over parameters of sum(grad ** 2))``. When it exceeds ``max_norm`` every gradient is
multiplied by the same factor ``max_norm / (norm + 1e-6)`` (PyTorch's guard against a division
by 0), so the update's direction is unchanged and only its length shrinks to (just under)
``max_norm``; below the threshold nothing changes. One spike of a bad batch thus moves the model
no further than a normal step, while the many ordinary steps are untouched.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from llmfs.gpt.errors import ConfigError
from llmfs.tensor import Tensor

#: Added to the norm before dividing, as PyTorch does.
EPS = 1e-6


def global_grad_norm(params: Mapping[str, Tensor]) -> float:
    """The Euclidean norm of every ``.grad`` of ``params`` taken as one vector (a parameter
    without a gradient counts 0), summed in float64."""
    total = 0.0
    for p in params.values():
        if p.grad is not None:
            g = np.asarray(p.grad.numpy_view(), dtype=np.float64)
            total += float(np.dot(g.reshape(-1), g.reshape(-1)))
    return math.sqrt(total)


def clip_scale(norm: float, max_norm: float) -> float:
    """The factor every gradient is multiplied by: ``max_norm / (norm + EPS)`` when that is
    below 1, else 1."""
    return min(1.0, max_norm / (norm + EPS))


def clip_grad_norm(params: Mapping[str, Tensor], max_norm: float) -> float:
    """Scales every ``.grad`` of ``params`` by :func:`clip_scale` of their global norm and
    returns the norm BEFORE clipping (PyTorch's return value). The gradients are replaced by
    scaled copies of the parameter's dtype (no gradient is written in place). Raises
    :class:`ConfigError` for a ``max_norm`` that is not a positive number."""
    if not max_norm > 0 or math.isinf(max_norm):
        raise ConfigError(f"max_norm must be a positive finite number, got {max_norm}")
    norm = global_grad_norm(params)
    scale = clip_scale(norm, max_norm)
    if scale < 1.0:
        for p in params.values():
            if p.grad is not None:
                scaled = np.asarray(p.grad.numpy_view()) * scale
                p.grad = Tensor.from_numpy(scaled, dtype=p.dtype)
    return norm


__all__ = ["EPS", "clip_grad_norm", "clip_scale", "global_grad_norm"]
