"""``load_gpt2`` on a Hugging Face GPT-2 written by the recipe in its docstring: the same logits
as ``transformers``, and the head count read from the file. The model is a small random one built
here (nothing is downloaded); without ``torch`` and ``transformers`` (not dependencies of llmfs)
these tests skip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from llmfs.gpt import reference
from llmfs.gpt.checkpoint import load_gpt2
from llmfs.gpt.errors import WeightsError

torch = pytest.importorskip("torch", reason="torch is not installed (not a dependency of llmfs)")
transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (not a dependency of llmfs)"
)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=97, n_positions=32, n_embd=48, n_layer=3, n_head=4, layer_norm_epsilon=1e-5
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    path = tmp_path_factory.mktemp("gpt2") / "gpt2.npz"
    sd = model.state_dict()
    np.savez(path, n_head=model.config.n_head, **{k: v.numpy() for k, v in sd.items()})
    return path, model


def test_the_recipes_file_gives_hugging_faces_logits(saved: tuple[Path, object]) -> None:
    path, model = saved
    params, config = load_gpt2(path)
    assert (config.n_head, config.n_layer, config.n_embd, config.n_ctx) == (4, 3, 48, 32)
    ids = np.array([[5, 17, 3, 96, 0, 42, 8]])
    with torch.no_grad():
        expected = model(torch.from_numpy(ids)).logits.numpy()  # type: ignore[operator]
    np.testing.assert_allclose(reference.forward(params, config, ids), expected, atol=1e-4)


def test_a_wrong_head_count_is_refused_not_run(saved: tuple[Path, object]) -> None:
    path, _ = saved
    with pytest.raises(WeightsError, match=r"n_head=8 was given, but the file's 'n_head' member"):
        load_gpt2(path, n_head=8)
