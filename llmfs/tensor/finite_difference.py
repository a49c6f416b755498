"""``gradcheck``: a backward rule held to central finite differences, as PyTorch's
``torch.autograd.gradcheck``.

A diagnostic for rules, not one of them: it runs ``backward()`` once per output value and
compares each Jacobian entry with ``(f(x + eps) - f(x - eps)) / (2 * eps)``, perturbing the
inputs' storage in place (through ``mutate()``) and restoring it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from llmfs.tensor.errors import DTypeError, GradcheckError, TensorError
from llmfs.tensor.tape import is_grad_enabled, no_grad
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import ViewMethods


def gradcheck(
    fn: Callable[..., ViewMethods],
    inputs: Sequence[object],
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
) -> bool:
    """Checks the gradients of ``fn(*inputs)`` against central finite differences, as PyTorch's
    ``gradcheck``: for every input ``Tensor`` that requires grad and every output value, the
    Jacobian entry from ``backward()`` (one backward per output value) must be within
    ``atol + rtol * |numeric|`` of ``(f(x + eps) - f(x - eps)) / (2 * eps)``. The inputs are
    perturbed in place and restored; their ``.grad`` is left as it was.

    Returns True, or raises :class:`GradcheckError` naming the input, the position in it, the
    output position and both values. Raises :class:`DTypeError` for an input that requires grad
    and is not float64 (finite differences need its precision), and :class:`TensorError` when no
    input requires grad or ``fn`` does not return a tensor.
    """
    inputs = list(inputs)
    leaves = [(k, x) for k, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not leaves:
        raise TensorError("gradcheck needs at least one input Tensor with requires_grad=True")
    for k, x in leaves:
        if x.dtype != np.float64:
            raise DTypeError(
                x.dtype.name,
                ("float64",),
                f"gradcheck's input {k} (finite differences need float64: x.astype('float64'))",
            )
    if not is_grad_enabled():
        raise TensorError("gradcheck needs grad recording: call it outside no_grad()")
    before = [x._grad for _, x in leaves]
    try:
        result = fn(*inputs)
        if not isinstance(result, ViewMethods):
            raise TensorError(f"gradcheck's fn must return a tensor, got {type(result).__name__}")
        shape = result.shape
        analytic = [np.zeros((result.size, x.size)) for _, x in leaves]
        for j in range(result.size if result.requires_grad else 0):
            for _, x in leaves:
                x._grad = None
            seed = np.zeros(result.size)
            seed[j] = 1.0
            result.backward(Tensor.from_numpy(seed.reshape(shape), dtype=result.dtype))
            for column, (_, x) in zip(analytic, leaves):
                if x._grad is not None:
                    column[j] = x._grad._storage
        for (k, x), jacobian in zip(leaves, analytic):
            for position in range(x.size):
                numeric = _central_difference(fn, inputs, x, position, eps)
                for j in range(result.size):
                    a, n = float(jacobian[j, position]), float(numeric[j])
                    if not abs(a - n) <= atol + rtol * abs(n):
                        raise GradcheckError(
                            k,
                            tuple(int(c) for c in np.unravel_index(position, x.shape)),
                            tuple(int(c) for c in np.unravel_index(j, shape)),
                            a,
                            n,
                            atol,
                            rtol,
                        )
    finally:
        for (_, x), grad in zip(leaves, before):
            x._grad = grad
    return True


def _central_difference(
    fn: Callable[..., ViewMethods], inputs: list[object], x: Tensor, position: int, eps: float
) -> np.ndarray:
    """``(fn(x + eps) - fn(x - eps)) / (2 eps)`` for one storage value of ``x``, every output."""
    original = float(x._storage[position])
    values = []
    try:
        for shifted in (original + eps, original - eps):
            with x.mutate() as storage:
                storage[position] = shifted
            with no_grad():
                values.append(np.asarray(fn(*inputs).to_numpy(), dtype=np.float64).reshape(-1))
    finally:
        with x.mutate() as storage:
            storage[position] = original
    return (values[0] - values[1]) / (2 * eps)


__all__ = ["gradcheck"]
