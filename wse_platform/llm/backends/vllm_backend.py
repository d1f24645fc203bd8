"""Offline vLLM (GPU hosts, optional extra `[vllm]`, imported only when a vllm model is used).

The whole batch goes to the engine in one `LLM.chat` call with one `SamplingParams`
per conversation, so vLLM schedules it with continuous batching and shares prompt
prefixes (`enable_prefix_caching=True`). Structured outputs use vLLM >= 0.12's
`StructuredOutputsParams(json=...)` / `(choice=[...])` (the old guided-decoding
fields were removed in 0.12). `extra` keys go to `vllm.LLM(...)`, except the
chat-template ones (e.g. `enable_thinking`) which go to `chat_template_kwargs`.
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from wse_platform.llm.backends.base import Backend, BackendCall, BackendResponse, BackendUnavailable, OnResult
from wse_platform.llm.reasoning import chat_template_kwargs

if TYPE_CHECKING:
    from wse_platform.config import ModelConfig

CHAT_TEMPLATE_KEYS = ("enable_thinking",)
_CLIENT_KEYS = ("structured_output", "max_retries", "retry_base_s", "timeout_s", "n_ctx", "n_threads")
_ENGINES: dict[tuple[str, str | None, str | None], Any] = {}
_ENGINE_LOCK = threading.Lock()


def _vllm() -> Any:
    try:
        import vllm
    except ImportError as err:
        raise BackendUnavailable("the vllm backend needs vLLM >= 0.12 on a GPU host: "
                                 "pip install 'wse-platform[vllm]'") from err
    return vllm


def engine_kwargs(model: "ModelConfig") -> dict[str, Any]:
    """Arguments of `vllm.LLM(...)` for this model config."""
    kwargs: dict[str, Any] = {"model": model.model_id, "enable_prefix_caching": True}
    if model.revision:
        kwargs["revision"] = model.revision
    if model.quantization:
        kwargs["quantization"] = model.quantization
    kwargs.update({k: v for k, v in model.extra.items() if k not in CHAT_TEMPLATE_KEYS and k not in _CLIENT_KEYS})
    return kwargs


def sampling_params(call: BackendCall, vllm: Any) -> Any:
    """One `SamplingParams` for a call (seeded per attempt; n samples from that seed)."""
    from vllm.sampling_params import StructuredOutputsParams

    s = call.sampling
    kwargs: dict[str, Any] = {"n": call.n, "seed": call.seed}
    for key in ("temperature", "top_p", "min_p", "max_tokens"):
        if getattr(s, key) is not None:
            kwargs[key] = getattr(s, key)
    if call.json_schema is not None:
        kwargs["structured_outputs"] = StructuredOutputsParams(json=call.json_schema)
    elif call.choices is not None:
        kwargs["structured_outputs"] = StructuredOutputsParams(choice=list(call.choices))
    return vllm.SamplingParams(**kwargs)


class VLLMBackend(Backend):
    name = "vllm"

    def __init__(self, model: "ModelConfig"):
        _vllm()  # fail at setup, with the fix, if vLLM is not installed
        self.model = model
        self.n_calls = 0
        self.chat_template_kwargs = {k: model.extra[k] for k in CHAT_TEMPLATE_KEYS if k in model.extra}
        self.reasoning: str | None = getattr(model, "reasoning", None)
        self.chat_template_kwargs.update(chat_template_kwargs(self.reasoning))  # `reasoning` wins over extra

    def cache_namespace(self) -> str:
        return "vllm:fr" + (f":reasoning={self.reasoning}" if self.reasoning else "")  # fr: finish reasons cached

    def engine(self) -> Any:
        vllm = _vllm()
        key = (self.model.model_id, self.model.revision, self.model.quantization)
        with _ENGINE_LOCK:
            if key not in _ENGINES:
                _ENGINES[key] = vllm.LLM(**engine_kwargs(self.model))
            return _ENGINES[key]

    def generate(self, calls: list[BackendCall], on_result: OnResult | None = None) -> list[BackendResponse]:
        vllm = _vllm()
        llm = self.engine()
        t0 = time.monotonic()
        try:
            params = [sampling_params(c, vllm) for c in calls]
            self.n_calls += 1
            outputs = llm.chat([c.messages for c in calls], sampling_params=params, use_tqdm=False,
                               chat_template_kwargs=self.chat_template_kwargs or None)
        except Exception as err:  # one engine error fails the batch's calls, not the run
            out = [BackendResponse(error=f"{type(err).__name__}: {err}") for _ in calls]
        else:
            latency = (time.monotonic() - t0) / max(len(calls), 1)  # engine time shared by the batch
            out = [BackendResponse(texts=[o.text for o in ro.outputs],
                                   tokens_in=len(ro.prompt_token_ids or []),
                                   tokens_out=sum(len(o.token_ids) for o in ro.outputs),
                                   latency_s=latency,
                                   meta={"finish_reasons": [getattr(o, "finish_reason", None) for o in ro.outputs]})
                   for ro in outputs]
        for i, resp in enumerate(out):
            if on_result is not None:
                on_result(i, resp)
        return out
