"""The direct path to ONE OpenAI-compatible server (vLLM, llama.cpp, SGLang...): `/chat/completions`
over aiohttp, without litellm.

Used for `backend: litellm` models whose `model_id` is `openai/...` or `hosted_vllm/...` with a
single `api_base` and no `router` options: litellm adds nothing there (no provider translation,
no routing) but costs ~5 ms of CPU per call and seconds of import. Everything else (API
providers, several endpoints behind a Router) stays on litellm (litellm_backend.py). Both send
the same request body and share the cache namespace (chat_request.py), so switching paths keeps
the cache.

Transport: one aiohttp session per backend on the LLM loop (aio.py), at most the endpoint limit + 4
connections kept alive, closed with the client. On httpx our client spent 3.5 ms of CPU per call at
256 in flight (httpcore's pool re-scans its connections on every event), on aiohttp 1.1 ms
(bench/fleet_capacity.py, idle machine). https uses httpx's CA bundle (certifi), as before.

Per attempt: one slot of the endpoint's cross-process limiter (limiter.py) is held, and
`timeout_s` is a deadline for the whole exchange (connect to last byte): a server that sends
headers and then trickles bytes is cut off at `timeout_s`. Retried with exponential backoff
(`retry_base_s` x 2^k, or the server's Retry-After up to 30 s, `max_retries` times): 408, 409,
429, 5xx, timeouts, connection errors, a 200 that is not a chat completion (an HTML page, no
`choices`). After the retries the call is a `transport` failure; 401/403/404, a refused
connection and credentials in the URL are `infrastructure` at once. The client fails the run on
both (no result); see client.py.
"""
from __future__ import annotations

import asyncio
import json
import logging
import random
import time
import weakref
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from wse_platform.llm import trace
from wse_platform.llm.backends import pricing
from wse_platform.llm.backends.aio import Got, run_batch
from wse_platform.llm.backends.base import Backend, BackendCall, BackendResponse, OnResult, sample_seed
from wse_platform.llm.backends.chat_request import api_key, build_kwargs, scrub, structured_mode
from wse_platform.llm.limiter import limiter_for
from wse_platform.llm.reasoning import litellm_kwargs as reasoning_kwargs
from wse_platform.redact import redact_url

if TYPE_CHECKING:
    from wse_platform.config import ModelConfig

log = logging.getLogger("wse_platform.llm")

PREFIXES = ("openai/", "hosted_vllm/")
_RETRY_STATUS = {408, 409, 425, 429}
_INFRA_STATUS = {401, 403, 404}
_MAX_RETRY_AFTER_S = 30.0


def is_direct(model: "ModelConfig") -> bool:
    """True when the model is one OpenAI-compatible server that the direct path can serve."""
    return (model.model_id.startswith(PREFIXES) and len(model.api_bases) == 1
            and not dict(getattr(model, "router", None) or {}))


class _Failed(Exception):
    def __init__(self, message: str, retry: bool, infrastructure: bool = False, retry_after: float | None = None,
                 final: bool = False):
        super().__init__(message)
        self.retry, self.infrastructure, self.retry_after, self.final = retry, infrastructure, retry_after, final


class OpenAIHTTPBackend(Backend):
    name = "litellm"  # the config's backend kind (llm_calls.backend); the path is an implementation detail

    def __init__(self, model: "ModelConfig", max_concurrency: int = 8):
        self.model = model
        # the same default the litellm path picks from the same model map (the cache namespace depends on it)
        self.mode = structured_mode(model, pricing.supports_response_schema)
        self.base = model.api_bases[0].rstrip("/")
        self.endpoints = [model.api_bases[0]]
        self._shown = redact_url(self.endpoints[0])   # the endpoint as recorded (no credential)
        parts = urlsplit(self.base)
        self._setup_error = None
        if parts.username or parts.password:
            self._setup_error = (f"models.{model.model_id}: the api_base carries credentials (user:password@host); "
                                 "they are not sent. Remove them from the URL and put the key in the environment "
                                 "variable named by api_key_env")
        self.url = self.base + "/chat/completions"
        self.wire_model = model.model_id.split("/", 1)[1]
        self.per_endpoint: int | None = getattr(model, "endpoint_concurrency", None)
        self.max_concurrency = self.per_endpoint or max_concurrency
        self.max_retries = int(model.extra.get("max_retries", 5))
        self.retry_base_s = float(model.extra.get("retry_base_s", 1.0))
        self.timeout_s = float(model.extra.get("timeout_s", 600.0))
        self.reasoning: str | None = getattr(model, "reasoning", None)
        self._extra = reasoning_kwargs(model.model_id, self.reasoning, self.endpoints)
        self.limiter = limiter_for(self.base, self.max_concurrency)
        self.n_calls = 0
        self._http: Any = None          # the aiohttp session, made on the loop that uses it
        self._http_loop: Any = None
        self._closer: Any = None
        self._proxy: str | None = None  # HTTP(S)_PROXY / NO_PROXY, read when the session is made (as httpx did)

    def cache_namespace(self) -> str:  # identical to LiteLLMBackend's: the cache is shared by both paths
        return f"litellm:fr:{self.mode}" + (f":reasoning={self.reasoning}" if self.reasoning else "")

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key(self.model)}", "Content-Type": "application/json"}

    def _session(self) -> Any:
        """This backend's aiohttp session on the running loop (made on first use; at most the endpoint
        limit + 4 connections, kept alive)."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._http_loop is not loop or self._http.closed:
            import aiohttp
            ssl: Any = True   # aiohttp's default verification
            if self.base.startswith("https:"):
                import httpx   # the CA bundle the httpx-based path used (certifi's), one context per backend
                ssl = httpx.create_ssl_context()
            # idle connections are dropped after 4 s, before servers drop theirs (uvicorn, i.e. vLLM: 5 s),
            # so a request is rarely sent on a connection the server is closing
            connector = aiohttp.TCPConnector(limit=self.max_concurrency + 4, ssl=ssl, keepalive_timeout=4.0)
            self._http = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=self.timeout_s))
            self._proxy = _env_proxy(self.base)
            self._http_loop = loop
            if self._closer is not None:
                self._closer.detach()
            self._closer = weakref.finalize(self, _close_session, self._http, loop)
        return self._http

    def close(self) -> None:
        """Close the session's connections (a later call opens a new one)."""
        if self._closer is not None:
            self._closer()
            self._closer = self._http = self._http_loop = None

    # ---- batch -----------------------------------------------------------------------------
    def generate(self, calls: list[BackendCall], on_result: OnResult | None = None) -> list[BackendResponse]:
        return run_batch(calls, on_result, self._call)   # each attempt holds an endpoint slot (_request)

    def _body(self, call: BackendCall) -> dict[str, Any]:
        body = build_kwargs(call, self.mode, self.model.model_id)
        body["model"] = self.wire_model
        extra = dict(body.pop("extra_body", None) or {})
        for k, v in self._extra.items():
            if k == "extra_body":
                extra.update(v)
            else:
                body[k] = v
        body.update(extra)  # what the openai SDK does with extra_body: merged into the JSON body
        return body

    async def _call(self, call: BackendCall) -> BackendResponse:
        t0 = time.monotonic()
        try:
            if self._setup_error:
                raise _Failed(self._setup_error, retry=False, infrastructure=True)
            headers = self._headers()
            body = self._body(call)
            try:
                got = await self._request(body, headers, call.priority)
            except _Failed as err:
                if call.n == 1 or err.infrastructure or err.retry or err.final:
                    raise
                got = Got()  # the server rejects n: one request per sample
            for k in range(len(got.texts), call.n):  # some servers ignore n: fill the missing samples
                got.add(await self._request(dict(body, n=1, seed=sample_seed(call.seed, k)), headers, call.priority))
        except LookupError as err:
            return BackendResponse(error=str(err), latency_s=time.monotonic() - t0, infrastructure=True)
        except _Failed as err:
            return BackendResponse(error=scrub(self.model, str(err)), latency_s=time.monotonic() - t0,
                                   infrastructure=err.infrastructure)
        got.endpoint = self._shown
        return BackendResponse(texts=got.texts[: call.n], tokens_in=got.tokens_in, tokens_out=got.tokens_out,
                               latency_s=time.monotonic() - t0,
                               cost_usd=pricing.cost(self.model.model_id, got.tokens_in, got.tokens_out), meta=got.meta(call.n))

    async def _request(self, body: dict[str, Any], headers: dict[str, str], priority: int = 0) -> Got:
        last: _Failed | None = None
        for k in range(self.max_retries + 1):
            if k:
                wait = self.retry_base_s * (2 ** (k - 1)) * (0.75 + 0.5 * random.random())
                if last is not None and last.retry_after is not None:
                    wait = max(wait, last.retry_after)
                await asyncio.sleep(min(wait, _MAX_RETRY_AFTER_S))
            try:
                trace.stamp("ask")
                async with self.limiter.slot(priority):
                    trace.stamp("slot")
                    self.n_calls += 1
                    got = await self._once(body, headers)
                    trace.stamp("answer")
                trace.stamp("release")
                return got
            except _Failed as err:
                if not err.retry:
                    raise
                last = err
        assert last is not None
        raise _Failed(f"{last} (after {self.max_retries} retries)", retry=False, final=True,
                      infrastructure=last.infrastructure)  # still refused: no server there

    async def _once(self, body: dict[str, Any], headers: dict[str, str]) -> Got:
        """One exchange; the session's total timeout (timeout_s) bounds it from connect to last byte."""
        import aiohttp
        try:
            session = self._session()
            async with session.post(self.url, data=_dumps(body), headers=headers, proxy=self._proxy) as resp:
                status, content = resp.status, await resp.read()
        except aiohttp.ClientConnectorError as err:   # refused, no route, DNS: before anything was sent
            raise _Failed(f"APIConnectionError: cannot connect to {self.base}: {err}", retry=True,
                          infrastructure=_refused(err)) from err
        except asyncio.TimeoutError as err:
            raise _Failed(f"Timeout: no complete answer within timeout_s={self.timeout_s:g} s", retry=True) from err
        except aiohttp.ClientError as err:
            raise _Failed(f"APIConnectionError: {type(err).__name__}: {err}", retry=True) from err
        text = lambda n: content[:n].decode("utf-8", "replace")   # noqa: E731
        if status != 200:
            if status in _INFRA_STATUS:
                raise _Failed(f"HTTP {status} from {self.base}: {text(300)}", retry=False, infrastructure=True)
            raise _Failed(f"HTTP {status} from {self.base}: {text(300)}", retry=status in _RETRY_STATUS or status >= 500,
                          retry_after=_seconds(resp.headers.get("retry-after")))
        try:
            data = json.loads(content)
            choices = data["choices"]
            if not isinstance(choices, list) or not choices:
                raise ValueError("no choices")
        except (ValueError, KeyError, TypeError) as err:
            raise _Failed(f"BadResponse: status 200 but not a chat completion ({type(err).__name__}: {err}; "
                          f"content-type {resp.headers.get('content-type', '?')}): {text(120)!r}", retry=True) from err
        return _parse(data)


def _env_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (HTTP_PROXY / HTTPS_PROXY / ALL_PROXY, minus NO_PROXY)."""
    import urllib.request
    parts = urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass_environment(parts.hostname):
        return None
    proxies = urllib.request.getproxies_environment()
    return proxies.get(parts.scheme) or proxies.get("all") or None


def _dumps(body: dict[str, Any]) -> bytes:
    """The JSON body as httpx and the openai SDK send it (compact, UTF-8; NaN is refused)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _close_session(session: Any, loop: asyncio.AbstractEventLoop) -> None:
    """Close an aiohttp session from any thread (a backend's finalizer or close())."""
    if session.closed or loop.is_closed():
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        loop.create_task(session.close())
        return
    fut = asyncio.run_coroutine_threadsafe(session.close(), loop)
    if loop.is_running():
        try:
            fut.result(timeout=2)
        except Exception:  # noqa: BLE001 - closing is best effort
            pass


def _refused(err: BaseException) -> bool:
    """A refused connection (no server listening), anywhere in the exception chain."""
    seen: set[int] = set()
    x: BaseException | None = err
    while x is not None and id(x) not in seen:
        seen.add(id(x))
        text = str(x).lower()
        if isinstance(x, ConnectionRefusedError) or "refused" in text or "all connection attempts failed" in text \
                or getattr(x, "errno", None) == 111:
            return True
        x = x.__cause__ or x.__context__
    return False


def _parse(data: dict[str, Any]) -> Got:
    """A chat-completion JSON body -> its samples, finish reasons, reasoning and token counts."""
    got = Got()
    for c in data["choices"]:
        msg = c.get("message") or {}
        got.texts.append(msg.get("content") or "")
        got.finish.append(c.get("finish_reason"))
        got.reasoning.append(msg.get("reasoning_content") or msg.get("reasoning") or None)
    usage = data.get("usage") or {}
    got.tokens_in = int(usage.get("prompt_tokens") or 0)
    got.tokens_out = int(usage.get("completion_tokens") or 0)
    details = usage.get("completion_tokens_details") or {}
    if details.get("reasoning_tokens") is not None:
        got.reasoning_tokens = int(details["reasoning_tokens"])
    return got
