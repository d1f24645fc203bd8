"""Call records of a long step are written at a growing interval (issue 24, 256 slots).

Before: a run's session wrote its records every 5 s for as long as the step ran (a warehouse open
and close each, ~3.5 % of the 256-slot fleet command's CPU). Now the interval doubles after each
periodic write up to `flush_interval_max_s`; the first write still comes `flush_interval_s` after
the first calls (tests/llm/test_records_survive_kill.py), and a forced write (the step's end)
leaves the interval alone. Time is moved by setting the client's last write back.
"""
from __future__ import annotations

from tests.llm.conftest import make_settings
from tests.llm.test_durability import backend
from wse_platform.llm import LLMClient, LLMRequest


def _reqs(tag: str, n: int = 2) -> list[LLMRequest]:
    return [LLMRequest(role="endings.forecast", model="smollm2", messages=[{"role": "user", "content": f"{tag}{i}"}])
            for i in range(n)]


def _client(tmp_path, writes: list, **kw) -> LLMClient:
    return LLMClient(make_settings(tmp_path), run_id="flush", backends={"smollm2": backend()},
                     record_sink=lambda rows: writes.append(len(rows)), flush_every=10**6, **kw)


def test_the_interval_doubles_after_each_periodic_write_up_to_the_cap(tmp_path):
    writes: list[int] = []
    client = _client(tmp_path, writes, flush_interval_s=5.0, flush_interval_max_s=20.0)
    try:
        client.complete_many(_reqs("a"))
        client._maybe_flush()
        assert writes == []                      # 5 s have not passed
        client._last_flush -= 5.1
        client._maybe_flush()
        assert writes == [2] and client._flush_wait == 10.0
        client.complete_many(_reqs("b"))
        client._last_flush -= 6.0
        client._maybe_flush()
        assert writes == [2]                     # 6 s < 10 s now
        client._last_flush -= 4.5
        client._maybe_flush()
        assert writes == [2, 2] and client._flush_wait == 20.0
        client.complete_many(_reqs("c"))
        client._last_flush -= 20.1
        client._maybe_flush()
        assert writes == [2, 2, 2] and client._flush_wait == 20.0   # capped
        client.complete_many(_reqs("d"))
        client.flush_records()                   # the step's end: written at once, interval unchanged
        assert writes == [2, 2, 2, 2] and client._flush_wait == 20.0
    finally:
        client.close()


def test_without_a_cap_the_interval_stays(tmp_path):
    writes: list[int] = []
    client = _client(tmp_path, writes, flush_interval_s=5.0)
    try:
        for tag in "ab":
            client.complete_many(_reqs(tag))
            client._last_flush -= 5.1
            client._maybe_flush()
        assert writes == [2, 2] and client._flush_wait == 5.0
    finally:
        client.close()


def test_periodic_record_writes_of_every_client_run_on_one_thread_per_process(tmp_path):
    """Issue 24: each client (a step's session) had a writer thread of its own, and the warehouse keeps a
    DuckDB instance per thread: every session's first periodic write made one anew (~30 ms of CPU). The
    writes a backend's event loop hands off now go to one thread per process, for every client."""
    import asyncio
    import threading

    writers: list[threading.Thread] = []

    async def on_the_loop(fn) -> None:   # as a backend's event loop calls `_flush_soon`
        fn()

    for k in range(2):
        client = LLMClient(make_settings(tmp_path), run_id=f"flush-{k}", backends={"smollm2": backend()},
                           record_sink=lambda rows: writers.append(threading.current_thread()),
                           flush_every=10**6, flush_interval_s=5.0)
        try:
            client.complete_many(_reqs(f"t{k}"))
            client._last_flush -= 5.1
            asyncio.run(on_the_loop(client._flush_soon))
        finally:
            client.close()   # waits for the handed-off write
        assert len(writers) == k + 1 and client._flushed == 2
    assert writers[0] is writers[1] and writers[0] is not threading.current_thread()
