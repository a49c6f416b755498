"""Traces: the trace table of a sequence of steps, and :func:`trace`, which runs expressions.

The rows themselves (owners, layouts, offsets, values, refusals) are built by the exercise
engine (:mod:`llmfs.course.exercises.describe` and :mod:`~llmfs.course.exercises.rows`), so an
exercise's verdict and a trace table of the same step read one model; this module gathers rows
into a :class:`Trace` and shows it through the text and HTML renderers. Its names are
re-exported here for the notebooks and the figures.

Offsets and values come from the library itself (:meth:`TensorView.logical_offsets`, the offset
cursor, and :meth:`llmfs.tensor.layout.Layout.storage_offset`), never from arithmetic of our
own. Large results are *sampled*: only the first and last entries are computed, so a
million-value view costs a few dozen cursor steps, not a million.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llmfs.course.exercises.describe import (
    ExpressionError,
    OwnerNames,
    Step,
    default_namespace,
    describe,
    evaluate,
    owners_in,
    view_or_none,
)
from llmfs.course.exercises.rows import (
    FULL_LIMIT,
    HEAD,
    NEW_OWNER_MARK,
    REJECTED_MARK,
    SHARED_MARK,
    TAIL,
    OffsetEntry,
    Sampled,
    TraceRow,
    _as_view,
    format_number,
    offset_entries,
)
from llmfs.tensor import Tensor, TensorError, TensorView
from llmfs.widgets.html import render_trace_html
from llmfs.widgets.text import render_trace


@dataclass(frozen=True)
class Trace:
    """A whole trace table: rows in order. ``repr`` is the fixed-width text table (what notebook
    validation compares); in a notebook it renders as an HTML table."""

    rows: tuple[TraceRow, ...]
    title: str = ""
    sources: tuple[str, ...] = field(default=())
    #: The view of each row (``None`` for a rejected one), for widgets that show offset tables.
    views: tuple[TensorView | None, ...] = field(default=(), repr=False, compare=False)
    #: For each row that copied a known view, that source view (else ``None``), so a drawing of
    #: the row can join every new offset to the source offset it came from.
    copied_from: tuple[TensorView | None, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_steps(
        cls,
        steps: Iterable[Step | tuple[str, Any]],
        owners: Mapping[str, Tensor | TensorView] | None = None,
        title: str = "",
    ) -> Trace:
        """Rows for ``steps`` (``Step`` objects or ``(label, result)`` pairs).

        ``owners`` names the source owners (default: the first owner met is ``base``).
        """
        prepared = [s if isinstance(s, Step) else Step(*s) for s in steps]
        given = dict(owners or {})
        if not given:
            first = next(
                (s.result for s in prepared if not isinstance(s.result, TensorError)), None
            )
            if first is not None:
                given = {"base": first}
        names = OwnerNames(given)  # type: ignore[arg-type]
        rows = tuple(describe(s.label, s.result, names, s.copied_from) for s in prepared)
        views = tuple(view_or_none(s.result) for s in prepared)
        sources = tuple(s.copied_from for s in prepared)
        return cls(rows, title, tuple(sorted(given)), views, sources)

    @property
    def copies(self) -> tuple[TraceRow, ...]:
        """The rows that created a new owner and know their source (they have a mapping)."""
        return tuple(row for row in self.rows if row.mapping is not None)

    def __repr__(self) -> str:
        return render_trace(self)

    def _repr_html_(self) -> str:
        return render_trace_html(self)


def trace(
    source: Tensor | TensorView,
    operations: Sequence[str | tuple[str, Callable[[], Any]]],
    *,
    name: str = "base",
    namespace: Mapping[str, Any] | None = None,
    title: str = "",
) -> Trace:
    """The trace table: one row per operation, refused requests kept as rows.

    ``source`` is bound to ``name`` (default ``base``), which also names its owner. Each
    operation is a Python expression string, optionally ``alias = expression`` to use the result
    in later operations, e.g. ``["view = base.view()", "view.reshape([3, 2])",
    "sliced = view.slice(1, 1, 3)", "sliced.materialize()", "view.reshape([4, 2])"]``.
    The names of :mod:`llmfs.tensor` and ``namespace`` are available too. A ``TensorError``
    becomes a rejected row; ``x.materialize()``, ``materialize(x)`` and ``copying_transpose(x)``
    rows show the mapping to ``x``'s offsets. An operation may also be a ``(label, callable)``
    pair; the callable takes no arguments (its copies show no mapping: use :class:`Step` with
    ``copied_from`` and :meth:`Trace.from_steps` for that). Raises :class:`ExpressionError` for a
    Python error.
    """
    scope = default_namespace()
    scope.update(namespace or {})
    scope[name] = source
    owners = OwnerNames({name: _as_view(source).owner})
    rows = []
    views = []
    sources: list[TensorView | None] = []
    for operation in operations:
        if isinstance(operation, str):
            label = operation.strip()
            _, result, copied_from = evaluate(operation, scope)
        else:
            label, result, copied_from = _call(operation)
        rows.append(describe(label, result, owners, copied_from))
        views.append(view_or_none(result))
        sources.append(copied_from)
    return Trace(tuple(rows), title, (name,), tuple(views), tuple(sources))


def _call(operation: object) -> tuple[str, Tensor | TensorView | TensorError, None]:
    if not (isinstance(operation, tuple) and len(operation) == 2 and callable(operation[1])):
        raise ExpressionError(
            f"a trace operation is an expression string or a (label, callable) pair, got "
            f"{operation!r}"
        )
    label, function = operation
    try:
        result = function()
    except TensorError as error:
        return str(label), error, None
    except Exception as error:
        raise ExpressionError(f"{label} failed with {type(error).__name__}: {error}") from None
    if not isinstance(result, (Tensor, TensorView)):
        raise ExpressionError(f"{label} gave a {type(result).__name__}; a trace row needs a tensor")
    return str(label), result, None


__all__ = [
    "FULL_LIMIT",
    "HEAD",
    "NEW_OWNER_MARK",
    "REJECTED_MARK",
    "SHARED_MARK",
    "TAIL",
    "ExpressionError",
    "OffsetEntry",
    "OwnerNames",
    "Sampled",
    "Step",
    "Trace",
    "TraceRow",
    "describe",
    "evaluate",
    "format_number",
    "offset_entries",
    "owners_in",
    "trace",
]
