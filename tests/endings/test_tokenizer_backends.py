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
