"""llmfs: LLM from scratch.

An interactive course on tensors and transformers, built bottom-up, and the tensor library
(:mod:`llmfs.tensor`) it teaches with.
"""

from __future__ import annotations

__version__ = "0.1.0"
