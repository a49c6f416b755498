"""GPT-2's byte-level BPE: the byte map, the pre-tokenizer, BPE, training, the files and their
errors. (Hugging Face's tokenizer is compared in test_tokenizer_hf.py.)"""

from __future__ import annotations

import json
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmfs.gpt import tokenizer as tk
from llmfs.gpt.errors import GPTError
from llmfs.gpt.tokenizer import (
    END_OF_TEXT,
    WHITESPACE,
    BPETokenizer,
    TokenizerError,
    TokenizerFileError,
    bytes_to_unicode,
    pretokenize,
)

#: Text that exercises every branch of the pattern and every kind of character.
HOSTILE = (
    "Hello, world! It's 12 o'clock; we'll see—you're 'quoted' and I'd've said 'S.\n"
    "  indented\tline\r\n\n\n   trailing   \n"
    "naïve café résumé e\u0301 a\u0308\u0301 Ω≈ç√ ﬁ ǅ \u00a0nbsp\u2009thin\u3000ideographic "
    "数字一二三 ١٢٣ ½ Ⅻ ² 🎉🧑‍🤝‍🧑 👍🏽 \u200d\u200b zero-width \x1c\x1d\x1e\x1f seps "
    "\x00\x01\x7f controls ’curly’ ''' '' ' s 't 'll 'LL 'S" + " " * 40 + "end"
)


@pytest.fixture(scope="module")
def trained() -> BPETokenizer:
    corpus = Path(__file__).resolve().parents[2].joinpath("README.md").read_text("utf-8")
    return BPETokenizer.train(corpus[:12000] + HOSTILE * 3, 420)


def _text() -> st.SearchStrategy[str]:
    """Random Unicode (no surrogates) with a bias to the characters the pattern treats apart."""
    special = st.sampled_from(
        [" ", "  ", "\n", "\t", "\xa0", "\u3000", "\x1c", "'", "'s", "'ll", "'re", "1", "٣", "½"]
    )
    return st.lists(st.one_of(st.characters(exclude_categories=("Cs",)), special), max_size=60).map(
        "".join
    )


# -- the byte map ----------------------------------------------------------------------------


def test_the_byte_map_is_gpt2s_bijection_onto_printable_characters() -> None:
    table = bytes_to_unicode()
    assert len(table) == 256 and len(set(table.values())) == 256
    assert table[ord("A")] == "A" and table[ord("!")] == "!" and table[0xFF] == "ÿ"
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[0] == "Ā"
    assert table[0xAD] == "Ń"  # the last of the 68 remapped bytes
    assert all(c.isprintable() and not c.isspace() for c in table.values())


# -- pre-tokenization -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Hello world", ["Hello", " world"]),
        ("a   b", ["a", "  ", " b"]),  # \s+(?!\S) leaves the last space to the word
        ("a \nb", ["a", " ", "\n", "b"]),
        ("end   ", ["end", "   "]),
        ("it's we'll I'D", ["it", "'s", " we", "'ll", " I", "'", "D"]),  # case-sensitive
        ("?'s", ["?'", "s"]),  # the contraction wins only where a match starts
        ("x2y 42 ١٢٣", ["x", "2", "y", " 42", " ١٢٣"]),
        (" !! ?", [" !!", " ?"]),
        ("x\xa0y", ["x", "\xa0", "y"]),  # NBSP is whitespace, not the optional space
        ("x \x1cy", ["x", " \x1c", "y"]),  # U+001C: str.isspace, but not the pattern's \s
        ("e\u0301t", ["e", "\u0301", "t"]),  # a combining mark (Mn) is neither L nor N
        ("", []),
    ],
)
def test_pretokenize_follows_gpt2s_pattern(text: str, words: list[str]) -> None:
    assert pretokenize(text) == words


def test_the_whitespace_set_is_unicode_white_space_not_str_isspace() -> None:
    isspace = {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}
    assert isspace - WHITESPACE == {"\x1c", "\x1d", "\x1e", "\x1f"}
    assert WHITESPACE <= isspace


@settings(max_examples=300, deadline=None)
@given(_text())
def test_pretokenize_covers_the_text_exactly(text: str) -> None:
    words = pretokenize(text)
    assert "".join(words) == text
    assert all(words)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_text())
def test_pretokenize_equals_the_regex_module_on_assigned_characters(text: str) -> None:
    regex = pytest.importorskip("regex", reason="the regex package is not installed")
    # Letters unassigned in this Python's Unicode may be letters in regex's newer tables.
    text = "".join(c for c in text if unicodedata.category(c) != "Cn")
    assert pretokenize(text) == regex.findall(tk.GPT2_PATTERN, text)


# -- BPE and training ------------------------------------------------------------------------


def _minbpe_encode(text: str, tok: BPETokenizer) -> list[int]:
    """An independent encoder on ids (minbpe's): merges as (left id, right id) -> id, lowest
    merge index first."""
    merges = {(tok.vocab[a], tok.vocab[b]): tok.vocab[a + b] for a, b in tok.merges}
    byte_id = {b: tok.vocab[c] for b, c in bytes_to_unicode().items()}
    out: list[int] = []
    for word in pretokenize(text):
        ids = [byte_id[b] for b in word.encode("utf-8")]
        while len(ids) > 1:
            pair = min(zip(ids, ids[1:]), key=lambda p: merges.get(p, sys.maxsize))  # noqa: RUF007
            if pair not in merges:
                break
            new, merged, i = merges[pair], [], 0
            while i < len(ids):
                if ids[i : i + 2] == list(pair):
                    merged.append(new)
                    i += 2
                else:
                    merged.append(ids[i])
                    i += 1
            ids = merged
        out.extend(ids)
    return out


@settings(max_examples=200, deadline=None)
@given(_text())
def test_encode_decode_round_trips_and_equals_an_id_level_bpe(
    trained: BPETokenizer, text: str
) -> None:
    ids = trained.encode(text)
    assert trained.decode(ids) == text
    assert ids == _minbpe_encode(text, trained)
    assert all(0 <= i < trained.vocab_size for i in ids)


def test_hostile_text_round_trips(trained: BPETokenizer) -> None:
    for text in (HOSTILE, "", " ", " " * 1000, "\n" * 7, END_OF_TEXT, "🎉" * 50):
        ids = trained.encode(text)
        assert trained.decode(ids) == text
    assert trained.encode("") == []


def test_the_end_of_text_token_is_special_and_never_made_from_text(
    trained: BPETokenizer,
) -> None:
    assert trained.end_of_text_id == trained.vocab_size - 1
    assert trained.special_tokens == {END_OF_TEXT: trained.vocab_size - 1}
    assert trained.end_of_text_id not in trained.encode(END_OF_TEXT * 3)
    assert trained.decode([trained.vocab_size - 1]) == END_OF_TEXT


def test_training_learns_the_requested_number_of_merges_deterministically() -> None:
    text = ("low lower lowest newer newest wider " * 20) + HOSTILE
    a, b = BPETokenizer.train(text, 280), BPETokenizer.train(text, 280)
    assert a.merges == b.merges and a.vocab == b.vocab
    assert a.vocab_size == 280 and len(a.merges) == 280 - 257
    assert sorted(a.vocab.values()) == list(range(280))
    # ids: byte b is id b, merge i is 256 + i.
    assert all(a.vocab[c] == byte for byte, c in bytes_to_unicode().items())
    assert [a.vocab[x + y] for x, y in a.merges] == list(range(256, 256 + len(a.merges)))
    assert len(a.encode(text)) < len(text.encode()) / 2


def _naive_train(text: str, vocab_size: int) -> list[tuple[int, int]]:
    """The rule written plainly: recount every pair over every word, merge the best."""
    counts = Counter(pretokenize(text))
    words = [list(w.encode("utf-8")) for w in counts]
    pieces = [bytes([b]) for b in range(256)]
    merges: list[tuple[int, int]] = []
    while len(pieces) + 1 < vocab_size:
        stats: Counter[tuple[int, int]] = Counter()
        for word, freq in zip(words, counts.values()):
            for pair in zip(word, word[1:]):  # noqa: RUF007
                stats[pair] += freq
        candidates = [p for p in stats if pieces[p[0]] + pieces[p[1]] not in pieces]
        if not candidates:
            break
        best = min(candidates, key=lambda p: (-stats[p], p))
        merges.append(best)
        pieces.append(pieces[best[0]] + pieces[best[1]])
        new, words = len(pieces) - 1, [_merged(w, best, len(pieces) - 1) for w in words]
        assert new == 255 + len(merges)
    return merges


def _merged(word: list[int], pair: tuple[int, int], new: int) -> list[int]:
    out, i = [], 0
    while i < len(word):
        if word[i : i + 2] == list(pair):
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(["ab", "ba", "a", "b", " ", "aab", "é", "\n", "'s", "1"]), max_size=40
    ).map("".join),
    st.integers(257, 300),
)
def test_training_follows_the_rule_written_plainly(text: str, vocab_size: int) -> None:
    tok = BPETokenizer.train(text, vocab_size)
    ids = [(tok.vocab[a], tok.vocab[b]) for a, b in tok.merges]
    assert ids == _naive_train(text, vocab_size)


def test_ties_go_to_the_smallest_pair_of_ids() -> None:
    # Every pair occurs once; (a, b) = (97, 98) is the smallest ("\n" is a word of its own).
    assert BPETokenizer.train("cd\nab", 258).merges == [("a", "b")]
    # (Ġ, a) = (32, 97) is smaller still: the space before a word is a byte like any other.
    assert BPETokenizer.train("cd ab", 258).merges == [("Ġ", "a")]
    # Counts first: "dc" twice beats "ab" once.
    assert BPETokenizer.train("ab\ndc\ndc", 258).merges == [("d", "c")]


def test_merges_never_cross_a_word_boundary() -> None:
    tok = BPETokenizer.train("a a a a a a", 300)  # " a" repeats, "a " never forms
    assert all(" " not in (x + y).replace("Ġ", " ")[1:] for x, y in tok.merges)
    assert tok.merges[0] == ("Ġ", "a")


def test_training_stops_when_no_pair_is_left() -> None:
    tok = BPETokenizer.train("ab", 1000)
    assert tok.merges == [("a", "b")] and tok.vocab_size == 258
    assert BPETokenizer.train("", 300).vocab_size == 257


def test_a_pair_whose_bytes_are_already_a_token_is_not_merged_again() -> None:
    # Words made so that both "a|bc" and "ab|c" splits of "abc" occur after the first merges.
    text = "bc " * 9 + "ab " * 8 + "abc " * 3 + "xab" * 4 + "abcab " * 5
    tok = BPETokenizer.train(text, 300)
    made = [x + y for x, y in tok.merges]
    assert len(made) == len(set(made))
    assert tok.decode(tok.encode(text)) == text


@pytest.mark.parametrize("size", [0, 256, -5])
def test_a_vocabulary_below_the_bytes_is_refused(size: int) -> None:
    with pytest.raises(TokenizerError, match=r"vocab_size .* is below 257"):
        BPETokenizer.train("text", size)


def test_encode_cache_holds_one_entry_per_distinct_word(trained: BPETokenizer) -> None:
    tok = BPETokenizer(dict(trained.vocab), list(trained.merges))
    text = "the cat and the hat and the bat " * 5000
    ids = tok.encode(text)
    assert len(tok._cache) == len(set(pretokenize(text)))
    assert ids == _minbpe_encode(text, trained)
    assert tok.decode(ids) == text


# -- files -----------------------------------------------------------------------------------


def test_save_and_from_files_round_trip(trained: BPETokenizer, tmp_path: Path) -> None:
    vocab, merges = trained.save(tmp_path / "tok")
    assert merges.read_text("utf-8").startswith("#version: 0.2\n")
    loaded = BPETokenizer.from_files(vocab, merges)
    assert loaded.vocab == trained.vocab and loaded.merges == trained.merges
    assert loaded == trained  # the tables decide equality, not the source or the cache
    assert repr(loaded) == f"BPETokenizer(vocab_size=420, merges=163, source={str(vocab)!r})"
    assert loaded.encode(HOSTILE) == trained.encode(HOSTILE)


def test_openai_format_single_line_json_with_escapes_reads_the_same(
    trained: BPETokenizer, tmp_path: Path
) -> None:
    (tmp_path / "encoder.json").write_text(json.dumps(trained.vocab), "ascii")  # \u escapes
    lines = ["#version: 0.2", *(f"{a} {b}" for a, b in trained.merges)]
    (tmp_path / "vocab.bpe").write_text("\r\n".join(lines) + "\r\n", "utf-8")
    loaded = BPETokenizer.from_files(tmp_path / "encoder.json", tmp_path / "vocab.bpe")
    assert loaded.encode(HOSTILE) == trained.encode(HOSTILE)
    # A merges file without the header line reads the same.
    (tmp_path / "plain.txt").write_text("\n".join(lines[1:]), "utf-8")
    assert BPETokenizer.from_files(tmp_path / "encoder.json", tmp_path / "plain.txt").merges == (
        trained.merges
    )


def _small_files(tmp_path: Path) -> tuple[dict[str, int], list[str]]:
    tok = BPETokenizer.train("abc abc abd", 261)
    return dict(tok.vocab), [f"{a} {b}" for a, b in tok.merges]


def _write(tmp_path: Path, vocab: dict[str, int] | str, merges: list[str]) -> tuple[Path, Path]:
    v, m = tmp_path / "vocab.json", tmp_path / "merges.txt"
    text = (
        vocab
        if isinstance(vocab, str)
        else "{\n"
        + ",\n".join(
            f"{json.dumps(t, ensure_ascii=False)}: {json.dumps(i)}" for t, i in vocab.items()
        )
        + "\n}"
    )
    v.write_text(text, "utf-8")
    m.write_text("\n".join(["#version: 0.2", *merges]) + "\n", "utf-8")
    return v, m


def _line_of(path: Path, needle: str) -> int:
    return next(
        n for n, line in enumerate(path.read_text("utf-8").split("\n"), 1) if needle in line
    )


def test_malformed_json_names_the_file_line_and_column(tmp_path: Path) -> None:
    vocab, merges = _small_files(tmp_path)
    v, m = _write(tmp_path, vocab, merges)
    lines = v.read_text("utf-8").split("\n")
    lines[40] = lines[40].rstrip(",")  # a missing comma
    v.write_text("\n".join(lines), "utf-8")
    with pytest.raises(
        TokenizerFileError, match=r"vocab\.json, line 42, column \d+: malformed JSON"
    ):
        BPETokenizer.from_files(v, m)
    v.write_text("[1, 2]", "utf-8")
    with pytest.raises(TokenizerFileError, match=r"line 1: .* JSON object .* not a list"):
        BPETokenizer.from_files(v, m)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("string id", r"line {line}: the id of token 'Ġ' is '32', not an int"),
        ("bool id", r"line {line}: the id of token 'Ġ' is True, not an int"),
        ("duplicate id", r"line {line}: id 97 is given to both 'Ġ' and 'a'"),
        ("gap", r"line {line}: id 999 of 'Ġ' is outside 0\.\.260"),
        ("not a byte char", r"line {line}: token 'Ġ ' holds ' ' \(U\+0020\)"),
    ],
)
def test_a_bad_vocabulary_entry_names_its_line(tmp_path: Path, change: str, message: str) -> None:
    vocab, merges = _small_files(tmp_path)
    value = {"string id": "32", "bool id": True, "duplicate id": 97, "gap": 999}.get(change)
    if change == "not a byte char":
        vocab["Ġ "] = vocab.pop("Ġ")
        token = "Ġ "
    else:
        vocab["Ġ"] = value  # type: ignore[assignment]
        token = "Ġ"
    v, m = _write(tmp_path, vocab, merges)
    # The line of the entry found wrong: the second holder of a repeated id.
    token = "a" if change == "duplicate id" else token
    line = _line_of(v, json.dumps(token, ensure_ascii=False) + ":")
    with pytest.raises(TokenizerFileError, match=r"vocab\.json, " + message.format(line=line)):
        BPETokenizer.from_files(v, m)


def test_a_repeated_token_names_its_second_line(tmp_path: Path) -> None:
    vocab, merges = _small_files(tmp_path)
    v, m = _write(tmp_path, vocab, merges)
    text = v.read_text("utf-8").replace("\n}", ',\n"a": 261\n}')
    v.write_text(text, "utf-8")
    last = len(text.split("\n")) - 1
    with pytest.raises(TokenizerFileError, match=rf"line {last}: token 'a' appears twice"):
        BPETokenizer.from_files(v, m)


def test_missing_bytes_are_counted_and_named(tmp_path: Path) -> None:
    vocab, merges = _small_files(tmp_path)
    for byte in (0, 10, 32):
        del vocab[bytes_to_unicode()[byte]]
    vocab = {t: i for i, t in enumerate(vocab)}
    v, m = _write(tmp_path, vocab, merges)
    with pytest.raises(TokenizerFileError, match=r"3 of the 256 bytes have no token \(0x00"):
        BPETokenizer.from_files(v, m)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("a", r"'a' is 1 token\(s\); a merge line is two tokens"),
        ("a b c", r"'a b c' is 3 token\(s\)"),
        ("a  b", r"'a  b' is 2 token\(s\)"),  # two spaces: an empty token
        ("", r"'' is 0 token\(s\)"),
        ("ab zz", r"merge 'ab' \+ 'zz' uses 'zz', which is neither a byte nor the result"),
        ("a <|endoftext|>", r"merge 'a' \+ '<\|endoftext\|>' uses '<\|endoftext\|>', which"),
        ("a c", r"merge 'a' \+ 'c' makes 'ac', which is not in the vocabulary"),
    ],
)
def test_a_bad_merges_line_is_named(tmp_path: Path, line: str, message: str) -> None:
    vocab, merges = _small_files(tmp_path)
    merges.insert(2, line)  # file line 4, after the header and two merges
    v, m = _write(tmp_path, vocab, merges)
    with pytest.raises(TokenizerFileError, match=r"merges\.txt, line 4: " + message):
        BPETokenizer.from_files(v, m)


def test_merges_may_come_in_any_order(trained: BPETokenizer, tmp_path: Path) -> None:
    # Encoding needs only the ranks: a later merge's side may be made on a later line.
    vocab, merges = trained.save(tmp_path)
    lines = merges.read_text("utf-8").split("\n")
    body = [line for line in lines[1:] if line]
    late = next(i for i, (x, y) in enumerate(trained.merges) if len(x) > 1)
    body.insert(0, body.pop(late))  # the merge of an earlier result goes first
    merges.write_text("\n".join([lines[0], *body]) + "\n", "utf-8")
    reordered = BPETokenizer.from_files(vocab, merges)
    assert reordered.merges[0] == trained.merges[late]
    assert reordered.decode(reordered.encode(HOSTILE)) == HOSTILE


def test_a_repeated_merge_names_both_lines(tmp_path: Path) -> None:
    vocab, merges = _small_files(tmp_path)
    merges.append(merges[0])
    v, m = _write(tmp_path, vocab, merges)
    with pytest.raises(TokenizerFileError, match=rf"line {len(merges) + 1}: .* repeats line 2"):
        BPETokenizer.from_files(v, m)


def test_absent_or_non_utf8_files_are_refused(tmp_path: Path) -> None:
    vocab, merges = _small_files(tmp_path)
    v, m = _write(tmp_path, vocab, merges)
    with pytest.raises(TokenizerFileError, match=r"absent\.json: no such file"):
        BPETokenizer.from_files(tmp_path / "absent.json", m)
    m.write_bytes(b"#version: 0.2\n\xff\xfe a\n")
    with pytest.raises(TokenizerFileError, match=r"merges\.txt: byte 14 is not UTF-8"):
        BPETokenizer.from_files(v, m)


def test_file_errors_are_gpt_errors() -> None:
    assert issubclass(TokenizerFileError, TokenizerError)
    assert issubclass(TokenizerError, GPTError) and issubclass(TokenizerError, ValueError)


# -- bad arguments ---------------------------------------------------------------------------


def test_bad_ids_and_text_are_refused(trained: BPETokenizer) -> None:
    with pytest.raises(TokenizerError, match=r"id 420 at position 1 is outside 0\.\.419"):
        trained.decode([1, 420])
    with pytest.raises(TokenizerError, match=r"id -1 at position 0"):
        trained.decode([-1])
    with pytest.raises(TokenizerError, match=r"position 0 is 'a', not an int"):
        trained.decode(["a"])  # type: ignore[list-item]
    with pytest.raises(TokenizerError, match=r"lone surrogate"):
        trained.encode("ok \ud800")
    with pytest.raises(TokenizerError, match=r"encode takes a str, got a bytes"):
        trained.encode(b"bytes")  # type: ignore[arg-type]


def test_ids_ending_inside_a_character_decode_with_the_replacement_character(
    trained: BPETokenizer,
) -> None:
    ids = trained.encode("é")  # two bytes
    raw = b"".join(trained.decode_bytes([i]) for i in ids)
    assert raw == "é".encode()
    assert trained.decode(trained.encode("🎉")[:1]).endswith("\ufffd")
