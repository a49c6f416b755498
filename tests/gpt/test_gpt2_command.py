"""``llmfs gpt2 generate [FOLDER] PROMPT``: the prompt and its continuation by this package's
model from a Hugging Face folder (a small random one written here), the rate on standard error,
the folder from ``LLMFS_GPT2_DIR`` when not given, and one clear line for every mistake."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from llmfs.cli import main
from llmfs.gpt import tensor_model as tm
from llmfs.gpt.hf_folder import load_folder, load_tokenizer, write_folder
from llmfs.gpt.model import GPTConfig, init_params
from llmfs.gpt.tokenizer import BPETokenizer

TEXT = "the cat sat on the mat; the dog sat on the log. " * 6


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tokenizer = BPETokenizer.train(TEXT, 270)
    config = GPTConfig(vocab_size=tokenizer.vocab_size, n_ctx=16, n_embd=16, n_head=2, n_layer=2)
    params = {n: 5 * v for n, v in init_params(config, 1).items()}
    return write_folder(tmp_path_factory.mktemp("gpt2"), params, config, tokenizer)


def expected_text(folder: Path, prompt: str, new: int) -> str:
    params, config = load_folder(folder)
    tokenizer = load_tokenizer(folder, config)
    ids = np.array([tokenizer.encode(prompt)])
    stop = tokenizer.end_of_text_id
    out = tm.generate(tm.tensor_params(params, np.float32), config, ids, new, stop_token=stop)
    made = out[0, ids.shape[1] :].tolist()
    return prompt + tokenizer.decode(made[: made.index(stop)] if stop in made else made)


def test_generate_prints_the_continuation_and_the_rate(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gpt2", "generate", str(folder), "the cat", "--max-new-tokens", "7"]) == 0
    out, err = capsys.readouterr()
    assert out == expected_text(folder, "the cat", 7) + "\n"
    assert out.startswith("the cat") and len(out) > len("the cat\n")
    assert "7 new tokens in" in err and "tokens per second" in err


def test_the_folder_comes_from_the_environment_when_not_given(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMFS_GPT2_DIR", str(folder))
    assert main(["gpt2", "generate", "the dog", "--max-new-tokens", "4"]) == 0
    assert capsys.readouterr().out == expected_text(folder, "the dog", 4) + "\n"


def test_the_text_ends_before_the_end_of_text_token(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model whose every step prefers <|endoftext|> prints the prompt alone, and stops after
    one token."""
    params, config = load_folder(folder)
    tokenizer = load_tokenizer(folder, config)
    stop = tokenizer.end_of_text_id
    assert stop is not None
    biased = {name: value.copy() for name, value in params.items()}
    biased["wte.weight"][stop] *= 0
    biased["wte.weight"][stop] += 50 * biased["ln_f.bias"] + 50
    biased["ln_f.bias"] += 1.0
    eager = folder.parent / "eager"
    write_folder(eager, biased, config, tokenizer)
    assert main(["gpt2", "generate", str(eager), "the cat", "--max-new-tokens", "9"]) == 0
    out, err = capsys.readouterr()
    assert out == "the cat\n"
    assert "1 new tokens in" in err


def test_sampling_is_reproducible_with_a_seed(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["gpt2", "generate", str(folder), "the", "--temperature", "1.5", "--top-k", "20"]
    outputs = []
    for seed in ("3", "3", "4"):
        assert main([*argv, "--seed", seed, "--max-new-tokens", "12"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert outputs[0] != outputs[2]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["/no/such/folder", "hello"], "no folder at /no/such/folder"),
        (["{folder}", "hello", "there"], "expected [FOLDER] PROMPT, got 3 arguments"),
        (["{folder}", ""], "the prompt is empty"),
        (["{folder}", "hi", "--top-k", "0"], "top_k"),
        (["{folder}", "hi", "--temperature", "-1"], "temperature"),
        (["{folder}", "hi", "--max-new-tokens", "-2"], "max_new_tokens"),
    ],
)
def test_a_mistake_is_one_line_and_status_1(
    folder: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    argv = [a.replace("{folder}", str(folder)) for a in argv]
    assert main(["gpt2", "generate", *argv]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("llmfs gpt2 generate: ") and message in err
    assert err.count("\n") == 1


def test_no_folder_and_no_variable_says_how_to_get_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LLMFS_GPT2_DIR", raising=False)
    assert main(["gpt2", "generate", "hello"]) == 1
    err = capsys.readouterr().err
    assert "$LLMFS_GPT2_DIR is not set" in err and "hf download gpt2" in err


def test_a_folder_of_another_model_is_refused_naming_the_file(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    for path in folder.iterdir():
        (other / path.name).write_bytes(path.read_bytes())
    config = (other / "config.json").read_text().replace('"gpt2"', '"llama"')
    (other / "config.json").write_text(config)
    assert main(["gpt2", "generate", str(other), "hi"]) == 1
    assert "config.json: model_type is 'llama'" in capsys.readouterr().err


def test_the_installed_command_runs(folder: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "llmfs",
            "gpt2",
            "generate",
            str(folder),
            "the mat",
            "--max-new-tokens",
            "3",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout == expected_text(folder, "the mat", 3) + "\n"
    assert "tokens per second" in result.stderr
