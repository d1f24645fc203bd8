"""One in-flight limit per endpoint, across threads, runs and processes of this machine.

A server with 64 request slots must never see 8 runs x 64 requests, and three judge models on
one server share its slots. The limit lives in the file system, so it needs no daemon and
survives crashes: an endpoint (its base URL; a model with several endpoints: the set) owns a
folder of slot files `0 .. limit-1` under `WSE_SLOTS_DIR` (default `<tmp>/wse-platform-slots-<uid>`).
A request in flight holds an exclusive `flock` on one slot file. The kernel drops the lock when
the holder closes it or dies (`kill -9` included), so a crashed run never leaks a slot.

A model asking for a limit of n uses slots `0 .. n-1`: two models with limits 64 and 32 on
one server never exceed 64 together, and the second never more than 32.

Finding a free slot reads a shared hint map instead of trying every lock. The folder's `hints`
file, mapped into every process, has one byte per slot: a holder sets it to 1 after taking the
lock and back to 0 before dropping it, so a 0 marks a slot that is free (or is changing hands),
and a look for a free slot is one `find` over the bytes plus one `flock` per candidate, not 256
`flock` calls (~0.5 ms of CPU). The locks stay the only authority (the limit cannot be exceeded
whatever the bytes say); a byte left at 1 by a holder that died is repaired by a full look at
every slot (try each lock marked held; one that succeeds is marked free) at most every
REPAIR_S, done by whichever waiting process finds the shared "last repair" time old, so a slot
of a killed run comes back within REPAIR_S of someone waiting for it.

Waiting costs no system calls per waiter: waiters queue in the process, and one poller task per
(endpoint, loop) looks at the map while anyone waits. Each poller stamps its process in the map's
waiting table at every look, and all of them look at one cadence: POLL_S (POLL_IDLE_S while no
process released a slot of the endpoint for IDLE_AFTER_S; each release stamps the time) times the
number of processes waiting, up to POLL_MAX_S, jittered +-50 %: together they look about every
POLL_S however many they are (the process with the best waiter, below, looks at POLL_S). Fairness:
  - a request takes a free slot straight away only when no process waits (else it queues), and a
    poller that starts while others wait makes its first look at the cadence too: otherwise a
    process whose tasks all hold slots takes each slot back as it releases it and keeps them all;
  - the cadence does not depend on a process's own luck (a back-off on its own empty looks let the
    processes that happened to win look four times as often as the others);
  - a slot released here goes straight to a waiter here only when no other process waits or this
    process's best waiter is the best of all (below).

Priority: a request may carry a hint, the number of requests its
conversation (an NCP episode, a WSE trajectory, a 100-Endings story) still expects, this one included
(`expect` in the chain runner's thread; the client takes it with `take_hint` and passes it to the
backends, which pass it to `acquire`). Whichever way a slot comes to this process (its poller's look,
or a release here handed straight on), it goes to the waiter with the smallest key = the moment it
queued - AGE_S x min(hint, MAX_HINT): the conversations with the most requests ahead go first, so the
end of a run is not left to the longest ones; FIFO among equal keys and for requests without a hint
(without hints the order is the FIFO of before); no waiter is passed by one that queued more than
AGE_S x MAX_HINT = 4 s after it.

One order across processes: keys are CLOCK_MONOTONIC based, so they compare across processes. At each
look a process publishes its best waiter's key and its number of waiters next to its stamp in the map;
a look that finds free slots leaves a slot released less than LEAVE_S ago (its release time is stamped
in the map) to the processes whose best key is better than this process's by more than MARGIN_S (as many
slots as they have waiters), and takes the others. So a freed slot goes to the best waiter of all
processes, give or take MARGIN_S and the staleness of one look: a slot is never left free longer than
LEAVE_S while anyone waits; a process whose stamp is older than WAITING_S (it stopped waiting, or died)
is not waited for; nobody starves (a key ages as above); and the locks alone decide who holds a slot.
"""
from __future__ import annotations

import asyncio
import errno
import fcntl
import hashlib
import heapq
import itertools
import mmap
import os
import random
import struct
import tempfile
import threading
import time
import weakref
from pathlib import Path

POLL_S = 0.003        # between looks at the hint map while slots are being released ...
POLL_IDLE_S = 0.012   # ... or while no slot of the endpoint was released for IDLE_AFTER_S,
POLL_MAX_S = 0.03     # times the number of processes waiting, up to this
IDLE_AFTER_S = 0.1
REPAIR_S = 0.25       # a full look at every lock marked held, at most this often per endpoint
WAITING_S = 0.1       # a process whose stamp in the waiting table is older is not waiting
_WAITING = 128        # entries of the waiting table: (pid, last look), from pid % _WAITING on
_HEAD = 64 + 16 * _WAITING   # hint file: [last release, last repair, last look: f64] pad, waiting table, slot bytes
HINT_SLOTS = 1 << 16  # slots with a hint byte (slots beyond: found by trying their locks)
_KEYS = _HEAD + HINT_SLOTS    # then per waiting-table entry (its process's best key, its waiters) ...
STAMPED = 4096                # ... and per slot below this, when it was last released
_FREED = _KEYS + 16 * _WAITING
_SIZE = _FREED + 8 * STAMPED
MARGIN_S = 0.05       # a slot is left to another process only for a key better by more than this ...
LEAVE_S = 0.02        # ... and only for this long after its release (a slot is never left free longer)
_STAMP = struct.Struct("d")
_ENTRY = struct.Struct("dd")
_TABLE = struct.Struct(f"{2 * _WAITING}d")   # also the keys table
AGE_S = 0.02          # a waiter whose conversation expects r more requests counts as queued AGE_S x r earlier,
MAX_HINT = 200        # r up to this: a waiter is never passed by one that queued > AGE_S x MAX_HINT = 4 s later
_HINT = threading.local()


def expect(n: int) -> None:
    """The calling thread's conversation expects `n` more requests (its next one included): the priority
    of its next requests (`take_hint`). A chain runner calls it at the start of a conversation (0: none)."""
    _HINT.left = max(0, int(n))


def hint_left() -> int:
    """The requests the calling thread's conversation still expects (0: no hint)."""
    return getattr(_HINT, "left", 0)


def take_hint(k: int = 1) -> int:
    """The priority of the calling thread's next `k` requests (sent together): the requests its
    conversation still expects; counts them as sent. 0 without a hint."""
    left = hint_left()
    if left:
        _HINT.left = max(0, left - k)
    return left


def slots_dir() -> Path:
    env = os.environ.get("WSE_SLOTS_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / f"wse-platform-slots-{os.getuid()}"


def _hint_map(folder: Path) -> mmap.mmap:
    """The endpoint's shared hint map (every process sizes it the same: it never shrinks). Its blocks are
    allocated up front: a write into a hole of a mapped file on a full disk would kill the process."""
    fd = os.open(folder / "hints", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if os.fstat(fd).st_size < _SIZE:
            try:
                os.posix_fallocate(fd, 0, _SIZE)
            except OSError as err:
                if err.errno not in (errno.EOPNOTSUPP, errno.EINVAL, getattr(errno, "ENOTSUP", -1)):
                    raise
                os.ftruncate(fd, _SIZE)
        return mmap.mmap(fd, _SIZE)
    finally:
        os.close(fd)


class EndpointLimiter:
    """At most `limit` requests in flight to `key` from all processes that use the same folder."""

    def __init__(self, key: str, limit: int, directory: Path | None = None):
        self.key, self.limit = key, max(1, int(limit))
        folder = (directory or slots_dir()) / hashlib.sha256(key.encode()).hexdigest()[:20]
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._fds = [os.open(folder / str(i), os.O_RDWR | os.O_CREAT, 0o600) for i in range(self.limit)]
        self._map = _hint_map(folder)
        self._hinted = min(self.limit, HINT_SLOTS)
        self._held: set[int] = set()
        self._next = 0
        self._lock = threading.Lock()
        self._waiters: list[tuple[float, int, asyncio.Future]] = []   # heap of (key, arrival, waiter)
        self._seq = itertools.count()
        self._poller: asyncio.Task | None = None
        self._entry = -1   # this process's entry in the waiting table
        self._others = 0   # other processes waiting for this endpoint (as of this process's last look)
        self._owed = 0     # their waiters whose best key is clearly better than this process's (same look)
        self._best_other = float("inf")   # their best key (same look)
        self._first = True  # this process's best key is the best of all (same look)
        self.scans = 0     # looks by the poller (tests: waiting costs few)
        self.handoffs = 0  # slots released here straight to a waiter here
        self.repairs = 0   # full looks at every lock marked held

    def _take(self, i: int) -> bool:
        try:
            fcntl.flock(self._fds[i], fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        self._held.add(i)
        if i < HINT_SLOTS:
            self._map[_HEAD + i] = 1
        return True

    def try_acquire(self, leave: int = 0) -> int | None:
        """A free slot's index (now held by the caller), or None: tries the slots the map marks free,
        from after the last slot this process took (slots beyond the map: every one); the first `leave`
        of them released less than LEAVE_S ago are left to other processes."""
        with self._lock:
            m, n, base = self._map, self._hinted, _HEAD
            young = time.monotonic() - LEAVE_S
            for lo, hi in ((self._next, n), (0, min(self._next, n))):
                p = m.find(b"\0", base + lo, base + hi)
                while p >= 0:
                    i = p - base
                    if leave and i < STAMPED and _STAMP.unpack_from(m, _FREED + 8 * i)[0] > young:
                        leave -= 1
                    elif i not in self._held and self._take(i):
                        self._next = (i + 1) % n
                        return i
                    p = m.find(b"\0", p + 1, base + hi)
            for i in range(n, self.limit):
                if i not in self._held and self._take(i):
                    return i
            return None

    def release(self, slot: int) -> None:
        if self._waiters and self._best_here() and self._hand_off(slot):
            return
        with self._lock:
            if slot in self._held:
                self._held.discard(slot)
                now = time.monotonic()
                if slot < HINT_SLOTS:
                    self._map[_HEAD + slot] = 0
                if slot < STAMPED:
                    _STAMP.pack_into(self._map, _FREED + 8 * slot, now)
                _STAMP.pack_into(self._map, 0, now)
                fcntl.flock(self._fds[slot], fcntl.LOCK_UN)

    def _best_here(self) -> bool:
        """This process's best waiter is the best of all processes' (as of its last look)."""
        return not self._others or self._waiters[0][0] <= self._best_other

    def _elsewhere(self, now: float, mine: float, skip: int, t: tuple | None = None) -> tuple[int, float, int]:
        """The other processes waiting (fresh stamps in the waiting table `t`; entry `skip` is this one's): how
        many, their best key, and how many waiters those whose best key beats `mine` by more than MARGIN_S have."""
        t = t or _TABLE.unpack_from(self._map, 64)
        old, pid = now - WAITING_S, float(os.getpid())
        n, best, owed = 0, float("inf"), 0
        for k in [k for k, look in enumerate(t[1::2]) if look > old]:
            if k != skip and t[2 * k] != pid:
                key, waiters = _ENTRY.unpack_from(self._map, _KEYS + 16 * k)
                n, best = n + 1, min(best, key)
                if key < mine - MARGIN_S:
                    owed += int(waiters)
        return n, best, owed

    def _hand_off(self, slot: int) -> bool:
        """Give a slot released here to the first waiter here, by key (it is the best of all processes')."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        with self._lock:
            if slot not in self._held:
                return False
            while self._waiters:
                fut = self._waiters[0][2]
                if fut.done():
                    heapq.heappop(self._waiters)
                    continue
                if fut.get_loop() is not loop:
                    return False
                heapq.heappop(self._waiters)
                fut.set_result(slot)
                self.handoffs += 1
                return True
            return False

    def _look_waiting(self, now: float) -> int:
        """Stamp this process as waiting in the shared table with its best waiter's key; the number of
        other processes waiting (and `_owed`, `_first`: see `_elsewhere`).
        Its entry: the first from pid % _WAITING on that is its own or stale (another process's fresh
        stamp found there later, after both took it at once: it moves on)."""
        pid = float(os.getpid())
        t = _TABLE.unpack_from(self._map, 64)
        old = now - WAITING_S
        e = self._entry
        if e < 0 or (t[2 * e] != pid and t[2 * e + 1] > old):
            first = os.getpid() % _WAITING
            for k in range(_WAITING):
                e = (first + k) % _WAITING
                if t[2 * e] == pid or t[2 * e + 1] <= old:
                    break
            self._entry = e
        mine = self._waiters[0][0] if self._waiters else now
        _ENTRY.pack_into(self._map, _KEYS + 16 * e, mine, float(len(self._waiters)))
        _ENTRY.pack_into(self._map, 64 + 16 * e, pid, now)
        _STAMP.pack_into(self._map, 16, now)   # the latest look of any process
        others, self._best_other, self._owed = self._elsewhere(now, mine, e, t)
        self._first = mine <= self._best_other
        return others

    def _waiting_elsewhere(self, now: float) -> int:
        """How many other processes are waiting for a slot of this endpoint (their stamps are fresh)."""
        if _STAMP.unpack_from(self._map, 16)[0] <= now - WAITING_S:   # nobody looked lately: no need to read
            return 0
        return self._elsewhere(now, now, -1)[0]

    def repair(self) -> int:
        """Mark free every slot whose byte says held but whose lock nobody holds (its holder died or
        closed it); returns how many."""
        with self._lock:
            self.repairs += 1
            _STAMP.pack_into(self._map, 8, time.monotonic())
            m, freed = self._map, 0
            for i in range(self._hinted):
                if m[_HEAD + i] and i not in self._held and self._take(i):
                    self._held.discard(i)
                    m[_HEAD + i] = 0
                    fcntl.flock(self._fds[i], fcntl.LOCK_UN)
                    freed += 1
            if freed:
                _STAMP.pack_into(m, 0, time.monotonic())
            return freed

    @property
    def in_flight_here(self) -> int:
        return len(self._held)

    async def acquire(self, priority: int = 0) -> int:
        """A slot; `priority`: the requests the caller's conversation still expects (the module doc)."""
        # straight to a free slot only when nobody waits, here or elsewhere: a process whose tasks take a
        # slot as soon as they release one would keep every slot it ever got while others wait
        now = time.monotonic()
        if not self._waiters and not self._waiting_elsewhere(now):
            slot = self.try_acquire()
            if slot is not None:
                return slot
        fut = asyncio.get_running_loop().create_future()
        key = now - AGE_S * min(priority, MAX_HINT) if priority > 0 else now
        heapq.heappush(self._waiters, (key, next(self._seq), fut))
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll())
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(fut.result())
            raise

    def _pause(self, now: float) -> float:
        idle = now - _STAMP.unpack_from(self._map, 0)[0] > IDLE_AFTER_S
        # the process with the best waiter looks at POLL_S: a slot left to it (try_acquire) is not left long
        n = 0 if self._first else self._others
        return min((POLL_IDLE_S if idle else POLL_S) * (1 + n), POLL_MAX_S) * (0.5 + random.random())

    async def _poll(self) -> None:
        first = True
        while self._waiters:
            while self._waiters and self._waiters[0][2].done():
                heapq.heappop(self._waiters)
            now = time.monotonic()
            self._others = self._look_waiting(now)
            if first and self._others:
                # others wait: the first look comes at the common cadence too, not at once (a process
                # that queues right after releasing a slot would otherwise always look first and take it)
                first = False
                await asyncio.sleep(self._pause(now))
                continue
            first = False
            if now - _STAMP.unpack_from(self._map, 8)[0] >= REPAIR_S:
                self.repair()
            while self._waiters:
                self.scans += 1
                slot = self.try_acquire(self._owed)
                if slot is None:
                    break
                fut = heapq.heappop(self._waiters)[2]
                if fut.done():
                    self.release(slot)
                else:
                    fut.set_result(slot)
            if self._waiters:
                await asyncio.sleep(self._pause(now))
        self._others, self._owed, self._first = 0, 0, True
        if self._entry >= 0 and not self._map.closed:   # no longer waiting
            _ENTRY.pack_into(self._map, 64 + 16 * self._entry, float(os.getpid()), 0.0)

    def slot(self, priority: int = 0) -> "_Slot":
        """`async with limiter.slot(): ...` holds one slot for the block (`priority`: see `acquire`)."""
        return _Slot(self, priority)

    def close(self) -> None:
        with self._lock:
            for i in self._held:
                if i < HINT_SLOTS and not self._map.closed:
                    self._map[_HEAD + i] = 0
            for fd in self._fds:
                os.close(fd)
            self._fds, self._held = [], set()
            if not self._map.closed:
                self._map.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class _Slot:
    __slots__ = ("limiter", "index", "priority")

    def __init__(self, limiter: EndpointLimiter, priority: int = 0):
        self.limiter, self.index, self.priority = limiter, None, priority

    async def __aenter__(self) -> int:
        self.index = await self.limiter.acquire(self.priority)
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
