"""What an expression did, as plain rows: owners named for people, :func:`describe` and
:func:`evaluate`.

Nothing here draws anything. A labelled step (a view, a tensor, or a refused request with its
:class:`~llmfs.tensor.TensorError`) becomes a frozen :class:`~llmfs.course.exercises.rows.TraceRow`
that the exercise engine judges against and that every renderer of :mod:`llmfs.widgets` (trace
tables, offset tables, figures) reads, so a verdict and a picture of one step never disagree.

Vocabulary (the trace table's):

* **owner**: the :class:`~llmfs.tensor.Tensor` whose storage a row reads, named for people
  (``base``, ``copy 1``, ... or names given by the caller), never by a memory address;
* **shared**: the row reads the storage of an owner that already existed;
* **new owner**: the row's value is a freshly allocated owner (a copy);
* **mapping**: for a copy, which source offset each new offset was copied from;
* **rejected**: the request raised a ``TensorError``; the row names the violated condition.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import llmfs.tensor as tensor_module
from llmfs.course import CourseError
from llmfs.course.exercises.rows import Sampled, TraceRow, _as_view, offset_entries
from llmfs.tensor import Tensor, TensorError, TensorView, copying_transpose


class ExpressionError(CourseError):
    """An expression given to a trace (:func:`llmfs.widgets.trace`) or an exercise could not be
    evaluated.

    Raised for Python errors in the expression itself (a typo, an unknown name, a wrong argument
    type); refusals by the tensor library are *not* errors here, they become rejected rows. The
    message quotes the expression and the Python error.
    """


# --------------------------------------------------------------------------------------------
# Owner names
# --------------------------------------------------------------------------------------------


class OwnerNames:
    """Stable, readable names for owners: given names first, then ``copy 1``, ``copy 2``, ...
    for copies and ``tensor 1``, ... for owners made from scratch (``Tensor.zeros(...)``): a
    caption then reads "owner tensor 1", never "owner new owner 1".

    Owners are told apart by identity, but only the order in which they are first met decides
    the names, so the same trace always gets the same names (never a memory address).
    """

    def __init__(self, given: Mapping[str, Tensor] | None = None, copy_prefix: str = "copy"):
        self._known: list[tuple[Tensor, str]] = []
        self._given: set[str] = set()
        self._counts: dict[str, int] = {}
        self._prefix = copy_prefix
        for name in sorted(given or {}):
            owner = _as_view(given[name]).owner  # type: ignore[index]
            if self.lookup(owner) is None:
                self._known.append((owner, name))
                self._given.add(name)

    def lookup(self, owner: Tensor) -> str | None:
        """The name of ``owner`` if it has one already, else ``None``."""
        for known, name in self._known:
            if known is owner:
                return name
        return None

    def is_given(self, name: str) -> bool:
        """True when ``name`` was given by the caller (a source owner, not a copy)."""
        return name in self._given

    def name(self, owner: Tensor, *, copy: bool = True) -> tuple[str, bool]:
        """``(name, first_seen)``: the owner's name, naming a new one ``copy N`` when it is a
        copy of a known view, or ``tensor N`` when it was made from scratch."""
        found = self.lookup(owner)
        if found is not None:
            return found, False
        prefix = self._prefix if copy else "tensor"
        self._counts[prefix] = self._counts.get(prefix, 0) + 1
        name = f"{prefix} {self._counts[prefix]}"
        self._known.append((owner, name))
        return name, True


# --------------------------------------------------------------------------------------------
# Steps and rows
# --------------------------------------------------------------------------------------------


# eq=False: it holds tensors, whose == is elementwise (and which are unhashable), so two
# of these are the same only when they are one object.
@dataclass(frozen=True, eq=False)
class Step:
    """One labelled entry of a trace: the ``result`` of a request, or the error it raised.

    ``copied_from`` is, for a copy, the view whose logical values were copied (so the row can
    show the mapping from new offsets to source offsets); ``None`` otherwise.
    """

    label: str
    result: Tensor | TensorView | TensorError
    copied_from: TensorView | None = None


def describe(
    label: str,
    result: Tensor | TensorView | TensorError,
    owners: OwnerNames,
    copied_from: TensorView | None = None,
) -> TraceRow:
    """The row for one step, naming owners through ``owners`` (which it updates).

    A tensor or view whose owner ``owners`` has not met yet is a new owner (``copy``); one whose
    owner it knows reads shared storage. Raises :class:`TensorError` for anything else.
    """
    if isinstance(result, TensorError):
        return TraceRow(
            label=label,
            status="rejected",
            error=type(result).__name__,
            condition=result.condition,
            message=str(result),
        )
    view = _as_view(result)
    name, first_seen = owners.name(view.owner, copy=copied_from is not None)
    entries = offset_entries(view)
    offsets = Sampled(
        tuple(e.offset for e in entries.head), tuple(e.offset for e in entries.tail), entries.total
    )
    values = Sampled(
        tuple(e.value for e in entries.head), tuple(e.value for e in entries.tail), entries.total
    )
    mapping = None
    mapping_source = None
    if first_seen and copied_from is not None:
        source_entries = offset_entries(copied_from)
        mapping = Sampled(
            tuple(zip(offsets.head, (e.offset for e in source_entries.head))),
            tuple(zip(offsets.tail, (e.offset for e in source_entries.tail))),
            entries.total,
        )
        mapping_source = owners.name(copied_from.owner)[0]
    return TraceRow(
        label=label,
        status="copy" if first_seen and not owners.is_given(name) else "shared",
        owner=name,
        layout=view.layout,
        contiguous=view.is_contiguous(),
        offsets=offsets,
        values=values,
        nested_values=view.tolist() if entries.complete else None,
        mapping=mapping,
        mapping_source=mapping_source,
    )


# --------------------------------------------------------------------------------------------
# Evaluating expressions
# --------------------------------------------------------------------------------------------


def default_namespace() -> dict[str, Any]:
    """The names of :mod:`llmfs.tensor`, which every expression may use (a fresh dict)."""
    return {name: getattr(tensor_module, name) for name in tensor_module.__all__}


def evaluate(
    expression: str, namespace: dict[str, Any]
) -> tuple[str | None, Tensor | TensorView | TensorError, TensorView | None]:
    """Evaluates ``"expr"`` or ``"name = expr"`` in ``namespace``.

    Returns ``(bound name or None, result or the TensorError raised, copied_from)``, where
    ``copied_from`` is the source view when the expression is ``x.materialize()``,
    ``materialize(x)`` or ``copying_transpose(x)``. A successful assignment binds the name in
    ``namespace``. Raises :class:`ExpressionError` for a Python error that is not a
    ``TensorError``, and when the result is neither a Tensor nor a TensorView.
    """
    try:
        tree = ast.parse(expression.strip(), mode="exec")
    except SyntaxError as error:
        raise ExpressionError(f"cannot read {expression!r}: {error.msg}") from None
    if len(tree.body) != 1:
        raise ExpressionError(f"{expression!r}: give one expression (optionally `name = ...`)")
    statement = tree.body[0]
    target: str | None = None
    if (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
    ):
        target = statement.targets[0].id
        node = statement.value
    elif isinstance(statement, ast.Expr):
        node = statement.value
    else:
        raise ExpressionError(f"{expression!r}: give an expression or `name = expression`")

    def run(sub: ast.expr) -> Any:
        code = compile(ast.Expression(sub), "<expression>", "eval")
        return eval(code, namespace)

    copied_from: TensorView | None = None
    try:
        source_node, how = _copy_source(node)
        if source_node is not None:
            source = _as_view(run(source_node))
            if how == "transpose":
                result: Any = copying_transpose(source)
                # Copy row k of the result came from column k of the source.
                copied_from = source.transpose(0, 1)
            else:
                result = source.materialize()
                copied_from = source
        else:
            result = run(node)
    except TensorError as error:
        return target, error, None
    except Exception as error:
        raise ExpressionError(
            f"{expression!r} failed with {type(error).__name__}: {error}"
        ) from None
    if not isinstance(result, (Tensor, TensorView)):
        raise ExpressionError(
            f"{expression!r} gave a {type(result).__name__}; a trace row needs a Tensor or a "
            f"TensorView"
        )
    if target is not None:
        namespace[target] = result
    return target, result, copied_from


def _copy_source(node: ast.expr) -> tuple[ast.expr | None, str]:
    if not isinstance(node, ast.Call) or node.keywords:
        return None, ""
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "materialize" and not node.args:
        return func.value, "materialize"
    if isinstance(func, ast.Name) and len(node.args) == 1:
        if func.id == "materialize":
            return node.args[0], "materialize"
        if func.id == "copying_transpose":
            return node.args[0], "transpose"
    return None, ""


def view_or_none(result: object) -> TensorView | None:
    """The view of a tensor or view result; ``None`` for anything else (a refusal)."""
    if isinstance(result, Tensor):
        return result.view()
    return result if isinstance(result, TensorView) else None


def owners_in(namespace: Mapping[str, Any]) -> dict[str, Tensor]:
    """Names for the owners reachable from ``namespace``: a Tensor is named by its variable
    (the alphabetically first one when several names hold it); an owner seen only through views
    is ``base`` (then ``base 2``, ...)."""
    named: dict[str, Tensor] = {}
    for key in sorted(namespace):
        value = namespace[key]
        if isinstance(value, Tensor) and not any(t is value for t in named.values()):
            named[key] = value
    unnamed = 0
    for key in sorted(namespace):
        value = namespace[key]
        if isinstance(value, TensorView) and not any(t is value.owner for t in named.values()):
            # Skip names a variable already holds, so an unnamed owner never displaces one.
            unnamed += 1
            label = "base" if unnamed == 1 else f"base {unnamed}"
            while label in named:
                unnamed += 1
                label = f"base {unnamed}"
            named[label] = value.owner
    return named


__all__ = [
    "ExpressionError",
    "OwnerNames",
    "Step",
    "default_namespace",
    "describe",
    "evaluate",
    "owners_in",
    "view_or_none",
]
