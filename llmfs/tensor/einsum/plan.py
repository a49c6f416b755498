"""An einsum planned once for fixed operand layouts and executed many times.

Planning (when the plan is made) binds the expression to the operands' shapes
(:mod:`llmfs.tensor.einsum.labels`), derives for each operand a *normalised* layout with one axis
per distinct label (diagonals taken, size-1 axes expanded with stride 0), and a schedule:

1. labels that occur in one operand only and not in the output are summed first (``reduce``);
2. operands are combined left to right; in each pair the shared labels that are still needed
   later are *batch* axes and the shared labels needed nowhere else are *contracted*, so the
   pair is one batched ``matmul`` after a permutation (a view) and, only when the axes cannot be
   merged in place, one copy. A pair with nothing to contract is a broadcast ``mul``;
3. the result is put in the output's axis order.

Executing only applies those layouts to the operands' storage and runs the schedule on the
backend's primitives. ``execute`` returns a new Tensor; ``execute_into`` writes the last step
straight into the output it is given, through that output's layout (the output's axes are
permuted to the last step's order instead of permuting the result).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from llmfs.tensor import ops
from llmfs.tensor.dtypes import kind_operand, number_kind, promote, resolve_dtype
from llmfs.tensor.einsum.descriptor import TensorDescriptor
from llmfs.tensor.einsum.errors import OutputBufferError, PlanMismatchError
from llmfs.tensor.einsum.labels import Binding, bind, is_ellipsis_key
from llmfs.tensor.einsum.output import check_output
from llmfs.tensor.einsum.parse import parse_expression
from llmfs.tensor.errors import (
    DTypeError,
    NonContiguousReshapeError,
)
from llmfs.tensor.layout import (
    Layout,
    element_count,
    plan_reshape,
)
from llmfs.tensor.strided import check_reads
from llmfs.tensor.tape import is_grad_enabled, record
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import TensorView


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


def _normalise(desc: TensorDescriptor, keys: Sequence[str], extents: dict[str, int]) -> _Operand:
    groups: dict[str, list[int]] = {}
    for axis, key in enumerate(keys):
        groups.setdefault(key, []).append(axis)
    diagonals = [axes for axes in groups.values() if len(axes) > 1]
    unique = tuple(groups)  # first-occurrence order, as Layout.diagonal keeps it
    view = Layout(desc.shape, desc.strides).diagonal(diagonals).expand([extents[k] for k in unique])
    return _Operand(view.shape, view.strides, unique)


def _permuted(target: np.ndarray, target_keys: Sequence[str], keys: Sequence[str]) -> np.ndarray:
    """``target`` (axes in ``target_keys`` order) with its axes put in ``keys`` order."""
    return target.transpose([target_keys.index(k) for k in keys])


def _requires_grad(operand: object) -> bool:
    return bool(getattr(operand, "_requires_grad", False))


class EinsumPlan:
    """A validated einsum for fixed operand layouts, executed any number of times.

    ``EinsumPlan(expression, *operands)`` takes, for each operand, a :class:`TensorDescriptor`,
    or a Tensor/TensorView/number whose layout (a number: its kind) is used (the data is not
    kept: a plan holds no buffers). The output dtype is NumPy 2's promotion of the operands, by
    the function every op uses (:func:`~llmfs.tensor.dtypes.promote`), numbers weak as for
    :func:`~llmfs.tensor.ops.mul`: ``einsum("i,->i", bools, 2.0)`` is float64 and
    ``einsum("i,->i", float32s, 2.0)`` float32; each number becomes a 0-d operand of that
    dtype. ``dtype`` asks for an output storage dtype; ``compute`` ("float32"/"float64")
    for the arithmetic precision (default: float64 when an input is float64, else float32; a
    float64 input refuses float32).

    Raises :class:`EinsumError` for every rule of :mod:`llmfs.tensor.einsum`, pointing at the
    label or operand. :meth:`execute` raises :class:`PlanMismatchError` for operands whose shape,
    strides or dtype differ from the planned ones.
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
        binding = bind(parsed, tuple(d.shape for d in self._descriptors))
        self._scalar_dtype = promote(
            *(d.dtype if d.number is None else kind_operand(d.number) for d in self._descriptors)
        )
        all_dtypes = [d.dtype or self._scalar_dtype for d in self._descriptors]
        self._dtype = ops.output_dtype(all_dtypes, dtype)
        self._compute = self._choose_compute(all_dtypes, compute)
        self._plan(binding)

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

    def _plan(self, binding: Binding) -> None:
        self._extents = binding.extents
        self._out_keys = binding.output
        self._out_shape = tuple(binding.extents[k] for k in binding.output)
        self._operands = tuple(
            _normalise(desc, keys, binding.extents)
            for desc, keys in zip(self._descriptors, binding.keys)
        )
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
        letters = "".join(k for k in self._out_keys if not is_ellipsis_key(k))
        has_ellipsis = any(is_ellipsis_key(k) for k in self._out_keys)
        return ("..." if has_ellipsis else "") + letters

    def __repr__(self) -> str:
        shapes = ", ".join(str(list(d.shape)) for d in self._descriptors)
        return (
            f"EinsumPlan({self._expression!r}, operands [{shapes}] -> {list(self._out_shape)} "
            f"{self._dtype.name})"
        )

    # -- execution ---------------------------------------------------------------------------

    def check_operands(self, operands: Sequence[object]) -> list[TensorView]:
        """The operands as views after checking them against the planned descriptors (a real
        number becomes a 0-d view). Raises :class:`PlanMismatchError`."""
        if len(operands) != len(self._descriptors):
            raise PlanMismatchError(
                "count", "number of operands", len(self._descriptors), len(operands)
            )
        views = []
        for index, (value, desc) in enumerate(zip(operands, self._descriptors)):
            if desc.is_scalar:
                if not ops.is_scalar(value):
                    raise PlanMismatchError(index, "kind", "a number", type(value).__name__)
                kind = number_kind(value)
                # np.dtype("int64") == int is True in NumPy, so the kinds' types are compared too.
                if type(kind) is not type(desc.number) or kind != desc.number:
                    raise PlanMismatchError(
                        index, "kind", _kind_name(desc.number), _kind_name(kind)
                    )
                views.append(ops.scalar_view(value, self._scalar_dtype))  # type: ignore[arg-type]
                continue
            if ops.is_scalar(value):
                raise PlanMismatchError(index, "kind", "a tensor", "a real number")
            view = ops.as_view(value, what=f"operand {index}")
            for field, planned, actual in (
                ("shape", desc.shape, view.shape),
                ("strides", desc.strides, view.strides),
            ):
                if planned != actual:
                    raise PlanMismatchError(index, field, list(planned), list(actual))
            if view.dtype != desc.dtype:
                raise PlanMismatchError(index, "dtype", desc.dtype, view.dtype)
            views.append(view)
        return views

    def execute(self, *operands: object) -> Tensor:
        """Runs the plan on operands of the planned layouts; returns a new owning Tensor.

        When an operand requires grad (and grad mode is on) the execution is recorded on the
        tape exactly as ``einsum(expression, *operands)`` is, so ``backward()`` runs einsum's
        rule (its backward is einsums) and a plan executed many times records each execution."""
        if is_grad_enabled() and any(_requires_grad(o) for o in operands):
            return record("einsum", self._recorded, (self._expression, *operands), {})
        return self._execute(*operands)

    def _recorded(self, expression: str, *operands: object) -> Tensor:
        # What the tape runs (recording off): the rule reads the expression from the record.
        return self._execute(*operands)

    def _execute(self, *operands: object) -> Tensor:
        views = self.check_operands(operands)
        result = self.run(views, None)
        assert result is not None  # without a target, run returns the new tensor
        ops.check_unchanged(*views)
        return result

    def execute_into(self, out: Tensor | TensorView, *operands: object) -> Tensor | TensorView:
        """Runs the plan and writes the result into ``out``: a Tensor, or a fresh view of one
        (any layout that reaches each offset once: permuted, sliced, flipped), of the planned
        shape and dtype, whose owner is not an operand's owner. The last step writes through
        ``out``'s layout into its owner's storage; a temporary of the output's size is made only
        where the backend needs one: a matrix product or sum whose ``out`` dtype is not the
        compute precision (the result is rounded once, from the temporary), output axes that
        cannot be merged into the matrix product's axes, or a backend that cannot write strided
        memory (it computes, then copies through ``out``'s layout). Views of the owner made
        before go stale (the write moves its version). Returns ``out`` (a view given is returned
        made again at the new version).

        Raises :class:`OutputBufferError` for a buffer of another shape or dtype, a broadcast
        view, or shared storage, and :class:`PlanMismatchError` as :meth:`execute`. A write into
        a given buffer is not recorded on the tape, so while grad mode is on an operand that
        requires grad is refused too (:class:`OutputBufferError`, as PyTorch refuses ``out=``
        with autograd): :meth:`execute` records, and ``no_grad()`` allows the write.
        """
        if is_grad_enabled() and any(_requires_grad(o) for o in operands):
            raise OutputBufferError(
                "an operand requires grad, and a write into a given buffer is not recorded for "
                "backward(); use execute() (recorded), or execute_into under no_grad()"
            )
        views = self.check_operands(operands)
        output = check_output(out, self._out_shape, self._dtype, views)
        with output.target() as target:
            self.run(views, target)
        ops.check_unchanged(*views)
        return output.result()

    def run(self, views: list[TensorView], target: np.ndarray | None) -> Tensor | None:
        """Runs the schedule on checked operand views. With ``target`` (a writable array of the
        output shape, over another owner's storage), the last step writes into it and ``None``
        is returned; without, a new Tensor is returned."""
        shape, dtype, compute = self._out_shape, self._dtype, self._compute
        if element_count(shape) == 0 or any(size == 0 for size in self._extents.values()):
            # No values, or every value is a sum of nothing: 0.
            if target is None:
                return ops.empty_result(shape, dtype)
            target[...] = 0
            return None
        # Each term reads a subset of the offsets its checked operand view reaches (a diagonal
        # sums strides, a broadcast adds zero strides), so it needs no second bounds check.
        terms = [
            TensorView._trusted(
                view.owner, Layout(operand.shape, operand.strides, view.base_offset)
            )
            for view, operand in zip(views, self._operands)
        ]
        for view, term in zip(views, terms):
            # The work limit, on what is read: the operand as given, or less (a diagonal); the
            # broadcast of a size-1 axis against another operand is bounded by that operand.
            check_reads(min(view.size, term.size), term.dtype, f"einsum {self._expression!r}")
        if not self._steps:
            return self._single(terms[0], target)
        acc = self._reduced(terms[0], self._pre_reduce[0])
        acc_keys = self._after_reduce[0]
        for index, step in enumerate(self._steps, start=1):
            b = self._reduced(terms[index], self._pre_reduce[index])
            b_keys = self._after_reduce[index]
            last = index == len(self._steps)
            if last and target is not None:
                self._pair(acc, acc_keys, b, b_keys, step, dtype, target=target)
                return None
            step_dtype = dtype if last and step.result == self._out_keys else compute
            product = self._pair(acc, acc_keys, b, b_keys, step, step_dtype)
            assert product is not None
            acc, acc_keys = product.view(), step.result
        if acc_keys == self._out_keys and acc.dtype == dtype:
            return ops.with_shape(acc.owner, shape)
        moved = acc.permute([acc_keys.index(k) for k in self._out_keys])
        return ops.backend_for("copy", None, acc.dtype).copy(moved, dtype=dtype)

    def _reduced(self, view: TensorView, axes: tuple[int, ...]) -> TensorView:
        """``view`` with the labels only it has (and the output lacks) summed away."""
        if not axes:
            return view
        backend = ops.backend_for("reduce", "sum", view.dtype)
        compute = self._compute
        return backend.reduce("sum", view, axes, dtype=compute, compute=compute).view()

    def _single(self, view: TensorView, target: np.ndarray | None) -> Tensor | None:
        """One operand: a sum over its private labels and/or a permutation."""
        axes, keys = self._pre_reduce[0], self._after_reduce[0]
        dtype, compute = self._dtype, self._compute
        if target is not None:
            into = _permuted(target, self._out_keys, keys)
            if axes:
                backend = ops.backend_for("reduce", "sum", view.dtype)
                backend.reduce_into("sum", view, axes, into, compute=compute)
            else:
                ops.backend_for("copy", None, view.dtype).copy_into(view, into)
            return None
        if axes:
            backend = ops.backend_for("reduce", "sum", view.dtype)
            final = keys == self._out_keys
            result = backend.reduce(
                "sum", view, axes, dtype=dtype if final else compute, compute=compute
            )
            if final:
                return result
            view = result.view()
        moved = view.permute([keys.index(k) for k in self._out_keys])
        return ops.backend_for("copy", None, view.dtype).copy(moved, dtype=dtype)

    def _pair(
        self,
        a: TensorView,
        a_keys: tuple[str, ...],
        b: TensorView,
        b_keys: tuple[str, ...],
        step: _Step,
        dtype: np.dtype,
        *,
        target: np.ndarray | None = None,
    ) -> Tensor | None:
        """One step: a broadcast ``mul`` (nothing contracted) or a batched ``matmul``, into a new
        Tensor of ``dtype``, or into ``target`` (the output, axes in the plan's output order)."""
        compute = self._compute
        sizes = self._extents
        batch = [sizes[k] for k in step.batch]
        left = [sizes[k] for k in step.left]
        right = [sizes[k] for k in step.right]
        wide = ops.widest_dtype([a.dtype, b.dtype])
        into = None if target is None else _permuted(target, self._out_keys, step.result)
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
            a_full, b_full = a_view.expand(full), b_view.expand(full)
            if into is not None:
                backend.binary_into("mul", a_full, b_full, into, compute=compute)
                return None
            return backend.binary("mul", a_full, b_full, dtype=dtype, compute=compute)
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
        if into is None:
            product = backend.matmul(a_mat, b_mat, dtype=dtype, compute=compute)
            return ops.with_shape(product, (*batch, *left, *right))
        matrices = _merged(into, (*batch, m, n))
        if matrices is not None:
            backend.matmul_into(a_mat, b_mat, matrices, compute=compute)
        else:  # the output's axes cannot be merged into matrix axes in place: one temporary
            product = backend.matmul(a_mat, b_mat, dtype=into.dtype, compute=compute)
            result = product.view().reshape((*batch, *left, *right))
            ops.backend_for("copy", None, into.dtype).copy_into(result, into)
        return None

    def _as_matrix(self, view: TensorView, shape: tuple[int, ...]) -> TensorView:
        """Merges axis groups into matrix axes in place when the layout allows, else copies once."""
        try:
            return view.reshape(shape)
        except NonContiguousReshapeError:
            copy = ops.backend_for("copy", None, view.dtype).copy(view, dtype=self._compute)
            return copy.view().reshape(shape)


def _kind_name(kind: type | np.dtype | None) -> str:
    """How a plan mismatch names a number's kind: ``a Python float``, ``a NumPy float32``."""
    if isinstance(kind, type):
        return f"a Python {kind.__name__}"
    return f"a NumPy {np.dtype(kind).name} scalar"


def _merged(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """``array`` reshaped to ``shape`` over the same memory, or ``None`` when that needs a copy
    (the rule of :func:`~llmfs.tensor.layout.plan_reshape`)."""
    itemsize = array.itemsize
    strides = tuple(stride // itemsize for stride in array.strides)
    try:
        _, new_strides = plan_reshape(array.shape, strides, shape)
    except NonContiguousReshapeError:
        return None
    return np.lib.stride_tricks.as_strided(
        array, shape=shape, strides=tuple(s * itemsize for s in new_strides), writeable=True
    )


#: How many plans :func:`plan_for` remembers before it starts again from none.
PLAN_CACHE_SIZE = 256

_PLANS: dict[tuple[object, ...], EinsumPlan] = {}


def plan_for(expression: str, *operands: object, dtype: object | None = None) -> EinsumPlan:
    """The :class:`EinsumPlan` for these operands' layouts, planned once and then remembered.

    A plan depends only on the expression, each operand's shape, strides and dtype (a number's
    type for a scalar operand) and the requested dtype, so a model that calls the same few
    contractions again and again plans each once: planning costs more than a small contraction.
    Operands that are neither tensors nor numbers, and unhashable dtype spellings, are planned
    afresh each time. Errors are those of :class:`EinsumPlan`.
    """
    key = _plan_key(expression, operands, dtype)
    if key is None:
        return EinsumPlan(expression, *operands, dtype=dtype)
    plan = _PLANS.get(key)
    if plan is None:
        plan = EinsumPlan(expression, *operands, dtype=dtype)
        if len(_PLANS) >= PLAN_CACHE_SIZE:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


def _plan_key(
    expression: str, operands: tuple[object, ...], dtype: object | None
) -> tuple[object, ...] | None:
    layouts: list[object] = []
    for operand in operands:
        if isinstance(operand, (Tensor, TensorView)):
            layouts.append((operand.shape, operand.strides, operand.dtype))
        elif type(operand) in (int, float, bool):
            layouts.append(type(operand))
        else:
            return None
    key = (expression, tuple(layouts), dtype)
    try:
        hash(key)
    except TypeError:
        return None
    return key


__all__ = ["PLAN_CACHE_SIZE", "EinsumPlan", "plan_for"]
