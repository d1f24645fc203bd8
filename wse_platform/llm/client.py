"""`LLMClient`: the single path from a role's request to validated outputs.

Per batch it: resolves each request's model and backend, derives a content key, answers what
the cache already holds, claims the rest across processes (one request in flight per key: a key
another client is answering is waited for and served from the cache), sends the rest to the
backends (one batch per backend, different backends concurrently), journals every answer as it
arrives (journal.py: on disk before anything else can fail), stores answers in the cache in
batches, validates each sample (after removing any reasoning block), retries invalid, truncated
or filtered answers with the next attempt index (a new seed and a new cache entry), and records
one accounting row per attempt (journaled too), handed to `record_sink` in small batches as calls
complete (so a killed process keeps the accounting of what it already paid for).

Failure kinds: model failures (invalid, truncated, content_filter, input_truncated) become
`LLMResult.failure` and are part of the benchmark. Failures of the environment never are: a
transport failure that outlasts the backend's retries (timeouts, 429/5xx, a 200 that is not a
completion) raises `LLMTransportError`; missing key, authentication, no server, cache/record I/O
raise `LLMInfrastructureError`; both after the batch's records are written, so the unit has no
result and the next run asks again. Failed, empty or filtered answers are never cached.
"""
from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from wse_platform.llm.backends import (Backend, BackendCall, BackendResponse, BackendUnavailable, attempt_seed,
                                      make_backend)
from wse_platform.llm.cache import LIVE_OWNERS, ResponseCache, content_key, dumps
from wse_platform.llm.errors import LLMInfrastructureError, LLMTransportError
from wse_platform.llm.journal import Journal
from wse_platform.llm import trace
from wse_platform.llm.limiter import take_hint
from wse_platform.redact import redact_text, redact_url
from wse_platform.llm.progress import BatchProgress, ProgressFn
from wse_platform.progress import TALLY  # requests done, for `wse materialize`'s progress lines
from wse_platform.llm.types import LLMFailure, LLMRequest, LLMResult, SampleFailure, Sampling
from wse_platform.llm.validation import Parsed, parse_sample, schema_of, split_reasoning

if TYPE_CHECKING:  # config imports llm.types, so the client imports config lazily
    from wse_platform.config import Settings

log = logging.getLogger("wse_platform.llm")

MAX_ATTEMPTS = 3
STORE_EVERY, STORE_INTERVAL_S = 64, 1.0  # answers journaled but not yet in the cache (see _settle)
JOURNAL_RESET_BYTES = 1 << 20            # the journal is emptied once everything in it is stored and it is this big
GROUP_THREADS = 256  # at most this many backend groups of concurrent batches at once (more wait their turn)
MISSES_BEFORE_CLAIMING = 8  # batches in a row without a stored answer, then a batch is claimed without a plain read first
CLAIM_POLL_S = 0.05  # how often a client waiting for another process's answer to the same request looks
_shown_endpoint = functools.lru_cache(maxsize=256)(redact_url)   # per call; the same few endpoints each time
_WRITER: tuple[int, ThreadPoolExecutor] | None = None   # (pid, executor) of `_record_writer`
_WRITER_LOCK = threading.Lock()


def _record_writer() -> ThreadPoolExecutor:
    """The one thread of this process that writes the clients' periodic record batches (`_flush_soon`).
    Issue 24: each client (a step's session) had a writer thread of its own, and the warehouse keeps a
    DuckDB instance per thread, so every session's first periodic write made an instance anew (~30 ms of
    CPU). A process forked from one that had the thread makes its own."""
    global _WRITER
    with _WRITER_LOCK:
        if _WRITER is None or _WRITER[0] != os.getpid():
            _WRITER = (os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="wse-llm-records"))
        return _WRITER[1]


@functools.lru_cache(maxsize=1024)
def _merged(sampling: Sampling, defaults: Sampling) -> tuple[Sampling, dict[str, Any]]:
    """A request's sampling over its model's and the dict of it that goes into the request key, made once per
    pair (frozen, so hashable), not per request (issue 24: ~8 us of pydantic per request)."""
    merged = sampling.merged_over(defaults)
    return merged, merged.model_dump()


def usable(value: dict[str, Any]) -> bool:
    """A stored answer worth serving: every sample non-empty and none withheld by a content filter."""
    texts = value.get("texts") or []
    reasons = (value.get("meta") or {}).get("finish_reasons") or []
    return bool(texts) and all(t and t.strip() for t in texts) and "content_filter" not in reasons


@dataclass(frozen=True)
class ResolvedModel:
    """What the client needs of a config model (also built for injected test backends)."""

    name: str
    backend_kind: str
    model_id: str
    revision: str | None
    quantization: str | None
    sampling: Sampling
    price_in: float | None = None
    price_out: float | None = None
    allow_input_truncation: bool = False
    max_attempts: int | None = None   # models.<name>.max_attempts (None: the client's)

    @property
    def backend_model(self) -> str:
        return self.model_id + (f"@{self.revision}" if self.revision else "")


@dataclass
class _State:
    """Book-keeping of one request across its attempts."""

    req: LLMRequest
    model: ResolvedModel
    backend: Backend
    sampling: Sampling
    schema: dict[str, Any] | None
    request_key: str
    attempt: int = 0
    done: bool = False
    outputs: list[Any] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    failure: LLMFailure | None = None
    call_ids: list[str] = field(default_factory=list)
    all_hits: bool = True
    tokens_in: int = 0
    tokens_out: int = 0
    infra_error: str | None = None
    infra_kind: str | None = None
    priority: int = 0   # the chain runner's hint for the endpoint limiter's order (limiter.take_hint)

    def result(self) -> LLMResult:
        return LLMResult(role=self.req.role, model=self.req.model, outputs=self.outputs, texts=self.texts,
                         failure=self.failure, attempts=self.attempt, call_ids=self.call_ids,
                         cache_hit=self.all_hits, tokens_in=self.tokens_in, tokens_out=self.tokens_out)


class LLMClient:
    def __init__(self, settings: "Settings", run_id: str | None = None, partition_key: str | None = None,
                 use_cache: bool | None = None, backends: dict[str, Backend] | None = None,
                 progress: ProgressFn | bool | None = None, max_attempts: int | None = None,
                 record_sink: Callable[[list[dict[str, Any]]], Any] | None = None, flush_every: int = 25,
                 flush_interval_s: float = 2.0, scope: str | None = None, flush_interval_max_s: float | None = None):
        self.settings = settings
        self.run_id = run_id or f"session-{uuid.uuid4().hex[:12]}"
        self.partition_key = partition_key
        # the step making the calls: two steps of one run asking the same thing get distinct call ids
        self.scope = scope
        self.use_cache = settings.use_cache if use_cache is None else use_cache
        self.progress = progress
        # given here, it holds for every model; else each model's `max_attempts` (default MAX_ATTEMPTS)
        self.max_attempts = max_attempts
        self._backends: dict[str, Backend] = dict(backends or {})
        self._built: list[Backend] = []   # backends this client made (closed with it; injected ones are not)
        self._models: dict[str, ResolvedModel] = {}
        self._cache: ResponseCache | None = None
        self._records: list[dict[str, Any]] = []
        self._occurrences: dict[tuple[str, int], int] = {}
        self.truncated_prompts: list[dict[str, Any]] = []  # prompts a backend shortened to fit its context
        self._lock = threading.Lock()
        self._sink = record_sink          # e.g. lambda rows: write_call_records(warehouse, rows)
        self.flush_every, self.flush_interval_s = max(1, flush_every), flush_interval_s
        # a long step's record writes (a warehouse open each) space out: the interval doubles after each
        # periodic write up to this (the first write still comes flush_interval_s after the first calls)
        self.flush_interval_max_s = max(flush_interval_s, flush_interval_max_s or flush_interval_s)
        self._flush_wait = flush_interval_s   # the interval now
        self._flushed = 0                 # records[:_flushed] were handed to the sink
        self._last_flush = time.monotonic()
        self._flush_lock = threading.Lock()
        # durability (journal.py): answers and records are journaled first, cache writes are batched
        self._journal: Journal | None = None
        self._journal_lock = threading.Lock()
        self._durability_error: str | None = None
        self._cache_queue: list[tuple[str, str, bool]] = []   # (key, value's JSON, replace) not yet stored
        self._release_queue: list[tuple[str, str]] = []   # claims (key, owner) to drop once the queue is stored
        self._store_lock = threading.Lock()
        self._owner = f"{self.run_id}:{uuid.uuid4().hex[:12]}"  # this client, in the cache's claim table
        self._misses = 0   # batches in a row whose plain read found nothing (see _run_attempt)
        self._n_claims = itertools.count(1)   # next() is atomic: two threads never share an owner
        self._flushing: Future | None = None   # this client's periodic write on `_record_writer`, if any
        self._groups: ThreadPoolExecutor | None = None   # _call_keys: a batch's groups beyond the first
        self._last_store = time.monotonic()
        self._flush_pending = False
        self._replace_keys: set[str] = set()  # keys whose stored answer was unusable (empty, filtered)
        self._replayed = False
        self._journaled_records = 0

    # ---- public API ------------------------------------------------------------------
    def complete(self, req: LLMRequest) -> LLMResult:
        return self.complete_many([req])[0]

    def complete_many(self, reqs: list[LLMRequest]) -> list[LLMResult]:
        """Answer every request; results come back in request order."""
        trace.batch(len(reqs))
        states = [self._prepare(r) for r in reqs]
        if not states:
            return []
        priority = take_hint(len(states))   # the calling thread's conversation: requests it still expects
        if priority:
            for s in states:
                s.priority = priority
        roles = sorted({s.req.role for s in states})
        progress = BatchProgress(len(states), f"LLM {','.join(roles)[:60]}",
                                 self.progress if callable(self.progress) else None,
                                 enabled=self.progress is not False)
        if not self._replayed:
            self._replay()
        try:
            pending = states
            for attempt in range(1, max(self._attempts(s.model) for s in states) + 1):
                if not pending:
                    break
                self._run_attempt(pending, attempt, progress)
                self._raise_infrastructure(pending)
                pending = [s for s in pending if not s.done]
        except BaseException:
            progress.close()
            try:
                self._settle(force=False)
            except Exception as err:  # noqa: BLE001 - the first error is the one to report; the journal keeps the rest
                log.error("LLM answers not stored yet (kept in the journal): %s", err)
            raise
        progress.close()
        self._settle(force=False)
        trace.batch_stamp("exit", end=True)
        return [s.result() for s in states]

    def _raise_infrastructure(self, pending: list[_State]) -> None:
        broken = [s for s in pending if s.infra_error]
        if not broken and not self._durability_error:
            return
        try:
            self._settle()
        except LLMInfrastructureError as err:
            log.error("%s", err)
        try:
            self.flush_records()
        except LLMInfrastructureError as err:
            if not broken and not self._durability_error:
                raise
            log.error("%s", err)
        if not broken:
            raise LLMInfrastructureError(f"{self._durability_error}. The run stops here: answers received so far "
                                         "are kept (journal and cache); free space and rerun.")
        models = sorted({s.req.model for s in broken})
        transport = all(s.infra_kind == "transport" for s in broken)
        cls = LLMTransportError if transport else LLMInfrastructureError
        raise cls(
            f"{len(broken)} of {len(pending)} LLM call(s) to model(s) {models} could not be made: "
            f"{broken[0].infra_error}. This is an infrastructure problem, not a model failure: no result "
            "was recorded for these calls; fix it and rerun (the cache keeps every answer already received).")

    # ---- durability: journal first, cache and records in batches ----------------------
    def _replay(self) -> None:
        """Store the answers and records journaled by clients that ended before storing them."""
        self._replayed = True
        from wse_platform.llm.journal import replay
        replay(self.cache.directory / "journal", lambda items: self.cache.put_many([(k, v, False) for k, v in items]),
               self._write_sink if self._sink is not None else None)

    def _journal_write(self, entries: list[dict[str, Any]]) -> None:
        with self._journal_lock:
            try:
                if self._journal is None:
                    from wse_platform.llm.journal import Journal
                    self._journal = Journal(self.cache.directory / "journal")
                self._journal.append(entries)
                if self._journal.low_space and not self._durability_error:
                    self._durability_error = self._journal.low_space
            except OSError as err:
                if not self._durability_error:
                    self._durability_error = (f"could not journal LLM answers in {self.cache.directory / 'journal'} "
                                              f"({err.strerror or err})")
                    log.error("%s", self._durability_error)

    def _queue_answer(self, key: str, value: dict[str, Any], replace: bool) -> None:
        blob = dumps(value)   # serialized once: the journal's line and the cache's value
        line = '{"t":"answer","key":' + dumps(key) + ',"value":' + blob + "}"   # = json.dumps of the entry
        with self._lock:  # journal and queue together: the journal is never emptied between the two
            self._journal_write([line])
            self._cache_queue.append((key, blob, replace))

    def _store_answers(self, release: list[str] = (), owner: str | None = None) -> None:
        """Write the queued answers to the cache in one transaction, then drop `owner`'s claims on `release`
        (serialized: a claim is dropped only after every answer queued before it is stored).

        A group commit: the thread that gets `_store_lock` stores everything queued, the answers and claim
        releases other threads queued while it waited included; a thread whose release was stored by
        another one meanwhile finds both queues empty and returns (issue 24: at 256 slots a client's
        trajectory threads each committed their own transaction, one after another)."""
        if release and owner:
            with self._lock:   # after this thread's answers (queued as they arrived): stored no later than them
                self._release_queue.extend((k, owner) for k in release)
        with self._store_lock:
            with self._lock:
                items, self._cache_queue = self._cache_queue, []
                drops, self._release_queue = self._release_queue, []
            if not items and not drops:
                return
            try:
                self.cache.put_many(items, releases=drops)
                self._last_store = time.monotonic()
            except BaseException:
                with self._lock:  # kept for the next try; the journal has them in any case
                    self._cache_queue[:0] = items
                    self._release_queue[:0] = drops
                raise

    def _settle(self, force: bool = True) -> None:
        """Store what is queued; when the cache and the sink hold everything journaled, empty the journal.
        Unless forced, answers wait in the journal until STORE_EVERY are queued or STORE_INTERVAL_S passed
        (one cache transaction per batch, not per call)."""
        if not force:
            with self._lock:
                if len(self._cache_queue) < STORE_EVERY and time.monotonic() - self._last_store < STORE_INTERVAL_S:
                    return
        self._store_answers()
        self._maybe_reset_journal()

    def _maybe_reset_journal(self, force: bool = False) -> None:
        if self._journal is None or not (force or self._journal.size >= JOURNAL_RESET_BYTES):
            return
        with self._flush_lock, self._lock, self._journal_lock:
            records_done = self._sink is None or self._flushed >= len(self._records)
            if not self._cache_queue and records_done and self._journal is not None:
                self._journal.reset()

    def flush_records(self) -> None:
        """Store the queued answers and hand the records not yet written to the sink (the session calls
        it when a step ends)."""
        self._store_answers()
        self._maybe_flush(force=True)
        self._maybe_reset_journal()

    def _write_sink(self, batch: list[dict[str, Any]]) -> None:
        try:
            self._sink(batch)
        except LLMInfrastructureError:
            raise
        except Exception as err:
            raise LLMInfrastructureError(f"could not write {len(batch)} LLM call record(s): "
                                         f"{type(err).__name__}: {err}; they are kept in the journal "
                                         f"{self.cache.directory / 'journal'} and written when the next run "
                                         "starts") from err

    def _flush_due(self, force: bool = False) -> bool:
        """Records wait and a batch is due: forced, `flush_every` of them, or the interval is up (under `_lock`)."""
        waiting = len(self._records) - self._flushed
        return waiting > 0 and (force or waiting >= self.flush_every
                                or time.monotonic() - self._last_flush >= self._flush_wait)

    def _maybe_flush(self, force: bool = False) -> None:
        if self._sink is None:
            return
        with self._lock:
            due = self._flush_due(force)
        if not due or not self._flush_lock.acquire(blocking=force):
            return  # another thread is writing; the next completed call flushes the rest
        try:
            with self._lock:
                batch, upto = self._records[self._flushed:], len(self._records)
            if batch:
                try:
                    self._write_sink(batch)
                except LLMInfrastructureError as err:
                    if force:
                        raise
                    # during a batch: the answers in flight still arrive (they are paid for) and are
                    # journaled; the run stops when this attempt ends
                    if not self._durability_error:
                        self._durability_error = str(err)
                        log.error("%s", err)
                    return
            with self._lock:
                self._flushed = max(self._flushed, upto)
                self._last_flush = time.monotonic()
                if batch and not force:
                    self._flush_wait = min(self._flush_wait * 2, self.flush_interval_max_s)
        finally:
            self._flush_lock.release()

    def call_records(self) -> list[dict[str, Any]]:
        """One row per attempt so far (matches the `llm_calls` table)."""
        with self._lock:
            return list(self._records)

    def drain_call_records(self) -> list[dict[str, Any]]:
        """The rows so far, forgetting them (write them with accounting.write_call_records)."""
        with self._flush_lock, self._lock:
            out, self._records, self._flushed = self._records, [], 0
            return out

    def all_stored(self, reqs: list[LLMRequest]) -> bool:
        """Whether the cache holds an answer to the first attempt of every request in `reqs` (a read only:
        nothing is recorded, claimed or counted; False when this client does not read the cache). A caller's
        hint of how its requests will be answered (e.g. a judging step replaying the answers its judges got
        early, `wse.judges.judge_consistency`)."""
        if not reqs or not self.use_cache:
            return False
        if not self._replayed:   # answers a stopped run left in the journal count (as `complete_many` finds them)
            self._replay()
        keys = {content_key(self._prepare(r).request_key, 1) for r in reqs}
        return len(self.cache.get_many(keys)) == len(keys)

    @property
    def cache(self) -> ResponseCache:
        if self._cache is None:
            self._cache = ResponseCache(self.settings.cache)
        return self._cache

    def backend(self, model_name: str) -> Backend:
        self._resolve(model_name)
        return self._backends[model_name]

    def close(self) -> None:
        if self._groups is not None:
            self._groups.shutdown(wait=True)
            self._groups = None
        if self._flushing is not None:
            wait([self._flushing])   # its errors were logged and kept in _durability_error
            self._flushing = None
        try:
            self._settle()
        except Exception as err:  # noqa: BLE001 - the journal keeps what could not be stored
            log.error("LLM answers not stored at close (kept in the journal): %s", err)
        if self._journal is not None:
            with self._flush_lock, self._lock:
                done = not self._cache_queue and (self._sink is None or self._flushed >= len(self._records))
            self._journal.close(remove=done)
            self._journal = None
        if self._cache is not None:
            self._cache.close()
            self._cache = None
        for backend in self._built:   # e.g. the HTTP connections kept alive to a server
            try:
                backend.close()
            except Exception as err:  # noqa: BLE001 - everything is stored; a connection left open is harmless
                log.warning("closing the %s backend: %s", backend.name, err)

    def __del__(self) -> None:  # a client dropped without close: what is not stored stays for the next run
        journal = getattr(self, "_journal", None)
        if journal is not None:
            try:
                journal.close(remove=not self._cache_queue and (self._sink is None
                                                                or self._flushed >= len(self._records)))
            except Exception:  # noqa: BLE001
                pass

    # ---- preparation -----------------------------------------------------------------
    def _resolve(self, name: str) -> ResolvedModel:
        model = self._models.get(name)
        if model is not None:
            return model
        cfg = self.settings.models.get(name)
        if cfg is None and name not in self._backends:
            from wse_platform.config import ConfigError
            raise ConfigError(f"LLM request for unknown model {name!r}; defined models: "
                              f"{sorted(self.settings.models)}")
        if cfg is None:  # an injected backend for a name the config does not define (tests)
            model = ResolvedModel(name, self._backends[name].name, name, None, None, Sampling())
        else:
            model = ResolvedModel(name, cfg.backend, cfg.model_id, cfg.revision, cfg.quantization, cfg.sampling,
                                  cfg.price_in_per_token, cfg.price_out_per_token,
                                  bool(getattr(cfg, "allow_input_truncation", False)), cfg.max_attempts)
            if name not in self._backends:
                self._backends[name] = make_backend(name, cfg, self.settings)
                self._built.append(self._backends[name])
        self._models[name] = model
        return model

    def _attempts(self, model: ResolvedModel) -> int:
        """How many attempts a request to `model` gets before its failure is recorded."""
        if self.max_attempts is not None:
            return self.max_attempts
        return model.max_attempts or MAX_ATTEMPTS

    def _prepare(self, req: LLMRequest) -> _State:
        if req.n < 1:
            raise ValueError(f"LLM request for role {req.role}: n must be >= 1 (got {req.n})")
        if req.output_model is not None and req.choices is not None:
            raise ValueError(f"LLM request for role {req.role}: give output_model or choices, not both")
        if req.choices is not None and not req.choices:
            raise ValueError(f"LLM request for role {req.role}: empty choices list")
        model = self._resolve(req.model)
        backend = self._backends[req.model]
        sampling, sampling_dump = _merged(req.sampling, model.sampling)
        schema, schema_json = schema_of(req.output_model) if req.output_model is not None else (None, None)
        request_key = content_key(backend.cache_namespace(), model.model_id, model.revision, model.quantization,
                                  req.messages, sampling_dump, req.n, schema_json, req.choices)
        return _State(req, model, backend, sampling, schema, request_key)

    # ---- one attempt over all pending requests ---------------------------------------
    def _run_attempt(self, pending: list[_State], attempt: int, progress: BatchProgress) -> None:
        keys = [content_key(s.request_key, attempt) for s in pending]
        by_key: dict[str, list[_State]] = {}  # identical requests in one batch: one backend call
        for s, key in zip(pending, keys):
            s.attempt = attempt
            by_key.setdefault(key, []).append(s)
        if not self.use_cache:
            self._call_keys(list(by_key), by_key, attempt, progress)
            return
        # stored answers are served by a plain read, without the cache's write lock (a judging run
        # replaying the answers its judges got early, a rerun); only the rest is claimed. A client whose
        # last MISSES_BEFORE_CLAIMING batches found nothing (a fresh run: every request new) claims at once:
        # the claim reads the stored answers too, in its transaction (issue 24: the read cost ~0.05 ms
        # per call); a hit found by a claim turns the plain read back on
        todo = list(by_key)
        if self._misses < MISSES_BEFORE_CLAIMING:
            found = self.cache.get_many(todo)
            self._misses = 0 if found else self._misses + 1
            served = self._serve_hits(found, by_key, progress)
            todo = [k for k in todo if k not in served]
            if not todo:
                return
        # one request in flight per key across processes: claim what the cache lacks, wait for keys
        # another client is answering (their answers arrive through the cache, counted there)
        owner = f"{self._owner}:{next(self._n_claims)}"
        LIVE_OWNERS.add(owner)
        try:
            hits, mine, others = self.cache.claim(todo, owner)
            if hits:
                self._misses = 0
        except BaseException:
            LIVE_OWNERS.discard(owner)
            raise
        try:
            while True:
                served = self._serve_hits(hits, by_key, progress)
                stale = [k for k in hits if k not in served]  # an unusable stored answer: ask again, replace it
                self._replace_keys.update(stale)
                todo = mine + stale
                if todo:
                    self._call_keys(todo, by_key, attempt, progress)
                if not others:
                    return
                time.sleep(CLAIM_POLL_S)
                hits, mine, others = self.cache.claim(others, owner)
        finally:
            try:
                self._store_answers(release=todo, owner=owner)
            except BaseException:
                try:
                    self.cache.release_claims(owner)
                except Exception:  # noqa: BLE001 - LIVE_OWNERS below lets this process take them over
                    pass
                raise
            finally:
                LIVE_OWNERS.discard(owner)

    def _serve_hits(self, hits: dict[str, dict[str, Any]], by_key: dict[str, list[_State]],
                    progress: BatchProgress) -> set[str]:
        served = set()
        for key, hit in hits.items():
            if not usable(hit):
                continue
            served.add(key)
            resp = BackendResponse(texts=hit["texts"], tokens_in=hit["tokens_in"], tokens_out=hit["tokens_out"],
                                   meta=hit.get("meta", {}))
            for s in by_key[key]:
                self._finish(s, resp, True, progress)
        return served

    def _call_keys(self, keys: list[str], by_key: dict[str, list[_State]], attempt: int,
                   progress: BatchProgress) -> None:
        groups: dict[int, list[tuple[_State, str]]] = {}
        for key in keys:
            s = by_key[key][0]
            groups.setdefault(id(s.backend), []).append((s, key))
        if len(groups) == 1:
            self._run_group(next(iter(groups.values())), attempt, progress, by_key)
        elif groups:   # the first group here, the others on the client's pool (threads reused across batches)
            first, *rest = groups.values()
            futures = [self._group_pool().submit(self._run_group, g, attempt, progress, by_key) for g in rest]
            error: BaseException | None = None
            try:
                self._run_group(first, attempt, progress, by_key)
            except BaseException as err:  # noqa: BLE001 - raised below, once every group has ended
                error = err
            for fut in futures:
                try:
                    fut.result()
                except BaseException as err:  # noqa: BLE001
                    error = error or err
            if error is not None:
                raise error

    def _group_pool(self) -> ThreadPoolExecutor:
        """Threads for a batch's other backends (a judge panel of three models is three groups per batch):
        made once per client, not per batch (issue 24: a thread started per group and batch). Each group
        blocks until its own backend answers and submits nothing here, so a busy pool only queues."""
        with self._lock:
            if self._groups is None:
                self._groups = ThreadPoolExecutor(max_workers=GROUP_THREADS, thread_name_prefix="wse-llm")
            return self._groups

    def _run_group(self, group: list[tuple[_State, str]], attempt: int, progress: BatchProgress,
                   by_key: dict[str, list[_State]]) -> None:
        backend = group[0][0].backend
        calls = [BackendCall(model_id=s.model.model_id, messages=s.req.messages, sampling=s.sampling, n=s.req.n,
                             seed=attempt_seed(s.sampling.seed, s.request_key, attempt), json_schema=s.schema,
                             choices=s.req.choices, role=s.req.role, attempt=attempt, priority=s.priority)
                 for s, _ in group]
        handled: set[int] = set()
        handled_lock = threading.Lock()

        def on_result(i: int, resp: BackendResponse) -> None:
            with handled_lock:
                if i in handled:
                    return
                handled.add(i)
            state, key = group[i]
            if resp.error is None and len(resp.texts) == state.req.n:
                value = {"texts": resp.texts, "tokens_in": resp.tokens_in, "tokens_out": resp.tokens_out,
                         "latency_s": round(resp.latency_s, 4)}
                if resp.meta:
                    value["meta"] = resp.meta
                if usable(value):  # failed, empty or filtered answers are never stored
                    self._queue_answer(key, value, replace=not self.use_cache or key in self._replace_keys)
            twins = by_key.get(key, [state])
            self._finish(twins[0], resp, False, progress)
            for twin in twins[1:]:
                self._finish(twin, resp, True, progress)

        TALLY.sending(len(calls))   # calls in flight to a model in this process (parallel_runs reads it)
        trace.batch_stamp("call")
        try:
            responses = backend.generate(calls, on_result=on_result)
        except (BackendUnavailable, LLMInfrastructureError):
            TALLY.sending(-len(calls))
            raise  # a setup/infrastructure problem (runtime missing, cache or records unwritable)
        except Exception as err:  # a backend bug must not kill the batch: the calls become failures
            log.exception("backend %s crashed on a batch of %d calls", backend.name, len(calls))
            responses = [BackendResponse(error=f"{type(err).__name__}: {err}") for _ in calls]
        except BaseException:
            TALLY.sending(-len(calls))
            raise
        TALLY.sending(-len(calls))
        trace.batch_stamp("woke")
        for i, resp in enumerate(responses):
            on_result(i, resp)
        for i in range(len(group)):
            on_result(i, BackendResponse(error="backend returned no response for this call"))

    # ---- validation and accounting -----------------------------------------------------
    def _judge(self, s: _State, resp: BackendResponse) -> tuple[str | None, str, str | None, list[Any], list[str],
                                                                list[str | None]]:
        """(error_kind, message, raw_text, outputs, answers, reasoning) of one response."""
        req, meta = s.req, resp.meta or {}
        if resp.error is not None or len(resp.texts) != req.n:
            kind = "infrastructure" if resp.infrastructure else "transport"
            return kind, redact_text(resp.error) or f"backend returned {len(resp.texts)} texts for n={req.n}", \
                None, [], [], []
        provider = list(meta.get("reasoning") or [])
        answers, reasoning = [], []
        for i, text in enumerate(resp.texts):
            answer, thought = split_reasoning(text)
            given = provider[i] if i < len(provider) else None
            answers.append(answer.lstrip() if given else answer)  # the provider already split it off
            parts = [p for p in (given, thought) if p]
            reasoning.append("\n".join(parts) or None)
        cut = int(meta.get("prompt_truncated_tokens") or 0)
        if cut and not s.model.allow_input_truncation:
            return ("input_truncated", f"the prompt was shortened by {cut} tokens to fit the context window "
                    f"(set models.{req.model}.allow_input_truncation: true to accept cut prompts)",
                    None, [], answers, reasoning)
        reasons = list(meta.get("finish_reasons") or [])
        if "content_filter" in reasons:  # withheld or cut by the provider's filter: never an answer
            i = reasons.index("content_filter")
            return ("content_filter", "the provider's content filter withheld the answer (finish reason "
                    "'content_filter')", resp.texts[i] if i < len(resp.texts) else None, [], answers, reasoning)
        outputs: list[Any] = []
        for i, answer in enumerate(answers):
            parsed = parse_sample(answer, req.output_model, req.choices)
            cut_off = i < len(reasons) and reasons[i] == "length"
            # a closed choice is decided by its first word: a cut explanation after it does not matter
            if cut_off and not req.allow_truncated and not (parsed.ok and req.choices is not None):
                parsed = Parsed(False, error_kind="truncated", message="answer cut by the token limit "
                                f"(max_tokens={s.sampling.max_tokens}, finish reason 'length')")
            if not parsed.ok and req.per_sample:   # this sample is recorded as invalid; the others stand
                outputs.append(SampleFailure(error_kind=parsed.error_kind, message=parsed.message,
                                             raw_text=resp.texts[i]))
                continue
            if not parsed.ok:
                return parsed.error_kind, parsed.message, resp.texts[i], [], answers, reasoning
            outputs.append(parsed.value)
        return None, "", None, outputs, answers, reasoning

    def _finish(self, s: _State, resp: BackendResponse, cache_hit: bool, progress: BatchProgress) -> None:
        req, meta = s.req, resp.meta or {}
        error_kind, message, raw, outputs, answers, reasoning = self._judge(s, resp)
        cost = 0.0 if cache_hit else self._cost(s.model, resp)
        with self._lock:  # the same request made again in this run gets its own, still stable, id
            seen = self._occurrences.get((s.request_key, s.attempt), 0)
            self._occurrences[(s.request_key, s.attempt)] = seen + 1
        id_src = f"{self.run_id}\x1f{s.request_key}\x1f{s.attempt}" + (f"\x1f{seen}" if seen else "") \
            + (f"\x1f{self.scope}\x1f{self.partition_key}" if self.scope else "")
        call_id = hashlib.sha256(id_src.encode()).hexdigest()[:32]
        reasons = [r for r in (meta.get("finish_reasons") or []) if r]
        thoughts = [r for r in reasoning if r]
        record = {
            "call_id": call_id, "run_id": self.run_id, "partition_key": self.partition_key,
            "role": req.role, "model": req.model, "backend": s.backend.name,
            "backend_model": s.model.backend_model, "prompt_version": req.prompt_version,
            "request_key": s.request_key, "attempt": s.attempt, "n_samples": req.n,
            "tokens_in": resp.tokens_in, "tokens_out": resp.tokens_out,
            "latency_s": 0.0 if cache_hit else resp.latency_s, "cost_usd": cost, "cache_hit": cache_hit,
            "valid": error_kind is None, "error_kind": error_kind,
            "created_at": datetime.now(timezone.utc).replace(tzinfo=None),
            "finish_reason": "length" if "length" in reasons else (reasons[0] if reasons else None),
            "prompt_truncated_tokens": int(meta.get("prompt_truncated_tokens") or 0),
            "reasoning": "\n\n---\n\n".join(thoughts) if thoughts else None,
            "reasoning_tokens": meta.get("reasoning_tokens"),
            "endpoint": _shown_endpoint(meta.get("endpoint")),   # no credential of a URL is stored
        }
        with self._lock:
            if self._sink is not None:
                self._journal_write([{"t": "record", "row": record}])
            self._records.append(record)
            if meta.get("prompt_truncated_tokens"):
                self.truncated_prompts.append({"call_id": call_id, "role": req.role,
                                               "tokens_removed": meta["prompt_truncated_tokens"]})
            s.call_ids.append(call_id)
            s.all_hits = s.all_hits and cache_hit
            s.tokens_in += resp.tokens_in
            s.tokens_out += resp.tokens_out
            s.texts = answers
            if error_kind is None:
                s.outputs, s.done = outputs, True
            elif error_kind in ("infrastructure", "transport"):  # no result: the run fails, the next one retries
                s.infra_error, s.infra_kind, s.done = message, error_kind, True
            elif error_kind == "input_truncated" or s.attempt >= self._attempts(s.model):
                s.failure = LLMFailure(role=req.role, model=req.model, error_kind=error_kind, message=message,
                                       raw_text=raw, attempts=s.attempt)
                s.done = True
                log.warning("LLM %s/%s failed after %d attempt(s): %s: %s", req.role, req.model, s.attempt,
                            error_kind, message)
            if s.done:
                progress.advance(failed=s.failure is not None or s.infra_error is not None)
                TALLY.add(s.all_hits, s.failure is not None or s.infra_error is not None)
        self._flush_soon()

    def _flush_soon(self) -> None:
        """A due batch of records is written by a helper thread, never by the backend's event loop."""
        if self._sink is None:
            return
        if asyncio._get_running_loop() is None:  # not on a backend's event loop: write here, as before
            self._maybe_flush()
            return
        with self._lock:
            if not self._flush_due() or self._flush_pending:
                return
            self._flush_pending = True

        def run() -> None:
            try:
                self._maybe_flush()
            finally:
                with self._lock:
                    self._flush_pending = False
        self._flushing = _record_writer().submit(run)

    @staticmethod
    def _cost(model: ResolvedModel, resp: BackendResponse) -> float | None:
        if model.price_in is not None or model.price_out is not None:
            return resp.tokens_in * (model.price_in or 0.0) + resp.tokens_out * (model.price_out or 0.0)
        return resp.cost_usd
