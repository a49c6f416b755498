"""The text model: its corpus (the course's prose, no answers), its tokenizer, its training run
on the tensor engine, and the shipped weights pinned by checksum and record, generating text
that beats every context-free baseline (computed here, not read)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from llmfs.gpt import reference, tensor_model, text_corpus
from llmfs.gpt import text_model as tm
from llmfs.gpt.checkpoint import sha256_of
from llmfs.gpt.errors import ChecksumMismatchError, WeightsError
from llmfs.gpt.experiment import TrainConfig
from llmfs.gpt.model import GPTConfig, check_params, count_parameters
from llmfs.gpt.tokenizer import BPETokenizer
from tests.requirements import require_tool

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGE = ROOT / "llmfs"


@pytest.fixture(scope="module")
def model() -> tm.TextModel:
    return tm.load_text_model()


@pytest.fixture(scope="module")
def parts() -> tm.Split:
    return tm.corpus_split()


# --- the shipped files ----------------------------------------------------------------------


def test_the_shipped_weights_match_their_checksum_and_are_at_most_4_mb() -> None:
    digest, name = tm.TEXT_GPT_SHA256_PATH.read_text().split()
    assert name == tm.TEXT_GPT_PATH.name
    assert sha256_of(tm.TEXT_GPT_PATH) == digest
    assert tm.TEXT_GPT_PATH.stat().st_size <= 4_000_000


def _copy_shipped(folder: Path) -> Path:
    for source in (tm.TEXT_GPT_PATH, tm.TEXT_GPT_SHA256_PATH, tm.TEXT_GPT_RECORD_PATH):
        shutil.copy(source, folder / source.name)
    return folder / tm.TEXT_GPT_PATH.name


def test_a_corrupted_weights_file_is_refused_with_both_digests(tmp_path: Path) -> None:
    copy = _copy_shipped(tmp_path)
    assert tm.load_text_model(copy).record["sha256"] == sha256_of(copy)
    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 1
    copy.write_bytes(bytes(data))
    with pytest.raises(ChecksumMismatchError, match=r"text_gpt\.npz has SHA-256") as info:
        tm.load_text_model(copy)
    assert sha256_of(copy) in str(info.value)


def test_a_record_of_other_weights_or_no_record_is_refused(tmp_path: Path) -> None:
    copy = _copy_shipped(tmp_path)
    record_path = copy.with_suffix(".json")
    record = json.loads(record_path.read_text())
    record["sha256"] = "0" * 64
    record_path.write_text(json.dumps(record))
    with pytest.raises(ChecksumMismatchError, match="the record belongs to other weights"):
        tm.load_text_model(copy)
    record_path.write_text("{")
    with pytest.raises(tm.TextModelError, match="cannot be read"):
        tm.load_text_model(copy)
    record_path.write_text(json.dumps({"model": {"vocab_size": 0}}))
    with pytest.raises(tm.TextModelError, match="does not describe a model"):
        tm.load_text_model(copy)
    record_path.unlink()
    with pytest.raises(tm.TextModelError, match="cannot be read"):
        tm.load_text_model(copy)
    with pytest.raises(WeightsError, match="no file at"):
        tm.load_text_model(tmp_path / "absent.npz")


def test_a_tokenizer_other_than_the_recorded_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vocab, merges = tm.tokenizer_files()
    shutil.copy(vocab, tmp_path / "vocab.json")
    lines = merges.read_text().splitlines()
    (tmp_path / "merges.txt").write_text("\n".join(lines[:-1]) + "\n")  # one merge fewer
    monkeypatch.setattr(text_corpus, "MERGES_PATH", tmp_path / "merges.txt")
    with pytest.raises(ChecksumMismatchError, match=r"merges\.txt has SHA-256 .* not the one"):
        tm.load_text_model()


def test_the_loaded_shapes_match_the_config(model: tm.TextModel) -> None:
    config = model.config
    assert config == GPTConfig(**model.record["model"])
    check_params(model.weights, config)
    assert {v.dtype for v in model.weights.values()} == {np.dtype(np.float32)}
    assert count_parameters(config) == model.record["parameters"]
    assert model.weights["wte.weight"].shape == (model.tokenizer.vocab_size, config.n_embd)
    assert model.record["engine"] == "tensor"
    # float32 values and a few hundred bytes of archive headers per member
    assert tm.TEXT_GPT_PATH.stat().st_size < 4 * count_parameters(config) + 300 * len(model.weights)


def test_the_record_pins_the_shipped_corpus_and_tokenizer(
    model: tm.TextModel, parts: tm.Split
) -> None:
    corpus = model.record["corpus"]
    text = tm.corpus_text()
    assert corpus["sha256"] == tm.sha256_text(text)
    assert corpus["characters"] == len(text)
    assert corpus["sources"] == list(tm.SOURCES)
    assert corpus["split"]["train_tokens"] == len(parts.train)
    assert corpus["split"]["held_out_tokens"] == len(parts.held_out)
    vocab, merges = tm.tokenizer_files()
    assert model.record["tokenizer"]["vocab_sha256"] == sha256_of(vocab)
    assert model.record["tokenizer"]["merges_sha256"] == sha256_of(merges)


def test_the_shipped_tokenizer_is_what_training_on_the_corpus_gives(model: tm.TextModel) -> None:
    text = tm.corpus_text()
    trained = BPETokenizer.train(text, tm.VOCAB_SIZE)
    assert trained.vocab == model.tokenizer.vocab
    assert trained.merges == model.tokenizer.merges
    assert model.tokenizer.vocab_size == tm.VOCAB_SIZE
    assert model.tokenizer.decode(model.tokenizer.encode(text)) == text


def test_every_shipped_file_is_package_data() -> None:
    """Each file the model needs matches a ``[tool.setuptools.package-data]`` pattern of
    pyproject.toml, as setuptools globs them under ``llmfs/``, so a wheel carries it."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["llmfs"]
    shipped = {PACKAGE / p.relative_to(PACKAGE) for p in (tm.CORPUS_PATH, *tm.tokenizer_files())}
    shipped |= {tm.TEXT_GPT_PATH, tm.TEXT_GPT_SHA256_PATH, tm.TEXT_GPT_RECORD_PATH}
    globbed = {path for pattern in patterns for path in PACKAGE.glob(pattern)}
    assert shipped <= globbed, sorted(str(p) for p in shipped - globbed)


# --- the corpus -----------------------------------------------------------------------------


def test_the_extractor_is_a_pure_function_of_the_sources() -> None:
    first = tm.extract_corpus(ROOT)
    assert first == tm.extract_corpus(ROOT)
    assert first.endswith("\n") and not first.endswith("\n\n")
    assert "```" not in first and "\r" not in first
    # the fixed list, in order: chapter 1's title comes first, the README's last
    assert first.index("# Chapter 1") < first.index("# LLM from scratch: learner guide")
    assert first.index("# LLM from scratch: learner guide") < first.index(
        "\n# llmfs — LLM from scratch\n"
    )


def _git_show(commit: str, path: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{commit}:{path}"],
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.decode("utf-8") if done.returncode == 0 else None


def test_the_shipped_corpus_is_what_the_recorded_commit_s_sources_give() -> None:
    """The frozen corpus regenerates byte for byte from the sources at SOURCES_COMMIT (the prose
    of later commits may differ; that is a new corpus, not a broken one)."""
    texts = [(name, _git_show(tm.SOURCES_COMMIT, name)) for name in tm.SOURCES]
    missing = [name for name, text in texts if text is None]
    if missing:
        require_tool(f"no git history with {tm.SOURCES_COMMIT[:10]} here (a shallow copy?)")
    assert tm.corpus_of([(n, t) for n, t in texts if t is not None]) == tm.corpus_text()


def test_the_extraction_rules_on_a_made_checkout(tmp_path: Path) -> None:
    notebook = {
        "cells": [
            {"cell_type": "markdown", "source": ["# Title  \r\n", "\r\n", "\r\n", "Prose."]},
            {"cell_type": "code", "source": ["answer = 42"]},
            {"cell_type": "markdown", "source": "```python\nx = 1\n```\nAfter the code."},
            {"cell_type": "markdown", "source": ""},
        ]
    }
    (tmp_path / "a.ipynb").write_text(json.dumps(notebook))
    (tmp_path / "b.md").write_text(
        "Intro\n~~~\n```inside a tilde fence```\n~~~\n\n\n\nOutro   \n  ```bash\nls\n  ```\nEnd\n"
    )
    text = tm.extract_corpus(tmp_path, ("a.ipynb", "b.md"))
    assert text == "# Title\n\nProse.\n\nAfter the code.\n\nIntro\n\nOutro\nEnd\n"
    assert tm.extract_corpus(tmp_path, ("a.ipynb", "b.md")) == text
    # an unclosed fence runs to the end of the text, as in CommonMark
    assert tm.markdown_prose("kept\n```\nnot kept\n~~~\n") == "kept"
    with pytest.raises(tm.TextModelError, match=r"corpus source c\.md cannot be read"):
        tm.extract_corpus(tmp_path, ("a.ipynb", "c.md"))
    (tmp_path / "bad.ipynb").write_text('{"cells": 3}')
    with pytest.raises(tm.TextModelError, match=r"bad\.ipynb is not a notebook"):
        tm.extract_corpus(tmp_path, ("bad.ipynb",))


def test_the_corpus_holds_no_line_that_only_the_solution_notebooks_showed() -> None:
    """The corpus read the student notebooks of :data:`SOURCES_COMMIT`; a markdown line that only
    a solution notebook of that commit had (a worked answer) appears nowhere in it. (Prose moved
    into solution-only cells later, such as the explanations a check shows once an exercise is
    finished, is judged by the corpus a retraining extracts, not by this frozen one.)"""
    corpus_lines = set(tm.corpus_text().split("\n"))
    student_lines: set[str] = set()
    solution_lines: set[str] = set()
    for source in tm.SOURCES:
        if not source.startswith("notebooks/"):
            continue
        student = _git_show(tm.SOURCES_COMMIT, source)
        solution = _git_show(tm.SOURCES_COMMIT, source.replace("notebooks/", "solutions/", 1))
        if student is None or solution is None:
            require_tool(f"no git history with {tm.SOURCES_COMMIT[:10]} here (a shallow copy?)")
            return
        student_lines |= set(tm.notebook_prose(student).split("\n"))
        solution_lines |= set(tm.notebook_prose(solution).split("\n"))
    only_solutions = {line for line in solution_lines - student_lines if len(line) > 20}
    assert only_solutions, "the solution notebooks were expected to hold answers in markdown"
    assert not (only_solutions & corpus_lines)


# --- the split, the windows and the baselines -----------------------------------------------


def test_the_split_holds_out_every_tenth_block() -> None:
    ids = np.arange(5000)
    parts = tm.split(ids, block=100, every=10)
    held = parts.held_out.reshape(-1, 100)
    assert held[:, 0].tolist() == [900, 1900, 2900, 3900, 4900]
    assert len(parts.train) + len(parts.held_out) == 5000
    assert not set(parts.train.tolist()) & set(parts.held_out.tolist())
    with pytest.raises(tm.TextModelError, match="leave no held-out block"):
        tm.split(np.arange(899), block=100, every=10)
    with pytest.raises(tm.TextModelError, match="block >= 1 and every >= 2"):
        tm.split(ids, block=0)


def test_windows_are_seeded_slices_of_the_stream() -> None:
    stream = np.arange(1000) * 3
    cfg = TrainConfig(seed=5, steps=4, batch_size=3)
    batches = list(tm.windows(stream, 16, cfg))
    assert batches and all(b.shape == (3, 17) for b in batches)
    for batch in batches:
        assert np.all(np.diff(batch, axis=1) == 3)  # consecutive tokens of the stream
    again = list(tm.windows(stream, 16, cfg))
    assert all(np.array_equal(a, b) for a, b in zip(batches, again))
    last = list(tm.windows(np.arange(17), 16, TrainConfig(steps=2, batch_size=2)))
    assert all(np.array_equal(b, np.tile(np.arange(17), (2, 1))) for b in last)
    with pytest.raises(tm.TextModelError, match="16 tokens holds no window of 17"):
        next(tm.windows(np.arange(16), 16, cfg))
    windows = tm.held_out_windows(np.arange(50), 16)
    assert windows[:, 0].tolist() == [0, 16, 32] and windows[-1, -1] == 48
    with pytest.raises(tm.TextModelError, match="holds no window"):
        tm.held_out_windows(np.arange(16), 16)


def test_the_unigram_baselines_by_hand() -> None:
    parts = tm.Split(np.array([0, 0, 1, 1]), np.array([0, 0, 0, 1]))
    values = tm.unigram_baselines(parts, vocab_size=3)
    # train counts + 1: [3, 3, 1] of 7; held-out: three 0s and one 1
    assert values["train_unigram"] == pytest.approx(-np.log(3 / 7))
    assert values["held_out_entropy"] == pytest.approx(-(0.75 * np.log(0.75) + 0.25 * np.log(0.25)))


# --- training ---------------------------------------------------------------------------------

TINY = GPTConfig(vocab_size=tm.VOCAB_SIZE, n_ctx=16, n_embd=16, n_head=2, n_layer=1)
SHORT = TrainConfig(
    seed=3,
    steps=30,
    batch_size=8,
    learning_rate=1e-2,
    warmup_steps=5,
    log_every=5,
    eval_every=15,
)


@pytest.fixture(scope="module")
def short_parts(parts: tm.Split) -> tm.Split:
    return tm.Split(parts.train[:20000], parts.held_out[:1000])


def test_a_short_run_is_deterministic_and_its_losses_fall(short_parts: tm.Split) -> None:
    first = tm.train(TINY, SHORT, short_parts)
    second = tm.train(TINY, SHORT, short_parts)
    assert first.losses == second.losses
    assert all(np.array_equal(first.params[n], second.params[n]) for n in first.params)
    assert [step for step, _ in first.curve] == [5, 10, 15, 20, 25, 30]
    assert [step for step, _ in first.held_out_curve] == [15, 30]
    start, end = first.curve[0][1], first.curve[-1][1]
    assert end < start - 0.5, (start, end)
    assert first.held_out_curve[-1][1] < np.log(tm.VOCAB_SIZE) - 0.5
    # the held-out loss is the float64 reference's on the weights the run returns
    held = tm.held_out_loss(first.params, TINY, short_parts.held_out)
    assert held == pytest.approx(first.held_out_curve[-1][1], abs=1e-12)
    assert first.selected_step == SHORT.steps
    other = tm.train(TINY, TrainConfig(**{**SHORT.__dict__, "seed": 4}), short_parts)
    assert other.losses != first.losses


def test_keep_best_returns_the_weights_of_the_lowest_held_out_loss(short_parts: tm.Split) -> None:
    # A learning rate this high overfits 2,000 tokens within 40 steps: the held-out loss turns.
    cfg = TrainConfig(**{**SHORT.__dict__, "steps": 40, "learning_rate": 3e-2, "eval_every": 5})
    parts = tm.Split(short_parts.train[:2000], short_parts.held_out)
    last = tm.train(TINY, cfg, parts)
    best = tm.train(TINY, cfg, parts, keep_best=True)
    assert best.losses == last.losses and best.held_out_curve == last.held_out_curve
    steps, losses = zip(*best.held_out_curve)
    assert best.selected_step == steps[int(np.argmin(losses))]
    assert best.selected_step < cfg.steps, best.held_out_curve  # the case worth testing
    held = tm.held_out_loss(best.params, TINY, parts.held_out)
    assert held == pytest.approx(min(losses), abs=1e-12)
    assert held < tm.held_out_loss(last.params, TINY, parts.held_out)


# --- the shipped model ------------------------------------------------------------------------


def test_the_held_out_loss_is_below_every_unigram_baseline(
    model: tm.TextModel, parts: tm.Split
) -> None:
    held = tm.held_out_loss(model.weights, model.config, parts.held_out)
    assert held == pytest.approx(model.record["saved_held_out_loss"], abs=1e-5)
    baselines = tm.unigram_baselines(parts, model.config.vocab_size)
    for name, value in baselines.items():
        assert model.record["baselines"][name] == pytest.approx(value, abs=1e-6)
    # at least a nat per token better than the best context-free distribution
    assert held < min(baselines.values()) - 1.0, (held, baselines)
    curve = dict(model.record["held_out_loss_curve"])
    assert curve[model.record["selected_step"]] == pytest.approx(held, abs=1e-5)


def test_greedy_generation_is_deterministic_with_and_without_the_cache(
    model: tm.TextModel,
) -> None:
    ids = model.tokenizer.encode("A view")
    cached = reference.generate(model.weights, model.config, ids, 24)
    assert np.array_equal(cached, reference.generate(model.weights, model.config, ids, 24))
    uncached = reference.generate(model.weights, model.config, ids, 24, kv_cache=False)
    assert np.array_equal(cached, uncached)
    w = tensor_model.tensor_params(model.weights, np.float64)
    assert np.array_equal(cached, tensor_model.generate(w, model.config, ids, 24))
    assert cached.shape == (1, len(ids) + 24)
    assert model.tokenizer.decode(cached[0].tolist()).startswith("A view")


def test_sampling_is_reproducible_per_seed_and_decodes(model: tm.TextModel) -> None:
    one = tm.sample(model, "A view", 30, temperature=0.8, top_k=40, seed=0)
    assert one == tm.sample(model, "A view", 30, temperature=0.8, top_k=40, seed=0)
    assert one != tm.sample(model, "A view", 30, temperature=0.8, top_k=40, seed=1)
    assert one.startswith("A view")


def test_the_command_checks_the_corpus_against_a_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for source in tm.SOURCES:
        (tmp_path / source).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / source).write_text('{"cells": []}' if source.endswith(".ipynb") else "x\n")
    assert tm.main(["corpus", "--check", "--root", str(tmp_path)]) == 1
    assert "the sources give another corpus" in capsys.readouterr().out
    (tmp_path / tm.SOURCES[0]).unlink()
    assert tm.main(["corpus", "--check", "--root", str(tmp_path)]) == 1
    assert "cannot be read" in capsys.readouterr().err
