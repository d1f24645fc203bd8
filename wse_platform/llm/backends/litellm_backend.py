"""Any provider litellm speaks (OpenAI, Anthropic, Gemini, OpenRouter, a vLLM server...).

Calls run on one background asyncio loop (litellm's async HTTP clients must stay on
one loop) through a litellm `Router` with one deployment per configured endpoint
(`api_base` may be a list): litellm spreads the requests (`router.routing_strategy`,
default simple-shuffle; least-busy with `endpoint_concurrency`, which caps in-flight
requests at that many per endpoint), cools a failing endpoint down and retries on another
one (the survivors then absorb its share), and retries 429 / timeouts /
5xx with its own backoff (`extra.max_retries`, `extra.retry_base_s`, `extra.timeout_s`).
After those retries, errors are classified (see `classify`): missing key, 401/403/404 and
no reachable server are infrastructure failures (the client fails the run); 429, timeouts,
5xx and other provider errors are a `transport` failure of that request. The API key is
read from the environment variable the config names; it is checked before every call and
never logged, cached or written.

The request body, the structured-output mode (here with litellm's own `supports_response_schema`),
the key lookup and the scrubbing of error texts are shared with the direct path (chat_request.py).
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from wse_platform.llm.backends.aio import Got, run_batch
from wse_platform.llm.backends.base import Backend, BackendCall, BackendResponse, OnResult, sample_seed
from wse_platform.llm.backends.chat_request import api_key, build_kwargs, scrub, structured_mode
from wse_platform.llm.reasoning import litellm_kwargs as reasoning_kwargs
from wse_platform.redact import redact_url

if TYPE_CHECKING:
    from wse_platform.config import ModelConfig

log = logging.getLogger("wse_platform.llm")


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch at import
    import litellm
    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


_INFRA_ERRORS = ("AuthenticationError", "PermissionDeniedError", "NotFoundError", "APIConnectionError")
MODEL_GROUP = "wse"
_NO_SERVER = {"ConnectError", "ClientConnectorError", "ClientConnectorDNSError", "gaierror"}  # refused / no host


def classify(err: BaseException, litellm: Any) -> bool:
    """True when an error (after litellm's retries) is infrastructure, not this request's failure."""
    if isinstance(err, LookupError):
        return True  # the API key variable is not set
    transient = tuple(getattr(litellm, n) for n in ("Timeout", "RateLimitError") if hasattr(litellm, n))
    if transient and isinstance(err, transient):  # litellm's Timeout subclasses APIConnectionError
        return False
    infra = tuple(getattr(litellm, n) for n in _INFRA_ERRORS if hasattr(litellm, n))
    if infra and isinstance(err, infra):
        return True
    # litellm reports a refused connection as InternalServerError("Connection error."): look at the cause
    seen: set[int] = set()
    x: BaseException | None = err
    while x is not None and id(x) not in seen:
        seen.add(id(x))
        if isinstance(x, ConnectionRefusedError) or type(x).__name__ in _NO_SERVER:
            return True
        x = x.__cause__ or x.__context__
    return False


class LiteLLMBackend(Backend):
    name = "litellm"

    def __init__(self, model: "ModelConfig", max_concurrency: int = 8):
        self.model = model
        self.litellm = _litellm()
        self.mode = structured_mode(model, lambda m: self.litellm.supports_response_schema(model=m))
        self.endpoints: list[str] = list(getattr(model, "api_bases", None) or
                                         ([model.api_base] if isinstance(model.api_base, str) else []))
        self.per_endpoint: int | None = getattr(model, "endpoint_concurrency", None)
        if self.per_endpoint:  # in flight: per endpoint x endpoints, spread by least-busy routing
            max_concurrency = self.per_endpoint * max(1, len(self.endpoints))
        self.max_concurrency = max_concurrency
        self.max_retries = int(model.extra.get("max_retries", 5))
        self.retry_base_s = float(model.extra.get("retry_base_s", 1.0))
        self.timeout_s = float(model.extra.get("timeout_s", 600.0))
        self.reasoning: str | None = getattr(model, "reasoning", None)
        self.n_calls = 0
        # one in-flight limit per endpoint (set) across runs and processes: see limiter.py
        from wse_platform.llm.limiter import limiter_for
        self.limiter = limiter_for("|".join(sorted(self.endpoints)) or self.model.model_id.split("/")[0],
                                   self.max_concurrency)
        self._router: Any = None

    def cache_namespace(self) -> str:
        # the structured-output mode and the reasoning mode change what is asked; "fr": entries carry
        # finish reasons (older entries could not tell a cut answer from a complete one)
        return f"litellm:fr:{self.mode}" + (f":reasoning={self.reasoning}" if self.reasoning else "")

    # ---- credentials: checked per call, never logged ---------------------------------------
    def _key(self) -> str | None:
        return api_key(self.model, "no-key" if self.endpoints else None)

    def _scrub(self, text: str) -> str:
        return scrub(self.model, text)

    def router(self) -> Any:
        """The litellm Router over this model's endpoints (built on first use, on the loop)."""
        if self._router is None:
            deployments = []
            for base in self.endpoints or [None]:
                params: dict[str, Any] = {"model": self.model.model_id, "timeout": self.timeout_s}
                if base:
                    params["api_base"] = base
                key = self._key()
                if key:
                    params["api_key"] = key
                deployments.append({"model_name": MODEL_GROUP, "litellm_params": params,
                                    "model_info": {"id": base or self.model.model_id}})
            # litellm's own max_parallel_requests rejects (429) instead of queueing, so the cap is
            # our semaphore and least-busy routing keeps each endpoint near its share of it
            options = {"routing_strategy": "least-busy" if self.per_endpoint else "simple-shuffle",
                       "allowed_fails": 1, "cooldown_time": 30.0, **dict(getattr(self.model, "router", None) or {})}
            self._router = self.litellm.Router(model_list=deployments, num_retries=self.max_retries,
                                               retry_after=self.retry_base_s, timeout=self.timeout_s, **options)
        return self._router

    # ---- batch ---------------------------------------------------------------------------
    def generate(self, calls: list[BackendCall], on_result: OnResult | None = None) -> list[BackendResponse]:
        return run_batch(calls, on_result, self._limited_call)

    async def _limited_call(self, call: BackendCall) -> BackendResponse:
        async with self.limiter.slot(call.priority):   # the request with litellm's own retries holds one endpoint slot
            return await self._call(call)

    async def _call(self, call: BackendCall) -> BackendResponse:
        t0 = time.monotonic()
        try:
            self._key()  # a missing key is reported before anything is sent
            kwargs = dict(build_kwargs(call, self.mode, self.model.model_id), model=MODEL_GROUP)
            extra = reasoning_kwargs(self.model.model_id, self.reasoning, self.endpoints)
            if "extra_body" in extra:
                kwargs["extra_body"] = {**kwargs.get("extra_body", {}), **extra.pop("extra_body")}
            kwargs.update(extra)
            try:
                got = await self._request(kwargs, call.model_id)
            except self.litellm.BadRequestError:
                if call.n == 1:
                    raise
                got = Got()  # provider rejects n: one request per sample
            for k in range(len(got.texts), call.n):  # some servers ignore n: fill the missing samples
                got.add(await self._request(dict(kwargs, n=1, seed=sample_seed(call.seed, k)), call.model_id))
        except Exception as err:  # after retries: a failed response, never an exception
            return BackendResponse(error=self._scrub(f"{type(err).__name__}: {err}"),
                                   latency_s=time.monotonic() - t0, infrastructure=classify(err, self.litellm))
        return BackendResponse(texts=got.texts[: call.n], tokens_in=got.tokens_in, tokens_out=got.tokens_out,
                               latency_s=time.monotonic() - t0, cost_usd=got.cost, meta=got.meta(call.n))

    async def _request(self, kwargs: dict[str, Any], model_id: str) -> Got:
        self.n_calls += 1
        # timeout_s bounds each attempt from connect to last byte (httpx's own timeout is per read:
        # a server trickling one byte at a time never trips it); the whole request is bounded by
        # the attempts' deadlines plus the backoff between them
        budget = (self.max_retries + 1) * self.timeout_s + self.retry_base_s * (2 ** min(self.max_retries, 6))
        try:
            resp = await asyncio.wait_for(self.router().acompletion(**kwargs), budget)
        except asyncio.TimeoutError:
            raise self.litellm.Timeout(message=f"no complete answer within {budget:g} s (timeout_s="
                                       f"{self.timeout_s:g} per attempt)", model=model_id,
                                       llm_provider="litellm") from None
        got = Got()
        for c in resp.choices:
            got.texts.append(c.message.content or "")
            got.finish.append(getattr(c, "finish_reason", None))
            got.reasoning.append(getattr(c.message, "reasoning_content", None) or None)
        usage = getattr(resp, "usage", None)
        got.tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        got.tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        details = getattr(usage, "completion_tokens_details", None)
        if getattr(details, "reasoning_tokens", None) is not None:
            got.reasoning_tokens = int(details.reasoning_tokens)
        hidden = getattr(resp, "_hidden_params", None) or {}
        got.endpoint = redact_url(hidden.get("api_base")) or (hidden.get("model_id") if self.endpoints else None)
        cost = hidden.get("response_cost")
        if cost is None:
            try:
                cost = float(self.litellm.completion_cost(completion_response=resp, model=model_id))
            except Exception:  # unknown price (local servers, unmapped models)
                cost = None
        got.cost = None if cost is None else float(cost)
        return got
