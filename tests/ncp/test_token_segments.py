"""HiAgent's token counts, counted part by part (`ncp.tokens.segments`, issue 24), equal the counts of the whole text."""
from __future__ import annotations

import random

import pytest

from wse_platform.ncp import tokens

# what a tokenizer regex's \s matches (Unicode White_Space): a cut is never made before one of them
WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
PIECES = ["\n", "\n", "\r\n", "\n\n", " \n", "\n ", "/\n", "\n/", " ", "  ", "\t", "/", "//", ".", ",", "!", "'s", "'",
          '"', "-", "—", "#", "*", ":", "(", ")", "a", "Word", "word", "WORD", "I'm", "'ll", "123", "4567", "é", "Ж",
          "ж", "日本", "😀", "<|endoftext|>", "\x1c", *WHITE_SPACE]


def test_a_cut_is_never_made_before_white_space():
    assert all(c.isspace() for c in WHITE_SPACE)   # the guard in `segments`
    text = "A\n" + "\nB\n".join(WHITE_SPACE) + "\n/C\nD"
    parts = tokens.segments(text)
    assert "".join(parts) == text
    assert all(not p or p[0] not in WHITE_SPACE + "/" for p in parts[1:])
    assert tokens.segments("Turn 1\nThe player\n\n  said\n/x\nEnd") == ["Turn 1\n", "The player\n\n  said\n/x\n", "End"]


@pytest.fixture(scope="module")
def counter():
    count = tokens.counter()
    if not count.name.startswith("tiktoken:"):
        pytest.skip(f"no tiktoken encoding here ({count.name})")
    import tiktoken
    enc = tiktoken.encoding_for_model("gpt-4o-mini")
    assert enc._pat_str in tokens._SEGMENT_SAFE_PATTERNS   # counted part by part
    return count, enc


def test_part_by_part_counts_equal_whole_counts(counter):
    count, enc = counter
    rng = random.Random(0)
    for _ in range(5000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 40)))
        assert count(text) == len(enc.encode(text, disallowed_special=())), repr(text)
    history = "\n\n".join(f"Turn {t}\nPlayer: I open door {t}/{t + 1}.\nNarrator: The hall is quiet; "
                          f"Ж ж 日本 — it's {t}:00.\n  (an aside)\n" for t in range(40))
    for cut in range(0, len(history), 97):   # prompts that share their beginnings, as HiAgent's do
        text = "System prompt.\n" + history[:cut] + "\nMemory window:\n- subgoal 1\n"
        assert count(text) == len(enc.encode(text, disallowed_special=()))


def test_an_unverified_encoding_is_counted_whole(monkeypatch):
    monkeypatch.setattr(tokens, "_SEGMENT_SAFE_PATTERNS", set())
    whole = tokens._load("gpt-4o-mini")
    if not whole.name.startswith("tiktoken:"):
        pytest.skip(f"no tiktoken encoding here ({whole.name})")
    assert whole._count.__name__ == "whole"
