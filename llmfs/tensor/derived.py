"""The views' derived-layout cache: a view method's layout rule runs once per (layout, argument).

``T``, ``reshape``, ``permute``, ``slice`` and the other view methods of
:class:`~llmfs.tensor.view.ViewMethods` derive a new :class:`~llmfs.tensor.layout.Layout` from
the current one. Each derivation is a pure function of the method, the layout (shape, strides,
offset) and the arguments, so :func:`derive` remembers its answer: a view of an 8x8 matrix is
transposed or reshaped by one dictionary lookup instead of the layout algebra (which ran, and
checked the argument, the first time).

Invariants: a derivation that raised is never stored (the next call raises again); arguments
that are not plain ints, ``None`` or lists/tuples of plain ints are never cached (``True``,
``2.0`` and ``np.int64(2)`` compare equal to ints but must keep their own errors); while
:func:`llmfs.tensor.dispatch.suspended` is open, :data:`suspended` is above 0 and every call
runs its rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

from llmfs.tensor.layout import Layout

#: Layouts already derived, by (method, shape, strides, offset, :func:`args_key` of the args).
DERIVED: dict[tuple[object, ...], Layout] = {}

#: At most this many derived layouts are kept; past it the cache starts again.
MAX_DERIVED = 4096

#: Above 0 while some block has the caches suspended (:func:`llmfs.tensor.dispatch.suspended`
#: counts it up and down): every view method then runs its layout rule, as on its first call.
suspended = 0


def args_key(args: tuple[object, ...]) -> tuple[object, ...] | None:
    """``args`` as a cache key that tells apart what compares equal (``True == 1 == 1.0``):
    each plain int or ``None`` with its type, each list or tuple of plain ints as its items with
    the container type; ``None`` (no caching) for anything else."""
    parts: list[object] = []
    for arg in args:
        kind = type(arg)
        if kind is int or arg is None:
            parts.append((kind, arg))
        elif kind is list or kind is tuple:
            items = tuple(cast("Sequence[object]", arg))
            for item in items:
                if type(item) is not int:
                    return None
            parts.append((kind, items))
        else:
            return None
    return tuple(parts)


def derive(
    method: str,
    layout: Layout,
    args: tuple[object, ...],
    rule: Callable[[Layout], Layout],
    before_rule: Callable[[], None] | None = None,
) -> Layout:
    """``rule(layout)``, looked up under ``method``, ``layout`` and ``args`` (with their types,
    so ``2.0`` is not taken for the size ``2``); ``rule`` runs (and checks ``args``) only when
    the answer is not remembered, and ``before_rule`` (when given) runs just before it: a view
    method that checks freshness before its rule passes that check, so a stale view with a bad
    argument says it is stale (as ``reshape`` and ``merge`` do). Raises what ``rule`` raises."""
    parts = args_key(args)
    if parts is None or suspended:
        if before_rule is not None:
            before_rule()
        return rule(layout)
    key = (method, layout.shape, layout.strides, layout.offset, parts)
    derived = DERIVED.get(key)
    if derived is None:
        if before_rule is not None:
            before_rule()
        derived = rule(layout)
        if len(DERIVED) >= MAX_DERIVED:
            DERIVED.clear()
        DERIVED[key] = derived
    return derived
