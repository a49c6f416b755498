"""The fixed cost of one small op: llmfs against NumPy and, when it is installed, PyTorch.

Run: ``python benchmarks/bench_overhead.py``. Each row times one call on 8x8 float32 operands (so
the arithmetic is nothing and what is measured is the work around it: argument checks, layout
checks, dtype rules, dispatch, building the result), as the best over many short samples, the
three libraries measured alternately in one run:

* ``add``, ``mul``, ``matmul``, ``sum`` over axis 0, ``exp``;
* the views: a transpose, a reshape and a slice (no copy in any library);
* ``materialize`` of a transposed 8x8 view (NumPy: ``np.ascontiguousarray``, PyTorch:
  ``.contiguous()``);
* one forward pass of the capstone model at batch 1 (a 6-token prompt) through
  :mod:`llmfs.gpt.tensor_model` against the same model in plain NumPy.

On a loaded machine a sample that the scheduler interrupts is longer by a whole time slice, and
a library whose samples last longer is interrupted more often, so a median favours the fastest
library; the best of many short samples is the cost of the call itself (what :mod:`timeit`
reports). Timings still move with the load; the ``calls`` column does not: it counts the function
calls (Python functions, and C functions called from Python, as :func:`sys.setprofile` sees
them) that one llmfs call makes once its plan exists, the part of the overhead the library
decides.

The goals: every small op within 1.5x PyTorch's time (PyTorch's own per-op cost is the bar a
tensor library with checks can reach), and the batch-1 forward pass within 3x plain NumPy.
PyTorch is not a dependency of llmfs; to include it, install ``torch`` (a CPU build) in a
separate virtual environment together with llmfs and run this script there. PyTorch runs with
one intra-op thread, as llmfs and NumPy do on operands this small.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _timing import header

from llmfs.gpt import reference, task
from llmfs.gpt import tensor_model as tm
from llmfs.gpt.checkpoint import load_tiny_gpt
from llmfs.gpt.model import GPTConfig, Params
from llmfs.tensor import Tensor, add, exp, matmul, mul, sum, use_backend

try:  # PyTorch is optional: the comparison column is left out without it.
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

OP_GOAL_VS_TORCH = 1.5
FORWARD_GOAL_VS_NUMPY = 3.0


def per_call_best(fns: list[Callable[[], object]], *, calls: int, samples: int = 41) -> list[float]:
    """Best seconds per call of each function over ``samples`` samples of ``calls`` calls,
    sampled alternately, so a change in the machine's load hits every library alike."""
    for fn in fns:  # warm-up: first-call caches, lazy imports
        for _ in range(3):
            fn()
    per_fn: list[list[float]] = [[] for _ in fns]
    for _ in range(samples):
        for fn, out in zip(fns, per_fn):
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            out.append((time.perf_counter() - start) / calls)
    return [min(s) for s in per_fn]


def calls_per_call(fn: Callable[[], object], *, calls: int = 10) -> float:
    """Function calls (Python and C, as ``sys.setprofile`` reports them) per call of ``fn``,
    after a warm-up, so that every plan and cache is already made."""
    for _ in range(3):
        fn()
    count = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        for _ in range(calls):
            fn()
    finally:
        sys.setprofile(None)
    return (count - 1) / calls  # less the sys.setprofile(None) call itself


def numpy_forward(p: Params, config: GPTConfig, ids: np.ndarray) -> np.ndarray:
    """The capstone model in plain NumPy, in the dtype of ``p``."""
    x = p["wte.weight"][ids] + p["wpe.weight"][: ids.shape[1]]
    for i in range(config.n_layer):
        x = reference.block(x, p, i, config)
    x = reference.layer_norm(x, p["ln_f.weight"], p["ln_f.bias"], config.layer_norm_eps)
    return x @ p["wte.weight"].T


def print_row(
    name: str, ours: float, numpy_s: float, torch_s: float | None, calls: float, goal: str
) -> None:
    if torch_s is None:
        torch_cols = f"{'-':>9} {'-':>8}"
    else:
        torch_cols = f"{torch_s * 1e6:9.2f} {ours / torch_s:8.2f}"
    print(
        f"   {name:<30} {ours * 1e6:9.2f} {numpy_s * 1e6:9.2f} {ours / numpy_s:8.2f} "
        f"{torch_cols} {calls:6.0f}  {goal}"
    )


def small_ops() -> list[tuple[str, Callable[[], object], Callable[[], object], Any]]:
    """(name, llmfs call, NumPy call, PyTorch call or None) for every small op."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 8)).astype(np.float32)
    b = rng.standard_normal((8, 8)).astype(np.float32)
    ta, tb = Tensor.from_numpy(a), Tensor.from_numpy(b)
    transposed = ta.view().T
    ours: dict[str, Callable[[], object]] = {
        "add 8x8": lambda: add(ta, tb),
        "mul 8x8": lambda: mul(ta, tb),
        "matmul 8x8": lambda: matmul(ta, tb),
        "sum over axis 0, 8x8": lambda: sum(ta, 0),
        "exp 8x8": lambda: exp(ta),
        "transpose view": lambda: ta.view().T,
        "reshape view [64]": lambda: ta.reshape([64]),
        "slice view [:, 2:6]": lambda: ta.slice(1, 2, 6),
        "materialize transposed 8x8": lambda: transposed.materialize(),
    }
    peer: dict[str, Callable[[], object]] = {
        "add 8x8": lambda: np.add(a, b),
        "mul 8x8": lambda: np.multiply(a, b),
        "matmul 8x8": lambda: a @ b,
        "sum over axis 0, 8x8": lambda: a.sum(axis=0),
        "exp 8x8": lambda: np.exp(a),
        "transpose view": lambda: a.T,
        "reshape view [64]": lambda: a.reshape(64),
        "slice view [:, 2:6]": lambda: a[:, 2:6],
        "materialize transposed 8x8": lambda: np.ascontiguousarray(a.T),
    }
    theirs: dict[str, Callable[[], object]] = {}
    if torch is not None:
        pa, pb = torch.from_numpy(a.copy()), torch.from_numpy(b.copy())
        theirs = {
            "add 8x8": lambda: pa + pb,
            "mul 8x8": lambda: pa * pb,
            "matmul 8x8": lambda: pa @ pb,
            "sum over axis 0, 8x8": lambda: pa.sum(0),
            "exp 8x8": lambda: pa.exp(),
            "transpose view": lambda: pa.T,
            "reshape view [64]": lambda: pa.view(64),
            "slice view [:, 2:6]": lambda: pa[:, 2:6],
            "materialize transposed 8x8": lambda: pa.T.contiguous(),
        }
    return [(name, ours[name], peer[name], theirs.get(name)) for name in ours]


def main() -> None:
    if torch is not None:
        torch.set_num_threads(1)
    header("per-op overhead on 8x8 float32: llmfs vs NumPy and PyTorch", columns=False)
    print(
        f"   {'case':<30} {'llmfs us':>9} {'numpy us':>9} {'/numpy':>8} {'torch us':>9} "
        f"{'/torch':>8} {'calls':>6}  goal"
    )
    if torch is None:
        print("   (PyTorch is not installed here: the torch columns are left out)")
    missed = 0
    with use_backend("numpy"):
        for name, ours, peer, torch_fn in small_ops():
            fns = [ours, peer] + ([torch_fn] if torch_fn else [])
            times = per_call_best(fns, calls=50)
            torch_s = times[2] if torch_fn else None
            if torch_s is None:
                goal = f"<= {OP_GOAL_VS_TORCH:g}x torch (not measured)"
            elif times[0] / torch_s <= OP_GOAL_VS_TORCH:
                goal = f"<= {OP_GOAL_VS_TORCH:g}x torch ok"
            else:
                goal = f"<= {OP_GOAL_VS_TORCH:g}x torch MISSED"
                missed += 1
            print_row(name, times[0], times[1], torch_s, calls_per_call(ours), goal)

        params, config = load_tiny_gpt()
        ids = task.prompts(task.split().held_out)[:1]
        peer_params = {n: v.astype(np.float32) for n, v in params.items()}
        ours_params = tm.tensor_params(params, np.float32)
        got = tm.forward(ours_params, config, ids).to_numpy()
        assert np.abs(got - numpy_forward(peer_params, config, ids)).max() <= 1e-4
        ours_s, numpy_s = per_call_best(
            [
                lambda: tm.forward(ours_params, config, ids),
                lambda: numpy_forward(peer_params, config, ids),
            ],
            calls=1,
            samples=31,
        )
        ratio = ours_s / numpy_s
        verdict = "ok" if ratio <= FORWARD_GOAL_VS_NUMPY else "MISSED"
        forward_calls = calls_per_call(lambda: tm.forward(ours_params, config, ids), calls=2)
        print(
            f"   {'capstone forward, batch 1':<30} {ours_s * 1e6:9.0f} {numpy_s * 1e6:9.0f} "
            f"{ratio:8.2f} {'-':>9} {'-':>8} {forward_calls:6.0f}  "
            f"<= {FORWARD_GOAL_VS_NUMPY:g}x numpy {verdict}"
        )
    if missed:
        print(f"   {missed} small op(s) above {OP_GOAL_VS_TORCH:g}x PyTorch")


if __name__ == "__main__":
    main()
