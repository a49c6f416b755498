"""Errors of :mod:`llmfs.gpt`: every refusal is a :class:`GPTError` (a ``ValueError``).

Each message names the violated condition and the numbers involved, like the tensor library's
``TensorError``; the package keeps its own base class so that it never imports the tensor library.
"""

from __future__ import annotations


class GPTError(ValueError):
    """Base class of every error raised by :mod:`llmfs.gpt`."""


class ConfigError(GPTError):
    """A model configuration that cannot describe a GPT (for example ``n_embd % n_head != 0``)."""


class TaskError(GPTError):
    """A problem or token sequence outside the task (an operand out of range, an unknown token)."""


class WeightsError(GPTError):
    """A weights file or parameter dict that does not fit the model: a missing or unexpected
    name, a wrong shape, an absent file."""


class ChecksumMismatchError(WeightsError):
    """The weights file's SHA-256 differs from the checksum shipped beside it."""
