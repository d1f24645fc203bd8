"""A simulated OpenAI-compatible model server for bench/fleet.py: N slots, lognormal service times.

Each request asks for `n` sequences; each sequence takes one of the N slots for a service time
drawn from a lognormal (median `--median`, shape `--sigma`), as a GPU server's batch slots are
taken by sequences of varying length; a request is answered when all its sequences are done.
Sequences beyond N wait in a FIFO queue (the server is never over-subscribed). The server logs
every sequence (arrival, start, end) so the bench can compute the fleet's busy share.

Answers are valid for every role: with a JSON schema (`response_format`), a minimal instance of
that schema (ids chosen distinct where a list must name each allowed id once, see `instance`);
with "Reply with exactly one of: A, B" the first choice; else a short plain text.

    python bench/fleet_server.py --port 8011 --slots 64 --median 0.4 --sigma 0.8 --log /tmp/fleet.jsonl
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import re
import time
from typing import Any

from aiohttp import web


# ---- answers ------------------------------------------------------------------------------------
def _deref(schema: dict, root: dict) -> dict:
    while "$ref" in schema:
        name = schema["$ref"].split("/")[-1]
        schema = {**root.get("$defs", root.get("definitions", {}))[name],
                  **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def instance(schema: dict, root: dict | None = None, index: int = 0) -> Any:
    """A small value valid against `schema` (index picks the index-th enum value, for distinct ids)."""
    root = root or schema
    schema = _deref(schema, root)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if _deref(o, root).get("type") != "null"] or schema[key]
            return instance(options[0], root, index)
    if "allOf" in schema:
        return instance(schema["allOf"][0], root, index)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        values = schema["enum"]
        if "PENDING" in values:  # NCP commitment statuses: the story goes on to t_max
            return "PENDING"
        return values[index % len(values)]
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null")
    if t == "object" or "properties" in schema:
        props = schema.get("properties", {})
        out = {}
        for name, sub in props.items():
            out[name] = instance(sub, root, 0)
        return out
    if t == "array" and "prefixItems" in schema:  # a fixed tuple (one intent per NPC, in order)
        return [instance(p, root, 0) for p in schema["prefixItems"]]
    if t == "array":
        item = schema.get("items", {})
        if ("enum" in _deref(item, root) or "const" in _deref(item, root)) and schema.get("maxItems", 1) >= 1:
            return [instance(item, root, 0)]  # e.g. source ids: the first allowed one
        n = int(schema.get("minItems", 0))
        enum = _id_enum(item, root)
        if enum is not None and n == 0 and schema.get("maxItems", 1) >= len(enum[1]):
            n = len(enum[1])  # a list naming each allowed id (statuses per commitment, intents per NPC)
        n = max(n, 1) if schema.get("maxItems", 1) >= 1 and _needs_one(schema) else n
        return [instance(item, root, i) if enum is None else {**instance(item, root, 0), enum[0]: enum[1][i]}
                for i in range(n)]
    if t == "integer":
        lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        return int(math.ceil(lo)) if lo is not None else 0
    if t == "number":
        return float(schema.get("minimum", 0))
    if t == "boolean":
        return False
    if t == "null":
        return None
    text = f"The story goes on, {_word()} and {_word()}."   # varied: no two answers share a cache key downstream
    n = max(int(schema.get("minLength", 1)), 1)
    return (text * (n // len(text) + 1))[:max(n, len(text))][: schema.get("maxLength", 10_000)]


_WORDS = ("quietly", "slowly", "at dusk", "in the rain", "by the river", "with a lantern", "in the hall", "at dawn",
          "in secret", "with a friend", "after the storm", "before noon", "near the gate", "in the garden")
_RNG = random.Random(1)


def _word() -> str:
    return f"{_RNG.choice(_WORDS)} {_RNG.randrange(10**6)}"


def _needs_one(schema: dict) -> bool:
    return int(schema.get("minItems", 0)) >= 1


def _id_enum(item: dict, root: dict) -> tuple[str, list] | None:
    """(property, allowed values) when the items carry an enum-typed id property."""
    item = _deref(item, root)
    for name, sub in item.get("properties", {}).items():
        sub = _deref(sub, root)
        if "enum" in sub and len(sub["enum"]) > 1 and name.endswith("_id"):
            return name, list(sub["enum"])
    return None


_CHOICES = re.compile(r"Reply with exactly one of: ([^\n]*?)\. Nothing else\.")


def answer(body: dict) -> str:
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")
    if schema:
        return json.dumps(instance(schema))
    system = " ".join(str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "system")
    m = _CHOICES.search(system)
    if m:
        return m.group(1).split(", ")[0]
    return f"I walk to the door and listen. Then the story goes on to its end, {_word()}."


# ---- the server ---------------------------------------------------------------------------------
class Fleet:
    def __init__(self, slots: int, median: float, sigma: float, log_path: str | None, seed: int = 0):
        self.slots, self.mu, self.sigma = slots, math.log(median), sigma
        self.free = asyncio.Semaphore(slots)
        self.rng = random.Random(seed)
        self.log = open(log_path, "a", buffering=1) if log_path else None

    async def sequence(self, arrival: float) -> None:
        service = self.rng.lognormvariate(self.mu, self.sigma)
        async with self.free:
            start = time.time()
            await asyncio.sleep(service)
            end = time.time()
        if self.log:
            self.log.write(f'{{"a":{arrival:.4f},"s":{start:.4f},"e":{end:.4f}}}\n')

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        arrival = time.time()
        n = int(body.get("n") or 1)
        if n == 1:   # no task and gather for the common case (the server shares the CPU with the client)
            await self.sequence(arrival)
        else:
            await asyncio.gather(*(self.sequence(arrival) for _ in range(n)))
        texts = [answer(body) for _ in range(n)]
        words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        out = sum(len(t.split()) for t in texts)
        return web.json_response({
            "id": f"fleet-{self.rng.getrandbits(32):x}", "object": "chat.completion", "created": int(arrival),
            "model": body.get("model", "fleet"),
            "choices": [{"index": i, "finish_reason": "stop", "message": {"role": "assistant", "content": t}}
                        for i, t in enumerate(texts)],
            "usage": {"prompt_tokens": words, "completion_tokens": out, "total_tokens": words + out},
        })

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fleet", "object": "model"}]})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--median", type=float, default=0.4, help="median service time of one sequence (s)")
    ap.add_argument("--sigma", type=float, default=0.8)
    ap.add_argument("--log", default=None, help="append one JSON line per sequence (arrival, start, end)")
    ap.add_argument("--seed", type=int, default=0,
                    help="seed of the service-time draws (drawn in arrival order; one extreme draw near the end of a "
                         "run moves its efficiency by points: compare runs on several seeds)")
    args = ap.parse_args()

    async def make_app() -> web.Application:
        fleet = Fleet(args.slots, args.median, args.sigma, args.log, args.seed)
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_post("/v1/chat/completions", fleet.chat)
        app.router.add_post("/chat/completions", fleet.chat)
        app.router.add_get("/v1/models", fleet.models)
        return app

    web.run_app(make_app(), host="127.0.0.1", port=args.port, print=None, access_log=None,
                backlog=4096)


if __name__ == "__main__":
    main()
