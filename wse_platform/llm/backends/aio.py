"""The one background asyncio loop of the HTTP backends (async clients must stay on one loop), the
batch runner both use on it, and what their chat-completion responses for one call add up to."""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from wse_platform.llm import trace

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
    tid = threading.get_ident()   # the caller's conversation, for bench/chain_gap.py (trace.py)

    async def batch() -> list[Any]:
        async def run(i: int, call: Any) -> Any:
            rec = trace.request(tid)
            resp = await call_one(call)
            if on_result is not None:
                on_result(i, resp)
            if rec is not None:
                trace.stamp("done")
                trace.write(rec)
            return resp

        if len(calls) == 1:
            return [await run(0, calls[0])]
        return list(await asyncio.gather(*(run(i, c) for i, c in enumerate(calls))))

    return asyncio.run_coroutine_threadsafe(batch(), background_loop()).result()


class Got:
    """What one or more chat-completion responses for one call returned (samples, finish reasons,
    reasoning, tokens; the endpoint and cost where the backend knows them)."""

    __slots__ = ("texts", "finish", "reasoning", "tokens_in", "tokens_out", "reasoning_tokens", "endpoint", "cost")

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.finish: list[str | None] = []
        self.reasoning: list[str | None] = []
        self.tokens_in = self.tokens_out = 0
        self.reasoning_tokens: int | None = None
        self.endpoint: str | None = None
        self.cost: float | None = 0.0

    def add(self, more: "Got") -> None:
        """One more single-sample response (a server that ignored or rejected `n`)."""
        self.texts += more.texts[:1]
        self.finish += more.finish[:1]
        self.reasoning += more.reasoning[:1]
        self.tokens_in = self.tokens_in or more.tokens_in
        self.tokens_out += more.tokens_out
        if more.reasoning_tokens is not None:
            self.reasoning_tokens = (self.reasoning_tokens or 0) + more.reasoning_tokens
        self.endpoint = self.endpoint or more.endpoint
        self.cost = None if self.cost is None or more.cost is None else self.cost + more.cost

    def meta(self, n: int) -> dict[str, Any]:
        """The response metadata of the first `n` samples."""
        meta: dict[str, Any] = {"finish_reasons": self.finish[:n]}
        if any(self.reasoning[:n]):
            meta["reasoning"] = self.reasoning[:n]
        if self.reasoning_tokens is not None:
            meta["reasoning_tokens"] = self.reasoning_tokens
        if self.endpoint:
            meta["endpoint"] = self.endpoint
        return meta
