"""Per-request time stamps for `bench/chain_gap.py`: off unless the environment variable WSE_LLM_TRACE
names a folder (then each process appends JSON lines to `<folder>/<pid>.jsonl`, one `write` each).

Two kinds of line: a client batch (`complete_many` in the caller's thread: `enter`, `call` when it hands
the batch to the backend, `woke` when the backend returned, `exit`), and one request on the HTTP loop
(`ask` before the endpoint limiter, `slot` once it holds a slot, `answer` when the body was read,
`release` after the slot was released, `done` after the client's `on_result`). Both carry the caller's
thread id (`tid`): an NCP episode or a WSE trajectory runs in one thread, so a thread's batches in order
are its conversation's requests. Stamps are `time.monotonic()` (CLOCK_MONOTONIC: one clock for every
process of the machine)."""
from __future__ import annotations

import contextvars
import json
import os
import threading
import time
from typing import Any

FOLDER = os.environ.get("WSE_LLM_TRACE") or None
_REQ: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("wse_llm_trace", default=None)
_FD: tuple[int, int] | None = None   # (pid, fd)
_LOCK = threading.Lock()


def write(rec: dict[str, Any]) -> None:
    global _FD
    with _LOCK:
        if _FD is None or _FD[0] != os.getpid():
            os.makedirs(FOLDER, exist_ok=True)
            _FD = (os.getpid(), os.open(os.path.join(FOLDER, f"{os.getpid()}.jsonl"),
                                        os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
            # the wall clock minus the monotonic one: places the stamps against a server's time.time() log
            os.write(_FD[1], (json.dumps({"k": "clock", "off": time.time() - time.monotonic()}) + "\n").encode())
        os.write(_FD[1], (json.dumps(rec, separators=(",", ":")) + "\n").encode())


def request(tid: int) -> dict[str, Any] | None:
    """Start the record of one request on the loop (in its own task: the stamps below land in it)."""
    if FOLDER is None:
        return None
    rec = {"k": "req", "tid": tid}
    _REQ.set(rec)
    return rec


def stamp(name: str) -> None:
    """Stamp the running task's request record (nothing when tracing is off)."""
    if FOLDER is not None:
        rec = _REQ.get()
        if rec is not None:
            rec[name] = time.monotonic()


_BATCH = threading.local()


def batch(n: int) -> None:
    """Start the record of a client batch of `n` requests in the calling thread."""
    if FOLDER is not None:
        _BATCH.rec = {"k": "batch", "tid": threading.get_ident(), "n": n, "enter": time.monotonic()}


def batch_stamp(name: str, end: bool = False) -> None:
    """Stamp the calling thread's batch record; `end`: write it."""
    if FOLDER is not None:
        rec = getattr(_BATCH, "rec", None)
        if rec is not None:
            rec[name] = time.monotonic()
            if end:
                _BATCH.rec = None
                write(rec)
