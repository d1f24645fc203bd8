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
    return TokenCounter(f"tiktoken:{enc.name}", lambda text: len(enc.encode(text, disallowed_special=())))


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

