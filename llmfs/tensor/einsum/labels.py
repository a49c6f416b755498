"""Binding an expression's labels to operand shapes: which axis is which label, and its extent.

The rules, checked here (each violation is an :class:`EinsumError` naming the label or operand):

* **Every axis is labelled.** A term without ``...`` names each axis of its operand once; with
  ``...``, the letters name the axes before and after it and ``...`` covers the rest (possibly
  none). A scalar (rank 0) operand takes an empty term.
* **Matching labels need equal extents, or 1.** A label shared by several operands must have the
  same size in each, except that a size-1 axis broadcasts to the others' size.
* **Ellipses broadcast right-aligned**, as NumPy broadcasts shapes: the axes under the ``...`` of
  all operands are aligned at their last axis, and each aligned position must have equal sizes,
  or 1.
* **A label repeated within one term takes a diagonal**: those axes are read together (element
  ``(i, i)``), so they must have exactly equal sizes (a size 1 does not broadcast there).
* **Output labels** are unique (checked when parsing) and each appears in some input; the labels
  absent from the output are summed over.
* **The implicit output** (no ``->``) is the ellipsis axes, then the labels that occur exactly
  once in the whole expression, sorted in ASCII order (uppercase before lowercase), as NumPy.
* An explicit output without ``...`` is an error when the inputs' ``...`` covers any axis.

Ellipsis axes get keys ``".0"``, ``".1"``... (never a letter, so never a user label), numbered
after right-alignment so that equal keys are the same broadcast axis in every operand.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmfs.tensor.einsum.parse import ELLIPSIS, ParsedExpression, Term
from llmfs.tensor.errors import EinsumError


def ellipsis_key(index: int) -> str:
    """The key of the ``index``-th broadcast ellipsis axis (``".0"``, ``".1"``...)."""
    return f".{index}"


def is_ellipsis_key(key: str) -> bool:
    """True for the key of an ellipsis axis."""
    return key.startswith(".")


@dataclass(frozen=True)
class Binding:
    """An expression bound to operand shapes.

    ``keys[i]`` has one key per axis of operand ``i`` (a label repeated in a term repeats its key
    there); ``extents`` maps every key to its broadcast size; ``output`` lists the output's keys
    in order.
    """

    keys: tuple[tuple[str, ...], ...]
    extents: dict[str, int]
    output: tuple[str, ...]


def _axis_keys(
    expression: str, term: Term, operand: int, shape: tuple[int, ...]
) -> tuple[list[str], tuple[int, ...]]:
    """One key per axis of the operand (letters; ellipsis axes marked ``...``, numbered later),
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


class _Extents:
    """Sizes per key, merged with the "equal, or 1" rule; remembers which operand set each."""

    def __init__(self, parsed: ParsedExpression) -> None:
        self.parsed = parsed
        self.sizes: dict[str, int] = {}
        self.owner: dict[str, int] = {}

    def merge(self, key: str, size: int, operand: int, position: int | None) -> None:
        known = self.sizes.get(key)
        if known is None or known == 1:
            if known is None or size != 1:
                self.sizes[key], self.owner[key] = size, operand
            return
        if size in (known, 1):
            return
        other = self.owner[key]
        if is_ellipsis_key(key):
            raise EinsumError(
                self.parsed.expression,
                f"the axes under '...' broadcast right-aligned, but axis {key[1:]} of the "
                f"broadcast '...' has size {size} in operand {operand} and {known} in operand "
                f"{other} (sizes must be equal, or 1)",
                operand=operand,
                label=ELLIPSIS,
                position=position,
            )
        raise EinsumError(
            self.parsed.expression,
            f"label {key!r} has size {size} in operand {operand} but size {known} in operand "
            f"{other} (a label's sizes must be equal, or 1 to broadcast)",
            operand=operand,
            label=key,
            position=position,
        )


def bind(parsed: ParsedExpression, shapes: tuple[tuple[int, ...], ...]) -> Binding:
    """Binds ``parsed`` to operands of ``shapes`` by the module's rules.

    Raises :class:`EinsumError` for a term/operand count mismatch and for every rule violation,
    pointing at the operand, label and character involved.
    """
    expression = parsed.expression
    if len(parsed.inputs) != len(shapes):
        raise EinsumError(
            expression,
            f"the expression has {len(parsed.inputs)} input term(s) but {len(shapes)} "
            f"operand(s) were given",
        )
    keys_per_operand: list[list[str]] = []
    ellipsis_shapes: list[tuple[int, ...]] = []
    for index, (term, shape) in enumerate(zip(parsed.inputs, shapes)):
        keys, covered = _axis_keys(expression, term, index, shape)
        keys_per_operand.append(keys)
        ellipsis_shapes.append(covered)

    # The '...' axes broadcast right-aligned across operands.
    extents = _Extents(parsed)
    ellipsis_rank = max((len(s) for s in ellipsis_shapes), default=0)
    for index, covered in enumerate(ellipsis_shapes):
        lead = ellipsis_rank - len(covered)
        numbered = iter(ellipsis_key(lead + j) for j in range(len(covered)))
        keys = keys_per_operand[index]
        keys_per_operand[index] = [next(numbered) if k == ELLIPSIS else k for k in keys]
        term = parsed.inputs[index]
        where = term.positions[term.labels.index(ELLIPSIS)] if covered else None
        for j, size in enumerate(covered):
            extents.merge(ellipsis_key(lead + j), size, index, where)

    # Letters: exactly equal sizes within a term (diagonals), equal-or-1 across operands.
    for index, (term, keys) in enumerate(zip(parsed.inputs, keys_per_operand)):
        local: dict[str, int] = {}
        positions = iter(p for label, p in zip(term.labels, term.positions) if label != ELLIPSIS)
        for axis, key in enumerate(keys):
            if is_ellipsis_key(key):
                continue
            position = next(positions)
            size = shapes[index][axis]
            if key in local and local[key] != size:
                raise EinsumError(
                    expression,
                    f"label {key!r} repeats in operand {index}'s term, which takes a diagonal, "
                    f"so its axes must have exactly equal sizes; got {local[key]} and {size}",
                    operand=index,
                    label=key,
                    position=position,
                )
            local[key] = size
            extents.merge(key, size, index, position)

    ellipsis_keys = tuple(ellipsis_key(j) for j in range(ellipsis_rank))
    output = _output_keys(parsed, ellipsis_keys, extents.sizes)
    return Binding(tuple(tuple(k) for k in keys_per_operand), extents.sizes, output)


def _output_keys(
    parsed: ParsedExpression, ellipsis_keys: tuple[str, ...], extents: dict[str, int]
) -> tuple[str, ...]:
    if parsed.output is None:
        counts: dict[str, int] = {}
        for term in parsed.inputs:
            for label in term.named:
                counts[label] = counts.get(label, 0) + 1
        return ellipsis_keys + tuple(sorted(label for label, n in counts.items() if n == 1))
    out: list[str] = []
    for label, position in zip(parsed.output.labels, parsed.output.positions):
        if label == ELLIPSIS:
            out.extend(ellipsis_keys)
        elif label not in extents:
            raise EinsumError(
                parsed.expression,
                f"output label {label!r} does not appear in any input term",
                label=label,
                position=position,
            )
        else:
            out.append(label)
    if ellipsis_keys and not parsed.output.has_ellipsis:
        raise EinsumError(
            parsed.expression,
            f"the inputs' '...' covers {len(ellipsis_keys)} axis/axes but the output has no "
            f"'...' to hold them (add '...' to the output, or name those axes)",
            label=ELLIPSIS,
            position=parsed.output.start,
        )
    return tuple(out)


__all__ = ["Binding", "bind", "ellipsis_key", "is_ellipsis_key"]
