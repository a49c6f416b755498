"""``llmfs.gpt`` exports every error its own functions can raise: code that calls
``llmfs.gpt.generate`` can catch what it raises without knowing which module defines it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import llmfs.gpt
from llmfs.gpt import GPTConfig, GPTError, init_params

#: Lists, in a fresh interpreter, every GPTError subclass defined by the modules that
#: ``import llmfs.gpt`` loads (the modules imported on their own, such as the tokenizer, are not
#: loaded by it and keep their errors).
_LOADED_ERRORS = """
import inspect, json, sys
import llmfs.gpt
from llmfs.gpt.errors import GPTError
found = set()
for name, module in list(sys.modules.items()):
    if name.startswith("llmfs.gpt") and module is not None:
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, GPTError):
                if value.__module__.startswith("llmfs.gpt"):
                    found.add(value.__name__)
print(json.dumps(sorted(found)))
"""


def test_every_error_of_the_modules_the_package_loads_is_exported() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _LOADED_ERRORS], capture_output=True, text=True, check=True
    )
    errors = json.loads(result.stdout)
    assert "GenerationError" in errors
    assert set(errors) <= set(llmfs.gpt.__all__), set(errors) - set(llmfs.gpt.__all__)


def test_every_exported_name_exists() -> None:
    for name in llmfs.gpt.__all__:
        assert hasattr(llmfs.gpt, name), name


def test_generate_raises_the_exported_generation_error() -> None:
    config = GPTConfig(vocab_size=8, n_ctx=4, n_embd=4, n_head=1, n_layer=1)
    params = init_params(config, seed=0)
    with pytest.raises(
        llmfs.gpt.GenerationError, match=r"top_k = 9 is outside 1\.\.vocab_size = 8"
    ):
        llmfs.gpt.generate(params, config, [1, 2], 1, temperature=1.0, top_k=9)
    assert issubclass(llmfs.gpt.GenerationError, GPTError)
