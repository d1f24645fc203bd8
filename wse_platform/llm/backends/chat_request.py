"""What both HTTP backends (litellm_backend.py, openai_http.py) share about an OpenAI-style chat
request: the structured-output mode, the request body of one call, the API key and the scrubbing of
error texts. One definition each, so the two paths send the same body and share the cache.

Structured outputs (`extra.structured_output`): "json_schema" (OpenAI-style `response_format`),
"json_object_schema" (`{"type": "json_object", "schema": ...}`, as llama.cpp's server accepts) or
"prompt" (schema in the prompt, then parse). The default is "json_schema" where the model map says
the model supports it (and for `hosted_vllm/`), else "prompt". Closed choices are always asked for
in the prompt.
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from wse_platform.llm.backends.base import BackendCall
from wse_platform.redact import redact_text

if TYPE_CHECKING:
    from wse_platform.config import ModelConfig

log = logging.getLogger("wse_platform.llm")

MODES = ("json_schema", "json_object_schema", "prompt")
_MIN_P_PROVIDERS = ("openai/", "hosted_vllm/", "openrouter/", "together_ai/", "fireworks_ai/")


def structured_mode(model: "ModelConfig", supports_response_schema: Callable[[str], bool]) -> str:
    """The configured mode, else "json_schema" where `supports_response_schema(model_id)` (or on
    `hosted_vllm/`), else "prompt". Part of the cache namespace."""
    mode = model.extra.get("structured_output")
    if mode is not None:
        if mode not in MODES:
            raise ValueError(f"models.{model.model_id}.extra.structured_output: {mode!r} is not one of "
                             + ", ".join(MODES))
        return mode
    if model.model_id.startswith("hosted_vllm/") or supports_response_schema(model.model_id):
        return "json_schema"
    return "prompt"


def api_key(model: "ModelConfig", default: str | None = "no-key") -> str | None:
    """The key from the environment variable `api_key_env` names (checked before every call, never
    logged); `default` when the model names none (OpenAI-compatible local servers need some key)."""
    if not model.api_key_env:
        return default
    key = os.environ.get(model.api_key_env)
    if not key:
        raise LookupError(f"environment variable {model.api_key_env} (API key for "
                          f"{model.model_id}) is not set")
    return key


def scrub(model: "ModelConfig", text: str) -> str:
    """An error text without the model's API key or any credential-looking string."""
    key = os.environ.get(model.api_key_env) if model.api_key_env else None
    return redact_text(text.replace(key, "***") if key else text) or text


def with_instruction(messages: list[dict[str, str]], instruction: str) -> list[dict[str, str]]:
    """Append an output instruction to the system message (adding one if there is none)."""
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        out[0]["content"] = out[0].get("content", "") + "\n\n" + instruction
    else:
        out.insert(0, {"role": "system", "content": instruction})
    return out


def build_kwargs(call: BackendCall, mode: str, model_id: str) -> dict[str, Any]:
    """The request of one call (litellm.acompletion arguments; no credentials: those are added per call)."""
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
