"""llmfs: LLM from scratch.

An interactive course on tensors and transformers, built bottom-up, and the tensor library
(:mod:`llmfs.tensor`) it teaches with.
"""

from __future__ import annotations

__version__ = "0.1.0"

# After __version__, which a module imported below may read while this package initialises.
from llmfs import recording
from llmfs.course.attempts import record_attempt

# The widgets report checked attempts to llmfs.recording; the course's log writes them down.
# Installed here, in the package every llmfs import runs first, so a notebook that imports only
# the widgets still records its attempts.
recording.install_recorder(record_attempt)
