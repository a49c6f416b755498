"""``llmfs.gpt``: the course's capstone model, a tiny GPT-2 that adds two 2-digit numbers.

Pure NumPy and independent of :mod:`llmfs.tensor` (it is what the tensor library's version is
checked against):

* :mod:`llmfs.gpt.task`: the task (``"37+45="`` -> ``"280"``, the sum's digits least significant
  first), its 12-token vocabulary, the seeded training/held-out split and the exact checker;
* :mod:`llmfs.gpt.model`: :class:`GPTConfig`, :data:`TINY_CONFIG`, GPT-2 parameter names and
  shapes, initialisation;
* :mod:`llmfs.gpt.reference`: the float64 forward pass, step by step, generation (greedy or
  sampled, with a KV cache) and accuracy;
* :mod:`llmfs.gpt.sampling`: generation's argument checks and choice of the next token, shared
  with the tensor model (its :class:`GenerationError` is exported here, beside every other error
  the package's functions raise);
* :mod:`llmfs.gpt.checkpoint`: the shipped weights (checksum verified), byte-reproducible ``.npz``
  files, and GPT-2 weights from a local file or a Hugging Face folder
  (:mod:`llmfs.gpt.hf_folder`: ``config.json``, ``model.safetensors``, ``vocab.json``,
  ``merges.txt``);
* :mod:`llmfs.gpt.train`: the training script (hand-written backpropagation, AdamW);
  ``--engine tensor`` trains with :mod:`llmfs.gpt.tensor_train` (llmfs.tensor autograd) instead;
* :mod:`llmfs.gpt.evaluate`: ``python -m llmfs.gpt.evaluate`` prints the held-out accuracy.
* :mod:`llmfs.gpt.tokenizer`: GPT-2's byte-level BPE tokenizer (read GPT-2's files, encode,
  decode, train, save), imported on its own.

:mod:`llmfs.gpt.tensor_model` (imported on its own, never by this package) is the same forward pass
on :mod:`llmfs.tensor`, the one chapter 8 has the learner write, with its KV cache
(:mod:`llmfs.gpt.kv_cache`, also imported on its own); ``python -m llmfs.gpt.evaluate --tensor``
evaluates and times it. :mod:`llmfs.gpt.lora` (low-rank adapters beside frozen weights, run by
that forward pass) and :mod:`llmfs.gpt.finetune` (the adder fine-tuned on a new answer format, by
LoRA or every parameter) are imported on their own too, as is :mod:`llmfs.gpt.gpt2_command`
(``llmfs gpt2 generate``). :mod:`llmfs.gpt.text_model` (also imported on its own) is the small GPT
the tensor engine trained on the course's own prose: its corpus, tokenizer files, shipped
weights with checksum and record, and :func:`~llmfs.gpt.text_model.load_text_model`.
"""

from __future__ import annotations

from llmfs.gpt.checkpoint import load_gpt2, load_params, load_tiny_gpt, save_params
from llmfs.gpt.errors import ChecksumMismatchError, ConfigError, GPTError, TaskError, WeightsError
from llmfs.gpt.model import (
    GPT2_SMALL_CONFIG,
    TINY_CONFIG,
    GPTConfig,
    Params,
    count_parameters,
    init_params,
    parameter_shapes,
)
from llmfs.gpt.reference import accuracy, activations, forward, generate, held_out_accuracy, solve
from llmfs.gpt.sampling import GenerationError

__all__ = [
    "GPT2_SMALL_CONFIG",
    "TINY_CONFIG",
    "ChecksumMismatchError",
    "ConfigError",
    "GPTConfig",
    "GPTError",
    "GenerationError",
    "Params",
    "TaskError",
    "WeightsError",
    "accuracy",
    "activations",
    "count_parameters",
    "forward",
    "generate",
    "held_out_accuracy",
    "init_params",
    "load_gpt2",
    "load_params",
    "load_tiny_gpt",
    "parameter_shapes",
    "save_params",
    "solve",
]
