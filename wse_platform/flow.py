"""Continuous request flow: each conversation asks its next question as soon as its answer is back.

A cell holds many independent conversations: the trajectories of a WSE cell, the episodes
of an NCP cell, the stories of a 100-Endings set. `each(client, items, fn)` runs
`fn(client, item)` for every item in its own thread, so item A's step 2 goes out while
item B still waits for its step 1; nothing waits for the slowest request of a phase. The
client is shared (one cache, one accounting, one in-flight limit per endpoint: the
backends' semaphores and the client's limiter queue the requests, not this module), and
results are returned in item order, so the rows of a cell do not depend on timing.

Backends that only pay off with whole batches (offline vLLM, `Backend.batch_only`) get the
old lock-step shape instead: a rendezvous collects the requests of every live item and
sends them as one `complete_many` once each live item is waiting for an answer.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

MAX_THREADS = int(os.environ.get("WSE_FLOW_THREADS", "256"))  # conversations in flight per call of `each`
BATCH_ONLY_BACKENDS = ("vllm",)  # runtimes whose throughput needs one big batch (offline continuous batching)


def batch_only(client: Any, models: Iterable[str | None]) -> bool:
    """Whether any of `models` runs on a backend that wants whole batches (see the module doc)."""
    get = getattr(client, "backend", None)
    if get is None:
        return False
    for m in models:
        if not m:
            continue
        try:
            b = get(m)
        except Exception:  # unknown model: the client reports it on the first request
            continue
        if getattr(b, "batch_only", None) or getattr(b, "name", "") in BATCH_ONLY_BACKENDS:
            return True
    return False


def warm(client: Any, models: Iterable[str | None]) -> None:
    """Build the backends (and open the cache) before threads race to do it twice."""
    get = getattr(client, "backend", None)
    for m in models:
        if m and get is not None:
            try:
                get(m)
            except Exception:
                pass  # reported with its fix by the first request
    if hasattr(type(client), "cache"):
        getattr(client, "cache")


def each(client: Any, items: Sequence[T], fn: Callable[[Any, T], R], *, models: Iterable[str | None] = (),
         batched: bool | None = None, on_done: Callable[[int, int], None] | None = None) -> list[R]:
    """`[fn(client, item) for item in items]`, every item in flight at once (results in item order).

    The first exception (in item order) is raised once every item has finished, so what the
    other items already paid for is kept (cached and recorded) before the cell fails."""
    items = list(items)
    models = list(models)
    if len(items) <= 1:
        return [fn(client, it) for it in items]
    warm(client, models)
    if batched is None:
        batched = batch_only(client, models)
    proxy: Any = _Rendezvous(client, live=len(items)) if batched else client
    done = [0]
    lock = threading.Lock()

    def run(item: T) -> R:
        try:
            return fn(proxy, item)
        finally:
            if batched:
                proxy.leave()
            if on_done is not None:
                with lock:
                    done[0] += 1
                    n = done[0]
                on_done(n, len(items))

    # batched: every item has its thread, so the rendezvous knows who is still to ask
    workers = len(items) if batched else max(1, min(len(items), MAX_THREADS))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="wse-flow") as pool:
        futures = [pool.submit(run, it) for it in items]
        errors = [f.exception() for f in futures]
    for err in errors:
        if err is not None:
            raise err
    return [f.result() for f in futures]


class _Rendezvous:
    """A client stand-in that merges the requests of all live items into one `complete_many`."""

    def __init__(self, client: Any, live: int):
        self._client = client
        self._cond = threading.Condition()
        self._live = live  # items not yet finished
        self._waiting: list[tuple[list, dict]] = []  # (requests, slot for the results)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def leave(self) -> None:
        with self._cond:
            self._live -= 1
            self._maybe_dispatch()

    def complete(self, req):
        return self.complete_many([req])[0]

    def complete_many(self, reqs: list) -> list:
        slot: dict = {}
        with self._cond:
            self._waiting.append((list(reqs), slot))
            self._maybe_dispatch()
            while "results" not in slot and "error" not in slot:
                self._cond.wait()
        if "error" in slot:
            raise slot["error"]
        return slot["results"]

    def _maybe_dispatch(self) -> None:
        """Called with the lock held: once every live item waits, the last one to arrive sends the batch."""
        if not self._waiting or len(self._waiting) < self._live:
            return
        batch, self._waiting = self._waiting, []
        self._cond.release()
        try:
            flat = [r for reqs, _ in batch for r in reqs]
            try:
                results = self._client.complete_many(flat)
            except BaseException as err:  # every waiter sees the infrastructure error
                for _, slot in batch:
                    slot["error"] = err
            else:
                pos = 0
                for reqs, slot in batch:
                    slot["results"] = results[pos:pos + len(reqs)]
                    pos += len(reqs)
        finally:
            self._cond.acquire()
            self._cond.notify_all()
