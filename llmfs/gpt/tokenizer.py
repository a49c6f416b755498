"""GPT-2's byte-level BPE tokenizer: read GPT-2's files, encode, decode, train, save.

Text becomes token ids in four steps, exactly as GPT-2's ``encoder.py`` (and Hugging Face's
``GPT2Tokenizer``) do them:

1. **Pre-tokenization** cuts the text into words with GPT-2's pattern
   ``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+``
   (:data:`GPT2_PATTERN`). Python's ``re`` has no ``\\p{L}``/``\\p{N}``, so the pattern is
   compiled with those classes spelled out from :mod:`unicodedata` (every code point whose
   category starts with ``L``, or with ``N``), and ``\\s`` spelled out as the ``regex`` module's
   ``\\s``: Unicode's White_Space property (:data:`WHITESPACE`), which is Python's
   ``str.isspace`` minus the four separators U+001C..U+001F. Merges never cross a word boundary.
2. Each word's UTF-8 bytes are written as characters through GPT-2's byte-to-unicode map
   (:func:`bytes_to_unicode`: the 188 printable Latin-1 bytes stand for themselves, the other 68
   become U+0100..U+0143), so every token is a printable string and any text, in any script, is
   representable: the 256 single bytes are always in the vocabulary.
3. **BPE**: within a word, the adjacent pair with the lowest merge rank (its line in
   ``merges.txt``) is merged everywhere in the word, left to right, until no pair has a rank.
   Results are cached per word (as GPT-2 does), so encoding long text costs one pass plus one BPE
   per distinct word: linear in the text's length, never quadratic.
4. Each resulting token string is looked up in the vocabulary.

:meth:`BPETokenizer.decode` reverses steps 4 and 2 (bytes, then UTF-8); decoding the encoding of
any string gives the string back. Ids whose bytes end in the middle of a character decode with
U+FFFD (``errors="replace"``, as Hugging Face); :meth:`BPETokenizer.decode_bytes` gives the raw
bytes.

Training (:meth:`BPETokenizer.train`, as Karpathy's minbpe): start from the 256 bytes, count
adjacent pairs over the pre-tokenized words, merge the most frequent pair into a new token,
repeat. Ties go to the pair with the smallest ``(left id, right id)``; a pair whose merged bytes
are already a token is never chosen (the files map each token string to one id). Ids: byte ``b``
is id ``b``, merge ``i`` is id ``256 + i``, and :data:`END_OF_TEXT` comes last, as in GPT-2.

Files: ``vocab.json`` (token string -> id; OpenAI calls it ``encoder.json``) and ``merges.txt``
(one merge per line, ``left right``, after an optional ``#version`` header line; OpenAI's
``vocab.bpe``). :meth:`BPETokenizer.save` writes both so that :meth:`BPETokenizer.from_files`
reads the same tokenizer back, and Hugging Face's ``GPT2Tokenizer(vocab, merges)`` encodes alike.

The Unicode version is the running Python's (:data:`unicodedata.unidata_version`): a code point
unassigned there is neither a letter nor a number, so text using letters added in a later Unicode
version can split differently from a ``regex`` build with newer tables.

Special tokens: a vocabulary entry that is neither a byte nor a merge result (GPT-2's
``<|endoftext|>``) is a special token. :meth:`BPETokenizer.encode` never produces one from text
(the literal ``<|endoftext|>`` in text is encoded as ordinary characters, as OpenAI's encoder and
``tiktoken`` without ``allowed_special`` do; Hugging Face's tokenizer would emit the special id).

Errors: a file that does not describe a byte-level BPE raises :class:`TokenizerFileError`
naming the file, the line and the violated condition; an unknown id or unencodable text raises
:class:`TokenizerError`.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import json
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llmfs.gpt.errors import GPTError

#: Finds the file line of a vocabulary token / of the merge with a given index (None: unknown).
_LineOf = Callable[[str], "int | None"]
_MergeLine = Callable[[int], "int | None"]

#: GPT-2's pre-tokenization pattern, as written for the ``regex`` module.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

#: The ``regex`` module's ``\s`` (Unicode White_Space): what :data:`GPT2_PATTERN` means by
#: whitespace. Python's ``re`` ``\s`` and ``str.isspace`` also count U+001C..U+001F.
WHITESPACE = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)

#: GPT-2's end-of-text token, the last id of a trained vocabulary.
END_OF_TEXT = "<|endoftext|>"

#: The header line GPT-2's merges files start with.
MERGES_HEADER = "#version: 0.2"

#: The vocabulary's 256 bytes plus the end-of-text token: the smallest ``vocab_size`` to train.
MIN_VOCAB_SIZE = 257


class TokenizerError(GPTError):
    """Text the tokenizer cannot encode, an id it cannot decode, or a bad training request."""


class TokenizerFileError(TokenizerError):
    """A vocabulary or merges file that does not describe a byte-level BPE; the message names the
    file, the line and the violated condition."""


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from each byte to a printable character: the bytes of ``!``..``~``,
    ``¡``..``¬`` and ``®``..``ÿ`` stand for themselves, the remaining 68 (controls, space,
    U+00A0, U+00AD) take U+0100, U+0101, ... in byte order. A bijection onto 256 characters.
    A new dict on every call (a caller may change its copy; 256 entries cost microseconds)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return dict(sorted(mapping.items()))


@functools.lru_cache(maxsize=1)
def _unicode_to_bytes() -> dict[str, int]:
    return {c: b for b, c in bytes_to_unicode().items()}


def _char_class(codepoints: Iterable[int]) -> str:
    """A ``re`` character-class body matching exactly ``codepoints`` (as ranges)."""
    parts: list[str] = []
    start = prev = -2
    for c in sorted(codepoints):
        if c == prev + 1:
            prev = c
            continue
        if start >= 0:
            parts.append(_range(start, prev))
        start = prev = c
    if start >= 0:
        parts.append(_range(start, prev))
    return "".join(parts)


def _range(a: int, b: int) -> str:
    lo = re.escape(chr(a))
    return lo if a == b else f"{lo}-{re.escape(chr(b))}"


@functools.lru_cache(maxsize=1)
def pretokenizer() -> re.Pattern[str]:
    """:data:`GPT2_PATTERN` compiled for Python's ``re``: ``\\p{L}`` and ``\\p{N}`` spelled out
    from :mod:`unicodedata`, ``\\s`` as :data:`WHITESPACE`. Built once (a scan of every code
    point, a fraction of a second)."""
    letters, numbers = [], []
    for c in range(sys.maxunicode + 1):
        major = unicodedata.category(chr(c))[0]
        if major == "L":
            letters.append(c)
        elif major == "N":
            numbers.append(c)
    s = _char_class(ord(c) for c in WHITESPACE)
    ll, nn = _char_class(letters), _char_class(numbers)
    pattern = (
        rf"'s|'t|'re|'ve|'m|'ll|'d| ?[{ll}]+| ?[{nn}]+| ?[^{s}{ll}{nn}]+|[{s}]+(?![^{s}])|[{s}]+"
    )
    return re.compile(pattern)


def pretokenize(text: str) -> list[str]:
    """``text`` cut into GPT-2's words (:data:`GPT2_PATTERN`); their concatenation is ``text``."""
    return pretokenizer().findall(text)


def _word_chars(word: str) -> str:
    """The word's UTF-8 bytes as byte-level characters."""
    try:
        data = word.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise TokenizerError(
            f"text holds {word[exc.start]!r} (a lone surrogate), which has no UTF-8 encoding: "
            f"only well-formed Unicode text can be encoded"
        ) from None
    table = bytes_to_unicode()
    return "".join(table[b] for b in data)


def _apply_merges(symbols: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """GPT-2's BPE on one word: merge the lowest-ranked adjacent pair everywhere (left to right,
    non-overlapping) until no adjacent pair has a rank."""
    while len(symbols) > 1:
        best = min(itertools.pairwise(symbols), key=lambda pair: ranks.get(pair, sys.maxsize))
        if best not in ranks:
            break
        left, right = best
        merged: list[str] = []
        i = 0
        while i < len(symbols):
            if i + 1 < len(symbols) and symbols[i] == left and symbols[i + 1] == right:
                merged.append(left + right)
                i += 2
            else:
                merged.append(symbols[i])
                i += 1
        symbols = merged
    return symbols


@dataclass(repr=False)
class BPETokenizer:
    """A byte-level BPE: ``vocab`` (token string -> id, ids exactly ``0..len(vocab)-1``) and
    ``merges`` (pairs of token strings, in rank order). Build it with :meth:`from_files` or
    :meth:`train`; the constructor checks the invariants (:class:`TokenizerFileError` naming
    ``source``): every byte is a token, both sides of each merge are bytes or results of merges,
    each merge's result is a token, no merge repeats."""

    vocab: dict[str, int]
    merges: list[tuple[str, str]]
    source: str = field(default="the tokenizer", compare=False)
    _ranks: dict[tuple[str, str], int] = field(init=False, repr=False, compare=False)
    _decoder: list[str] = field(init=False, repr=False, compare=False)
    _cache: dict[str, tuple[int, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._decoder = _check_vocab(self.vocab, self.source, lambda token: None)
        self._ranks = _check_merges(self.merges, self.vocab, self.source, lambda index: None)
        self._cache = {}

    def __repr__(self) -> str:
        # GPT-2's vocabulary has 50,257 entries: the sizes, not the tables.
        return (
            f"BPETokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)}, "
            f"source={self.source!r})"
        )

    # -- files --------------------------------------------------------------------------------

    @classmethod
    def from_files(cls, vocab_json: Path | str, merges_txt: Path | str) -> BPETokenizer:
        """Reads GPT-2's two files (Hugging Face's ``vocab.json``/``merges.txt`` or OpenAI's
        ``encoder.json``/``vocab.bpe``). Raises :class:`TokenizerFileError` naming the file and
        line of the first problem: a file that is absent or not UTF-8, malformed JSON, a
        vocabulary that is not an object of token -> int, a repeated token or id, ids that are
        not ``0..n-1``, a token that is not made of byte-level characters, a missing byte, a
        merges line that is not two tokens separated by one space, a merge of a symbol that no
        byte or merge line makes, a merge whose result is not in the vocabulary, a repeated
        merge."""
        vocab_path, merges_path = Path(vocab_json), Path(merges_txt)
        vocab_text = _read(vocab_path)
        vocab = _parse_vocab(vocab_text, vocab_path)
        merges_text = _read(merges_path)
        merges, first_line = _parse_merges(merges_text, merges_path)
        decoder = _check_vocab(
            vocab,
            str(vocab_path),
            lambda token: _json_line(vocab_text, token),
        )
        ranks = _check_merges(merges, vocab, str(merges_path), lambda index: first_line + index)
        tokenizer = cls.__new__(cls)
        tokenizer.vocab, tokenizer.merges, tokenizer.source = vocab, merges, str(vocab_path)
        tokenizer._decoder, tokenizer._ranks, tokenizer._cache = decoder, ranks, {}
        return tokenizer

    def save(self, folder: Path | str) -> tuple[Path, Path]:
        """Writes ``vocab.json`` (one ``"token": id`` per line, in id order, UTF-8) and
        ``merges.txt`` (the ``#version: 0.2`` header, then one merge per line) into ``folder``
        (created if absent). Returns the two paths; :meth:`from_files` reads them back."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        vocab_path, merges_path = folder / "vocab.json", folder / "merges.txt"
        entries = [
            f"{json.dumps(token, ensure_ascii=False)}: {i}" for i, token in enumerate(self._decoder)
        ]
        vocab_path.write_text("{\n" + ",\n".join(entries) + "\n}\n", encoding="utf-8")
        lines = [MERGES_HEADER, *(f"{a} {b}" for a, b in self.merges)]
        merges_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return vocab_path, merges_path

    # -- encoding -----------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """How many ids there are (bytes, merges and special tokens): a model's ``vocab_size``."""
        return len(self._decoder)

    @property
    def special_tokens(self) -> dict[str, int]:
        """Vocabulary entries that no byte or merge makes (GPT-2's ``<|endoftext|>``)."""
        made = set(bytes_to_unicode().values()) | {a + b for a, b in self.merges}
        return {t: i for t, i in self.vocab.items() if t not in made}

    @property
    def end_of_text_id(self) -> int | None:
        """The id of :data:`END_OF_TEXT`, or None when the vocabulary has none."""
        return self.vocab.get(END_OF_TEXT)

    def encode_word(self, word: str) -> tuple[int, ...]:
        """The ids of one pre-tokenized word (cached: each distinct word is merged once)."""
        ids = self._cache.get(word)
        if ids is None:
            symbols = _apply_merges(list(_word_chars(word)), self._ranks)
            ids = self._cache[word] = tuple(self.vocab[s] for s in symbols)
        return ids

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text`` (see the module docstring). Raises :class:`TokenizerError`
        when ``text`` is not a ``str`` or holds a lone surrogate."""
        if not isinstance(text, str):
            raise TokenizerError(f"encode takes a str, got a {type(text).__name__}")
        out: list[int] = []
        for word in pretokenize(text):
            out.extend(self.encode_word(word))
        return out

    def tokens(self, text: str) -> list[str]:
        """The token strings (byte-level characters) :meth:`encode` gives ids of."""
        return [self._decoder[i] for i in self.encode(text)]

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes the ids stand for. Raises :class:`TokenizerError` on an id that is not an
        int in ``0..vocab_size-1``."""
        table = _unicode_to_bytes()
        out = bytearray()
        for position, i in enumerate(ids):
            if isinstance(i, bool) or not hasattr(i, "__index__"):
                raise TokenizerError(f"id at position {position} is {i!r}, not an int")
            index = int(i)
            if not 0 <= index < len(self._decoder):
                raise TokenizerError(
                    f"id {index} at position {position} is outside 0..{len(self._decoder) - 1}"
                )
            out.extend(table[c] for c in self._decoder[index])
        return bytes(out)

    def decode(self, ids: Iterable[int]) -> str:
        """The text the ids stand for: ``decode(encode(s)) == s`` for every ``str`` ``s``.
        Bytes that end inside a character decode as U+FFFD (``errors="replace"``)."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    # -- training -----------------------------------------------------------------------------

    @classmethod
    def train(cls, text: str, vocab_size: int) -> BPETokenizer:
        """Learns ``vocab_size - 257`` merges from ``text`` (the 256 bytes and
        :data:`END_OF_TEXT` fill the rest of the vocabulary): repeatedly, the most frequent
        adjacent pair of ids within a pre-tokenized word becomes a new token; ties go to the
        smallest ``(left id, right id)``; a pair whose bytes are already a token is skipped.
        Stops early when no pair is left (the vocabulary is then smaller). Deterministic: the
        same text and size always give the same merges. Raises :class:`TokenizerError` when
        ``vocab_size < 257`` or ``text`` is not a str."""
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
            raise TokenizerError(f"vocab_size must be an int, got {vocab_size!r}")
        if vocab_size < MIN_VOCAB_SIZE:
            raise TokenizerError(
                f"vocab_size {vocab_size} is below {MIN_VOCAB_SIZE}: the 256 bytes and "
                f"{END_OF_TEXT} come first"
            )
        if not isinstance(text, str):
            raise TokenizerError(f"train takes a str, got a {type(text).__name__}")
        counts = Counter(pretokenize(text))
        table = _unicode_to_bytes()
        words = [[table[c] for c in _word_chars(w)] for w in counts]
        freqs = list(counts.values())
        pieces: list[bytes] = [bytes([b]) for b in range(256)]
        known = set(pieces)
        merges: list[tuple[int, int]] = []
        # Pair counts kept up to date merge by merge (only the words holding the merged pair
        # change), and a heap of (-count, pair) entries: the top valid entry is the most frequent
        # pair, ties to the smallest pair. Entries go stale when a count changes (a fresh one is
        # pushed then) and are skipped when popped.
        stats: Counter[tuple[int, int]] = Counter()
        holders: dict[tuple[int, int], set[int]] = {}
        for index, (word, freq) in enumerate(zip(words, freqs)):
            for pair in itertools.pairwise(word):
                stats[pair] += freq
                holders.setdefault(pair, set()).add(index)
        heap = [(-count, pair) for pair, count in stats.items()]
        heapq.heapify(heap)
        while len(pieces) + 1 < vocab_size:
            best = None
            while heap:
                negative, pair = heapq.heappop(heap)
                if stats.get(pair) != -negative:
                    continue  # stale: the pair's count changed since this entry was pushed
                if pieces[pair[0]] + pieces[pair[1]] in known:
                    continue  # its bytes are a token already (and will stay one)
                best = pair
                break
            if best is None:
                break
            new_id = len(pieces)
            pieces.append(pieces[best[0]] + pieces[best[1]])
            known.add(pieces[-1])
            merges.append(best)
            changed: set[tuple[int, int]] = set()
            for index in sorted(holders.pop(best, ())):
                word, freq = words[index], freqs[index]
                for pair in itertools.pairwise(word):
                    stats[pair] -= freq
                    changed.add(pair)
                word = words[index] = _merge_ids(word, best, new_id)
                for pair in itertools.pairwise(word):
                    stats[pair] += freq
                    changed.add(pair)
                    holders.setdefault(pair, set()).add(index)
            for pair in changed:
                count = stats[pair]
                if count > 0:
                    heapq.heappush(heap, (-count, pair))
                else:
                    del stats[pair]
        byte_chars = bytes_to_unicode()
        strings = ["".join(byte_chars[b] for b in piece) for piece in pieces]
        vocab = {s: i for i, s in enumerate(strings)}
        vocab[END_OF_TEXT] = len(vocab)
        return cls(vocab, [(strings[a], strings[b]) for a, b in merges], "the trained tokenizer")


def _merge_ids(word: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    if len(word) < 2:
        return word
    out: list[int] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == pair[0] and word[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


# -- reading and checking files ---------------------------------------------------------------


def _read(path: Path) -> str:
    if not path.is_file():
        raise TokenizerFileError(f"{path}: no such file")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TokenizerFileError(
            f"{path}: byte {exc.start} is not UTF-8 ({exc.reason}); GPT-2's files are UTF-8"
        ) from None


def _json_line(text: str, token: str) -> int | None:
    """The line of ``token``'s key in a JSON text (written with or without ``\\u`` escapes),
    or None when it cannot be found."""
    for spelling in (json.dumps(token, ensure_ascii=False), json.dumps(token)):
        match = re.search(re.escape(spelling) + r"\s*:", text)
        if match:
            return text.count("\n", 0, match.start()) + 1
    return None


def _at(source: str, line: int | None) -> str:
    return f"{source}, line {line}" if line is not None else source


def _parse_vocab(text: str, path: Path) -> dict[str, int]:
    repeated: list[str] = []

    def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
        seen: dict[str, object] = {}
        for key, value in items:
            if key in seen:
                repeated.append(key)
            seen[key] = value
        return seen

    try:
        data = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise TokenizerFileError(
            f"{path}, line {exc.lineno}, column {exc.colno}: malformed JSON ({exc.msg})"
        ) from None
    if not isinstance(data, dict):
        raise TokenizerFileError(
            f"{path}, line 1: the vocabulary must be a JSON object of token -> id, "
            f"not a {type(data).__name__}"
        )
    if repeated:
        token = repeated[0]
        spelled = json.dumps(token, ensure_ascii=False)
        matches = [m.start() for m in re.finditer(re.escape(spelled) + r"\s*:", text)]
        line = text.count("\n", 0, matches[1]) + 1 if len(matches) > 1 else None
        raise TokenizerFileError(
            f"{_at(str(path), line)}: token {token!r} appears twice; each token has one id"
        )
    for token, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise TokenizerFileError(
                f"{_at(str(path), _json_line(text, token))}: the id of token {token!r} is "
                f"{value!r}, not an int"
            )
    return data


def _parse_merges(text: str, path: Path) -> tuple[list[tuple[str, str]], int]:
    """The merges and the file line of the first one (after the ``#version`` header)."""
    lines = text.split("\n")
    first = 1
    if lines and lines[0].startswith("#version"):
        lines, first = lines[1:], 2
    while lines and lines[-1].strip("\r") == "":
        lines.pop()
    merges: list[tuple[str, str]] = []
    for index, line in enumerate(lines):
        line = line.removesuffix("\r")
        parts = line.split(" ")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise TokenizerFileError(
                f"{path}, line {first + index}: {line!r} is {len(line.split())} token(s); a "
                f"merge line is two tokens separated by one space"
            )
        merges.append((parts[0], parts[1]))
    return merges, first


def _check_vocab(vocab: dict[str, int], source: str, line_of: _LineOf) -> list[str]:
    """The id -> token list, after checking ids ``0..n-1`` (each once), byte-level tokens and
    every byte present."""
    alphabet = _unicode_to_bytes()
    decoder: list[str | None] = [None] * len(vocab)
    for token, i in vocab.items():
        if isinstance(i, bool) or not isinstance(i, int):
            raise TokenizerFileError(
                f"{_at(source, line_of(token))}: the id of {token!r} is {i!r}, not an int"
            )
        if not token:
            raise TokenizerFileError(f"{_at(source, line_of(token))}: a token is empty")
        bad = [c for c in token if c not in alphabet]
        if bad:
            raise TokenizerFileError(
                f"{_at(source, line_of(token))}: token {token!r} holds {bad[0]!r} "
                f"(U+{ord(bad[0]):04X}), which is not one of GPT-2's 256 byte characters"
            )
        if not 0 <= i < len(vocab):
            raise TokenizerFileError(
                f"{_at(source, line_of(token))}: id {i} of {token!r} is outside "
                f"0..{len(vocab) - 1} (ids are 0..n-1 for {len(vocab)} tokens)"
            )
        other = decoder[i]
        if other is not None:
            raise TokenizerFileError(
                f"{_at(source, line_of(token))}: id {i} is given to both {other!r} and "
                f"{token!r}; each id names one token"
            )
        decoder[i] = token
    missing = [b for b, c in bytes_to_unicode().items() if c not in vocab]
    if missing:
        shown = ", ".join(f"0x{b:02x} ({bytes_to_unicode()[b]!r})" for b in missing[:5])
        raise TokenizerFileError(
            f"{source}: {len(missing)} of the 256 bytes have no token ({shown}"
            f"{', ...' if len(missing) > 5 else ''}); a byte-level BPE can encode any text only "
            f"when every byte is a token"
        )
    return decoder  # type: ignore[return-value]


def _check_merges(
    merges: Sequence[tuple[str, str]], vocab: dict[str, int], source: str, line_of: _MergeLine
) -> dict[tuple[str, str], int]:
    """Merge ranks, after checking that each merge's sides are bytes or merge results and its
    result is a token.

    A trainer writes every merge after the merges of its sides, but encoding needs only the
    ranks, and files converted from other formats need not keep that order, so a side may be
    made on any line (as Hugging Face's reader allows); a side that nothing makes can never
    occur in a word and marks a damaged file."""
    known = set(bytes_to_unicode().values()) | {left + right for left, right in merges}
    ranks: dict[tuple[str, str], int] = {}
    for index, (left, right) in enumerate(merges):
        where = _at(source, line_of(index))
        for side in (left, right):
            if side not in known:
                raise TokenizerFileError(
                    f"{where}: merge {left!r} + {right!r} uses {side!r}, which is neither a byte "
                    f"nor the result of any merge"
                )
        if (left, right) in ranks:
            raise TokenizerFileError(
                f"{where}: merge {left!r} + {right!r} repeats line "
                f"{line_of(ranks[(left, right)])}; each pair has one rank"
            )
        if left + right not in vocab:
            raise TokenizerFileError(
                f"{where}: merge {left!r} + {right!r} makes {left + right!r}, which is not in "
                f"the vocabulary"
            )
        ranks[(left, right)] = index
    return ranks


__all__ = [
    "END_OF_TEXT",
    "GPT2_PATTERN",
    "MERGES_HEADER",
    "MIN_VOCAB_SIZE",
    "WHITESPACE",
    "BPETokenizer",
    "TokenizerError",
    "TokenizerFileError",
    "bytes_to_unicode",
    "pretokenize",
    "pretokenizer",
]
