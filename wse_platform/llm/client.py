"""`LLMClient`: the single path from a role's request to validated outputs.

Per batch it: resolves each request's model and backend, derives a content key,
answers what the cache already holds, sends the rest to the backends (one batch per
backend, different backends concurrently), caches every answer as it arrives,
validates each sample (after removing any reasoning block), retries invalid or truncated
answers with the next attempt index (a new seed and a new cache entry), and records one
accounting row per attempt, handed to `record_sink` in small batches as calls complete
(so a killed process keeps the accounting of what it already paid for).

Failure kinds: model failures (invalid, truncated, input_truncated, transport) become
`LLMResult.failure` and are part of the benchmark. Infrastructure failures (missing key,
authentication, unreachable server, cache/record I/O) raise `LLMInfrastructureError`
after the batch's records are written: they must never become results. Transient
transport errors (429, timeouts, 5xx) are retried with backoff by the backend (litellm's
Router); one still failing after that is a recorded `transport` failure of that request.
"""
from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from wse_platform.llm.backends import (Backend, BackendCall, BackendResponse, BackendUnavailable, attempt_seed,
                                      make_backend)
from wse_platform.llm.cache import ResponseCache, content_key
from wse_platform.llm.errors import LLMInfrastructureError
from wse_platform.llm.progress import BatchProgress, ProgressFn
from wse_platform.llm.types import LLMFailure, LLMRequest, LLMResult, SampleFailure, Sampling
from wse_platform.llm.validation import Parsed, parse_sample, schema_of, split_reasoning

if TYPE_CHECKING:  # config imports llm.types, so the client imports config lazily
    from wse_platform.config import Settings

log = logging.getLogger("wse_platform.llm")

MAX_ATTEMPTS = 3


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

    def result(self) -> LLMResult:
        return LLMResult(role=self.req.role, model=self.req.model, outputs=self.outputs, texts=self.texts,
                         failure=self.failure, attempts=self.attempt, call_ids=self.call_ids,
                         cache_hit=self.all_hits, tokens_in=self.tokens_in, tokens_out=self.tokens_out)


class LLMClient:
    def __init__(self, settings: "Settings", run_id: str | None = None, partition_key: str | None = None,
                 use_cache: bool | None = None, backends: dict[str, Backend] | None = None,
                 progress: ProgressFn | bool | None = None, max_attempts: int | None = None,
                 record_sink: Callable[[list[dict[str, Any]]], Any] | None = None, flush_every: int = 25,
                 flush_interval_s: float = 2.0, scope: str | None = None):
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
        self._models: dict[str, ResolvedModel] = {}
        self._cache: ResponseCache | None = None
        self._records: list[dict[str, Any]] = []
        self._occurrences: dict[tuple[str, int], int] = {}
        self.truncated_prompts: list[dict[str, Any]] = []  # prompts a backend shortened to fit its context
        self._lock = threading.Lock()
        self._sink = record_sink          # e.g. lambda rows: write_call_records(warehouse, rows)
        self.flush_every, self.flush_interval_s = max(1, flush_every), flush_interval_s
        self._flushed = 0                 # records[:_flushed] were handed to the sink
        self._last_flush = time.monotonic()
        self._flush_lock = threading.Lock()

    # ---- public API ------------------------------------------------------------------
    def complete(self, req: LLMRequest) -> LLMResult:
        return self.complete_many([req])[0]

    def complete_many(self, reqs: list[LLMRequest]) -> list[LLMResult]:
        """Answer every request; results come back in request order."""
        states = [self._prepare(r) for r in reqs]
        if not states:
            return []
        roles = sorted({s.req.role for s in states})
        progress = BatchProgress(len(states), f"LLM {','.join(roles)[:60]}",
                                 self.progress if callable(self.progress) else None,
                                 enabled=self.progress is not False)
        try:
            pending = states
            for attempt in range(1, max(self._attempts(s.model) for s in states) + 1):
                if not pending:
                    break
                self._run_attempt(pending, attempt, progress)
                self._raise_infrastructure(pending)
                pending = [s for s in pending if not s.done]
        finally:
            progress.close()
        return [s.result() for s in states]

    def _raise_infrastructure(self, pending: list[_State]) -> None:
        broken = [s for s in pending if s.infra_error]
        if not broken:
            return
        self.flush_records()
        models = sorted({s.req.model for s in broken})
        raise LLMInfrastructureError(
            f"{len(broken)} of {len(pending)} LLM call(s) to model(s) {models} could not be made: "
            f"{broken[0].infra_error}. This is an infrastructure problem, not a model failure: no result "
            "was recorded for these calls; fix it and rerun (the cache keeps every answer already received).")

    def flush_records(self) -> None:
        """Hand the records not yet written to the sink (the session calls it when a step ends)."""
        self._maybe_flush(force=True)

    def _maybe_flush(self, force: bool = False) -> None:
        if self._sink is None:
            return
        with self._lock:
            waiting = len(self._records) - self._flushed
            due = waiting > 0 and (force or waiting >= self.flush_every
                                   or time.monotonic() - self._last_flush >= self.flush_interval_s)
        if not due or not self._flush_lock.acquire(blocking=force):
            return  # another thread is writing; the next completed call flushes the rest
        try:
            with self._lock:
                batch, upto = self._records[self._flushed:], len(self._records)
            if batch:
                try:
                    self._sink(batch)
                except LLMInfrastructureError:
                    raise
                except Exception as err:
                    raise LLMInfrastructureError(f"could not write {len(batch)} LLM call record(s): "
                                                 f"{type(err).__name__}: {err}") from err
            with self._lock:
                self._flushed = max(self._flushed, upto)
                self._last_flush = time.monotonic()
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

    @property
    def cache(self) -> ResponseCache:
        if self._cache is None:
            self._cache = ResponseCache(self.settings.cache)
        return self._cache

    def backend(self, model_name: str) -> Backend:
        self._resolve(model_name)
        return self._backends[model_name]

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None

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
        sampling = req.sampling.merged_over(model.sampling)
        schema, schema_json = schema_of(req.output_model) if req.output_model is not None else (None, None)
        request_key = content_key(backend.cache_namespace(), model.model_id, model.revision, model.quantization,
                                  req.messages, sampling.model_dump(), req.n, schema_json, req.choices)
        return _State(req, model, backend, sampling, schema, request_key)

    # ---- one attempt over all pending requests ---------------------------------------
    def _run_attempt(self, pending: list[_State], attempt: int, progress: BatchProgress) -> None:
        keys = [content_key(s.request_key, attempt) for s in pending]
        hits = self.cache.get_many(keys) if self.use_cache else {}
        groups: dict[int, list[tuple[_State, str]]] = {}
        followers: dict[str, list[_State]] = {}  # identical requests in one batch: one backend call
        for s, key in zip(pending, keys):
            s.attempt = attempt
            hit = hits.get(key)
            if hit is not None:
                self._finish(s, BackendResponse(texts=hit["texts"], tokens_in=hit["tokens_in"],
                                                tokens_out=hit["tokens_out"], meta=hit.get("meta", {})),
                             True, progress)
            elif key in followers:
                followers[key].append(s)
            else:
                followers[key] = []
                groups.setdefault(id(s.backend), []).append((s, key))
        if not groups:
            return
        if len(groups) == 1:
            self._run_group(next(iter(groups.values())), attempt, progress, followers)
            return
        with ThreadPoolExecutor(max_workers=len(groups), thread_name_prefix="wse-llm") as pool:
            for fut in [pool.submit(self._run_group, g, attempt, progress, followers) for g in groups.values()]:
                fut.result()

    def _run_group(self, group: list[tuple[_State, str]], attempt: int, progress: BatchProgress,
                   followers: dict[str, list[_State]]) -> None:
        backend = group[0][0].backend
        calls = [BackendCall(model_id=s.model.model_id, messages=s.req.messages, sampling=s.sampling, n=s.req.n,
                             seed=attempt_seed(s.sampling.seed, s.request_key, attempt), json_schema=s.schema,
                             choices=s.req.choices, role=s.req.role, attempt=attempt) for s, _ in group]
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
                self.cache.put(key, value, replace=not self.use_cache)
            self._finish(state, resp, False, progress)
            for twin in followers.get(key, ()):
                self._finish(twin, resp, True, progress)

        try:
            responses = backend.generate(calls, on_result=on_result)
        except (BackendUnavailable, LLMInfrastructureError):
            raise  # a setup/infrastructure problem (runtime missing, cache or records unwritable)
        except Exception as err:  # a backend bug must not kill the batch: the calls become failures
            log.exception("backend %s crashed on a batch of %d calls", backend.name, len(calls))
            responses = [BackendResponse(error=f"{type(err).__name__}: {err}") for _ in calls]
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
            return kind, resp.error or f"backend returned {len(resp.texts)} texts for n={req.n}", None, [], [], []
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
            "endpoint": meta.get("endpoint"),
        }
        with self._lock:
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
            elif error_kind == "infrastructure":
                s.infra_error, s.done = message, True
            elif error_kind in ("transport", "input_truncated") or s.attempt >= self._attempts(s.model):
                s.failure = LLMFailure(role=req.role, model=req.model, error_kind=error_kind, message=message,
                                       raw_text=raw, attempts=s.attempt)
                s.done = True
                log.warning("LLM %s/%s failed after %d attempt(s): %s: %s", req.role, req.model, s.attempt,
                            error_kind, message)
            if s.done:
                progress.advance(failed=s.failure is not None or s.infra_error is not None)
        self._maybe_flush()

    @staticmethod
    def _cost(model: ResolvedModel, resp: BackendResponse) -> float | None:
        if model.price_in is not None or model.price_out is not None:
            return resp.tokens_in * (model.price_in or 0.0) + resp.tokens_out * (model.price_out or 0.0)
        return resp.cost_usd
