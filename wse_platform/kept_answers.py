"""Valid LLM answers kept in this process for a later step of the same run that asks the very same requests.

A step that rebuilds, from the stored rows, requests an earlier step of the same run (one `wse
materialize` run, executed in process) already asked would get each answer back from the response
cache: a cache-hit round trip through the client (≈ 0.5 ms of CPU each, an `llm_calls` row each)
after the run's last answer. The earlier step keeps its valid answers here, per (run id, key), and
the later step takes them once and looks each request up by `request_digest` (the fields the
client's cache key reads, plus the role and the parsing flags). Everything else — a failed
request, another process or run, `--no-cache`, a request that differs — goes through the client as
before. The answers are the ones the cache holds, so the rows are the same; only the call ids then
name the earlier call's `llm_calls` rows (real calls, not cache hits).

Users: 100-Endings (`endings/early.py`: the judge's early answers for `endings_verdicts`), NCP-Bench
(`ncp/kept.py`: the in-loop auditor's answers for the re-audit baseline).
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

MAX_KEPT_SETS = 4   # (run, key) pairs whose answers are kept until the step that uses them takes them


def request_digest(req: Any) -> tuple:
    """What makes two requests the same request (the client's cache key reads the same fields)."""
    h = hashlib.blake2b(digest_size=16)
    for m in req.messages:
        h.update(str(m.get("role")).encode())
        h.update(b"\x1f")
        h.update(str(m.get("content")).encode())
        h.update(b"\x1e")
    return (req.role, req.model, req.n, tuple(req.choices) if req.choices is not None else None,
            req.output_model, req.allow_truncated, req.per_sample, req.sampling.model_dump_json(), h.hexdigest())


class KeptSets:
    """Sets of things kept in this process per (run id, key) until the step that uses them takes them; the
    `max_sets` most recently added to are kept (a run that never takes its set does not grow memory)."""

    def __init__(self, max_sets: int = MAX_KEPT_SETS):
        self._sets: OrderedDict[tuple[str, str], dict[tuple, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.max_sets = max_sets

    def add(self, run_id: str, set_key: str, items: dict[tuple, Any]) -> None:
        with self._lock:
            self._sets.setdefault((run_id, set_key), {}).update(items)
            self._sets.move_to_end((run_id, set_key))
            while len(self._sets) > self.max_sets:
                self._sets.popitem(last=False)

    def peek(self, run_id: str | None, set_key: str) -> dict[tuple, Any]:
        """The set kept so far for (run, key), left here (the live dict: later additions appear in it)."""
        with self._lock:
            return self._sets.get((run_id, set_key), {}) if run_id else {}

    def take(self, run_id: str | None, set_key: str) -> dict[tuple, Any]:
        """The set kept for (run, key), removed from here (empty when there is none)."""
        with self._lock:
            return self._sets.pop((run_id, set_key), {}) if run_id else {}


class EarlyAnswers(KeptSets):
    """Valid answers of this process, per (run id, key), by `request_digest`."""

    def keep(self, run_id: str, set_key: str, reqs: Sequence[Any], results: Sequence[Any]) -> None:
        self.add(run_id, set_key, {request_digest(q): r for q, r in zip(reqs, results) if getattr(r, "ok", False)})


class _Delegating:
    """A client whose attributes (read and set) are the wrapped client's, apart from `complete_many`."""

    def __init__(self, client: Any):
        object.__setattr__(self, "_client", client)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._client, name, value)

    @property
    def cache(self) -> Any:   # `flow.warm` opens the cache before the threads start (a class attribute)
        return getattr(self._client, "cache", None)

    def complete(self, req: Any) -> Any:
        return self.complete_many([req])[0]


class KeepingClient(_Delegating):
    """`client`, keeping the valid answers to requests `wanted(req)` in `answers` under (its run, `key`)."""

    def __init__(self, client: Any, answers: EarlyAnswers, key: str, wanted: Any = None):
        super().__init__(client)
        object.__setattr__(self, "_keep", (answers, key, wanted))

    def complete_many(self, reqs: list) -> list:
        results = self._client.complete_many(reqs)
        answers, key, wanted = self._keep
        pairs = [(q, r) for q, r in zip(reqs, results) if wanted is None or wanted(q, r)]
        if pairs:
            answers.keep(self._client.run_id, key, [q for q, _ in pairs], [r for _, r in pairs])
        return results


class NotKept(LookupError):
    """A request `KeptOnlyClient` has no kept answer for."""


class KeptOnlyClient(_Delegating):
    """`client`'s attributes, answering every request from `kept` as `AnsweredClient` does; a request not
    found there raises `NotKept` (nothing reaches the client: no call, no record)."""

    def __init__(self, client: Any, kept: dict[tuple, Any]):
        super().__init__(client)
        object.__setattr__(self, "_kept", kept)

    def complete_many(self, reqs: list) -> list:
        out = []
        for q in reqs:
            got = self._kept.get(request_digest(q))
            if got is None:
                raise NotKept(q.role)
            out.append(got.model_copy(update={"cache_hit": True}))
        return out


class AnsweredClient(_Delegating):
    """`client`, answering each request found in `kept` (by `request_digest`) from there and the rest,
    in one batch, through `client`. An answer taken from `kept` is marked `cache_hit` (it did not reach
    the server in this step); its `call_ids` are the earlier call's."""

    def __init__(self, client: Any, kept: dict[tuple, Any]):
        super().__init__(client)
        object.__setattr__(self, "_kept", kept)
        object.__setattr__(self, "taken", 0)     # requests answered from `kept`
        object.__setattr__(self, "_lock", threading.Lock())

    def complete_many(self, reqs: list) -> list:
        out: list[Any] = [None] * len(reqs)
        ask: list[int] = []
        for i, q in enumerate(reqs):
            got = self._kept.get(request_digest(q))
            if got is None:
                ask.append(i)
            else:
                out[i] = got.model_copy(update={"cache_hit": True})
        with self._lock:
            object.__setattr__(self, "taken", self.taken + len(reqs) - len(ask))
        if ask:
            for i, r in zip(ask, self._client.complete_many([reqs[i] for i in ask])):
                out[i] = r
        return out
