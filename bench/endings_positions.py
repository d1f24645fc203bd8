"""Position selection time vs story length with the forecaster's real tokenizer (issue: it was
quadratic, re-tokenising every prefix). Prints words, sentences, kept positions, tokenizer calls
and seconds per length.

    .venv/bin/python bench/endings_positions.py --words 2500 5000 10000 20000 50000
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wse_platform.config import load_settings  # noqa: E402
from wse_platform.endings.tokens import token_counter  # noqa: E402
from wse_platform.metrics.endings import select_positions, split_sentences  # noqa: E402

SENTENCE = "The keeper counted boat number {} as it passed the harbour wall at dusk, saying nothing."


class Counted:
    """Wraps the real tokenizer and counts calls (both entry points)."""

    def __init__(self, tok):
        self.tok, self.calls = tok, 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        return self.tok(text)

    def token_ends(self, text: str):
        self.calls += 1
        return self.tok.token_ends(text)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--words", type=int, nargs="+", default=[2500, 5000, 10000, 20000, 50000])
    args = ap.parse_args()
    s = load_settings()
    tok = token_counter(s, s.endings.forecaster)
    per = len(SENTENCE.split())
    print("words  sentences  positions  tokenizer_calls  seconds")
    for n in args.words:
        sents = split_sentences(" ".join(SENTENCE.format(i) for i in range(max(2, n // per))))
        counted = Counted(tok)
        t = time.perf_counter()
        kept = select_positions(sents, counted)
        dt = time.perf_counter() - t
        print(f"{len(sents) * per:>5}  {len(sents):>9}  {len(kept):>9}  {counted.calls:>15}  {dt:7.3f}")


if __name__ == "__main__":
    main()
