"""One forward pass of the capstone model through ``llmfs.tensor`` (numpy backend) against the same
model written in plain NumPy.

Run: ``python benchmarks/bench_gpt.py``. Both sides take weights already converted to the dtype
(so no conversion is timed) and compute the same steps: the llmfs side is
:func:`llmfs.gpt.tensor_model.forward` (views for Q/K/V and the heads, one materialize per block,
``take`` for the embedding lookup), the peer is :mod:`llmfs.gpt.reference`'s layers
applied to arrays of that dtype (fancy indexing for the lookup). Medians of alternating calls,
printed as ratios; the goal is <= 1.5x where the arithmetic, not the per-op overhead, dominates
(the held-out batch). The small batches show the fixed cost of each op call.
"""

from __future__ import annotations

import numpy as np
from _timing import header, paired_medians, row

from llmfs.gpt import reference, task
from llmfs.gpt import tensor_model as tm
from llmfs.gpt.checkpoint import load_tiny_gpt
from llmfs.gpt.model import GPTConfig, Params
from llmfs.tensor import use_backend


def numpy_forward(p: Params, config: GPTConfig, ids: np.ndarray) -> np.ndarray:
    """The model in plain NumPy, in the dtype of ``p`` (the reference's layers, no conversion)."""
    eps = config.layer_norm_eps
    x = p["wte.weight"][ids] + p["wpe.weight"][: ids.shape[1]]
    for i in range(config.n_layer):
        x = reference.block(x, p, i, config)
    x = reference.layer_norm(x, p["ln_f.weight"], p["ln_f.bias"], eps)
    return x @ p["wte.weight"].T


def main() -> None:
    params, config = load_tiny_gpt()
    held_out = task.prompts(task.split().held_out)
    header("capstone forward pass: llmfs.tensor (numpy backend) vs plain NumPy")
    for dtype in (np.float32, np.float64):
        peer_params = {n: v.astype(dtype) for n, v in params.items()}
        ours_params = tm.tensor_params(params, dtype)
        for batch in (1, 64, len(held_out)):
            ids = held_out[:batch]
            with use_backend("numpy"):
                got = tm.forward(ours_params, config, ids).to_numpy()
                expected = numpy_forward(peer_params, config, ids)
                # The peer must run in the dtype its row names (no float64 scalar promoting it).
                assert expected.dtype == dtype, (expected.dtype, dtype)
                tolerance = 1e-9 if dtype == np.float64 else 1e-4
                assert np.abs(got - expected).max() <= tolerance
                ours, peer = paired_medians(
                    lambda ids=ids, w=ours_params: tm.forward(w, config, ids),
                    lambda ids=ids, p=peer_params: numpy_forward(p, config, ids),
                )
            goal = 1.5 if batch == len(held_out) else None
            row(f"{np.dtype(dtype).name} batch [{batch}, {ids.shape[1]}]", ours, peer, goal)


if __name__ == "__main__":
    main()
