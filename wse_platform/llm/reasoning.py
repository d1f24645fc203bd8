"""`reasoning: off | on | <effort>` mapped to what each backend understands.

- vLLM offline: `chat_template_kwargs={"enable_thinking": ...}` (Qwen3-style templates).
- litellm to a vLLM / llama.cpp / other OpenAI-compatible server (`hosted_vllm/...`, or any
  model with `api_base`): the same flag in the request body (`extra_body`), plus
  `reasoning_effort` there when an effort is named.
- litellm to an API provider: litellm's `reasoning_effort` (`on` = medium). `off` sends
  nothing: most providers' reasoning models cannot switch it off, and a non-reasoning model
  rejects the parameter; pick a non-reasoning model or the lowest effort instead. OpenRouter
  (`openrouter/...`) is the exception: `off` sends its reasoning switch, a zero reasoning budget.
- embedded (llama.cpp): not mapped (the shipped model does not think); think blocks are still
  removed from answers.
Unset (`None`) sends nothing: the model's default. The mode is part of the model's identity and
of every cache key, so changing it re-runs what depends on the model.
"""
from __future__ import annotations

from typing import Any

REASONING_MODES = ("off", "on", "minimal", "low", "medium", "high")


def chat_template_kwargs(mode: str | None) -> dict[str, Any]:
    return {} if mode is None else {"enable_thinking": mode != "off"}


def is_openai_compatible_server(model_id: str, api_base: Any) -> bool:
    return model_id.startswith("hosted_vllm/") or (bool(api_base) and model_id.startswith("openai/"))


def litellm_kwargs(model_id: str, mode: str | None, api_base: Any) -> dict[str, Any]:
    """Arguments added to `litellm.acompletion` for this reasoning mode."""
    if mode is None:
        return {}
    if is_openai_compatible_server(model_id, api_base):
        body: dict[str, Any] = {"chat_template_kwargs": chat_template_kwargs(mode)}
        if mode not in ("off", "on"):
            body["reasoning_effort"] = mode
        return {"extra_body": body}
    if mode == "off":
        # OpenRouter accepts a switch for every model: a zero reasoning budget (100-Endings Table 8)
        return {"extra_body": {"reasoning": {"max_tokens": 0}}} if model_id.startswith("openrouter/") else {}
    return {"reasoning_effort": "medium" if mode == "on" else mode}
