"""A dead server never becomes a benchmark result; timeouts are deadlines (issue 23, items 7 and 8).

Before: a server that never answered, answered 503 forever, an HTML page with status 200 or
`choices: []` gave `transport` failures that were results ("1/1 runs succeeded") and stayed;
a `content_filter` finish was a valid answer; an empty answer was cached and reused; a
`user:password@` URL failed every call as a story-agent failure; a server sending 200 and then
one byte every 5 s hung a run with `timeout_s: 30` for 400 s.
Now: the call raises `LLMTransportError` (no result, nothing cached), the healthy rerun answers,
and `llm_calls` keeps that call once, with its final outcome.
"""
from __future__ import annotations

import time

import pytest

from tests.llm.conftest import make_settings
from tests.llm.injecting_server import InjectingServer, reply
from wse_platform.llm import LLMClient, LLMRequest
from wse_platform.llm.accounting import write_call_records
from wse_platform.llm.errors import LLMInfrastructureError, LLMTransportError
from wse_platform.warehouse import Warehouse


def settings_for(tmp_path, url: str, timeout_s: float = 5.0, retries: int = 1, **model):
    return make_settings(tmp_path, judge={
        "backend": "litellm", "model_id": "openai/local-judge", "api_base": url,
        "sampling": {"temperature": 0.0, "max_tokens": 16},
        "extra": {"structured_output": "prompt", "max_retries": retries, "retry_base_s": 0.01,
                  "timeout_s": timeout_s}, **model})


def judge_req(text: str = "Same ending? Y or N.") -> LLMRequest:
    return LLMRequest(role="endings.judge", model="judge", choices=["Y", "N"],
                      messages=[{"role": "user", "content": text}])


@pytest.mark.parametrize("fault", ["503", "html", "no_choices", "hang"])
def test_dead_server_is_no_result_and_the_healthy_rerun_replaces_its_row(tmp_path, fault):
    bad = reply(status=503) if fault == "503" else reply(fault=fault)
    wh = Warehouse(tmp_path / "wh.duckdb")
    sink = lambda rows: write_call_records(wh, rows)  # noqa: E731
    with InjectingServer([bad]) as srv:
        client = LLMClient(settings_for(tmp_path, srv.url, timeout_s=0.5), run_id="run-1", record_sink=sink)
        t0 = time.monotonic()
        with pytest.raises(LLMTransportError):
            client.complete(judge_req())
        assert time.monotonic() - t0 < 5
    assert [r["error_kind"] for r in client.call_records()] == ["transport"]
    assert wh.query("SELECT error_kind FROM llm_calls")["error_kind"].to_list() == ["transport"]

    with InjectingServer([reply("Y")]) as healthy:  # the next run asks again (nothing was cached)
        rerun = LLMClient(settings_for(tmp_path, healthy.url), run_id="run-2", record_sink=sink)
        result = rerun.complete(judge_req())
        rerun.flush_records()
    assert result.ok and result.output == "Y" and not result.cache_hit and len(healthy.requests) == 1
    calls = wh.query("SELECT run_id, error_kind, tokens_out FROM llm_calls")
    assert calls.rows() == [("run-2", None, 7)]  # counted once, with its final outcome


def test_content_filter_is_its_own_failure_kind_and_never_cached(tmp_path):
    with InjectingServer([reply("Y", finish="content_filter")]) as srv:
        client = LLMClient(settings_for(tmp_path, srv.url), max_attempts=2)
        result = client.complete(judge_req())
    assert not result.ok and result.failure.error_kind == "content_filter" and result.attempts == 2
    with InjectingServer([reply("N")]) as healthy:
        again = LLMClient(settings_for(tmp_path, healthy.url), max_attempts=2).complete(judge_req())
    assert again.ok and again.output == "N" and not again.cache_hit


def test_empty_answer_is_not_served_from_the_cache(tmp_path):
    with InjectingServer([reply("")]) as srv:
        result = LLMClient(settings_for(tmp_path, srv.url), max_attempts=1).complete(judge_req())
    assert result.failure.error_kind == "empty_output"
    with InjectingServer([reply("Y")]) as healthy:
        again = LLMClient(settings_for(tmp_path, healthy.url), max_attempts=1).complete(judge_req())
    assert again.ok and again.output == "Y" and len(healthy.requests) == 1


def test_credentials_in_the_url_fail_the_run_before_anything_is_sent(tmp_path):
    with InjectingServer([reply("Y")]) as srv:
        url = srv.url.replace("http://", "http://user:secret-pw@")
        client = LLMClient(settings_for(tmp_path, url))
        with pytest.raises(LLMInfrastructureError) as info:
            client.complete(judge_req())
    assert srv.requests == [] and "secret-pw" not in str(info.value)
    assert [r["error_kind"] for r in client.call_records()] == ["infrastructure"]


def test_timeout_bounds_the_whole_request_against_a_trickling_server(tmp_path):
    with InjectingServer([reply(fault="trickle")], trickle_s=0.2) as srv:
        client = LLMClient(settings_for(tmp_path, srv.url, timeout_s=1.0, retries=0))
        t0 = time.monotonic()
        with pytest.raises(LLMTransportError, match="timeout"):
            client.complete(judge_req())
        took = time.monotonic() - t0
    assert took < 3.0, took  # before: bytes kept arriving within the read timeout, so it never fired


def test_timeout_bounds_the_request_on_the_litellm_path_too(tmp_path):
    # two endpoints: litellm's Router (the path for API providers and several servers)
    with InjectingServer([reply(fault="trickle")], trickle_s=0.2) as srv:
        client = LLMClient(settings_for(tmp_path, srv.url, timeout_s=1.0, retries=0,
                                        api_base=[srv.url, srv.url.replace("127.0.0.1", "localhost")]))
        client.backend("judge").router()  # litellm's import (seconds) is not the request's time
        t0 = time.monotonic()
        with pytest.raises(LLMInfrastructureError):
            client.complete(judge_req())
        took = time.monotonic() - t0
    assert took < 6.0, took


def test_an_empty_answer_stored_by_an_older_version_is_asked_again_and_replaced(tmp_path):
    from wse_platform.llm import ScriptedBackend
    from wse_platform.llm.cache import ResponseCache, content_key

    settings = make_settings(tmp_path)
    req = LLMRequest(role="t", model="smollm2", messages=[{"role": "user", "content": "hi"}])
    probe = LLMClient(settings, backends={"smollm2": ScriptedBackend({"*": "x"}, namespace="old")})
    key = content_key(probe._prepare(req).request_key, 1)
    ResponseCache(settings.cache).put(key, {"texts": [""], "tokens_in": 1, "tokens_out": 0})  # cached before the fix
    backend = ScriptedBackend({"*": "fine"}, namespace="old")
    first = LLMClient(settings, backends={"smollm2": backend}, max_attempts=1).complete(req)
    assert first.ok and first.output == "fine" and backend.n_calls == 1  # before: the stored empty answer, a failure
    again = ScriptedBackend({"*": "other"}, namespace="old")
    hit = LLMClient(settings, backends={"smollm2": again}, max_attempts=1).complete(req)
    assert hit.output == "fine" and hit.cache_hit and again.n_calls == 0
