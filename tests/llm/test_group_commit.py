"""Issue 24, 256 slots: a client's trajectory threads share one cache connection. Claims and the
store of answers (with the release of their claims) that threads ask for while another thread is in
its transaction are made by the next thread in one transaction, with the outcome of one transaction
each in turn. These tests hold the gate while threads queue, then let one thread in."""
from __future__ import annotations

import threading
import time

from wse_platform.llm import LLMClient
from wse_platform.llm.cache import LIVE_OWNERS, ResponseCache


def _wait_for(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "threads did not queue"
        time.sleep(0.005)


def _transactions(con) -> list[str]:
    seen: list[str] = []
    con.set_trace_callback(lambda sql: seen.append(sql) if sql.startswith("BEGIN") else None)
    return seen


def test_claims_queued_meanwhile_are_made_in_one_transaction_with_the_outcome_of_one_each(tmp_path):
    cache = ResponseCache(tmp_path / "cache")
    cache.put("stored", {"texts": ["x"], "tokens_in": 1, "tokens_out": 1})
    owners = [f"owner-{i}" for i in range(4)]
    LIVE_OWNERS.update(owners)
    results: dict[str, tuple] = {}
    try:
        begins = _transactions(cache._con)
        with cache._claim_gate:   # another thread's claim under way: these four queue
            threads = [threading.Thread(target=lambda o=o, i=i: results.__setitem__(
                o, cache.claim(["shared", f"own-{i}", "stored"], o))) for i, o in enumerate(owners)]
            for t in threads:
                t.start()
            _wait_for(lambda: len(cache._pending) == 4)
        for t in threads:
            t.join(10)
        assert begins == ["BEGIN IMMEDIATE"]     # one transaction for the four claims
        winners = [o for o in owners if "shared" in results[o][1]]
        assert len(winners) == 1                 # one request in flight per key, as with one transaction each
        for i, o in enumerate(owners):
            hits, mine, others = results[o]
            assert set(hits) == {"stored"}
            assert f"own-{i}" in mine
            assert others == ([] if o in winners else ["shared"])
        held = dict(cache._con.execute("SELECT key, owner FROM claims").fetchall())
        assert held["shared"] == winners[0] and {held[f"own-{i}"] for i in range(4)} == set(owners)
    finally:
        LIVE_OWNERS.difference_update(owners)
        cache.close()


def test_a_failed_combined_claim_raises_in_its_thread_and_the_others_claim_again(tmp_path, monkeypatch):
    cache = ResponseCache(tmp_path / "cache")
    real = cache._claim_batch
    calls: list[int] = []

    def flaky(requests):
        calls.append(len(requests))
        if len(calls) == 1:
            raise RuntimeError("disk trouble")
        return real(requests)
    monkeypatch.setattr(cache, "_claim_batch", flaky)
    outcome: dict[str, object] = {}

    def ask(owner: str) -> None:
        try:
            outcome[owner] = cache.claim([f"k-{owner}"], owner)
        except RuntimeError as err:
            outcome[owner] = err
    with cache._claim_gate:
        threads = [threading.Thread(target=ask, args=(o,)) for o in ("a", "b", "c")]
        for t in threads:
            t.start()
        _wait_for(lambda: len(cache._pending) == 3)
    for t in threads:
        t.join(10)
    failed = [o for o, r in outcome.items() if isinstance(r, RuntimeError)]
    assert len(failed) == 1 and calls[0] == 3    # the thread that made the transaction raises ...
    for o in set("abc") - set(failed):           # ... the others' claims were made by the next one
        assert outcome[o][1] == [f"k-{o}"]
    cache.close()


def test_answers_and_releases_queued_meanwhile_are_stored_in_one_transaction(settings):
    client = LLMClient(settings, use_cache=True)
    cache = client.cache
    owners = [f"{client._owner}:t{i}" for i in range(4)]
    LIVE_OWNERS.update(owners)
    try:
        for i, o in enumerate(owners):
            assert cache.claim([f"key-{i}"], o)[1] == [f"key-{i}"]
        begins = _transactions(cache._con)

        def answer_and_store(i: int) -> None:
            client._queue_answer(f"key-{i}", {"texts": [f"answer {i}"], "tokens_in": 3, "tokens_out": 2}, False)
            client._store_answers(release=[f"key-{i}"], owner=owners[i])
        with client._store_lock:   # another thread's store under way
            threads = [threading.Thread(target=answer_and_store, args=(i,)) for i in range(4)]
            for t in threads:
                t.start()
            _wait_for(lambda: len(client._release_queue) == 4)
        for t in threads:
            t.join(10)
        assert begins == ["BEGIN IMMEDIATE"]
        assert {k: v["texts"] for k, v in cache.get_many([f"key-{i}" for i in range(4)]).items()} == \
            {f"key-{i}": [f"answer {i}"] for i in range(4)}
        assert cache._con.execute("SELECT count(*) FROM claims").fetchone()[0] == 0
        assert not client._cache_queue and not client._release_queue
    finally:
        LIVE_OWNERS.difference_update(owners)
        client.close()


def test_a_client_whose_reads_keep_missing_claims_at_once_and_still_serves_stored_answers(settings, monkeypatch):
    from wse_platform.llm import LLMRequest, ScriptedBackend
    from wse_platform.llm import client as client_mod

    asked: list[str] = []
    backend = ScriptedBackend(lambda call: asked.append(call.messages[-1]["content"]) or f"re: {call.messages[-1]['content']}",
                              namespace="s")
    client = LLMClient(settings, backends={"s": backend}, use_cache=True)
    reads: list[list[str]] = []
    real_get = client.cache.get_many
    monkeypatch.setattr(client.cache, "get_many", lambda keys: reads.append(list(keys)) or real_get(keys))

    def ask(text: str):
        return client.complete(LLMRequest(role="test.r", model="s", messages=[{"role": "user", "content": text}]))
    first = ask("stored")                       # an answer in the cache for later
    assert not first.cache_hit and len(reads) == 1
    for i in range(client_mod.MISSES_BEFORE_CLAIMING + 2):
        assert not ask(f"new {i}").cache_hit
    # a read per batch while they missed (the first found nothing either), none after MISSES_BEFORE_CLAIMING of them
    assert len(reads) == client_mod.MISSES_BEFORE_CLAIMING
    again = ask("stored")                       # found by the claim's own read: a hit, not asked again
    assert again.cache_hit and again.texts == ["re: stored"] and asked.count("stored") == 1
    n = len(reads)
    assert ask("new after the hit").cache_hit is False and len(reads) == n + 1   # plain reads are back
    client.close()
