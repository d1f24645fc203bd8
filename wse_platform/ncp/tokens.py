"""Token counts for HiAgent's 12k-token prompt budget, counted as the reference method counts them.

The reference HiAgent counts `system + "\\n" + prompt` with tiktoken's encoding for the model it
names (gpt-4o-mini: `o200k_base`). tiktoken is imported lazily (never through litellm, whose import
is slow); its BPE file is read from `TIKTOKEN_CACHE_DIR` when set, else from the copy litellm ships
(located without importing litellm), else tiktoken's own cache. When tiktoken or the file is not
available the count falls back to 4 characters per token and the fallback is recorded: a warning
in the log and `counter.name` (`estimate-4-chars: <reason>`), which the loop writes into the turn's
`memory_json`.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import threading
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)
ESTIMATE = "estimate-4-chars"
_LOCK = threading.Lock()
_COUNTERS: dict[str, "TokenCounter"] = {}
_WARMING: set[str] = set()   # models whose counter `warm` is loading in the background


class TokenCounter:
    def __init__(self, name: str, count: Callable[[str], int]):
        self.name = name
        self._count = count

    def __call__(self, text: str) -> int:
        return self._count(text)


# Issue 24: a HiAgent prompt (~14 kB at t_max 10) was encoded whole for every request, ~0.9 ms of CPU,
# though most of it (the history, the system prompt, the memory's chunks) was counted for the same
# episode's earlier prompts. The encodings below split text into pieces with a regex before their
# byte-pair merges, and no piece ever spans a newline that is followed by a character that is neither
# whitespace nor "/": the pieces that can hold a newline (`\s*[\r\n]+`, `\s++$`, `\s+(?!\S)`, `\s+`,
# punctuation followed by `[\r\n/]*`) end before any other character, and no piece looks behind.
# So the count of a text is the sum of the counts of its parts cut at such places (`segments`), and
# each part is counted once per process. Checked: identical counts on 200 recorded HiAgent prompts
# and 20,000 random strings of newlines, slashes, spaces, punctuation, letters and digits of several
# scripts (tests/ncp/test_token_segments.py). Only for these exact patterns (tiktoken's pattern text,
# as verified); any other encoding is counted whole.
_SEGMENT_SAFE_PATTERNS = {
    # o200k_base (tiktoken 0.14)
    "|".join([
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]),
    # cl100k_base (tiktoken 0.14)
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
}
_MAX_SEGMENTS = 200_000   # parts counted per encoding and process before the memo starts again


def segments(text: str) -> list[str]:
    """`text` cut after each newline that is followed by a character that is neither whitespace nor "/"
    (their concatenation is `text`)."""
    parts = text.split("\n")
    out: list[str] = []
    cur = [parts[0]]
    for p in parts[1:]:
        if p and not p[0].isspace() and p[0] != "/":
            out.append("\n".join(cur) + "\n")
            cur = [p]
        else:
            cur.append(p)
    out.append("\n".join(cur))
    return out


def _segmented(count_one: Callable[[str], int]) -> Callable[[str], int]:
    """`count_one` of a whole text, as the sum over its `segments`, each counted once (a per-process memo)."""
    memo: dict[str, int] = {}

    def count(text: str) -> int:
        total = 0
        for part in segments(text):
            n = memo.get(part)
            if n is None:
                n = count_one(part)
                if len(memo) >= _MAX_SEGMENTS:
                    memo.clear()
                memo[part] = n
            total += n
        return total
    return count


def _litellm_tokenizers() -> str | None:
    """The tokenizer folder litellm ships (tiktoken cache layout), found without importing litellm."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    for loc in (spec.submodule_search_locations or []) if spec is not None else []:
        folder = Path(loc) / "litellm_core_utils" / "tokenizers"
        if folder.is_dir():
            return str(folder)
    return None


def _estimate(reason: str) -> TokenCounter:
    log.warning("HiAgent token budget: tiktoken unavailable (%s); counting 4 characters per token instead", reason)
    return TokenCounter(f"{ESTIMATE}: {reason}", lambda text: (len(text) + 3) // 4)


def _load(model: str) -> TokenCounter:
    try:
        import tiktoken
    except ImportError as err:
        return _estimate(f"tiktoken is not installed ({err}); pip install tiktoken")
    set_here = "TIKTOKEN_CACHE_DIR" not in os.environ and "DATA_GYM_CACHE_DIR" not in os.environ
    folder = _litellm_tokenizers() if set_here else None
    try:
        if folder:  # only while loading: the process environment is left as it was
            os.environ["TIKTOKEN_CACHE_DIR"] = folder
        enc = tiktoken.encoding_for_model(model)
    except Exception as err:  # noqa: BLE001 - unknown model, missing file and no network: all fall back
        return _estimate(f"no tiktoken encoding for {model!r}: {type(err).__name__}: {str(err)[:200]}")
    finally:
        if folder:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
    def whole(text: str) -> int:
        return len(enc.encode(text, disallowed_special=()))
    safe = getattr(enc, "_pat_str", None) in _SEGMENT_SAFE_PATTERNS
    return TokenCounter(f"tiktoken:{enc.name}", _segmented(whole) if safe else whole)


def counter(model: str = "gpt-4o-mini") -> TokenCounter:
    """The token counter for `model`'s encoding (loaded once per process)."""
    with _LOCK:
        if model not in _COUNTERS:
            _COUNTERS[model] = _load(model)
        return _COUNTERS[model]


def warm(model: str = "gpt-4o-mini") -> None:
    """Load `model`'s counter in a background thread (~0.6 s of CPU for tiktoken's o200k file), so a
    memory cell's first HiAgent step finds it loaded instead of loading it on the episodes' path
    while their opening requests are in flight. Once per model and process."""
    with _LOCK:
        if model in _COUNTERS or model in _WARMING:
            return
        _WARMING.add(model)
    threading.Thread(target=counter, args=(model,), name=f"ncp-tokens-{model}", daemon=True).start()

