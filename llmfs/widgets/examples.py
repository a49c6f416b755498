"""The course's example tensor and its trace, shared by ``llmfs demo``, figures and tests."""

from __future__ import annotations

from llmfs.tensor import Tensor
from llmfs.widgets.model import Trace, trace

#: The example source tensor: shape [2, 3], strides [3, 1], storage [10, 11, 12, 20, 21, 22].
FIXTURE_SHAPE = (2, 3)
FIXTURE_VALUES = (10.0, 11.0, 12.0, 20.0, 21.0, 22.0)

#: The five example entries (source, reshape, transpose, slice, materialized slice), then the
#: three refused requests (element count, non-contiguous reshape, slice end out of bounds).
SEED_OPERATIONS = (
    "view = base.view()",
    "view.reshape([3, 2])",
    "transposed = view.transpose(0, 1)",
    "sliced = view.slice(1, 1, 3)",
    "sliced.materialize()",
    "view.reshape([4, 2])",
    "transposed.reshape([2, 3])",
    "view.slice(1, 1, 4)",
)


def seed_fixture() -> Tensor:
    """A new copy of the example source tensor (each caller gets its own owner)."""
    return Tensor.from_vec(list(FIXTURE_SHAPE), list(FIXTURE_VALUES))


def seed_trace() -> Trace:
    """The trace table of the example tensor, owner named ``base``."""
    return trace(seed_fixture(), SEED_OPERATIONS, title="Shared-storage views and explicit copies")


__all__ = ["FIXTURE_SHAPE", "FIXTURE_VALUES", "SEED_OPERATIONS", "seed_fixture", "seed_trace"]
