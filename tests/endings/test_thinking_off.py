"""100-Endings runs without thinking (App. C.4 forecaster, C.5 judge, D.1 / Table 8 pipeline):
unset `reasoning` becomes `off` for its litellm / vLLM models, and on OpenRouter `off` is sent as
the provider's switch (a zero reasoning budget), not dropped."""
from __future__ import annotations

import pytest

from tests.llm.injecting_server import InjectingServer, reply
from wse_platform.config import settings_from_dict
from wse_platform.llm import LLMClient, LLMRequest
from wse_platform.llm.reasoning import litellm_kwargs


def _settings(tmp_path, url="http://127.0.0.1:9/v1", **judge):
    models = {"f": {"backend": "vllm", "model_id": "Qwen/Qwen3-32B"},
              "j": {"backend": "litellm", "model_id": "openrouter/qwen/qwen3-8b", "api_base": url,
                    "api_key_env": "WSE_TEST_OR_KEY", "extra": {"max_retries": 0}, **judge},
              "g": {"backend": "litellm", "model_id": "openrouter/anthropic/claude-sonnet-4.6"},
              "wse_only": {"backend": "litellm", "model_id": "openai/other"}}
    return settings_from_dict({"cache_dir": str(tmp_path / "c"), "models": models,
                               "endings": {"forecaster": "f", "judge": "j", "generators": ["g"]}})


def test_endings_roles_default_to_thinking_off_and_an_explicit_mode_is_kept(tmp_path):
    s = _settings(tmp_path)
    assert {n: s.models[n].reasoning for n in ("f", "j", "g")} == {"f": "off", "j": "off", "g": "off"}
    assert s.models["wse_only"].reasoning is None            # models of other benchmarks untouched
    assert _settings(tmp_path, reasoning="on").models["j"].reasoning == "on"


def test_openrouter_off_is_the_providers_switch_not_nothing():
    assert litellm_kwargs("openrouter/qwen/qwen3-8b", "off", None) == {"extra_body": {"reasoning": {"max_tokens": 0}}}
    assert litellm_kwargs("anthropic/claude-sonnet-4-6", "off", None) == {}   # no switch there: nothing sent


@pytest.mark.skipif(__import__("importlib").util.find_spec("litellm") is None, reason="litellm not installed")
def test_the_judge_request_to_openrouter_carries_the_switch(tmp_path, monkeypatch):
    monkeypatch.setenv("WSE_TEST_OR_KEY", "test-key-not-secret")
    with InjectingServer([reply("Y")]) as srv:
        client = LLMClient(_settings(tmp_path, srv.url), progress=False)
        res = client.complete(LLMRequest(role="endings.judge", model="j",
                                         messages=[{"role": "user", "content": "Same ending? Y or N."}]))
    assert res.ok
    assert srv.requests[0]["reasoning"] == {"max_tokens": 0}
