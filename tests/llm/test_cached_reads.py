"""Answers already in the cache are served by a plain read: no claim, no write transaction.

A judging run replays the answers its judges got while the cell was generated
(`wse_platform/early_judges.py`); with four runs at once, two write transactions per replayed
batch on the shared cache file made the replays wait on each other.
"""
from __future__ import annotations

from wse_platform.config import settings_from_dict
from wse_platform.llm import LLMClient, ScriptedBackend
from wse_platform.llm.types import LLMRequest


def _reqs(n: int) -> list[LLMRequest]:
    return [LLMRequest(role="endings.judge", model="j", messages=[{"role": "user", "content": f"Ending {i}?"}])
            for i in range(n)]


def test_stored_answers_are_served_without_claiming(tmp_path, monkeypatch):
    settings = settings_from_dict({"cache_dir": str(tmp_path / "c"),
                                   "models": {"j": {"backend": "litellm", "model_id": "openai/j"}}})
    first = LLMClient(settings, progress=False, backends={"j": ScriptedBackend({"endings.judge": "Y"}, namespace="j")})
    assert all(r.ok for r in first.complete_many(_reqs(5)))
    first.close()

    backend = ScriptedBackend({"endings.judge": "N"}, namespace="j")
    again = LLMClient(settings, progress=False, backends={"j": backend})
    writes = []
    monkeypatch.setattr(type(again.cache), "claim", lambda self, keys, owner: writes.append(keys) or ({}, keys, []))
    out = again.complete_many(_reqs(6))              # five stored, one new
    assert [r.cache_hit for r in out] == [True] * 5 + [False] and backend.n_calls == 1
    assert [r.texts for r in out[:5]] == [["Y"]] * 5
    assert [len(k) for k in writes] == [1]          # only the new request was claimed
    again.close()
