"""``python -m llmfs.gpt``: the same as ``python -m llmfs.gpt.evaluate``."""

from __future__ import annotations

import sys

from llmfs.gpt.evaluate import main

sys.exit(main())
