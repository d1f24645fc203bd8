"""The endpoint limiter serves one process's waiters by priority (limiter.py, issue 24).

A request may carry the number of requests its conversation still expects (`limiter.expect` in the
chain runner's thread, `take_hint` in the client, `BackendCall.priority` to the backends); a waiter's
key is when it queued minus AGE_S x min(hint, MAX_HINT): the conversations with the most requests
ahead go first, FIFO among equal keys and without hints, and no waiter is passed by one that queued
more than AGE_S x MAX_HINT after it. Before, one process's waiters were served FIFO. The order across
processes: tests/llm/test_limiter_order.py; fairness without hints: tests/llm/test_limiter_polling.py;
a slot is never left free while a waiter of the process waits (the stress test below).

The ordering tests run the limiter on a fake clock (`limiter.time`), so the keys do not depend on
how fast the loaded machine runs the test."""
from __future__ import annotations

import asyncio
import random
import threading
import types

from wse_platform.llm import LLMClient, LLMRequest, ScriptedBackend
from wse_platform.llm import limiter as limiter_mod
from wse_platform.llm.limiter import AGE_S, MAX_HINT, EndpointLimiter, expect, take_hint


def _fake_clock(monkeypatch) -> list[float]:
    clock = [1000.0]
    monkeypatch.setattr(limiter_mod, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    return clock


def _served(tmp_path, clock: list[float], arrivals: list[tuple[str, int, float]], limit: int = 1,
            held_elsewhere: bool = False) -> list[str]:
    """Every slot is held; waiters (name, hint, queued at: seconds on the fake clock) queue in that order;
    then the slots are freed. The names in the order the waiters got a slot (each releases it at once,
    so the next grant is the limiter's hand-off to its best waiter). `held_elsewhere`: the slots are
    held by another limiter on the folder and come back through the map (the poller's look)."""
    lim = EndpointLimiter("http://fleet/v1", limit, tmp_path)
    holder = EndpointLimiter("http://fleet/v1", limit, tmp_path) if held_elsewhere else lim
    order: list[str] = []

    async def one(name: str, hint: int) -> None:
        slot = await lim.acquire(hint)
        order.append(name)
        await asyncio.sleep(0)
        lim.release(slot)

    async def run() -> None:
        held = [holder.try_acquire() for _ in range(limit)]
        assert None not in held
        tasks = []
        for name, hint, at in arrivals:
            clock[0] = 1000.0 + at
            tasks.append(asyncio.create_task(one(name, hint)))
            await asyncio.sleep(0)   # queued now
        for slot in held:
            holder.release(slot)
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
    try:
        asyncio.run(run())
    finally:
        lim.close()
        if holder is not lim:
            holder.close()
    return order


def test_more_requests_ahead_first_fifo_among_equal_and_no_passing_beyond_the_bound(tmp_path, monkeypatch):
    clock = _fake_clock(monkeypatch)
    monkeypatch.setattr(limiter_mod, "AGE_S", 0.02)
    monkeypatch.setattr(limiter_mod, "MAX_HINT", 10)   # no waiter is passed by one queued > 0.2 s after it
    arrivals = [("old-0", 0, 0.0), ("a-3", 3, 0.001), ("b-3", 3, 0.002), ("c-5", 5, 0.003), ("d-3", 3, 0.004),
                ("mid-10", 10, 0.05), ("late-99", 99, 0.35)]
    # mid-10, queued 0.05 s after old-0, counts as queued 0.2 s earlier: first; then c-5, the 3s in their
    # queueing order, old-0; late-99 queued 0.35 s after old-0: its hint (capped at 10) cannot pass old-0
    want = ["mid-10", "c-5", "a-3", "b-3", "d-3", "old-0", "late-99"]
    assert _served(tmp_path, clock, arrivals) == want
    # the same order when the first slot comes back through the map (the poller), not a hand-off here
    assert _served(tmp_path, clock, arrivals, held_elsewhere=True) == want


def test_without_hints_or_with_equal_hints_the_order_is_fifo(tmp_path, monkeypatch):
    clock = _fake_clock(monkeypatch)
    rng = random.Random(5)
    times = sorted(rng.choice((0.0, 0.5, 1.0)) + rng.random() * 0.01 * (k % 3) for k in range(40))
    for hint in (0, 7):
        arrivals = [(f"w{k}", hint, t) for k, t in enumerate(times)]   # several with the same moment
        names = [a[0] for a in arrivals]
        assert _served(tmp_path, clock, arrivals) == names
        assert _served(tmp_path, clock, arrivals, limit=3, held_elsewhere=True) == names


def test_random_hints_follow_the_key_and_nobody_is_passed_by_a_later_arrival_beyond_the_bound(tmp_path,
                                                                                                monkeypatch):
    """The module's own AGE_S and MAX_HINT (4 s): 200 waiters over 12 s with hints 0-300."""
    clock = _fake_clock(monkeypatch)
    rng = random.Random(11)
    arrivals = sorted(((rng.randrange(301) if rng.random() < 0.8 else 0), rng.uniform(0, 12)) for _ in range(200))
    arrivals = [(str(k), h, t) for k, (h, t) in enumerate(sorted(arrivals, key=lambda a: a[1]))]
    order = _served(tmp_path, clock, arrivals)
    at = {name: (h, t, k) for k, (name, h, t) in enumerate(arrivals)}
    assert order == sorted(at, key=lambda n: (at[n][1] - AGE_S * min(at[n][0], MAX_HINT), at[n][2]))
    passed_by = [at[later][1] - at[earlier][1] for i, later in enumerate(order) for earlier in order[i + 1:]
                 if at[later][1] > at[earlier][1]]
    assert passed_by and max(passed_by) <= AGE_S * MAX_HINT + 1e-9
    assert max(passed_by) > 0.5 * AGE_S * MAX_HINT   # the bound is approached: the test is not vacuous


def test_no_slot_is_left_free_while_a_waiter_waits_requests_from_many_threads(tmp_path):
    """As the client does: 24 threads each send requests (random hints, holds, some given up while
    waiting) to one background loop; 4 slots. At every release and every 0.5 ms the loop checks that a
    slot is free only when no live waiter is queued, and the limit is never exceeded."""
    lim = EndpointLimiter("http://fleet/v1", 4, tmp_path)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    bad: list[str] = []
    holding = [0]
    counts = {"served": 0, "gave_up": 0, "checks": 0}

    def check(where: str) -> None:
        counts["checks"] += 1
        live = sum(1 for _, _, f in lim._waiters if not f.done())
        if live and lim.in_flight_here < lim.limit:
            bad.append(f"{where}: {live} waiting, {lim.in_flight_here} of {lim.limit} slots held")
        if holding[0] > lim.limit or lim.in_flight_here > lim.limit:
            bad.append(f"{where}: over the limit")

    async def request(hint: int, hold: float, patience: float | None) -> None:
        try:
            slot = await asyncio.wait_for(lim.acquire(hint), patience)
        except asyncio.TimeoutError:
            counts["gave_up"] += 1
            check("gave up")
            return
        holding[0] += 1
        check("granted")
        await asyncio.sleep(hold)
        holding[0] -= 1
        lim.release(slot)
        counts["served"] += 1
        check("released")

    async def checker() -> None:
        while True:
            check("timer")
            await asyncio.sleep(0.0005)

    def background() -> None:
        asyncio.set_event_loop(loop)
        task = loop.create_task(checker())
        loop.call_soon(ready.set)
        loop.run_forever()
        task.cancel()

    def client(seed: int) -> None:
        rng = random.Random(seed)
        expect(rng.randrange(200))
        for _ in range(40):
            hint = take_hint()
            patience = rng.uniform(0.0005, 0.01) if rng.random() < 0.1 else None
            asyncio.run_coroutine_threadsafe(request(hint, rng.uniform(0, 0.003), patience), loop).result(60)

    bg = threading.Thread(target=background)
    bg.start()
    ready.wait(10)
    threads = [threading.Thread(target=client, args=(s,)) for s in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    loop.call_soon_threadsafe(loop.stop)
    bg.join(10)
    loop.close()
    lim.close()
    assert not bad, bad[:5]
    assert counts["served"] + counts["gave_up"] == 24 * 40 and counts["served"] > 24 * 30
    assert counts["gave_up"] > 0 and counts["checks"] > 1000


def test_a_thread_hint_counts_down_with_the_requests_sent():
    expect(5)
    assert take_hint(3) == 5 and take_hint(1) == 2 and take_hint(2) == 1 and take_hint() == 0
    expect(0)
    assert take_hint() == 0


def test_the_client_gives_each_request_the_hint_of_its_thread(settings):
    """The chain runner's `expect` reaches the backend as `BackendCall.priority` (the backends pass it to
    the limiter); a thread that set none sends 0 (no hint: the FIFO of before)."""
    backend = ScriptedBackend({"test.note": "ok"})
    client = LLMClient(settings, backends={"smollm2": backend})

    def req(k: int) -> LLMRequest:
        return LLMRequest(role="test.note", model="smollm2", messages=[{"role": "user", "content": f"q{k}"}])

    def conversation() -> None:
        expect(7)
        client.complete_many([req(1), req(2)])
        client.complete(req(3))

    t = threading.Thread(target=conversation)
    t.start()
    t.join(30)
    other = threading.Thread(target=lambda: client.complete(req(4)))
    other.start()
    other.join(30)
    got = {c.messages[0]["content"]: c.priority for c in backend.calls}
    assert got == {"q1": 7, "q2": 7, "q3": 5, "q4": 0}
