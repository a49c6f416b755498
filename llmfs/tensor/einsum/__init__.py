"""Einsum: Einstein summation over labelled axes, planned once and executed many times.

An expression such as ``"bij,bjk->bik"`` names the axes of each operand with case-sensitive ASCII
letters. The rules (each violation is an :class:`EinsumError` that points at the label, the
operand and the character):

* one term per operand, separated by commas; each term names every axis of its operand once,
  except that ``...`` may stand for any number of leading/middle axes (once per term);
* a label shared by several operands must have equal sizes there, or size 1 (which broadcasts);
* the ``...`` axes of all operands broadcast together, right-aligned (NumPy's rule);
* a label repeated *within* one term takes a diagonal, and those axes must have exactly equal
  sizes; it costs nothing, because a diagonal is a view whose stride is the sum of the axes'
  strides (:meth:`~llmfs.tensor.layout.Layout.diagonal`);
* output labels are unique and each appears in some input; labels absent from the output are
  summed;
* without ``->`` the output is the ``...`` axes followed by the labels that occur exactly once,
  sorted in ASCII order (uppercase first, as NumPy);
* an explicit output without ``...`` is an error when the inputs' ``...`` covers any axis;
* a scalar operand has an empty term: ``",ij->ij"`` scales a matrix.

The package has one module per idea:

* :mod:`~llmfs.tensor.einsum.parse`: the expression's syntax (terms, labels, the arrow);
* :mod:`~llmfs.tensor.einsum.labels`: binding labels to operand shapes (the size rules above,
  the implicit output);
* :mod:`~llmfs.tensor.einsum.descriptor`: :class:`TensorDescriptor`, an operand's layout
  without its data;
* :mod:`~llmfs.tensor.einsum.plan`: :class:`EinsumPlan`, the pairwise schedule and its
  execution (``execute`` into a new tensor, ``execute_into`` through a given output's layout);
* :mod:`~llmfs.tensor.einsum.output`: which outputs ``execute_into`` accepts;
* :mod:`~llmfs.tensor.einsum.contraction`: :class:`ContractionPlan`,
  ``D = alpha * (A @ B) + beta * C``;
* :mod:`~llmfs.tensor.einsum.functions`: the call :func:`einsum` (plan, then execute);
* :mod:`~llmfs.tensor.einsum.gradient`: einsum's backward rule (each operand's gradient is an
  einsum of the result's gradient with the other operands).
"""

from __future__ import annotations

from llmfs.tensor.einsum.contraction import ContractionPlan
from llmfs.tensor.einsum.descriptor import TensorDescriptor
from llmfs.tensor.einsum.errors import DescriptorError
from llmfs.tensor.einsum.functions import einsum
from llmfs.tensor.einsum.gradient import einsum_backward
from llmfs.tensor.einsum.parse import ELLIPSIS, LABELS, ParsedExpression, Term, parse_expression
from llmfs.tensor.einsum.plan import EinsumPlan
from llmfs.tensor.errors import EinsumError

__all__ = [
    "ELLIPSIS",
    "LABELS",
    "ContractionPlan",
    "DescriptorError",
    "EinsumError",
    "EinsumPlan",
    "ParsedExpression",
    "TensorDescriptor",
    "Term",
    "einsum",
    "einsum_backward",
    "parse_expression",
]
