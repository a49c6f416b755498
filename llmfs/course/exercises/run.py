"""Running an exercise's expression: :func:`run` gives an :class:`Outcome`, whose
:meth:`~Outcome.truth` is each field's true value.

A ``TensorError`` is an outcome (the request was refused), not a failure; a Python error in the
expression is an :class:`~llmfs.course.exercises.describe.ExpressionError`. The outcome also
keeps what the expression asked for (:class:`Call`: the method and its literal arguments), so
the misconception detectors can name a mistake by the request that was made.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llmfs.course.exercises.describe import (
    ExpressionError,
    OwnerNames,
    default_namespace,
    describe,
    evaluate,
    owners_in,
)
from llmfs.course.exercises.entries import PredictionError, field_name, plain_value
from llmfs.course.exercises.rows import TraceRow
from llmfs.tensor import Tensor, TensorError, TensorView


# eq=False (here and on Outcome): they hold tensors, whose == is elementwise (and which are
# unhashable), so two of them are the same only when they are one object.
@dataclass(frozen=True, eq=False)
class Call:
    """What a string expression asked for, read from its syntax: the method (``slice``,
    ``transpose``, ``getitem`` for ``x[i]``...), its literal arguments (``None`` where an argument
    is not a literal) and the receiver's view (``None`` when it is not a tensor)."""

    method: str
    args: tuple[Any, ...]
    source: TensorView | None


@dataclass(frozen=True, eq=False)
class Outcome:
    """What an expression gave: its trace ``row`` and the view (``None`` when rejected), or, for
    an expression that gives a dict of plain values, ``plain`` (and ``row`` is ``None``)."""

    label: str
    row: TraceRow | None
    view: TensorView | None
    exception: TensorError | None
    plain: Mapping[str, Any] | None = None
    call: Call | None = None

    def truth(self, field: str) -> Any:
        """The true value of ``field``, in :func:`normalize`'s canonical form (``None`` when the
        field does not apply, e.g. the shape of a rejected request)."""
        if self.plain is not None:
            if field not in self.plain:
                raise PredictionError(
                    f"{self.label} gives the keys {sorted(self.plain)}, not {field!r}"
                )
            return plain_value(self.plain[field])
        field = field_name(field)
        row = self.row
        assert row is not None
        if field == "error":
            return row.error if row.rejected else "none"
        if row.rejected or self.view is None:
            return None
        if field == "shape":
            return row.shape
        if field == "strides":
            return row.strides
        if field == "base_offset":
            return row.base_offset
        if field == "offsets":
            return tuple(self.view.logical_offsets())
        if field == "values":
            return self.view.tolist()
        if field == "contiguous":
            return row.contiguous
        return "new" if row.new_owner else "shared"


def run(
    expression: str | Callable[[], Any],
    namespace: Mapping[str, Any] | None = None,
    *,
    label: str | None = None,
    plain: bool = False,
) -> Outcome:
    """Evaluates ``expression`` (a string, optionally ``name = ...``, or a no-argument callable)
    and describes the result; a ``TensorError`` is an outcome, not a failure. With ``plain``, the
    string expression must give a dict of plain values (an exercise whose fields are its keys).

    Owners reachable from ``namespace`` (for a callable: its globals and closure) exist before the
    run and read as ``shared``; an owner the expression creates reads as ``copy``. Raises
    :class:`~llmfs.course.exercises.describe.ExpressionError` for a Python error in the expression.
    """
    if callable(expression):
        scope = dict(getattr(expression, "__globals__", {}))
        for name, cell in zip(
            getattr(getattr(expression, "__code__", None), "co_freevars", ()),
            getattr(expression, "__closure__", None) or (),
        ):
            scope[name] = cell.cell_contents
        scope.update(namespace or {})
        owners = OwnerNames(owners_in(scope))
        text = str(label or getattr(expression, "__name__", "expression"))
        copied_from = None
        try:
            result: Any = expression()
        except TensorError as error:
            result = error
        except Exception as error:
            raise ExpressionError(f"{text} failed with {type(error).__name__}: {error}") from None
        if not isinstance(result, (Tensor, TensorView, TensorError)):
            raise ExpressionError(f"{text} gave a {type(result).__name__}, not a tensor")
    else:
        scope = default_namespace()
        scope.update(namespace or {})
        text = label or expression.strip()
        if plain:
            return Outcome(text, None, None, None, plain=_evaluate_plain(expression, scope))
        owners = OwnerNames(owners_in(namespace or {}))
        call = _read_call(expression, scope)
        _, result, copied_from = evaluate(expression, scope)
        row = describe(text, result, owners, copied_from)
        if isinstance(result, TensorError):
            return Outcome(text, row, None, result, call=call)
        view = result.view() if isinstance(result, Tensor) else result
        return Outcome(text, row, view, None, call=call)
    row = describe(text, result, owners, copied_from)
    if isinstance(result, TensorError):
        return Outcome(text, row, None, result)
    view = result.view() if isinstance(result, Tensor) else result
    return Outcome(text, row, view, None)


def _evaluate_plain(expression: str, scope: dict[str, Any]) -> dict[str, Any]:
    try:
        result = eval(compile(expression.strip(), "<expression>", "eval"), scope)
    except Exception as error:
        raise ExpressionError(
            f"{expression!r} failed with {type(error).__name__}: {error}"
        ) from None
    if not isinstance(result, Mapping):
        raise ExpressionError(f"{expression!r} gave a {type(result).__name__}, not a dict")
    return {str(k): v for k, v in result.items()}


def _read_call(expression: str, scope: Mapping[str, Any]) -> Call | None:
    """The method and literal arguments of ``receiver.method(...)`` or ``receiver[i, ...]``;
    the receiver is evaluated (a name or an attribute chain without calls only, so nothing
    runs twice)."""
    try:
        node = ast.parse(expression.strip(), mode="eval").body
    except SyntaxError:
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        method, receiver, raw = node.func.attr, node.func.value, list(node.args)
    elif isinstance(node, ast.Subscript):
        method, receiver = "getitem", node.value
        index = node.slice
        raw = list(index.elts) if isinstance(index, ast.Tuple) else [index]
    else:
        return None
    args = []
    for arg in raw:
        try:
            args.append(ast.literal_eval(arg))
        except (ValueError, SyntaxError, TypeError):
            args.append(None)
    source = None
    if _is_plain_reference(receiver):
        try:
            found = eval(compile(ast.Expression(receiver), "<receiver>", "eval"), dict(scope))
        except Exception:
            found = None
        if isinstance(found, Tensor):
            source = found.view()
        elif isinstance(found, TensorView):
            source = found
    return Call(method, tuple(args), source)


def _is_plain_reference(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Attribute):
        return _is_plain_reference(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        # ``t.view()`` makes a view without side effects.
        return node.func.attr == "view" and not node.args and _is_plain_reference(node.func.value)
    return False


__all__ = ["Call", "Outcome", "run"]
