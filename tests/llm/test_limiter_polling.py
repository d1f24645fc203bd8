"""A process waiting for an endpoint slot that other processes hold scans the slot files less often
the longer scans find none (limiter.py: POLL_S, backing off to POLL_MAX_S). Before, it scanned every
3 ms: with 256 slots held elsewhere each scan is 256 `flock` calls, ~0.5 ms of CPU, so a waiting
process spent ~17 % of a core waiting (issue 24 item 4)."""
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
lim = EndpointLimiter("http://fleet/v1", 8, Path(sys.argv[1]))
assert all(lim.try_acquire() is not None for _ in range(8))
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_waiting_for_slots_held_by_another_process_backs_off(tmp_path, monkeypatch):
    hold_s = 0.8
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), str(hold_s)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    try:
        assert holder.stdout.readline().strip() == "held"
        lim = EndpointLimiter("http://fleet/v1", 8, tmp_path)
        calls, slept = [], []
        real, real_sleep = limiter_mod.fcntl.flock, asyncio.sleep
        monkeypatch.setattr(limiter_mod.fcntl, "flock", lambda fd, op: (calls.append(op), real(fd, op))[1])

        async def sleep(delay: float, *args):
            slept.append(delay)
            return await real_sleep(delay, *args)
        monkeypatch.setattr(limiter_mod.asyncio, "sleep", sleep)

        async def wait() -> tuple[int, float]:
            t0 = time.monotonic()
            slot = await lim.acquire()
            return slot, time.monotonic() - t0

        slot, waited = asyncio.run(wait())
        lim.release(slot)
    finally:
        holder.kill()
        holder.wait()
    assert waited >= 0.2 and len(slept) >= 4               # it did wait for the other process
    # every scan that found nothing tried all 8 slots (acquire's own try, then one scan per sleep, then
    # the scan that found the freed slot); after empty scans the poller waits 6, then 12 ms, not 3
    assert 8 * (len(slept) + 1) < sum(1 for op in calls if op & limiter_mod.fcntl.LOCK_NB) <= 8 * (len(slept) + 2)
    assert slept[:3] == [0.006, 0.012, 0.012] and set(slept[3:]) == {0.012}, slept[:6]
