"""``llmfs gpt2 generate [FOLDER] PROMPT``: GPT-2 from a Hugging Face folder the learner already
has, run by this package's own forward pass (:mod:`llmfs.gpt.tensor_model`, with its KV cache),
its prompt encoded by chapter 11's byte-level BPE read from the same folder.

The folder is what ``hf download gpt2 --local-dir DIR`` (Hugging Face's tool; older versions
spell it ``huggingface-cli download``) or ``save_pretrained`` writes: ``config.json``,
``model.safetensors``, ``vocab.json``, ``merges.txt``. Without FOLDER the environment variable
``LLMFS_GPT2_DIR`` names it. Nothing is ever downloaded.

Prints the prompt and its continuation on standard output, then on standard error how many
tokens were generated and how fast (tokens per second, the prompt's pass included). Generation
stops early when every row chose ``<|endoftext|>`` (when the vocabulary has it). A folder that
cannot be read, or a bad argument, prints one line naming the problem and exits with status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

#: The environment variable naming the folder when the command line does not.
FOLDER_VARIABLE = "LLMFS_GPT2_DIR"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``generate`` sub-command and its options."""
    sub = parser.add_subparsers(dest="gpt2_command", metavar="generate", required=True)
    help_text = "continue a prompt with GPT-2 from a Hugging Face folder on this machine"
    generate = sub.add_parser(
        "generate",
        usage="llmfs gpt2 generate [-h] [FOLDER] PROMPT [--max-new-tokens N] [--temperature T] "
        "[--top-k K] [--seed S] [--dtype {float32,float64}]",
        help=help_text,
        description=help_text + f" (FOLDER defaults to ${FOLDER_VARIABLE}; nothing is downloaded)",
    )
    generate.add_argument(
        "words",
        nargs="+",
        metavar="FOLDER PROMPT",
        help="the folder holding config.json, model.safetensors, vocab.json and merges.txt "
        f"(default ${FOLDER_VARIABLE}), then the prompt text",
    )
    generate.add_argument("--max-new-tokens", type=int, default=40, metavar="N", help="default 40")
    generate.add_argument(
        "--temperature", type=float, default=0.0, metavar="T", help="0 (the default) is greedy"
    )
    generate.add_argument(
        "--top-k", type=int, default=None, metavar="K", help="keep the k likeliest tokens"
    )
    generate.add_argument("--seed", type=int, default=None, metavar="S", help="the sampler's seed")
    generate.add_argument(
        "--dtype",
        choices=("float32", "float64"),
        default="float32",
        help="the weights' dtype in the forward pass (default float32)",
    )
    generate.set_defaults(_parser=generate)


def _folder_and_prompt(words: list[str]) -> tuple[Path, str]:
    if len(words) == 2:
        return Path(words[0]), words[1]
    if len(words) > 2:
        raise ValueError(f"expected [FOLDER] PROMPT, got {len(words)} arguments: quote the prompt")
    folder = os.environ.get(FOLDER_VARIABLE)
    if not folder:
        raise ValueError(
            f"no FOLDER given and ${FOLDER_VARIABLE} is not set: pass the folder of a Hugging "
            f"Face GPT-2 before the prompt (for example the folder that `hf download gpt2 "
            f"config.json model.safetensors vocab.json merges.txt --local-dir gpt2` writes)"
        )
    return Path(folder), words[0]


def main(args: argparse.Namespace) -> int:
    """Loads the folder, generates, prints; returns 0, or 1 after printing what went wrong."""
    # Imported here, so that `llmfs --help` does not load the tensor library.
    from llmfs.gpt import tensor_model
    from llmfs.gpt.errors import GPTError
    from llmfs.gpt.hf_folder import load_folder, load_tokenizer

    try:
        folder, prompt = _folder_and_prompt(list(args.words))
        params, config = load_folder(folder)
        tokenizer = load_tokenizer(folder, config)
        ids = tokenizer.encode(prompt)
        if not ids:
            raise ValueError("the prompt is empty: give at least one character")
        weights = tensor_model.tensor_params(params, np.dtype(args.dtype))
        start = time.perf_counter()
        out = tensor_model.generate(
            weights,
            config,
            np.array([ids], dtype=np.int64),
            args.max_new_tokens,
            temperature=args.temperature,
            top_k=args.top_k,
            seed=args.seed,
            stop_token=tokenizer.end_of_text_id,
        )
        seconds = time.perf_counter() - start
    except (GPTError, ValueError) as error:
        print(f"llmfs gpt2 generate: {error}", file=sys.stderr)
        return 1
    new = [int(i) for i in out[0, len(ids) :]]
    if tokenizer.end_of_text_id in new:  # the text ends before the end-of-text token
        new = new[: new.index(tokenizer.end_of_text_id)]
    print(prompt + tokenizer.decode(new))
    made = out.shape[1] - len(ids)
    rate = made / seconds if seconds > 0 else float("inf")
    print(
        f"{made} new tokens in {seconds:.2f} s: {rate:.1f} tokens per second "
        f"({config.n_layer} blocks, {config.n_embd} features, {args.dtype})",
        file=sys.stderr,
    )
    return 0


__all__ = ["FOLDER_VARIABLE", "add_arguments", "main"]
