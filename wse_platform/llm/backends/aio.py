"""The one background asyncio loop of the HTTP backends (async clients must stay on one loop), and
the batch runner both use on it."""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()


def background_loop() -> asyncio.AbstractEventLoop:
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="wse-llm-loop", daemon=True).start()
            _LOOP = loop
        return _LOOP


def run_batch(calls: Sequence[Any], on_result: Callable[[int, Any], None] | None,
              call_one: Callable[[Any], Awaitable[Any]]) -> list[Any]:
    """Every call at once on the background loop (`call_one(call)` each); `on_result(i, response)` as
    each one finishes; the responses in input order."""
    async def batch() -> list[Any]:
        async def run(i: int, call: Any) -> Any:
            resp = await call_one(call)
            if on_result is not None:
                on_result(i, resp)
            return resp

        if len(calls) == 1:
            return [await run(0, calls[0])]
        return list(await asyncio.gather(*(run(i, c) for i, c in enumerate(calls))))

    return asyncio.run_coroutine_threadsafe(batch(), background_loop()).result()
