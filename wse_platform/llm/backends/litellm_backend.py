"""Any provider litellm speaks (OpenAI, Anthropic, Gemini, OpenRouter, a vLLM server...).

Calls run on one background asyncio loop (litellm's async HTTP clients must stay on
one loop) with a per-backend semaphore. Rate limits, timeouts, connection errors and
5xx are retried with exponential backoff; other provider errors become failed
responses. The API key is read from the environment variable the config names, at
call time, and is never stored, logged or cached.

Structured outputs (`extra.structured_output`): "json_schema" (OpenAI-style
`response_format`), "json_object_schema" (`{"type": "json_object", "schema": ...}`,
as llama.cpp's server accepts) or "prompt" (schema in the prompt, then parse). The
default is "json_schema" where litellm says the model supports it (and for
`hosted_vllm/`), else "prompt". Closed choices are always asked for in the prompt.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from wse_platform.llm.backends.base import Backend, BackendCall, BackendResponse, OnResult, sample_seed

if TYPE_CHECKING:
    from wse_platform.config import ModelConfig

log = logging.getLogger("wse_platform.llm")

_MIN_P_PROVIDERS = ("openai/", "hosted_vllm/", "openrouter/", "together_ai/", "fireworks_ai/")
_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch at import
    import litellm
    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


def _background_loop() -> asyncio.AbstractEventLoop:
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="wse-litellm-loop", daemon=True).start()
            _LOOP = loop
        return _LOOP


def structured_mode(model: "ModelConfig", litellm: Any) -> str:
    mode = model.extra.get("structured_output")
    if mode is not None:
        if mode not in ("json_schema", "json_object_schema", "prompt"):
            raise ValueError(f"models.{model.model_id}.extra.structured_output: {mode!r} is not one of "
                             "json_schema, json_object_schema, prompt")
        return mode
    if model.model_id.startswith("hosted_vllm/") or litellm.supports_response_schema(model=model.model_id):
        return "json_schema"
    return "prompt"


def with_instruction(messages: list[dict[str, str]], instruction: str) -> list[dict[str, str]]:
    """Append an output instruction to the system message (adding one if there is none)."""
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        out[0]["content"] = out[0].get("content", "") + "\n\n" + instruction
    else:
        out.insert(0, {"role": "system", "content": instruction})
    return out


def build_kwargs(call: BackendCall, mode: str, model_id: str) -> dict[str, Any]:
    """litellm.acompletion arguments for one call (no credentials: those are added per call)."""
    s = call.sampling
    messages = call.messages
    kwargs: dict[str, Any] = {"model": model_id, "n": call.n, "seed": call.seed}
    if call.json_schema is not None:
        name = str(call.json_schema.get("title") or "output")[:64]
        if mode == "json_schema":
            kwargs["response_format"] = {"type": "json_schema",
                                         "json_schema": {"name": name, "schema": call.json_schema}}
        elif mode == "json_object_schema":
            kwargs["response_format"] = {"type": "json_object", "schema": call.json_schema}
        else:
            messages = with_instruction(messages, "Reply with only one JSON object (no prose, no code fence) "
                                        "valid against this JSON schema:\n" + json.dumps(call.json_schema))
    elif call.choices is not None:
        messages = with_instruction(messages, "Reply with exactly one of: " + ", ".join(call.choices)
                                    + ". Nothing else.")
    kwargs["messages"] = messages
    for key in ("temperature", "top_p", "max_tokens"):
        if getattr(s, key) is not None:
            kwargs[key] = getattr(s, key)
    if s.min_p is not None:
        if model_id.startswith(_MIN_P_PROVIDERS):
            kwargs["extra_body"] = {"min_p": s.min_p}
        else:
            log.debug("min_p is not supported by %s; not sent", model_id)
    return kwargs


class LiteLLMBackend(Backend):
    name = "litellm"

    def __init__(self, model: "ModelConfig", max_concurrency: int = 8):
        self.model = model
        self.litellm = _litellm()
        self.mode = structured_mode(model, self.litellm)
        self.max_concurrency = max_concurrency
        self.max_retries = int(model.extra.get("max_retries", 5))
        self.retry_base_s = float(model.extra.get("retry_base_s", 1.0))
        self.timeout_s = float(model.extra.get("timeout_s", 600.0))
        self.n_calls = 0
        self._sem: asyncio.Semaphore | None = None
        self._retryable = tuple(getattr(self.litellm, n) for n in (
            "RateLimitError", "Timeout", "APIConnectionError", "InternalServerError", "ServiceUnavailableError",
            "BadGatewayError") if hasattr(self.litellm, n))

    def cache_namespace(self) -> str:
        return f"litellm:{self.mode}"  # the structured-output mode changes what is asked

    # ---- credentials: read per call, never kept -------------------------------------------
    def _auth(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.model.api_base:
            out["api_base"] = self.model.api_base
        if self.model.api_key_env:
            key = os.environ.get(self.model.api_key_env)
            if not key:
                raise LookupError(f"environment variable {self.model.api_key_env} (API key for "
                                  f"{self.model.model_id}) is not set")
            out["api_key"] = key
        elif self.model.api_base:
            out["api_key"] = "no-key"  # OpenAI-compatible local servers need some key
        return out

    def _scrub(self, text: str) -> str:
        key = os.environ.get(self.model.api_key_env) if self.model.api_key_env else None
        return text.replace(key, "***") if key else text

    # ---- batch ---------------------------------------------------------------------------
    def generate(self, calls: list[BackendCall], on_result: OnResult | None = None) -> list[BackendResponse]:
        fut: Future = asyncio.run_coroutine_threadsafe(self._batch(calls, on_result), _background_loop())
        return fut.result()

    async def _batch(self, calls: list[BackendCall], on_result: OnResult | None) -> list[BackendResponse]:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.max_concurrency)

        async def run(i: int, call: BackendCall) -> BackendResponse:
            async with self._sem:
                resp = await self._call(call)
            if on_result is not None:
                on_result(i, resp)
            return resp

        return list(await asyncio.gather(*(run(i, c) for i, c in enumerate(calls))))

    async def _call(self, call: BackendCall) -> BackendResponse:
        t0 = time.monotonic()
        try:
            kwargs = build_kwargs(call, self.mode, self.model.model_id)
            try:
                texts, tin, tout, cost = await self._request(kwargs)
            except self.litellm.BadRequestError:
                if call.n == 1:
                    raise
                texts, tin, tout, cost = [], 0, 0, 0.0  # provider rejects n: one request per sample
            for k in range(len(texts), call.n):  # some servers ignore n: fill the missing samples
                one = dict(kwargs, n=1, seed=sample_seed(call.seed, k))
                more, tin_k, tout_k, cost_k = await self._request(one)
                texts += more[:1]
                tin, tout = tin or tin_k, tout + tout_k
                cost = None if cost is None or cost_k is None else cost + cost_k
        except Exception as err:  # after retries: a failed response, never an exception
            return BackendResponse(error=self._scrub(f"{type(err).__name__}: {err}"),
                                   latency_s=time.monotonic() - t0)
        return BackendResponse(texts=texts[: call.n], tokens_in=tin, tokens_out=tout,
                               latency_s=time.monotonic() - t0, cost_usd=cost)

    async def _request(self, kwargs: dict[str, Any]) -> tuple[list[str], int, int, float | None]:
        delay = self.retry_base_s
        for attempt in range(self.max_retries + 1):
            try:
                self.n_calls += 1
                resp = await self.litellm.acompletion(**kwargs, **self._auth(), num_retries=0,
                                                      timeout=self.timeout_s)
                break
            except self._retryable as err:
                if attempt >= self.max_retries:
                    raise
                log.info("litellm %s: %s; retrying in %.1fs", self.model.model_id, type(err).__name__, delay)
                await asyncio.sleep(delay * (1 + random.random() * 0.25))
                delay = min(delay * 2, 60.0)
            except self.litellm.APIError as err:
                if getattr(err, "status_code", 0) < 500 or attempt >= self.max_retries:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 60.0)
        texts = [(c.message.content or "") for c in resp.choices]
        usage = getattr(resp, "usage", None)
        tin = int(getattr(usage, "prompt_tokens", 0) or 0)
        tout = int(getattr(usage, "completion_tokens", 0) or 0)
        try:
            cost = float(self.litellm.completion_cost(completion_response=resp))
        except Exception:  # unknown price (local servers, unmapped models)
            cost = None
        return texts, tin, tout, cost
