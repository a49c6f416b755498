"""Einsum by seed 003's rules, planned once and executed many times.

An expression such as ``"bij,bjk->bik"`` names the axes of each operand with case-sensitive ASCII
letters. The rules (each violation is an :class:`EinsumError` that points at the label or operand):

* one term per operand, separated by commas; each term names every axis of its operand once,
  except that ``...`` may stand for any number of leading/middle axes (once per term);
* a label shared by several operands must have equal sizes there, or size 1 (which broadcasts);
* the ``...`` axes of all operands broadcast together, right-aligned (NumPy's rule);
* a label repeated *within* one term takes a diagonal, and those axes must have exactly equal
  sizes; it costs nothing, because a diagonal is a view whose stride is the sum of the axes'
  strides (:func:`~llmfs.tensor.layout.diagonal_layout`);
* output labels are unique and each appears in some input; labels absent from the output are
  summed;
* without ``->`` the output is the ``...`` axes followed by the labels that occur exactly once,
  sorted in ASCII order (uppercase first, as NumPy);
* an explicit output without ``...`` is an error when the inputs' ``...`` covers any axis;
* a scalar operand has an empty term: ``",ij->ij"`` scales a matrix.

How a plan computes
-------------------
:class:`EinsumPlan` does all checking and all layout work when it is made: from each operand's
(shape, strides, dtype) it derives a *normalised* layout with one axis per distinct label
(diagonals taken, size-1 axes expanded with stride 0) and a schedule of pairwise steps. Then
:meth:`EinsumPlan.execute` only applies those layouts to the operands' storage and runs the
schedule on the backend's primitives:

1. labels that occur in one operand only and not in the output are summed first (``reduce``);
2. operands are combined left to right; in each pair the shared labels that are still needed
   later are *batch* axes, the shared labels needed nowhere else are *contracted*, so the pair is
   one batched ``matmul`` after a permutation (a view) and, only when the axes cannot be merged
   in place, one copy. A pair with nothing to contract is a broadcast ``mul``;
3. the result is permuted into the output order (a copy only if the order differs).

:class:`ContractionPlan` is seed 003's ``D = alpha * (A @ B) + beta * C`` on top of it, with
``execute`` (allocates D) and ``execute_into`` (writes into an owned output).
"""

from __future__ import annotations

import operator
import string
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from llmfs.tensor import ops
from llmfs.tensor.dtypes import resolve_dtype
from llmfs.tensor.errors import (
    DescriptorError,
    DTypeError,
    EinsumError,
    NonContiguousReshapeError,
    OutputBufferError,
    PlanMismatchError,
    TensorError,
)
from llmfs.tensor.layout import (
    broadcast_layout,
    check_shape,
    diagonal_layout,
    element_count,
    row_major_strides,
)
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import TensorView, as_strided

LABELS = string.ascii_letters
ELLIPSIS = "..."


# --------------------------------------------------------------------------------------------
# Descriptors: what a plan knows about an operand
# --------------------------------------------------------------------------------------------


def _descriptor_strides(strides: object, rank: int) -> tuple[int, ...]:
    # operator.index, not int(): int() would truncate 1.7 to a stride of 1 and accept "3".
    if isinstance(strides, (str, bytes)):
        raise DescriptorError("strides", strides, "must be a sequence of integers")
    try:
        entries = tuple(strides)  # type: ignore[arg-type]  # anything else is refused below
    except TypeError:
        raise DescriptorError("strides", strides, "must be a sequence of integers") from None
    steps: list[int] = []
    for axis, entry in enumerate(entries):
        if isinstance(entry, (bool, np.bool_)):
            raise DescriptorError(
                "strides", strides, f"entry {axis} must be an integer, not a bool ({entry!r})"
            )
        try:
            steps.append(operator.index(entry))
        except TypeError:
            raise DescriptorError(
                "strides",
                strides,
                f"entry {axis} must be an integer (a number of elements), not "
                f"{type(entry).__name__} {entry!r}",
            ) from None
    if len(steps) != rank:
        raise DescriptorError(
            "strides", strides, f"must have one entry per axis ({rank}), but has {len(steps)}"
        )
    return tuple(steps)


def _descriptor_dtype(dtype: object) -> np.dtype:
    try:
        return resolve_dtype(dtype, where="a TensorDescriptor's dtype")
    except TensorError:
        raise
    except (TypeError, ValueError):
        # NumPy refuses some spellings (a dict, a malformed string) with a ValueError of its own.
        raise DescriptorError(
            "dtype", dtype, "must name a supported dtype (float16, float32 or float64)"
        ) from None


@dataclass(frozen=True)
class TensorDescriptor:
    """An operand's layout without its data: shape, strides (in elements) and storage dtype.

    ``dtype=None`` describes a real Python number (a scalar operand, shape ``()``).
    Build one from an operand with :meth:`of`, or explicitly (``strides=None`` is row-major).

    Raises :class:`InvalidShapeError` for a shape that is not a sequence of sizes ``>= 0``,
    :class:`DescriptorError` for strides that are not exact integers (one per axis: ``1.7`` is
    refused, never truncated) and :class:`DTypeError`/:class:`DescriptorError` for a dtype that is
    not float16, float32 or float64.
    """

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: np.dtype | None

    def __init__(
        self,
        shape: Sequence[int],
        strides: Sequence[int] | None = None,
        dtype: object | None = "float32",
    ) -> None:
        dims = check_shape(shape)
        steps = (
            row_major_strides(dims) if strides is None else _descriptor_strides(strides, len(dims))
        )
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "strides", steps)
        object.__setattr__(self, "dtype", None if dtype is None else _descriptor_dtype(dtype))

    @classmethod
    def of(cls, operand: object) -> TensorDescriptor:
        """The descriptor of a Tensor, TensorView, real number, or a descriptor itself."""
        if isinstance(operand, TensorDescriptor):
            return operand
        if ops.is_scalar(operand):
            return cls((), (), None)
        view = ops.as_view(operand, what="an einsum operand", numbers=True)
        return cls(view.shape, view.strides, view.dtype)

    @property
    def is_scalar(self) -> bool:
        """True for a Python-number operand."""
        return self.dtype is None


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Term:
    """One comma-separated part of an expression: its labels (letters, and ``"..."`` at most
    once) and where each one starts in the expression (for error carets)."""

    labels: tuple[str, ...]
    positions: tuple[int, ...]
    start: int
    text: str

    @property
    def named(self) -> tuple[str, ...]:
        """The letter labels, without the ellipsis."""
        return tuple(label for label in self.labels if label != ELLIPSIS)

    @property
    def has_ellipsis(self) -> bool:
        """True when the term contains ``...``."""
        return ELLIPSIS in self.labels


@dataclass(frozen=True)
class ParsedExpression:
    """An expression split into input terms and the output term (``None``: implicit output)."""

    expression: str
    inputs: tuple[Term, ...]
    output: Term | None


def _scan(expression: str, start: int, end: int, where: str, operand: int | None) -> Term:
    labels: list[str] = []
    positions: list[int] = []
    i = start
    while i < end:
        char = expression[i]
        if char in LABELS:
            labels.append(char)
            positions.append(i)
            i += 1
        elif char == ".":
            if expression[i : i + 3] != ELLIPSIS or i + 3 > end:
                raise EinsumError(
                    expression,
                    f"a '.' in {where} must be part of an ellipsis '...'",
                    operand=operand,
                    label=".",
                    position=i,
                )
            if ELLIPSIS in labels:
                raise EinsumError(
                    expression,
                    f"'...' may appear only once in {where}",
                    operand=operand,
                    label=ELLIPSIS,
                    position=i,
                )
            labels.append(ELLIPSIS)
            positions.append(i)
            i += 3
        elif char.isspace():
            i += 1
        elif char in "->":
            raise EinsumError(
                expression,
                f"{char!r} is only allowed as part of one arrow '->'",
                operand=operand,
                label=char,
                position=i,
            )
        else:
            raise EinsumError(
                expression,
                f"{char!r} in {where} is not a label: labels are the ASCII letters a-z and A-Z "
                f"(case-sensitive), plus one optional '...'",
                operand=operand,
                label=char,
                position=i,
            )
    return Term(tuple(labels), tuple(positions), start, expression[start:end])


def parse_expression(expression: object) -> ParsedExpression:
    """Splits and checks an expression's syntax (no operands needed).

    Raises :class:`EinsumError` for a non-string, more than one ``->``, a stray ``-``/``>``/``.``,
    a character that is not a label, two ellipses in one term, or a repeated output label.
    """
    if not isinstance(expression, str):
        raise EinsumError(
            repr(expression), f"the expression must be a string, got {type(expression).__name__}"
        )
    arrow = expression.find("->")
    if arrow >= 0:
        second = expression.find("->", arrow + 2)
        if second >= 0:
            raise EinsumError(expression, "'->' may appear only once", label="->", position=second)
    lhs_end = arrow if arrow >= 0 else len(expression)
    inputs: list[Term] = []
    start = 0
    for index, part in enumerate(expression[:lhs_end].split(",")):
        end = start + len(part)
        inputs.append(_scan(expression, start, end, f"operand {index}'s term", index))
        start = end + 1
    output = None
    if arrow >= 0:
        output_start = arrow + 2
        comma = expression.find(",", output_start)
        if comma >= 0:
            raise EinsumError(
                expression,
                "the output after '->' is one term and may not contain ','",
                label=",",
                position=comma,
            )
        output = _scan(expression, output_start, len(expression), "the output", None)
        seen: set[str] = set()
        for label, position in zip(output.labels, output.positions):
            if label in seen:
                raise EinsumError(
                    expression,
                    f"output label {label!r} appears more than once (output labels are unique)",
                    label=label,
                    position=position,
                )
            seen.add(label)
    return ParsedExpression(expression, tuple(inputs), output)


# --------------------------------------------------------------------------------------------
# Binding an expression to operand layouts
# --------------------------------------------------------------------------------------------


def _ellipsis_key(index: int) -> str:
    # Never a letter, so it cannot collide with a user label.
    return f".{index}"


@dataclass(frozen=True)
class _Operand:
    """An operand's normalised layout: one axis per distinct key, sizes = the label extents."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    keys: tuple[str, ...]


@dataclass(frozen=True)
class _Step:
    """One pairwise combination: (accumulator keys, operand keys) -> result keys."""

    batch: tuple[str, ...]
    left: tuple[str, ...]
    right: tuple[str, ...]
    contracted: tuple[str, ...]

    @property
    def result(self) -> tuple[str, ...]:
        return self.batch + self.left + self.right


def _axis_keys(
    expression: str, term: Term, operand: int, shape: tuple[int, ...]
) -> tuple[list[str], tuple[int, ...]]:
    """One key per axis of the operand (letters; ellipsis axes get ``.j`` keys, numbered later),
    and the sizes of the axes under the ellipsis."""
    rank = len(shape)
    named = term.named
    shown = f"{list(shape)}"
    if not term.has_ellipsis:
        if len(named) != rank:
            raise EinsumError(
                expression,
                f"operand {operand} has rank {rank} (shape {shown}) but its term "
                f"{term.text.strip()!r} names {len(named)} axes"
                + (" (a scalar operand takes an empty term)" if rank == 0 else ""),
                operand=operand,
                position=term.start,
            )
        return list(named), ()
    if len(named) > rank:
        raise EinsumError(
            expression,
            f"operand {operand} has rank {rank} (shape {shown}) but its term "
            f"{term.text.strip()!r} names {len(named)} axes besides '...'",
            operand=operand,
            position=term.start,
        )
    split = term.labels.index(ELLIPSIS)
    covered = rank - len(named)
    before, after = list(term.labels[:split]), list(term.labels[split + 1 :])
    return before + [ELLIPSIS] * covered + after, shape[split : split + covered]


class EinsumPlan:
    """A validated einsum for fixed operand layouts, executed any number of times.

    ``EinsumPlan(expression, *operands)`` takes, for each operand, a :class:`TensorDescriptor`,
    or a Tensor/TensorView/real number whose layout is used (the data is not kept: a plan holds
    no buffers). ``dtype`` asks for an output storage dtype; ``compute`` ("float32"/"float64")
    for the arithmetic precision (default: float64 when an input is float64, else float32; a
    float64 input refuses float32).

    Raises :class:`EinsumError` for every rule of the module docstring, pointing at the label or
    operand. :meth:`execute` raises :class:`PlanMismatchError` for operands whose shape, strides
    or dtype differ from the planned ones.
    """

    def __init__(
        self,
        expression: str,
        *operands: object,
        dtype: object | None = None,
        compute: object | None = None,
    ) -> None:
        parsed = parse_expression(expression)
        self._expression = expression
        self._descriptors = tuple(TensorDescriptor.of(o) for o in operands)
        if len(parsed.inputs) != len(self._descriptors):
            raise EinsumError(
                expression,
                f"the expression has {len(parsed.inputs)} input term(s) but "
                f"{len(self._descriptors)} operand(s) were given",
            )
        tensor_dtypes = [d.dtype for d in self._descriptors if d.dtype is not None]
        self._scalar_dtype = (
            ops.widest_dtype(tensor_dtypes) if tensor_dtypes else np.dtype(np.float64)
        )
        all_dtypes = [d.dtype or self._scalar_dtype for d in self._descriptors]
        self._dtype = ops.output_dtype(all_dtypes, dtype)
        self._compute = self._choose_compute(all_dtypes, compute)
        self._bind(parsed)

    # -- planning ----------------------------------------------------------------------------

    @staticmethod
    def _choose_compute(dtypes: list[np.dtype], compute: object | None) -> np.dtype:
        natural = ops.compute_dtype(dtypes)
        if compute is None:
            return natural
        chosen = resolve_dtype(compute, where="an einsum compute type")
        if chosen == np.float16:
            raise DTypeError(chosen.name, ("float32", "float64"), where="the compute type")
        if natural == np.float64 and chosen != np.float64:
            raise DTypeError(chosen.name, ("float64",), where="the compute type of float64 inputs")
        return chosen

    def _bind(self, parsed: ParsedExpression) -> None:
        expression = parsed.expression
        keys_per_operand: list[list[str]] = []
        ellipsis_shapes: list[tuple[int, ...]] = []
        for index, (term, desc) in enumerate(zip(parsed.inputs, self._descriptors)):
            keys, covered = _axis_keys(expression, term, index, desc.shape)
            keys_per_operand.append(keys)
            ellipsis_shapes.append(covered)

        # The '...' axes broadcast right-aligned across operands.
        ellipsis_rank = max((len(s) for s in ellipsis_shapes), default=0)
        extents: dict[str, int] = {}
        owner_of: dict[str, int] = {}
        for index, covered in enumerate(ellipsis_shapes):
            lead = ellipsis_rank - len(covered)
            numbered = iter(_ellipsis_key(lead + j) for j in range(len(covered)))
            keys = keys_per_operand[index]
            keys_per_operand[index] = [next(numbered) if k == ELLIPSIS else k for k in keys]
            for j, size in enumerate(covered):
                key = _ellipsis_key(lead + j)
                self._merge_extent(extents, owner_of, key, size, index, parsed, ellipsis=True)

        # Letters: equal sizes within a term (diagonals), equal-or-1 across operands.
        for index, (term, keys) in enumerate(zip(parsed.inputs, keys_per_operand)):
            shape = self._descriptors[index].shape
            local: dict[str, int] = {}
            label_positions = iter(
                p for label, p in zip(term.labels, term.positions) if label != ELLIPSIS
            )
            for axis, key in enumerate(keys):
                if key.startswith("."):
                    continue
                position = next(label_positions)
                size = shape[axis]
                if key in local and local[key] != size:
                    raise EinsumError(
                        expression,
                        f"label {key!r} repeats in operand {index}'s term, which takes a "
                        f"diagonal, so its axes must have exactly equal sizes; got "
                        f"{local[key]} and {size}",
                        operand=index,
                        label=key,
                        position=position,
                    )
                local[key] = size
                self._merge_extent(extents, owner_of, key, size, index, parsed, position=position)

        # The output keys.
        ellipsis_keys = tuple(_ellipsis_key(j) for j in range(ellipsis_rank))
        if parsed.output is None:
            counts: dict[str, int] = {}
            for term in parsed.inputs:
                for label in term.named:
                    counts[label] = counts.get(label, 0) + 1
            once = sorted(label for label, count in counts.items() if count == 1)
            out_keys = ellipsis_keys + tuple(once)
        else:
            out: list[str] = []
            for label, position in zip(parsed.output.labels, parsed.output.positions):
                if label == ELLIPSIS:
                    out.extend(ellipsis_keys)
                elif label not in extents:
                    raise EinsumError(
                        expression,
                        f"output label {label!r} does not appear in any input term",
                        label=label,
                        position=position,
                    )
                else:
                    out.append(label)
            if ellipsis_rank and not parsed.output.has_ellipsis:
                raise EinsumError(
                    expression,
                    f"the inputs' '...' covers {ellipsis_rank} axis/axes but the output has no "
                    f"'...' to hold them (add '...' to the output, or name those axes)",
                    label=ELLIPSIS,
                    position=parsed.output.start,
                )
            out_keys = tuple(out)

        self._out_keys = out_keys
        self._out_shape = tuple(extents[k] for k in out_keys)
        self._operands = tuple(
            self._normalise(desc, keys, extents)
            for desc, keys in zip(self._descriptors, keys_per_operand)
        )
        self._extents = extents
        self._schedule()

    def _merge_extent(
        self,
        extents: dict[str, int],
        owner_of: dict[str, int],
        key: str,
        size: int,
        operand: int,
        parsed: ParsedExpression,
        *,
        ellipsis: bool = False,
        position: int | None = None,
    ) -> None:
        known = extents.get(key)
        if known is None or known == size or size == 1:
            if known is None:
                extents[key] = size
                owner_of[key] = operand
            return
        if known == 1:
            extents[key] = size
            owner_of[key] = operand
            return
        other = owner_of[key]
        if ellipsis:
            term = parsed.inputs[operand]
            where = term.positions[term.labels.index(ELLIPSIS)]
            raise EinsumError(
                parsed.expression,
                f"the axes under '...' broadcast right-aligned, but axis {key[1:]} of the "
                f"broadcast '...' has size {size} in operand {operand} and {known} in operand "
                f"{other} (sizes must be equal, or 1)",
                operand=operand,
                label=ELLIPSIS,
                position=where,
            )
        raise EinsumError(
            parsed.expression,
            f"label {key!r} has size {size} in operand {operand} but size {known} in operand "
            f"{other} (a label's sizes must be equal, or 1 to broadcast)",
            operand=operand,
            label=key,
            position=position,
        )

    @staticmethod
    def _normalise(desc: TensorDescriptor, keys: list[str], extents: dict[str, int]) -> _Operand:
        groups: dict[str, list[int]] = {}
        for axis, key in enumerate(keys):
            groups.setdefault(key, []).append(axis)
        diagonals = [axes for axes in groups.values() if len(axes) > 1]
        shape, strides = diagonal_layout(desc.shape, desc.strides, diagonals)
        unique = tuple(groups)  # first-occurrence order, as diagonal_layout keeps it
        shape, strides = broadcast_layout(shape, strides, [extents[k] for k in unique])
        return _Operand(shape, strides, unique)

    def _schedule(self) -> None:
        out = set(self._out_keys)
        keys = [set(o.keys) for o in self._operands]
        self._pre_reduce: list[tuple[int, ...]] = []
        self._after_reduce: list[tuple[str, ...]] = []
        for index, operand in enumerate(self._operands):
            elsewhere = set().union(*(k for j, k in enumerate(keys) if j != index))
            axes = tuple(
                axis
                for axis, key in enumerate(operand.keys)
                if key not in out and key not in elsewhere
            )
            self._pre_reduce.append(axes)
            self._after_reduce.append(
                tuple(k for axis, k in enumerate(operand.keys) if axis not in axes)
            )
        self._steps: list[_Step] = []
        acc = self._after_reduce[0] if self._operands else ()
        for index in range(1, len(self._operands)):
            later = set(out).union(*(set(k) for k in self._after_reduce[index + 1 :]))
            other = self._after_reduce[index]
            step = _Step(
                batch=tuple(k for k in acc if k in other and k in later),
                left=tuple(k for k in acc if k not in other),
                right=tuple(k for k in other if k not in acc),
                contracted=tuple(k for k in acc if k in other and k not in later),
            )
            self._steps.append(step)
            acc = step.result
        self._final_keys = acc

    # -- metadata ----------------------------------------------------------------------------

    @property
    def expression(self) -> str:
        """The expression the plan was made for."""
        return self._expression

    @property
    def descriptors(self) -> tuple[TensorDescriptor, ...]:
        """The planned operand layouts."""
        return self._descriptors

    @property
    def output_shape(self) -> tuple[int, ...]:
        """Shape of the result."""
        return self._out_shape

    @property
    def output_dtype(self) -> np.dtype:
        """Storage dtype of the result."""
        return self._dtype

    @property
    def compute_dtype(self) -> np.dtype:
        """The arithmetic precision."""
        return self._compute

    @property
    def output_labels(self) -> str:
        """The output's labels as an explicit term (``...`` axes shown as ``...``)."""
        letters = "".join(k for k in self._out_keys if not k.startswith("."))
        has_ellipsis = any(k.startswith(".") for k in self._out_keys)
        return ("..." if has_ellipsis else "") + letters

    def __repr__(self) -> str:
        shapes = ", ".join(str(list(d.shape)) for d in self._descriptors)
        return (
            f"EinsumPlan({self._expression!r}, operands [{shapes}] -> {list(self._out_shape)} "
            f"{self._dtype.name})"
        )

    # -- execution ---------------------------------------------------------------------------

    def _check(self, operands: Sequence[object]) -> list[TensorView]:
        if len(operands) != len(self._descriptors):
            raise PlanMismatchError(
                "count", "number of operands", len(self._descriptors), len(operands)
            )
        views = []
        for index, (value, desc) in enumerate(zip(operands, self._descriptors)):
            if desc.is_scalar:
                if not ops.is_scalar(value):
                    raise PlanMismatchError(index, "kind", "a real number", type(value).__name__)
                views.append(ops.scalar_view(value, self._scalar_dtype))
                continue
            if ops.is_scalar(value):
                raise PlanMismatchError(index, "kind", "a tensor", "a real number")
            view = ops.as_view(value, what=f"operand {index}")
            if view.shape != desc.shape:
                raise PlanMismatchError(index, "shape", list(desc.shape), list(view.shape))
            if view.strides != desc.strides:
                raise PlanMismatchError(index, "strides", list(desc.strides), list(view.strides))
            if view.dtype != desc.dtype:
                raise PlanMismatchError(index, "dtype", desc.dtype.name, view.dtype.name)
            views.append(view)
        return views

    def execute(self, *operands: object) -> Tensor:
        """Runs the plan on operands of the planned layouts; returns a new owning Tensor."""
        return self._run(self._check(operands))

    def execute_into(self, out: Tensor, *operands: object) -> Tensor:
        """Runs the plan and writes the result into ``out``, which must be an owned Tensor of the
        planned shape and dtype that is not one of the operands' owners; views of ``out`` made
        before become stale (the write moves its version). Returns ``out``.

        Raises :class:`OutputBufferError` for a view, a shared buffer or a layout mismatch.
        """
        views = self._check(operands)
        check_output(out, self._out_shape, self._dtype, views)
        return write_into(out, self._run(views))

    def _run(self, views: list[TensorView]) -> Tensor:
        shape, dtype, compute = self._out_shape, self._dtype, self._compute
        if element_count(shape) == 0:
            return ops.empty_result(shape, dtype)
        if any(size == 0 for size in self._extents.values()):
            return ops.empty_result(shape, dtype)  # every value is a sum of nothing: 0
        terms: list[tuple[TensorView, bool]] = []  # (view, is it our own intermediate?)
        for view, operand, axes in zip(views, self._operands, self._pre_reduce):
            normal = as_strided(view.owner, operand.shape, operand.strides, view.base_offset)
            if axes:
                backend = ops.backend_for("reduce", "sum", view.dtype)
                reduced = backend.reduce("sum", normal, axes, dtype=compute, compute=compute)
                terms.append((reduced.view(), True))
            else:
                terms.append((normal, False))
        acc, acc_keys, owned = terms[0][0], self._after_reduce[0], terms[0][1]
        for index, step in enumerate(self._steps, start=1):
            last = index == len(self._steps)
            step_dtype = dtype if last and step.result == self._out_keys else compute
            acc = self._pair(
                acc, acc_keys, terms[index][0], self._after_reduce[index], step, step_dtype
            )
            acc_keys, owned = step.result, True
        if acc_keys == self._out_keys and owned and acc.dtype == dtype:
            return ops.with_shape(acc.owner, shape)
        order = [acc_keys.index(k) for k in self._out_keys]
        moved = acc.permute(order)
        return ops.backend_for("copy", None, acc.dtype).copy(moved, dtype=dtype)

    def _pair(
        self,
        a: TensorView,
        a_keys: tuple[str, ...],
        b: TensorView,
        b_keys: tuple[str, ...],
        step: _Step,
        dtype: np.dtype,
    ) -> TensorView:
        compute = self._compute
        sizes = self._extents
        batch = [sizes[k] for k in step.batch]
        left = [sizes[k] for k in step.left]
        right = [sizes[k] for k in step.right]
        wide = ops.widest_dtype([a.dtype, b.dtype])
        if not step.contracted:
            # Nothing to sum: a broadcast product over batch + left + right.
            full = (*batch, *left, *right)
            a_view = a.permute([a_keys.index(k) for k in step.batch + step.left])
            for _ in step.right:
                a_view = a_view.unsqueeze(a_view.rank)
            b_view = b.permute([b_keys.index(k) for k in step.batch + step.right])
            for _ in step.left:
                b_view = b_view.unsqueeze(len(batch))
            backend = ops.backend_for("binary", "mul", wide)
            product = backend.binary(
                "mul", a_view.expand(full), b_view.expand(full), dtype=dtype, compute=compute
            )
            return product.view()
        m = element_count(left)
        k = element_count([sizes[key] for key in step.contracted])
        n = element_count(right)
        a_mat = self._as_matrix(
            a.permute([a_keys.index(key) for key in step.batch + step.left + step.contracted]),
            (*batch, m, k),
        )
        b_mat = self._as_matrix(
            b.permute([b_keys.index(key) for key in step.batch + step.contracted + step.right]),
            (*batch, k, n),
        )
        backend = ops.backend_for("matmul", None, wide)
        product = backend.matmul(a_mat, b_mat, dtype=dtype, compute=compute)
        return product.view().reshape((*batch, *left, *right))

    def _as_matrix(self, view: TensorView, shape: tuple[int, ...]) -> TensorView:
        """Merges axis groups into matrix axes in place when the layout allows, else copies once."""
        try:
            return view.reshape(shape)
        except NonContiguousReshapeError:
            copy = ops.backend_for("copy", None, view.dtype).copy(view, dtype=self._compute)
            return copy.view().reshape(shape)


# --------------------------------------------------------------------------------------------
# Writing into an owned output
# --------------------------------------------------------------------------------------------


def check_output(
    out: object, shape: tuple[int, ...], dtype: np.dtype, inputs: Sequence[TensorView]
) -> None:
    """Refuses anything but an owned Tensor of ``shape`` and ``dtype`` that no input reads from.

    Raises :class:`OutputBufferError` naming the violated condition.
    """
    if isinstance(out, TensorView):
        raise OutputBufferError(
            "it is a TensorView; the output must be an owned Tensor (a view may alias other "
            "data and need not be contiguous)"
        )
    if not isinstance(out, Tensor):
        raise OutputBufferError(f"it must be a Tensor, got {type(out).__name__}")
    if out.shape != tuple(shape):
        raise OutputBufferError(
            f"its shape is {list(out.shape)} but the plan's output shape is {list(shape)}"
        )
    if out.dtype != dtype:
        raise OutputBufferError(
            f"its dtype is {out.dtype.name} but the plan's output dtype is {dtype.name}"
        )
    for index, view in enumerate(inputs):
        if view.owner is out:
            raise OutputBufferError(
                f"its storage is shared with operand {index} (the output must not be an input's "
                f"owner: writing would change the values being read)"
            )


def write_into(out: Tensor, result: Tensor) -> Tensor:
    """Copies ``result``'s values into ``out`` through a mutate() window (so views of ``out``
    made earlier go stale) and returns ``out``."""
    with out.mutate() as storage:
        storage[:] = result.as_slice()
    return out


# --------------------------------------------------------------------------------------------
# The contraction plan D = alpha * (A @ B) + beta * C
# --------------------------------------------------------------------------------------------


class ContractionPlan:
    """Seed 003's contraction plan: ``D = alpha * (A @ B) + beta * C``, validated once.

    ``a``, ``b`` and the optional ``c`` are :class:`TensorDescriptor` objects or operands whose
    layouts are used; ``expression`` labels the product (default: batched matrix product,
    ``"...ik,...kj->...ij"``); ``c`` must broadcast to the product's shape. The output dtype is the
    widest of the inputs unless ``dtype`` is given; arithmetic is float64 if any input is float64,
    else float32. Plans hold no buffers.

    Raises :class:`EinsumError` for a bad expression or mismatched A/B, :class:`BroadcastError`
    when C does not broadcast to the product.
    """

    def __init__(
        self,
        a: object,
        b: object,
        c: object | None = None,
        *,
        expression: str = "...ik,...kj->...ij",
        dtype: object | None = None,
    ) -> None:
        da, db = TensorDescriptor.of(a), TensorDescriptor.of(b)
        dc = None if c is None else TensorDescriptor.of(c)
        described = [d for d in (da, db, dc) if d is not None]
        if any(d.is_scalar for d in described):
            raise TensorError("a contraction plan takes tensors for A, B and C, not numbers")
        dtypes = [d.dtype for d in described]
        compute = ops.compute_dtype(dtypes)
        self._product = EinsumPlan(expression, da, db, dtype=compute, compute=compute)
        self._c = dc
        self._compute = compute
        self._dtype = ops.output_dtype(dtypes, dtype)
        if dc is not None:
            broadcast_layout(dc.shape, dc.strides, self._product.output_shape)

    @property
    def output_shape(self) -> tuple[int, ...]:
        """Shape of D."""
        return self._product.output_shape

    @property
    def output_dtype(self) -> np.dtype:
        """Storage dtype of D."""
        return self._dtype

    @property
    def compute_dtype(self) -> np.dtype:
        """The arithmetic precision."""
        return self._compute

    def _c_view(self, c: object | None) -> TensorView | None:
        if self._c is None:
            if c is not None:
                raise PlanMismatchError("C", "presence", "no C", "a C operand")
            return None
        if c is None:
            raise PlanMismatchError("C", "presence", "a C operand", "none")
        view = ops.as_view(c, what="C")
        for field, planned, actual in (
            ("shape", self._c.shape, view.shape),
            ("strides", self._c.strides, view.strides),
            ("dtype", self._c.dtype, view.dtype),
        ):
            if planned != actual:
                raise PlanMismatchError("C", field, planned, actual)
        return view

    def _compute_d(
        self, a: object, b: object, c: TensorView | None, alpha: float, beta: float
    ) -> Tensor:
        for name, value in (("alpha", alpha), ("beta", beta)):
            if not ops.is_scalar(value):
                raise TensorError(
                    f"{name} must be a real number (not a bool), got {type(value).__name__} "
                    f"{value!r}"
                )
            try:
                float(value)
            except OverflowError:
                raise TensorError(
                    f"{name} is too large for a float (its magnitude exceeds about 1.8e308)"
                ) from None
        compute = self._compute
        product = self._product.execute(a, b)
        if alpha != 1:
            product = ops.mul(product, Tensor.full((), float(alpha), compute))
        if c is None:
            if product.dtype == self._dtype:
                return product
            return ops.backend_for("copy", None, compute).copy(product.view(), dtype=self._dtype)
        scaled_c = c if beta == 1 else ops.mul(c, Tensor.full((), float(beta), compute))
        return ops.add(product, scaled_c, dtype=self._dtype)

    def execute(
        self,
        a: object,
        b: object,
        c: object | None = None,
        *,
        alpha: float = 1.0,
        beta: float = 1.0,
    ) -> Tensor:
        """D for these operands (which must match the planned layouts), as a new owning Tensor.

        Raises :class:`PlanMismatchError` when an operand differs from its descriptor or C is
        missing/unexpected.
        """
        return self._compute_d(a, b, self._c_view(c), alpha, beta)

    def execute_into(
        self,
        out: Tensor,
        a: object,
        b: object,
        c: object | None = None,
        *,
        alpha: float = 1.0,
        beta: float = 1.0,
    ) -> Tensor:
        """Computes D and writes it into ``out`` (an owned Tensor of the planned shape and dtype,
        not the owner of A, B or C); earlier views of ``out`` go stale. Returns ``out``.

        Raises :class:`OutputBufferError` for a view, a shared buffer or a layout mismatch.
        """
        c_view = self._c_view(c)
        inputs = [ops.as_view(a), ops.as_view(b)] + ([c_view] if c_view is not None else [])
        check_output(out, self.output_shape, self._dtype, inputs)
        return write_into(out, self._compute_d(a, b, c_view, alpha, beta))


__all__ = [
    "ContractionPlan",
    "DescriptorError",
    "EinsumPlan",
    "ParsedExpression",
    "TensorDescriptor",
    "Term",
    "parse_expression",
]
