"""Failure kinds of the one call path: truncated, input_truncated, transport, reasoning
removed from answers, and infrastructure failures that raise instead of becoming results.

The scripted backend only injects what a backend would report (a `length` finish, a
cut prompt, a think block, a missing key); the client, cache, validation and
accounting are the real ones.
"""
from __future__ import annotations

import pytest
from pydantic import BaseModel

from tests.llm.conftest import make_settings
from wse_platform.llm import LLMClient, LLMRequest, ScriptedBackend
from wse_platform.llm.accounting import usage_summary
from wse_platform.llm.backends import BackendResponse
from wse_platform.llm.backends.scripted import Cut
from wse_platform.llm.errors import LLMInfrastructureError, LLMTransportError
from wse_platform.llm.validation import split_reasoning


class Note(BaseModel):
    text: str


def req(role: str = "test.note", **kw) -> LLMRequest:
    return LLMRequest(role=role, model="smollm2", messages=[{"role": "user", "content": "go"}], **kw)


def test_cut_answer_is_truncated_retried_then_recorded(settings):
    backend = ScriptedBackend({"test.note": [Cut('{"text": "a'), Cut("once upon"), Cut("a time")]})
    client = LLMClient(settings, backends={"smollm2": backend})
    free = client.complete(req())  # free text that parses fine is still a failure when cut
    assert not free.ok and free.failure.error_kind == "truncated" and free.attempts == 3
    recs = client.call_records()
    assert [(r["error_kind"], r["finish_reason"]) for r in recs] == [("truncated", "length")] * 3
    assert usage_summary(recs)["llm_truncated_share"] == 1.0


def test_truncated_then_complete_is_ok(settings):
    backend = ScriptedBackend({"test.note": [Cut('{"text": "a'), '{"text": "done"}']})
    client = LLMClient(settings, backends={"smollm2": backend})
    result = client.complete(req(output_model=Note))
    assert result.ok and result.output == Note(text="done") and result.attempts == 2
    assert [r["error_kind"] for r in client.call_records()] == ["truncated", None]


def test_role_that_accepts_cut_answers_still_records_the_cut(settings):
    client = LLMClient(settings, backends={"smollm2": ScriptedBackend({"test.note": Cut("once upon a")})})
    result = client.complete(req(allow_truncated=True))
    assert result.ok and result.output == "once upon a" and result.attempts == 1
    rec = client.call_records()[0]
    assert (rec["finish_reason"], rec["error_kind"]) == ("length", None)
    summary = usage_summary(client.call_records())
    assert summary["llm_truncated_share"] == 0.0 and summary["llm_answers_cut_share"] == 1.0


def test_closed_choice_decided_before_the_cut_is_accepted(settings):
    client = LLMClient(settings, backends={"smollm2": ScriptedBackend({"test.j": Cut("Y, because the")})})
    result = client.complete(req(role="test.j", choices=["Y", "N"]))
    assert result.ok and result.output == "Y"
    assert client.call_records()[0]["finish_reason"] == "length"


class _CutPrompt(ScriptedBackend):
    """Reports what the embedded backend reports when it shortens a prompt to fit n_ctx."""

    def generate(self, calls, on_result=None):
        out = []
        for i, call in enumerate(calls):
            self.calls.append(call)
            resp = BackendResponse(texts=["fine"] * call.n, meta={"prompt_truncated_tokens": 1234,
                                                                  "finish_reasons": ["stop"] * call.n})
            out.append(resp)
            if on_result:
                on_result(i, resp)
        return out


def test_cut_prompt_is_a_failure_unless_allowed(tmp_path):
    strict = make_settings(tmp_path)
    client = LLMClient(strict, backends={"smollm2": _CutPrompt({"*": "x"})})
    result = client.complete(req())
    assert not result.ok and result.failure.error_kind == "input_truncated" and result.attempts == 1
    assert "allow_input_truncation" in result.failure.message
    rec = client.call_records()[0]
    assert rec["prompt_truncated_tokens"] == 1234 and rec["error_kind"] == "input_truncated"

    allowed = make_settings(tmp_path, smollm2={
        "backend": "embedded", "model_id": "SmolLM2-135M-Instruct.Q4_1.gguf", "allow_input_truncation": True})
    client = LLMClient(allowed, backends={"smollm2": _CutPrompt({"*": "x"})}, use_cache=False)
    ok = client.complete(req())
    assert ok.ok and client.call_records()[0]["prompt_truncated_tokens"] == 1234
    assert usage_summary(client.call_records())["llm_input_truncated_share"] == 1.0


def test_think_block_is_removed_from_the_parsed_answer_and_stored(settings):
    backend = ScriptedBackend({"test.j": "<think>The ending differs... N? no, Y.</think>\n\nY"})
    client = LLMClient(settings, backends={"smollm2": backend})
    result = client.complete(req(role="test.j", choices=["Y", "N"]))
    assert result.ok and result.output == "Y" and result.texts == ["Y"]
    assert client.call_records()[0]["reasoning"] == "The ending differs... N? no, Y."


@pytest.mark.parametrize("text,answer,thought", [
    ("<think>a</think>b", "b", "a"),
    ("  <think>\nx\n</think>\n{\"text\": 1}", "{\"text\": 1}", "x"),
    ("reasoning only</think>N", "N", "reasoning only"),   # opening tag added by the chat template
    ("<think>cut by the limit", "", "cut by the limit"),
    ("plain", "plain", None),
])
def test_split_reasoning(text, answer, thought):
    assert split_reasoning(text) == (answer, thought)


def test_infrastructure_error_raises_after_recording(settings):
    backend = ScriptedBackend({"test.note": LLMInfrastructureError("environment variable X_KEY is not set")})
    client = LLMClient(settings, backends={"smollm2": backend})
    with pytest.raises(LLMInfrastructureError, match="X_KEY is not set.*not a model failure"):
        client.complete_many([req(), req(role="test.note", tags={"i": "2"})])
    assert backend.n_calls == 1  # identical requests in a batch: one backend call, no retry
    assert {r["error_kind"] for r in client.call_records()} == {"infrastructure"}


def test_transport_error_fails_the_run_is_recorded_and_not_retried_by_the_client(settings):
    backend = ScriptedBackend({"test.note": RuntimeError("429 rate limited after retries")})
    client = LLMClient(settings, backends={"smollm2": backend})
    with pytest.raises(LLMTransportError):
        client.complete(req())
    assert [(r["attempt"], r["error_kind"]) for r in client.call_records()] == [(1, "transport")]


def test_records_reach_the_sink_in_batches_as_calls_complete(settings):
    written: list[list[str]] = []
    client = LLMClient(settings, backends={"smollm2": ScriptedBackend(lambda c: c.messages[0]["content"])},
                       record_sink=lambda rows: written.append([r["call_id"] for r in rows]), flush_every=2,
                       flush_interval_s=3600)
    client.complete_many([LLMRequest(role="t", model="smollm2", messages=[{"role": "user", "content": str(i)}])
                          for i in range(5)])
    assert [len(b) for b in written] == [2, 2]  # two full batches while calls completed
    client.flush_records()
    assert [len(b) for b in written] == [2, 2, 1]
    ids = [i for b in written for i in b]
    assert len(ids) == len(set(ids)) == 5  # every call handed over exactly once


def test_sink_failure_is_an_infrastructure_error(settings):
    def broken(rows):
        raise OSError("disk full")

    client = LLMClient(settings, backends={"smollm2": ScriptedBackend({"t": "x"})}, record_sink=broken,
                       flush_every=1)
    with pytest.raises(LLMInfrastructureError, match="disk full"):
        client.complete(LLMRequest(role="t", model="smollm2", messages=[{"role": "user", "content": "q"}]))
