"""Waiting for an endpoint slot is cheap, and what the limiter promises still holds (limiter.py).

Before, a waiting process tried every slot's lock on each look (every 3 ms, backing off to 12 ms
on its own empty looks): with 256 slots held elsewhere each look was 256 `flock` calls, ~0.5 ms of
CPU; 10 processes that all wait spent 0.4-0.7 of a core on it (issue 24 item 4,
`bench/limiter_cost.py`). Now a look reads the shared hint map (one byte per slot) and tries
only the locks it marks free; a full look at every lock runs at most every REPAIR_S per endpoint and
frees the slots of holders that died."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

from wse_platform.llm import limiter as limiter_mod
from wse_platform.llm.limiter import EndpointLimiter

ROOT = Path(__file__).resolve().parents[2]
HOLDER = r"""
import sys, time
from pathlib import Path
from wse_platform.llm.limiter import EndpointLimiter
lim = EndpointLimiter("http://fleet/v1", int(sys.argv[3]), Path(sys.argv[1]))
assert all(lim.try_acquire() is not None for _ in range(int(sys.argv[3])))
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""
# a process whose tasks keep taking a slot for `hold` seconds until `until` (wall clock); prints how many it got
TAKER = r"""
import asyncio, sys, time
from pathlib import Path
from wse_platform.llm.limiter import EndpointLimiter
folder, limit, tasks, hold, start, until = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
lim = EndpointLimiter("http://fleet/v1", limit, Path(folder))
got = [0]
async def task():
    while time.time() < until:
        slot = await lim.acquire()
        got[0] += 1
        await asyncio.sleep(hold)
        lim.release(slot)
async def main():
    await asyncio.sleep(max(0.0, start - time.time()))
    await asyncio.gather(*(task() for _ in range(tasks)))
asyncio.run(main())
print(got[0], getattr(lim, "handoffs", 0), flush=True)
"""


def _env() -> dict:
    return {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}


def _holder(folder: Path, hold_s: float, n: int = 8) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder), str(hold_s), str(n)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True, env=_env())
    assert holder.stdout.readline().strip() == "held"
    return holder


def _count_nonblocking_flocks(monkeypatch) -> list:
    calls, real = [], limiter_mod.fcntl.flock
    monkeypatch.setattr(limiter_mod.fcntl, "flock", lambda fd, op: (calls.append(op), real(fd, op))[1])
    return calls


def _timed_acquire(lim: EndpointLimiter) -> tuple[int, float]:
    async def wait() -> tuple[int, float]:
        t0 = time.monotonic()
        slot = await lim.acquire()
        return slot, time.monotonic() - t0
    return asyncio.run(wait())


def test_waiting_for_slots_held_by_another_process_tries_few_locks(tmp_path, monkeypatch):
    holder = _holder(tmp_path, 0.8)   # holds all 8 slots, then exits without releasing them
    try:
        lim = EndpointLimiter("http://fleet/v1", 8, tmp_path)
        calls = _count_nonblocking_flocks(monkeypatch)
        slot, waited = _timed_acquire(lim)
        lim.release(slot)
    finally:
        holder.kill()
        holder.wait()
    tries = sum(1 for op in calls if op & limiter_mod.fcntl.LOCK_NB)
    assert waited >= 0.5 and lim.scans >= 10          # it waited, looking many times
    # only the full looks (at most every REPAIR_S) try the 8 held locks; before, every look did (8 x scans)
    repairs_at_most = waited / 0.25 + 2   # REPAIR_S
    assert tries <= 8 * repairs_at_most + 2 < 8 * lim.scans / 3, (tries, lim.scans)


def test_a_slot_of_a_killed_holder_comes_back(tmp_path):
    holder = _holder(tmp_path, 60, n=4)   # all 4 slots held, marked held in the hint map
    lim = EndpointLimiter("http://fleet/v1", 4, tmp_path)
    assert lim.try_acquire() is None
    holder.kill()  # SIGKILL: no release, the bytes still say held; the kernel dropped the locks
    holder.wait()

    async def take_all() -> tuple[list[int], float]:
        t0 = time.monotonic()
        slots = await asyncio.gather(*(lim.acquire() for _ in range(4)))
        return sorted(slots), time.monotonic() - t0
    slots, waited = asyncio.run(take_all())
    assert slots == [0, 1, 2, 3] and waited < 0.25 + 1.0   # REPAIR_S + margin


def test_limits_of_two_models_share_the_low_slots(tmp_path):
    big, small = EndpointLimiter("http://fleet/v1", 4, tmp_path), EndpointLimiter("http://fleet/v1", 2, tmp_path)
    a = [small.try_acquire(), small.try_acquire()]
    assert sorted(a) == [0, 1] and small.try_acquire() is None      # the small limit: 2
    b = [big.try_acquire(), big.try_acquire()]
    assert sorted(b) == [2, 3] and big.try_acquire() is None        # together: never more than 4
    big.release(b[0])
    assert small.try_acquire() is None                              # slot 2 or 3 is not the small model's
    small.release(a[0])
    assert big.try_acquire() == a[0]


def test_a_lone_process_hands_released_slots_to_its_own_waiters(tmp_path, monkeypatch):
    lim = EndpointLimiter("http://fleet/v1", 2, tmp_path)
    calls = _count_nonblocking_flocks(monkeypatch)

    async def run() -> int:
        async def one() -> None:
            async with lim.slot():
                await asyncio.sleep(0.01)
        await asyncio.gather(*(one() for _ in range(40)))
        return lim.in_flight_here
    assert asyncio.run(run()) == 0
    # 40 requests through 2 slots: released slots went straight to the next waiter, without a lock call
    assert sum(1 for op in calls if op & limiter_mod.fcntl.LOCK_NB) <= 10


def test_two_waiting_processes_share_the_slots_fairly(tmp_path):
    """Demand (2 x 6 tasks) exceeds the limit (8), each process alone would fit: the slots go to both at
    about the same rate. Before, a process whose tasks all held slots took a slot again as soon as it
    released one (straight, or by looking first right after its own release), so it kept all 6 and the
    other got the rest (and with a back-off on a process's own empty looks, the loser looked less often)."""
    start = time.time() + 1.5
    until = start + 2.0
    procs = [subprocess.Popen([sys.executable, "-c", TAKER, str(tmp_path), "8", "6", "0.03", str(start), str(until)],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True, env=_env()) for _ in range(2)]
    out = [p.communicate(timeout=60)[0].split() for p in procs]
    got = [int(o[0]) for o in out]
    assert all(p.returncode == 0 for p in procs)
    assert min(got) >= 0.35 * sum(got), got   # before: ~0.23 (one process kept its 6 slots: [120, 396])
    assert sum(got) >= 0.5 * 8 * 2.0 / 0.03, got     # the 8 slots were kept busy most of the time


def test_two_processes_on_one_waiting_table_entry_both_count(tmp_path, monkeypatch):
    """The waiting table is indexed by pid % 128; two waiting processes whose pids collide must still
    see each other (else both think they wait alone: they keep their slots and skip the cadence)."""
    a, b = EndpointLimiter("http://fleet/v1", 4, tmp_path), EndpointLimiter("http://fleet/v1", 4, tmp_path)
    pid = [5]
    monkeypatch.setattr(limiter_mod.os, "getpid", lambda: pid[0])
    now = time.monotonic()
    assert a._look_waiting(now) == 0
    pid[0] = 5 + 128
    assert b._look_waiting(now) == 1 and b._waiting_elsewhere(now) == 1
    pid[0] = 5
    assert a._look_waiting(now + 0.001) == 1 and a._waiting_elsewhere(now) == 1
    assert a._look_waiting(now + limiter_mod.WAITING_S + 0.01) == 0   # b stopped looking: its stamp is stale
