"""Credentials in URLs are never stored or shown (issue 23, item 9).

A key in `?api_key=`, `?key=`, a token in the path or `user:pass@` used to be stored verbatim in
`llm_calls.endpoint` (so `llm_usage.calls_per_endpoint`), the cache, failure messages and the
output of `wse doctor`. `wse_platform/redact.py` is applied wherever an endpoint or an error text
is recorded; a `model_id` carrying a credential is refused at load.
"""
from __future__ import annotations

import importlib.util
import sqlite3

import pytest

from tests.llm.conftest import make_settings
from tests.llm.injecting_server import InjectingServer, reply
from wse_platform.config import ConfigError, settings_from_dict

pytestmark = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")

PATH_TOKEN = "sk-pathTOKEN9f8e7d6c5b4a3"
QUERY_KEY = "QUERYsecret31337abc"
PASSWORD = "hunter2PASSWORDx"


def _everything_stored(client, tmp_path) -> str:
    """Call records, failure messages and every cached entry, as one text."""
    from wse_platform.llm.cache import ResponseCache

    parts = [repr(client.call_records())]
    db = tmp_path / "cache" / ResponseCache.FILE_NAME
    if db.exists():
        con = sqlite3.connect(db)
        parts += [repr(row) for row in con.execute("SELECT * FROM responses")]
        con.close()
    return "\n".join(parts)


def _req():
    from wse_platform.llm import LLMRequest
    return LLMRequest(role="endings.judge", model="judge", choices=["Y", "N"],
                      messages=[{"role": "user", "content": "Same ending? Y or N."}])


def _settings(tmp_path, url: str):
    return make_settings(tmp_path, judge={
        "backend": "litellm", "model_id": "openai/judge", "api_base": url,
        "sampling": {"temperature": 0.0, "max_tokens": 8},
        "extra": {"structured_output": "prompt", "max_retries": 0, "retry_base_s": 0.01}})


def test_token_in_the_path_never_reaches_llm_calls_or_the_cache(tmp_path):
    from wse_platform.llm import LLMClient

    with InjectingServer([reply("Y")]) as srv:
        url = srv.url.replace("/v1", f"/{PATH_TOKEN}/v1")
        client = LLMClient(_settings(tmp_path, url))
        result = client.complete(_req())
    assert result.ok
    rec = client.call_records()[0]
    assert rec["endpoint"] and "127.0.0.1" in rec["endpoint"] and "***" in rec["endpoint"]
    assert PATH_TOKEN not in _everything_stored(client, tmp_path)


def test_key_in_the_query_never_reaches_llm_calls_or_the_cache(tmp_path):
    from wse_platform.llm import LLMClient

    with InjectingServer([reply("Y")]) as srv:
        client = LLMClient(_settings(tmp_path, f"{srv.url}?api_key={QUERY_KEY}"))
        assert client.complete(_req()).ok
    assert client.call_records()[0]["endpoint"].endswith("/v1?api_key=***")
    assert QUERY_KEY not in _everything_stored(client, tmp_path)


def test_doctor_never_prints_a_credential_of_an_endpoint(tmp_path):
    from wse_platform.doctor import check_models

    with InjectingServer([reply('{"ok": true}')]) as srv:
        url = srv.url.replace("/v1", f"/{PATH_TOKEN}/v1") + f"?key={QUERY_KEY}"
        settings = make_settings(tmp_path, remote={"backend": "litellm", "model_id": "openai/x", "api_base": url,
                                                   "extra": {"max_retries": 0, "structured_output": "prompt"}})
        out = "\n".join(str(c) for c in check_models(settings, ["remote"]))
    assert "answered in" in out and "127.0.0.1" in out, out
    assert PATH_TOKEN not in out and QUERY_KEY not in out


@pytest.mark.parametrize("model_id, kind", [
    (f"openai/gpt-4o?api_key={QUERY_KEY}", "query parameter 'api_key'"),
    (f"openai/gpt-4o?key={QUERY_KEY}", "query parameter 'key'"),
    (f"https://u:{PASSWORD}@host/v1/model", "user name or password"),
    (f"openai/{PATH_TOKEN}", "API key in the path"),
])
def test_model_id_with_a_credential_is_refused_naming_the_key(model_id, kind):
    with pytest.raises(ConfigError) as err:
        settings_from_dict({"models": {"m": {"backend": "litellm", "model_id": model_id}}})
    msg = str(err.value)
    assert "models.m.model_id" in msg and kind in msg and "api_key_env" in msg, msg


def test_redaction_of_every_credential_form():
    from wse_platform.redact import redact_text, redact_url

    for url in (f"https://api.example.com/v1?api_key={QUERY_KEY}", f"https://api.example.com/v1?key={QUERY_KEY}&x=1",
                f"https://api.example.com/{PATH_TOKEN}/v1", f"https://me:{PASSWORD}@api.example.com/v1",
                f"https://api.example.com/v1?access_token={QUERY_KEY}"):
        shown = redact_url(url)
        assert QUERY_KEY not in shown and PATH_TOKEN not in shown and PASSWORD not in shown
        assert "api.example.com" in shown and "***" in shown
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    assert redact_url("https://h/models/DeepSeek-R1-Distill-Qwen-32B-GGUF/v1").endswith("GGUF/v1")
    text = f"APIError: POST https://me:{PASSWORD}@h/v1?key={QUERY_KEY}: refused"
    assert redact_text(text) == "APIError: POST https://***@h/v1?key=***: refused"

