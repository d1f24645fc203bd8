"""The client path (cache, retries, failures, ordering, accounting) over scripted backends.

A scripted backend is only a way to inject chosen outputs; everything else here is
the real client, the real SQLite cache and the real validation.
"""
from __future__ import annotations

import threading

import pytest
from pydantic import BaseModel

from wse_platform.config import ConfigError
from wse_platform.llm import LLMClient, LLMRequest, Sampling, ScriptedBackend
from wse_platform.llm.cache import content_key
from wse_platform.llm.errors import LLMTransportError


class Note(BaseModel):
    text: str
    score: int


def req(content: str = "go", role: str = "test.note", model: str = "smollm2", **kw) -> LLMRequest:
    return LLMRequest(role=role, model=model, messages=[{"role": "user", "content": content}], **kw)


def test_invalid_twice_then_valid_is_ok_after_three_attempts(settings):
    backend = ScriptedBackend({"test.note": ["not json", '{"text": "x"}', '{"text": "ok", "score": 3}']})
    client = LLMClient(settings, backends={"smollm2": backend})
    result = client.complete(req(output_model=Note))
    assert result.ok and result.attempts == 3
    assert result.output == Note(text="ok", score=3)
    records = client.call_records()
    assert [(r["attempt"], r["valid"], r["error_kind"]) for r in records] == [
        (1, False, "invalid_json"), (2, False, "schema_violation"), (3, True, None)]
    # each attempt: a new seed and its own cache entry; the request key is shared
    assert [c.attempt for c in backend.calls] == [1, 2, 3]
    assert len({c.seed for c in backend.calls}) == 3
    assert len({r["request_key"] for r in records}) == 1
    assert len(client.cache) == 3
    assert result.call_ids == [r["call_id"] for r in records]


def test_rerun_replays_the_attempt_sequence_from_cache(settings):
    script = {"test.note": ["not json", '{"text": "x"}', '{"text": "ok", "score": 3}']}
    first = LLMClient(settings, backends={"smollm2": ScriptedBackend(script)}).complete(req(output_model=Note))
    rerun_backend = ScriptedBackend(script)
    rerun = LLMClient(settings, backends={"smollm2": rerun_backend})
    again = rerun.complete(req(output_model=Note))
    assert rerun_backend.n_calls == 0
    assert again.cache_hit and again.attempts == 3 and again.output == first.output
    assert [r["cache_hit"] for r in rerun.call_records()] == [True, True, True]
    assert [r["error_kind"] for r in rerun.call_records()] == ["invalid_json", "schema_violation", None]


def test_always_invalid_is_a_recorded_failure_not_an_exception(settings):
    backend = ScriptedBackend({"test.note": '{"text": "no score"}'})
    client = LLMClient(settings, backends={"smollm2": backend})
    result = client.complete(req(output_model=Note))
    assert not result.ok and result.outputs == []
    f = result.failure
    assert (f.role, f.model, f.error_kind, f.attempts) == ("test.note", "smollm2", "schema_violation", 3)
    assert f.raw_text == '{"text": "no score"}'
    assert "score" in f.message
    assert backend.n_calls == 3
    with pytest.raises(ValueError, match="test.note"):
        _ = result.output


def test_max_attempts_per_model_and_client_override(tmp_path):
    """`models.<name>.max_attempts` sets how often an invalid answer is retried, per model, within
    one batch; it is part of the model's identity (more attempts turn failures into results)."""
    from tests.llm.conftest import make_settings

    one = make_settings(tmp_path, once={"backend": "embedded", "model_id": "x.gguf", "max_attempts": 1},
                        five={"backend": "embedded", "model_id": "y.gguf", "max_attempts": 5})
    script = {"test.note": ["not json"] * 10}
    client = LLMClient(one, backends={"once": ScriptedBackend(script), "five": ScriptedBackend(script),
                                      "smollm2": ScriptedBackend(script)}, use_cache=False)
    once, five, default = client.complete_many([req(model="once", output_model=Note),
                                                req(model="five", output_model=Note),
                                                req(model="smollm2", output_model=Note)])
    assert [r.failure.attempts for r in (once, five, default)] == [1, 5, 3]
    assert one.model("once").identity()["max_attempts"] == 1
    assert "max_attempts" not in one.model("smollm2").identity()
    forced = LLMClient(one, backends={"five": ScriptedBackend(script)}, use_cache=False, max_attempts=2)
    assert forced.complete(req(model="five", output_model=Note)).failure.attempts == 2
    with pytest.raises(Exception, match="max_attempts"):
        make_settings(tmp_path, zero={"backend": "embedded", "model_id": "z.gguf", "max_attempts": 0})


def test_backend_error_fails_the_run_and_keeps_the_rest_of_the_batch(settings):
    def script(call):
        if "boom" in call.messages[0]["content"]:
            return ConnectionError("server went away")
        return "fine"

    client = LLMClient(settings, backends={"smollm2": ScriptedBackend(script, namespace="boom")})
    # a transport error after the backend's retries is the server's, not the model's: no result (issue 23 item 7)
    with pytest.raises(LLMTransportError, match="server went away"):
        client.complete_many([req("hello"), req("boom")])
    assert sorted(str(r["error_kind"]) for r in client.call_records()) == ["None", "transport"]
    # transport errors are not cached, the answer received is: a rerun asks the backend only for the failed call
    backend2 = ScriptedBackend(script, namespace="boom")
    with pytest.raises(LLMTransportError):
        LLMClient(settings, backends={"smollm2": backend2}).complete_many([req("hello"), req("boom")])
    assert [c.messages[0]["content"] for c in backend2.calls] == ["boom"]


def test_choices_and_free_text(settings):
    backend = ScriptedBackend({"judge": ["Y", " n. ", "maybe"], "writer": ["", "a story"]})
    client = LLMClient(settings, backends={"smollm2": backend})
    verdict = client.complete(req(role="judge", choices=["Y", "N"], n=2))
    assert verdict.outputs == ["Y", "N"] and verdict.texts == ["Y", " n. "]
    story = client.complete(req(role="writer"))
    assert story.ok and story.output == "a story" and story.attempts == 2
    assert client.call_records()[-2]["error_kind"] == "empty_output"


def test_complete_many_keeps_order_across_concurrent_backends(settings):
    both_running = threading.Event()
    seen_other = threading.Event()

    def slow_script(call):  # waits until the other backend is running at the same time
        both_running.set()
        assert seen_other.wait(5), "backends did not run concurrently"
        return "A:" + call.messages[0]["content"]

    def other_script(call):
        seen_other.set()
        assert both_running.wait(5)
        return "B:" + call.messages[0]["content"]

    client = LLMClient(settings, backends={"smollm2": ScriptedBackend(slow_script),
                                           "other": ScriptedBackend(other_script)})
    models = ["smollm2", "other", "other", "smollm2", "other", "smollm2"]
    reqs = [req(str(i), model=m) for i, m in enumerate(models)]
    results = client.complete_many(reqs)
    assert [r.output for r in results] == [("A:" if m == "smollm2" else "B:") + str(i)
                                           for i, m in enumerate(models)]
    assert [r.model for r in results] == models


def test_identical_requests_in_a_batch_make_one_backend_call(settings):
    backend = ScriptedBackend({"*": ["first", "second"]})
    client = LLMClient(settings, backends={"smollm2": backend})
    a, b = client.complete_many([req("same"), req("same")])
    assert backend.n_calls == 1 and a.output == b.output == "first"
    ids = [r["call_id"] for r in client.call_records()]
    assert len(set(ids)) == 2  # both calls accounted, each with its own id


def test_sampling_merge_and_cache_key_sensitivity(settings):
    backend = ScriptedBackend({"*": "x"})
    client = LLMClient(settings, backends={"smollm2": backend})
    client.complete_many([req(), req(sampling=Sampling(temperature=0.1)), req(n=2), req(choices=["x", "y"])])
    assert backend.n_calls == 4  # sampling, n and choices are all part of the key
    merged = backend.calls[1].sampling
    assert (merged.temperature, merged.top_p, merged.max_tokens) == (0.1, 0.95, 64)  # config defaults kept
    client.complete(req(sampling=Sampling(temperature=0.7)))  # equal to the model default: same request
    assert backend.n_calls == 4


def test_no_cache_bypasses_reads_but_still_writes(settings):
    LLMClient(settings, backends={"smollm2": ScriptedBackend({"*": "v1"}, namespace="s")}).complete(req())
    fresh = ScriptedBackend({"*": "v2"}, namespace="s")
    bypass = LLMClient(settings, use_cache=False, backends={"smollm2": fresh})
    assert bypass.complete(req()).output == "v2" and fresh.n_calls == 1
    bypass.close()  # without the cache, answers are stored in batches (journaled first); close stores the rest
    later = ScriptedBackend({"*": "v3"}, namespace="s")
    cached = LLMClient(settings, backends={"smollm2": later}).complete(req())
    assert cached.output == "v2" and cached.cache_hit and later.n_calls == 0  # the fresh answer was stored
    assert len(LLMClient(settings).cache) == 1


def test_unknown_model_raises_a_config_error_naming_it(settings):
    client = LLMClient(settings)
    with pytest.raises(ConfigError, match="'nope'"):
        client.complete(req(model="nope"))


def test_bad_request_shape_is_rejected(settings):
    client = LLMClient(settings, backends={"smollm2": ScriptedBackend({"*": "x"})})
    with pytest.raises(ValueError, match="not both"):
        client.complete(req(output_model=Note, choices=["a"]))
    with pytest.raises(ValueError, match="n must be"):
        client.complete(req(n=0))


def test_call_records_carry_run_partition_prompt_version_and_cost(tmp_path):
    from tests.llm.conftest import make_settings

    settings = make_settings(tmp_path, priced={"backend": "litellm", "model_id": "openai/x",
                                               "price_in_per_token": 0.001, "price_out_per_token": 0.01})
    client = LLMClient(settings, run_id="run-1", partition_key="B1|smollm2",
                       backends={"priced": ScriptedBackend({"*": "four words right here"})})
    client.complete(req("one two three", model="priced", prompt_version="test.note@v1"))
    client.complete(req("one two three", model="priced", prompt_version="test.note@v1"))
    miss, hit = client.drain_call_records()
    assert client.call_records() == []
    assert (miss["run_id"], miss["partition_key"], miss["prompt_version"]) == ("run-1", "B1|smollm2", "test.note@v1")
    assert (miss["tokens_in"], miss["tokens_out"]) == (3, 4)  # the scripted backend counts words
    assert miss["cost_usd"] == pytest.approx(3 * 0.001 + 4 * 0.01)
    assert (hit["cache_hit"], hit["cost_usd"], hit["latency_s"]) == (True, 0.0, 0.0)
    assert miss["call_id"] != hit["call_id"] and miss["request_key"] == hit["request_key"]
    key = content_key(miss["request_key"], 1)
    assert LLMClient(settings).cache.get(key)["texts"] == ["four words right here"]


def test_progress_callback_sees_every_request(settings):
    seen = []
    client = LLMClient(settings, backends={"smollm2": ScriptedBackend({"*": "x"})},
                       progress=lambda done, total: seen.append((done, total)))
    client.complete_many([req(str(i)) for i in range(4)])
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_attempt_seeds_follow_the_configured_seed_or_the_request_content():
    from wse_platform.llm.backends import attempt_seed, sample_seed

    assert attempt_seed(5, "ffffffff", 1) == attempt_seed(5, "00000000", 1) == 5 * 1_000_003
    assert attempt_seed(5, "x", 2) == 5 * 1_000_003 + 7_919
    assert attempt_seed(None, "0000000a", 1) == 10 * 1_000_003  # no seed: from the request key
    assert sample_seed(42, 0) == 42 and sample_seed(42, 1) == 42 + 104_729
