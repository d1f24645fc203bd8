"""A broken response cache names its file and the fix; it never surfaces as an IndexError
or as 'backend crashed' failures, and moving it aside lets the run continue."""
from __future__ import annotations

import pytest

from wse_platform.llm import LLMClient, LLMRequest, ScriptedBackend
from wse_platform.llm.cache import ResponseCache, check_cache_file, move_aside
from wse_platform.llm.errors import CacheCorrupted, LLMInfrastructureError


def _req() -> LLMRequest:
    return LLMRequest(role="t", model="smollm2", messages=[{"role": "user", "content": "hello"}])


def test_cache_replaced_by_text_names_the_file_and_the_fix(settings):
    path = settings.cache / ResponseCache.FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("this is not a database\n" * 200)
    backend = ScriptedBackend({"t": "hi"})
    client = LLMClient(settings, backends={"smollm2": backend})
    with pytest.raises(CacheCorrupted) as info:
        client.complete(_req())
    msg = str(info.value)
    assert str(path) in msg and "move-broken-cache" in msg and "mv " in msg
    assert isinstance(info.value, LLMInfrastructureError) and backend.n_calls == 0
    assert check_cache_file(path) is not None

    moved = move_aside(path)
    assert moved is not None and moved.exists() and not path.exists()
    again = LLMClient(settings, backends={"smollm2": backend})
    assert again.complete(_req()).output == "hi"
    assert check_cache_file(path) is None


def test_cache_truncated_mid_file_fails_cleanly_not_as_backend_crashes(settings):
    warm = LLMClient(settings, backends={"smollm2": ScriptedBackend(lambda c: c.messages[0]["content"] * 50)})
    warm.complete_many([LLMRequest(role="t", model="smollm2", messages=[{"role": "user", "content": f"q{i}"}])
                        for i in range(300)])
    warm.close()
    path = settings.cache / ResponseCache.FILE_NAME
    for side in ("-wal", "-shm"):
        (path.parent / (path.name + side)).unlink(missing_ok=True)
    data = path.read_bytes()
    path.write_bytes(data[:4096] + b"\x00garbage" * 2000)  # header kept, pages destroyed
    backend = ScriptedBackend({"t": "fresh"})
    client = LLMClient(settings, backends={"smollm2": backend})
    with pytest.raises(CacheCorrupted, match=str(path)):
        client.complete_many([LLMRequest(role="t", model="smollm2", messages=[{"role": "user", "content": f"q{i}"}])
                              for i in range(300)])
    assert not [r for r in client.call_records() if r["error_kind"] == "transport"]
