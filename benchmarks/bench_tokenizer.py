"""Encoding speed of :class:`llmfs.gpt.tokenizer.BPETokenizer`: linear in the text's length.

Run: ``python benchmarks/bench_tokenizer.py``. A tokenizer of 2,000 ids is trained on the
README (its time printed), then 0.5 MB and 1 MB of text (the README repeated with a changing
number in every copy, so new words keep appearing) are encoded with a fresh cache each time.
The ratio of the two medians is the growth for twice the text: about 2 when encoding is linear
(4 would be quadratic). Where ``tokenizers`` (Hugging Face's Rust library) is installed, its
byte-level BPE on the same files is timed on the 1 MB text for comparison.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from _timing import header, median_seconds

from llmfs.gpt.tokenizer import BPETokenizer

ROOT = Path(__file__).resolve().parents[1]


def _text(size: int, readme: str) -> str:
    parts, total, i = [], 0, 0
    while total < size:
        part = f"{readme} copy {i} of the text\n"
        parts.append(part)
        total += len(part)
        i += 1
    return "".join(parts)[:size]


def main() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    header("BPETokenizer.encode: growth with the text's length", columns=False)
    start = time.perf_counter()
    trained = BPETokenizer.train(readme[:30000], 2000)
    print(f"   train: 30,000 characters to 2,000 ids in {time.perf_counter() - start:.2f} s")
    times = {}
    for size in (500_000, 1_000_000):
        text = _text(size, readme)

        def run(text: str = text) -> None:
            BPETokenizer(dict(trained.vocab), list(trained.merges)).encode(text)  # fresh cache

        times[size] = median_seconds(run, repeat=3)
        print(f"   {size / 1e6:.1f} MB: {times[size] * 1000:9.1f} ms")
    print(
        f"   1 MB / 0.5 MB time: {times[1_000_000] / times[500_000]:.2f} (linear: 2, goal <= 2.5)"
    )
    try:
        import tokenizers
    except ImportError:
        print("   tokenizers not installed: no Hugging Face comparison")
        return
    with tempfile.TemporaryDirectory() as folder:
        vocab, merges = trained.save(folder)
        fast = tokenizers.ByteLevelBPETokenizer(str(vocab), str(merges))
        text = _text(1_000_000, readme)
        assert fast.encode(text).ids == trained.encode(text)
        hf = median_seconds(lambda: fast.encode(text), repeat=3)
        ratio = times[1_000_000] / hf
        print(f"   tokenizers (Rust), 1 MB: {hf * 1000:9.1f} ms; ours / theirs {ratio:.1f}")


if __name__ == "__main__":
    main()
