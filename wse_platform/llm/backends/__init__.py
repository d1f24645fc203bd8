"""Backends of the one LLM call path; heavy runtimes are imported only when used."""
from __future__ import annotations

from typing import TYPE_CHECKING

from wse_platform.llm.backends.base import (Backend, BackendCall, BackendResponse, BackendUnavailable, OnResult,
                                            attempt_seed, sample_seed)
from wse_platform.llm.backends.scripted import ScriptedBackend

if TYPE_CHECKING:
    from wse_platform.config import ModelConfig, Settings

__all__ = ["Backend", "BackendCall", "BackendResponse", "BackendUnavailable", "OnResult", "ScriptedBackend",
           "attempt_seed", "make_backend", "sample_seed"]


def make_backend(name: str, model: "ModelConfig", settings: "Settings") -> Backend:
    """Build the runtime for config model `name` (one instance per model name per client)."""
    limit = max(1, int(settings.concurrency.get(model.backend, 1)))
    if model.backend == "embedded":
        from wse_platform.llm.backends.embedded import EmbeddedBackend
        return EmbeddedBackend(model)
    if model.backend == "litellm":
        from wse_platform.llm.backends.openai_http import OpenAIHTTPBackend, is_direct
        if is_direct(model):  # one OpenAI-compatible server: no litellm (CPU per call, import time)
            return OpenAIHTTPBackend(model, max_concurrency=limit)
        from wse_platform.llm.backends.litellm_backend import LiteLLMBackend
        return LiteLLMBackend(model, max_concurrency=limit)
    if model.backend == "vllm":
        from wse_platform.llm.backends.vllm_backend import VLLMBackend
        return VLLMBackend(model)
    raise ValueError(f"model {name!r}: unknown backend {model.backend!r}")  # pragma: no cover (config validates)
