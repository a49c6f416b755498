"""Checks of chapter 9's engine exercises: the backward walk and matmul's backward, by the learner.

* ``backward_pass(loss, inputs, rule)``: the walk of :func:`llmfs.tensor.autograd.backward`,
  written by the learner over two doors to the tape (:func:`tape_inputs`, the owners a recorded
  op read; :func:`tape_rule`, one node's backward rule and the view rule, run once). A case is a
  random graph on ``[n, n]`` leaves: every graph has a result read by two ops (a shared
  subexpression), one op that reads one owner twice (``x * x.T``), operands read through views
  of views (a transpose of a flip of a broadcast row), a leaf that does not require grad, and
  now and then a leaf whose ``.grad`` is already set (a second ``backward`` adds to it). The
  answer is each leaf's ``.grad`` against the library's own ``backward()`` on the same graph
  (to 1e-9, relative), and how often each node's rule ran: exactly once per node reachable from
  the loss. A walk that skips a shared node's second use, one that assigns a gradient where it
  must add, and one that calls a node's rule once per path all fail.
* ``matmul_backward(a, b, g) -> (da, db)``: the backward of ``a @ b`` over broadcast batch axes,
  against the library's autograd to 1e-9.

Cases are plain JSON; an answer that runs the library's walk (``backward()``) or its matmul
rule is refused by the shortcut guard.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np

import llmfs.tensor as lt
from llmfs.course.exercise_checks.report import CheckReport
from llmfs.course.exercise_checks.shortcuts import Shortcuts
from llmfs.course.exercise_checks.spec import ImplementSpec, register
from llmfs.tensor import Tensor, TensorView
from llmfs.tensor.autograd import RULES, Context, view_backward
from llmfs.tensor.errors import SavedTensorModifiedError
from llmfs.tensor.tape import no_grad

#: Largest relative difference from the library's gradient that counts as equal (float64).
TOLERANCE = 1e-9
AGREES = "agrees"
ONCE = "once per node"

_BACKWARD = "llmfs.tensor.autograd.backward"
_TOPOLOGICAL = "llmfs.tensor.autograd._topological"


# -- the two doors to the tape ---------------------------------------------------------------


def tape_inputs(tensor: Tensor) -> list[Tensor]:
    """The owners that the op which computed ``tensor`` read and that require grad, one per
    read (``x * x`` lists ``x`` twice), in argument order; ``[]`` for a leaf. A view's reads
    lead to its owner: gradients live in owners' storage."""
    node = tensor.grad_fn
    if node is None:
        return []
    return [view.owner for view in node.inputs if view.requires_grad]


def tape_rule(tensor: Tensor, grad: Any) -> list[tuple[Tensor, np.ndarray]]:
    """Runs, once, the backward rule of the op that computed ``tensor`` on ``grad`` (d(loss)/d
    ``tensor``, an array of ``tensor``'s shape) and sends each input's gradient through the view
    rule to its owner: one ``(owner, gradient of the owner's shape)`` pair per read of an owner
    that requires grad, in the order of :func:`tape_inputs` (an owner read twice gets two
    pairs, one per read: adding them is the caller's work).

    Raises ``ValueError`` for a leaf (it has no rule) or a ``grad`` of another shape, and
    :class:`~llmfs.tensor.errors.SavedTensorModifiedError` as ``backward()`` does when a value
    the rule needs was written after the op ran."""
    node = tensor.grad_fn
    if node is None:
        raise ValueError(
            f"tape_rule: a leaf (a tensor of shape {list(tensor.shape)} made, not computed) has "
            "no rule: its gradient is added into its .grad"
        )
    array = np.asarray(grad.to_numpy() if isinstance(grad, (Tensor, TensorView)) else grad)
    if tuple(array.shape) != tuple(tensor.shape):
        raise ValueError(
            f"tape_rule: the gradient of a tensor of shape {list(tensor.shape)} has that shape, "
            f"got {list(array.shape)}"
        )
    if tensor._version != node.version:
        what = f"its own result (a tensor of shape {list(tensor.shape)})"
        raise SavedTensorModifiedError(node.name, what, node.version, tensor._version)
    pairs: list[tuple[Tensor, np.ndarray]] = []
    with no_grad():
        result_grad = Tensor.from_numpy(np.array(array, dtype=tensor.dtype))
        for view, input_grad in RULES[node.name](Context(node, tensor), result_grad):
            owner = view.owner
            if not owner.requires_grad:
                continue
            storage = owner._storage
            buffer = view_backward(
                np.asarray(input_grad.to_numpy()), view.layout, storage.size, storage.dtype
            )
            pairs.append((owner, np.array(buffer, dtype=owner.dtype).reshape(owner.shape)))
    return pairs


# -- backward_pass(loss, inputs, rule): random graphs ----------------------------------------

#: The views an operand is read through, applied in order (two in a row: a view of a view).
VIEWS: dict[str, Callable[[Any, int], Any]] = {
    "T": lambda x, n: x.T,
    "flip": lambda x, n: x[::-1],
    "row": lambda x, n: x[:1].expand([n, n]),
    "column": lambda x, n: x[:, n - 1 :].expand([n, n]),
    "mirror": lambda x, n: x[:, ::-1],
}
#: The ops a graph is made of (recorded, each with its own rule).
BINARY = ("add", "mul", "matmul")
UNARY = ("tanh", "scale")


def _operand(rng: random.Random, pool: int, recent: bool = True) -> list[Any]:
    """``[index into the pool, [view names]]``, recent results more often (deeper graphs)."""
    index = max(0, pool - 1 - int(rng.expovariate(0.6))) if recent else rng.randrange(pool)
    views = [rng.choice(sorted(VIEWS)) for _ in range(rng.choice((0, 0, 1, 1, 2)))]
    return [index, views]


def _graph_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for _ in range(n):
        leaves = 3
        ops: list[list[Any]] = []
        count = rng.randint(3, 6)
        twice_at = rng.randrange(count)
        for k in range(count):
            pool = leaves + k
            if k == twice_at:
                # One op reads one owner twice (through different views, or the same).
                index = 0 if k == 0 else rng.randrange(pool)
                ops.append(["mul", [index, []], [index, [rng.choice(sorted(VIEWS))]]])
            elif rng.random() < 0.3:
                ops.append([rng.choice(UNARY), _operand(rng, pool)])
            else:
                ops.append([rng.choice(BINARY), _operand(rng, pool), _operand(rng, pool, False)])
            if k == 0:
                # The first op reads leaf a, which requires grad: so does some result the loss
                # sums (every result leads to one), and the loss with it.
                ops[0][1][0] = 0
        # A shared subexpression: one result read by two ops (a third use now and then).
        shared = leaves + rng.randrange(count - 1)
        ops.append(["add", [shared, []], _operand(rng, leaves + len(ops))])
        ops.append(["mul", [shared, [rng.choice(sorted(VIEWS))]], _operand(rng, leaves + len(ops))])
        cases.append(
            (
                {
                    "n": rng.randint(1, 3),
                    "ops": ops,
                    "constant": rng.random() < 0.5,  # leaf 2 does not require grad
                    "preset": rng.random() < 0.4,  # leaf 0 has a .grad already
                    "seed": rng.randrange(10**6),
                },
            )
        )
    return cases


class _Graph:
    """One case's graph, built with the library: the leaves, the loss and its reachable nodes."""

    def __init__(self, case: dict[str, Any]) -> None:
        self.case = case
        n = case["n"]
        values = np.random.default_rng(case["seed"])
        self.leaves = [
            Tensor.from_numpy(
                values.uniform(-1, 1, size=(n, n)),
                requires_grad=not (k == 2 and case["constant"]),
            )
            for k in range(3)
        ]
        self.preset = values.uniform(-1, 1, size=(n, n)) if case["preset"] else None
        if self.preset is not None:
            self.leaves[0].grad = Tensor.from_numpy(self.preset.copy())
        pool: list[Any] = list(self.leaves)
        read = [0] * (len(pool) + len(case["ops"]))

        def operand(spec: list[Any]) -> Any:
            index, views = spec
            read[index] += 1
            value = pool[index]
            for name in views:
                value = VIEWS[name](value, n)
            return value

        for op in case["ops"]:
            name = op[0]
            if name in BINARY:
                a, b = operand(op[1]), operand(op[2])
                pool.append(a + b if name == "add" else a * b if name == "mul" else a @ b)
            else:
                a = operand(op[1])
                pool.append(lt.tanh(a) if name == "tanh" else a * 0.5)
        # The loss: every result no op read, each weighted by fixed values, summed.
        weights = np.random.default_rng(case["seed"] + 1)
        terms = [
            lt.sum(value * Tensor.from_numpy(weights.uniform(-1, 1, size=(n, n))))
            for index, value in enumerate(pool)
            if index >= len(self.leaves) and read[index] == 0
        ]
        loss = terms[0]
        for term in terms[1:]:
            loss = loss + term
        self.loss: Tensor = loss
        self.nodes = _reachable(loss)


def _reachable(loss: Tensor) -> dict[int, Tensor]:
    """Every recorded result the loss depends on through tensors that require grad, by id."""
    found: dict[int, Tensor] = {}
    stack = [loss] if loss.grad_fn is not None else []
    while stack:
        tensor = stack.pop()
        if id(tensor) in found:
            continue
        found[id(tensor)] = tensor
        stack.extend(t for t in tape_inputs(tensor) if t.grad_fn is not None)
    return found


class CountingRule:
    """:func:`tape_rule` that counts its calls per node: the third argument a learner's
    ``backward_pass`` is handed by the check (and the record of what it ran)."""

    def __init__(self, graph: _Graph) -> None:
        self.graph = graph
        self.calls: dict[int, int] = {}
        self.strangers = 0

    def __call__(self, tensor: Tensor, grad: Any) -> list[tuple[Tensor, np.ndarray]]:
        if id(tensor) in self.graph.nodes:
            self.calls[id(tensor)] = self.calls.get(id(tensor), 0) + 1
        else:
            self.strangers += 1
        return tape_rule(tensor, grad)


def _graph_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    graph = _Graph(case)
    return graph.loss, tape_inputs, CountingRule(graph)


def _graph_reference(case: dict[str, Any]) -> dict[str, Any]:
    # A leaf the loss never reaches keeps no .grad (or the one it had), as with backward().
    grads = {
        name: AGREES if grad is not None else "no .grad"
        for name, grad in zip(("a", "b", "c"), library_grads(case))
    }
    return {"grads": grads, "rule_calls": ONCE}


def library_grads(case: dict[str, Any]) -> list[np.ndarray | None]:
    """The leaves' ``.grad`` after the library's ``backward()`` on the case's graph."""
    graph = _Graph(case)
    graph.loss.backward()
    return [None if leaf.grad is None else leaf.grad.to_numpy() for leaf in graph.leaves]


def _graph_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    rule = call_args[2]
    assert isinstance(rule, CountingRule)
    graph = rule.graph
    # The library's backward runs on a twin built from the same case, never on the learner's
    # leaves, whose .grad is the answer.
    case_grads = library_grads(graph.case)
    grads: dict[str, str] = {}
    for name, leaf, want in zip(("a", "b", "c"), graph.leaves, case_grads):
        got = leaf.grad
        if want is None:
            grads[name] = (
                "no .grad" if got is None else "a .grad on a leaf that does not require it"
            )
        elif got is None:
            grads[name] = "no .grad"
        else:
            diff = np.abs(got.to_numpy() - want)
            error = float((diff / (1.0 + np.abs(want))).max()) if diff.size else 0.0
            grads[name] = AGREES if error <= TOLERANCE else f"differs by {error:.3g}"
    return {"grads": grads, "rule_calls": _calls_text(rule)}


def _calls_text(rule: CountingRule) -> str:
    nodes = rule.graph.nodes
    twice = sum(1 for key in nodes if rule.calls.get(key, 0) > 1)
    never = sum(1 for key in nodes if rule.calls.get(key, 0) == 0)
    parts = []
    if twice:
        parts.append(f"{twice} of {len(nodes)} nodes' rules ran more than once")
    if never:
        parts.append(f"{never} of {len(nodes)} nodes' rules never ran")
    if rule.strangers:
        parts.append(f"the rule was called {rule.strangers} times on a tensor outside the graph")
    return "; ".join(parts) if parts else ONCE


def _graph_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if not isinstance(got, dict) or "rule_calls" not in got:
        return None
    calls = str(got["rule_calls"])
    if "more than once" in calls:
        return (
            "each node's rule runs once, with the SUM of what every consumer sent it: order the "
            "tape so a tensor comes after everything that read it (a topological order), and "
            "run a rule only when its tensor's gradient is complete"
        )
    if "never ran" in calls:
        return (
            "every node the loss depends on passes its gradient on: a tensor reached twice "
            "(read by two ops) is still visited, once, after its last consumer"
        )
    grads = got.get("grads", {})
    if (
        case.get("preset")
        and grads.get("a") != AGREES
        and all(v == AGREES for k, v in grads.items() if k != "a" and want["grads"][k] == AGREES)
    ):
        return "a leaf's .grad accumulates: a backward adds into the .grad already there"
    if any(v != want["grads"].get(k) for k, v in grads.items()):
        return (
            "a tensor read twice (by two ops, or twice by one op) receives the SUM of the "
            "contributions: add into its gradient, never assign"
        )
    return None


def _graph_size(case: dict[str, Any]) -> tuple[int, ...]:
    return (len(case["ops"]), case["n"])


# -- matmul_backward(a, b, g) ----------------------------------------------------------------


def _operand_batch(rng: random.Random, batch: list[int]) -> list[int]:
    """An operand's batch axes: the last of ``batch`` (now and then fewer), some of size 1."""
    kept = batch[rng.randint(0, len(batch)) :] if rng.random() < 0.4 else list(batch)
    return [1 if rng.random() < 0.3 else size for size in kept]


def _matmul_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    for _ in range(n):
        batch = [rng.randint(1, 3) for _ in range(rng.choice((0, 1, 1, 2, 2)))]

        m, k, cols = rng.randint(1, 3), rng.randint(1, 3), rng.randint(1, 3)
        cases.append(
            (
                {
                    "a": [*_operand_batch(rng, batch), m, k],
                    "b": [*_operand_batch(rng, batch), k, cols],
                    "seed": rng.randrange(10**6),
                },
            )
        )
    return cases


def _matmul_arrays(case: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    values = np.random.default_rng(case["seed"])
    a = values.normal(size=case["a"])
    b = values.normal(size=case["b"])
    g = values.normal(size=np.matmul(a, b).shape)
    return a, b, g


def _matmul_prepare(case: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(Tensor.from_numpy(array) for array in _matmul_arrays(case))


def matmul_grads(case: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The library's ``(dA, dB)`` of ``a @ b`` for the case's arrays and upstream gradient."""
    return _grads_of(*_matmul_arrays(case))


def _matmul_reference(case: dict[str, Any]) -> dict[str, Any]:
    return {"da": AGREES, "db": AGREES}


def _close(result: Any, expected: np.ndarray) -> str:
    if isinstance(result, (Tensor, TensorView)):
        result = result.to_numpy()
    try:
        got = np.asarray(result, dtype=np.float64)
    except (TypeError, ValueError):
        return f"a {type(result).__name__}, not a Tensor or an array"
    if got.shape != expected.shape:
        return f"shape {list(got.shape)}, not the operand's {list(expected.shape)}"
    error = float(np.abs(got - expected).max()) if got.size else 0.0
    return AGREES if error <= TOLERANCE * (1.0 + float(np.abs(expected).max())) else f"{error:.3g}"


def _matmul_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return {"result": "not two gradients (da, db)"}
    a, b, g = (arg.to_numpy() for arg in call_args)
    want = _grads_of(a, b, g)
    return {"da": _close(result[0], want[0]), "db": _close(result[1], want[1])}


def _grads_of(a: np.ndarray, b: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a_leaf = Tensor.from_numpy(a, requires_grad=True)
    b_leaf = Tensor.from_numpy(b, requires_grad=True)
    (a_leaf @ b_leaf).backward(Tensor.from_numpy(g))
    assert a_leaf.grad is not None and b_leaf.grad is not None
    return a_leaf.grad.to_numpy(), b_leaf.grad.to_numpy()


def _matmul_explain(got: Any, want: Any, case: dict[str, Any]) -> str | None:
    if not isinstance(got, dict):
        return None
    texts = " ".join(str(v) for v in got.values())
    if "not the operand's" in texts:
        return (
            "an operand whose batch axes were broadcast (missing, or of size 1) was read many "
            "times: its gradient is summed back to the operand's own shape"
        )
    return None


def _matmul_size(case: dict[str, Any]) -> tuple[int, ...]:
    return (int(np.prod(case["a"])) + int(np.prod(case["b"])), len(case["a"]))


# -- specs -------------------------------------------------------------------------------------


check_backward_pass = register(
    ImplementSpec(
        "ch09.backward_pass",
        "backward_pass",
        _graph_cases,
        _graph_reference,
        cases=60,
        prepare=_graph_prepare,
        summarize=_graph_summary,
        parameters=("loss", "inputs", "rule"),
        shortcuts=Shortcuts(
            (_BACKWARD, _TOPOLOGICAL),
            "inputs(t) to walk the tape, rule(t, grad) once per node, and .grad on the leaves",
        ),
        size=_graph_size,
        explain=_graph_explain,
    ),
    "Checks ``backward_pass(loss, inputs, rule)`` (the backward walk: every leaf's .grad gets "
    "d(loss)/d(leaf) added, each node's rule runs once) against the library's backward() on "
    "random graphs with shared results, owners read twice and views of views.",
)
check_matmul_backward = register(
    ImplementSpec(
        "ch09.matmul_backward",
        "matmul_backward",
        _matmul_cases,
        _matmul_reference,
        cases=80,
        prepare=_matmul_prepare,
        summarize=_matmul_summary,
        parameters=("a", "b", "g"),
        shortcuts=Shortcuts(
            (_BACKWARD, "llmfs.tensor.autograd._matmul", "llmfs.tensor.autograd.unbroadcast"),
            "lt.einsum for the products and lt.sum for the broadcast axes",
        ),
        size=_matmul_size,
        explain=_matmul_explain,
    ),
    "Checks ``matmul_backward(a, b, g) -> (da, db)`` (the gradients of ``a @ b`` given "
    "g = d(loss)/d(a @ b), batch axes broadcast) against the library's autograd, to 1e-9.",
)

#: Exercise id -> check (chapter 9's engine exercises).
ENGINE_CHECKS: dict[str, Callable[..., CheckReport]] = {
    "ch09.backward_pass": check_backward_pass,
    "ch09.matmul_backward": check_matmul_backward,
}

__all__ = [
    "ENGINE_CHECKS",
    "VIEWS",
    "CountingRule",
    "check_backward_pass",
    "check_matmul_backward",
    "library_grads",
    "matmul_grads",
    "tape_inputs",
    "tape_rule",
]
