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
from dataclasses import dataclass, field
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
    is not a literal) and the receiver's view (``None`` when it is not a tensor).

    ``operands`` holds each positional argument's view (``None`` where the argument is not a
    tensor reached without side effects: a name, an attribute, a chain of view methods or a
    ``Tensor`` constructor with literal arguments) and ``keywords`` the literal keyword
    arguments (``axis=0``), so a detector can redo the request the other way a learner
    thought of (``ops.sum`` over another axis, shapes broadcast from the left)."""

    method: str
    args: tuple[Any, ...]
    source: TensorView | None
    operands: tuple[TensorView | None, ...] = ()
    keywords: Mapping[str, Any] = field(default_factory=dict)


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
    """The method and literal arguments of ``receiver.method(...)``, ``function(...)`` or
    ``receiver[i, ...]``; the receiver and the tensor arguments are evaluated only when they are
    plain references (:func:`_is_plain_reference`), so nothing with an effect runs twice."""
    try:
        node = ast.parse(expression.strip(), mode="eval").body
    except SyntaxError:
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        method, receiver, raw = node.func.attr, node.func.value, list(node.args)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        # A function of the namespace (``reduce(a, "ij", "i")``): no receiver.
        method, receiver, raw = node.func.id, None, list(node.args)
    elif isinstance(node, ast.Subscript):
        method, receiver = "getitem", node.value
        index = node.slice
        raw = list(index.elts) if isinstance(index, ast.Tuple) else [index]
    else:
        return None
    args = [_literal_or_none(arg) for arg in raw]
    keywords: dict[str, Any] = {}
    if isinstance(node, ast.Call):
        keywords = {k.arg: _literal_or_none(k.value) for k in node.keywords if k.arg is not None}
    operands = tuple(_tensor_view(arg, scope) for arg in raw) if isinstance(node, ast.Call) else ()
    source = _tensor_view(receiver, scope) if receiver is not None else None
    return Call(method, tuple(args), source, operands, keywords)


def _literal_or_none(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def _tensor_view(node: ast.expr, scope: Mapping[str, Any]) -> TensorView | None:
    """The view ``node`` evaluates to when it is a plain reference (so evaluating it again runs
    nothing with an effect), else ``None``."""
    if not _is_plain_reference(node):
        return None
    try:
        found = eval(compile(ast.Expression(node), "<operand>", "eval"), dict(scope))
    except Exception:
        return None
    if isinstance(found, Tensor):
        return found.view()
    return found if isinstance(found, TensorView) else None


#: Methods that make a view (or a new owner) and change nothing else: an expression built of
#: them may be evaluated again to read its layout.
_PURE_METHODS = frozenset(
    {"view", "transpose", "permute", "reshape", "slice", "split", "merge", "expand", "flip"}
)
#: ``Tensor`` constructors that allocate a new owner and change nothing else.
_PURE_CONSTRUCTORS = frozenset({"zeros", "ones", "from_vec", "arange", "full"})


def _is_plain_reference(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Attribute):
        return _is_plain_reference(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.keywords:
        literal = all(_is_literal(arg) for arg in node.args)
        if isinstance(node.func.value, ast.Name) and node.func.value.id == "Tensor":
            return node.func.attr in _PURE_CONSTRUCTORS and literal
        # ``t.view()``, ``t.transpose(0, 1)``...: views made without side effects.
        return node.func.attr in _PURE_METHODS and literal and _is_plain_reference(node.func.value)
    return False


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return False
    return True


__all__ = ["Call", "Outcome", "run"]
