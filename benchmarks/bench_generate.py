"""Tokens per second of generation on a GPT-2-small-shaped model, one thread.

Run: ``python benchmarks/bench_generate.py`` (``--repeat N``, ``--new N``, ``--prompt N``).

The model has GPT-2 small's shapes (12 blocks, 12 heads, 768 features, a vocabulary of 50,257,
1,024 positions) and random weights (:func:`llmfs.gpt.model.init_params`, seed 0), float32,
written to a temporary folder as Hugging Face writes one (``config.json``,
``model.safetensors``: :func:`llmfs.gpt.hf_folder.write_folder`) and loaded from it the way a
learner loads the real GPT-2 (:func:`llmfs.gpt.checkpoint.load_gpt2`, timed once and reported;
Hugging Face reads the same folder with ``from_pretrained``); a random 64-token prompt, batch 1,
64 new tokens, greedy. Timed, each as the median of
``--repeat`` whole ``generate`` calls (after one untimed call), the implementations taking turns
round after round in this one run:

* ``llmfs`` with the KV cache (:func:`llmfs.gpt.tensor_model.generate`, numpy backend);
* ``llmfs`` recomputing the window at each step (``kv_cache=False``);
* the NumPy reference (:func:`llmfs.gpt.reference.generate`, float64 by design, with its cache);
* Hugging Face's ``GPT2LMHeadModel.generate(do_sample=False, use_cache=True)`` on the same
  weights, float32, when ``torch`` and ``transformers`` are installed (they are not dependencies).

Goals: the cache at least 5x the tokens per second of recomputing; llmfs with the cache at least
Hugging Face's tokens per second. Every implementation runs on ONE thread
(``OPENBLAS_NUM_THREADS=1``, ``LLMFS_NUM_THREADS=1``, ``torch.set_num_threads(1)``), set before
NumPy is imported. The generated tokens are compared and the agreement printed (float32 sums may
round differently, so a near-tie may flip a token; the tests check equality in float64).
"""

from __future__ import annotations

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "LLMFS_NUM_THREADS"):
    os.environ[_name] = "1"

import argparse  # noqa: E402 - the thread counts must be set before NumPy loads its BLAS
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from _timing import header  # noqa: E402

from llmfs.gpt import reference  # noqa: E402
from llmfs.gpt import tensor_model as tm  # noqa: E402
from llmfs.gpt.checkpoint import load_gpt2  # noqa: E402
from llmfs.gpt.hf_folder import write_folder  # noqa: E402
from llmfs.gpt.model import GPT2_SMALL_CONFIG, init_params  # noqa: E402
from llmfs.tensor import use_backend  # noqa: E402


def alternating_medians(
    runs: dict[str, Callable[[], np.ndarray]], repeat: int
) -> dict[str, tuple[float, np.ndarray]]:
    """Per name, the median wall time of ``repeat`` calls and the last result. Each function is
    called once untimed, then the functions are timed in turn, round after round, so that load
    changes on a shared machine hit all of them alike."""
    results = {name: fn() for name, fn in runs.items()}
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, fn in runs.items():
            start = time.perf_counter()
            results[name] = fn()
            samples[name].append(time.perf_counter() - start)
    return {name: (statistics.median(samples[name]), results[name]) for name in runs}


def hugging_face(folder: Path) -> Callable[[np.ndarray, int], np.ndarray]:
    """A function ``(ids, new) -> sequences`` running Hugging Face's greedy ``generate`` with
    its cache on the model of ``folder`` (float32); raises ImportError when torch or
    transformers is absent."""
    import torch
    from transformers import GPT2LMHeadModel
    from transformers.utils import logging

    torch.set_num_threads(1)
    logging.disable_progress_bar()
    hf = GPT2LMHeadModel.from_pretrained(str(folder), torch_dtype=torch.float32).eval()

    def run(ids: np.ndarray, new: int) -> np.ndarray:
        with torch.no_grad():
            out = hf.generate(
                torch.from_numpy(ids),
                attention_mask=torch.ones(ids.shape, dtype=torch.long),
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=False,
                use_cache=True,
                pad_token_id=0,
                eos_token_id=None,
            )
        result: np.ndarray = out.numpy()
        return result

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", type=int, default=64, help="prompt tokens (default 64)")
    parser.add_argument("--new", type=int, default=64, help="new tokens (default 64)")
    parser.add_argument("--repeat", type=int, default=3, help="timed calls per row (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="llmfs-bench-gpt2-") as tmp:
        folder = write_folder(Path(tmp), init_params(GPT2_SMALL_CONFIG, seed=0), GPT2_SMALL_CONFIG)
        start = time.perf_counter()
        params, config = load_gpt2(folder)
        load_seconds = time.perf_counter() - start
        try:
            hf: Callable[[np.ndarray, int], np.ndarray] | None = hugging_face(folder)
            hf_note = ""
        except ImportError as error:
            hf, hf_note = None, str(error)
    ids = np.random.default_rng(1).integers(0, config.vocab_size, size=(1, args.prompt))
    header(
        f"generate: {args.new} new tokens after a {args.prompt}-token prompt, GPT-2-small shapes, "
        "random float32 weights loaded from a Hugging Face folder, one thread",
        columns=False,
    )
    print(f"   load_gpt2(folder): {load_seconds:.2f} s (config.json + model.safetensors, float32)")
    w = tm.tensor_params(params, np.float32)

    def numpy_backend(kv_cache: bool) -> Callable[[], np.ndarray]:
        def run() -> np.ndarray:
            with use_backend("numpy"):
                return tm.generate(w, config, ids, args.new, kv_cache=kv_cache)

        return run

    runs: dict[str, Callable[[], np.ndarray]] = {
        "llmfs, KV cache": numpy_backend(True),
        "llmfs, recomputed": numpy_backend(False),
        "NumPy reference (float64), KV cache": lambda: reference.generate(
            params, config, ids, args.new
        ),
    }
    if hf is None:
        print(f"   Hugging Face: not measured ({hf_note})")
    else:
        runs["Hugging Face generate(use_cache=True)"] = lambda: hf(ids, args.new)
    rows = alternating_medians(runs, args.repeat)
    ours_tokens = rows["llmfs, KV cache"][1]
    for name, (seconds, tokens) in rows.items():
        same = int((tokens[0, args.prompt :] == ours_tokens[0, args.prompt :]).sum())
        print(
            f"   {name:<40} {seconds:8.2f} s  {args.new / seconds:8.2f} tokens/s  "
            f"({same}/{args.new} tokens as llmfs with the cache)"
        )
    cached, recomputed = rows["llmfs, KV cache"][0], rows["llmfs, recomputed"][0]
    speedup = recomputed / cached
    print(f"   cache speed-up: {speedup:.2f}x (goal >= 5: {'ok' if speedup >= 5 else 'MISSED'})")
    if "Hugging Face generate(use_cache=True)" in rows:
        share = rows["Hugging Face generate(use_cache=True)"][0] / cached
        verdict = "ok" if share >= 1.0 else "MISSED"
        print(f"   llmfs / Hugging Face tokens per second: {share:.2f} (goal >= 1: {verdict})")


if __name__ == "__main__":
    main()
