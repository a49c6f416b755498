"""The tokenizer's encodings equal Hugging Face's ``GPT2Tokenizer`` (and the ``tokenizers``
library's byte-level BPE) on the same files, built here by the trainer: nothing is downloaded.

``transformers`` and ``tokenizers`` are not dependencies of the package; without them these
tests skip (install them, for example ``pip install torch transformers``, to run them).

Two things are set aside, each a documented difference rather than a disagreement of the rule:
the literal text ``<|endoftext|>`` (Hugging Face emits its special id, this tokenizer encodes the
characters, as OpenAI's encoder does) and code points unassigned in this Python's Unicode version
(letters in newer Unicode tables; see the module docstring).
"""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmfs.gpt.tokenizer import END_OF_TEXT, BPETokenizer, bytes_to_unicode

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (not a dependency of llmfs)"
)
tokenizers = pytest.importorskip(
    "tokenizers", reason="tokenizers is not installed (not a dependency of llmfs)"
)

HOSTILE = (
    "Hello, world! It's 12 o'clock; we'll see—you're 'quoted' and I'd've said 'S.\n"
    "  indented\tline\r\n\n\n   trailing   \n"
    "naïve café e\u0301 a\u0308\u0301 Ω≈ç√ ﬁ ǅ \u00a0nbsp\u2009thin\u3000ideographic "
    "数字一二三 ١٢٣ ½ Ⅻ ² 🎉🧑‍🤝‍🧑 👍🏽 \u200d\u200b zero-width \x1c\x1d\x1e\x1f seps "
    "\x00\x01\x7f controls ’curly’ ''' '' ' s 't 'll 'LL 'S" + " " * 40 + "end"
)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[BPETokenizer, Path, Path]:
    corpus = Path(__file__).resolve().parents[2].joinpath("README.md").read_text("utf-8")
    ours = BPETokenizer.train(corpus[:20000] + HOSTILE * 3, 600)
    vocab, merges = ours.save(tmp_path_factory.mktemp("bpe"))
    return ours, vocab, merges


@pytest.fixture(scope="module")
def hf(files: tuple[BPETokenizer, Path, Path]) -> Any:
    _, vocab, merges = files
    return transformers.GPT2Tokenizer(vocab=str(vocab), merges=str(merges))


@pytest.fixture(scope="module")
def fast(files: tuple[BPETokenizer, Path, Path]) -> Any:
    _, vocab, merges = files
    return tokenizers.ByteLevelBPETokenizer(str(vocab), str(merges), add_prefix_space=False)


def _comparable(text: str) -> str:
    return "".join(c for c in text if unicodedata.category(c) != "Cn").replace(END_OF_TEXT, "")


def _assert_same(files: tuple[BPETokenizer, Path, Path], hf: Any, fast: Any, text: str) -> None:
    ours = files[0]
    ids = ours.encode(text)
    assert ids == hf.encode(text, add_special_tokens=False)
    assert ids == fast.encode(text).ids
    assert hf.decode(ids, clean_up_tokenization_spaces=False) == text == ours.decode(ids)


def test_hostile_text_encodes_as_hugging_face(
    files: tuple[BPETokenizer, Path, Path], hf: Any, fast: Any
) -> None:
    for text in (HOSTILE, "", " ", " " * 257, "\n\n\n", "a" * 1000, "'s's's 'S 'LL"):
        _assert_same(files, hf, fast, text)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.characters(exclude_categories=("Cs",)),
            st.sampled_from([" ", "  ", "\n", "\t", "\xa0", "\u2009", "\x1c", "'s", "'ll", "٣"]),
            st.sampled_from(["the", " model", " token", "izer", "ing", " of", "12", "é"]),
        ),
        max_size=80,
    ).map("".join)
)
def test_random_unicode_encodes_as_hugging_face(
    files: tuple[BPETokenizer, Path, Path], hf: Any, fast: Any, text: str
) -> None:
    _assert_same(files, hf, fast, _comparable(text))


def test_hugging_face_reads_the_end_of_text_token_from_the_files(
    files: tuple[BPETokenizer, Path, Path], hf: Any
) -> None:
    ours = files[0]
    assert hf.eos_token_id == ours.end_of_text_id == ours.vocab_size - 1
    assert len(hf) == ours.vocab_size


def test_gpt2s_own_id_layout_encodes_as_hugging_face(
    files: tuple[BPETokenizer, Path, Path], tmp_path: Path
) -> None:
    # GPT-2's encoder.json numbers the bytes in the byte map's order (printable ones first: "!"
    # is id 0), then the merges, then <|endoftext|>: the same merges under other ids.
    ours = files[0]
    printable_first = sorted(
        range(256), key=lambda b: (not (33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255), b)
    )
    table = bytes_to_unicode()
    order = [table[b] for b in printable_first]
    order += [a + b for a, b in ours.merges] + [END_OF_TEXT]
    relabelled = BPETokenizer({token: i for i, token in enumerate(order)}, list(ours.merges))
    assert relabelled.vocab["!"] == 0 and relabelled.vocab["Ā"] == 188
    vocab, merges = relabelled.save(tmp_path)
    hf = transformers.GPT2Tokenizer(vocab=str(vocab), merges=str(merges))
    for text in (HOSTILE, "Hello, world!", " \x00\x01 control bytes"):
        ids = relabelled.encode(text)
        assert ids == hf.encode(text, add_special_tokens=False)
        assert [relabelled.tokens(text)] == [[order[i] for i in ids]]
        assert relabelled.decode(ids) == text
