"""Token counting with the forecasting model's own tokenizer.

The revealed share of a position is defined in the forecaster's tokens, so the count
must come from that model's tokenizer, not from words: llama.cpp's tokenizer (vocab-only
load, no weights in memory) for embedded GGUF models, the Hugging Face tokenizer (as vLLM loads
it) for vLLM models; for litellm models `extra.tokenizer`, or litellm's count for OpenAI models,
or a locally cached Hugging Face tokenizer; else litellm's tiktoken fallback, with a warning and
the fallback recorded in every position row (column `tokenizer`).
If `wse_platform.llm` offers `count_tokens(settings, model_name, text)`, prefer it.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from wse_platform.config import ConfigError, ModelConfig, Settings

TokenCounter = Callable[[str], int]
_LOCK = threading.Lock()
log = logging.getLogger(__name__)


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


# Models whose own tokenizer is tiktoken's (litellm counts them exactly): OpenAI's.
_OPENAI_PREFIXES = ("gpt-", "o1", "o3", "o4", "chatgpt", "text-embedding")


def _bare_model_id(model_id: str) -> str:
    """`openrouter/qwen/qwen3-32b` -> `qwen/qwen3-32b`; `openai/gpt-4o` -> `gpt-4o`."""
    head, _, rest = model_id.partition("/")
    return rest if rest and head in ("openai", "openrouter", "hosted_vllm", "together_ai", "fireworks_ai",
                                     "deepinfra", "groq", "azure", "litellm_proxy") else model_id


def _is_openai_model(model_id: str) -> bool:
    bare = _bare_model_id(model_id).lower()
    return bare.startswith(_OPENAI_PREFIXES)


def _hf_counter(name: str, revision: str | None = None, local_only: bool = False) -> _Tokenizer:
    """A counter from a Hugging Face tokenizer: a `tokenizer.json` file, a folder holding one, or a
    hub id (with `local_only`, only from the local cache). Raises when it cannot be loaded."""
    path = Path(name).expanduser()
    if path.is_dir() and (path / "tokenizer.json").exists():
        path = path / "tokenizer.json"
    if path.is_file():
        from tokenizers import Tokenizer
        fast = Tokenizer.from_file(str(path))

        def ends(text: str) -> list[int] | None:
            return [e for _, e in fast.encode(text, add_special_tokens=False).offsets]
        return _Tokenizer(lambda text: len(fast.encode(text, add_special_tokens=False).ids), ends)
    from transformers import AutoTokenizer   # a hub id (the vLLM path loads the same tokenizer)
    tok = AutoTokenizer.from_pretrained(name, revision=revision, local_files_only=local_only)
    return _Tokenizer(lambda text: len(tok.encode(text, add_special_tokens=False)))


@lru_cache(maxsize=32)
def _litellm_resolution(model_id: str, tokenizer: str | None, revision: str | None) -> tuple[str, str | None]:
    """(how positions of this litellm model are counted, fallback note or None).

    `extra.tokenizer` (a tokenizer.json, a folder, or a hub id) wins; an OpenAI model is counted by
    litellm (tiktoken is its tokenizer); any other model by its Hugging Face tokenizer when one is in
    the local cache under its bare id; else litellm's count (tiktoken for most open models), with a
    warning and the fallback recorded in every position row of the story."""
    if tokenizer:
        return f"hf:{tokenizer}", None
    if _is_openai_model(model_id):
        return "litellm", None
    bare = _bare_model_id(model_id)
    try:
        _hf_counter(bare, revision, local_only=True)
        return f"hf-local:{bare}", None
    except Exception:  # noqa: BLE001 - not installed / not cached: the fallback below says so
        pass
    note = (f"no local tokenizer for litellm model {model_id!r}: positions are counted with litellm's "
            "fallback (tiktoken), not the generation model's tokenizer (paper App. C.3); set "
            "models.<name>.extra.tokenizer to a tokenizer.json, a folder, or a Hugging Face id")
    log.warning(note)
    return "litellm", note


def _litellm_counter(model: ModelConfig) -> TokenCounter:
    how, _ = _litellm_resolution(model.model_id, model.extra.get("tokenizer"), model.revision)
    if how.startswith("hf:"):
        try:
            return _hf_counter(how[3:], model.revision)
        except Exception as err:  # noqa: BLE001 - a configured tokenizer that cannot load is a config error
            raise ConfigError(f"models: extra.tokenizer {how[3:]!r} of litellm model {model.model_id!r} "
                              f"could not be loaded ({type(err).__name__}: {err}); give a tokenizer.json file, "
                              "a folder holding one, or a Hugging Face id reachable from this machine") from err
    if how.startswith("hf-local:"):
        return _hf_counter(how[len("hf-local:"):], model.revision, local_only=True)
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
    """What counted the tokens (recorded next to each position of every story); a litellm model
    counted without its own tokenizer says so (`...|fallback:tiktoken`)."""
    m = settings.model(model_name)
    base = f"{m.backend}:{m.model_id}" + (f"@{m.revision}" if m.revision else "")
    if m.backend != "litellm":
        return base
    how, note = _litellm_resolution(m.model_id, m.extra.get("tokenizer"), m.revision)
    if note is not None:
        return base + "|fallback:tiktoken"
    return base if how == "litellm" else f"{base}|{how}"
