"""Token counting with the forecasting model's own tokenizer.

The revealed share of a position is defined in the forecaster's tokens, so the count
must come from that model's tokenizer, not from words: llama.cpp's tokenizer (vocab-only
load, no weights in memory) for embedded GGUF models, `litellm.token_counter` for
litellm models, the Hugging Face tokenizer (as vLLM loads it) for vLLM models.
If `wse_platform.llm` offers `count_tokens(settings, model_name, text)`, prefer it.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from wse_platform.config import ConfigError, ModelConfig, Settings

TokenCounter = Callable[[str], int]
_LOCK = threading.Lock()


def find_gguf(model: ModelConfig) -> Path:
    """The GGUF file of an embedded model, located exactly as the embedded backend does."""
    from wse_platform.llm.backends.embedded import find_gguf as backend_find_gguf

    return backend_find_gguf(model.model_id, model.extra)


@lru_cache(maxsize=8)
def _llama_vocab(path: str):
    from llama_cpp import Llama

    return Llama(model_path=path, vocab_only=True, verbose=False)


class _Tokenizer:
    """A token counter (`tok(text) -> int`) that can also report token end offsets.

    `token_ends(text)` tokenises `text` once and returns the character offset where each
    token ends (None when the pieces do not reassemble the text exactly); position
    selection uses it to get every prefix's token count from ONE tokenisation.
    """

    def __init__(self, count: TokenCounter, ends: Callable[[str], list[int] | None] | None = None):
        self._count, self._ends = count, ends

    def __call__(self, text: str) -> int:
        return self._count(text)

    def token_ends(self, text: str) -> list[int] | None:
        return self._ends(text) if self._ends is not None else None


def _char_ends_from_pieces(text: str, pieces: list[bytes]) -> list[int] | None:
    """Byte pieces of consecutive tokens -> character end offsets in `text`."""
    data = text.encode("utf-8")
    if b"".join(pieces) != data:
        return None
    # byte offset -> number of characters fully contained in data[:offset]
    char_at = [0] * (len(data) + 1)
    pos = 0
    for ci, ch in enumerate(text):
        pos += len(ch.encode("utf-8"))
        char_at[pos] = ci + 1
    for b in range(1, len(char_at)):   # offsets inside a multi-byte character round down
        if char_at[b] == 0:
            char_at[b] = char_at[b - 1]
    out, b = [], 0
    for piece in pieces:
        b += len(piece)
        out.append(char_at[b])
    return out


def _embedded_counter(model: ModelConfig) -> TokenCounter:
    llama = _llama_vocab(str(find_gguf(model)))

    def tokens(text: str) -> list[int]:
        with _LOCK:  # llama.cpp objects are not thread-safe
            return llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    def ends(text: str) -> list[int] | None:
        toks = tokens(text)
        with _LOCK:
            pieces = [llama.detokenize([t]) for t in toks]
        return _char_ends_from_pieces(text, pieces)

    return _Tokenizer(lambda text: len(tokens(text)), ends)


def _litellm_counter(model: ModelConfig) -> TokenCounter:
    import litellm

    return lambda text: int(litellm.token_counter(model=model.model_id, text=text))


def _vllm_counter(model: ModelConfig) -> TokenCounter:
    try:
        from vllm.transformers_utils.tokenizer import get_tokenizer
        tok = get_tokenizer(model.model_id, revision=model.revision)
    except ImportError:
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(model.model_id, revision=model.revision)

    def ends(text: str) -> list[int] | None:
        if not getattr(tok, "is_fast", False):
            return None
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        return [e for _, e in enc["offset_mapping"]]

    return _Tokenizer(lambda text: len(tok.encode(text, add_special_tokens=False)), ends)


def token_counter(settings: Settings, model_name: str) -> TokenCounter:
    """A `text -> token count` function for config model `model_name`."""
    try:  # the LLM layer's helper, when it exists, is the single source of truth
        from wse_platform.llm import count_tokens  # type: ignore[attr-defined]
    except ImportError:
        count_tokens = None
    if count_tokens is not None:
        return _Tokenizer(lambda text: int(count_tokens(settings, model_name, text)))
    model = settings.model(model_name)
    if model.backend == "embedded":
        return _embedded_counter(model)
    if model.backend == "litellm":
        return _litellm_counter(model)
    return _vllm_counter(model)


def tokenizer_name(settings: Settings, model_name: str) -> str:
    """What counted the tokens (recorded next to each position)."""
    m = settings.model(model_name)
    return f"{m.backend}:{m.model_id}" + (f"@{m.revision}" if m.revision else "")
