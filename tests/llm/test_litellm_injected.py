"""litellm path against a local test server that INJECTS what llama-cpp-python's real server
cannot produce (a Qwen3-style think block, 429s, a `length` finish, a 401) — see
injecting_server.py. The request still goes LLMClient -> litellm Router -> HTTP."""
from __future__ import annotations

import importlib.util

import pytest

from tests.llm.conftest import make_settings
from tests.llm.injecting_server import InjectingServer, reply
from wse_platform.llm import LLMClient, LLMRequest
from wse_platform.llm.errors import LLMInfrastructureError, LLMTransportError

pytestmark = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")


def settings_for(tmp_path, url: str, **model):
    return make_settings(tmp_path, judge={
        "backend": "litellm", "model_id": "openai/qwen3-judge", "api_base": url,
        "sampling": {"temperature": 0.0, "max_tokens": 64},
        "extra": {"structured_output": "prompt", "max_retries": 3, "retry_base_s": 0.01}, **model})


def judge_req() -> LLMRequest:
    return LLMRequest(role="endings.judge", model="judge", choices=["Y", "N"],
                      messages=[{"role": "user", "content": "Same ending? Y or N."}])


def test_qwen3_style_think_block_then_y_is_read_as_y(tmp_path):
    think = "<think>\nThe prediction says N-othing like... No: it matches. Not N.\n</think>\n\nY"
    with InjectingServer([reply(think)]) as srv:
        client = LLMClient(settings_for(tmp_path, srv.url))
        result = client.complete(judge_req())
    assert result.ok and result.output == "Y" and result.texts == ["Y"]
    rec = client.call_records()[0]
    assert "it matches" in rec["reasoning"] and rec["finish_reason"] == "stop"
    assert "chat_template_kwargs" not in srv.requests[0]  # reasoning unset: nothing sent


def test_provider_reasoning_field_is_stored_not_parsed(tmp_path):
    with InjectingServer([reply("N", reasoning="long deliberation")]) as srv:
        client = LLMClient(settings_for(tmp_path, srv.url))
        assert client.complete(judge_req()).output == "N"
    assert client.call_records()[0]["reasoning"] == "long deliberation"


@pytest.mark.parametrize("mode,flag", [("off", False), ("on", True)])
def test_reasoning_mode_is_sent_and_part_of_the_cache_key(tmp_path, mode, flag):
    with InjectingServer([reply("Y")]) as srv:
        client = LLMClient(settings_for(tmp_path, srv.url, reasoning=mode))
        assert client.complete(judge_req()).ok
        plain = LLMClient(settings_for(tmp_path, srv.url))
        assert not plain.complete(judge_req()).cache_hit  # another reasoning mode: another cache entry
    assert srv.requests[0]["chat_template_kwargs"] == {"enable_thinking": flag}


def test_429_is_retried_with_backoff_then_succeeds(tmp_path):
    limited = reply(status=429, headers={"retry-after": "0"})
    with InjectingServer([limited, limited, reply("Y")]) as srv:
        client = LLMClient(settings_for(tmp_path, srv.url))
        result = client.complete(judge_req())
    assert result.ok and result.output == "Y" and len(srv.requests) == 3
    assert [r["attempt"] for r in client.call_records()] == [1]  # one accounted call, not three


def test_429_that_persists_is_a_transport_failure_not_invalid_output(tmp_path):
    with InjectingServer([reply(status=429, headers={"retry-after": "0"})]) as srv:
        client = LLMClient(settings_for(tmp_path, srv.url, extra={"structured_output": "prompt", "max_retries": 1,
                                                                   "retry_base_s": 0.01}))
        with pytest.raises(LLMTransportError):  # the server's failure, not the model's: no result
            client.complete(judge_req())
    assert [r["error_kind"] for r in client.call_records()] == ["transport"]
    assert len(srv.requests) == 2  # first try + 1 retry


def test_length_finish_is_truncated(tmp_path):
    with InjectingServer([reply('{"ok": tr', finish="length")]) as srv:
        client = LLMClient(settings_for(tmp_path, srv.url))
        result = client.complete(LLMRequest(role="t", model="judge", messages=[{"role": "user", "content": "x"}]))
    assert result.failure.error_kind == "truncated" and result.attempts == 3
    assert {r["finish_reason"] for r in client.call_records()} == {"length"}


def test_401_fails_the_run_as_infrastructure(tmp_path, monkeypatch):
    monkeypatch.setenv("WSE_BAD_KEY", "sk-wrong-key-for-test")
    with InjectingServer([reply(status=401)]) as srv:
        client = LLMClient(settings_for(tmp_path, srv.url, api_key_env="WSE_BAD_KEY"))
        with pytest.raises(LLMInfrastructureError) as info:
            client.complete(judge_req())
    assert "sk-wrong-key-for-test" not in str(info.value)
    assert [r["error_kind"] for r in client.call_records()] == ["infrastructure"]


def test_cost_from_litellms_cost_map_unless_a_price_is_set(tmp_path):
    import litellm

    price = litellm.model_cost["gpt-4o-mini"]
    expected = 11 * price["input_cost_per_token"] + 7 * price["output_cost_per_token"]  # the server's usage
    with InjectingServer([reply("Y")]) as srv:
        mapped = LLMClient(settings_for(tmp_path / "a", srv.url, model_id="openai/gpt-4o-mini"))
        mapped.complete(judge_req())
        priced = LLMClient(settings_for(tmp_path / "b", srv.url, model_id="openai/gpt-4o-mini",
                                        price_in_per_token=1.0, price_out_per_token=2.0))
        priced.complete(judge_req())
    assert mapped.call_records()[0]["cost_usd"] == pytest.approx(expected)
    assert priced.call_records()[0]["cost_usd"] == pytest.approx(11 * 1.0 + 7 * 2.0)
