"""One in-flight limit per endpoint, across threads, runs and processes of this machine.

A server with 64 request slots must never see 8 runs x 64 requests, and three judge models on
one server share its slots. The limit lives in the file system, so it needs no daemon and
survives crashes: an endpoint (its base URL; a model with several endpoints: the set) owns a
folder of slot files `0 .. limit-1` under `WSE_SLOTS_DIR` (default `<tmp>/wse-platform-slots-<uid>`).
A request in flight holds an exclusive `flock` on one slot file. The kernel drops the lock when
the holder closes it or dies (`kill -9` included), so a crashed run never leaks a slot.

A model asking for a limit of n uses slots `0 .. n-1`: two models with limits 64 and 32 on
one server never exceed 64 together, and the second never more than 32.

Waiting costs no system calls per waiter: waiters queue in the process, and one poller task
per (endpoint, loop) scans the slot files while anyone waits, every POLL_S after a scan that found
a free slot, backing off to POLL_MAX_S while scans find none (a scan of 256 slots held by other
processes costs ~0.5 ms of CPU: every 3 ms that was ~17 % of a core per waiting process); a freed
slot is released to every process (not handed to a local waiter), so concurrent runs share fairly.
"""
from __future__ import annotations

import asyncio
import collections
import fcntl
import hashlib
import os
import tempfile
import threading
import weakref
from pathlib import Path

POLL_S = 0.003       # between scans while they find free slots
POLL_MAX_S = 0.012   # between scans after several found none (doubling from POLL_S)


def slots_dir() -> Path:
    env = os.environ.get("WSE_SLOTS_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / f"wse-platform-slots-{os.getuid()}"


class EndpointLimiter:
    """At most `limit` requests in flight to `key` from all processes that use the same folder."""

    def __init__(self, key: str, limit: int, directory: Path | None = None):
        self.key, self.limit = key, max(1, int(limit))
        folder = (directory or slots_dir()) / hashlib.sha256(key.encode()).hexdigest()[:20]
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._fds = [os.open(folder / str(i), os.O_RDWR | os.O_CREAT, 0o600) for i in range(self.limit)]
        self._held: set[int] = set()
        self._next = 0
        self._lock = threading.Lock()
        self._waiters: collections.deque[asyncio.Future] = collections.deque()
        self._poller: asyncio.Task | None = None
        self.scans = 0   # slot scans by the poller (tests: waiting costs few)

    def try_acquire(self) -> int | None:
        """A free slot's index (now held by the caller), or None."""
        with self._lock:
            n = self.limit
            for k in range(n):
                i = (self._next + k) % n
                if i in self._held:
                    continue
                try:
                    fcntl.flock(self._fds[i], fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                self._held.add(i)
                self._next = (i + 1) % n
                return i
            return None

    def release(self, slot: int) -> None:
        with self._lock:
            if slot in self._held:
                self._held.discard(slot)
                fcntl.flock(self._fds[slot], fcntl.LOCK_UN)

    @property
    def in_flight_here(self) -> int:
        return len(self._held)

    async def acquire(self) -> int:
        if not self._waiters:
            slot = self.try_acquire()
            if slot is not None:
                return slot
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll())
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(fut.result())
            raise

    async def _poll(self) -> None:
        empty = 0   # scans in a row that found no free slot
        while self._waiters:
            while self._waiters and self._waiters[0].done():
                self._waiters.popleft()
            found = False
            while self._waiters:
                self.scans += 1
                slot = self.try_acquire()
                if slot is None:
                    break
                found = True
                fut = self._waiters.popleft()
                if fut.done():
                    self.release(slot)
                else:
                    fut.set_result(slot)
            if self._waiters:
                empty = 0 if found else empty + 1
                await asyncio.sleep(min(POLL_S * 2 ** min(empty, 8), POLL_MAX_S))

    def slot(self) -> "_Slot":
        """`async with limiter.slot(): ...` holds one slot for the block."""
        return _Slot(self)

    def close(self) -> None:
        with self._lock:
            for fd in self._fds:
                os.close(fd)
            self._fds, self._held = [], set()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class _Slot:
    __slots__ = ("limiter", "index")

    def __init__(self, limiter: EndpointLimiter):
        self.limiter, self.index = limiter, None

    async def __aenter__(self) -> int:
        self.index = await self.limiter.acquire()
        return self.index

    async def __aexit__(self, *exc: object) -> None:
        if self.index is not None:
            self.limiter.release(self.index)
            self.index = None


# weak: a limiter (and its open slot files) lives as long as a backend uses it
_REGISTRY: "weakref.WeakValueDictionary[tuple[str, int, str], EndpointLimiter]" = weakref.WeakValueDictionary()
_REGISTRY_LOCK = threading.Lock()


def limiter_for(key: str, limit: int) -> EndpointLimiter:
    """The process's limiter for an endpoint and limit (shared by every model and client using it)."""
    folder = str(slots_dir())
    with _REGISTRY_LOCK:
        lim = _REGISTRY.get((key, limit, folder))
        if lim is None:
            lim = _REGISTRY[(key, limit, folder)] = EndpointLimiter(key, limit, Path(folder))
        return lim
