"""Issue 24: a batch over several backends (a judge panel of three models) runs its groups on one
thread pool per client, not on threads started for every batch; the answers are the same."""
from __future__ import annotations

import threading

from wse_platform.llm import LLMClient, LLMRequest, ScriptedBackend


def test_a_panel_batch_reuses_the_clients_threads(settings, monkeypatch):
    backends = {m: ScriptedBackend(lambda call, m=m: f"{m}:{call.messages[-1]['content']}", namespace=m)
                for m in ("j1", "j2", "j3")}
    client = LLMClient(settings, backends=backends, use_cache=False)
    started = []
    real_start = threading.Thread.start

    def start(self):
        started.append(self.name)
        return real_start(self)
    monkeypatch.setattr(threading.Thread, "start", start)
    for step in range(10):
        out = client.complete_many([LLMRequest(role="test.panel", model=m, messages=[
            {"role": "user", "content": f"step {step}"}]) for m in ("j1", "j2", "j3")])
        assert [r.texts for r in out] == [[f"{m}:step {step}"] for m in ("j1", "j2", "j3")]
    client.close()
    pool_threads = [n for n in started if n.startswith("wse-llm_")]
    assert 1 <= len(pool_threads) <= 6, started      # a pool per batch started 22 here (2-3 per batch)
