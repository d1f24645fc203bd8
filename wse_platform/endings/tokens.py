"""Token counting with the forecasting model's own tokenizer.

The revealed share of a position is defined in the forecaster's tokens, so the count
must come from that model's tokenizer, not from words: llama.cpp's tokenizer (vocab-only
load, no weights in memory) for embedded GGUF models, the Hugging Face tokenizer (as vLLM loads
it) for vLLM models; for litellm models `extra.tokenizer`, or litellm's count for OpenAI models,
or a locally cached Hugging Face tokenizer; else litellm's tiktoken fallback, with a warning and
the fallback recorded in every position row (column `tokenizer`). That fallback is counted here
without importing litellm (3.5-3.9 CPU s) whenever litellm would count with cl100k_base
(`_fallback_counter`), giving exactly litellm's counts.
If `wse_platform.llm` offers `count_tokens(settings, model_name, text)`, prefer it.
"""
from __future__ import annotations

import binascii
import hashlib
import importlib.util
import logging
import os
import re
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


# litellm's `token_counter(model=m, text=t)` (litellm 1.110: `_get_count_function` -> `select_tokenizer`) counts a
# model with no Hugging Face tokenizer of its own (`huggingface_tokenizer_kind(m) is None`) on its `openai_tokenizer`
# path: tiktoken's `openai_tokenizer_encoding_name(m)`, which is cl100k_base for every model that is not an OpenAI or
# Azure one (`_fix_model_name` maps unknown names to gpt-3.5-turbo), over chunks of TIKTOKEN_ENCODE_CHUNK_SIZE_CHARS
# characters (1,024) summed, special tokens counted as text; texts over TOKEN_COUNTER_MAX_EXACT_CHARS (4,000,000) are
# extrapolated from samples. Importing litellm for that costs 3.5-3.9 CPU s at the start of every positions run;
# `_fallback_counter` gives the same counts with tiktoken alone, and leaves every case it cannot prove to litellm.
# tests/endings/test_tokenizer_backends.py compares both on texts and the model names of litellm's map (drift fails).
_CHUNK_CHARS = 1024                  # litellm constants.TIKTOKEN_ENCODE_CHUNK_SIZE_CHARS (default)
_MAX_EXACT_CHARS = 4_000_000         # litellm constants.TOKEN_COUNTER_MAX_EXACT_CHARS (default)
_LITELLM_COUNT_ENV = ("TIKTOKEN_ENCODE_CHUNK_SIZE_CHARS", "TOKEN_COUNTER_MAX_EXACT_CHARS")
# names litellm counts with a Hugging Face tokenizer (cohere command-r, anthropic, deepseek, llama 2/3, replicate)
_HF_KIND_MARKS = ("command-r", "claude", "deepseek", "llama-2", "llama-3", "replicate")
# providers of the map entries behind litellm's OpenAI/Azure, Anthropic and Cohere model sets
_LISTED_PROVIDERS = frozenset({"openai", "text-completion-openai", "azure", "azure_text", "anthropic",
                               "cohere", "cohere_chat"})
_VERSIONED_OPENAI = re.compile(r"(?:gpt-(?:[5-9]|[1-9]\d+)|o[1-9]\d*)(?:[.-]|$)")  # litellm's gpt-5+/o-series names
# tiktoken_ext.openai_public.cl100k_base, read from litellm's bundled copy (litellm sets TIKTOKEN_CACHE_DIR to it)
_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_CL100K_PAT = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|"""
               r"""\s*[\r\n]|\s+(?!\S)|\s""")
_CL100K_SPECIAL = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                   "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}


def _litellm_counts_with_cl100k(model_id: str) -> bool:
    """True when litellm's `token_counter(model=model_id, text=...)` counts with cl100k_base in 1,024-character
    chunks, decided without importing litellm (its model map is read as data); False when unsure."""
    if any(os.environ.get(name) for name in _LITELLM_COUNT_ENV):
        return False
    low = model_id.lower()
    if "gpt" in low or "azure" in low or any(mark in low for mark in _HF_KIND_MARKS):
        return False
    segments = model_id.split("/")
    if _VERSIONED_OPENAI.match(segments[-1]):
        return False
    import tiktoken

    from wse_platform.llm.backends.pricing import model_map

    table = model_map()
    if not table:   # litellm's map not found: litellm decides
        return False
    for suffix in ("/".join(segments[i:]) for i in range(len(segments))):
        try:
            tiktoken.encoding_name_for_model(suffix)
            return False   # a name tiktoken knows (davinci, text-embedding-..., ...)
        except KeyError:
            pass
        if any(table.get(key, {}).get("litellm_provider") in _LISTED_PROVIDERS for key in (suffix, f"azure/{suffix}")):
            return False
    return True


@lru_cache(maxsize=1)
def _cl100k():
    """tiktoken's cl100k_base from litellm's bundled copy (or CUSTOM_TIKTOKEN_CACHE_DIR, as litellm reads it),
    None when neither holds it intact."""
    import tiktoken
    from tiktoken.load import check_hash, read_file

    spec = importlib.util.find_spec("litellm")   # locates the package without importing it
    bundled = [os.path.join(loc, "litellm_core_utils", "tokenizers")
               for loc in ((spec.submodule_search_locations or []) if spec else [])]
    name = hashlib.sha1(_CL100K_URL.encode()).hexdigest()   # tiktoken's cache file name of the encoding
    for d in (d for d in (os.environ.get("CUSTOM_TIKTOKEN_CACHE_DIR"), *bundled) if d):
        path = os.path.join(d, name)
        try:
            data = read_file(path)
        except OSError:
            continue
        if check_hash(data, _CL100K_SHA256):   # as tiktoken's load_tiktoken_bpe (b64decode is a2b_base64)
            a2b = binascii.a2b_base64
            ranks = {a2b(tok): int(rank) for tok, rank in (ln.split() for ln in data.splitlines() if ln)}
            return tiktoken.Encoding(name="cl100k_base", pat_str=_CL100K_PAT, mergeable_ranks=ranks,
                                     special_tokens=_CL100K_SPECIAL)
    return None


def _fallback_counter(model_id: str) -> TokenCounter | None:
    """litellm's fallback count of `model_id` without importing litellm, or None when litellm must count."""
    if not _litellm_counts_with_cl100k(model_id):
        return None
    enc = _cl100k()
    if enc is None:
        return None

    def count(text: str) -> int:
        if len(text) > _MAX_EXACT_CHARS:   # litellm extrapolates from samples: let it
            import litellm
            return int(litellm.token_counter(model=model_id, text=text))
        return sum(len(enc.encode_ordinary(text[i:i + _CHUNK_CHARS])) for i in range(0, len(text), _CHUNK_CHARS))

    return count


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
    fallback = _fallback_counter(model.model_id)
    if fallback is not None:
        return fallback
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
