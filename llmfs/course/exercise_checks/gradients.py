"""Checks of chapter 9's "implement it" exercises: backward rules, written by the learner.

Every answer is held to the library's own autograd (:mod:`llmfs.tensor.autograd`) on random
cases, and the autograd itself is held to finite differences by the library's tests; the
gradcheck exercise is held to :func:`llmfs.tensor.gradcheck` on functions whose backward is
right and functions whose backward is wrong (a ``detach`` in the wrong place).

* ``view_backward(grad, view)``: the one view rule. A case is a layout (shape, strides, base
  offset over a storage of some size, made by the library's view operations, plus broadcast axes
  of stride 0 and overlapping windows) and an integer gradient of the view's shape; the answer
  is the owner's storage-shaped gradient, compared exactly (integer sums have no rounding).
* ``expand_backward(grad, shape)``: a broadcast's backward, a sum over the broadcast axes.
* ``softmax_backward(y, g, axis)`` and ``layer_norm_backward(x, weight, eps, g)``: compared
  with the library's autograd through the chapter 8 layers to 1e-9.
* ``gradcheck(fn, x, eps, atol)``: True or False, as :func:`llmfs.tensor.gradcheck` answers.

Cases are plain JSON (the grader draws its own seeds); scalars, empty axes, size-1 axes and
negative strides are drawn where the function takes them. An answer that runs the library's
backward (``backward()``, the view rule, :func:`~llmfs.tensor.autograd.unbroadcast`,
``gradcheck``) is refused by the shortcut guard, with a message naming the rule to write.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np

import llmfs.tensor as lt
from llmfs.course.exercise_checks.cases import view_layout, views_at
from llmfs.course.exercise_checks.report import CheckReport
from llmfs.course.exercise_checks.shortcuts import Shortcuts
from llmfs.course.exercise_checks.spec import ImplementSpec, register
from llmfs.gpt import tensor_model
from llmfs.tensor import Tensor, TensorView, as_strided

#: Largest absolute difference from the library's gradient that counts as equal (float64).
TOLERANCE = 1e-9
AGREES = f"< {TOLERANCE:g}"
EPS = 1e-5

#: The library's backward machinery: running it is the work every exercise here asks for.
_BACKWARD = "llmfs.tensor.autograd.backward"
_VIEW_RULE = (
    "llmfs.tensor.autograd.view_backward",
    "llmfs.tensor.backends.base.Backend.scatter_add",
    "llmfs.tensor.backends.base.layout_offsets",
    "llmfs.tensor.backends.numpy_backend.NumpyBackend.scatter_add",
    "llmfs.tensor.backends.reference.ReferenceBackend.scatter_add",
)


# -- view_backward(grad, view) -----------------------------------------------------------------


def _view_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for _ in range(n):
        choice = rng.random()
        if choice < 0.15:
            # Overlapping windows (as_strided): several positions read one cell.
            count = rng.randint(1, 4)
            width = rng.randint(1, 3)
            step = rng.randint(0, 2)
            storage = max(1, (count - 1) * step + width)
            shape, strides, base = [count, width], [step, 1], 0
        else:
            shape, strides, base, storage = view_layout(
                rng, negative=True, scalar=0.08, empty=0.08, rank=(1, 3)
            )
            if choice < 0.45:
                # A broadcast axis: stride 0, the same cells once per position along it.
                axis = rng.randint(0, len(shape))
                shape.insert(axis, rng.randint(2, 3))
                strides.insert(axis, 0)
        cases.append(
            (
                {
                    "shape": shape,
                    "strides": strides,
                    "base_offset": base,
                    "storage": storage,
                    "grad": _integers(rng, shape),
                },
            )
        )
    return cases


def _integers(rng: random.Random, shape: list[int]) -> Any:
    """A gradient of ``shape`` as nested lists of small integers (sums of them are exact)."""
    count = int(np.prod(shape)) if shape else 1
    values = np.array([rng.randint(-5, 5) for _ in range(count)], dtype=np.int64)
    return values.reshape(shape).tolist()


def _view_grad(case: dict[str, Any]) -> np.ndarray:
    return np.array(case["grad"], dtype=np.float64).reshape(case["shape"])


def _view_owner(case: dict[str, Any], requires_grad: bool = False) -> Tensor:
    # The storage values play no part in the gradient: 100 + offset, as the offset tables draw.
    values = 100.0 + np.arange(case["storage"], dtype=np.float64)
    return Tensor.from_numpy(values, requires_grad=requires_grad)


def _view_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    owner = _view_owner(case)
    view = as_strided(owner, case["shape"], case["strides"], case["base_offset"])
    return _view_grad(case), view


def _view_reference(case: dict[str, Any]) -> list[float]:
    # The library's autograd: the view of an owner that requires grad, backward with the case's
    # gradient; the owner's .grad is the answer.
    owner = _view_owner(case, requires_grad=True)
    view = as_strided(owner, case["shape"], case["strides"], case["base_offset"])
    view.backward(Tensor.from_numpy(_view_grad(case)))
    assert owner.grad is not None
    return [float(v) for v in owner.grad.to_numpy().reshape(-1)]


def _flat_values(result: Any, call_args: tuple[Any, ...]) -> Any:
    if isinstance(result, (Tensor, TensorView)):
        result = result.to_numpy()
    if isinstance(result, (list, tuple, np.ndarray)):
        try:
            array = np.asarray(result, dtype=np.float64)
        except (TypeError, ValueError):
            return {"result": "a list that is not numbers"}
        return [float(v) for v in array.reshape(-1)]
    return {"result": f"a {type(result).__name__}, not a list or array"}


def _view_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if not isinstance(got, list) or not isinstance(want, list):
        return None
    grad = _view_grad(case).reshape(-1)
    size = case["storage"]
    if len(got) != len(want):
        return (
            f"the gradient of a view lands in its OWNER's storage: one value per storage cell "
            f"({size} here), not one per position of the view ({grad.size})"
        )
    owner = _view_owner(case)
    offsets = list(
        as_strided(owner, case["shape"], case["strides"], case["base_offset"]).logical_offsets()
    )
    assigned = np.zeros(size)
    for offset, value in zip(offsets, grad):
        assigned[offset] = value
    if got == assigned.tolist() and got != want:
        return (
            "a storage cell read by several positions (a stride 0, or overlapping windows) "
            "receives the SUM of their gradients: add into the buffer, do not assign"
        )
    at_positions = np.zeros(size)
    count = min(size, grad.size)  # a stride-0 view has more positions than storage cells
    at_positions[:count] = grad[:count]
    if got == at_positions.tolist():
        return (
            "the gradients sit at the view's positions 0, 1, 2, ...: each belongs to the "
            "storage cell its position reads (the base offset plus coordinates times strides)"
        )
    return None


def _view_size(case: dict[str, Any]) -> tuple[int, ...]:
    return (sum(case["shape"]), len(case["shape"]), case["storage"])


# -- expand_backward(grad, shape) ----------------------------------------------------------------


def _expand_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for _ in range(n):
        shape = [rng.choice((1, 1, 2, 3)) for _ in range(rng.randint(0, 3))]
        lead = [
            rng.randint(0, 3) if rng.random() < 0.1 else rng.randint(1, 3)
            for _ in range(rng.randint(0, 2))
        ]
        grown = [
            (rng.randint(0, 3) if rng.random() < 0.1 else rng.randint(1, 4)) if s == 1 else s
            for s in shape
        ]
        target = lead + grown
        cases.append(({"shape": shape, "target": target, "grad": _integers(rng, target)},))
    return cases


def _expand_grad(case: dict[str, Any]) -> np.ndarray:
    return np.array(case["grad"], dtype=np.float64).reshape(case["target"])


def _expand_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    return Tensor.from_numpy(_expand_grad(case)), list(case["shape"])


def _expand_reference(case: dict[str, Any]) -> dict[str, Any]:
    x = Tensor.from_numpy(np.zeros(case["shape"]), requires_grad=True)
    x.expand(case["target"]).backward(Tensor.from_numpy(_expand_grad(case)))
    assert x.grad is not None
    grad = x.grad.to_numpy()
    return {"shape": list(grad.shape), "values": [float(v) for v in grad.reshape(-1)]}


def _shaped_values(result: Any, call_args: tuple[Any, ...]) -> Any:
    if isinstance(result, (Tensor, TensorView)):
        array = result.to_numpy().astype(np.float64)
        return {"shape": list(array.shape), "values": [float(v) for v in array.reshape(-1)]}
    return {"result": f"a {type(result).__name__}, not a Tensor or TensorView"}


def _expand_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if not isinstance(got, dict) or "shape" not in got:
        return None
    if got["shape"] == case["target"] and case["target"] != case["shape"]:
        return (
            "the gradient of a broadcast has the shape of what was broadcast: the positions "
            "that read one value all send their gradient to it, so sum over the broadcast axes"
        )
    if got["shape"] != want["shape"]:
        return "sum the added leading axes away and keep the size-1 axes with size 1"
    return None


# -- softmax_backward(y, g, axis), layer_norm_backward(x, weight, eps, g) ------------------------


def _rows_shape(rng: random.Random, *, last: tuple[int, int]) -> list[int]:
    lead = [
        rng.randint(0, 2) if rng.random() < 0.1 else rng.randint(1, 3)
        for _ in range(rng.randint(0, 2))
    ]
    return [*lead, rng.randint(*last)]


def _softmax_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for _ in range(n):
        shape = _rows_shape(rng, last=(1, 5))
        axis = rng.randrange(-len(shape), len(shape))
        if shape[axis] == 0:  # a softmax over no values is not defined: reduce another axis
            axis = len(shape) - 1
        cases.append(({"shape": shape, "axis": axis, "seed": rng.randrange(10**6)},))
    return cases


def _softmax_arrays(case: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(case["seed"])
    return rng.normal(0, 2, size=case["shape"]), rng.normal(0, 1, size=case["shape"])


def _softmax_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    x, g = _softmax_arrays(case)
    y = tensor_model.softmax(Tensor.from_numpy(x), axis=case["axis"])
    return y, Tensor.from_numpy(g), case["axis"]


def softmax_grad(y: Tensor, g: Tensor, axis: int) -> np.ndarray:
    """The library's gradient through softmax at the output ``y``: autograd of
    ``softmax(log(y))``, which is ``y`` again (softmax's Jacobian depends on its output alone)."""
    x = Tensor.from_numpy(np.log(y.to_numpy()), requires_grad=True)
    tensor_model.softmax(x, axis=axis).backward(g)
    assert x.grad is not None
    return x.grad.to_numpy()


def _ln_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    return [
        ({"shape": _rows_shape(rng, last=(1, 6)), "seed": rng.randrange(10**6)},) for _ in range(n)
    ]


def _ln_arrays(case: dict[str, Any]) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(case["seed"])
    shape = case["shape"]
    x = rng.normal(rng.uniform(-2, 2), rng.uniform(0.5, 3), size=shape)
    weight, bias = rng.normal(1, 0.5, shape[-1]), rng.normal(0, 0.5, shape[-1])
    return x, weight, bias, rng.normal(0, 1, size=shape)


def _ln_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    x, weight, _, g = _ln_arrays(case)
    return Tensor.from_numpy(x), Tensor.from_numpy(weight), EPS, Tensor.from_numpy(g)


def layer_norm_grads(x: Tensor, weight: Tensor, eps: float, g: Tensor) -> list[np.ndarray]:
    """The library's gradients ``[dx, dweight, dbias]`` through chapter 8's ``layer_norm`` (the
    bias changes no gradient, so it is zero here)."""
    leaves = [
        Tensor.from_numpy(x.to_numpy(), requires_grad=True),
        Tensor.from_numpy(weight.to_numpy(), requires_grad=True),
        Tensor.zeros([weight.shape[0]], requires_grad=True),
    ]
    x_leaf, weight_leaf, bias_leaf = leaves
    tensor_model.layer_norm(x_leaf, weight_leaf, bias_leaf, eps).backward(g)
    return [leaf.grad.to_numpy() for leaf in leaves if leaf.grad is not None]


def _difference(result: Any, expected: np.ndarray) -> Any:
    if not isinstance(result, (Tensor, TensorView)):
        return f"a {type(result).__name__}, not a Tensor or TensorView"
    got = result.to_numpy().astype(np.float64)
    if got.shape != expected.shape:
        return f"shape {list(got.shape)}, not {list(expected.shape)}"
    error = float(np.abs(got - expected).max()) if got.size else 0.0
    return AGREES if error <= TOLERANCE else f"{error:.3g}"


def _softmax_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    return {"dx": _difference(result, softmax_grad(*call_args))}


def _ln_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        return {"result": "not three gradients (dx, dweight, dbias)"}
    expected = layer_norm_grads(*call_args)
    names = ("dx", "dweight", "dbias")
    return {name: _difference(r, e) for name, r, e in zip(names, result, expected)}


def _shape_size(case: dict[str, Any]) -> tuple[int, ...]:
    return (int(np.prod(case["shape"])), len(case["shape"]))


# -- gradcheck(fn, x, eps, atol) -------------------------------------------------------------------


def _fixed(shape: tuple[int, ...], seed: int) -> Tensor:
    return Tensor.from_numpy(np.random.default_rng(seed).uniform(-1, 1, size=shape))


#: The functions a gradcheck case checks: name -> (fn of x, whether backward is right, the
#: least rank x must have). The wrong ones detach a factor that depends on x, so backward misses
#: its part of the product rule.
GRADCHECK_FUNCTIONS: dict[str, tuple[Callable[[Any], Any], bool, int]] = {
    "sum(x * x)": (lambda x: lt_sum(x * x), True, 0),
    "sum(tanh(x))": (lambda x: lt_sum(lt.tanh(x)), True, 0),
    "sum(softmax(x) * c)": (
        lambda x: lt_sum(tensor_model.softmax(x, axis=-1) * _fixed(tuple(x.shape), 3)),
        True,
        1,
    ),
    "sum(flip(x)[::2] ** 3)": (
        lambda x: lt_sum(lt_cube(x.reshape([-1])[::-1][::2])),
        True,
        0,
    ),
    "mean(exp(x.expand))": (
        lambda x: lt.mean(lt.exp(x.unsqueeze(0).expand([3, *x.shape]))),
        True,
        0,
    ),
    "sum(x * x.detach())": (lambda x: lt_sum(x * x.detach()), False, 0),
    "sum(tanh(x) * detach(1 + x * x))": (
        lambda x: lt_sum(lt.tanh(x) * (1.0 + x.detach() * x.detach())),
        False,
        0,
    ),
}


def lt_sum(x: Any) -> Any:
    """``lt.sum`` over every axis (the gradcheck functions' reduction)."""
    return lt.sum(x)


def lt_cube(x: Any) -> Any:
    """``x ** 3`` as a product (the gradcheck functions' power)."""
    return x * x * x


def _gradcheck_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    names = sorted(GRADCHECK_FUNCTIONS)
    cases: list[tuple[Any, ...]] = []
    for _ in range(n):
        name = rng.choice(names)
        least = GRADCHECK_FUNCTIONS[name][2]
        rank = rng.randint(least, 2)
        # An empty axis now and then; a softmax's own (last) axis is never empty.
        shape = [
            0 if rng.random() < 0.1 and (least == 0 or k < rank - 1) else rng.randint(1, 3)
            for k in range(rank)
        ]
        cases.append(({"fn": name, "shape": shape, "seed": rng.randrange(10**6)},))
    return cases


def _gradcheck_x(case: dict[str, Any]) -> Tensor:
    rng = np.random.default_rng(case["seed"])
    # Away from 0: a wrong backward differs from the finite difference by far more than atol.
    values = rng.uniform(0.5, 1.5, size=case["shape"]) * rng.choice([-1.0, 1.0], case["shape"])
    return Tensor.from_numpy(values, requires_grad=True)


def _gradcheck_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    return GRADCHECK_FUNCTIONS[case["fn"]][0], _gradcheck_x(case), 1e-6, 1e-5


def _gradcheck_reference(case: dict[str, Any]) -> bool:
    from llmfs.tensor import gradcheck
    from llmfs.tensor.errors import GradcheckError

    fn = GRADCHECK_FUNCTIONS[case["fn"]][0]
    try:
        return gradcheck(fn, [_gradcheck_x(case)], eps=1e-6, atol=1e-5)
    except GradcheckError:
        return False


def _gradcheck_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    if isinstance(result, (bool, np.bool_)):
        return bool(result)
    return {"result": f"a {type(result).__name__}, not True or False"}


def _gradcheck_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if got is True and want is False:
        return (
            f"{case['fn']} detaches a factor that depends on x, so backward misses part of the "
            "product rule: compare x.grad with (f(x + eps) - f(x - eps)) / (2 eps), value by value"
        )
    if got is False and want is True:
        return (
            "this backward is right: perturb one value of x at a time (a new tensor, the others "
            "unchanged), and allow atol + rtol * |numeric| of difference"
        )
    return None


def _gradcheck_size(case: dict[str, Any]) -> tuple[int, ...]:
    return (int(np.prod(case["shape"])), len(case["shape"]))


# -- specs ---------------------------------------------------------------------------------------

check_view_backward = register(
    ImplementSpec(
        "ch09.view_backward",
        "view_backward",
        _view_cases,
        _view_reference,
        cases=200,
        prepare=_view_prepare,
        summarize=_flat_values,
        parameters=("grad", "view"),
        shortcuts=Shortcuts(
            (_BACKWARD, *_VIEW_RULE),
            "view.logical_offsets() (the storage offset of each position) and a zero buffer",
        ),
        size=_view_size,
        views=lambda case: views_at(0, 1, 2)(case["shape"], case["strides"], case["base_offset"]),
        explain=_view_explain,
    ),
    "Checks ``view_backward(grad, view) -> the owner's storage-shaped gradient`` (the view rule: "
    "scatter-add of ``grad`` into a zero buffer through the view's offsets) against the "
    "library's autograd, exactly.",
)
check_expand_backward = register(
    ImplementSpec(
        "ch09.expand_backward",
        "expand_backward",
        _expand_cases,
        _expand_reference,
        cases=150,
        prepare=_expand_prepare,
        summarize=_shaped_values,
        parameters=("grad", "shape"),
        shortcuts=Shortcuts(
            (_BACKWARD, "llmfs.tensor.autograd.unbroadcast", *_VIEW_RULE),
            "lt.sum over the broadcast axes, then reshape",
        ),
        size=lambda case: (sum(case["target"]), len(case["target"])),
        explain=_expand_explain,
    ),
    "Checks ``expand_backward(grad, shape) -> Tensor of shape`` (the backward of broadcasting "
    "``shape`` to ``grad``'s shape: a sum over the broadcast axes) against the library's "
    "autograd, exactly.",
)
check_softmax_backward = register(
    ImplementSpec(
        "ch09.softmax_backward",
        "softmax_backward",
        _softmax_cases,
        lambda case: {"dx": AGREES},
        cases=100,
        prepare=_softmax_prepare,
        summarize=_softmax_summary,
        parameters=("y", "g", "axis"),
        shortcuts=Shortcuts((_BACKWARD, *_VIEW_RULE), "y, g, lt.sum and arithmetic"),
        size=_shape_size,
    ),
    "Checks ``softmax_backward(y, g, axis) -> dx`` (y = softmax(x) over ``axis``, g = d(loss)/dy) "
    "against the library's autograd through softmax, to 1e-9.",
)
check_layer_norm_backward = register(
    ImplementSpec(
        "ch09.layer_norm_backward",
        "layer_norm_backward",
        _ln_cases,
        lambda case: {"dx": AGREES, "dweight": AGREES, "dbias": AGREES},
        cases=100,
        prepare=_ln_prepare,
        summarize=_ln_summary,
        parameters=("x", "weight", "eps", "g"),
        shortcuts=Shortcuts((_BACKWARD, *_VIEW_RULE), "lt.mean, lt.sum, lt.sqrt and arithmetic"),
        size=_shape_size,
    ),
    "Checks ``layer_norm_backward(x, weight, eps, g) -> (dx, dweight, dbias)`` against the "
    "library's autograd through chapter 8's layer_norm, to 1e-9.",
)
check_gradcheck = register(
    ImplementSpec(
        "ch09.gradcheck",
        "gradcheck",
        _gradcheck_cases,
        _gradcheck_reference,
        cases=60,
        prepare=_gradcheck_prepare,
        summarize=_gradcheck_summary,
        parameters=("fn", "x", "eps", "atol"),
        shortcuts=Shortcuts(
            (
                "llmfs.tensor.finite_difference.gradcheck",
                "llmfs.tensor.finite_difference._central_difference",
            ),
            "backward() for the analytic gradient and fn on shifted copies of x",
        ),
        size=_gradcheck_size,
        explain=_gradcheck_explain,
    ),
    "Checks ``gradcheck(fn, x, eps, atol) -> bool`` (backward's gradient of fn(x) against central "
    "finite differences) against the library's gradcheck, on right and wrong backwards.",
)

#: Exercise id -> check (chapter 9's part of the package's CHECKS).
GRADIENT_CHECKS: dict[str, Callable[..., CheckReport]] = {
    "ch09.view_backward": check_view_backward,
    "ch09.expand_backward": check_expand_backward,
    "ch09.softmax_backward": check_softmax_backward,
    "ch09.layer_norm_backward": check_layer_norm_backward,
    "ch09.gradcheck": check_gradcheck,
}

__all__ = [
    "AGREES",
    "GRADCHECK_FUNCTIONS",
    "GRADIENT_CHECKS",
    "TOLERANCE",
    "check_expand_backward",
    "check_gradcheck",
    "check_layer_norm_backward",
    "check_softmax_backward",
    "check_view_backward",
    "layer_norm_grads",
    "softmax_grad",
]
