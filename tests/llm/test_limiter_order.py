"""One order across processes (limiter.py, issue 24): each waiting process publishes its best waiter's key
in the shared map; a process that finds a slot freed less than LEAVE_S ago leaves it to a process whose key
is better by more than MARGIN_S, and a slot released where the best waiter is goes straight to it. Before,
the keys ordered only one process's waiters: a freed slot went to whichever process looked first.
A stale entry (a process that stopped looking, or died) is ignored, and the locks still decide alone."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.llm.test_limiter_polling import _env
from tests.llm.test_limiter_priority import _fake_clock

from wse_platform.llm.limiter import _ENTRY, _KEYS, LEAVE_S, MARGIN_S, WAITING_S, EndpointLimiter

ROOT = Path(__file__).resolve().parents[2]
# holds every slot until `release_at` (monotonic, shared by the processes), then releases them
HOLDER = r"""
import sys, time
from pathlib import Path
from wse_platform.llm.limiter import EndpointLimiter
lim = EndpointLimiter("http://fleet/v1", int(sys.argv[2]), Path(sys.argv[1]))
held = [lim.try_acquire() for _ in range(int(sys.argv[2]))]
assert None not in held
print("held", flush=True)
time.sleep(max(0.0, float(sys.argv[3]) - time.monotonic()))
for s in held:
    lim.release(s)
"""
# `tasks` waiters with hint `hint` queue at `queue_at`; each holds its slot `hold` s; prints "grant release" per task
WAITER = r"""
import asyncio, sys, time
from pathlib import Path
from wse_platform.llm import limiter
limiter.LEAVE_S = 1.0   # a loaded test machine may schedule the better process late: no leak of the order here
folder, limit, tasks, hint, hold, queue_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
lim = limiter.EndpointLimiter("http://fleet/v1", limit, Path(folder))
async def task():
    slot = await lim.acquire(hint)
    t = time.monotonic()
    await asyncio.sleep(hold)
    lim.release(slot)
    return t, time.monotonic()
async def main():
    await asyncio.sleep(max(0.0, queue_at - time.monotonic()))
    return await asyncio.gather(*(task() for _ in range(tasks)))
for t0, t1 in asyncio.run(main()):
    print(t0, t1)
"""


def _popen(script: str, *args: object) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, env=_env())


def test_the_process_with_the_better_keys_gets_the_slots_and_the_limit_holds(tmp_path):
    """Process A queues 8 requests without a hint, then process B 8 with hint 200 (keys 4 s better); then
    the 2 slots are freed: B's 8 are served first (FIFO would serve A's first; on main the processes
    race for each freed slot: B's 8 first about never), and at most 2 are in flight at any moment."""
    t0 = time.monotonic() + 1.5   # the interpreters start first
    holder = _popen(HOLDER, tmp_path, 2, t0 + 0.6)
    assert holder.stdout.readline().strip() == "held"
    a = _popen(WAITER, tmp_path, 2, 8, 0, 0.02, t0)
    b = _popen(WAITER, tmp_path, 2, 8, 200, 0.02, t0 + 0.3)
    out = {name: p.communicate(timeout=60)[0].split() for name, p in (("a", a), ("b", b))}
    holder.communicate(timeout=60)
    assert a.returncode == b.returncode == holder.returncode == 0
    spans = [(float(x[i]), float(x[i + 1]), name) for name, x in out.items() for i in range(0, len(x), 2)]
    assert len(spans) == 16
    first = [name for *_, name in sorted(spans)[:8]]
    assert first == ["b"] * 8, sorted(spans)
    events = sorted([(s, 1) for s, _, _ in spans] + [(e, -1) for _, e, _ in spans])
    level = [0]
    for _, d in events:
        level.append(level[-1] + d)
    assert max(level) <= 2


def _publish(lim: EndpointLimiter, entry: int, pid: float, look: float, key: float, waiters: int) -> None:
    """Another process's entry in the waiting table: its pid, its last look, its best key, its waiters."""
    _ENTRY.pack_into(lim._map, 64 + 16 * entry, pid, look)
    _ENTRY.pack_into(lim._map, _KEYS + 16 * entry, key, float(waiters))


def test_a_slot_is_left_only_to_a_fresh_clearly_better_key_and_not_for_long(tmp_path, monkeypatch):
    clock = _fake_clock(monkeypatch)
    lim = EndpointLimiter("http://fleet/v1", 2, tmp_path)
    held = [lim.try_acquire(), lim.try_acquire()]
    lim._waiters = [(clock[0], 0, None)]        # this process's best waiter queued now
    _publish(lim, 3, 99999.0, clock[0], clock[0] - 1.0, 1)   # another process, 1 waiter, 1 s better
    lim.release(held[0])
    assert lim._look_waiting(clock[0]) == 1 and lim._owed == 1 and not lim._first
    assert lim.try_acquire(lim._owed) is None           # the freed slot is left to the better process
    clock[0] += LEAVE_S + 0.001
    _publish(lim, 3, 99999.0, clock[0], clock[0] - 1.0, 1)
    assert lim._look_waiting(clock[0]) == 1 and lim._owed == 1
    assert lim.try_acquire(lim._owed) == held[0]        # ... but not for longer than LEAVE_S
    lim.release(held[0])
    _publish(lim, 3, 99999.0, clock[0], clock[0] - MARGIN_S / 2, 1)   # better, but not clearly: no leaving
    assert lim._look_waiting(clock[0]) == 1 and lim._owed == 0 and not lim._first
    assert lim.try_acquire(lim._owed) == held[0]
    lim.release(held[0])
    _publish(lim, 3, 99999.0, clock[0], clock[0] - 1.0, 1)
    clock[0] += WAITING_S + 0.001                       # that process stopped looking (or died): stale
    assert lim._look_waiting(clock[0]) == 0 and lim._owed == 0 and lim._first
    assert lim.try_acquire(lim._owed) == held[0]
    lim._waiters = []
    lim.close()


def test_a_slot_released_where_the_best_waiter_is_goes_to_it(tmp_path, monkeypatch):
    """With others waiting, a release is handed to a waiter here only when this process's key is the best;
    before, never while another process waited."""
    clock = _fake_clock(monkeypatch)
    lim = EndpointLimiter("http://fleet/v1", 1, tmp_path)
    lim._waiters = [(clock[0] - 1.0, 0, None)]
    _publish(lim, 3, 99999.0, clock[0], clock[0], 5)
    lim._others = lim._look_waiting(clock[0])
    assert lim._others == 1 and lim._first and lim._best_here()
    _publish(lim, 3, 99999.0, clock[0], clock[0] - 2.0, 5)
    lim._others = lim._look_waiting(clock[0])
    assert not lim._best_here()
    lim._waiters = []
    lim.close()
