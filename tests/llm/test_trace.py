"""WSE_LLM_TRACE (wse_platform/llm/trace.py): each client batch and each request on the HTTP loop leaves
time stamps, and bench/chain_gap.py splits an answer -> the same thread's next request into its parts
(issue 24: where the time between a conversation's answer and its next request goes)."""
from __future__ import annotations

from tests.llm.conftest import make_settings
from tests.llm.injecting_server import InjectingServer, reply
from wse_platform.llm import LLMClient, LLMRequest, trace


def test_a_conversations_requests_are_traced_and_split_into_parts(tmp_path, monkeypatch):
    monkeypatch.setattr(trace, "FOLDER", str(tmp_path / "trace"))
    with InjectingServer([reply("Y")] * 3, delay_s=0.3) as srv:
        settings = make_settings(tmp_path, judge={
            "backend": "litellm", "model_id": "openai/local-judge", "api_base": srv.url, "endpoint_concurrency": 2,
            "sampling": {"temperature": 0.0, "max_tokens": 4}, "extra": {"structured_output": "prompt"}})
        client = LLMClient(settings, progress=False)
        for i in range(3):   # one conversation: three requests in turn from this thread
            assert client.complete(LLMRequest(role="endings.judge", model="judge", choices=["Y", "N"],
                                              messages=[{"role": "user", "content": f"turn {i}"}])).ok
        client.close()
    from bench import chain_gap   # the script under test (bench/ is importable from the repository root)
    batches, reqs = chain_gap.load(tmp_path / "trace")
    assert len(batches) == 3 and len(reqs) == 3
    for r in reqs:
        assert r["ask"] <= r["slot"] <= r["answer"] <= r["release"] <= r["done"]
        assert r["answer"] - r["slot"] >= 0.3           # the server's delay is inside the slot
    pairs = chain_gap.pairs(batches, reqs)
    assert len(pairs) == 2
    for p in pairs:
        assert all(p[part] >= 0 for part in chain_gap.PARTS)
        assert abs(sum(p[part] for part in chain_gap.PARTS) - p["total"]) < 1e-6
        assert p["total"] < 0.3                        # the gap holds no server time
