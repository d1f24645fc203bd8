"""Positions are counted with the generation model's tokenizer on every backend (App. C.3): a
litellm model reads `extra.tokenizer`; without a local tokenizer the tiktoken fallback is
announced and recorded in every position row."""
from __future__ import annotations

import logging

from wse_platform.config import settings_from_dict
from wse_platform.endings import tokens
from wse_platform.endings.forecast import SplitStory, compute_positions


def _word_tokenizer(path, vocab):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(["[UNK]", *vocab])}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.save(str(path))
    return path


def _settings(tmp_path, extra):
    return settings_from_dict({"cache_dir": str(tmp_path / "c"), "models": {
        "q": {"backend": "litellm", "model_id": "openrouter/qwen/qwen3-32b", "extra": extra}}})


def test_litellm_model_counts_with_its_configured_tokenizer(tmp_path):
    tokens._litellm_resolution.cache_clear()
    path = _word_tokenizer(tmp_path / "tokenizer.json", ["Mara", "walked"])
    s = _settings(tmp_path, {"tokenizer": str(path)})
    count = tokens.token_counter(s, "q")
    # a word-level tokenizer: "Mara walked, Mara!" → Mara walked , Mara ! = 5 tokens (tiktoken says otherwise)
    assert count("Mara walked, Mara!") == 5
    assert count("antidisestablishmentarianism") == 1           # one unknown word, one token
    assert tokens.tokenizer_name(s, "q") == f"litellm:openrouter/qwen/qwen3-32b|hf:{path}"


def test_litellm_model_without_local_tokenizer_warns_and_records_the_fallback(tmp_path, caplog):
    tokens._litellm_resolution.cache_clear()
    s = _settings(tmp_path, {})
    with caplog.at_level(logging.WARNING, logger="wse_platform.endings.tokens"):
        name = tokens.tokenizer_name(s, "q")
        count = tokens.token_counter(s, "q")
    assert name == "litellm:openrouter/qwen/qwen3-32b|fallback:tiktoken"
    assert any("no local tokenizer" in r.message and "extra.tokenizer" in r.message for r in caplog.records)
    text = " ".join(["Mara walked along the quiet shore of the lake that evening."] * 12)
    rows = compute_positions([SplitStory.of("s1", text)], "human:x", count, 1, "q", name)
    assert rows and {r["tokenizer"] for r in rows} == {name}    # every position row of the story says so


def test_openai_models_are_counted_by_litellm_without_a_warning(tmp_path, caplog):
    tokens._litellm_resolution.cache_clear()
    s = settings_from_dict({"cache_dir": str(tmp_path / "c"), "models": {
        "g": {"backend": "litellm", "model_id": "openai/gpt-4o-mini"}}})
    with caplog.at_level(logging.WARNING, logger="wse_platform.endings.tokens"):
        assert tokens.tokenizer_name(s, "g") == "litellm:openai/gpt-4o-mini"
    assert not caplog.records


# litellm's tiktoken fallback counted without importing litellm (tokens._fallback_counter): the same counts as
# litellm.token_counter, pinned on texts whose counts depend on the encoding, the 1,024-character chunks (a long
# text, a word across a chunk boundary), non-ASCII and special-token text, so a drift in litellm fails here.
_FALLBACK_MODELS = ("hosted_vllm/fleet", "openrouter/qwen/qwen3-32b", "together_ai/Qwen/Qwen3-235B-A22B",
                    "mistral/open-mistral-nemo", "gemini/gemini-2.5-flash", "openrouter/google/gemma-3-27b-it", "fleet-j1")


def _fallback_texts() -> list[str]:
    story = " ".join(["Mara walked along the quiet shore of the lake that evening, counting the herons."] * 150)
    return [
        "", "a", " ", "Mara walked, Mara!", "  leading and trailing  ", "line\nbreaks\r\n\ttabs\n\n",
        "Ünïcödé façade, naïve café — “quotes” and ‘apostrophes’…", "日本語のテキストと中文文本，한국어 텍스트.",
        "Emoji 🙂🚀👩‍👩‍👧 and combining e\u0301 a\u0308 ZWJ\u200d NBSP\u00a0.", "<|endoftext|> and <|fim_prefix|> as text",
        "x" * 5000, " " * 3000, "1234567890" * 300, "a" * 1023 + "bcdefgh ijk",   # a word across the chunk boundary
        story, story.replace("herons", "hérons — 鷺"), "\u00e9" * 2100,
    ]


def test_litellm_fallback_counts_like_litellm_token_counter(monkeypatch):
    import litellm

    for var in tokens._LITELLM_COUNT_ENV:
        monkeypatch.delenv(var, raising=False)
    texts = _fallback_texts()
    assert any(len(t) > 4 * tokens._CHUNK_CHARS for t in texts)
    for model_id in _FALLBACK_MODELS:
        count = tokens._fallback_counter(model_id)
        assert count is not None, model_id   # the fallback is counted without litellm for these models
        for text in texts:
            assert count(text) == litellm.token_counter(model=model_id, text=text), (model_id, text[:40])
    # the chunks matter: one encoding of the whole text would count the word across the boundary once
    enc = tokens._cl100k()
    text = "a" * 1023 + "bcdefgh ijk"
    assert tokens._fallback_counter("hosted_vllm/fleet")(text) != len(enc.encode_ordinary(text))


def test_litellm_fallback_uses_cl100k_exactly_where_litellm_does(monkeypatch):
    """Every model name of litellm's map (bare, under its provider, behind a routing prefix) that
    `_litellm_counts_with_cl100k` accepts is counted by litellm with tiktoken's cl100k_base."""
    import litellm
    import tiktoken
    from litellm.litellm_core_utils.token_counter import openai_tokenizer_encoding_name
    from litellm.utils import huggingface_tokenizer_kind

    for var in tokens._LITELLM_COUNT_ENV:
        monkeypatch.delenv(var, raising=False)
    names = {"hosted_vllm/fleet", "fleet", "openrouter/openai/gpt-oss-120b", "openai/container", "chat-latest"}
    for key in litellm.model_cost:
        last = key.rsplit("/", 1)[-1]
        names |= {key, last, f"hosted_vllm/{last}", f"openrouter/{key}"}
    accepted = [n for n in sorted(names) if tokens._litellm_counts_with_cl100k(n)]
    assert len(accepted) > len(names) // 2          # the fast path is the common case, not an exception
    wrong = [n for n in accepted
             if huggingface_tokenizer_kind(n) is not None or openai_tokenizer_encoding_name(n) != "cl100k_base"]
    assert not wrong, wrong[:20]
    # the bundled encoding is tiktoken's cl100k_base
    ours, theirs = tokens._cl100k(), tiktoken.get_encoding("cl100k_base")
    assert (ours._pat_str, ours._special_tokens, ours._mergeable_ranks) == (
        theirs._pat_str, theirs._special_tokens, theirs._mergeable_ranks)


def test_litellm_fallback_positions_do_not_import_litellm(tmp_path):
    """Counting a stand-in model's positions (the fleet's case) imports neither litellm nor anything heavy."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    config = {"cache_dir": str(tmp_path / "c"), "models": {"f": {
        "backend": "litellm", "model_id": "hosted_vllm/fleet", "api_base": "http://127.0.0.1:9/v1"}}}
    code = ("import sys\n"
            "from wse_platform.config import settings_from_dict\n"
            "from wse_platform.endings import tokens\n"
            f"s = settings_from_dict({config!r})\n"
            "n = tokens.token_counter(s, 'f')('Mara walked along the quiet shore.')\n"
            "print(n, tokens.tokenizer_name(s, 'f'), 'litellm' in sys.modules)\n")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True,
                         env={**os.environ, "PYTHONPATH": str(root)}).stdout.split()
    assert out == ["8", "litellm:hosted_vllm/fleet|fallback:tiktoken", "False"]
