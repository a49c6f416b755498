"""Outputs that a plan writes into: which buffers are accepted, and how they are opened.

``execute_into(out, ...)`` takes a :class:`~llmfs.tensor.tensor.Tensor` or a fresh
:class:`~llmfs.tensor.view.TensorView` of one (a permuted, sliced or flipped output is fine) and
writes the result through that layout, into the owner's own storage. The write happens inside
the owner's ``mutate()`` window, so every view of the owner made before goes stale, as for any
other write.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from llmfs.tensor.einsum.errors import OutputBufferError
from llmfs.tensor.layout import Layout
from llmfs.tensor.strided import writable_view
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import TensorView, as_strided


@dataclass(frozen=True)
class Output:
    """An accepted output: its owner and the layout the result is written through."""

    given: Tensor | TensorView
    owner: Tensor
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    base_offset: int

    @contextmanager
    def target(self) -> Iterator[np.ndarray]:
        """A writable array over the owner's storage with the output's layout, valid inside the
        ``with`` block (the owner's ``mutate()`` window)."""
        with self.owner.mutate() as handle:
            storage = handle._array()
            yield writable_view(storage, Layout(self.shape, self.strides, self.base_offset))

    def result(self) -> Tensor | TensorView:
        """What ``execute_into`` returns: the Tensor given, or the view given made again at the
        owner's new version (the view given went stale with the write)."""
        if isinstance(self.given, Tensor):
            return self.given
        return as_strided(self.owner, self.shape, self.strides, self.base_offset)


def check_output(
    out: object, shape: tuple[int, ...], dtype: np.dtype, inputs: Sequence[TensorView]
) -> Output:
    """Accepts a Tensor, or a fresh TensorView, of ``shape`` and ``dtype`` whose layout reaches
    each offset once and whose owner no input reads from.

    Raises :class:`OutputBufferError` naming the violated condition (:class:`StaleViewError` for
    a stale view).
    """
    if isinstance(out, TensorView):
        out._check_fresh()
        owner, strides, base = out.owner, out.strides, out.base_offset
    elif isinstance(out, Tensor):
        owner, strides, base = out, out.view().strides, 0
    else:
        raise OutputBufferError(f"it must be a Tensor or a TensorView, got {type(out).__name__}")
    if out.shape != tuple(shape):
        raise OutputBufferError(
            f"its shape is {list(out.shape)} but the plan's output shape is {list(shape)}"
        )
    if out.dtype != dtype:
        raise OutputBufferError(
            f"its dtype is {out.dtype.name} but the plan's output dtype is {dtype.name}"
        )
    if Layout(tuple(out.shape), tuple(strides), base).overlapping_coordinates() is not None:
        raise OutputBufferError(
            f"its layout (shape {list(out.shape)}, strides {list(strides)}) reaches some offsets "
            f"from several coordinates (a broadcast view), so a value would be written twice"
        )
    for index, view in enumerate(inputs):
        if view.owner is owner:
            raise OutputBufferError(
                f"its storage is shared with operand {index} (the output must not be an input's "
                f"owner: writing would change the values being read)"
            )
    return Output(out, owner, tuple(out.shape), tuple(strides), base)


__all__ = ["Output", "check_output"]
