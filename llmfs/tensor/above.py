"""How the tensor types reach the layers built on them: ``above.ops`` and ``above.autograd``.

A tensor's ``a + b``, ``v.materialize()`` and ``t.backward()`` run functions of the ops and of
autograd; each of those layers is built on the one that calls it, so it cannot be imported where
the caller is defined. Instead each of them, when it is imported, puts itself here
(``above.ops = sys.modules[__name__]``), and the callers call through these names. This is the
package's one idiom for a call that runs up the layers: no function-local import, so the import
graph has no upward edge and no cycle.

Invariant: importing :mod:`llmfs.tensor` (which Python does before any of its modules) imports
the ops and autograd, so a caller never meets ``None`` here.
"""

from __future__ import annotations

from types import ModuleType

#: :mod:`llmfs.tensor.ops`: the operators of a tensor and a view, the copies of
#: ``materialize`` and ``to_numpy`` (by the backend ``ops`` chooses), integer-array indexing.
ops: ModuleType = ModuleType("llmfs.tensor.ops (not imported yet)")

#: :mod:`llmfs.tensor.autograd`: ``t.backward()`` runs its engine.
autograd: ModuleType = ModuleType("llmfs.tensor.autograd (not imported yet)")


def provide(name: str, module: ModuleType) -> None:
    """Called by ``module`` at the end of its import: the callers below reach it as
    ``above.<name>``."""
    globals()[name] = module
